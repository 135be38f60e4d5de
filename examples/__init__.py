"""Examples that use opsmith: the demo, the example catalog, a deployment and a multi-GPU model.

Not part of the installed ``opsmith`` package: run them from a clone's root (``python -m examples.demo``).
"""
