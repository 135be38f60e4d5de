"""opsmith: one declaration turns a GPU kernel into a first-class PyTorch operator.

    import opsmith as ok
    ok.cuda_kernel_op("myns::relu", ok.KernelSpec(kernel_source=SRC, kernel_name="my_relu",
        inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", shape=ok.SameAs("x"))],
        extras=[ok.Numel("x")], geometry=ok.Elementwise(block=(256,))))
    torch.ops.myns.relu(x)

Importing opsmith registers nothing, touches no GPU and imports torch only when a name is first used.
"""

from typing import TYPE_CHECKING

from ._version import __version__

# Public names resolve on first use (PEP 562): ``import opsmith`` and the ``opsmith`` command's --help stay
# free of torch (~1.5 s to import); the first ``ok.cuda_kernel_op`` or ``ok.InputDecl`` imports what it needs.
_LAZY = {
    "api": ("cuda_kernel_op", "cute_op", "ptx_op", "triton_op"),
    "checking.harness": ("CheckCase", "CheckReport", "assert_check_passes", "check"),
    "errors": ("CompileError", "DeclarationWarning", "DifferentiationError", "InputError", "LaunchError", "OpsmithError",
               "RegistrationError", "ShardingError", "ShardingWarning", "SpecError", "ToolchainError"),
    "declare.record": ("KernelRecord",),
    "torchlib.registration": ("Op",),
    "declare.spec": ("AtLeast", "AtMost", "Autotune", "Backward", "Buffer", "Config", "Const", "Custom", "Dim", "DimSize",
             "Divisible", "DtypeOf", "Elementwise", "Grid", "InputDecl", "KernelSpec", "Numel", "OneOf", "OutputDecl", "Present",
             "ReduceDims", "Reduction", "SameAs", "ScalarInput", "Size", "Step", "Stride", "TuneDim"),
}  # fmt: skip
_HOME = {name: module for module, names in _LAZY.items() for name in names}

if TYPE_CHECKING:  # what type checkers and IDEs read
    from .api import cuda_kernel_op, cute_op, ptx_op, triton_op
    from .checking.harness import CheckCase, CheckReport, assert_check_passes, check
    from .declare.record import KernelRecord
    from .declare.spec import (
        AtLeast,
        AtMost,
        Autotune,
        Backward,
        Buffer,
        Config,
        Const,
        Custom,
        Dim,
        DimSize,
        Divisible,
        DtypeOf,
        Elementwise,
        Grid,
        InputDecl,
        KernelSpec,
        Numel,
        OneOf,
        OutputDecl,
        Present,
        ReduceDims,
        Reduction,
        SameAs,
        ScalarInput,
        Size,
        Step,
        Stride,
        TuneDim,
    )
    from .errors import (
        CompileError,
        DeclarationWarning,
        DifferentiationError,
        InputError,
        LaunchError,
        OpsmithError,
        RegistrationError,
        ShardingError,
        ShardingWarning,
        SpecError,
        ToolchainError,
    )
    from .torchlib.registration import Op


def __getattr__(name: str) -> object:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module 'opsmith' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_HOME))


__all__ = [
    "AtLeast",
    "AtMost",
    "Autotune",
    "Backward",
    "Buffer",
    "CheckCase",
    "CheckReport",
    "CompileError",
    "Config",
    "Const",
    "Custom",
    "DeclarationWarning",
    "DifferentiationError",
    "Dim",
    "DimSize",
    "Divisible",
    "DtypeOf",
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
    "Present",
    "ReduceDims",
    "Reduction",
    "RegistrationError",
    "SameAs",
    "ScalarInput",
    "ShardingError",
    "ShardingWarning",
    "Size",
    "SpecError",
    "Step",
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
