"""An opsmith op as a JAX function: ``jax_op(op)``.

A call traces to one ``jax.ffi.ffi_call`` of the op's generated XLA handler (``build.py``), whose result
shapes are the declaration's (``abstract.py``). Around it, from the same record:

- ``jax.grad``: ``jax.custom_vjp`` with the declared backward, run in JAX: a backward op through its own
  handler, or a backward program (``Buffer`` allocations and ``Step`` calls) step by step, an in-place
  argument of a step taking the step's aliased result;
- ``jax.vmap``: ``jax.custom_batching.custom_vmap``; the mapped axis joins the ``"*B"`` group of every batched
  input (moved to where the declaration puts the group) and leaves each output from where its declaration puts
  that group; an input or output whose declaration has no place for it is refused (``BatchingError``). Decided
  by the declared shapes, never by comparing sizes;
- in-place inputs (``mutates=True``): XLA input/output aliasing; the call returns their new values after the
  outputs;
- where it runs: JAX's CUDA platform; on another platform the op's CPU ``reference=`` serves the call (through
  the PyTorch op, under the same checks), and without one the call is refused at trace time with the fix.

Tuning: the first trace of a call signature on a machine with a GPU runs the PyTorch op once on random
inputs of those shapes, so the tuning decision (and the exact specialization) exist before the handler
library is built; the decisions are opsmith's persistent ones, shared with PyTorch.
"""

from __future__ import annotations

import struct
import threading
import warnings
from collections.abc import Sequence
from typing import Any

import torch

from ..declare.record import TensorArg
from ..errors import InputError, SpecError, ToolchainError
from ..native.build import closure
from ..native.xla_cpp import GIVEN
from ..plan.guards import Refusals
from .abstract import _check, abstract_eval, to_jax_dtype, to_torch_dtype
from .build import Handlers, handlers

__all__ = ["BatchingError", "DryRunWarning", "JaxOp", "cuda_kernel_op", "jax_op", "ptx_op", "triton_op"]


class DryRunWarning(UserWarning):
    """A dry-run JaxOp was called: it records launches and makes none, so its outputs hold no results."""


def require_jax() -> None:
    """JAX, or a ToolchainError saying how to install it (``opsmith.jax`` imports without it)."""
    try:
        import jax  # noqa: F401
    except ImportError:
        raise ToolchainError("opsmith.jax needs JAX, which is not installed. Fix: pip install 'opsmith[jax]' (and "
                             "jax[cuda13] for a GPU).") from None  # fmt: skip


class BatchingError(SpecError, NotImplementedError):
    """``jax.vmap`` over an op whose declaration cannot absorb the mapped axis; the message says which
    argument or output and the fix."""

    def __init__(self, op: str, what: str, fix: str) -> None:
        ValueError.__init__(self, f"{op}: jax.vmap: {what} Fix: {fix}")


class JaxOp:
    """A JAX callable for an opsmith op: the op's arguments (JAX arrays for tensors, Python numbers for
    scalars, positionally or scalars by name); returns its outputs (one array, or a tuple), then the new
    values of inputs it writes in place. ``dry_run``: handlers for JAX's CPU platform that record launches
    instead of making them (``handlers(...).take_dry_run()``), for tests without a GPU. ``platform``: where
    calls run, when it is not where JAX would run them now (the arrays' device, ``jax.default_device``, else
    JAX's default backend): "cuda" to lower for the GPU on a machine without one
    (``jit(f).trace(...).lower(lowering_platforms=("cuda",))``)."""

    def __init__(self, op: Any, dry_run: bool = False, platform: str | None = None) -> None:
        require_jax()
        _check(op)
        if platform is not None and _kind(platform) != "gpu":
            raise SpecError(op.record.op_name, "platform", f"{platform!r} is not a platform opsmith.jax launches on.",
                            "pass platform='cuda', or leave it out to run where JAX runs the call.")  # fmt: skip
        self.op, self.record, self.dry_run, self.platform = op, op.record, dry_run, platform
        self.name = self.record.op_name
        self.tensors = [a for a in self.record.inputs if isinstance(a, TensorArg)]
        self.tensor_pos = [k for k, a in enumerate(self.record.inputs) if isinstance(a, TensorArg)]
        self.mutated = [k for k, a in enumerate(self.tensors) if a.mutates]
        self.n_out = len(self.record.outputs)
        self._backward = _Backward(op, dry_run, platform) if getattr(op, "backward", None) is not None else None
        self._closure = closure([op])  # the ops its library holds: it and what its backward calls
        self._fns: dict[tuple, Any] = {}
        self._warmed: set[tuple] = set()
        self._built: dict[tuple, Handlers] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"opsmith.jax.jax_op({self.name})"

    def __call__(self, *args: Any, **scalars: Any) -> Any:
        tensors, named = self.split(args, scalars)
        got = list(self.function(named)(*tensors))
        for k in self.left_out(named):  # its zero-byte placeholder result
            got[k] = None
        return got[0] if len(got) == 1 else tuple(got)

    def left_out(self, scalars: dict) -> list[int]:
        """The optional outputs a call with these scalars did not ask for (``OutputDecl(optional=True)``)."""
        return [k for k, o in enumerate(self.record.outputs)
                if o.when is not None and not scalars[self.record.inputs[o.when].name]]  # fmt: skip

    def split(self, args: Sequence[Any], scalars: dict) -> tuple[list, dict]:
        """(tensor arguments, scalars by name) of a call, as the op's declaration orders them."""
        tensors, named, it, missing = [], {}, iter(args), object()
        for decl in self.record.inputs:
            if isinstance(decl, TensorArg):
                v = next(it, missing)
                if v is missing:
                    raise TypeError(f"{self.name}: tensor input {decl.name!r} is missing.")
                if decl.optional:  # None travels as a zero-size placeholder and a flag the handler reads
                    named[GIVEN + decl.name] = v is not None
                    v = _placeholder(decl) if v is None else v
                elif v is None:  # the call plan's first step (Given), as every path refuses it
                    raise Refusals(self.record.op_name).missing(decl.name)
                tensors.append(v)
            else:
                v = scalars.pop(decl.name) if decl.name in scalars else next(it, missing)
                if v is missing and decl.flag:  # an optional output's request, False by default as in the schema
                    v = False
                if v is missing:
                    raise TypeError(f"{self.name}: scalar {decl.name!r} is missing.")
                named[decl.name] = _attribute(decl.py_type, v)
        if scalars or next(it, missing) is not missing:
            raise TypeError(f"{self.name}: unexpected arguments ({sorted(scalars) or 'extra positional'}).")
        return tensors, named

    def function(self, scalars: dict) -> Any:
        """The JAX function of the tensor arguments for these scalars (made once per scalar values)."""
        import jax

        key = _scalar_key(scalars)
        fn = self._fns.get(key)
        if fn is not None:
            return fn

        @jax.custom_batching.custom_vmap
        def call(*tensors: Any) -> tuple:
            return tuple(self.apply(tensors, scalars))

        call.def_vmap(lambda size, batched, *tensors: self._vmap(size, batched, tensors, scalars))
        fn = call
        if self._backward is not None:
            fn = self._backward.wrap(self, call, scalars)
        else:
            fn = self._undifferentiable(call)
        # Under jit, one function per scalar key: JAX's own cache of an eagerly applied primitive compares its
        # parameters with ==, so an eager call with -0.0 after one with 0.0 ran 0.0's executable.
        fn = self._fns[key] = jax.jit(fn)
        return fn

    def _undifferentiable(self, call: Any) -> Any:
        """``call`` whose derivative is refused as the PyTorch op's autograd refuses it (``DifferentiationError``),
        where JAX would raise its own "Pure callbacks do not support JVP" or differentiate the FFI call's aliases."""
        import jax

        f = jax.custom_jvp(call)

        def jvp(primals: tuple, tangents: tuple) -> Any:
            from ..errors import DifferentiationError

            raise DifferentiationError(self.name, "JAX differentiates through it, but it declares no backward.",
                                       "declare backward=Backward(...) for the op, or wrap its inputs in "
                                       "jax.lax.stop_gradient where no gradient should flow.")  # fmt: skip

        f.defjvp(jvp)
        return f

    # -- one call ---------------------------------------------------------------------------------------------
    def apply(self, tensors: Sequence[Any], scalars: dict) -> list:
        """The op on these arrays: its outputs, then the new values of its in-place inputs."""
        import jax

        avals = [jax.ShapeDtypeStruct(tuple(t.shape), t.dtype) for t in tensors]
        outs = list(abstract_eval(self.op, *avals, **scalars))  # every refusal, now, at trace time
        if not self._on_its_platform(tensors):
            return self._reference(tensors, scalars, outs + [avals[k] for k in self.mutated])
        self._warm(avals, scalars)
        target = self.handlers().targets[self.name]
        results = outs + [avals[k] for k in self.mutated]
        aliases = {k: len(outs) + j for j, k in enumerate(self.mutated)}
        call = jax.ffi.ffi_call(target, results, input_output_aliases=aliases or None)
        attrs = {d.name: _attribute(d.py_type, scalars[d.name]) for d in self.record.inputs if d.name in scalars}
        attrs |= {k: v for k, v in scalars.items() if k.startswith(GIVEN)}
        return list(call(*tensors, **attrs))

    def _on_its_platform(self, tensors: Sequence[Any]) -> bool:
        """Whether the call runs where the handlers are registered (CUDA; JAX's CPU platform for a dry run);
        else the CPU reference serves it, or it is refused here, at trace time, before any handler is built."""
        platform = "gpu" if self.platform is not None else _platform(tensors)
        want = "cpu" if self.dry_run else "gpu"
        if platform == want:
            if self.dry_run and not self.__dict__.get("_warned"):
                self._warned = True
                warnings.warn(f"{self.name}: a dry run records its launches and makes none: its outputs hold 0xFF "
                              "bytes (NaN), not results. Fix: call jax_op(op) without dry_run=True on a GPU for "
                              "results.", DryRunWarning, stacklevel=4)  # fmt: skip
            return True
        if platform == "cpu" and getattr(self.op, "reference", None) is not None:
            return False
        name = self.tensors[0].name if self.tensors else "(the call)"
        if self.dry_run:
            raise InputError(self.name, name, "an array on JAX's CPU platform (dry-run handlers serve it)",
                             f"an array on {platform}", "Fix: call it under jax.default_device(jax.devices('cpu')[0]), "
                             "or drop dry_run=True to launch the kernel on the GPU.")  # fmt: skip
        raise InputError(self.name, name, "an array on a CUDA device (opsmith.jax launches the kernel on JAX's "
                         "CUDA platform)", f"an array on {platform}", "Fix: run it on a GPU (jax.devices('gpu')), "
                         "declare reference= at registration to serve other platforms with it, or pass dry_run=True "
                         "to record launches on the CPU in tests.")  # fmt: skip

    def _reference(self, tensors: Sequence[Any], scalars: dict, results: list) -> list:
        """The op's CPU reference as a host callback: the PyTorch op on CPU tensors (its checks, then
        ``reference=``), its outputs and the written inputs' new values."""
        import jax

        def host(*arrays: Any) -> tuple:
            args, given, it = [], [], iter(arrays)
            for decl in self.record.inputs:
                if isinstance(decl, TensorArg):
                    t = _to_torch(next(it))
                    given.append(t)  # an absent input's "new value" is its placeholder
                    args.append(None if scalars.get(GIVEN + decl.name) is False else t)
                else:
                    args.append(scalars[decl.name])
            out = self.op(*args)
            outs = () if out is None else out if isinstance(out, tuple | list) else (out,)
            outs = [torch.empty(0, dtype=torch.uint8) if o is None else o for o in outs]  # a left-out output
            written = [args[k] if args[k] is not None else given[j] for j, k in enumerate(self.tensor_pos)
                       if self.record.inputs[k].mutates]  # fmt: skip
            return tuple(_to_numpy(t) for t in (*outs, *written))

        return list(jax.pure_callback(host, tuple(results), *tensors, vmap_method="sequential"))

    def handlers(self) -> Handlers:
        """The handler library holding this op's kernels and tuning decisions as they stand (rebuilt, or taken
        from the cache, when the process compiled or decided something since)."""
        state = tuple((op.record.op_name, len(op.variants.kernels),
                       len(op.variants.tuner.decisions) if op.record.tuned else 0) for op in self._closure)  # fmt: skip
        with self._lock:
            hit = self._built.get(state)
            if hit is None:
                hit = self._built[state] = handlers([self.op], dry_run=self.dry_run)
            return hit

    def _warm(self, avals: Sequence[Any], scalars: dict) -> None:
        """Run the PyTorch op once per call signature on a GPU: it tunes and compiles what the call needs."""
        if self.dry_run or not torch.cuda.is_available():
            return
        key = (tuple((tuple(a.shape), str(a.dtype)) for a in avals), _scalar_key(scalars))
        if key in self._warmed:
            return
        args, it = [], iter(avals)
        for decl in self.record.inputs:
            if isinstance(decl, TensorArg):
                a = next(it)
                dt = to_torch_dtype(a.dtype)
                shape = tuple(a.shape)
                if scalars.get(GIVEN + decl.name) is False:
                    args.append(None)
                    continue
                args.append(torch.randn(shape, device="cuda").to(dt) if dt.is_floating_point
                            else torch.randint(0, 2, shape, device="cuda").to(dt))  # fmt: skip
            else:
                args.append(scalars[decl.name])
        with torch.no_grad():
            self.op(*args)
        torch.cuda.synchronize()
        self._warmed.add(key)

    # -- jax.vmap ---------------------------------------------------------------------------------------------
    def _written_in_place(self, a: Any) -> BatchingError:
        return BatchingError(self.name, f"input {a.name!r} is written in place, and its declared shape {_shape(a)} "
                             "has no group of the mapped inputs: the mapped call would write one value for every "
                             "mapped element.", "map the call with jax.lax.map, or declare the written input with "
                             "the mapped inputs' group.")  # fmt: skip

    def _vmap(self, size: int, batched: Sequence[bool], tensors: Sequence[Any], scalars: dict) -> tuple:
        """The mapped axis (leading in the batched inputs, as custom_vmap gives them) joins each one's '*' group,
        moved to where its declaration puts the group; an unbatched input of a mapped group gets the axis by
        broadcasting; each output gives it back from where its declaration puts that group. Every decision is
        the declaration's: an input or output with no place for the axis is refused."""
        import jax.numpy as jnp

        groups = [_group(a.shape) for a in self.tensors]
        for k, (a, b, g) in enumerate(zip(self.tensors, batched, groups, strict=True)):
            if b and g is None and k in self.mutated:  # a program's buffer is mapped too (jax.lax.empty batches)
                raise self._written_in_place(a)
            if b and g is None:
                raise BatchingError(self.name, f"input {a.name!r} is mapped, but its declared shape {_shape(a)} has "
                                    "no '*' group that can take the mapped axis.",
                                    f"declare {a.name} as ('*B', ...), or map only inputs declared so.")  # fmt: skip
        mapped = {g[0] for g, b in zip(groups, batched, strict=True) if b}
        args = []
        for k, (a, b, t, g) in enumerate(zip(self.tensors, batched, tensors, groups, strict=True)):
            if b:
                t = jnp.moveaxis(t, 0, g[1])
            elif scalars.get(GIVEN + a.name) is False:  # an absent optional input's placeholder: not mapped
                pass
            elif g is not None and g[0] in mapped:  # the same group: every member is mapped
                t = jnp.broadcast_to(jnp.expand_dims(t, g[1]), (*t.shape[: g[1]], size, *t.shape[g[1] :]))
            elif k in self.mutated:
                raise self._written_in_place(a)
            args.append(t)
        gone = set(self.left_out(scalars))  # their placeholders are not mapped
        axes = [self._output_axis(k, mapped) for k in range(self.n_out)]
        for k, ax in enumerate(axes):
            if ax is None and k not in gone:
                decl = self.record.outputs[k]
                raise BatchingError(self.name, f"output {decl.name!r} has no place for the mapped axis: its declared "
                                    f"shape does not carry the mapped group {sorted('*' + g for g in mapped)}.",
                                    "declare the output's shape with that group (SameAs of a mapped input, "
                                    "ReduceDims over other axes, or a shape naming the group), or map the call "
                                    "with jax.lax.map.")  # fmt: skip
        out = self.apply(args, scalars)
        results = [o if k in gone else jnp.moveaxis(o, ax, 0)
                   for k, (o, ax) in enumerate(zip(out[: self.n_out], axes, strict=True))]  # fmt: skip
        flags = [k not in gone for k in range(self.n_out)]
        for j, k in enumerate(self.mutated):  # a written input of a mapped group comes back mapped
            g = groups[k]
            carried = g is not None and g[0] in mapped
            results.append(jnp.moveaxis(out[self.n_out + j], g[1], 0) if carried else out[self.n_out + j])
            flags.append(carried)
        return tuple(results), tuple(flags)

    def _output_axis(self, k: int, mapped: set[str]) -> int | None:
        """Where output ``k`` carries the mapped axis, read from its declaration: the position of a mapped group
        in its shape (SameAs an input: that input's; ReduceDims: the input's, less the reduced axes before it),
        or None when it has none (or a reduction reaches into the group)."""
        o = self.record.outputs[k].shape
        if "shape" in o:
            return next((p for p, e in enumerate(o["shape"]) if isinstance(e, list) and e[0] == "group"
                         and e[1] in mapped), None)  # fmt: skip
        src = o.get("same_as", o.get("reduce"))
        if src is None:
            return None
        g = _group(self.tensors[src].shape)
        if g is None or g[0] not in mapped:
            return None
        if "same_as" in o:
            return g[1]
        after = len(self.tensors[src].shape) - g[1] - 1  # declared axes after the group
        before = [d for d in o["dims"] if d >= 0]
        if any(d >= g[1] for d in before) or any(-d > after for d in o["dims"] if d < 0):
            return None  # a reduced axis inside the group, or counted across it
        return g[1] if o["keepdim"] else g[1] - len(before)


class _Backward:
    """The declared backward in JAX (``jax.custom_vjp``), run as the PyTorch op's autograd runs it."""

    def __init__(self, op: Any, dry_run: bool, platform: str | None) -> None:
        from ..plan.backward_program import check_backward, program_of

        self.spec = op.backward
        self.sources, self.grad_of = check_backward(op.record.op_name, op.record, self.spec)
        self.program = program_of(op.record, self.spec)
        self.dry_run = dry_run
        fn = self.spec.fn
        steps = [s.op for s in self.program.items if hasattr(s, "op")] if self.program else [fn]
        self.ops = {s.record.op_name: JaxOp(s, dry_run, platform) for s in steps}

    def wrap(self, fwd_op: JaxOp, call: Any, scalars: dict) -> Any:
        import jax

        f = jax.custom_vjp(call)

        def fwd(*tensors: Any) -> tuple:
            outs = call(*tensors)
            return outs, (tensors, outs)

        def bwd(saved: tuple, cts: tuple) -> tuple:
            tensors, outs = saved
            args = self._args(fwd_op, tensors, outs, cts, scalars)
            # An optional input the call passed as None gets no gradient, and nothing is run for one (as the
            # PyTorch op's needs_input_grad says): its cotangent is None, JAX's zero.
            needs = tuple(scalars.get(GIVEN + fwd_op.record.inputs[k].name) is not False for k in self.grad_of)
            grads = self._run(args, needs)
            result: list[Any] = [None] * len(tensors)
            positions = {a.name: k for k, a in enumerate(fwd_op.tensors)}
            for k, g, need in zip(self.grad_of, grads, needs, strict=True):
                result[positions[fwd_op.record.inputs[k].name]] = g if need else None
            return tuple(result)

        f.defvjp(fwd, bwd)
        return f

    def _args(self, fwd_op: JaxOp, tensors: Sequence[Any], outs: Sequence[Any], cts: Sequence[Any],
              scalars: dict) -> list:  # fmt: skip
        """The backward's arguments (``Backward.args``): inputs, outputs and output gradients."""
        by_input = {}
        it = iter(tensors)
        for decl in fwd_op.record.inputs:
            by_input[decl.name] = next(it) if isinstance(decl, TensorArg) else scalars[decl.name]
            if scalars.get(GIVEN + decl.name) is False:  # passed as None: the backward gets None too
                by_input[decl.name] = None
        names = [a.name for a in fwd_op.record.inputs]
        args = []
        for kind, k in self.sources:
            if kind == "in":
                args.append(by_input[names[k]])
            elif kind == "out":
                args.append(outs[k])
            else:
                args.append(cts[k])
        return args

    def _run(self, args: list, needs: tuple[bool, ...]) -> list:
        if self.program is None:
            op = self.ops[self.spec.fn.record.op_name]
            got = op(*args)
            return list(got) if isinstance(got, tuple) else [got]
        env = dict(zip(self.spec.args, args, strict=True))
        for k in self.program.plan(needs):
            it = self.program.items[k]
            if hasattr(it, "op"):
                self._step(it, env)
            else:
                env[it.name] = _allocate(it, env, self.program._sizes.get(k))
        return [env[r] if n else None for r, n in zip(self.spec.returns, needs, strict=True)]

    def _step(self, step: Any, env: dict) -> None:
        op = self.ops[step.op.record.op_name]
        tensors, scalars = op.split([env[a] for a in step.args], {})
        got = op.function(scalars)(*tensors)
        env.update(zip(step.outputs, got[: op.n_out], strict=True))
        tensor_args = [a for a, d in zip(step.args, op.record.inputs, strict=True) if isinstance(d, TensorArg)]
        for j, k in enumerate(op.mutated):  # the aliased results: the written buffers' new values
            env[tensor_args[k]] = got[op.n_out + j]


def _allocate(a: Any, env: dict, sizes_of: Any) -> Any:
    """A program's buffer as a JAX array, shaped and typed by the PyTorch program's own rules
    (``backward_program._allocate``) over meta tensors of the arrays, with the SM count of the GPU JAX runs on
    (device 0's; 132 without one, as geometry does). Uninitialized, as PyTorch's ``torch.empty``: the steps
    write every element they read (a program's contract on every path)."""
    from ..plan.backward_program import _allocate as allocate

    meta = {k: torch.empty(tuple(v.shape), dtype=to_torch_dtype(v.dtype), device="meta")
            for k, v in env.items() if hasattr(v, "shape")}  # fmt: skip
    device = 0 if torch.cuda.is_available() else -1
    t = allocate(a, meta, None if sizes_of is None else lambda env, _first: sizes_of(env, device))
    return new_buffer(tuple(t.shape), to_jax_dtype(t.dtype))


def new_buffer(shape: tuple[int, ...], dtype: Any) -> Any:
    """An uninitialized array: ``jax.lax.empty`` lowers to XLA's ``AllocateBuffer`` on a GPU (zeros on a CPU).
    ``jnp.zeros`` here cost a memset kernel per buffer on every backward (4.3 MB for the RMSNorm partial sums
    at (8, 4096, 4096)); ``benchmarks/bench_jax_rmsnorm.py`` times both."""
    import jax
    import jax.numpy as jnp

    empty = getattr(jax.lax, "empty", None)  # not in every jax the extra allows (jax>=0.5); 0.10 and 0.11 have it
    return jnp.zeros(shape, dtype) if empty is None else empty(shape, dtype)


def _placeholder(decl: TensorArg) -> Any:
    """What an optional input passed as None travels as: a zero-size array of its dtype (float32 if open)."""
    import jax.numpy as jnp

    return jnp.zeros((0,), to_jax_dtype(getattr(torch, decl.dtype or "float32")))


def _attribute(py_type: str, v: Any) -> Any:
    """A scalar as the FFI attribute its schema type binds (``Attr<double>`` for a float, ``int64_t`` for an
    int, ``bool``); jax.ffi_call passes a Python float as f64 and an int as i64."""
    return {"float": float, "int": int, "bool": bool}[py_type](v)


def _group(shape: tuple | None) -> tuple[str, int] | None:
    """(the group's name, its position) in a declared input shape, or None."""
    for p, e in enumerate(shape or ()):
        if isinstance(e, str) and e.startswith("*"):
            return e[1:], p
    return None


def _scalar_key(scalars: dict) -> tuple:
    """Scalars as a cache key that tells every distinct value apart: floats by their bits (``-0.0`` is not
    ``0.0``, and a NaN is itself), and by type (``True`` is not ``1``)."""
    return tuple((k, type(v).__name__, struct.pack("<d", v) if isinstance(v, float) else v)
                 for k, v in sorted(scalars.items()))  # fmt: skip


def _platform(tensors: Sequence[Any]) -> str:
    """The platform a call runs on: the concrete arrays' device, else ``jax.default_device``'s, else JAX's
    default backend ("gpu" for CUDA)."""
    import jax

    for t in tensors:
        devices = getattr(t, "devices", None)
        if devices is not None and not isinstance(t, jax.core.Tracer):
            return _kind(next(iter(devices())).platform)
    dev = jax.config.jax_default_device
    if dev is not None:
        return _kind(dev if isinstance(dev, str) else dev.platform)
    return _kind(jax.default_backend())


def _kind(platform: str) -> str:
    return "gpu" if platform.lower() in ("gpu", "cuda") else platform.lower()


def _to_torch(a: Any) -> torch.Tensor:
    """A host callback's array as a CPU tensor (a copy: the callback's buffers are JAX's)."""
    import jax

    arr = jax.device_get(a)  # a NumPy array (JAX hands callbacks its own arrays or NumPy ones, by version)
    if arr.dtype.name == "bfloat16":  # ml_dtypes' bfloat16, which torch.from_numpy does not take
        return torch.from_numpy(arr.view("uint16").copy()).view(torch.bfloat16)
    return torch.from_numpy(arr.copy())


def _to_numpy(t: torch.Tensor) -> Any:
    """A CPU tensor as the NumPy array a host callback returns (bfloat16 as JAX's, ml_dtypes')."""
    import jax.numpy as jnp

    t = t.detach().cpu().contiguous()
    if t.dtype == torch.bfloat16:
        return t.view(torch.uint16).numpy().view(jnp.bfloat16)
    return t.numpy()


def _shape(a: Any) -> str:
    return "(" + ", ".join(map(str, a.shape)) + ")" if a.shape else "(any shape)"


def jax_op(op: Any, *, dry_run: bool = False, platform: str | None = None) -> JaxOp:
    """The JAX function of an opsmith op (``JaxOp``). Raises ``SpecError`` when the op cannot be called from
    JAX (``refusal``), ``ToolchainError`` when JAX is not installed."""
    return JaxOp(op, dry_run, platform)


def cuda_kernel_op(*args: Any, **kw: Any) -> JaxOp:
    """``opsmith.cuda_kernel_op`` (same arguments: the op is registered for PyTorch too) as a JAX function."""
    from .. import api

    require_jax()  # before registering: a missing JAX says so first
    return JaxOp(api.cuda_kernel_op(*args, **kw))


def ptx_op(*args: Any, **kw: Any) -> JaxOp:
    """``opsmith.ptx_op`` (same arguments) as a JAX function."""
    from .. import api

    require_jax()
    return JaxOp(api.ptx_op(*args, **kw))


def triton_op(*args: Any, **kw: Any) -> JaxOp:
    """``opsmith.triton_op`` (same arguments) as a JAX function."""
    from .. import api

    require_jax()
    return JaxOp(api.triton_op(*args, **kw))
