"""opsmith: one declaration turns a GPU kernel into a first-class PyTorch operator.

    import opsmith as ok
    ok.cuda_kernel_op("myns::relu", ok.KernelSpec(kernel_source=SRC, kernel_name="my_relu",
        inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", shape=ok.SameAs("x"))],
        extras=[ok.Numel("x")], geometry=ok.Elementwise(block=(256,))))
    torch.ops.myns.relu(x)

Importing opsmith registers nothing and touches no GPU.
"""

from ._version import __version__
from .api import cuda_kernel_op, cute_op, ptx_op, triton_op
from .check import CheckCase, CheckReport, assert_check_passes, check
from .errors import (
    CompileError,
    DifferentiationError,
    InputError,
    LaunchError,
    OpsmithError,
    RegistrationError,
    ShardingError,
    SpecError,
    ToolchainError,
)
from .record import KernelRecord
from .registration import Op
from .spec import (
    AtLeast,
    AtMost,
    Autotune,
    Backward,
    Config,
    Const,
    Custom,
    Dim,
    DimSize,
    Divisible,
    Elementwise,
    Grid,
    InputDecl,
    KernelSpec,
    Numel,
    OneOf,
    OutputDecl,
    ReduceDims,
    Reduction,
    SameAs,
    ScalarInput,
    Stride,
    TuneDim,
)

__all__ = [
    "AtLeast",
    "AtMost",
    "Autotune",
    "Backward",
    "CheckCase",
    "CheckReport",
    "CompileError",
    "Config",
    "Const",
    "Custom",
    "DifferentiationError",
    "Dim",
    "DimSize",
    "Divisible",
    "Elementwise",
    "Grid",
    "InputDecl",
    "InputError",
    "KernelRecord",
    "KernelSpec",
    "LaunchError",
    "Numel",
    "OneOf",
    "Op",
    "OpsmithError",
    "OutputDecl",
    "ReduceDims",
    "Reduction",
    "RegistrationError",
    "SameAs",
    "ScalarInput",
    "ShardingError",
    "SpecError",
    "Stride",
    "ToolchainError",
    "TuneDim",
    "__version__",
    "assert_check_passes",
    "check",
    "cuda_kernel_op",
    "cute_op",
    "ptx_op",
    "triton_op",
]
