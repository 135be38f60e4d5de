"""Every form of a declaration, with values: generated Triton ops whose meaning the generator knows.

A ``Form`` is the generator's own description of one op: its tensors (``X`` the rows; ``B`` a column bias, ``S``
a row scale, ``MASK`` a bool column mask, ``ACC`` a row accumulator written in place), which are optional and how
the kernel learns it (a ``@triton.heuristics`` over the tensor, or a ``Present`` extra), where each argument
stands, how X's dtype is spelled (a dtype, a set, a list, a tuple, a frozenset, open), which outputs exist (``Y``;
``RS`` a row sum, ``MX`` a row max) and their ``init``, named or grouped (``"*R"``) dimensions, one shared
``Stride`` tuple or one per tensor, the geometry (one program per row; a grid over a named dimension; tuned rows
and blocks with a 1-D or 2-D key), ``DtypeOf`` constexprs (over the bool mask too), a heuristic over an int
scalar, a bool scalar compiled in, a precondition, the compile mode and a backward.

``source`` writes its kernel, ``declare`` registers it, ``calls`` draws valid and invalid calls, and ``expected``
computes the outputs from the description alone, in torch, never from opsmith's record. ``forms_check.py`` runs
them through every path and compares; ``snippet`` prints a failing op and call as a script that reruns it.
"""

from __future__ import annotations

import importlib.util
import math
import random
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

FLOATS = [torch.float32, torch.float16, torch.bfloat16]
TOL = {torch.float32: (1e-4, 1e-4), torch.float16: (2e-2, 2e-2), torch.bfloat16: (8e-2, 8e-2)}


@dataclass
class Form:
    seed: int
    ns: str
    order: list[str]  # the declared inputs in schema order: X, B, S, MASK, ACC, alpha, shift, NEG
    optional: dict[str, bool]  # per optional-capable tensor (B, S, MASK): declared optional=True
    presence: dict[str, str]  # per optional tensor: "heuristic" or "present"
    x_dtype: Any  # None (open), a dtype, or a set / list / tuple / frozenset of dtypes
    x_contig: str  # "make" (a layout the strides cannot address is copied) or "require" (refused)
    b_dtype: str  # "X" (typed alike), "open", "float32"
    shape: str  # "named": ("R", "N"); "group": ("*R", "N"); "ndim": ndim=2
    outputs: list[str]  # of Y, RS, MX, in declared order
    init: dict[str, Any]  # per output: None or the value it starts from
    y_fixed: bool  # Y declared float32 (else X's dtype)
    reduce_decl: str  # RS / MX shapes: "named" (("R",) / ("*R",)) or "reduce" (ReduceDims)
    shared_stride: bool  # one Stride(("X", "Y"), -2) for both, else one each
    geometry: str  # "rows" (Reduction), "grid" (Grid over R), "tuned" (Autotune over ROWS and BLOCK)
    key: str  # tuned: "1d" or "2d"
    block: str  # "pow2" (DimSize bucket, compiled in) or "loop" (a fixed block looped over the row)
    dtype_of: bool  # X_DT = DtypeOf("X") casts the stored Y (Y of X's dtype only)
    mask_dtype_of: bool  # MASK_DT = DtypeOf("MASK") (MASK required then)
    clamp: bool  # CLAMP = heuristic over the int scalar shift (shift < 0: not added)
    neg: bool  # NEG: a bool scalar input named like a constexpr (compiled in)
    requires: bool  # AtMost("N", 48) (or over size(X, -1))
    compile: str  # "kernel", "reference", "auto"
    backward: bool  # Y's gradient for X
    bw_program: bool = False  # the backward a program of one Step calling a generated gradient op (else a function)
    name: str = ""
    calls: list[dict] = field(default_factory=list)

    @property
    def tensors(self) -> list[str]:
        return [n for n in self.order if n in ("X", "B", "S", "MASK", "ACC")]

    def y_dtype(self, x: torch.dtype) -> torch.dtype:
        return torch.float32 if self.y_fixed else x

    def allowed(self) -> list[torch.dtype]:
        d = self.x_dtype
        return FLOATS if d is None else [d] if isinstance(d, torch.dtype) else sorted(d, key=str)


def draw(seed: int, ns: str) -> Form:
    """One form, from ``seed`` alone."""
    r = random.Random(seed)
    extra = [t for t in ("B", "S", "MASK", "ACC") if r.random() < 0.6]
    mask_dtype_of = "MASK" in extra and r.random() < 0.4
    optional = {t: (r.random() < 0.7 and not (t == "MASK" and mask_dtype_of)) for t in extra if t != "ACC"}
    scalars = ["alpha", "shift"] + (["NEG"] if r.random() < 0.4 else [])
    rest = extra + scalars
    r.shuffle(rest)
    cut = r.randint(0, len(rest))  # X is the first tensor; scalars may stand before it
    before = [a for a in rest[:cut] if a in scalars]
    order = before + ["X"] + [a for a in rest if a not in before]
    dspell = r.choice(["open", "one", "set", "list", "tuple", "frozenset"])
    pool = r.sample(FLOATS, r.randint(1, 3))
    x_dtype: Any = {"open": None, "one": pool[0], "set": set(pool), "list": list(pool), "tuple": tuple(pool),
                    "frozenset": frozenset(pool)}[dspell]  # fmt: skip
    outputs = r.sample(["Y", "RS", "MX"], r.randint(1, 3))
    inits = {"Y": [None, None, 0, 1.5], "RS": [None, 0, 1, -2.5], "MX": [None, float("-inf"), 0.5]}
    init = {o: r.choice(inits[o]) for o in outputs}
    shape = r.choice(["named", "named", "group", "ndim"])
    geometry = r.choice(["rows", "grid", "tuned"]) if shape == "named" else "rows"
    y_fixed = r.random() < 0.25
    # Y's gradient for X (the other outputs, row statistics, take none: a loss on them alone gets zeros)
    backward = "Y" in outputs and "ACC" not in extra and not y_fixed and r.random() < 0.7
    return Form(
        seed=seed, ns=ns, order=order, optional=optional,
        presence={t: r.choice(["heuristic", "present"]) for t in optional if optional[t]},
        x_dtype=x_dtype, b_dtype=r.choice(["X", "open", "float32"]), shape=shape, outputs=outputs, init=init,
        y_fixed=y_fixed, reduce_decl=r.choice(["named", "reduce"]), shared_stride=r.random() < 0.3,
        x_contig=r.choice(["make", "make", "require"]),
        geometry=geometry, key=r.choice(["1d", "2d"]), block=r.choice(["pow2", "loop"]),
        dtype_of="Y" in outputs and not y_fixed and r.random() < 0.4, mask_dtype_of=mask_dtype_of,
        clamp=r.random() < 0.5, neg="NEG" in scalars, requires=r.random() < 0.25,
        compile=r.choice(["kernel", "kernel", "reference", "auto"]) if "ACC" not in extra else "kernel",
        backward=backward, bw_program=backward and r.random() < 0.5,
        name=f"{ns}::f{seed}",
    )  # fmt: skip


# -- the kernel ------------------------------------------------------------------------------------------------


def source(f: Form) -> str:
    """The Triton kernel of ``f``, as a module's text (``@triton.jit`` reads its source from a file)."""
    ts = f.tensors
    params = [f"{t}_ptr" for t in ts] + [f"{o}_ptr" for o in f.outputs] + ["alpha", "shift", "n_rows", "n_cols",
              "stride_x"]  # fmt: skip
    if "Y" in f.outputs and not f.shared_stride:
        params.append("stride_y")
    cexprs = [f"HAS_{t}" for t in ("B", "S", "MASK") if t in ts] + ["CLAMP"] + (["NEG"] if f.neg else [])
    cexprs += (["X_DT"] if f.dtype_of else []) + (["MASK_DT"] if f.mask_dtype_of else []) + ["ROWS", "BLOCK"]
    heur = {f"HAS_{t}": f'lambda a: a["{t}_ptr"] is not None' for t, how in f.presence.items() if how == "heuristic"}
    if f.clamp:
        heur["CLAMP"] = 'lambda a: a["shift"] < 0'
    ystride = "stride_x" if f.shared_stride else "stride_y"
    L = ["import triton", "import triton.language as tl", ""]
    if heur:
        L.append("@triton.heuristics({" + ", ".join(f'"{k}": {v}' for k, v in heur.items()) + "})")
    L += ["@triton.jit", f"def kernel({', '.join(params + [c + ': tl.constexpr' for c in cexprs])}):",
          "    pid = tl.program_id(0)",
          "    for rr in tl.static_range(ROWS):",
          "        row = pid * ROWS + rr",
          "        if row < n_rows:",
          "            acc_s = 0.0",
          '            acc_m = -float("inf")',
          "            for c0 in range(0, n_cols, BLOCK):",
          "                cols = c0 + tl.arange(0, BLOCK)",
          "                cm = cols < n_cols",
          "                y = tl.load(X_ptr + row * stride_x + cols, mask=cm, other=0.0).to(tl.float32) * alpha"]  # fmt: skip
    body = []
    if "S" in ts:
        body += ["if HAS_S:", "    y = y * tl.load(S_ptr + row).to(tl.float32)"]
    if "B" in ts:
        body += ["if HAS_B:", "    y = y + tl.load(B_ptr + cols, mask=cm, other=0.0).to(tl.float32)"]
    body += ["if not CLAMP:", "    y = y + shift"]
    if "MASK" in ts:
        cast = ".to(MASK_DT)" if f.mask_dtype_of else ""
        body += ["if HAS_MASK:", f"    m = tl.load(MASK_ptr + cols, mask=cm, other=0){cast}",
                 "    y = tl.where(m != 0, y, 0.0)"]  # fmt: skip
    if f.neg:
        body += ["if NEG:", "    y = -y"]
    if "Y" in f.outputs:
        to = "X_DT" if f.dtype_of else "Y_ptr.dtype.element_ty"
        body.append(f"tl.store(Y_ptr + row * {ystride} + cols, y.to({to}), mask=cm)")
    body += [
        "acc_s += tl.sum(tl.where(cm, y, 0.0))",
        'acc_m = tl.maximum(acc_m, tl.max(tl.where(cm, y, -float("inf"))))',
    ]
    L += ["                " + b for b in body]
    # RS also adds the shift once per row (a bias): what a kernel contributes over an empty row, so an init output
    # returned without the launch would be wrong
    L += ["            rs = acc_s", "            if not CLAMP:", "                rs = rs + shift"]
    for o, fn in (("RS", "{v} + rs"), ("MX", "tl.maximum({v}, acc_m)")):
        if o in f.outputs:
            v = fn.format(v=f"tl.load({o}_ptr + row)") if f.init[o] is not None else ("rs" if o == "RS" else "acc_m")
            L.append(f"            tl.store({o}_ptr + row, {v})")
    if "ACC" in ts:
        L.append("            tl.store(ACC_ptr + row, tl.load(ACC_ptr + row) + acc_s)")
    return "\n".join(L) + "\n"


def grad_source(f: Form) -> str:
    """The gradient kernel of a program backward: dX = dY * alpha (* S[row]) (masked) (negated)."""
    ts = [t for t in ("S", "MASK") if t in f.tensors]
    params = ["G_ptr", *[f"{t}_ptr" for t in ts], "DX_ptr", "alpha", "n_cols", "stride_g"]
    cex = [f"HAS_{t}" for t in ts] + (["NEG"] if f.neg else []) + ["BLOCK"]
    heur = {f"HAS_{t}": f'lambda a: a["{t}_ptr"] is not None' for t in ts}
    L = ["import triton", "import triton.language as tl", "",
         "@triton.heuristics({" + ", ".join(f'"{k}": {v}' for k, v in heur.items()) + "})", "@triton.jit",
         f"def grad_kernel({', '.join(params + [c + ': tl.constexpr' for c in cex])}):",
         "    row = tl.program_id(0)",
         "    for c0 in range(0, n_cols, BLOCK):",
         "        cols = c0 + tl.arange(0, BLOCK)",
         "        cm = cols < n_cols",
         "        g = tl.load(G_ptr + row * stride_g + cols, mask=cm, other=0.0).to(tl.float32) * alpha"]  # fmt: skip
    if "S" in ts:
        L += ["        if HAS_S:", "            g = g * tl.load(S_ptr + row).to(tl.float32)"]
    if "MASK" in ts:
        L += ["        if HAS_MASK:", "            m = tl.load(MASK_ptr + cols, mask=cm, other=0)",
              "            g = tl.where(m != 0, g, 0.0)"]  # fmt: skip
    if f.neg:
        L += ["        if NEG:", "            g = -g"]
    L.append("        tl.store(DX_ptr + row * stride_g + cols, g.to(DX_ptr.dtype.element_ty), mask=cm)")
    return "\n".join(L) + "\n"


def grad_op(f: Form, work: Path) -> Any:
    """The op a program backward's one Step calls (rows of dY; S and MASK optional as in the form)."""
    import opsmith as ok

    path = work / f"forms_g{f.seed}.py"
    path.write_text(grad_source(f))
    kernel = _module(path).grad_kernel
    rows = {"named": ("R", "N"), "group": ("*R", "N"), "ndim": None}[f.shape]
    ins: list[Any] = [ok.InputDecl("G", shape=rows, ndim=2 if f.shape == "ndim" else None)]
    ins += [ok.InputDecl("S", shape=(rows[:-1] if rows else (ok.DimSize("G", 0),)), optional=True)] * ("S" in f.tensors)
    ins += [ok.InputDecl("MASK", torch.bool, shape=(ok.DimSize("G", -1),), optional=True)] * ("MASK" in f.tensors)
    ins += [ok.ScalarInput("alpha", float)] + [ok.ScalarInput("NEG", bool)] * f.neg
    return ok.triton_op(f"{f.name}_grad", kernel, inputs=ins, outputs=[ok.OutputDecl("DX", ok.SameAs("G"))],
                        extras=[ok.DimSize("G", -1, name="n_cols"), ok.Stride(("G", "DX"), -2, name="stride_g")],
                        constexprs={"BLOCK": 16}, geometry=ok.Reduction(reduce_dims=(-1,)))  # fmt: skip


def _module(path: Path) -> Any:
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    sys.modules[path.stem] = mod
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


def load_kernel(f: Form, work: Path) -> Any:
    path = work / f"forms_k{f.seed}.py"
    path.write_text(source(f))
    return _module(path).kernel


# -- the declaration -------------------------------------------------------------------------------------------


def declaration(f: Form) -> str:
    """The ``triton_op`` call registering ``f``, as Python text (what a failure prints, and what runs)."""
    rows = {"named": '("R", "N")', "group": '("*R", "N")', "ndim": "None"}[f.shape]
    xd = _dtype_text(f.x_dtype)
    ins = []
    for n in f.order:
        if n == "X":
            contig = ", contiguous='require'" if f.x_contig == "require" else ""
            ins.append(f"ok.InputDecl('X', {xd}, shape={rows}{', ndim=2' if f.shape == 'ndim' else ''}{contig})")
        elif n == "B":
            bd = {"X": "'X'", "open": "None", "float32": "torch.float32"}[f.b_dtype]
            col = '("N",)' if f.shape != "ndim" else "(ok.DimSize('X', -1),)"
            ins.append(f"ok.InputDecl('B', {bd}, shape={col}, optional={f.optional['B']})")
        elif n == "S":
            ins.append(f"ok.InputDecl('S', shape={_rows_shape(f)}, optional={f.optional['S']})")
        elif n == "MASK":
            col = '("N",)' if f.shape != "ndim" else "(ok.DimSize('X', -1),)"
            ins.append(f"ok.InputDecl('MASK', torch.bool, shape={col}, optional={f.optional['MASK']})")
        elif n == "ACC":
            ins.append(f"ok.InputDecl('ACC', torch.float32, shape={_rows_shape(f)}, mutates=True)")
        else:
            ins.append(f"ok.ScalarInput({n!r}, {'float' if n == 'alpha' else 'int' if n == 'shift' else 'bool'})")
    outs = []
    for o in f.outputs:
        init = f", init={f.init[o]!r}" if f.init[o] is not None else ""
        init = init.replace("-inf", "float('-inf')")
        if o == "Y":
            outs.append(f"ok.OutputDecl('Y', ok.SameAs('X'){', dtype=torch.float32' if f.y_fixed else ''}{init})")
        else:
            shp = "ok.ReduceDims('X', (-1,))" if f.reduce_decl == "reduce" or f.shape == "ndim" else _rows_shape(f)
            outs.append(f"ok.OutputDecl({o!r}, {shp}, dtype=torch.float32{init})")
    n_cols = "ok.Dim('N', name='n_cols')" if f.shape != "ndim" else "ok.DimSize('X', -1, name='n_cols')"
    n_rows = {
        "named": "ok.Dim('R', name='n_rows')",
        "ndim": "ok.DimSize('X', 0, name='n_rows')",
        "group": "ok.Const(2147483647, name='n_rows')",
    }[f.shape]  # one program per row: no bound needed
    if f.shape == "group" and f.seed % 2:  # a size expression instead (0 rows where N is 0: no empty columns then)
        n_rows = "ok.Size('numel(X) // max(N, 1)', name='n_rows')"
    extras = [n_rows, n_cols]
    if f.shared_stride and "Y" in f.outputs:
        extras.append("ok.Stride(('X', 'Y'), -2, name='stride_x')")
    else:
        extras.append("ok.Stride('X', -2, name='stride_x')")
        if "Y" in f.outputs:
            extras.append("ok.Stride('Y', -2, name='stride_y')")
    extras += [f"ok.Present({t!r}, name='HAS_{t}')" for t, how in f.presence.items() if how == "present"]
    cx = {f"HAS_{t}": "True" for t in ("B", "S", "MASK") if t in f.tensors and not f.optional.get(t)}
    if not f.clamp:
        cx["CLAMP"] = "False"
    if f.dtype_of:
        cx["X_DT"] = "ok.DtypeOf('X')"
    if f.mask_dtype_of:
        cx["MASK_DT"] = "ok.DtypeOf('MASK')"
    autotune = "None"
    if f.geometry == "tuned":
        key = "[ok.TuneDim('X', -1, 'pow2')]" if f.key == "1d" else "[ok.TuneDim('X', 0), ok.TuneDim('X', -1, 'pow2')]"
        autotune = (f"ok.Autotune([ok.Config({{'ROWS': 1, 'BLOCK': 16}}), ok.Config({{'ROWS': 2, 'BLOCK': 32}})], "
                    f"key={key})")  # fmt: skip
        geometry = "ok.Grid(grid=('cdiv(R, ROWS)',))"
    else:
        cx["ROWS"] = "1"
        if f.block == "pow2":
            extras.append("ok.DimSize('X', -1, name='BLOCK', bucket='pow2')")
        else:
            cx["BLOCK"] = "16"
        geometry = "ok.Reduction(reduce_dims=(-1,))" if f.geometry == "rows" else "ok.Grid(grid=('R',))"
    cols = "N" if f.shape != "ndim" else "size(X, -1)"
    requires = f"[ok.AtMost({cols!r}, 48)]" if f.requires else "[]"
    backward = "ok.Backward(grad_fn, args=grad_args, grads=('X',))" if f.backward else "None"
    if f.bw_program:  # one Step: the generated gradient op on dY and the form's S, MASK, alpha, NEG
        backward = ("ok.Backward((ok.Step(grad_op, args=grad_args, outputs=('dX',)),), args=grad_args, "
                    "grads=('X',), returns=('dX',))")  # fmt: skip
    ref = "reference" if f.compile != "kernel" else "None"
    return (f"ok.triton_op({f.name!r}, kernel,\n    inputs=[{', '.join(ins)}],\n    outputs=[{', '.join(outs)}],\n"
            f"    extras=[{', '.join(extras)}],\n    constexprs={{{', '.join(f'{k!r}: {v}' for k, v in cx.items())}}},\n"
            f"    geometry={geometry}, autotune={autotune}, requires={requires},\n    backward={backward}, "
            f"reference={ref}, compile={f.compile!r})")  # fmt: skip


def _rows_shape(f: Form) -> str:
    return {"named": '("R",)', "group": '("*R",)', "ndim": "(ok.DimSize('X', 0),)"}[f.shape]


def _dtype_text(d: Any) -> str:
    if d is None:
        return "None"
    if isinstance(d, torch.dtype):
        return str(d)
    items = ", ".join(str(x) for x in sorted(d, key=str))
    return {set: f"{{{items}}}", list: f"[{items}]", tuple: f"({items},)", frozenset: f"frozenset({{{items}}})"}[
        type(d)
    ]


def declare(f: Form, work: Path) -> Any:
    """Register ``f`` (its kernel written under ``work``)."""
    import opsmith as ok

    scope = {"ok": ok, "torch": torch, "kernel": load_kernel(f, work), "reference": reference(f),
             "grad_fn": grad_fn(f), "grad_args": grad_args(f), "grad_op": grad_op(f, work) if f.bw_program else None}  # fmt: skip
    return eval(declaration(f), scope)


# -- the meaning -----------------------------------------------------------------------------------------------


def _y(f: Form, a: dict) -> torch.Tensor:
    """y in float32, as the description says (before Y's cast)."""
    x = a["X"].float()
    y = x * torch.tensor(a["alpha"], dtype=torch.float32)
    if a.get("S") is not None:
        y = y * a["S"].float()[..., None]
    if a.get("B") is not None:
        y = y + a["B"].float()
    if a["shift"] >= 0 or not f.clamp:
        y = y + torch.tensor(a["shift"], dtype=torch.float32)
    if a.get("MASK") is not None:
        y = torch.where(a["MASK"], y, torch.zeros((), dtype=torch.float32))
    if f.neg and a["NEG"]:
        y = -y
    return y


def expected(f: Form, a: dict) -> tuple[list[torch.Tensor], torch.Tensor | None]:
    """(the outputs in declared order, ACC after the call) for the arguments ``a`` (by name)."""
    y = _y(f, a)
    out = []
    for o in f.outputs:
        init = f.init[o]
        if o == "Y":
            out.append(y.to(f.y_dtype(a["X"].dtype)))
        elif o == "RS":  # the row's sum, plus the shift once (a bias), from its init
            bias = float(a["shift"]) if a["shift"] >= 0 or not f.clamp else 0.0
            out.append((y.sum(-1) + torch.tensor(bias, dtype=torch.float32)) + (init or 0))
        else:
            m = y.amax(-1) if y.shape[-1] else torch.full(y.shape[:-1], float("-inf"))
            out.append(torch.maximum(m, torch.tensor(float(init))) if init is not None else m)
    acc = a["ACC"] + y.sum(-1) if "ACC" in f.tensors else None
    return out, acc


def reference(f: Form) -> Any:
    """What ``compile="reference"`` traces: the meaning, in torch ops, by position."""

    def ref(*args: Any) -> Any:
        a = dict(zip(f.order, args, strict=True))
        outs, acc = expected(f, {**a, "ACC": a["ACC"].clone() if "ACC" in a else None})
        if acc is not None:
            a["ACC"].copy_(acc)
        return outs[0] if len(outs) == 1 else tuple(outs)

    return ref


def grad_args(f: Form) -> tuple[str, ...]:
    return ("grad_Y", *[n for n in ("S", "MASK", "alpha", "NEG") if n in f.order])


def grad_fn(f: Form) -> Any:
    """dY/dX of the description: alpha * S, zero where the mask is off, negated with NEG."""

    def fn(grad_y: torch.Tensor, *rest: Any) -> torch.Tensor:
        a = dict(zip(grad_args(f)[1:], rest, strict=True))
        g = grad_y.float() * a["alpha"]
        if a.get("S") is not None:
            g = g * a["S"].float()[..., None]
        if a.get("MASK") is not None:
            g = torch.where(a["MASK"], g, torch.zeros((), dtype=g.dtype))
        if a.get("NEG"):
            g = -g
        return g.to(grad_y.dtype)

    return fn


# -- calls -----------------------------------------------------------------------------------------------------

#: Call kinds and whether the op must refuse them (None: it depends on the form).
KINDS = {"valid": False, "strided": False, "absent": False, "empty_cols": None, "empty_rows": False,
         "edge": False, "dtype": True, "rank": True, "size": True, "none": True, "requires": True,
         "transposed": None}  # fmt: skip


def calls(f: Form, n: int, rng: random.Random) -> list[dict]:
    """``n`` call descriptions: {"kind", "lead", "cols", "dtype", "given": {tensor: bool}, "alpha", "shift",
    "NEG", "seed"}."""
    kinds = (
        [
            "valid",
            "strided",
            "absent",
            "empty_cols",
            "empty_rows",
            "edge",
            "dtype",
            "rank",
            "size",
            "none",
            "transposed",
        ]
        + (["requires"] if f.requires else [])
        + ["valid"]
    )
    if f.shape == "group":  # a group may be empty: a 1-D X is a valid call
        kinds.remove("rank")
    if f.tensors == ["X"]:  # no other tensor whose size could disagree
        kinds.remove("size")
    if f.shape == "group" and f.seed % 2:  # its kernel counts rows as numel(X) // N: none where N is 0
        kinds.remove("empty_cols")
    out = []
    for j in range(n):
        kind = kinds[j] if j < len(kinds) else rng.choice(kinds)
        lead = [rng.randint(1, 4)] if f.shape != "group" else [rng.randint(1, 3) for _ in range(rng.randint(1, 2))]
        cols = rng.choice([1, 5, 16, 17, 40]) if not f.requires else rng.choice([1, 5, 16, 17, 40, 48])
        if kind == "empty_cols":
            cols = 0
        if kind == "empty_rows":
            lead[0] = 0
        if kind == "requires":
            cols = 49
        if kind == "transposed":  # both swapped axes longer than 1, or the view is contiguous
            cols, lead[-1] = max(cols, 5), max(lead[-1], 2)
        given = {t: (kind not in ("absent", "size") and rng.random() < 0.7) or not f.optional.get(t, False)
                 or kind == "size" for t in f.tensors}  # fmt: skip
        out.append({"kind": kind, "lead": lead, "cols": cols, "dtype": rng.choice(f.allowed()), "given": given,
                    "alpha": rng.choice([1.5, -0.75, 2.0]),
                    "shift": rng.choice([-3, 0, 2, 5]) if kind != "edge" else rng.choice([-(2**31), 2**31 - 1]),
                    "NEG": rng.random() < 0.5, "seed": rng.randrange(2**31)})  # fmt: skip
    return out


def layouts(f: Form, c: dict) -> dict:
    """Call ``c``'s arguments by name, as data: a tensor as (shape, dtype, view: "plain" or "slice", the last
    axis narrowed from a wider tensor), None for an absent or (kind "none") missing tensor, scalars as values."""
    lead, cols, dt, kind = list(c["lead"]), c["cols"], c["dtype"], c["kind"]
    xshape = [*lead, cols]
    if kind == "dtype":  # outside the declared set; an open dtype takes float64 (the kernel computes in float32)
        dt = torch.float64 if f.x_dtype is None else next(d for d in [torch.int32, *FLOATS] if d not in f.allowed())
    if kind == "rank":
        xshape = [2, *xshape] if f.shape != "group" else [cols]
    rows = xshape[:-1]
    view = {"strided": "slice", "transposed": "t"}.get(kind, "plain")  # rows padded; the last two axes swapped
    out: dict[str, Any] = {"X": None if kind == "none" else (xshape, dt, view)}
    bdt = dt if f.b_dtype == "X" and dt.is_floating_point else torch.float32
    wrong = next((t for t in ("B", "MASK", "S", "ACC") if t in f.tensors), None) if kind == "size" else None
    for t in ("B", "S", "MASK", "ACC"):
        if t not in f.tensors:
            continue
        n = [*rows, cols] if t != wrong else [*rows[:-1], rows[-1] + 1, cols + 1]
        shape = n[-1:] if t in ("B", "MASK") else n[:-1]
        dtype = {"B": bdt, "S": torch.float32, "MASK": torch.bool, "ACC": torch.float32}[t]
        out[t] = (shape, dtype, "plain") if c["given"][t] else None
    return out | {"alpha": c["alpha"], "shift": c["shift"], "NEG": c["NEG"]}


def args_of(f: Form, c: dict, device: str = "cpu") -> dict:
    """The arguments of call ``c`` by name (real tensors on ``device``, random, never zeros)."""
    g = torch.Generator().manual_seed(c["seed"])
    out: dict[str, Any] = {}
    for name, v in layouts(f, c).items():
        if not isinstance(v, tuple):
            out[name] = v
            continue
        shape, dt, view = v
        made = [*shape[:-1], shape[-1] + 3] if view == "slice" else [*shape[:-2], *shape[-2:][::-1]] if view == "t" \
            else shape  # fmt: skip
        base = torch.randn(made, generator=g)
        if name == "S":
            base = base + 2
        t = base < 0.6 if dt == torch.bool else base.to(dt) if dt.is_floating_point else base.mul(4).to(dt)
        t = t[..., : shape[-1]] if view == "slice" else t.transpose(-1, -2) if view == "t" else t
        out[name] = t.to(device)
    return out


def diff_call(f: Form, c: dict, device: str = "cpu") -> list[dict]:
    """Call ``c`` in ``diff_calls``' spec (what the native differential's processes build alike)."""
    out = []
    for n in f.order:
        v = layouts(f, c)[n]
        if isinstance(v, tuple):
            out.append({"t": "tensor", "shape": list(v[0]), "dtype": str(v[1]).removeprefix("torch."),
                        "device": device, "view": v[2], "seed": len(out)})  # fmt: skip
        else:
            out.append({"t": "none"} if v is None else {"t": "scalar", "v": v})
    return out


def launches(f: Form, c: dict) -> int:
    """Launches an accepted call makes: one, unless there are no rows (an empty grid) or nothing is written."""
    lay = layouts(f, c)
    rows = math.prod(lay["X"][0][:-1])
    written = [o for o in f.outputs if o != "Y"] + [t for t in f.tensors if t == "ACC"]
    return int(rows > 0 and (bool(written) or lay["X"][0][-1] > 0))


def positional(f: Form, a: dict) -> list[Any]:
    return [a[n] for n in f.order]


def must_refuse(f: Form, c: dict) -> bool:
    """Whether the op must refuse call ``c``: a mistake, or an empty input where something non-empty is written
    and some output declares no ``init`` (the kernel cannot fill it from no data)."""
    if c["kind"] == "empty_cols":
        non_empty = [o for o in f.outputs if o != "Y"] + [t for t in f.tensors if t == "ACC"]
        return bool(non_empty) and any(f.init[o] is None for o in f.outputs)
    if c["kind"] == "dtype":
        return f.x_dtype is not None
    if c["kind"] == "transposed":  # the row stride addresses it only with the last axis made contiguous
        return f.x_contig == "require"
    if c["kind"] == "strided":  # padded rows: one stride parameter for X and Y (contiguous) cannot say both
        return (
            f.x_contig == "require" and f.shared_stride and "Y" in f.outputs and c["lead"][-1] > 1
        )  # an open dtype takes float64 (the kernel computes in float32)
    return bool(KINDS[c["kind"]])


def snippet(f: Form, c: dict) -> str:
    """A script that registers ``f`` and makes call ``c`` (run it from the repository root, interpreted)."""
    return (f"# TRITON_INTERPRET=1 python -c '...' from the repository root: form seed {f.seed}, call {c}\n"
            f"import sys, tempfile, pathlib; sys.path.insert(0, 'tests')\n"
            f"import forms\nf = forms.draw({f.seed}, {f.ns!r})\nop = forms.declare(f, pathlib.Path(tempfile.mkdtemp()))\n"
            f"a = forms.args_of(f, {c!r})\nprint(op(*forms.positional(f, a)))\n# the declaration:\n# "
            + declaration(f).replace("\n", "\n# ") + "\n# the kernel:\n# " + source(f).replace("\n", "\n# "))  # fmt: skip
