"""Kernel flavors. A flavor only compiles and describes its kernel (``KernelSource``); every flavor
reaches torch.library through ``registration.register_kernel_op``."""
