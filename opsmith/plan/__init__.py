"""The call plan: a kernel record lowered once, at registration, into the ordered steps of one call.

- ``lowering``: the record turned into ``steps`` (the plan's step types and limits).
- ``layout``: which tensors a kernel can address as they are, and what is copied or refused.
- ``guards``: the refusals the generated code raises, worded once.
- ``backward_program``: a backward written as data (``Buffer``/``Step``), checked against the record.

Every path prints or generates from the plan: the eager and fake Python (``torchlib``), the native C++
(``native``), JAX (``jax``).
"""
