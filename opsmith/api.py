"""The entry points: ``cuda_kernel_op`` (CUDA C++ source), ``ptx_op`` (pre-compiled PTX or cubin),
``triton_op`` (a ``@triton.jit`` kernel) and ``cute_op`` (a CuTe DSL ``@cute.jit`` host function).

All are thin: they wrap the kernel in its flavor's source object and call the one registration path,
``registration.register_kernel_op``. The Triton and CuTe DSL flavors are imported only when used.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .declare.spec import (
    Autotune,
    Backward,
    Extra,
    Geometry,
    InputDecl,
    KernelSpec,
    OutputDecl,
    Requirement,
    ScalarInput,
)
from .errors import SpecError
from .flavors.cuda_cpp import CudaSource
from .flavors.options import parse_options
from .flavors.ptx import PrecompiledSource
from .torchlib.registration import Op, register_kernel_op, static_scalar_refusal

__all__ = ["cuda_kernel_op", "cute_op", "ptx_op", "triton_op"]


def cuda_kernel_op(
    op_name: str,
    spec: KernelSpec,
    *,
    meta_fn: Callable | None = None,
    eager_fn: Callable | None = None,
    schema: str | None = None,
    supports_dynamic_shapes: bool = True,
    backward: Backward | None = None,
    sharding: Callable | str | None = None,
    reference: Callable | None = None,
    native: bool = True,
    compile: str = "kernel",
) -> Op:
    """Register a CUDA C++ kernel, compiled with NVRTC, as the PyTorch op ``op_name`` ("ns::name").

    Declarative: a full ``KernelSpec`` derives the schema, the fake implementation and the eager launch.
    Override rules (checked at registration):
      * ``meta_fn`` given: ``spec.outputs`` may be omitted (``meta_fn`` is the fake implementation).
      * ``eager_fn`` given: ``spec.geometry`` may be omitted (``eager_fn`` is the CUDA implementation; it
        launches with ``op.kernel.launch_args(grid, block, args)``).
      * ``schema`` given: used as is; else derived from inputs/outputs, else inferred from ``meta_fn``'s
        type hints.
    ``supports_dynamic_shapes`` is accepted for compatibility with the seed API; derived fake
    implementations are always symbolic, so dynamic shapes always work.
    ``backward``: how to differentiate the op (a ``Backward``); without one, differentiating through the op
    raises.
    ``sharding``: how the op runs on DTensors, where its declaration does not say (``Grid``/``Custom``
    geometry, ``eager_fn``): a function in ``torch.distributed.tensor.experimental.register_sharding``'s
    format, or "replicate" (run on whole tensors). Otherwise the rule is derived (docs/multi-gpu.md), except
    along axes the declaration cannot justify (an input tied to nothing beside a size taken from a sharded axis),
    which run replicated unless "derive" says to shard them too (``opsmith check``'s sharding row tests it).
    ``reference``: a Python function of the op's arguments computing its result on CPU tensors; it becomes the
    op's CPU kernel (after the op's checks up to the launch, its outputs held to the declared shapes and dtypes),
    so a model using the op runs on CPU, and ``opsmith check`` compares against it when a CheckCase gives none.
    ``native``: False keeps the op on the Python path; by default a native library of its kernels takes over
    once built in the background (``op.serving`` says which serves; docs/native.md).
    ``compile``: what the op is under ``torch.compile``: ``"kernel"`` (its kernel, always), ``"reference"`` (its
    ``reference=``, which Inductor compiles and fuses) or ``"auto"`` (whichever is faster, timed once per shape
    bucket and stored with the tuning decisions; ``opsmith/inductor/choice.py``, docs/performance.md).

    Returns the ``Op``; calling it calls ``torch.ops.<ns>.<name>``. Raises ``SpecError`` (a ValueError)
    for declaration mistakes and ``CompileError`` (a ValueError) with the NVRTC log when the source fails.
    """
    if not isinstance(spec, KernelSpec):
        raise SpecError(op_name, "spec", f"{type(spec).__name__} is not a KernelSpec.", "pass KernelSpec(...).")
    scalars, bools = _template_scalars(op_name, spec)
    source = CudaSource(op_name, spec.kernel_source, spec.kernel_name, std=spec.compile_std,
                        include_paths=spec.include_paths, defines=spec.defines, arch_override=spec.arch_override,
                        target=spec.target, static=_extra_names(spec.extras) | scalars,
                        options=parse_options(op_name, spec.options, "cuda"), bool_slots=bools)  # fmt: skip
    return register_kernel_op(op_name, source, inputs=spec.inputs, outputs=spec.outputs, extras=spec.extras,
                              geometry=spec.geometry, meta_fn=meta_fn, eager_fn=eager_fn, schema=schema,
                              autotune=spec.autotune, backward=backward, index_dtype=spec.index_dtype,
                              param_order=spec.param_order, sharding=sharding, requires=spec.requires,
                              reference=reference, native=native, silence=spec.silence, compile=compile)  # fmt: skip


def _template_scalars(op_name: str, spec: KernelSpec) -> tuple[frozenset[str], frozenset[str]]:
    """(the int and bool scalar inputs named like a ``{NAME}`` template argument, the bool ones among them):
    compiled in per call value. A float one is refused here, before NVRTC's probe of the placeholder says
    something less useful: C++17 has no float template arguments."""
    import string

    try:
        fields = {f for _, f, _, _ in string.Formatter().parse(spec.kernel_name or "") if f}
    except ValueError:
        return frozenset(), frozenset()  # CudaSource names the unbalanced braces
    named = [d for d in spec.inputs or () if isinstance(d, ScalarInput) and d.name in fields]
    if bad := [d.name for d in named if d.py_type not in (int, bool)]:
        raise static_scalar_refusal(op_name, bad)
    return frozenset(d.name for d in named), frozenset(d.name for d in named if d.py_type is bool)


def _extra_names(extras: Sequence | None) -> frozenset[str]:
    """Names of the declared extras: those naming a compile-time parameter are compiled in."""
    return frozenset(n for e in extras or () if isinstance(n := getattr(e, "param", getattr(e, "name", None)), str))


def ptx_op(
    op_name: str,
    ptx: bytes | str,
    kernel_name: str,
    meta_fn: Callable | None = None,
    eager_fn: Callable | None = None,
    *,
    inputs: Sequence[InputDecl | ScalarInput] | None = None,
    outputs: Sequence[OutputDecl] | None = None,
    extras: Sequence[Extra] = (),
    geometry: Geometry | None = None,
    schema: str | None = None,
    supports_dynamic_shapes: bool = True,
    autotune: Autotune | None = None,
    backward: Backward | None = None,
    index_dtype: str = "int32",
    param_order: Sequence[str] | None = None,
    sharding: Callable | str | None = None,
    requires: Sequence[Requirement] = (),
    options: Sequence[str] = (),
    reference: Callable | None = None,
    native: bool = True,
    compile: str = "kernel",
) -> Op:
    """Register a pre-compiled kernel (PTX text or a cubin) as ``op_name``; NVRTC is not involved.

    Takes the same declaration as ``cuda_kernel_op`` minus the source, or the override functions. PTX
    does not say what a pointer points at, so every ``InputDecl`` of a declarative ``ptx_op`` needs
    ``dtype=``; by-value parameter sizes are checked against the PTX entry (or the cubin's parameter
    info). PTX keeps no source names: without ``param_order`` (the declared names in the kernel's order)
    the default convention applies. ``index_dtype`` and ``requires`` as in ``KernelSpec``; ``sharding`` and
    ``reference`` and ``compile`` as in ``cuda_kernel_op``. ``options``: the driver JIT's options for PTX, spelled as for NVRTC: ``-maxrregcount=N``,
    ``-lineinfo`` (``-G`` with ``OPSMITH_DEVICE_DEBUG=1``); options that change the math (``-use_fast_math``)
    belong to the compile that made the PTX and are refused, as is any option for a cubin.
    """
    source = PrecompiledSource(op_name, ptx, kernel_name, options)
    return register_kernel_op(op_name, source, inputs=inputs, outputs=outputs, extras=extras, geometry=geometry,
                              meta_fn=meta_fn, eager_fn=eager_fn, schema=schema, autotune=autotune,
                              backward=backward, index_dtype=index_dtype, param_order=param_order,
                              sharding=sharding, requires=requires, reference=reference, native=native,
                              compile=compile)  # fmt: skip


def triton_op(
    op_name: str,
    kernel: object,
    *,
    inputs: Sequence[InputDecl | ScalarInput],
    outputs: Sequence[OutputDecl],
    geometry: Geometry,
    extras: Sequence[Extra] = (),
    autotune: Autotune | None = None,
    backward: Backward | None = None,
    index_dtype: str = "int32",
    sharding: Callable | str | None = None,
    requires: Sequence[Requirement] = (),
    constexprs: dict[str, int | float | bool | str] | None = None,
    reference: Callable | None = None,
    native: bool = True,
    silence: Sequence[str] = (),
    compile: str = "kernel",
) -> Op:
    """Register a ``@triton.jit`` kernel as ``op_name``, with the same declaration as ``cuda_kernel_op``.

    The kernel's non-constexpr parameters are bound by name (``x`` fills ``x`` or ``x_ptr``; name extras
    with ``name=``) or else follow the calling convention (inputs and scalars, extras, outputs); its
    ``tl.constexpr`` parameters take their values from ``autotune`` configs (or their defaults), or from a
    named extra (``DimSize("x", -1, name="n_cols")``: one compile per distinct value). The geometry gives the grid: ``Elementwise(block=("BLOCK",))`` launches
    ``cdiv(numel, BLOCK)`` programs, ``Reduction`` one program per row, ``Custom(fn)`` returns the grid
    (``fn(inputs, outputs, params)`` receives the config's params). Threads come from ``num_warps``.

    Tensors without a declared dtype get one compile per dtype. Eager calls launch the compiled cubin
    through opsmith's launcher; ``torch.compile`` sees the kernel itself (Inductor can fuse around it), and
    ``torch.export`` keeps the op. With ``TRITON_INTERPRET=1``, CPU tensors run in Triton's interpreter.

    ``index_dtype="int64"`` declares that the kernel's offsets are 64-bit (``tl.program_id(0).to(tl.int64)
    * BLOCK``); with the default "int32" a tensor of more than 2^31 - 1 elements is refused (eagerly, and
    while tracing static shapes; under dynamic shapes Inductor launches the kernel without that check).
    ``requires`` as in ``KernelSpec``; ``sharding``, ``reference`` and ``compile`` as in ``cuda_kernel_op`` (a reference serves
    CPU tensors in place of Triton's interpreter).

    A published kernel is taken as it is: ``@triton.autotune`` over it becomes the op's ``Autotune`` (its
    configs, key, prune_configs_by, reset_to_zero, restore_value, warmup and rep; ``autotune=`` beside it is
    refused), and each ``@triton.heuristics`` value a constexpr computed per call from the call's sizes, by the
    generated code and by native libraries alike (``flavors/triton_decorators.py``). ``constexprs`` gives
    values to constexprs that neither the configs nor the kernel's defaults set: what a caller passes by
    keyword (the matmul tutorial's ``ACTIVATION=""``); a config's own value wins. ``silence`` as in ``KernelSpec``
    (the declaration is checked against the kernel function's source).
    """
    from .flavors.triton import TritonSource
    from .flavors.triton_decorators import unwrap

    kernel, autotune, heuristics = unwrap(op_name, kernel, autotune)
    scalars = frozenset(d.name for d in inputs or () if isinstance(d, ScalarInput))  # a constexpr's per-call value
    source = TritonSource(op_name, kernel, static=_extra_names(extras) | scalars, heuristics=heuristics,
                          fixed=constexprs)  # fmt: skip
    return register_kernel_op(op_name, source, inputs=inputs, outputs=outputs, extras=extras, geometry=geometry,
                              autotune=autotune, backward=backward, index_dtype=index_dtype,
                              sharding=sharding, requires=requires, reference=reference, native=native,
                              silence=silence, compile=compile)  # fmt: skip


def cute_op(
    op_name: str,
    fn: object,
    *,
    inputs: Sequence[InputDecl | ScalarInput],
    outputs: Sequence[OutputDecl],
    extras: Sequence[Extra] = (),
    autotune: Autotune | None = None,
    backward: Backward | None = None,
    index_dtype: str = "int32",
    sharding: Callable | str | None = None,
    requires: Sequence[Requirement] = (),
    reference: Callable | None = None,
    native: bool = True,
    compile: str = "kernel",
) -> Op:
    """Register a CuTe DSL ``@cute.jit`` host function as ``op_name``, with the declaration of ``triton_op``
    minus the geometry: the host function launches its kernels itself.

    Its parameters bind by name: every tensor (inputs and outputs) arrives as a ``cute.Pointer`` to its first
    element (``cute.make_tensor(x, layout)`` builds the view), scalars and extras by value (``cutlass.Float32``,
    ``cutlass.Int32``...), ``cutlass.Constexpr`` parameters take a ``Config``'s params (or their defaults, or a
    named extra: one compile per value), and a ``stream: cuda.CUstream`` parameter gets PyTorch's current
    stream, on which every ``.launch(..., stream=stream)`` must run. Compiled with ``cute.compile`` once per
    specialization (dtypes of undeclared tensors, 16-byte alignment of inputs, sizes compiled in), exported
    to opsmith's disk cache. Needs ``pip install 'opsmith[cute]'``; the DSL is imported here, not by opsmith.
    ``reference`` and ``compile`` as in ``cuda_kernel_op``.
    """
    from .flavors.cute import CuteSource

    source = CuteSource(op_name, fn, static=_extra_names(extras))
    return register_kernel_op(op_name, source, inputs=inputs, outputs=outputs, extras=extras, geometry=None,
                              autotune=autotune, backward=backward, index_dtype=index_dtype,
                              sharding=sharding, requires=requires, reference=reference, native=native,
                              compile=compile)  # fmt: skip
