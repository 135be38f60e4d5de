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
from pathlib import Path
from typing import Any

from diff_calls import build_args, outcome
from diff_declarations import FLOATS, INTS, Gen, declaration
from hypothesis import strategies as st

import opsmith as ok
from opsmith import native
from opsmith.declare.record import TensorArg
from opsmith.torchlib.eager import make_dry_run

HERE = Path(__file__).resolve().parent


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
            if o is None:  # an optional output the call did not ask for
                continue
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
