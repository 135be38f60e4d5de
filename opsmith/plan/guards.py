"""What the generated Python of a call (``eager.py``, ``fake.py``) calls: the refusals, worded once, and the
conversions of Python values to a kernel's C types.

The native library's C++ runtime (``native/runtime.py``) words every refusal the same, character for
character; the differential tests (``tests/test_differential.py``) hold the two to it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import torch

from ..errors import InputError
from .steps import FLOAT_MAX, GRID_MAX, INT32_MAX, INT_LIMITS, SMEM_MAX

__all__ = [
    "Refusals",
    "bf16_bits",
    "check_extent",
    "check_symbolic",
    "check_ties",
    "no_backend",
    "nearest_dtype",
    "norm_geo",
    "out_shape",
    "round_bits",
    "span",
    "static_int",
    "sym_one_of",
]

_FIX_EMPTY = ("Fix: pass a non-empty tensor; or, where the answer from no data is a constant (a sum's 0, a max's "
              "-inf), declare it on every output with OutputDecl(..., init=value): outputs are filled with it and "
              "the kernel runs.")  # fmt: skip
_FIX_64 = ("Fix: index with 64 bits in the kernel (long long, or tl.int64 offsets in Triton) and declare "
           "index_dtype='int64'.")  # fmt: skip
_AXES = "xyz"
_REQUIRE_WORDS = {"divisible": "divisible by", "at_most": "at most", "at_least": "at least", "one_of": "one of"}


class Refusals:
    """The call-time errors of one op, built by the generated code only when it refuses."""

    def __init__(self, op: str) -> None:
        self.op = op

    def missing(self, name: str) -> InputError:
        return InputError(self.op, name, "a tensor", "None", f"Fix: pass a tensor as {name}; only inputs declared "
                          "optional=True take None.")  # fmt: skip

    def device(self, name: str, t: torch.Tensor, first: str | None, dev: int) -> InputError:
        if first is None or t.device.type != "cuda":
            return InputError(self.op, name, "a CUDA tensor", f"a tensor on {t.device}", f"Fix: pass {name}.cuda().")
        return InputError(self.op, name, f"a tensor on cuda:{dev} (where '{first}' is)", f"a tensor on {t.device}",
                          "Fix: put every tensor argument on the same GPU.")  # fmt: skip

    def dtype(self, name: str, t: torch.Tensor, dt: torch.dtype) -> InputError:
        return InputError(self.op, name, f"dtype {dt}", f"{t.dtype}", f"Fix: pass {name}.to({dt}).")

    def dtype_in(self, name: str, t: torch.Tensor, allowed: Sequence[torch.dtype]) -> InputError:
        return InputError(self.op, name, f"one of the dtypes {', '.join(str(a) for a in allowed)} (declared)",
                          f"{t.dtype}", f"Fix: pass {name}.to({nearest_dtype(t.dtype, allowed)}).")  # fmt: skip

    def like(self, name: str, t: torch.Tensor, other: str, dt: torch.dtype) -> InputError:
        return InputError(self.op, name, f"dtype {dt}, the dtype of '{other}' (the kernel types both with one "
                          "template parameter)", f"{t.dtype}", f"Fix: pass {name}.to({other}.dtype).")  # fmt: skip

    def rank(self, name: str, t: torch.Tensor, exact: int | None, least: int, decl: str = "") -> InputError:
        if decl:
            want = f"{exact} dims" if exact is not None else f"at least {least} dims"
            want += f" (declared shape {decl})"
        else:
            want = f"{exact} dims" if exact is not None else (
                f"at least {least} dims (the launch geometry, a reduced axis or an extra needs them)")  # fmt: skip
        return InputError(self.op, name, want, f"{t.dim()} dims (shape {shown(t.shape)})")

    def contiguous(self, name: str, t: torch.Tensor, axes: tuple = ()) -> InputError:
        from .layout import layout_error

        return layout_error(self.op, name, t, axes)

    def shape(self, name: str, t: torch.Tensor, decl: str, names: Sequence[tuple[str, Any, str]]) -> InputError:
        """``names``: (dimension, its value, the tensor it is bound to) for each name the declared shape uses."""
        where = ", ".join(f"{n} = {shown(v)} from '{f}'" for n, v, f in names)
        return InputError(self.op, name, f"shape {decl}{' where ' + where if where else ''}", f"shape {shown(t.shape)}")

    def shape_of(self, name: str, t: torch.Tensor, other: str, o: torch.Tensor) -> InputError:
        return InputError(self.op, name, f"the shape of '{other}', {shown(o.shape)}", f"shape {shown(t.shape)}")

    def align(self, name: str, t: torch.Tensor, nbytes: int) -> InputError:
        return InputError(self.op, name, f"a data pointer aligned to {nbytes} bytes (declared align={nbytes}, "
                          "contiguous='require')", f"an address {misalign(t, nbytes)} bytes past a multiple of "
                          f"{nbytes} (storage offset {t.storage_offset()})",
                          f"Fix: pass {name}.clone(), which starts at an aligned address.")  # fmt: skip

    def require(self, arg: str, label: str, kind: str, value: Any, why: str, got: Any) -> InputError:
        words = _REQUIRE_WORDS[kind]
        v = str(tuple(value)) if kind == "one_of" else str(value)
        return InputError(self.op, arg, f"{label} {words} {v}{f' ({why})' if why else ''}", f"{label} = {shown(got)}",
                          f"Fix: pass tensors for which {label} is {words} {v}.")  # fmt: skip

    def large_out(self, name: str, shape: Sequence[Any]) -> InputError:
        return InputError(self.op, name, f"an output of at most {INT32_MAX} elements (the kernel declares 32-bit "
                          f"indexing)", f"shape {shown(shape)}", _FIX_64)  # fmt: skip

    def huge_out(self, name: str, shape: Sequence[Any], dtype: torch.dtype) -> InputError:
        return InputError(self.op, name, f"an output of at most 2^63 - 1 bytes (its declared shape, in {dtype})",
                          f"shape {shown(shape)}", "Fix: pass inputs for which the declared output shape is "
                          "smaller.")  # fmt: skip

    def empty(self, names: Sequence[str], numels: Sequence[Any], written: Sequence[torch.Tensor]) -> InputError:
        name = next(n for n, v in zip(names, numels, strict=True) if v == 0)
        shapes = ", ".join(str(shown(o.shape)) for o in written if o is not None)  # None: an output not asked for
        return InputError(self.op, name, "a non-empty tensor, since the outputs are non-empty "
                          f"(shapes {shapes}) and the kernel cannot fill them from no data", "an empty tensor",
                          _FIX_EMPTY)  # fmt: skip

    def init(self, name: str, output: str, shown: str, dtype: torch.dtype) -> InputError:
        return InputError(self.op, name, f"a dtype that holds output '{output}''s declared init={shown}", str(dtype),
                          "Fix: pass a tensor of a dtype that holds it (a float dtype for -inf or 2.5), or declare "
                          "the output's dtype with OutputDecl(dtype=...).")  # fmt: skip

    def large(self, name: str, numel: int) -> InputError:
        return InputError(self.op, name, f"at most {INT32_MAX} elements (the kernel declares 32-bit indexing)",
                          f"{numel} elements", _FIX_64)  # fmt: skip

    def span(self, name: str, t: torch.Tensor, value: int) -> InputError:
        return InputError(self.op, name, f"a view spanning at most {INT32_MAX} elements (the kernel declares 32-bit "
                          "indexing and addresses it with its strides)", f"shape {shown(t.shape)} with strides "
                          f"{t.stride()}, spanning {value} elements", _FIX_64)  # fmt: skip

    def extent(self, arg: str, what: str, value: int, limit: int) -> InputError:
        return InputError(self.op, arg, f"{what} at most {limit}: the launch covers it with more than 2^31 threads "
                          "along one axis, and with 32-bit indexing (index_dtype='int32') the top thread index wraps",
                          f"{value}", _FIX_64)  # fmt: skip

    def grid(self, arg: str, what: str, axis: int, value: int, least: int = 1) -> InputError:
        most = GRID_MAX[axis]
        return InputError(self.op, arg, f"a launch of {least} to {most} blocks along {_AXES[axis]} ({what})", f"{value}",
                          "Fix: launch fewer blocks per axis (a larger block, or a persistent grid such as "
                          "min(..., sm_count * 8)), or pass inputs the grid expression covers." if value > most else
                          "Fix: pass inputs for which the grid expression is positive, or correct it.")  # fmt: skip

    def smem(self, arg: str, what: str, value: int) -> InputError:
        return InputError(self.op, arg, f"dynamic shared memory of 0 to {SMEM_MAX} bytes per block ({what})",
                          f"{value}", "Fix: pass inputs the kernel's shared memory can hold (a smaller size along "
                          "the axes the expression reads), or a config that needs less.")  # fmt: skip

    def value(self, name: str, value: int, ctype: str, hint: str, lo: int | None = None,
              hi: int | None = None) -> InputError:  # fmt: skip
        if lo is None or hi is None:
            lo, hi = INT_LIMITS[ctype]
        return InputError(self.op, name, f"a value in [{lo}, {hi}] for the kernel's {ctype} parameter", f"{value}",
                          hint)  # fmt: skip

    def float_range(self, name: str, value: float, ctype: str) -> InputError:
        m = FLOAT_MAX[ctype]
        return InputError(self.op, name, f"a value in [{-m}, {m}] (or inf, nan) for the kernel's {ctype} parameter",
                          f"{value!r}", "Fix: scale the value, or take it as double in the kernel.")  # fmt: skip

    def meta_out(self, k: int, t: object, dev: int, dt: torch.dtype | None) -> InputError | None:
        """Why output ``k`` that meta_fn allocated cannot take the kernel's writes (None: it can)."""
        name = f"meta_fn output {k}"
        if not isinstance(t, torch.Tensor):
            return InputError(self.op, name, "a tensor", type(t).__name__, "Fix: return new tensors from meta_fn.")
        if t.get_device() != dev:
            return InputError(self.op, name, f"a tensor on cuda:{dev}", f"a tensor on {t.device}",
                              "Fix: allocate outputs like the inputs (x.new_empty(...)).")  # fmt: skip
        if dt is not None and t.dtype != dt:
            return InputError(self.op, name, f"dtype {dt} (the kernel writes it so)", f"{t.dtype}",
                              f"Fix: allocate it with dtype={dt} in meta_fn.")  # fmt: skip
        if not t.is_contiguous():
            return InputError(self.op, name, "a contiguous tensor", f"strides {t.stride()}",
                              "Fix: allocate it with new_empty / empty.")  # fmt: skip
        return None


def out_shape(op_name: str, dims: Sequence[int], keepdim: bool, src: torch.Tensor, src_name: str) -> list:
    """A ``ReduceDims`` output's shape: ``src``'s without ``dims`` (or with 1 there); symbolic sizes stay so."""
    shape = list(src.shape)
    nd = len(shape)
    gone = set()
    for d in dims:
        if not -nd <= d < nd:
            raise InputError(
                op_name, src_name, f"a tensor with axis {d} to reduce", f"{nd} dims (shape {shown(shape)})"
            )
        gone.add(d % nd)
    if keepdim:
        return [1 if k in gone else s for k, s in enumerate(shape)]
    return [s for k, s in enumerate(shape) if k not in gone]


def _kind(d: torch.dtype) -> str:
    return "bool" if d == torch.bool else "complex" if d.is_complex else "float" if d.is_floating_point else "int"


def nearest_dtype(got: torch.dtype, allowed: Sequence[torch.dtype]) -> torch.dtype:
    """The declared dtype a refused ``got`` converts to with the least loss, for the fix's ``.to()``: the same kind
    (float, int, bool, complex), a width that holds it (the narrowest such), else the widest narrower one; the
    declared order on ties (a float64 input of a {bfloat16, float16, float32} op: float32, never bfloat16). Across
    kinds a width holds the value where it is twice the input's (a float's mantissa holds an int of half its
    width: int16 -> float32, int32 -> float64; never a float8 for an int8). Native libraries print the same choice
    (``codegen.py``)."""
    need = got.itemsize if any(_kind(a) == _kind(got) for a in allowed) else 2 * got.itemsize
    return min(allowed, key=lambda a: (_kind(a) != _kind(got), a.itemsize < need, abs(a.itemsize - need)))


def shown(v: Any) -> Any:
    """A size or shape for a message: symbolic sizes (compile, export) as the values of the call being traced,
    so the text is the eager call's."""
    if isinstance(v, torch.Size | tuple | list):
        return tuple(shown(x) for x in v)
    if isinstance(v, torch.SymInt):
        hint = v.node.hint
        return int(hint) if hint is not None else v
    return v


def misalign(t: torch.Tensor, nbytes: int) -> Any:
    """How far ``t``'s data pointer is past a multiple of ``nbytes``. Without memory (fake, meta) from the storage
    offset: torch's allocators start every storage at a multiple of 64 (CPU) or 512 (CUDA) bytes, and
    ``align`` is at most 256, so the offset decides wherever the base does not."""
    if t.device.type == "meta" or is_fake(t):
        return t.storage_offset() * t.element_size() % nbytes
    return t.data_ptr() % nbytes


def is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor)


def check_ties(err: Any, pairs: Sequence[tuple[Any, Any]]) -> None:
    """The meta path's size ties: each (got, want) pair equal (a pair of tuples: a group, equal in length and
    sizes), else ``err()`` is raised. Where a size is symbolic the relation is asserted as torch._check does
    (``expect_true``): a guard of the traced graph, so torch.compile and torch.export carry it."""
    for a, b in pairs:
        if isinstance(a, tuple):
            if len(a) != len(b):
                raise err()
            check_ties(err, list(zip(a, b, strict=True)))
        elif type(a) is int and type(b) is int:
            if a != b:
                raise err()
        elif not _expect_true(a == b):
            raise err()


def check_symbolic(err: Any, ok: Any) -> None:
    """A requirement over symbolic sizes, asserted as a guard of the traced graph (see ``check_ties``)."""
    if not _expect_true(ok):
        raise err()


def _expect_true(cond: Any) -> bool:
    from torch.fx.experimental.symbolic_shapes import expect_true

    return bool(cond) if isinstance(cond, bool) else expect_true(cond)


def sym_one_of(v: Any, values: Sequence[int]) -> Any:
    from torch.fx.experimental.symbolic_shapes import sym_or

    return sym_or(*(v == c for c in values))


def span(t: torch.Tensor) -> int:
    """Elements a view spans: its largest element offset + 1 (0 when empty)."""
    if t.numel() == 0:
        return 0
    return 1 + sum((s - 1) * st for s, st in zip(t.shape, t.stride(), strict=True))


def static_int(*values: Any) -> bool:
    """Whether every value is a plain int (fake tensors under dynamic shapes carry symbolic ones, which the
    size checks leave alone: comparing one would add a guard to the traced graph)."""
    return all(type(v) is int for v in values)


def round_bits(value: float, frac: int, emin: int, emax: int) -> int:
    """The bits of ``value`` in a binary float format with ``frac`` fraction bits, normal exponents in
    [emin, emax] (bias ``emax``), rounded once to nearest even from the double (not through float32, where two
    roundings can differ: 1 + 2^-11 + 2^-40 is 0x3c01 in fp16, but 0x3c00 through float32)."""
    exp_bits = (emax + 1).bit_length()
    (b,) = struct.unpack("<Q", struct.pack("<d", value))
    sign = (b >> 63) << (frac + exp_bits)
    e_field, man = (b >> 52) & 0x7FF, b & ((1 << 52) - 1)
    inf = ((1 << exp_bits) - 1) << frac
    if e_field == 0x7FF:
        return sign | inf | ((1 << (frac - 1)) if man else 0)  # inf, or a quiet NaN
    if e_field == 0:
        return sign  # a double subnormal is far below every subnormal of these formats
    e, m = e_field - 1023, man | (1 << 52)  # value = m * 2^(e - 52)
    shift = 52 - frac + max(emin - e, 0)  # down to units of the target's last place
    q, rem = m >> shift, m & ((1 << shift) - 1)
    half = 1 << (shift - 1)
    if rem > half or (rem == half and q & 1):
        q += 1
    if e < emin:
        return sign | q  # subnormal (q == 2^frac is the smallest normal, encoded the same)
    if q == 1 << (frac + 1):
        e, q = e + 1, q >> 1
    if e > emax:
        return sign | inf
    return sign | ((e + emax) << frac) | (q - (1 << frac))


def bf16_bits(value: float) -> int:
    """bf16 bits of a Python float, rounded once to nearest even."""
    return round_bits(value, 7, -126, 127)


def f16_bits(value: float) -> int:
    """fp16 bits of a Python float, rounded once to nearest even (what ``struct``'s 'e' packs)."""
    return round_bits(value, 10, -14, 15)


# -- a Custom geometry's launch, returned by the user's function per call ------------------------------------


def _norm_launch(op: str, got: Any) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    from ..errors import SpecError

    if not isinstance(got, tuple | list) or len(got) not in (2, 3):
        raise SpecError(op, "geometry.fn", f"Custom geometry fn returned {got!r}.",
                        "return (grid, block) or (grid, block, shared_mem).")  # fmt: skip
    grid, block = ((*(g if isinstance(g, tuple | list) else (g,)), 1, 1)[:3] for g in got[:2])
    values = (*grid, *block, got[2] if len(got) == 3 else 0)
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int)]
    if bad:  # int() would truncate a float grid (cdiv written as n / 256) and leave elements unlaunched
        raise SpecError(op, "geometry.fn", f"Custom geometry fn returned non-integer launch values {bad} in {got!r}.",
                        "return ints: write the grid as (n + 255) // 256, not n / 256.")  # fmt: skip
    return tuple(grid), tuple(block), values[6]  # type: ignore[return-value]


def norm_geo(op: str, got: object, block_fixed: bool, arg: str, least: int = 1) -> tuple:
    """A Custom geometry's result as a flat tuple: the grid (Triton: the compiler fixed the block), or grid +
    block + shared_mem; every grid axis within [least, GRID_MAX] (cuLaunchKernel's unsigned ints would wrap;
    ``least`` 0 where every output holds its init and an empty grid launches nothing)."""
    if block_fixed:
        from ..errors import SpecError

        g = got if isinstance(got, tuple | list) else (got,)
        if not 1 <= len(g) <= 3 or not all(isinstance(v, int) and not isinstance(v, bool) for v in g):
            raise SpecError(op, "geometry.fn", f"a Triton op's Custom geometry fn returned {got!r}.",
                            "return the grid as 1 to 3 ints (write cdiv as (n + B - 1) // B).")  # fmt: skip
        out: tuple = tuple(int(v) for v in (*g, 1, 1)[:3])
    else:
        grid, block, smem = _norm_launch(op, got)
        out = (*grid, *block, smem)
    for axis in range(3):
        if not least <= out[axis] <= GRID_MAX[axis]:
            raise Refusals(op).grid(arg, "the Custom geometry's grid", axis, out[axis], least)
    return out


def check_extent(op: str, errors: Refusals, g: tuple, arg: str) -> tuple:
    """A Custom launch of a 32-bit kernel: x-axis threads must stay below 2^31 (``norm_geo`` layout)."""
    if len(g) == 7 and g[0] * g[3] > 2**31:
        raise errors.extent(arg, "threads along x (grid x block)", g[0] * g[3], 2**31)
    return g


def no_backend(record: Any) -> Any:
    """The op's ``CompositeExplicitAutograd`` kernel: what runs where no kernel of a device does. A call passing
    no tensor at all (``None`` for a required tensor, every optional one absent) has no dispatch key, and torch
    would raise its own NotImplementedError ("There were no tensor arguments..."): here it is the op's refusal
    of the ``None``, as on every other path (registered by ``torchlib/registration.py``). Tensors of a device opsmith has no kernel for are the device
    refusal. (A native library serving the op registers its own kernels in place of these.)"""
    from ..declare.record import TensorArg

    refuse = Refusals(record.op_name)
    tensors = [(p, a) for p, a in enumerate(record.inputs) if isinstance(a, TensorArg)]

    def fallback(*args: Any) -> Any:
        for p, a in tensors:
            if args[p] is None and not a.optional:
                raise refuse.missing(a.name)
        p, a = next(((p, a) for p, a in tensors if args[p] is not None), tensors[0])
        raise refuse.device(a.name, args[p], None, 0)

    return fallback
