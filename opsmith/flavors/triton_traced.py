"""What torch.compile traces of a Triton op, and what the interpreter runs: the op written as PyTorch calls
plus ``wrap_triton(kernel)[grid](...)``, registered on the one registration path the way
``torch.library.triton_op`` registers it (``flavors/triton.py`` compiles and launches eagerly).

The tensors the kernel writes are the declaration's (outputs and ``mutates=True`` inputs), not Inductor's analysis
of its TTIR, which fails on some published kernels and then assumes every input is written
(``inductor/writes.py``). Float arguments, which Inductor would pass as fp64, go through an entry kernel that casts
them to fp32 (``inductor/floats.py``); where that entry cannot be built the op stays whole in the traced graph (the
graph calls it, and it launches what every other path launches).
"""

from __future__ import annotations

import inspect
import logging
from typing import Any

import torch

from ..declare.limits import INT_LIMITS
from ..declare.record import KernelRecord, TensorArg
from ..errors import LaunchError
from ..inductor.writes import declared_writes
from .triton import TritonSource, _interpreted
from .triton_errors import compile_error, compile_fix

log = logging.getLogger("opsmith.compile")
_I32 = INT_LIMITS["i32"]

__all__ = ["make_visible_impl", "register_visible"]


def _hint(v: Any) -> int | None:
    """A concrete value for a possibly symbolic size, without adding a guard (None if unknown)."""
    if isinstance(v, torch.SymInt):
        return v.node.hint
    return int(v)


def _traced_config(record: KernelRecord, tuner: Any, tensors: list, xvals: list) -> int:
    """The config used while tracing: the cached decision for the key at the traced shapes' hints, else
    the declared default. Tracing never tunes (fake tensors have no data to time)."""
    if tuner is None:
        return 0
    from ..tuning.autotune import pow2

    key: list[Any] = [None if t is None else t.dtype for t in tensors]
    for entry in record.tune_key:
        if entry[0] == "extra":
            v = _hint(xvals[entry[1]])
        else:
            t = tensors[int(entry[1][1:])]
            v = _hint(t.shape[entry[2]]) if entry[0] == "dim" else _hint(t.numel())
        if v is None:
            return tuner.default
        key.append(pow2(v) if entry[-1] == "pow2" else v)
    return tuner.untuned(tuple(key), tensors[0].get_device() if tensors[0].is_cuda else None)


def _prepare(record: KernelRecord, args: list, outs: list | None) -> None:
    """The eager code's layout rules on traced tensors: each input conformed to what the kernel addresses
    (``outs`` None), then, once the outputs exist, tensors sharing one stride parameter made to agree
    (``layout.py``)."""
    from ..plan.layout import conform, share_strides

    op = record.op_name
    positions = [k for k, a in enumerate(record.inputs) if isinstance(a, TensorArg)]
    if outs is None:
        for k in positions:
            a = record.inputs[k]
            if args[k] is not None:  # None: an optional input not given
                args[k] = conform(op, a.name, args[k], a.strided, a.contiguous)
        return
    for e in record.extras:
        if not e.same:
            continue
        group = [e.expr[1], *e.same]
        ts = [args[positions[int(r[1:])]] if r[0] == "i" else outs[int(r[1:])] for r in group]
        names = [
            record.tensor_inputs[int(r[1:])].name if r[0] == "i" else record.outputs[int(r[1:])].name for r in group
        ]
        req = [r[0] == "i" and record.tensor_inputs[int(r[1:])].contiguous == "require" for r in group]
        fixed = share_strides(op, names, ts, [r[0] == "i" for r in group], req, e.expr[2])
        for r, t in zip(group, fixed, strict=True):
            if r[0] == "i":
                args[positions[int(r[1:])]] = t


def make_visible_impl(record: KernelRecord, variants: Any, custom: Any, fake: Any, interpret: bool = False) -> Any:
    """The op written as PyTorch calls plus ``wrap_triton(kernel)[grid](...)``: what torch.compile traces
    (so Inductor sees and can fuse around the kernel) and what the Triton interpreter runs on CPU. Grids and
    extras are the op's own (``variants``), evaluated on the traced tensors; arguments go by the kernel's
    parameter names."""
    sources: list[TritonSource] = variants.sources
    tuner = variants.tuner
    # the op's fake implementation (torchlib/fake.py): checks dtype, rank, shape and sizes, allocates the outputs
    alloc = fake(record)
    extras, grids = variants.extra_fns, variants.grids
    takes_config = custom is not None and len(inspect.signature(custom).parameters) >= 3
    op = record.op_name
    positions = [k for k, a in enumerate(record.inputs) if isinstance(a, TensorArg)]
    int_scalars = record.int_scalars  # the scalars a heuristic may read
    dummies = [name for p, name in zip(record.params, sources[0].runtime_params, strict=True)
               if p.role == "input" and getattr(record.inputs[p.index], "absent", "none") == "dummy"]  # fmt: skip
    written_names = [_written(record, s) for s in sources]  # per config: outputs and ``mutates=True`` inputs
    if interpret:  # built once: kernels defined under TRITON_INTERPRET=1 are interpreted already (and so is
        # triton.language's own jit code, which wrapping a compiled kernel cannot reach)
        from triton.runtime.interpreter import InterpretedFunction

        kernels = [s.kernel if _interpreted(s.kernel) else InterpretedFunction(s.kernel.fn) for s in sources]
    else:
        # A kernel defined under TRITON_INTERPRET=1 cannot be traced (older torch refuses to wrap it). Wrapped per
        # trace (``_traceable``): a wrapper holds its index in torch's kernel side table, which
        # ``torch._dynamo.reset()`` clears.
        kernels = [None if _interpreted(s.kernel) else s.kernel for s in sources]

    def impl(*given: Any, **by_name: Any) -> Any:
        # The dispatcher leaves trailing arguments at their defaults out: only optional outputs' flags have one.
        args = [*given, *(by_name.get(a.name, False) for a in record.inputs[len(given) :])]
        _prepare(record, args, None)
        outs = alloc(*args)
        outs_l = [] if outs is None else [outs] if isinstance(outs, torch.Tensor) else list(outs)
        for o, a in zip(outs_l, record.outputs, strict=True):
            if a.init is not None and o is not None:  # None: an optional output the call did not ask for
                o.fill_(a.init)
        tensors = [args[k] for k in positions]
        written = [o for o in outs_l if o is not None] + [
            x for x, a in zip(tensors, record.tensor_inputs, strict=True) if a.mutates and x is not None
        ]
        if all(w.numel() == 0 for w in written):
            return outs
        _prepare(record, args, outs_l)
        tensors = [args[k] for k in positions]
        t = tensors + outs_l
        svals = {f"s{p}": args[p] for p in int_scalars}  # what heuristics and Present of an output read
        xvals = [f(*t, **svals) for f in extras]
        c = _traced_config(record, tuner, tensors, xvals)
        src = sources[c]
        if grids and grids[c] is not None:
            grid = grids[c](*t)
        else:
            ins = {a.name: x for a, x in zip(record.inputs, args, strict=True)}
            onames = {o.name: x for o, x in zip(record.outputs, outs_l, strict=True)}
            grid = custom(ins, onames, record.configs[c]["params"]) if takes_config else custom(ins, onames)
        kwargs = {name: args[p.index] if p.role == "input" else xvals[p.index] if p.role == "extra" else outs_l[p.index]
                  for p, name in zip(record.params, src.runtime_params, strict=True)}  # fmt: skip
        for k in dummies:  # absent="dummy": the first tensor input stands in, never read
            if kwargs[k] is None:
                kwargs[k] = tensors[0]
        # A size compiled in becomes a constant of the traced graph: int() on a symbolic size adds the guard
        # that recompiles for another value.
        consts = {**src.constexprs, **{record.extras[k].name: int(xvals[k]) for k in record.static_extras},
                  **{record.inputs[k].name: args[k] for k in record.static_scalars}}  # fmt: skip
        if src.dtype_of:  # DtypeOf constexprs: the call's input dtypes
            consts |= src.dtype_values(
                {a.name: x.dtype for a, x in zip(record.tensor_inputs, tensors, strict=True) if x is not None}
            )
        chosen: dict[str, int] = {}  # heuristics that set num_warps / num_stages
        for h, fns in zip(record.heuristics, variants.heuristic_fns, strict=True):
            v = fns[h["pick"][c]](*t, **svals)
            value = bool(v) if isinstance(v, bool | torch.SymBool) else int(v)
            if h["name"] in src.option_heuristics:
                chosen[h["name"]] = int(value)
            if h["name"] in src.static_names():
                consts[h["name"]] = value
        kern = kernels[c]
        if kern is None:
            raise LaunchError(f"{op}: the kernel was defined with TRITON_INTERPRET=1, so torch.compile cannot trace "
                              "it. Fix: unset TRITON_INTERPRET to compile it.")  # fmt: skip
        # One dict: a constexpr named like a launch option (``num_stages``) holds the option's own value.
        # torch's tracing takes num_warps and num_stages by keyword only (num_ctas and maxnreg it refuses
        # outside a triton.Config): Inductor compiles the traced kernel without a maxnreg limit.
        options = {} if interpret else {"num_warps": src.num_warps, "num_stages": src.num_stages, **chosen}
        if interpret:
            _interpret(kern, grid, {**_fp32_scalars(kwargs), **consts, **options}, op)
            return outs
        wide = [n for n, v in kwargs.items() if type(v) is int and not _I32[0] <= v <= _I32[1]]
        if wide:  # Inductor crashes typing a constant int past 32 bits (``expr_fits_within_32bit`` asks a Python
            # int for sympy's ``xreplace``, torch 2.11 to 2.13): the op stays whole for this trace, and the graph
            # calls it with the value, which every other path launches as i64
            log.info("%s: kept whole for this trace: %s past 32 bits as a constant", op, wide)
            raise _KeepWhole
        target = src.kernel
        floats = [n for n, v in kwargs.items() if isinstance(v, float | torch.SymFloat)]
        if floats and _floats_widen():  # Inductor would pass them as fp64: an entry casting them (inductor/floats.py)
            target = _entry(record, src, floats, [*kwargs, *consts])
        kern = _traceable(target)
        # functionalization takes the declared writes, not Inductor's analysis of the kernel (inductor/writes.py)
        with declared_writes(target, written_names[c]):
            kern[grid](**{**kwargs, **consts, **options})
        return outs

    return impl


#: Ops kept whole under torch.compile, and why (op -> reason): a kernel whose fp32 entry cannot be built.
_WHOLE: dict[str, str] = {}


# Triton 3.6's interpreter turns a runtime scalar into a one-element array and calls int() on it where a kernel
# loops to it (``range(0, N, BLOCK)``); NumPy 2.4 made that an error. Triton 3.7 on, and NumPy below 2.4, run it.
_OLD_INTERPRETER = "only 0-dimensional arrays can be converted to Python scalars"


def _fp32_scalars(kwargs: dict) -> dict:
    """Python floats as the fp32 scalars Triton's JIT makes of them: its interpreter passes the float itself, on
    which a kernel's ``eps = eps.to(tl.float32)`` (Liger's KL-div, TVD, PolyNorm, RMSNorms) raises AttributeError."""
    if not any(type(v) is float for v in kwargs.values()):
        return kwargs
    import triton.language as tl
    from triton.runtime.interpreter import TensorHandle

    def fp32(v: float) -> Any:  # a one-element array, as the interpreter holds an int scalar
        return tl.tensor(TensorHandle(torch.tensor([v], dtype=torch.float32).numpy(), tl.float32), tl.float32)

    return {k: fp32(v) if type(v) is float else v for k, v in kwargs.items()}


def _interpret(kern: Any, grid: Any, kwargs: dict, op: str) -> None:
    """Run ``kern`` in Triton's interpreter; its NumPy 2.4 incompatibility is a LaunchError that names the fix."""
    try:
        kern[grid](**kwargs)
    except Exception as e:
        if compile_fix(str(e)):  # the interpreter's raw InterpreterError names neither the op nor the cause
            raise compile_error(op, kern, e) from None
        if _OLD_INTERPRETER not in str(e):
            raise
        from importlib.metadata import version

        raise LaunchError(f"{op}: Triton {version('triton')}'s interpreter cannot run this kernel with NumPy "
                          f"{version('numpy')} (it converts a loop bound with int(), an error from NumPy 2.4 on). "
                          "Fix: pip install 'numpy<2.4', or a Triton of 3.7 or newer.") from e  # fmt: skip


class _KeepWhole(Exception):
    """Raised by the visible implementation, while tracing, when the op must stay whole (``_WHOLE``)."""


def _written(record: KernelRecord, src: TritonSource, outputs: bool = True) -> list[str]:
    """The parameters of ``src``'s kernel the declaration says it writes: the inputs declared ``mutates=True``, and
    the outputs unless ``outputs`` is False."""
    return [name for p, name in zip(record.params, src.runtime_params, strict=True)
            if (outputs and p.role == "output")
            or (p.role == "input" and getattr(record.inputs[p.index], "mutates", False))]  # fmt: skip


def _floats_widen() -> bool:
    """Whether Inductor compiles a user kernel's Python-float arguments as fp64 (``_use_fp64_for_unbacked_floats``,
    on outside fbcode), where Triton's JIT and every other opsmith path pass fp32."""
    from torch._inductor import config

    return bool(getattr(config, "_use_fp64_for_unbacked_floats", False))


def _traceable(kernel: Any) -> Any:
    """``wrap_triton(kernel)``, made at each trace: the wrapper records the kernel's index in torch's kernel side
    table when made, and ``torch._dynamo.reset()`` empties that table (a wrapper kept across a reset would launch
    whichever kernel took its index next)."""
    from torch.library import wrap_triton

    return wrap_triton(kernel)


def _entry(record: KernelRecord, src: TritonSource, floats: list[str], passed: list[str]) -> Any:
    """The fp32 entry of ``src``'s kernel for these float arguments; ``_KeepWhole`` where it cannot be built (a
    parameter the launch does not pass and the kernel gives no default: a heuristic its wrapper would have set)."""
    from ..inductor.floats import fp32_entry

    op = record.op_name
    try:
        entry = fp32_entry(src.kernel, floats, passed)
    except Exception as e:
        _WHOLE[op] = f"its float arguments {floats} would reach the kernel as fp64, and no fp32 entry: {e}"
        log.info("%s: kept whole under torch.compile: %s", op, _WHOLE[op])
        raise _KeepWhole from e
    if record.mutated:  # the entry's writes into saved activations stay in place (inductor/donated.py)
        from ..inductor.donated import note_kernel

        note_kernel(entry, _written(record, src, outputs=False))
    return entry


def register_visible(lib: Any, op_name: str, name: str, record: KernelRecord, variants: Any, custom: Any,
                     eager: Any, fake: Any, register_cpu: bool = True) -> Any:  # fmt: skip
    """What ``torch.library.triton_op`` adds to a custom op, on our one registration path: under
    FunctionalTensorMode (AOTDispatcher, i.e. torch.compile) the op decomposes into its visible
    implementation, so Inductor sees the Triton kernel; ``torch.export`` keeps the op whole. Returns that rule
    (``inductor/choice.py`` registers it, beside the op's compile choice). CPU tensors
    run through the Triton interpreter when ``TRITON_INTERPRET=1``; otherwise they get the eager guards'
    clear device error. ``fake``: the registration path's fake implementation of a record (``make_fake``), which
    allocates the outputs the traced kernel writes."""
    from torch._subclasses.fake_tensor import FakeTensor
    from torch._subclasses.functional_tensor import FunctionalTensor

    # Both built on first use: the traced one imports torch's Triton tracing machinery (~4 s measured on the
    # H200 host), which a process that never compiles should not pay at registration.
    visible = None
    interpreted = None

    def decompose(mode: Any, op: Any, types: Any, args: Any, kwargs: Any) -> Any:
        nonlocal visible
        try:  # imported here: torch.export._trace imports all of Dynamo (~2 s), and only tracing gets here
            from torch.export._trace import custom_triton_ops_decomposition_disabled as keep_whole
        except ImportError:  # older torch: always decompose

            def keep_whole() -> bool:
                return False

        # On CPU tensors the op stays whole where its CPU kernel can run: its reference=, or Triton's interpreter.
        # Decomposed there, Inductor would compile the Triton kernel for a CPU ("0 active drivers"), or trace a
        # kernel defined for the interpreter. (Without either, CPU tensors only ever trace: the graph shows the
        # kernel, as on CUDA.)
        import triton

        on_cpu = any(isinstance(a, torch.Tensor) and a.device.type != "cuda" for a in args)
        if keep_whole() or (on_cpu and (not register_cpu or triton.knobs.runtime.interpret)) or op_name in _WHOLE:
            return mode.__torch_dispatch__(op, types, args, kwargs)
        if any(not issubclass(t, FakeTensor | FunctionalTensor) and t is not torch.Tensor for t in types):
            return NotImplemented
        if visible is None:
            visible = make_visible_impl(record, variants, custom, fake)
        with mode:
            try:
                return visible(*args, **kwargs)
            except _KeepWhole:  # what it traced so far is dead code, which the graph drops
                pass
        return mode.__torch_dispatch__(op, types, args, kwargs)

    if record.mutated:  # its kernel's writes into saved activations stay in place (inductor/donated.py)
        from ..inductor.donated import note_kernel

        for s in variants.sources:
            note_kernel(s.kernel, _written(record, s, outputs=False))

    def cpu(*args: Any) -> Any:
        nonlocal interpreted
        import triton

        if triton.knobs.runtime.interpret:
            if interpreted is None:
                interpreted = make_visible_impl(record, variants, custom, fake, interpret=True)
            return interpreted(*args)
        return eager(*args)  # raises opsmith's "expected a CUDA tensor" error

    if register_cpu:  # else the op's CPU reference serves CPU tensors (registration.py)
        lib.impl(name, cpu, "CPU")
    try:  # lets AOTInductor find the kernels of this op (as for torch.library.triton_op)
        from torch._library.triton import triton_ops_to_kernels

        triton_ops_to_kernels[op_name] = [variants.sources[0].kernel]
    except ImportError:
        pass
    return decompose  # the rule under FunctionalTensorMode, registered with the op's compile choice
