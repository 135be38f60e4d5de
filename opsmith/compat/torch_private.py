"""Every private torch name opsmith reads, in one place: which torch versions have it and what replaces it.

opsmith supports torch 2.11 to 2.14 (pyproject's bounds: the versions the suite runs on). A private name can move
in any release, so the code asks this module instead of importing it where it is used, and ``PRIVATE`` says for
each name what we know: the versions it was seen in, and what opsmith does where it is missing.
(``torch._C._cuda_getCurrentRawStream`` is read with a fallback where it is used: CPU builds lack it.)
``tests/test_torch_private.py`` resolves every entry on the installed torch, so a torch that drops one fails there,
by name, before anything that uses it.

The C++ flags are torch's own: ``cxx_flags()`` asks ``torch.utils.cpp_extension`` what it compiles an extension
with (the language standard above all: torch 2.14's headers need C++20, and ``-std=c++17`` fails in them).
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import inspect
import os
import shlex
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "PRIVATE",
    "Private",
    "cxx_flags",
    "fx_tracing_cleared",
    "resolve",
]


@dataclass(frozen=True)
class Private:
    """A private torch name: ``module`` and ``attr`` (dotted, read from the module), what opsmith uses it for, the
    versions it was seen in, and what opsmith does where it is missing (None: nothing; opsmith needs it)."""

    module: str
    attr: str
    used_for: str
    seen_in: str
    missing: str | None = None


TESTED = "2.11, 2.13, 2.14"

# fmt: off
PRIVATE: tuple[Private, ...] = (
    Private("torch.fx._symbolic_trace", "_is_fx_tracing_flag", "cleared while compile='auto' times the reference "
            "inside AOTAutograd's trace", "2.11, 2.13", "2.14 keeps the flag thread-local: _set_is_fx_tracing"),
    Private("torch.fx._symbolic_trace", "_set_is_fx_tracing", "the same flag, from 2.14", "2.14",
            "<= 2.13 keeps it in the module global _is_fx_tracing_flag"),
    Private("torch.utils.cpp_extension", "_write_ninja_file_to_build_library", "the flags torch compiles an "
            "extension with (cxx_flags)", TESTED, "-std=c++20, -fPIC and include_paths()"),
    Private("torch.export._trace", "custom_triton_ops_decomposition_disabled", "torch.export keeps custom Triton ops "
            "whole: neither a reference nor a kernel's decomposition is traced", TESTED, "every trace decomposes"),
    Private("torch._library.triton", "triton_ops_to_kernels", "the Triton kernels a torch.library.triton_op calls",
            TESTED, "no Triton op is known to torch"),
    Private("torch._higher_order_ops.triton_kernel_wrap", "kernel_side_table", "the kernels behind Inductor's "
            "triton_kernel_wrapper_functional nodes", TESTED),
    Private("torch._higher_order_ops.triton_kernel_wrap", "get_mutated_tensors", "which arguments of a Triton kernel "
            "it writes (answered by opsmith's own analysis)", TESTED),
    Private("torch._higher_order_ops.auto_functionalize", "auto_functionalized_v2", "the node an op that writes an "
            "input becomes in a compiled graph", TESTED),
    Private("torch._inductor.utils", "get_donated_idxs", "which saved tensors the backward may overwrite", TESTED),
    Private("torch._inductor.custom_graph_pass", "CustomGraphPass", "the post-grad pass that reinplaces saved "
            "tensors", TESTED),
    Private("torch._inductor.config", "post_grad_custom_post_pass", "where that pass is installed", TESTED),
    Private("torch._subclasses.fake_tensor", "FakeTensorMode", "fake tensors for the derived fake and check", TESTED),
    Private("torch._subclasses.fake_tensor", "unset_fake_temporarily", "real tensors while compile='auto' times",
            TESTED),
    Private("torch._subclasses.functional_tensor", "FunctionalTensorMode", "the op's rule under functionalization",
            TESTED),
    Private("torch.utils._python_dispatch", "_disable_current_modes", "real tensors while compile='auto' times",
            TESTED),
    Private("torch._ops", "OpOverload", "the base class of an opsmith op", TESTED),
    Private("torch._ops", "_OpNamespace", "refusing op names that shadow a namespace's attributes", TESTED),
    Private("torch._C", "_after_autograd_keyset", "the native autograd's redispatch below Autograd", TESTED),
    Private("torch._C", "_dispatch_has_kernel_for_dispatch_key", "whether an op differentiates (check)", TESTED),
    Private("torch._C", "_increment_version", "bumping the version of a tensor an op wrote", TESTED),
    Private("torch._C", "parse_schema", "the derived schema, parsed as torch parses it", TESTED),
    Private("torch._dynamo", "reset", "forgetting compiled graphs between check's rows", TESTED),
    Private("torch.distributed.tensor._api", "DTensor._op_dispatcher.sharding_propagator.op_to_schema_info",
            "hashing an optional output's flag into DTensor's sharding cache", TESTED),
)
# fmt: on


def resolve(module: str, attr: str) -> Any:
    """``module.attr`` (``attr`` may be dotted). Raises AttributeError/ImportError naming the entry of ``PRIVATE``
    when the installed torch lacks it."""
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


@contextlib.contextmanager
def fx_tracing_cleared() -> Iterator[None]:
    """FX's "symbolic tracing in progress" flag cleared for the block, restored after: torch <= 2.13 keeps it in a
    module global, 2.14 in a thread-local behind _get/_set functions."""
    symbolic = importlib.import_module("torch.fx._symbolic_trace")
    setter = getattr(symbolic, "_set_is_fx_tracing", None)
    if setter is not None:
        before = symbolic._get_is_fx_tracing()
        setter(False)
        try:
            yield
        finally:
            setter(before)
        return
    before = symbolic._is_fx_tracing_flag
    symbolic._is_fx_tracing_flag = False
    try:
        yield
    finally:
        symbolic._is_fx_tracing_flag = before


# Flags torch's writer adds that name its own extension module; a library sets its own.
_NOT_OURS = ("-DTORCH_EXTENSION_NAME=",)


@functools.cache
def cxx_flags() -> tuple[str, ...]:
    """The flags ``torch.utils.cpp_extension`` compiles a C++ extension of the installed torch with: the language
    standard, the ABI and API defines, torch's and Python's include directories. Read from the build file torch
    writes for ``load()`` (no compiler runs); the module name define is left to the caller."""
    from torch.utils import cpp_extension as ce

    writer = getattr(ce, "_write_ninja_file_to_build_library", None)
    if writer is not None:
        try:
            return tuple(f for f in _writer_cflags(writer) if not f.startswith(_NOT_OURS))
        except (TypeError, ValueError, OSError):  # a changed signature or file format: the fallback below
            pass
    flags = ["-std=c++20", "-fPIC", *(f"-I{d}" for d in ce.include_paths())]
    abi = getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", None)
    return tuple(flags if abi is None else [*flags, f"-D_GLIBCXX_USE_CXX11_ABI={int(abi)}"])


def _writer_cflags(writer: Any) -> list[str]:
    params = inspect.signature(writer).parameters
    with tempfile.TemporaryDirectory(prefix="opsmith-flags-") as d:
        source = os.path.join(d, "ops.cpp")
        open(source, "w").close()
        args: dict[str, Any] = {"path": os.path.join(d, "build.ninja"), "name": "opsmith_native", "sources": [source],
                                "extra_cflags": [], "extra_cuda_cflags": [], "extra_sycl_cflags": [],
                                "extra_ldflags": [], "extra_include_paths": [], "with_cuda": False,
                                "with_sycl": False, "is_standalone": False}  # fmt: skip
        missing = [p for p in params if p not in args and params[p].default is inspect.Parameter.empty]
        if missing:
            raise TypeError(f"unknown parameters {missing}")
        writer(**{k: v for k, v in args.items() if k in params})
        with open(args["path"]) as f:
            text = f.read()
    for line in text.splitlines():
        if line.startswith("cflags = "):
            return shlex.split(line.removeprefix("cflags = "))
    raise ValueError("no cflags line in torch's build file")
