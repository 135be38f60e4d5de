"""What ``opsmith check`` checks an op with: the case (``CheckCase``: the op, an input builder, a reference,
shapes, dtypes, tolerances), the report (``CheckReport``), and the machinery every check shares: samples
(non-contiguous, zero-size), outputs landing in poisoned memory, comparison against the reference. The checks
themselves and ``check`` are in ``checking/harness.py``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..errors import SpecError

__all__ = ["CHECKS", "CheckCase", "CheckReport", "load_cases", "noncontiguous", "poisoned", "zero_size"]

Shape = tuple[int, ...]
# assert_close tolerances per dtype when the case gives none: float32/float64 follow torch.testing; the
# half types allow the rounding of one output (bf16 keeps 8 bits: 2^-8 = 0.4% per value, summed over a row).
_LOWP_TOL = {"atol": 2e-2, "rtol": 2e-2}
CHECKS = ("opcheck", "numerics", "compile-static", "compile-dynamic", "export", "cuda-graph", "stream", "autograd",
          "sharding")  # fmt: skip


@dataclass
class CheckCase:
    """An op with how to feed it and what it should return.

    ``inputs(shape, dtype, device)`` builds one call's positional arguments for a problem of ``shape``
    (fresh random values each time). ``reference(*args)`` returns what the op returns (or, for an op that
    writes an input in place, writes it the same way); default: the op's own ``reference=``. ``shapes``: the
    fixed example shapes (the first is used for graph, stream and gradient checks); hypothesis draws more of
    the same ranks, each dimension up to twice the examples'. ``tol``: ``assert_close`` keyword arguments for
    float32/float64 results, or one float for atol and rtol alike (default: torch.testing's); ``lowp_tol`` for
    float16/bfloat16. ``differentiable``: None = read from the op's dispatcher entry (an Autograd kernel is
    registered)."""

    op: Callable[..., Any]
    inputs: Callable[[Shape, torch.dtype, torch.device], tuple]
    reference: Callable[..., Any] | None = None
    shapes: Sequence[Shape] = ((1000,), (3, 257))
    dtypes: Sequence[torch.dtype] = (torch.float32,)
    tol: dict | float = field(default_factory=dict)
    lowp_tol: dict | float = field(default_factory=lambda: dict(_LOWP_TOL))
    differentiable: bool | None = None
    name: str | None = None

    def __post_init__(self) -> None:
        if self.reference is None:  # the op's own CPU reference (``reference=`` at registration)
            self.reference = getattr(self.op, "reference", None)
            if self.reference is None:
                raise SpecError(self.name or getattr(self.op, "__name__", "CheckCase"), "reference", "neither the "
                                "case nor the op has a reference to compare with.", "pass reference= to CheckCase, "
                                "or register the op with reference=.")  # fmt: skip
        # A float is one tolerance for atol and rtol alike (tol=1e-4), as a dict is assert_close's keywords.
        for name in ("tol", "lowp_tol"):
            v = getattr(self, name)
            if isinstance(v, int | float) and not isinstance(v, bool) and v >= 0:
                setattr(self, name, {"atol": float(v), "rtol": float(v)})
            elif not isinstance(v, dict) or not all(isinstance(k, str) for k in v):
                raise SpecError(self.name or "CheckCase", name, f"{v!r} is neither a tolerance nor a dict of "
                                "assert_close keywords.", f"pass {name}=1e-4 or {name}={{'atol': 1e-4, 'rtol': 1e-3}}.")  # fmt: skip

    def tolerance(self, dtype: torch.dtype) -> dict:
        return dict(self.lowp_tol) if dtype in (torch.float16, torch.bfloat16) else dict(self.tol)

    def samples(self, device: torch.device, dtype: torch.dtype, solver: Any = None) -> list[tuple]:
        """The example shapes, the last one again with non-contiguous tensors (but those the op writes in
        place, which must be contiguous), and an empty problem. With a ``solver`` (``check_samples.ShapeSolver``)
        each shape is first fitted to the op's preconditions; a shape no candidate fits is left out."""

        def fit(shape: Shape) -> Shape | None:
            return tuple(shape) if solver is None else solver.fit(shape, dtype)

        shapes = [s for s in (fit(tuple(s)) for s in self.shapes) if s is not None]
        out = [self.inputs(s, dtype, device) for s in shapes]
        written = self.written_args()
        if shapes:
            last = self.inputs(shapes[-1], dtype, device)
            flags = _flags(self.op)
            if flags and len(last) == len(self.op.record.inputs):  # optional outputs asked for elsewhere (blamed),
                last = (*last[:-flags], *(False,) * flags)  # left out here: both forms compared with the reference
            out.append(tuple(a if k in written else noncontiguous(a) for k, a in enumerate(last)))
        # An empty problem, as fresh empty tensors: an empty view with a storage offset (a chunk of an empty
        # tensor) holds nothing, and opcheck's own input cloning fails on it (torch._dynamo.utils.clone_input).
        # The first axis at 0 of a fitted shape: 0 is a multiple of anything, so the fit holds.
        empty = self.inputs(zero_size(shapes[0] if shapes else tuple(self.shapes[0])), dtype, device)
        out.append(tuple(torch.empty(a.shape, dtype=a.dtype, device=a.device)
                         if isinstance(a, torch.Tensor) and a.numel() == 0 else a for a in empty))  # fmt: skip
        return out

    @property
    def overload(self) -> torch._ops.OpOverload | None:
        return overload_of(self.op)

    def written_args(self) -> set[int]:
        """Positions of the arguments the op's schema says it mutates (``Tensor(a!)``)."""
        ov = self.overload
        if ov is None:
            return set()
        return {k for k, a in enumerate(ov._schema.arguments) if a.alias_info is not None and a.alias_info.is_write}

    @property
    def label(self) -> str:
        ov = self.overload
        return self.name or (ov.name() if ov is not None else getattr(self.op, "__name__", repr(self.op)))


@dataclass
class CheckReport:
    """The rows of one ``check`` run: (check, result, detail), result in pass / FAIL / ERROR / skip / traced.
    ``pass``: the op's kernel ran and matched; ``FAIL``: the op's fault; ``ERROR``: the case's own ``inputs()`` or
    reference raised, so the row tested nothing (the case's fault, not the op's); ``traced``: the op traced on fake
    CUDA tensors, nothing ran (no GPU)."""

    label: str
    device: str
    rows: list[tuple[str, str, str]] = field(default_factory=list)
    #: Deprecation warnings raised while the rows ran, hidden (``OPSMITH_CHECK_WARNINGS=1`` shows them).
    hidden_warnings: int = 0

    @property
    def ok(self) -> bool:
        return all(r not in ("FAIL", "ERROR") for _, r, _ in self.rows)

    @property
    def failures(self) -> list[tuple[str, str, str]]:
        """The FAIL rows (the op's) and the ERROR rows (the case's)."""
        return [row for row in self.rows if row[1] in ("FAIL", "ERROR")]

    def table(self) -> str:
        w = max(len(c) for c, _, _ in self.rows) if self.rows else 5
        lines = [f"opsmith check: {self.label} on {self.device}", f"{'check'.ljust(w)}  result  detail"]
        for c, r, d in self.rows:
            first, *rest = d.splitlines() or [""]
            lines.append(f"{c.ljust(w)}  {r.ljust(6)}  {first}")
            lines += [f"{''.ljust(w)}          {x}" for x in rest[:12]]
        failed = sum(r == "FAIL" for _, r, _ in self.rows)
        errors = sum(r == "ERROR" for _, r, _ in self.rows)
        traced = sum(r == "traced" for _, r, _ in self.rows)
        lines.append(f"{sum(r == 'pass' for _, r, _ in self.rows)} passed, {failed} failed, "
                     + (f"{errors} errors of the case, " if errors else "")
                     + f"{sum(r == 'skip' for _, r, _ in self.rows)} skipped"
                     + (f", {traced} traced on fake tensors (nothing ran)" if traced else ""))  # fmt: skip
        if self.hidden_warnings:
            lines.append(f"({self.hidden_warnings} deprecation warnings from the APIs the rows call were hidden; "
                         "OPSMITH_CHECK_WARNINGS=1 shows them)")  # fmt: skip
        return "\n".join(lines)


class _Skip(Exception):
    """A check that cannot run here (no GPU, no float64, no hypothesis): reported as skip with the reason."""


class CaseError(Exception):
    """The case's own ``inputs()`` or reference raised: the row is the case's ERROR, never the op's FAIL."""


def blamed(case: CheckCase) -> CheckCase:
    """``case`` with its ``inputs`` and ``reference`` raising ``CaseError`` for their own exceptions, naming the
    shape and dtype (a builder that cannot make a grown or empty shape; a reference that fails on it)."""
    inputs, reference = case.inputs, case.reference
    assert reference is not None  # __post_init__ took the op's

    flags = _flags(case.op)

    def built(shape: Shape, dtype: torch.dtype, device: torch.device) -> tuple:
        try:
            args = inputs(shape, dtype, device)
            if flags and len(args) == len(case.op.record.inputs) - flags:  # every optional output asked for
                return (*args, *(True,) * flags)
            return args
        except (_Skip, CaseError):
            raise
        except Exception as e:
            raise CaseError(f"the case's inputs() raised on shape {tuple(shape)}, {dtype}, {device}: "
                            f"{type(e).__name__}: {e}. Fix: make the case build that shape, or narrow its "
                            "shapes (the op was not run).") from e  # fmt: skip

    def referenced(*args: Any) -> Any:
        try:
            return reference(*args)
        except (_Skip, CaseError):
            raise
        except Exception as e:
            shapes = [tuple(a.shape) for a in args if isinstance(a, torch.Tensor)]
            raise CaseError(f"the reference raised on inputs of shapes {shapes}: {type(e).__name__}: {e}. Fix: make "
                            "the reference take every shape the op declares (nothing is compared without it).") from e  # fmt: skip

    return dataclasses.replace(case, inputs=built, reference=referenced)


def _flags(op: Any) -> int:
    """How many optional outputs ``op`` declares (their flags are its last arguments)."""
    return sum(1 for a in getattr(getattr(op, "record", None), "inputs", ()) if getattr(a, "flag", False))


def overload_of(op: Callable) -> torch._ops.OpOverload | None:
    from ..torchlib.registration import Op

    if isinstance(op, Op):
        return op.overload
    if isinstance(op, torch._ops.OpOverload):
        return op
    if isinstance(op, torch._ops.OpOverloadPacket):
        return op.default
    return None


def noncontiguous(a: Any) -> Any:
    """The same values in a tensor whose last axis has stride 2 (any rank >= 1); other values unchanged."""
    if not isinstance(a, torch.Tensor) or a.dim() == 0 or a.numel() == 0:
        return a
    wide = torch.empty(*a.shape[:-1], 2 * a.shape[-1], dtype=a.dtype, device=a.device)
    view = wide[..., ::2]
    view.copy_(a)
    return view


def zero_size(shape: Shape) -> Shape:
    return (0, *tuple(shape)[1:]) if shape else shape


def _clone(args: Sequence) -> list:
    return [a.detach().clone() if isinstance(a, torch.Tensor) else a for a in args]


def _as_tuple(v: Any) -> tuple:
    if v is None:
        return ()
    return tuple(v) if isinstance(v, tuple | list) else (v,)


_MIB = 1 << 20


@contextlib.contextmanager
def poisoned(device: torch.device, nbytes: int | Sequence[int]) -> Iterator[bool]:
    """Allocations inside come from a private memory pool whose every byte was set to 0xFF first, so an
    element a kernel never writes reads NaN (floats) or all-ones bits (integers). Yields whether it could
    (a CUDA device and ``torch.cuda.MemPool``).

    Why a pool: filling and freeing blocks of the outputs' size in the shared caching allocator does not
    make the next allocation reuse them (a fresh 7x1000 float tensor came back unpoisoned on an H100). A
    private pool holds only the poisoned segments: the allocator's small pool (requests up to 1 MiB, carved
    from 2 MiB segments) and large pool (from segments of at least 20 MiB) are both filled."""
    if device.type != "cuda" or not hasattr(torch.cuda, "MemPool") or not hasattr(torch.cuda, "use_mem_pool"):
        yield False
        return
    if device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    sizes = [nbytes] if isinstance(nbytes, int) else list(nbytes)
    total = sum(sizes)
    pool = torch.cuda.MemPool()
    with torch.cuda.use_mem_pool(pool, device=device):
        small = [torch.empty(_MIB, dtype=torch.uint8, device=device) for _ in range(2 * (total // (2 * _MIB)) + 4)]
        # Besides one block for everything, one of each large request's own rounded size: on the H200 a 16 MiB
        # request came from fresh (zeroed) memory rather than from a poisoned 34 MiB free block.
        exact = [-(-n // (2 * _MIB)) * 2 * _MIB for n in sizes if n > _MIB]
        large = [
            torch.empty(n, dtype=torch.uint8, device=device) for n in (*exact, max(20 * _MIB, 2 * total + 2 * _MIB))
        ]
        for b in (*small, *large):
            b.fill_(255)
        del small, large  # back to the pool's free lists, poisoned
        yield True
    # ``pool`` stays referenced by the tensors allocated from it until they are freed.


def _compare(case: CheckCase, got_ret: Any, got_args: Sequence, want_ret: Any, want_args: Sequence,
             dtype: torch.dtype, what: str) -> None:  # fmt: skip
    """Returned values and every tensor argument (an in-place op's result) must match."""
    got, want = _as_tuple(got_ret), _as_tuple(want_ret)
    if len(got) != len(want):
        raise AssertionError(f"{what}: the op returned {len(got)} values, the reference {len(want)}")
    pairs = list(zip(got, want, strict=True))
    pairs += [(g, w) for g, w in zip(got_args, want_args, strict=True) if isinstance(g, torch.Tensor)]
    for k, (g, w) in enumerate(pairs):
        if g is None or w is None:  # an optional output left out: None on both sides, or a mistake
            if g is not w:
                raise AssertionError(f"{what}: value {k} is {'None' if g is None else 'a tensor'}, the reference's "
                                     f"{'None' if w is None else 'a tensor'}")  # fmt: skip
            continue
        if isinstance(w, torch.Tensor) and isinstance(g, torch.Tensor):
            if g.shape != w.shape:
                raise AssertionError(f"{what}: value {k} has shape {tuple(g.shape)}, the reference {tuple(w.shape)}")
            w = w.to(g.dtype)
        torch.testing.assert_close(g, w, **case.tolerance(dtype), msg=lambda m, k=k: f"{what}, value {k}: {m}")


def _run_and_compare(case: CheckCase, args: Sequence, dtype: torch.dtype, what: str,
                     fn: Callable | None = None) -> bool:  # fmt: skip
    """Run the op (or ``fn``) on ``args`` with its allocations poisoned and compare with the reference;
    returns whether the poisoning was possible."""
    ref_args = _clone(args)
    want = case.reference(*ref_args)
    outs = [t for t in (*_as_tuple(want), *args) if isinstance(t, torch.Tensor)]
    device = next((t.device for t in outs), torch.device("cpu"))
    with poisoned(device, [t.numel() * t.element_size() for t in outs]) as poison:
        got = (fn or case.op)(*args)
    _compare(case, got, args, want, ref_args, dtype, what)
    return poison


def _describe(args: Sequence) -> str:
    return ", ".join(f"{tuple(a.shape)}" + ("" if a.is_contiguous() else " strided") if isinstance(a, torch.Tensor)
                     else repr(a) for a in args)  # fmt: skip


def _is_float(a: Any) -> bool:
    return isinstance(a, torch.Tensor) and a.is_floating_point()


def is_differentiable(case: CheckCase) -> bool:
    if case.differentiable is not None:
        return case.differentiable
    declared = getattr(case.op, "differentiable", None)  # an opsmith op: it declares a backward or refuses
    if isinstance(declared, bool):
        return declared
    ov = case.overload
    if ov is None:
        return False
    return torch._C._dispatch_has_kernel_for_dispatch_key(ov.name(), "Autograd") or \
        torch._C._dispatch_has_kernel_for_dispatch_key(ov.name(), "AutogradCUDA")  # fmt: skip


def load_cases(target: str) -> list:
    """The CheckCases named by ``MODULE:NAME``."""
    from ..torchlib.registration import Op
    from .targets import TargetError, as_list, load

    ops = (Op, torch._ops.OpOverload, torch._ops.OpOverloadPacket)
    obj = load(target, "a CheckCase", "mypkg.ops:RELU_CASE", (CheckCase, *ops))
    cases = as_list(obj)
    if any(isinstance(c, ops) for c in cases):
        raise TargetError(f"'{target}' is an op, not a CheckCase: a check needs inputs to call it with and a "
                          "reference to compare with. Fix: define RELU_CASE = opsmith.CheckCase(op, inputs=lambda "
                          "shape, dtype, device: (torch.randn(shape, device=device, dtype=dtype),), reference=...) "
                          "beside it (reference= may be left out when the op was registered with one) and run "
                          f"opsmith check {target.partition(':')[0]}:RELU_CASE.")  # fmt: skip
    if not cases or not all(isinstance(c, CheckCase) for c in cases):
        raise TargetError(f"'{target}' is not a CheckCase, a list of them or a function returning them (got "
                          f"{type(obj).__name__}). Fix: wrap the op as opsmith.CheckCase(op, inputs=..., "
                          "reference=...).")  # fmt: skip
    return cases
