"""The declaration DSL: what a kernel takes, what it returns, and how it is launched.

These are plain frozen dataclasses with no behaviour; ``validate.py`` checks them against each other,
``binding.py`` against the kernel's own parameters, and ``record.py`` turns them into a serializable record.

Binding to the kernel's parameters: by name when every declared name (inputs, scalars, named extras,
outputs) matches one of the kernel's parameter names (``x`` also matches ``x_ptr``), in the kernel's own
order; otherwise by the default calling convention ``(tensor/scalar inputs in declaration order...,
extras..., outputs...)``, or by an explicit ``param_order``. Tensors are passed as pointers to their first
element; scalars and extras by value.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

__all__ = [
    "AtLeast",
    "AtMost",
    "Autotune",
    "Backward",
    "Buffer",
    "Config",
    "Const",
    "Custom",
    "Dim",
    "DimSize",
    "Divisible",
    "DtypeOf",
    "Elementwise",
    "Grid",
    "InputDecl",
    "KernelSpec",
    "Numel",
    "OneOf",
    "OutputDecl",
    "Present",
    "ReduceDims",
    "Reduction",
    "Requirement",
    "SameAs",
    "ScalarInput",
    "Size",
    "Step",
    "Stride",
    "TuneDim",
]

IndexType = Literal["int32", "int64"] | torch.dtype  # torch.int32 / torch.int64, or their names


def index_type_name(dtype: object) -> object:
    """``torch.int32`` / ``torch.int64`` as the record's names ("int32", "int64"); anything else unchanged
    (the caller refuses it, naming the field)."""
    return str(dtype).removeprefix("torch.") if dtype in (torch.int32, torch.int64) else dtype


@dataclass(frozen=True)
class InputDecl:
    """A tensor input, passed to the kernel as a pointer.

    dtype: the element type the kernel expects. ``None`` reads it from the kernel's signature
        (``const float* x`` means float32); a mismatch between the two is refused at registration. The name
        of another tensor input (``InputDecl("b", dtype="a")``): whatever dtype that input has in a call (a
        Triton matmul's operands, which ``tl.dot`` needs alike). A set (``{torch.float16, torch.bfloat16,
        torch.float32}``): any of those, refused otherwise before launch on every path (a Triton kernel or a
        ``{T_x}`` template compiles one per dtype); where the kernel's parameter fixes one, it must be in the set.
    contiguous: what a call does with a non-contiguous tensor: ``"make"`` copies it to a contiguous
        tensor first (the kernel sees dense row-major data); ``"require"`` refuses it with an error.
    ndim: if set, calls with another rank are refused.
    mutates: the kernel writes this tensor in place (schema ``Tensor(a!)``). The caller's tensor must be
        contiguous, since a contiguous copy would take the writes instead (so ``contiguous`` must be
        ``"require"``); the autotuner restores it between trial runs.
    shape: the shape calls must pass, one entry per axis:

        * a name (``"M"``, ``"K"``): a named dimension, one size wherever the call names it (every input
          and output of the op): ``a: ("M", "K")``, ``b: ("K", "N")``;
        * ``"*B"``: a group of any number of dims (zero included) where it stands, the same sizes wherever
          it is named: ``x: ("*B", "C")`` is a batch of rows of ``C``; one group per shape;
        * an int: that exact size; None: any size;
        * a size expression over the names (``("M", "2 * N")``, ``("B * S", "H")``): checked against the names
          bound elsewhere; a single unbound name written as ``a * N + b`` is bound by it, solved from this axis
          (``"2 * N"``: N = size // 2, and an odd size is refused); DTensor never shards such an axis;
        * ``DimSize(other_input, axis)``: the size of another input's axis (the older spelling of a name).

        ``SameAs("x")``: the shape of input ``x`` (its declared shape, or whatever shape ``x`` has).
        A shape implies the rank (exactly, or at least the named axes with a group). A kernel that indexes
        this tensor by another's sizes reads out of bounds without it.
    align: the byte alignment the kernel needs of the tensor's data pointer (a 128-bit vector load needs 16).
        A misaligned view (``x[1:]``) is copied to a fresh, aligned tensor where ``contiguous="make"``, and
        refused where ``"require"``.
    optional: the call may pass ``None`` (schema ``Tensor?``): a CUDA C++ or PTX kernel then gets a null pointer,
        a Triton kernel ``None`` (compiled in, as Triton's JIT does). ``Present(name)`` tells the kernel which
        (Liger's ``HAS_WEIGHT``); a size or stride of an absent tensor reads 0. Every check applies when the
        tensor is there. An optional input cannot be the first tensor input (it sets the call's device) or the
        one that binds a named dimension, an output's shape or dtype.
    absent: what an optional input's ``None`` reaches the kernel as. ``"none"``: a null pointer (Triton: None,
        compiled in). ``"dummy"``: a valid pointer the kernel may offset but never reads or writes (the data of
        the call's first tensor input, typed as this input's dtype), for kernels that move the pointer before
        their flag says whether it is read: Liger's JSD does ``label_ptr += pid`` unconditionally, and its host
        passes ``torch.empty(1)``. Needs the input's dtype declared (one dtype, or another input's name): the
        dummy compiles as that pointer type.
    """

    name: str
    dtype: torch.dtype | str | set[torch.dtype] | frozenset[torch.dtype] | None = None
    contiguous: Literal["make", "require"] = "make"
    ndim: int | None = None
    mutates: bool = False
    shape: tuple[int | str | DimSize | None, ...] | SameAs | None = None
    align: int | None = None
    optional: bool = False
    absent: Literal["none", "dummy"] = "none"


@dataclass(frozen=True)
class ScalarInput:
    """A scalar input forwarded by value at its position among the inputs. ``py_type``: float, int or bool.

    The C type comes from the kernel's signature (``float alpha`` or ``double alpha``); without one,
    float is passed as a 32-bit float, int as a 32-bit int and bool as one byte.
    """

    name: str
    py_type: type


@dataclass(frozen=True)
class DtypeOf:
    """A Triton constexpr set per call to the Triton dtype of tensor input ``input`` (``tl.bfloat16`` for a
    bfloat16 tensor), as Liger-Kernel's host code passes ``X_dtype=torch_to_triton_dtype[X.dtype]``:
    ``triton_op(..., constexprs={"X_dtype": DtypeOf("x")})``. Each dtype is its own compile, as for any input
    of open dtype; every path (eager, native, torch.compile, JAX) passes the value of the call's input."""

    input: str


@dataclass(frozen=True)
class SameAs:
    """The output has the shape of a tensor input, named (preferred) or by position among tensor inputs."""

    input_idx: int | str = 0


@dataclass(frozen=True)
class ReduceDims:
    """The output is the referenced input with ``dims`` removed (or kept as size 1 if ``keepdim``).

    combine: how results over parts of the reduced axes combine into the result over all of them: "sum" (a
    sum, a sum of squares), "max" or "min". Declared, a DTensor sharded along a reduced axis gives a
    ``Partial`` output instead of being gathered first. Leave None where parts do not combine that way (a
    mean, a norm, a softmax denominator's reciprocal).
    """

    input_idx: int | str
    dims: tuple[int, ...]
    keepdim: bool = False
    combine: Literal["sum", "max", "min"] | None = None


ShapeRel = SameAs | ReduceDims


@dataclass(frozen=True)
class OutputDecl:
    """A tensor output, allocated by opsmith (contiguous) and passed to the kernel as a pointer.

    shape: ``SameAs(input)``, ``ReduceDims(input, dims)``, or a tuple with one entry per axis: a named
        dimension of the inputs (``"M"``), a group (``"*B"``), an int, or a size expression over the names
        (``"2 * N"``, ``"cdiv(N, 2)"``, ``"numel(x)"``; the language of ``Grid``). A matmul's output is
        ``("M", "N")``, an embedding lookup's ``("*B", "C")``.
    dtype: a fixed element type (float32 statistics of a bf16 layer norm); checked against the kernel's
        pointer type where the signature gives one.
    dtype_from: the input whose dtype the output takes; default: the first tensor input.
    init: the value every element holds before the kernel runs (``0`` for a kernel that accumulates with
        atomic adds, a split-K matmul); default: uninitialized, the kernel writes every element.
    optional: the call asks for it (llm.c's ``probs``, a kernel that writes a buffer only where its pointer
        is not NULL): the schema gains ``bool return_<name>=False`` after the other arguments; without it the kernel gets
        a null pointer (Triton: ``None``, compiled in, so ``if probs_ptr is not None:`` is decided at compile
        time) and the call returns ``None`` in the output's place. Fake, native and traced calls agree. It
        has no gradient (a backward may not read it), and its size may not feed the launch.
    """

    name: str
    shape: ShapeRel | tuple[int | str, ...]
    dtype_from: str | None = None
    dtype: torch.dtype | None = None
    init: int | float | None = None
    optional: bool = False


@dataclass(frozen=True)
class Buffer:
    """A tensor a backward program allocates (see ``Backward``): a scratch buffer or a gradient an op writes
    in place. ``like``: the shape and dtype of that tensor; else ``shape`` (ints or size expressions over the
    program's tensors, ``opsmith/declare/expr.py``) and ``dtype`` (a torch.dtype, ``"like:<name>"``, or
    ``"acc:<name>"``: float32 for a 16-bit float tensor, its own dtype otherwise)."""

    name: str
    shape: tuple[int | str, ...] = ()
    dtype: torch.dtype | str | None = None
    like: str | None = None


@dataclass(frozen=True)
class Step:
    """One op call of a backward program: ``op`` (an opsmith op) on ``args`` (names of the backward's
    arguments, buffers and earlier steps' outputs); its outputs take the names ``outputs``."""

    op: Callable[..., Any]
    args: Sequence[str]
    outputs: Sequence[str] = ()


@dataclass(frozen=True)
class Backward:
    """How to differentiate an op: ``fn`` computes the gradients of some tensor inputs.

    fn: another opsmith op (any flavor), a Python function, or a program: a tuple of ``Buffer`` and ``Step``
        (allocations and op calls, run in order; plain data, so a native library runs it in C++). A step
        runs only when a gradient someone needs depends on it.
    args: what ``fn`` takes, in order: names of the op's inputs (tensors or scalars) and outputs, and
        ``"grad_<output>"`` for the gradient arriving at an output (zeros when that output was unused).
        Only what is named is kept for the backward pass.
    grads: the tensor inputs whose gradients ``fn`` returns, in order (one tensor, or a tuple).
    returns: for a program, the names of the values holding those gradients, aligned with ``grads``.
    double_backward: ``fn`` is itself differentiable (made of torch ops, or of opsmith ops that declare a
        backward), so ``create_graph=True`` may differentiate through it; otherwise that is refused.

    A Python ``fn`` that takes a ``needs_input_grad`` keyword gets a tuple of bools aligned with ``grads``
    and may return None for a gradient nobody needs. Gradients nobody needs are dropped in any case, and
    ``fn`` is not called when none is needed.
    """

    fn: Callable[..., Any] | tuple
    args: Sequence[str]
    grads: Sequence[str]
    double_backward: bool = False
    returns: Sequence[str] = ()


@dataclass(frozen=True)
class Numel:
    """Pass ``inputs[input_name].numel()`` as an integer extra.

    dtype: ``"int32"`` or ``"int64"``; ``None`` reads it from the kernel's parameter (``int n`` vs
    ``long long n``). A value that does not fit a 32-bit extra is refused at call time.
    name: the kernel parameter it fills, for binding by name (``Numel("x", name="N")``).
    """

    input_name: str
    dtype: IndexType | None = None
    name: str | None = None


@dataclass(frozen=True)
class DimSize:
    """Pass ``inputs[input_name].shape[axis]`` as an integer extra (negative axis allowed).

    Named like a Triton ``tl.constexpr`` parameter, or like a ``{NAME}`` placeholder in a CUDA C++
    ``kernel_name`` (a template argument), the size is compiled in: one specialization per distinct value.
    ``bucket="pow2"`` passes the size rounded up to a power of two (a Triton ``BLOCK_SIZE`` that must cover
    a row: ``DimSize("x", -1, name="BLOCK_SIZE", bucket="pow2")``)."""

    input_name: str
    axis: int
    dtype: IndexType | None = None
    name: str | None = None
    bucket: Literal["exact", "pow2"] = "exact"


@dataclass(frozen=True)
class Stride:
    """Pass the stride of ``tensor`` along ``axis``, in elements, as an integer extra.

    tensor: an input or output name, or a tuple of names the kernel indexes with this one value (a kernel
        taking one ``stride`` for ``a``, ``b`` and ``c``).
    With a Stride declared, a tensor input whose layout the kernel can address (the declared axes at any
    stride, the others row-major around them, e.g. ``x[:, :n]`` of a wider tensor with its row stride
    passed) reaches the kernel without a copy; another layout is copied (``contiguous="make"``) or refused
    (``"require"``). Outputs are allocated contiguous.
    """

    tensor: str | tuple[str, ...]
    axis: int
    dtype: IndexType | None = None
    name: str | None = None


@dataclass(frozen=True)
class Dim:
    """Pass the size of a named dimension (``InputDecl(shape=("M", "K"))``) as an integer extra.

    dim: the dimension's name. name: the kernel parameter it fills; default: the dimension's own name, so
    ``Dim("K")`` fills ``int K``. As with ``DimSize``: the parameter's type decides the width (``dtype``
    fixes it), a value that does not fit is refused at call time, and a name that is a Triton
    ``tl.constexpr`` or a ``{NAME}`` placeholder compiles the size in."""

    dim: str
    dtype: IndexType | None = None
    name: str | None = None

    @property
    def param(self) -> str:
        return self.name if self.name is not None else self.dim


@dataclass(frozen=True)
class Size:
    """Pass a size expression (``opsmith/declare/expr.py``'s language, as ``Grid`` writes it) as an integer extra: what
    host code computes from sizes for a runtime parameter, such as Liger's RMSNorm backward's
    ``rows_per_program = cdiv(n_rows, sm_count)``: ``Size("cdiv(numel(RSTD), sm_count)", name="rows_per_program")``.
    Width and range as for ``Numel``."""

    expr: str
    name: str | None = None
    dtype: IndexType | None = None


@dataclass(frozen=True)
class Present:
    """Pass whether the optional tensor input ``input_name`` was given (1) or ``None`` (0) as an integer extra:
    Liger's ``HAS_WEIGHT: tl.constexpr`` beside its ``weight_ptr``. Named like a Triton ``tl.constexpr`` or a
    ``{NAME}`` placeholder, it is compiled in (one specialization each); else it is passed by value (``int``,
    ``bool``). ``input_name`` may name an optional output too (``OutputDecl(optional=True)``): 1 when the call
    asked for it (fla's ``STORE_FINAL_STATE`` beside its ``cache_out``)."""

    input_name: str
    name: str | None = None
    dtype: IndexType | None = None


@dataclass(frozen=True)
class Const:
    """Pass a fixed number as an extra: an integer or float the kernel takes as a parameter. Its C type comes
    from the kernel's parameter (``dtype`` "int32"/"int64" fixes an integer's width)."""

    value: int | float
    name: str | None = None
    dtype: IndexType | None = None


Extra = Numel | DimSize | Dim | Stride | Const | Present | Size


# -- preconditions: what a kernel assumes of a call's sizes, checked before launch on every path ------------


@dataclass(frozen=True)
class Divisible:
    """``size`` is a multiple of ``by``: a kernel that loads 8 halves per 128-bit access needs
    ``Divisible("C", 8)``. ``size``: a named dimension or a size expression (``"numel(x)"``,
    ``"stride(x, 0)"``); ``why``: the kernel's reason, quoted in the error."""

    size: str
    by: int
    why: str = ""


@dataclass(frozen=True)
class AtMost:
    """``size`` is at most ``limit``: a row kept whole in shared memory or registers
    (``AtMost("C", 8192)``)."""

    size: str
    limit: int
    why: str = ""


@dataclass(frozen=True)
class AtLeast:
    """``size`` is at least ``limit``."""

    size: str
    limit: int
    why: str = ""


@dataclass(frozen=True)
class OneOf:
    """``size`` is one of ``values``: a kernel specialized for a few head sizes
    (``OneOf("D", (64, 128, 256))``)."""

    size: str
    values: tuple[int, ...]
    why: str = ""


Requirement = Divisible | AtMost | AtLeast | OneOf


@dataclass(frozen=True)
class Elementwise:
    """One thread per output element.

    layout="flat": ``grid = (cdiv(numel(out), block[0]),)`` over the first output.
    layout="nd": ``block[i]`` tiles output axis ``-(i+1)``; grid x/y/z are the ceil-divided axes and any
    leading axes are multiplied into grid z. The output needs at least ``len(block)`` dims.

    A block entry may name a ``Config`` parameter (``block=("BLOCK",)``) so each tuning config gets its own.
    For Triton kernels the block is the number of elements one program handles; the thread count comes
    from ``num_warps``.
    """

    block: tuple[int | str, ...] = (256,)
    layout: Literal["flat", "nd"] = "flat"


@dataclass(frozen=True)
class Reduction:
    """One block of ``block_size`` threads per row.

    rows = numel(first tensor input) / product of its ``reduce_dims`` sizes (negative axes allowed). Serves
    reductions (smaller output) and row-wise ops (softmax, norms: same-shape output) alike.
    ``shared_mem`` is the dynamic shared memory per block in bytes.
    """

    reduce_dims: tuple[int, ...]
    block_size: int | str = 256  # or the name of a Config parameter; unused by Triton (num_warps decides)
    shared_mem: int = 0


@dataclass(frozen=True)
class Custom:
    """Escape hatch: ``fn(inputs, outputs) -> (grid, block)`` or ``(grid, block, shared_mem)``.

    ``inputs`` maps every input name (tensors and scalars) to its value, ``outputs`` every output name to
    its allocated tensor. The launch then lives in Python: such an op cannot be deployed without Python.
    """

    fn: Callable[[dict[str, Any], dict[str, torch.Tensor]], tuple]


@dataclass(frozen=True)
class Grid:
    """A launch written as size expressions (see ``opsmith/declare/expr.py``), for what ``Elementwise`` and
    ``Reduction`` do not say: ``Grid(grid=("cdiv(size(p, -1), 32)",), block=(1024,))``, a persistent grid
    ``Grid(grid=("min(size(p, 0), sm_count * MINB)",), block=("THREADS",))``. Unlike ``Custom`` it is plain
    data: the launch needs no Python, so the op can be built into a native library.

    grid: 1 to 3 entries, ints or expressions over ``numel``/``size``/``stride`` of named inputs and
        outputs, named dimensions (``"cdiv(M, 64)"``), config parameters and ``sm_count``.
    block: the threads per block (CUDA C++ and PTX; ints or config parameter names); empty for Triton, whose
        compiler fixes the block.
    shared_mem: dynamic shared memory per block in bytes (an int or a config parameter name).
    """

    grid: tuple[int | str, ...]
    block: tuple[int | str, ...] = ()
    shared_mem: int | str = 0


Geometry = Elementwise | Reduction | Grid | Custom


@dataclass(frozen=True)
class Config:
    """One launch configuration to tune over.

    params: for CUDA C++, ``-DNAME=VALUE`` defines and ``{NAME}`` placeholders in ``kernel_name`` (template
        arguments: ``kernel_name="softmax<{BLOCK}>"``); for Triton, the kernel's ``tl.constexpr`` values.
        Geometry block entries may name them.
    num_warps / num_stages / num_ctas / maxnreg: Triton compile options (defaults 4, 3, 1 and none, as
        Triton's). A ``tl.constexpr`` parameter named like one of them (the fused-softmax tutorial's
        ``num_stages``) is that option: it takes the option's value, as it does under Triton's own launcher.

    ``Autotune`` also takes ``triton.Config`` objects as they are; they become this class.
    """

    params: dict[str, int | float | bool | str] = field(default_factory=dict)
    num_warps: int | None = None
    num_stages: int | None = None
    num_ctas: int | None = None
    maxnreg: int | None = None


@dataclass(frozen=True)
class TuneDim:
    """A tuning-key entry: ``inputs[input_name].shape[axis]``, bucketed; ``axis=None`` keys on the input's
    numel (a row-wise kernel's best launch depends on the row count as well as the row length).

    bucket="pow2" (default) rounds up to the next power of two, so shapes 3000 and 4000 share a decision;
    "exact" keys on the size itself.
    """

    input_name: str
    axis: int | None
    bucket: Literal["pow2", "exact"] = "pow2"


@dataclass(frozen=True)
class Autotune:
    """Tune over ``configs``: on the first call with a new key, every config runs on the real inputs and the
    fastest (median device time) is kept, in memory and on disk.

    configs: ``Config`` or ``triton.Config`` objects.
    key: ``TuneDim`` entries, or names (as ``@triton.autotune``'s ``key``): a named extra, or the kernel
        parameter it fills, keys on its exact value; a tensor's name adds nothing (the dtypes of all tensor
        inputs are always part of the key). With no entries, the pow2 bucket of each tensor input's numel.
    default: the config used when tuning is not possible (CUDA graph capture, torch.compile tracing, tuning
        turned off with OPSMITH_AUTOTUNE=0) and the key has no cached decision.
    prune_configs_by: Triton's dict (``early_config_prune(configs, named_args, **kwargs)``, ``perf_model``,
        ``top_k``), called with the call's arguments by kernel parameter name before a key is tuned; only
        tuning calls it (a native library launches the stored decisions).
    reset_to_zero / restore_value: tensors the kernel writes (by declared or kernel parameter name): each
        timing run starts from the call's values (outputs from their ``init``), whichever list names them;
        they must be in-place inputs or outputs with an ``init``.
    warmup / rep: milliseconds of untimed and timed runs per config (default: none, and about 20 ms).
    """

    configs: Sequence[Config]
    key: Sequence[TuneDim | str] = ()
    default: int = 0
    prune_configs_by: dict[str, Any] | None = None
    reset_to_zero: Sequence[str] = ()
    restore_value: Sequence[str] = ()
    warmup: float | None = None
    rep: float | None = None


@dataclass(frozen=True)
class KernelSpec:
    """Declarative description of a CUDA C++ kernel; see the module docstring for the calling convention.

    Every field beyond ``kernel_source`` / ``kernel_name`` is optional; whatever is missing must be supplied
    as an override (``meta_fn``, ``eager_fn``, ``schema``) to ``cuda_kernel_op``.
    ``kernel_name`` may be a template instantiation such as ``"scale<float>"``.
    ``defines`` become ``-DNAME=VALUE`` options. ``autotune`` lists configs (defines, template arguments,
    block sizes) to choose from per tuning key. ``target="ptx"`` ships PTX for the device's virtual
    architecture instead of a cubin (the driver JIT-compiles it at load; useful to inspect or to run on a
    newer GPU than NVRTC knows). ``index_dtype``: the integer width of the kernel's index math. With
    "int32" (the default: ``int i = blockIdx.x * blockDim.x + threadIdx.x``) a call with a tensor of more
    than 2^31 - 1 elements, or an ``Elementwise`` launch of more than 2^31 threads along an axis, is refused
    before launch; declare "int64" once the kernel indexes with 64 bits.

    ``kernel_name`` is the name of any ``__global__`` function: ``extern "C"`` or C++ (``mylib::axpy<float>``,
    found through NVRTC's name expressions); an overloaded name takes its parameter types
    (``"scale(const float*, int, float*)"``). ``param_order`` lists the declared names (inputs, outputs,
    named extras) in the kernel's parameter order, for a kernel whose names cannot be read.
    ``requires`` lists preconditions on the call's sizes (``Divisible``, ``AtMost``, ``AtLeast``, ``OneOf``),
    checked before launch on every path (eager, tracing, a native library). ``options``: NVRTC options as
    NVRTC spells them (``-use_fast_math``, ``-lineinfo``, ``-maxrregcount=64``, ``-ftz=``, ``-prec-div=``,
    ``-prec-sqrt=``, ``-fmad=``, ``-restrict``, ``-extra-device-vectorization``); ``-G`` only with
    ``OPSMITH_DEVICE_DEBUG=1``. Part of the compile cache key and of the kernel record.

    ``silence``: names (kernel parameters, dimensions) whose ``DeclarationWarning`` you have judged. At
    registration opsmith reads the kernel's body (docs/checking.md, "The declaration checked against the
    kernel") and warns where the declaration disagrees with it: a declared stride the kernel never reads (the
    tensor is then made row-major along that axis), one tensor's stride addressing another (they are then
    declared as one stride), a dimension named once. A silenced name gets neither the warning nor the change.
    """

    kernel_source: str
    kernel_name: str
    inputs: Sequence[InputDecl | ScalarInput] | None = None
    outputs: Sequence[OutputDecl] | None = None
    extras: Sequence[Extra] = field(default_factory=tuple)
    geometry: Geometry | None = None
    include_paths: list[str] | None = None
    compile_std: str = "c++17"
    arch_override: str | None = None
    defines: dict[str, str | int] | None = None
    autotune: Autotune | None = None
    target: Literal["cubin", "ptx"] = "cubin"
    index_dtype: IndexType = "int32"
    param_order: Sequence[str] | None = None
    requires: Sequence[Requirement] = ()
    options: Sequence[str] = ()
    silence: Sequence[str] = ()
