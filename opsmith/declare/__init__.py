"""The declaration language: what a user writes, checked and resolved into the kernel record.

- ``spec``: the public DSL (``InputDecl``, ``OutputDecl``, ``ScalarInput``, extras, ``Grid``, ``Autotune``, ...).
- ``validate``: each part of a declaration checked on its own at registration.
- ``dims``, ``expr``, ``symbolic``, ``geometry``, ``extras``: named dimensions, size expressions, Python
  functions traced into them, launch geometry, the extra integers a call passes.
- ``signature``, ``mangling``, ``cubin``, ``binding``: the kernel's own parameters (from the compiler, a mangled
  name, a binary) and which declared item fills each.
- ``resolve``: a declaration turned into the record's parts; ``record``: the kernel record itself, plain data
  every backend is generated from; ``fingerprint``: a declaration's identity for re-registration.

Nothing here imports the plan, the torch glue or a flavor: arrows run down (``tests/test_imports.py``).
"""
