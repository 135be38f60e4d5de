"""What opsmith tells Inductor about its ops, so a compiled model is never slower for using them.

- ``donated``: a saved activation an op overwrites in a backward graph is overwritten in place, not cloned.
"""
