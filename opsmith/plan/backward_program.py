"""Backward programs: a backward written as data, a tuple of ``Buffer`` allocations and ``Step`` op calls.

A backward often needs more than one kernel: RMSNorm's writes ``dx`` and per-program partial sums of
``dweight`` into a scratch buffer, then a second kernel reduces the partial rows. Written as a Python function
that is code only Python can run; written as a program it is data, checked at registration, run here in
Python, and generated as C++ by the native library (``native/``). A step runs only when a gradient someone
needs depends on it (on its outputs, or on a buffer it writes in place).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..declare.expr import EXPR_GLOBALS, ExprError, parse_size, to_python
from ..declare.record import KernelRecord, TensorArg
from ..declare.spec import Backward, Buffer, Step
from ..declare.validate import ident
from ..errors import SpecError

__all__ = ["Program", "check_backward", "is_program", "program_of"]


def is_program(fn: object) -> bool:
    return isinstance(fn, tuple | list) and all(isinstance(s, Buffer | Step) for s in fn) and bool(fn)


def _written(op: Any) -> list[int]:
    """Positions of the arguments an op writes in place (``Tensor(a!)`` in its schema)."""
    return [
        k for k, a in enumerate(op.overload._schema.arguments) if a.alias_info is not None and a.alias_info.is_write
    ]


@dataclass(frozen=True)
class _Alloc:
    name: str
    shape: tuple  # expression trees over names (refs are the names themselves); () with ``like``
    dtype: str  # "fixed:<torch name>" | "like:<name>" | "acc:<name>"
    like: str | None = None


class Program:
    """A checked program: what each step reads and writes, and which steps each set of needed gradients
    runs (computed once per set)."""

    def __init__(self, op_name: str, steps: Sequence[Buffer | Step], args: Sequence[str], tensor_args: set[str],
                 returns: Sequence[str]) -> None:  # fmt: skip
        self.op_name, self.returns = op_name, list(returns)
        self.items: list[_Alloc | Step] = []
        known, tensors = set(args), set(tensor_args)
        for k, s in enumerate(steps):
            field = f"backward.fn[{k}]"
            if isinstance(s, Buffer):
                self.items.append(self._alloc(field, s, known, tensors))
                known.add(s.name)
                tensors.add(s.name)
                continue
            self._check_step(field, s, known)
            known.update(s.outputs)
            tensors.update(s.outputs)
            self.items.append(s)
        missing = [r for r in self.returns if r not in known]
        if missing:
            raise SpecError(op_name, "backward.returns", f"{missing} are not made by the program.",
                            f"return names of buffers or step outputs: {sorted(known - set(args))}.")  # fmt: skip
        self._plans: dict[tuple[bool, ...], list[int]] = {}
        # Each buffer's sizes as a function, compiled once: building and evaluating the expression text per
        # call cost ~200 us of host time per RMSNorm backward (H200).
        self._sizes = {
            k: _size_fn(it.shape) for k, it in enumerate(self.items) if isinstance(it, _Alloc) and not it.like
        }

    def _alloc(self, field: str, b: Buffer, known: set[str], tensors: set[str]) -> _Alloc:
        ident(self.op_name, field + ".name", b.name)  # it names a value in generated code, Python and C++
        if b.name in known:
            raise SpecError(self.op_name, field + ".name", f"'{b.name}' is already a name of the program.",
                            "give every buffer its own name.")  # fmt: skip
        if b.like is not None:
            if b.like not in tensors:
                raise SpecError(self.op_name, field + ".like", f"'{b.like}' is not a tensor of the program.",
                                f"use one of {sorted(tensors)}.")  # fmt: skip
            return _Alloc(b.name, (), f"like:{b.like}", b.like)
        refs = {t: t for t in tensors}
        try:
            shape = tuple(parse_size(e, refs) for e in b.shape)
        except ExprError as e:
            raise SpecError(self.op_name, field + ".shape", f"{e}.", "use sizes like 'size(x, -1)'.") from None
        if isinstance(b.dtype, torch.dtype):
            return _Alloc(b.name, shape, f"fixed:{str(b.dtype).removeprefix('torch.')}")
        kind, _, ref = str(b.dtype).partition(":")
        if kind not in ("like", "acc") or ref not in tensors:
            raise SpecError(self.op_name, field + ".dtype", f"{b.dtype!r} is not a buffer dtype.",
                            "pass a torch.dtype, 'like:<tensor>' or 'acc:<tensor>'.")  # fmt: skip
        return _Alloc(b.name, shape, f"{kind}:{ref}")

    def _check_step(self, field: str, s: Step, known: set[str]) -> None:
        rec = getattr(s.op, "record", None)
        if rec is None or not hasattr(s.op, "overload"):
            raise SpecError(self.op_name, field + ".op", f"{s.op!r} is not an opsmith op.",
                            "a program's steps call opsmith ops; write a Python backward to call anything else.")  # fmt: skip
        if len(s.args) != len(rec.inputs) or len(s.outputs) != len(rec.outputs):
            raise SpecError(self.op_name, field, f"{rec.op_name} takes {len(rec.inputs)} arguments and returns "
                            f"{len(rec.outputs)}, the step passes {len(s.args)} and names {len(s.outputs)}.",
                            "pass one name per argument and name every output.")  # fmt: skip
        for j, name in enumerate(s.outputs):
            ident(self.op_name, f"{field}.outputs[{j}]", name)  # it names a value in generated code
            if name in known or name in s.outputs[:j]:
                raise SpecError(self.op_name, f"{field}.outputs[{j}]", f"'{name}' is already a name of the program.",
                                "give every step output its own name.")  # fmt: skip
        unknown = [a for a in s.args if a not in known]
        if unknown:
            raise SpecError(self.op_name, field + ".args", f"{unknown} are not defined before this step.",
                            f"use the backward's args, buffers or earlier outputs: {sorted(known)}.")  # fmt: skip

    def plan(self, needs: tuple[bool, ...]) -> list[int]:
        """Indices of the items to run for the gradients ``needs`` (aligned with ``returns``)."""
        hit = self._plans.get(needs)
        if hit is not None:
            return hit
        wanted = {r for r, n in zip(self.returns, needs, strict=True) if n}
        run: list[int] = []
        for k in range(len(self.items) - 1, -1, -1):
            it = self.items[k]
            if isinstance(it, _Alloc):
                if it.name in wanted:
                    run.append(k)
                    kind, _, ref = it.dtype.partition(":")
                    wanted |= ({ref} if kind != "fixed" else set()) | ({it.like} if it.like else _names(it.shape))
                continue
            writes = set(it.outputs) | {it.args[p] for p in _written(it.op)}
            if writes & wanted:
                run.append(k)
                wanted |= set(it.args)
        self._plans[needs] = run = sorted(run)
        return run

    def run(self, env: dict[str, Any], needs: tuple[bool, ...]) -> tuple:
        """Execute the items the needed gradients depend on; the gradients (None where not needed)."""
        for k in self.plan(needs):
            it = self.items[k]
            if isinstance(it, _Alloc):
                env[it.name] = _allocate(it, env, self._sizes.get(k))
                continue
            out = it.op(*(env[a] for a in it.args))
            outs = out if isinstance(out, tuple) else () if out is None else (out,)
            env.update(zip(it.outputs, outs, strict=True))
        return tuple(env[r] if n else None for r, n in zip(self.returns, needs, strict=True))


def _names(expr: object) -> set[str]:
    """Tensor names an expression (or a tuple of them) reads; refs are names here."""
    if isinstance(expr, tuple):
        return set().union(set(), *map(_names, expr))
    if isinstance(expr, list):
        head, *rest = expr
        return ({rest[0]} if head in ("numel", "size", "stride") else set()) | set().union(set(), *map(_names, rest))
    return set()


def _size_fn(shape: tuple) -> Any:
    """``lambda env, _first: (sizes...)`` for a buffer's shape (our own expression trees, printed)."""
    names = {n: f"env[{n!r}]" for n in _names(shape)} | {"sm_count": "_sms(_first)"}
    return eval(f"lambda env, _first: ({''.join(to_python(e, names) + ', ' for e in shape)})", EXPR_GLOBALS)


def _allocate(a: _Alloc, env: dict[str, Any], sizes_of: Any) -> torch.Tensor:
    kind, _, ref = a.dtype.partition(":")
    if a.like is not None:
        return torch.empty_like(env[a.like], memory_format=torch.contiguous_format)
    first = next(v for v in env.values() if isinstance(v, torch.Tensor))
    sizes = sizes_of(env, first)
    if kind == "fixed":
        dtype = getattr(torch, ref)
    else:
        dtype = env[ref].dtype
        if kind == "acc" and dtype in (torch.float16, torch.bfloat16):
            dtype = torch.float32
    return torch.empty(sizes, dtype=dtype, device=first.device)


# -- a Backward checked against the op's record (every backward path: Python, native C++, JAX) ----------------


def check_backward(op_name: str, record: KernelRecord, backward: Backward) -> tuple[list, list[int]]:
    """Resolve ``backward`` against the op's declaration: (where each arg comes from, the input index of
    each gradient). Raises SpecError naming the field and the fix."""
    if not isinstance(backward, Backward):
        raise SpecError(op_name, "backward", f"{type(backward).__name__} is not a Backward.",
                        "pass backward=Backward(fn, args=[...], grads=[...]).")  # fmt: skip
    from ..plan.backward_program import is_program

    if not callable(backward.fn) and not is_program(backward.fn):
        raise SpecError(op_name, "backward.fn", f"{backward.fn!r} is not callable.",
                        "pass an opsmith op, a Python function or a program (a tuple of Buffer and Step).")  # fmt: skip
    if record.mutated:
        raise SpecError(op_name, "backward", "the op writes an input in place, and opsmith cannot differentiate "
                        "in-place ops.", "return a new output instead of mutating an input.")  # fmt: skip
    ins = {a.name: k for k, a in enumerate(record.inputs)}
    outs = {o.name: k for k, o in enumerate(record.outputs)}
    sources: list[tuple[str, int]] = []
    for a in backward.args:
        if a in ins:
            sources.append(("in", ins[a]))
        elif a in outs:
            sources.append(("out", outs[a]))
        elif a.startswith("grad_") and a[5:] in outs:
            sources.append(("grad", outs[a[5:]]))
        else:
            known = list(ins) + list(outs) + [f"grad_{o}" for o in outs]
            raise SpecError(op_name, "backward.args", f"'{a}' is neither an input, an output nor an output's "
                            f"gradient.", f"use names from {known}.")  # fmt: skip
    for (kind, k), a in zip(sources, backward.args, strict=True):
        if kind in ("out", "grad") and record.outputs[k].when is not None:
            raise SpecError(op_name, "backward.args", f"'{a}' is an optional output's, which a call may leave out "
                            "(None): it has no gradient and cannot be saved for the backward.",
                            "compute what the backward needs from the inputs and required outputs, or declare "
                            "the output without optional=True.")  # fmt: skip
    if not any(kind == "grad" for kind, _ in sources):
        raise SpecError(op_name, "backward.args", "no output gradient is passed to the backward.",
                        f"name at least one of {[f'grad_{o}' for o in outs]}.")  # fmt: skip
    grad_of: list[int] = []
    for g in backward.grads:
        k = ins.get(g)
        if k is None or not isinstance(record.inputs[k], TensorArg):
            raise SpecError(op_name, "backward.grads", f"'{g}' is not a tensor input.",
                            f"name tensor inputs: {[a.name for a in record.tensor_inputs]}.")  # fmt: skip
        if k in grad_of:
            raise SpecError(op_name, "backward.grads", f"'{g}' is named twice.", "name each input once.")
        grad_of.append(k)
    if not grad_of:
        raise SpecError(op_name, "backward.grads", "no gradient is declared.", "name the inputs fn differentiates.")
    if is_program(backward.fn):
        if len(backward.returns) != len(grad_of):
            raise SpecError(op_name, "backward.returns", f"{list(backward.returns)} do not name one value per "
                            f"gradient {list(backward.grads)}.", "list, in the order of grads, the program's names "
                            "for them.")  # fmt: skip
        program_of(record, backward)  # its steps are checked now: a bad one leaves no op
    rec = getattr(backward.fn, "record", None)  # an opsmith op: its declaration must fit
    if isinstance(rec, KernelRecord) and rec.inputs and (len(rec.inputs) != len(sources)
                                                         or len(rec.outputs) != len(grad_of)):  # fmt: skip
        raise SpecError(op_name, "backward", f"the backward op {rec.op_name} takes {len(rec.inputs)} inputs and "
                            f"returns {len(rec.outputs)}, but args has {len(sources)} names and grads "
                            f"{len(grad_of)}.", "make args and grads match the backward op's declaration.")  # fmt: skip
    return sources, grad_of


def program_of(record: KernelRecord, backward: Backward) -> Any:
    """The checked program of a backward written as one (None for an op or a function)."""
    from ..plan.backward_program import Program, is_program

    if not is_program(backward.fn):
        return None
    outs = {o.name for o in record.outputs}
    tensors = {a for a in backward.args if a.startswith("grad_") or a in outs or
               any(t.name == a for t in record.tensor_inputs)}  # fmt: skip
    return Program(record.op_name, backward.fn, backward.args, tensors, backward.returns)
