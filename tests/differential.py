"""Differential testing of the two implementations of one record: the Python path is the oracle for the native
library, on declarations and calls nobody wrote by hand (Csmith's method, with hypothesis as the generator).

A batch is a set of generated CUDA C++ ops: inputs of every dtype, scalars of every C type, extras of every
kind, ``Elementwise``/``Reduction``/``Grid`` geometries (tuned too), in-place inputs, declared shapes, 32- and
64-bit indexing, names chosen to collide with what either generator declares (``c``, ``x0``, ``dev``, ``op``,
``key``, ``grad_y``...), C++ keywords and macros (``new``, ``int``, ``NULL``), and op names that mangle alike.
Each op gets calls: valid ones, empty and strided ones, ones with a mistake, huge ones (meta only), scalars at
their edges. The Python path runs them (``eager.make_dry_run`` on CPU tensors, the fake on meta tensors); a
library built from the same records with ``-DOPSMITH_DRY_RUN`` runs them in a process without opsmith. Every
outcome must be equal: accepted or refused, the refusal's text, the outputs' shapes, dtypes and strides, and
each launch's config, kernel, grid, block, shared memory and argument bytes.

    tests/test_differential.py        a bounded slice (CI)
    python scripts/differential.py    the longer run
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from diff_calls import build_args, outcome
from hypothesis import strategies as st

import opsmith as ok
from opsmith import native
from opsmith.declare.record import TensorArg
from opsmith.torchlib.eager import make_dry_run

HERE = Path(__file__).resolve().parent

# Names that collide with the Python printer's globals and locals, the C++ printer's locals, the backward's
# argument names, C++ keywords and macros. Those a CUDA parameter cannot be named are bound by position.
NAMES = ["x", "y", "w", "c", "x0", "a0", "n0", "o0", "g0", "dev", "op", "key", "st", "v", "args", "sizes", "none",
         "grad_y", "new", "int", "template", "this", "NULL", "errno", "x_in", "torch", "u0_c", "_t", "alpha", "ctx",
         "result", "b0", "s0_0", "INFINITY", "major", "std", "auto"]  # fmt: skip
_NOT_CUDA_PARAM = {"new", "int", "template", "auto", "this", "NULL", "errno", "INFINITY", "major", "std", "torch"}
DTYPES = {"float32": "float", "float16": "__half", "bfloat16": "__nv_bfloat16", "float64": "double",
          "int32": "int", "int64": "long long", "uint8": "unsigned char", "int8": "signed char"}  # fmt: skip
SCALAR_CTYPES = {float: ["float", "double", "__half", "__nv_bfloat16"],
                 int: ["int", "long long", "unsigned int", "short", "unsigned short", "signed char", "unsigned char",
                       "unsigned long long"], bool: ["bool", "int"]}  # fmt: skip
EXTRA_CTYPES = ["int", "long long", "unsigned int", "unsigned long long"]
FLOATS = [1.5, 1 + 2**-11 + 2**-40, 1 + 2**-8 + 2**-40, 65504.0, 65520.0, 3.5e38, -0.0, float("inf"), float("nan"),
          1e-8, 3.3895313892515355e38, -2.5]  # fmt: skip
INTS = [0, 1, -1, 7, 255, 256, 2**15, 2**31 - 1, 2**31, -(2**31) - 1, 2**32, 2**63 - 1, -(2**63)]


@dataclass
class Gen:
    """One generated op: its registration arguments and what its calls need to know."""

    op_name: str
    spec: ok.KernelSpec
    source: str
    ok: ok.Op | None = None
    refused: str = ""
    calls: list[list[dict]] = field(default_factory=list)
    fake_bad: list[str] = field(default_factory=list)  # disagreements of the fake with the dry run

    def describe(self) -> str:
        s = self.spec
        if s is None:  # a hand-written regression op (test_gpu_differential's items), not a generated declaration
            return f"{self.op_name}: {self.ok!r}, declared in its test"
        return (f"{self.op_name}: inputs={s.inputs} outputs={s.outputs} extras={list(s.extras)} geometry={s.geometry} "
                f"autotune={s.autotune} index_dtype={s.index_dtype} param_order={s.param_order} "
                f"requires={list(s.requires)}\n{self.source}")  # fmt: skip


class Registered:
    """An op registered elsewhere (a catalog op) given to the harness with its calls, in ``Gen``'s place."""

    def __init__(self, op: ok.Op, calls: list[list[dict]]) -> None:
        self.ok, self.op_name, self.calls, self.fake_bad = op, op.record.op_name, calls, []

    def describe(self) -> str:
        return self.op_name


def both_dry_runs(gens: list) -> dict:
    """The Python path's outcomes of ``gens``' calls, after checking that a native library built from them
    (without opsmith, in a fresh process) records the same launches."""
    import tempfile

    py, cases = python_outcomes(gens)
    with tempfile.TemporaryDirectory() as d:
        nat = native_outcomes(gens, cases, Path(d))
    assert compare(gens, py, nat) == []
    return py


def tensor_call(shape: Any, dtype: str = "float32", view: str = "plain") -> dict:
    """A CPU tensor argument of a call (``diff_calls``' spec)."""
    return {"t": "tensor", "shape": list(shape), "dtype": dtype, "device": "cpu", "view": view}


def _digest(order: list[str], cnames: list[str], types: dict[str, str]) -> str:
    """A kernel body that writes what the launch gave it into ``dig`` (GPU mode): grid and block, each by-value
    parameter's bits, each pointer's alignment. Both paths' calls must leave the same bytes."""
    lines = ["  if (blockIdx.x + blockIdx.y + blockIdx.z + threadIdx.x + threadIdx.y + threadIdx.z != 0) return;",
             "  int opsmith_i = 0;"]  # fmt: skip
    lines += [f"  dig[opsmith_i++] = {d}.{a};" for d in ("gridDim", "blockDim") for a in "xyz"]
    for n, c in zip(order, cnames, strict=True):
        if n == "dig":
            continue
        if types[n].endswith("*"):
            lines.append(f"  dig[opsmith_i++] = (long long)((unsigned long long){c} % 16);")
        else:
            lines.append(f"  {{ long long opsmith_b = 0; memcpy(&opsmith_b, &{c}, sizeof({c})); "
                         "dig[opsmith_i++] = opsmith_b; }")  # fmt: skip
    return "\n".join(lines)


@st.composite
def declaration(draw: Any, op_name: str, gpu: bool = False) -> Gen:
    n_t = draw(st.integers(1, 3))
    n_s = draw(st.integers(0, 2))
    names = draw(st.lists(st.sampled_from(NAMES), min_size=n_t + n_s + 2, max_size=n_t + n_s + 2, unique=True))
    kinds = draw(st.permutations(["t"] * n_t + ["s"] * n_s))
    inputs, params, tensors, tdtypes = [], {}, [], {}
    for k, kind in enumerate(kinds):
        name = names[k]
        if kind == "s":
            py = draw(st.sampled_from([float, int, bool]))
            inputs.append(ok.ScalarInput(name, py))
            params[name] = draw(st.sampled_from(SCALAR_CTYPES[py]))
            continue
        dt = draw(st.sampled_from(list(DTYPES)))
        mutates = draw(st.booleans()) and draw(st.booleans())
        ndim = draw(st.one_of(st.none(), st.none(), st.integers(1, 3)))
        shape, how = None, draw(st.sampled_from(["none", "none", "names", "names", "dimsize", "sameas"]))
        if how == "names":
            shape, ndim = draw(_named_shape()), None
        elif how == "dimsize" and tensors:
            other = draw(st.sampled_from(tensors))
            shape = tuple(draw(st.sampled_from([None, 2, ok.DimSize(other, -1), ok.DimSize(other, 0)]))
                          for _ in range(ndim or draw(st.integers(1, 2))))  # fmt: skip
            ndim = None
        elif how == "sameas" and tensors:
            shape, ndim = ok.SameAs(draw(st.sampled_from(tensors))), None
        dtype = None
        if tensors and not mutates and draw(st.integers(0, 5)) == 0:  # the dtype of another input, typed alike
            dtype = draw(st.sampled_from(tensors))
            dt = tdtypes[dtype]
        contiguous = "require" if mutates else draw(st.sampled_from(["make", "make", "require"]))
        align = draw(st.sampled_from([None, None, None, 8, 16]))
        inputs.append(ok.InputDecl(name, dtype=dtype, contiguous=contiguous, ndim=ndim, mutates=mutates, shape=shape,
                                   align=align))  # fmt: skip
        params[name] = f"{'' if mutates else 'const '}{DTYPES[dt]}*"
        tdtypes[name] = dt
        tensors.append(name)
    if gpu:  # the digest buffer, written in place
        inputs.append(ok.InputDecl("dig", mutates=True, contiguous="require"))
        params["dig"] = "long long*"
        tensors.append("dig")
    mutated = [d.name for d in inputs if isinstance(d, ok.InputDecl) and d.mutates]
    out_names = [n for n in names[len(kinds) :]]
    n_out = draw(st.integers(0 if mutated else 1, 2))
    outputs = []
    bound = _bound_names(inputs)
    for name in out_names[:n_out]:
        src = draw(st.sampled_from([t for t in tensors if t != "dig"]))
        kind = draw(st.sampled_from(["same", "reduce", "shape", "shape"] if bound else ["same", "reduce"]))
        if kind == "same":
            rel: Any = ok.SameAs(src)
        elif kind == "reduce":
            rel = ok.ReduceDims(src, draw(_axes()), draw(st.booleans()))
        else:
            rel = draw(_output_shape(bound))
        out_dt = draw(st.sampled_from(list(DTYPES)))
        fixed = getattr(torch, out_dt) if draw(st.integers(0, 3)) == 0 else None
        # Any mix of inits: a sum's 0, a product's 1, a max's -inf, values an integer dtype cannot hold
        init = draw(st.sampled_from([None] * 6 + [0, 1, -1, 2.5, float("-inf"), 7, 1e30]))
        outputs.append(ok.OutputDecl(name, rel, dtype=fixed, init=init))
        params[name] = f"{DTYPES[out_dt]}*"
    refs = [t for t in tensors if t != "dig"]
    extras, extra_params = draw(_extras(refs, [o.name for o in outputs], [d.name for d in inputs], sorted(bound)))
    requires = draw(_requires(sorted(d for d in bound if not d.startswith("*")), refs))
    geometry, autotune = draw(_geometry(refs, [o.name for o in outputs], mutated))
    index_dtype = draw(st.sampled_from(["int32", "int64"]))
    declared = [d.name for d in inputs] + [e.name for e in extras if e.name] + [o.name for o in outputs]
    by_name = all(n not in _NOT_CUDA_PARAM for n in declared) and all(e.name for e in extras) and draw(st.booleans())
    order = [d.name for d in inputs] + [f"extra{k}" for k in range(len(extras))] + [o.name for o in outputs]
    kernel_types = {**params, **{f"extra{k}": t for k, t in enumerate(extra_params)}}
    extra_names = {f"extra{k}": e.name for k, e in enumerate(extras)}
    if by_name:
        order = draw(st.permutations(order))
        cnames = [extra_names.get(n) or n for n in order]
    else:
        cnames = [f"p{k}" for k in range(len(order))]
    param_order = None
    if not by_name and all(e.name for e in extras) and draw(st.booleans()):
        order = draw(st.permutations(order))
        param_order = [extra_names.get(n) or n for n in order]
    kname = "k_" + op_name.replace("::", "_")
    if gpu and not by_name:  # bound by position: dig fills the parameter after the other inputs
        cnames = [("dig" if n == "dig" else c) for n, c in zip(order, cnames, strict=True)]
    plist = ", ".join(f"{kernel_types[n]} {c}" for n, c in zip(order, cnames, strict=True))
    body = _digest(order, cnames, kernel_types) if gpu else ""
    src = (
        f'#include <cuda_fp16.h>\n#include <cuda_bf16.h>\nextern "C" __global__ void {kname}({plist}) {{\n{body}\n}}\n'
    )
    spec = ok.KernelSpec(kernel_source=src, kernel_name=kname, inputs=inputs, outputs=outputs, extras=extras,
                         geometry=geometry, autotune=autotune, index_dtype=index_dtype, param_order=param_order,
                         requires=requires)  # fmt: skip
    return Gen(op_name, spec, src)


@st.composite
def _axes(draw: Any) -> tuple[int, ...]:
    """Reduced axes of one sign (mixed signs are refused where the rank is unknown), sometimes mixed."""
    pool = draw(st.sampled_from([[0, 1], [-1, -2], [0, 1], [-1, -2], [0, -1]]))
    return tuple(draw(st.lists(st.sampled_from(pool), min_size=1, max_size=2, unique=True)))


# Dimension names (kept apart from NAMES: a dimension named like an argument is refused) and groups.
DIMS = ["M", "K", "D", "*B", "*S"]


@st.composite
def _named_shape(draw: Any) -> tuple:
    """An input's shape over named dimensions: names, at most one group, ints and None."""
    entries = draw(st.lists(st.sampled_from([*DIMS, 2, None]), min_size=1, max_size=3))
    first = next((k for k, e in enumerate(entries) if isinstance(e, str) and e.startswith("*")), None)
    return tuple(e for k, e in enumerate(entries) if not (isinstance(e, str) and e.startswith("*")) or k == first)


def _bound_names(inputs: list) -> set[str]:
    return {e for d in inputs if isinstance(d, ok.InputDecl) and isinstance(d.shape, tuple)
            for e in d.shape if isinstance(e, str)}  # fmt: skip


@st.composite
def _output_shape(draw: Any, bound: set[str]) -> tuple:
    """An output's shape: bound names, their group, ints and size expressions that may go below zero."""
    names = sorted(d for d in bound if not d.startswith("*"))
    group = sorted(d for d in bound if d.startswith("*"))
    pool: list[Any] = [3, *group]
    for n in names:
        pool += [n, n, f"2 * {n}", f"cdiv({n}, 2)", f"{n} - 2"]
    if names:  # past 2^31 elements for 32-bit indexing (sizes of 4 and 5), and with a group past 2^63
        pool.append(f"{names[0]} * {names[0]} * {names[0]} * {names[0]} * 900000")
    entries = draw(st.lists(st.sampled_from(pool), min_size=1, max_size=3))
    return tuple(e for k, e in enumerate(entries) if e not in group or (entries.index(e) == k and
                 not any(g in entries[:k] for g in group)))  # fmt: skip


@st.composite
def _requires(draw: Any, names: list[str], tensors: list[str]) -> list:
    """Preconditions lenient enough that most valid calls meet them (sizes are drawn from 1 to 5)."""
    out = []
    for _ in range(draw(st.integers(0, 2))):
        size = draw(st.sampled_from([*names, *names, *(f"numel({t})" for t in tensors)]))
        kind = draw(st.sampled_from(["div", "most", "least", "one"] if size in names else ["div", "most", "least"]))
        if kind == "div":
            out.append(ok.Divisible(size, draw(st.sampled_from([1, 2])), why=draw(st.sampled_from(["", "vectors"]))))
        elif kind == "most":
            out.append(ok.AtMost(size, draw(st.sampled_from([4, 2**31 - 1]))))
        elif kind == "least":
            out.append(ok.AtLeast(size, draw(st.sampled_from([0, 2]))))
        else:
            out.append(ok.OneOf(size, tuple(draw(st.lists(st.integers(1, 5), min_size=2, max_size=4, unique=True)))))
    return out


@st.composite
def _extras(
    draw: Any, tensors: list[str], outputs: list[str], declared: list[str], dims: list[str]
) -> tuple[list, list[str]]:
    extras, ctypes = [], []
    pool = [f"e{k}" for k in range(4)] + ["c", "x0", "key", "n", "N"]
    names = draw(st.lists(st.sampled_from(pool), min_size=4, max_size=4, unique=True))
    taken = set(declared) | set(outputs)
    named = [d for d in dims if not d.startswith("*")]
    for k in range(draw(st.integers(0, 3))):
        kind = draw(
            st.sampled_from(["numel", "dim", "stride", "const_int", "const_float", *(["named"] * 2 * bool(named))])
        )
        name = names[k] if names[k] not in taken and draw(st.integers(0, 3)) else None
        t = draw(st.sampled_from(tensors))
        if kind == "named":
            e: Any = ok.Dim(draw(st.sampled_from(named)), name=name)
        elif kind == "numel":
            e = ok.Numel(t, name=name)
        elif kind == "dim":
            e = ok.DimSize(t, draw(st.sampled_from([0, -1, 1])), name=name,
                           bucket=draw(st.sampled_from(["exact", "exact", "pow2"])))  # fmt: skip
        elif kind == "stride":
            group = draw(st.lists(st.sampled_from(tensors + outputs), min_size=1, max_size=2, unique=True))
            e = ok.Stride(group[0] if len(group) == 1 else tuple(group), draw(st.sampled_from([0, -1])), name=name)
        elif kind == "const_int":
            e = ok.Const(draw(st.sampled_from([0, 7, -3, 2**31 - 1])), name=name)
        else:
            e = ok.Const(draw(st.sampled_from([0.5, -2.25, float("inf"), float("nan"), 1e-30])), name=name)
        ctype = (
            draw(st.sampled_from(["float", "double"])) if kind == "const_float" else draw(st.sampled_from(EXTRA_CTYPES))
        )
        extras.append(e)
        ctypes.append(ctype)
    return extras, ctypes


def _expr(draw: Any, refs: list[str], depth: int = 0) -> str:
    leaf = st.sampled_from(["numel({t})", "size({t}, 0)", "size({t}, -1)", "stride({t}, 0)", "7", "2", "sm_count",
                            "0", "-3"])  # fmt: skip
    if depth >= 2 or draw(st.integers(0, 2)) == 0:
        return draw(leaf).format(t=draw(st.sampled_from(refs)))
    op = draw(st.sampled_from(["{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} // {b}", "cdiv({a}, {b})", "min({a}, {b})",
                               "max({a}, {b})", "pow2({a})"]))  # fmt: skip
    return op.format(a=_expr(draw, refs, depth + 1), b=_expr(draw, refs, depth + 1))


@st.composite
def _geometry(draw: Any, tensors: list[str], outputs: list[str], mutated: list[str]) -> tuple[Any, Any]:
    kind = draw(st.sampled_from(["flat", "nd", "rows", "grid", "grid"]))
    if kind == "flat":
        return ok.Elementwise(block=(draw(st.sampled_from([32, 256, 768, 1024])),)), None
    if kind == "nd":
        return ok.Elementwise(block=draw(st.sampled_from([(16, 16), (32, 8), (8, 8, 4)])), layout="nd"), None
    if kind == "rows":
        return ok.Reduction(draw(_axes()), block_size=draw(st.sampled_from([32, 256]))), None
    refs = tensors + outputs
    grid = tuple(_expr(draw, refs) for _ in range(draw(st.integers(1, 3))))
    smem = draw(_shared_mem(refs))
    if draw(st.booleans()):
        configs = [ok.Config({"THREADS": t}) for t in (128, 256)]
        grid = tuple(g if k else f"cdiv({g}, THREADS)" for k, g in enumerate(grid))
        return ok.Grid(grid=grid, block=("THREADS",), shared_mem=smem), ok.Autotune(
            configs, default=draw(st.integers(0, 1))
        )
    return ok.Grid(grid=grid, block=(draw(st.sampled_from([64, 256])),), shared_mem=smem), None


#: The most dynamic shared memory a block may opt into (sm_90: 227 KiB); expressions straddle 0 and it.
SMEM_MAX = 227 * 1024


@st.composite
def _shared_mem(draw: Any, refs: list[str]) -> Any:
    """A Grid's dynamic shared memory: none, a constant, or a size expression near 0 (negative for small
    inputs), near the maximum (past it for large ones), or the maximum exactly."""
    t = draw(st.sampled_from(refs))
    return draw(st.sampled_from([0] * 10 + [1024, f"numel({t}) * 4", f"size({t}, 0) * 4 - 8",
                                 f"{SMEM_MAX} - numel({t})", f"{SMEM_MAX - 16} + size({t}, -1) * 4",
                                 f"{SMEM_MAX}", f"numel({t}) * 49152"]))  # fmt: skip


# -- calls ---------------------------------------------------------------------------------------------------


@st.composite
def calls(draw: Any, op: ok.Op, device: str = "cpu") -> list[list[dict]]:
    """Calls of ``op``: valid, empty, strided, with one mistake, huge (meta), scalars at their edges."""
    out = []
    for _ in range(draw(st.integers(3, 5))):
        how = draw(st.sampled_from(["valid", "valid", "empty", "strided", "wrong", "huge", "edge"]))
        out.append(draw(_call(op, how, device)))
    return out


@st.composite
def _call(draw: Any, op: ok.Op, how: str, real: str = "cpu") -> list[dict]:
    r = op.record
    shapes = draw(_shapes(r))
    device = "meta" if how == "huge" or draw(st.integers(0, 3)) == 3 else real
    free = [t for t in shapes if t != "dig"]  # the digest keeps its shape and dtype
    if how == "empty":
        t = draw(st.sampled_from(free))
        if shapes[t]:
            shapes[t][draw(st.integers(0, len(shapes[t]) - 1))] = 0
    if how == "huge":
        t = draw(st.sampled_from(free))
        shapes[t] = [*shapes[t][:-1], draw(st.sampled_from([2**31, 2**31 + 5, 2**32 + 1, 3 * 2**30]))]
    dtypes = {a.name: a.dtype or "float32" for a in r.tensor_inputs}
    views = {a.name: "plain" for a in r.tensor_inputs}
    if how == "strided":
        t = draw(st.sampled_from(free))
        views[t] = draw(st.sampled_from(["t", "slice", "expand", "offset"]))
    wrong = draw(st.sampled_from(["dtype", "rank", "size"])) if how == "wrong" else None
    if wrong:
        t = draw(st.sampled_from(free))
        if wrong == "dtype":
            dtypes[t] = draw(st.sampled_from(["float16", "int64", "float32"]))
        elif wrong == "rank":
            shapes[t] = [*shapes[t], 2]
        else:
            shapes[t] = [s + 1 for s in shapes[t]]
    call = []
    for k, a in enumerate(r.inputs):
        if isinstance(a, TensorArg):
            view = "zeros" if a.name == "dig" else views[a.name]
            call.append({"t": "tensor", "shape": shapes[a.name], "dtype": dtypes[a.name], "device": device,
                         "view": view, "seed": k})  # fmt: skip
        else:
            call.append({"t": "scalar", "v": draw(_scalar(a, how == "edge"))})
    return call


@st.composite
def _shapes(draw: Any, r: Any) -> dict[str, list[int]]:
    """Shapes that satisfy the declaration: the named dimensions one size each, groups one tuple each, bound
    from the undeclared tensors first (a ``DimSize`` names one of their axes)."""
    shapes: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}
    groups: dict[str, list[int]] = {}
    for a in r.tensor_inputs:
        if a.shape is None and a.shape_like is None:
            rank = a.ndim if a.ndim is not None else draw(st.integers(max(a.min_ndim, 1), max(a.min_ndim, 1) + 1))
            shapes[a.name] = [draw(st.integers(1, 5)) for _ in range(rank)]
    if "dig" in shapes:
        shapes["dig"] = [32]
    for rnd in range(2):  # a DimSize may name a later input's axis: its size is known after the first round
        for n, k, axis in r.dims:
            t = r.tensor_inputs[k]
            if t.name in shapes and (rnd or t.shape is None):
                sizes[n] = _size(shapes[t.name], axis)
        for a in r.tensor_inputs:
            if a.shape is None:
                continue
            out: list[int] = []
            for e in a.shape:
                if isinstance(e, int):
                    out.append(e)
                elif e is None:
                    out.append(draw(st.integers(1, 5)))
                elif e.startswith("*"):
                    least = max(0, a.min_ndim - (len(a.shape) - 1))
                    n_g = draw(st.integers(least, least + 2))
                    out += groups.setdefault(e[1:], [draw(st.integers(1, 4)) for _ in range(n_g)])
                else:
                    out.append(sizes.setdefault(e, draw(st.integers(1, 5))))
            shapes[a.name] = out
    for a in r.tensor_inputs:
        if a.shape_like is not None:
            shapes[a.name] = list(shapes[r.tensor_inputs[a.shape_like].name])
    return shapes


def _size(shape: list[int], axis: int) -> int:
    return shape[axis] if -len(shape) <= axis < len(shape) else 3


def _scalar(a: Any, edge: bool) -> Any:
    if a.py_type == "float":
        return st.sampled_from(FLOATS) if edge else st.sampled_from([1.5, -0.25, 2.0])
    if a.py_type == "int":
        return st.sampled_from(INTS) if edge else st.integers(-4, 100)
    return st.booleans()


# -- running both paths --------------------------------------------------------------------------------------


def register(gens: list[Gen]) -> list[Gen]:
    """Register each generated op; a declaration the registration refuses is kept out (with its reason)."""
    for g in gens:
        try:
            g.ok = ok.cuda_kernel_op(g.op_name, g.spec)
        except (ok.SpecError, ok.CompileError) as e:
            g.refused = str(e).splitlines()[0]
    return [g for g in gens if g.ok is not None]


def python_outcomes(gens: list[Gen], values: bool = False) -> tuple[dict, list[dict]]:
    """The Python path's outcome of every call (case id -> outcome), and the cases for the native side. CPU
    calls run the dry run; CUDA calls launch (what the kernel writes in place comes back, and with ``values``
    the outputs too); meta calls run the fake."""
    results, cases = {}, []
    for g in gens:
        dry, _ = make_dry_run(g.ok)
        pointers = _Pointers(g.ok)
        written = tuple(g.ok.plan.tensors[k] for k in g.ok.plan.mutated)
        # what each path leaves in an init= output before the launch (an output without one holds garbage)
        inits = tuple(k for k, o in enumerate(g.ok.record.outputs) if o.init is not None)

        def take(dry: Any = dry) -> list:
            got, dry.launches[:] = list(dry.launches), []
            return got

        for j, call in enumerate(g.calls):
            cid = f"{g.op_name}#{j}"
            device = next((a["device"] for a in call if a["t"] == "tensor"), "cpu")
            args = build_args(call)
            if device == "meta":
                results[cid] = outcome(g.ok, args)
            elif device == "cuda":
                results[cid] = outcome(g.ok, args, written=written, values=values)
            else:
                results[cid] = outcome(dry, args, pointers, take, inits=inits)
                _against_fake(g, cid, call, results[cid])
            cases.append({"id": cid, "op": g.op_name, "call": call, "pointers": pointers, "written": written,
                          "values": values, "inits": inits})  # fmt: skip
    for c in cases:  # every kernel the Python runs compiled, by image
        if isinstance(c["pointers"], _Pointers):
            c["pointers"] = c["pointers"].table()
    return results, cases


class _Pointers(dict):
    """The pointer slots of an op's launches, per kernel image: the declared pointer parameters, less those a
    kernel compiled in (Triton: a 1, an optional tensor's None), which its arguments leave out."""

    def __init__(self, op: Any) -> None:
        super().__init__()
        self.op = op
        self["*"] = [k for k, p in enumerate(op.plan.launch.params) if p.ctype == "ptr"]

    def get(self, image: Any, default: Any = None) -> Any:
        return self.table().get(image, default)

    def table(self) -> dict:
        from opsmith.torchlib.launch_code import fnv1a64

        out = {"*": self["*"]}
        for kd in list(self.op.variants.kernels.values()):
            b = kd.binary_for(self.op.record.arch) if hasattr(kd, "binary_for") else None
            if b is None:
                continue
            gone = set(getattr(b, "dropped", ()))
            out[fnv1a64(b.data)] = [k - sum(d < k for d in gone) for k in self["*"] if k not in gone]
        return out


# Refusals only a real call makes (plan.py: a meta call skips the device, layout copies and the launch, whose
# grid depends on the tuning decision made at the call).
# A CPU dry run of a huge output also fails to allocate it, which meta tensors need not.
_REAL_ONLY = ("expected a launch of", "with one stride on axis", "expected a contiguous tensor", "blocks of",
              "expected a view spanning", "more than 2^31 threads", "can't allocate memory",
              "to divide by a non-zero value", "expected dynamic shared memory of")  # a grid or extra expression: evaluated for the launch  # fmt: skip


def _against_fake(g: Gen, cid: str, call: list[dict], dry: dict) -> None:
    """The same call on meta tensors through the fake implementation must be refused with the same text, or
    accepted with the same outputs (what compile and export trace with)."""
    meta = [dict(a, device="meta") if a["t"] == "tensor" else a for a in call]
    fake = outcome(g.ok, build_args(meta))
    want = json.loads(json.dumps({k: v for k, v in dry.items() if k in ("ok", "error", "outputs")}))  # a copy
    if not dry["ok"] and any(w in dry["error"] for w in _REAL_ONLY):
        return  # refused for the launch or a real tensor's layout, which tracing does not see (plan.py)
    for res in (fake, want):  # the stride of an axis of size 1 means nothing (torch's own comparisons skip it)
        for o in res.get("outputs", ()):
            o[2] = [st if n != 1 else None for n, st in zip(o[0], o[2], strict=True)]
    if fake != want:
        g.fake_bad.append(f"{cid} (fake)\n  python dry run: {want}\n  fake on meta: {fake}\n  call: {call}\n  "
                          f"{g.describe()}")  # fmt: skip


def native_outcomes(gens: list[Gen], cases: list[dict], work: Path, gpu: bool = False, stable: bool = False,
                    python: str = sys.executable) -> dict:  # fmt: skip
    """The native library's outcomes, in a process without opsmith: a dry-run library (CPU calls), or one that
    launches (``gpu``: CUDA calls). ``stable``: a stable-ABI library, run by ``python`` (another torch)."""
    lib = work / "libdiff.so"
    native.build([g.ok for g in gens], lib, dry_run=not gpu, stable=stable)
    (work / "cases.json").write_text(json.dumps(cases))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.run([python, str(HERE / "diff_native.py"), str(lib), str(work / "cases.json")],
                          capture_output=True, text=True, timeout=900, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert got["opsmith_imported"] is False
    return got["cases"]


def compare(gens: list[Gen], py: dict, nat: dict, stable: bool = False) -> list[str]:
    """Every disagreement, described with the declaration and the call. ``stable``: the library raises
    RuntimeError where the Python path raises ValueError (the stable C API has no ValueError), same text."""
    by_op = {g.op_name: g for g in gens}
    bad = [b for g in gens for b in g.fake_bad]
    for cid, want in py.items():
        got = nat.get(cid)
        if stable and not want["ok"] and want["error"].startswith("ValueError: "):
            want = {**want, "error": "RuntimeError: " + want["error"].removeprefix("ValueError: ")}
        if got != want:
            g = by_op[cid.split("#")[0]]
            call = g.calls[int(cid.split("#")[1])]
            bad.append(f"{cid}\n  python: {want}\n  native: {got}\n  call: {call}\n  {g.describe()}")
    return bad


def summary(gens: list[Gen], py: dict) -> dict:
    accepted = sum(1 for o in py.values() if o["ok"])
    launched = sum(len(o.get("launches", ())) for o in py.values())
    return {"ops": len(gens), "calls": len(py), "accepted": accepted, "refused": len(py) - accepted,
            "launches": launched}  # fmt: skip


def run_batch(data: Any, ns: str, n_ops: int, work: Path, gpu: bool = False, stable: bool = False,
              python: str = sys.executable) -> tuple[list[Gen], dict, dict]:  # fmt: skip
    """Draw ``n_ops`` declarations (two of them named to mangle alike in C++: ``<ns>a__b::c``, ``<ns>a::b__c``),
    register them, draw their calls, and run both paths. Returns (the registered ops, python, native). ``gpu``:
    real launches on CUDA tensors, each kernel writing a digest of its launch (``_digest``)."""
    names = [f"{ns}::k{i}" for i in range(n_ops - 2)] + [f"{ns}a__b::c", f"{ns}a::b__c"]
    gens = register([data.draw(declaration(n, gpu), label=n) for n in names])
    for g in gens:
        g.calls = data.draw(calls(g.ok, "cuda" if gpu else "cpu"), label=f"calls of {g.op_name}")
    py, cases = python_outcomes(gens)
    return gens, py, native_outcomes(gens, cases, work, gpu, stable, python)
