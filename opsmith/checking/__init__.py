"""``opsmith check``: one call proves an op correct, compile-ready and stream-safe, or says what is not.

- ``harness``: ``check`` and its report, row by row; ``case``: ``CheckCase`` (the op, inputs, reference).
- ``samples``: shapes solved against the op's preconditions; ``numerics``: the op against its reference;
  ``explain``: why a sample failed; ``sharding``: the derived DTensor rule held to the kernel.
- ``child``: risky rows in a child process (spawned where ``targets`` finds the case again by ``MODULE:NAME``);
  ``sanitize``: the eager GPU checks under compute-sanitizer.
"""
