"""What opsmith tells Inductor about its ops, so a compiled model is never slower for using them.

- ``writes``: a Triton kernel's writes are its declaration's, not Inductor's analysis of the kernel;
- ``donated``: a saved activation an op overwrites in a backward graph is overwritten in place, not cloned;
- ``floats``: float arguments reach a Triton kernel as fp32 (an entry kernel casting them), as Triton passes them;
- ``choice``: ``compile="kernel" | "reference" | "auto"``, what an op traces as under torch.compile.
"""
