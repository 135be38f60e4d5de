"""The kernels behind ``opsmith.ops``: plain CUDA C++, Triton and CuTe DSL sources, read by the ops that
declare them."""
