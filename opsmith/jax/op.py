"""An opsmith op as a JAX function: ``jax_op(op)``.

A call traces to one ``jax.ffi.ffi_call`` of the op's generated XLA handler (``build.py``), whose result
shapes are the declaration's (``abstract.py``). Around it, from the same record:

- ``jax.grad``: ``jax.custom_vjp`` with the declared backward, run in JAX: a backward op through its own
  handler, or a backward program (``Buffer`` allocations and ``Step`` calls) step by step, an in-place
  argument of a step taking the step's aliased result;
- ``jax.vmap``: ``jax.custom_batching.custom_vmap``; the mapped axis joins a leading ``"*B"`` group of every
  batched input, and each output must carry the group too, else the call is refused (``BatchingError``);
- in-place inputs (``mutates=True``): XLA input/output aliasing; the call returns their new values after the
  outputs.

Tuning: the first trace of a call signature on a machine with a GPU runs the PyTorch op once on random
inputs of those shapes, so the tuning decision (and the exact specialization) exist before the handler
library is built; the decisions are opsmith's persistent ones, shared with PyTorch.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import torch

from ..errors import SpecError
from ..native.build import closure
from ..record import TensorArg
from .abstract import _check, abstract_eval, to_jax_dtype, to_torch_dtype
from .build import Handlers, handlers

__all__ = ["BatchingError", "JaxOp", "cuda_kernel_op", "jax_op", "ptx_op", "triton_op"]


class BatchingError(SpecError, NotImplementedError):
    """``jax.vmap`` over an op whose declaration cannot absorb the mapped axis; the message says which
    argument or output and the fix."""

    def __init__(self, op: str, what: str, fix: str) -> None:
        ValueError.__init__(self, f"{op}: jax.vmap: {what} Fix: {fix}")


class JaxOp:
    """A JAX callable for an opsmith op: the op's arguments (JAX arrays for tensors, Python numbers for
    scalars, positionally or scalars by name); returns its outputs (one array, or a tuple), then the new
    values of inputs it writes in place. ``dry_run``: handlers for JAX's CPU platform that record launches
    instead of making them (``handlers(...).take_dry_run()``), for tests without a GPU."""

    def __init__(self, op: Any, dry_run: bool = False) -> None:
        _check(op)
        self.op, self.record, self.dry_run = op, op.record, dry_run
        self.name = self.record.op_name
        self.tensors = [a for a in self.record.inputs if isinstance(a, TensorArg)]
        self.mutated = [k for k, a in enumerate(self.tensors) if a.mutates]
        self.n_out = len(self.record.outputs)
        self._backward = _Backward(op, dry_run) if getattr(op, "backward", None) is not None else None
        self._closure = closure([op])  # the ops its library holds: it and what its backward calls
        self._fns: dict[tuple, Any] = {}
        self._warmed: set[tuple] = set()
        self._built: dict[tuple, Handlers] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"opsmith.jax.jax_op({self.name})"

    def __call__(self, *args: Any, **scalars: Any) -> Any:
        tensors, named = self.split(args, scalars)
        got = self.function(named)(*tensors)
        return got[0] if len(got) == 1 else tuple(got)

    def split(self, args: Sequence[Any], scalars: dict) -> tuple[list, dict]:
        """(tensor arguments, scalars by name) of a call, as the op's declaration orders them."""
        tensors, named, it, missing = [], {}, iter(args), object()
        for decl in self.record.inputs:
            if isinstance(decl, TensorArg):
                v = next(it, missing)
                if v is missing:
                    raise TypeError(f"{self.name}: tensor input {decl.name!r} is missing.")
                tensors.append(v)
            else:
                v = scalars.pop(decl.name) if decl.name in scalars else next(it, missing)
                if v is missing:
                    raise TypeError(f"{self.name}: scalar {decl.name!r} is missing.")
                named[decl.name] = v
        if scalars or next(it, missing) is not missing:
            raise TypeError(f"{self.name}: unexpected arguments ({sorted(scalars) or 'extra positional'}).")
        return tensors, named

    def function(self, scalars: dict) -> Any:
        """The JAX function of the tensor arguments for these scalars (made once per scalar values)."""
        import jax

        key = tuple(sorted(scalars.items()))
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
        self._fns[key] = fn
        return fn

    # -- one call ---------------------------------------------------------------------------------------------
    def apply(self, tensors: Sequence[Any], scalars: dict) -> list:
        """The op on these arrays: its outputs, then the new values of its in-place inputs."""
        import jax

        avals = [jax.ShapeDtypeStruct(tuple(t.shape), t.dtype) for t in tensors]
        outs = list(abstract_eval(self.op, *avals, **scalars))
        self._warm(avals, scalars)
        target = self.handlers().targets[self.name]
        results = outs + [avals[k] for k in self.mutated]
        aliases = {k: len(outs) + j for j, k in enumerate(self.mutated)}
        call = jax.ffi.ffi_call(target, results, input_output_aliases=aliases or None)
        attrs = {d.name: _attribute(d.py_type, scalars[d.name]) for d in self.record.inputs if d.name in scalars}
        return list(call(*tensors, **attrs))

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
        key = (tuple((tuple(a.shape), str(a.dtype)) for a in avals), tuple(sorted(scalars.items())))
        if key in self._warmed:
            return
        args, it = [], iter(avals)
        for decl in self.record.inputs:
            if isinstance(decl, TensorArg):
                a = next(it)
                dt = to_torch_dtype(a.dtype)
                shape = tuple(a.shape)
                args.append(torch.randn(shape, device="cuda").to(dt) if dt.is_floating_point
                            else torch.randint(0, 2, shape, device="cuda").to(dt))  # fmt: skip
            else:
                args.append(scalars[decl.name])
        with torch.no_grad():
            self.op(*args)
        torch.cuda.synchronize()
        self._warmed.add(key)

    # -- jax.vmap ---------------------------------------------------------------------------------------------
    def _vmap(self, size: int, batched: Sequence[bool], tensors: Sequence[Any], scalars: dict) -> tuple:
        """The mapped axis (leading in the batched inputs, as custom_vmap gives them) joins each one's group; an
        unbatched input of a group gets the axis by broadcasting; outputs must carry it."""
        import jax
        import jax.numpy as jnp

        grouped = [bool(a.shape) and str(a.shape[0]).startswith("*") for a in self.tensors]
        for k, (a, b) in enumerate(zip(self.tensors, batched, strict=True)):
            if b and not grouped[k]:
                raise BatchingError(self.name, f"input {a.name!r} is mapped, but its declared shape "
                                    f"{_shape(a)} does not begin with a '*' group that can take the mapped axis.",
                                    f"declare {a.name} as ('*B', ...), or map only inputs declared so.")  # fmt: skip
        groups = {a.shape[0] for a, b in zip(self.tensors, batched, strict=True) if b}
        args = []
        for k, (a, b, t) in enumerate(zip(self.tensors, batched, tensors, strict=True)):
            if not b and grouped[k] and a.shape[0] in groups:  # the same group: every member is mapped
                t = jnp.broadcast_to(t, (size, *t.shape))
            elif not b and k in self.mutated:
                raise BatchingError(self.name, f"input {a.name!r} is written in place, and its declared shape "
                                    f"{_shape(a)} has no group of the mapped inputs: the mapped call would write "
                                    "one value for every mapped element.", "map the call with jax.lax.map, or "
                                    "declare the written input with the mapped inputs' group.")  # fmt: skip
            args.append(t)
        one = [
            jax.ShapeDtypeStruct(t.shape[1:] if b else t.shape, t.dtype) for t, b in zip(tensors, batched, strict=True)
        ]
        unbatched = abstract_eval(self.op, *one, **scalars)
        mapped = abstract_eval(self.op, *[jax.ShapeDtypeStruct(t.shape, t.dtype) for t in args], **scalars)
        for k, (u, m) in enumerate(zip(unbatched, mapped, strict=True)):
            if tuple(m.shape) != (size, *u.shape):
                name = self.record.outputs[k].name
                raise BatchingError(self.name, f"output {name!r} does not carry the mapped axis (shape {m.shape} "
                                    f"for mapped inputs, {u.shape} for one element).", "declare the output's "
                                    "shape from a '*' group of the mapped inputs (SameAs, or a shape beginning "
                                    "with the group).")  # fmt: skip
        out = self.apply(args, scalars)
        written = [b or self.tensors[k].shape[0] in groups if grouped[k] else b
                   for k, b in enumerate(batched) if k in self.mutated]  # fmt: skip
        return tuple(out), tuple([True] * self.n_out + written)


class _Backward:
    """The declared backward in JAX (``jax.custom_vjp``), run as the PyTorch op's autograd runs it."""

    def __init__(self, op: Any, dry_run: bool) -> None:
        from ..autograd import _program, check_backward

        self.spec = op.backward
        self.sources, self.grad_of = check_backward(op.record.op_name, op.record, self.spec)
        self.program = _program(op.record, self.spec)
        self.dry_run = dry_run
        fn = self.spec.fn
        steps = [s.op for s in self.program.items if hasattr(s, "op")] if self.program else [fn]
        self.ops = {s.record.op_name: JaxOp(s, dry_run) for s in steps}

    def wrap(self, fwd_op: JaxOp, call: Any, scalars: dict) -> Any:
        import jax

        f = jax.custom_vjp(call)

        def fwd(*tensors: Any) -> tuple:
            outs = call(*tensors)
            return outs, (tensors, outs)

        def bwd(saved: tuple, cts: tuple) -> tuple:
            tensors, outs = saved
            args = self._args(fwd_op, tensors, outs, cts, scalars)
            grads = self._run(args)
            result: list[Any] = [None] * len(tensors)
            positions = {a.name: k for k, a in enumerate(fwd_op.tensors)}
            for k, g in zip(self.grad_of, grads, strict=True):
                result[positions[fwd_op.record.inputs[k].name]] = g
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

    def _run(self, args: list) -> list:
        if self.program is None:
            op = self.ops[self.spec.fn.record.op_name]
            got = op(*args)
            return list(got) if isinstance(got, tuple) else [got]
        env = dict(zip(self.spec.args, args, strict=True))
        needs = tuple(True for _ in self.grad_of)
        for k in self.program.plan(needs):
            it = self.program.items[k]
            if hasattr(it, "op"):
                self._step(it, env)
            else:
                env[it.name] = _allocate(it, env, self.program._sizes.get(k))
        return [env[r] for r in self.spec.returns]

    def _step(self, step: Any, env: dict) -> None:
        op = self.ops[step.op.record.op_name]
        tensors, scalars = op.split([env[a] for a in step.args], {})
        got = op.function(scalars)(*tensors)
        env.update(zip(step.outputs, got[: op.n_out], strict=True))
        tensor_args = [a for a, d in zip(step.args, op.record.inputs, strict=True) if isinstance(d, TensorArg)]
        for j, k in enumerate(op.mutated):  # the aliased results: the written buffers' new values
            env[tensor_args[k]] = got[op.n_out + j]


def _allocate(a: Any, env: dict, sizes_of: Any) -> Any:
    """A program's buffer as a JAX array (zeros: XLA has no uninitialized allocation), shaped and typed by the
    PyTorch program's own rules (``backward_program._allocate``) over meta tensors of the arrays, with the SM
    count of the GPU JAX runs on (device 0's; 132 without one, as geometry does)."""
    import jax.numpy as jnp

    from ..backward_program import _allocate as allocate

    meta = {k: torch.empty(tuple(v.shape), dtype=to_torch_dtype(v.dtype), device="meta")
            for k, v in env.items() if hasattr(v, "shape")}  # fmt: skip
    device = 0 if torch.cuda.is_available() else -1
    t = allocate(a, meta, None if sizes_of is None else lambda env, _first: sizes_of(env, device))
    return jnp.zeros(tuple(t.shape), to_jax_dtype(t.dtype))


def _attribute(py_type: str, v: Any) -> Any:
    """A scalar as the FFI attribute its schema type binds (``Attr<double>`` for a float, ``int64_t`` for an
    int, ``bool``); jax.ffi_call passes a Python float as f64 and an int as i64."""
    return {"float": float, "int": int, "bool": bool}[py_type](v)


def _shape(a: Any) -> str:
    return "(" + ", ".join(map(str, a.shape)) + ")" if a.shape else "(any shape)"


def jax_op(op: Any, *, dry_run: bool = False) -> JaxOp:
    """The JAX function of an opsmith op (``JaxOp``). Raises ``SpecError`` when the op cannot be called from
    JAX (``refusal``)."""
    return JaxOp(op, dry_run)


def cuda_kernel_op(*args: Any, **kw: Any) -> JaxOp:
    """``opsmith.cuda_kernel_op`` (same arguments: the op is registered for PyTorch too) as a JAX function."""
    from .. import api

    return JaxOp(api.cuda_kernel_op(*args, **kw))


def ptx_op(*args: Any, **kw: Any) -> JaxOp:
    """``opsmith.ptx_op`` (same arguments) as a JAX function."""
    from .. import api

    return JaxOp(api.ptx_op(*args, **kw))


def triton_op(*args: Any, **kw: Any) -> JaxOp:
    """``opsmith.triton_op`` (same arguments) as a JAX function."""
    from .. import api

    return JaxOp(api.triton_op(*args, **kw))
