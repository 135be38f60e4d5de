"""The torch glue: the one registration path that makes a record a ``torch.library`` op.

- ``registration``: ``Op`` and the one path every flavor's kernel takes into torch.library.
- ``variants``: the kernels of one op (one per tuning config and call specialization), compiled and loaded.
- ``eager``, ``fake``, ``launch_code``: the call plan printed as Python (real, fake and meta tensors, the launch).
- ``autograd``: a declared ``Backward`` registered with torch's autograd.
- ``schema``, ``reference``: the op's torch schema; its CPU reference under the op's guards.
"""
