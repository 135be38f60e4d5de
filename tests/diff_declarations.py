"""The declarations the differential draws (``differential.py``): generated CUDA C++ ops, their kernel bodies
(each writes a digest of its launch where the GPU runs it) and their declarations: inputs of every dtype, scalars
of every C type, extras of every kind, named and grouped shapes, preconditions, geometries (tuned too) and
shared-memory expressions near the device's limits. ``Gen`` is one drawn op.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch
from hypothesis import strategies as st

import opsmith as ok

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
