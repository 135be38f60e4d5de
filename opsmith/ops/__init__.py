"""Ops that ship with opsmith, built with its public API: ``opsmith.ops.rmsnorm`` (RMSNorm as a fused Triton,
CUDA C++ or CuTe DSL op, with ``nn.Module`` drop-ins). Importing this package registers nothing; each op
registers on first use."""
