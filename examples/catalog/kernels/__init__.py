"""Example kernels (CUDA C++, PTX, Triton) that the catalog declares."""
