"""The call plan: an op's record lowered once into the ordered steps of one call.

A call of an opsmith op checks its arguments, allocates its outputs, computes the kernel's extras and launch
sizes, chooses a config and a compiled variant, converts every argument to the kernel's C type and launches.
Four implementations serve calls: the Python eager code (``torchlib/eager.py``), the Python fake implementation that
tracing runs (``torchlib/fake.py``), and a native library's CUDA and Meta kernels (``native/codegen.py``). Each of
them only *prints* this plan, so a refusal, its message, a conversion or a launch size cannot differ between
them: every rule lives here. ``lowering.py`` builds the plan from the record.

The plan is a list of steps. Each step says what a real call does (CUDA tensors) and what a meta call does
(fake or meta tensors, sizes possibly symbolic): a meta call skips what needs data or a device (device,
layout copies, the launch) and applies a size check only where every size it reads is a plain integer.
Expression values are checked only where ``expr.bounds`` cannot prove them in range, so a plain op's call
pays for nothing it does not need.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..declare.expr import Facts
from ..declare.limits import FLOAT_MAX, GRID_MAX, INT32_MAX, INT_LIMITS, SMEM_MAX

# The limits (declare/limits.py) are the plan's vocabulary too: every printer reads them as ``P.INT32_MAX``.
__all__ = ["CallPlan", "INT_LIMITS", "FLOAT_MAX", "GRID_MAX", "INT32_MAX", "SMEM_AXIS", "SMEM_MAX"]

#: A ``GridCheck`` of this axis checks the dynamic shared memory a size expression gives, in [0, SMEM_MAX].
SMEM_AXIS = 3
_AXES = "xyz"


# -- steps ---------------------------------------------------------------------------------------------------
# ``k`` is a tensor input's position among the tensor inputs; refs in expressions are "i<k>" and "o<k>".


@dataclass(frozen=True)
class Given:
    """A required tensor input is a tensor: torch's dispatcher passes None (an undefined tensor in C++) for a
    ``Tensor`` argument, which every later step would read. First, before any other check."""

    k: int


@dataclass(frozen=True)
class Device:
    """The tensor is a CUDA tensor (the first one's device is the call's), on the call's device. Real only."""

    k: int


@dataclass(frozen=True)
class Dtype:
    """The tensor's dtype is ``dtype``, or one of them (a tuple: a declared set)."""

    k: int
    dtype: str | tuple[str, ...]


@dataclass(frozen=True)
class Rank:
    """``exact`` dims, or at least ``least`` (the geometry, a reduced axis or an extra needs them).
    ``decl``: the declared shape's text where it is what decides the rank ("(*B, C)"), for the message."""

    k: int
    exact: int | None
    least: int
    decl: str = ""


@dataclass(frozen=True)
class Numel:
    """Read the tensor's numel into var ``n<k>``; ``narrow``: refuse more than 2^31 - 1 elements (a 32-bit
    kernel). Before the layout step, so a tensor too large is refused before it is copied."""

    k: int
    narrow: bool


@dataclass(frozen=True)
class Layout:
    """Make the tensor addressable by the kernel (``axes``: those whose strides it is given): copy it
    (``policy`` "make") or refuse it ("require"). Real only."""

    k: int
    axes: tuple[int, ...]
    policy: str


@dataclass(frozen=True)
class Span:
    """A 32-bit kernel addresses this tensor with its strides: the elements its view spans (the largest
    offset + 1) must be at most 2^31 - 1, or ``row * stride + col`` wraps. (A contiguous tensor spans its
    numel, which ``Numel`` checked.)"""

    k: int
    axes: tuple[int, ...]


@dataclass(frozen=True)
class Like:
    """The tensor has the dtype of tensor ``other`` (one template parameter types both)."""

    k: int
    other: int


@dataclass(frozen=True)
class Align:
    """The tensor's data pointer is a multiple of ``bytes``: a misaligned view is copied (``policy`` "make")
    or refused ("require"). Real only, after the layout step (a copy is aligned)."""

    k: int
    bytes: int
    policy: str


@dataclass(frozen=True)
class Shape:
    """The declared shape (``decl``, its text) against the sizes the names are bound to. ``ties``: per
    checked axis ``(axis, want)``, ``want`` an int or ``("size", j, axis_j)``; a group as
    ``(("group", start, after), ("group", j, start_j, after_j))``. ``names``: ``(name, want, tensor j's
    name)`` for each name whose value the message states. The rank was checked before."""

    k: int
    ties: tuple
    decl: str
    names: tuple = ()


@dataclass(frozen=True)
class ShapeOf:
    """The tensor has the whole shape of tensor ``other`` (``SameAs`` of an input with no declared shape)."""

    k: int
    other: int


@dataclass(frozen=True)
class Require:
    """A precondition on the call's sizes: ``expr`` (``label`` in the user's words) ``kind`` "divisible" (by
    ``value``), "at_most", "at_least" or "one_of" (a tuple). ``arg``: the tensor the message names; ``why``:
    the kernel's reason; ``where``/``wide``: as ``Extra``'s."""

    kind: str
    expr: Any
    value: Any
    label: str
    arg: str
    why: str = ""
    where: tuple[str, str] = ("", "")
    wide: bool = False


@dataclass(frozen=True)
class Scalar:
    """A scalar argument (input position ``pos``) within its C type's range: ``lo``..``hi`` for an integer
    (the C type's range within int64, which a schema int holds), FLOAT_MAX for a float."""

    pos: int
    ctype: str
    py_type: str
    lo: int = 0
    hi: int = 0


@dataclass(frozen=True)
class Alloc:
    """Output ``k``: ``rule`` "same" (the shape of tensor ``src``), "reduce" (``dims`` removed or kept as 1),
    "shape" (a declared shape: ``entries``, per axis an int, an expression, or ``("group", j, start, after)``
    for tensor j's axes) or "meta" (the op's meta_fn allocates every output; Python only). Its dtype:
    ``dtype`` when fixed, else tensor ``dtype_from``'s. ``narrow``: a 32-bit kernel's output must hold at
    most 2^31 - 1 elements (checked before it is allocated, where ``bounds`` cannot prove it)."""

    k: int
    rule: str
    src: int
    dtype: str | None
    dtype_from: int
    dims: tuple[int, ...] = ()
    keepdim: bool = False
    entries: tuple = ()
    narrow: bool = False
    init: int | float | None = None  # filled with this value once allocated (a kernel that accumulates)
    #: The dtype comes from an input of open dtype: whether it holds ``init`` is checked per call (a known
    #: dtype was checked at registration).
    check_init: bool = False
    #: A declared shape whose bytes may pass 2^63 - 1: checked before it is allocated (torch's own refusal
    #: differs per path, and a stable-ABI library reports only that its allocation failed).
    wide_bytes: bool = False
    #: An optional output: allocated only when the scalar argument at this position (its flag) is true, else
    #: None (a null pointer to the kernel, None returned).
    when: int | None = None


@dataclass(frozen=True)
class ReturnIfEmpty:
    """Nothing to launch when every written tensor (``written``: numel expressions) is empty."""

    written: tuple


@dataclass(frozen=True)
class RefuseEmpty:
    """A non-empty written tensor cannot be filled from an empty input (the first empty one is named). Not
    emitted where every output declares an ``init``: there an empty input is no data and the kernel runs."""

    tensors: tuple[int, ...]


@dataclass(frozen=True)
class ShareStrides:
    """Tensors one stride parameter describes must agree on ``axis`` (``layout.share_strides``). Real only."""

    refs: tuple[str, ...]
    axis: int


@dataclass(frozen=True)
class Extra:
    """Extra ``k``: ``expr`` into var ``x<k>``, of C type ``ctype``; ``check``: the (lo, hi) its value must
    lie in, where ``bounds`` cannot prove it; ``label``: how messages name it; ``static``: compiled into the
    kernel (part of the specialization). Real only; a meta call checks the range where sizes are static."""

    k: int
    expr: Any
    ctype: str
    label: str
    check: tuple[int, int] | None = None
    hint: str = ""
    static: bool = False
    wide: bool = False
    where: tuple[str, str] = ("", "")  # (argument, words) a failing division or overflow names


@dataclass(frozen=True)
class Extent:
    """A 32-bit kernel's launch covers ``expr`` elements with ``blockIdx.x * blockDim.x + threadIdx.x``: at
    most ``limit``, or its top thread index wraps. ``label``/``arg``: how the message names it."""

    expr: Any
    limit: int
    label: str
    arg: str
    wide: bool = False


@dataclass(frozen=True)
class GridCheck:
    """Config ``config``'s grid along ``axis`` lies in [1, GRID_MAX[axis]] (a launch of 2^32 + k blocks would
    launch k: cuLaunchKernel takes unsigned ints). Checked before every launch of that config. ``axis``
    ``SMEM_AXIS``: the dynamic shared memory a size expression gives lies in [0, SMEM_MAX]."""

    config: int
    axis: int
    expr: Any
    label: str
    arg: str
    low: bool  # the value may be below 1
    high: bool  # the value may pass GRID_MAX[axis]
    wide: bool = False


@dataclass(frozen=True)
class Param:
    """A kernel parameter in the kernel's order: ``source`` ("in", k) tensor input k's pointer, ("out", k)
    output k's pointer, ("scalar", pos) a scalar input, ("extra", k) extra k; ``ctype`` its C type. A float
    scalar for an f16/bf16 parameter is rounded once, to nearest even, from its double value."""

    source: tuple[str, int]
    ctype: str


@dataclass(frozen=True)
class Launch:
    """Choosing and launching: per config its grid (three expressions, None for a ``Custom`` geometry), the
    checks that grid needs (made for the config a call launches, tuning's trial launches included), block and
    shared memory; the tuning key (after the tensors' dtypes: (expression, rounded to a power of two)); what
    a call specializes on (``spec``: ("dtype", k), ("align", p), ("int", p), ("static", e)); the kernel's
    parameters in its order."""

    grids: tuple[tuple[Any, Any, Any] | None, ...]
    grid_checks: tuple[tuple[GridCheck, ...], ...]
    blocks: tuple[tuple[int, int, int], ...]
    shared_mem: tuple[Any, ...]  # per config: bytes, or a size expression computed per call
    tuned: bool
    tune_key: tuple
    tune_default: int
    spec: tuple[tuple[str, int], ...]
    params: tuple[Param, ...]
    #: Per heuristic (``("heur", h)`` in ``spec``): its distinct expressions; one is the value, several are
    #: per config (``KernelRecord.heuristics[h]["pick"]``).
    heuristics: tuple[tuple[Any, ...], ...] = ()
    #: Every output declares an ``init`` and holds it before the launch: a grid checked to be empty along an
    #: axis (0 blocks, which the checks then allow) launches nothing and returns the outputs as they are.
    empty_ok: bool = False


@dataclass(frozen=True)
class CallPlan:
    """The steps of one call of ``op``, in order. ``names``: every argument's declared name (schema order);
    ``tensors``: the tensor inputs' positions among the arguments; ``outputs``: output names;
    ``labels``: ref -> declared name; ``mutated``: tensor inputs written in place."""

    op: str
    names: tuple[str, ...]
    tensors: tuple[int, ...]
    outputs: tuple[str, ...]
    steps: tuple[Any, ...]
    launch: Launch | None
    labels: dict[str, str] = field(default_factory=dict)
    mutated: tuple[int, ...] = ()
    #: What the guards proved for the expressions after them (which divisions need a zero check).
    facts: Facts = field(default_factory=Facts)
    #: What holds before the empty-tensor steps (for requirements and output sizes): the 32-bit limits only.
    early: Facts = field(default_factory=Facts)
    #: Tensor inputs a call may pass as None: their steps run when they are given (``about``), their numel
    #: var holds 0 when not, and the expressions read their sizes through ``["present", ref]``.
    optional: tuple[int, ...] = ()

    def about(self, step: Any) -> tuple[int, ...]:
        """The optional tensors ``step`` reads, which must all be given for it to run."""
        if not self.optional or not isinstance(
            step, Device | Dtype | Rank | Layout | Span | Like | Align | Shape | ShapeOf
        ):  # Numel and RefuseEmpty print presence themselves
            return ()
        ks = [getattr(step, "k", None), getattr(step, "other", None)]
        return tuple(k for k in ks if k is not None and k in self.optional)

    @property
    def tensor_names(self) -> list[str]:
        return [self.names[p] for p in self.tensors]


def empty_axes(launch: Launch | None) -> set[int]:
    """The grid axes that may be 0 blocks in some config (checked to lie in [0, GRID_MAX]): an op whose
    outputs all declare an ``init`` skips such a launch (``Launch.empty_ok``)."""
    if launch is None or not launch.empty_ok:
        return set()
    return {g.axis for checks in launch.grid_checks for g in checks if g.low and g.axis != SMEM_AXIS}
