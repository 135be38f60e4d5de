"""Run generated forms (``forms.py``) through every path and compare with the generator's own expected values.

    TRITON_INTERPRET=1 python tests/forms_check.py --first 0 --count 6            (CPU: Triton's interpreter)
    python tests/forms_check.py --device cuda --count 24 --paths eager,fake,export,compile,native,graph

Paths: ``eager`` (the op called), ``fake`` (the same call on meta tensors: shapes, dtypes, strides, refusals),
``export`` (``torch.export`` then ``run_decompositions()``, the module called), ``compile``
(``torch.compile(fullgraph=True)``; ``--backend``), ``backward`` (gradients of ``X`` against the description's
derivative), and on a GPU ``graph`` (a CUDA graph replay) and ``native`` (after the Python paths, the ops served
by a native library built from their records, ``opsmith.native.use``: eager, graph and backward again). A call
the form must refuse is refused on every path with one class and one text, before a launch (``ACC`` unchanged);
outputs are poisoned (``fill_uninitialized_memory``) so an element no path writes shows. The last stdout line
is a JSON summary: ops, calls, comparisons per path, and each failure with a runnable snippet.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import random
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import forms


def _error(e: BaseException) -> str:
    """The opsmith error inside what a path raised (torch.compile and export wrap it), as class: first line."""
    seen = e
    while seen is not None:
        if type(seen).__module__.startswith("opsmith"):
            return f"{type(seen).__name__}: {str(seen).splitlines()[0]}"
        seen = seen.__cause__ or seen.__context__
    return f"{type(e).__name__}: {(str(e).splitlines() or [''])[0]}"


class _Wrap(torch.nn.Module):
    def __init__(self, op: Any) -> None:
        super().__init__()
        self.op = op

    def forward(self, *args: Any) -> Any:
        return self.op(*args)


def _clone(a: dict, device: str | None = None) -> dict:
    """Copies of the call's tensors with their strides (``clone()`` makes a padded view contiguous)."""
    return {k: (_strided_copy(v) if device is None else v.to(device)) if isinstance(v, torch.Tensor) else v
            for k, v in a.items()}  # fmt: skip


def _strided_copy(t: torch.Tensor) -> torch.Tensor:
    out = torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device=t.device)
    return out.copy_(t)


def _outs(got: Any) -> list[torch.Tensor]:
    return [got] if isinstance(got, torch.Tensor) else list(got)


def _run(path: str, op: Any, f: forms.Form, a: dict, backend: str, compiled: dict) -> Any:
    args = forms.positional(f, a)
    if path == "eager":
        return op(*args)
    if path == "fake":
        # meta tensors with the call's strides (``to("meta")`` makes a padded view contiguous)
        return op(*[torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
                    if isinstance(x, torch.Tensor) else x for x in args])  # fmt: skip
    if path == "compile":
        if f.name not in compiled:  # each op compiles afresh: Dynamo's cache limit counts per code object
            torch._dynamo.reset()
            compiled[f.name] = torch.compile(lambda *xs: op(*xs), fullgraph=True, backend=backend)
        return compiled[f.name](*args)
    if path == "export":
        ep = torch.export.export(_Wrap(op), tuple(args)).run_decompositions()
        return ep.module()(*args)
    if path == "jax":
        return _jax(op, args)
    if path == "graph":  # warmed up (compiled, tuned) outside the capture on copies: ACC is written once
        op(*[x.clone() if isinstance(x, torch.Tensor) else x for x in args])
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            got = op(*args)
        g.replay()
        torch.cuda.synchronize()
        return got
    raise ValueError(path)


def _jax(op: Any, args: list) -> list[torch.Tensor]:
    """``opsmith.jax.jax_op(op)`` on JAX's CPU platform (the op's reference serves it there, after the op's
    checks): tensors as arrays (16-bit floats through float32), outputs back as tensors."""
    import jax
    import jax.numpy as jnp

    from opsmith.jax import jax_op

    jax.config.update("jax_enable_x64", True)  # float64 stays float64 (JAX's default makes it float32)

    def arr(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        if t.dtype in (torch.float16, torch.bfloat16):
            return jnp.asarray(t.float().numpy()).astype(jnp.bfloat16 if t.dtype == torch.bfloat16 else jnp.float16)
        return jnp.asarray(t.numpy())

    fn = _JAX.setdefault(op.record.op_name, jax_op(op))
    with jax.default_device(jax.devices("cpu")[0]):
        got = fn(*[arr(a) for a in args])
    outs = list(got) if isinstance(got, tuple | list) else [got]
    back = []
    for o in outs:
        dt = {jnp.bfloat16: torch.bfloat16, jnp.float16: torch.float16}.get(o.dtype.type)
        back.append(torch.from_numpy(jax.numpy.asarray(o, jnp.float32).__array__()).to(dt) if dt else
                    torch.from_numpy(o.__array__().copy()))  # fmt: skip
    return back


_JAX: dict[str, Any] = {}


def _compare(f: forms.Form, got: list[torch.Tensor], want: list[torch.Tensor], meta: bool) -> str:
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for o, g, w in zip(f.outputs, got, want, strict=True):
        if tuple(g.shape) != tuple(w.shape) or g.dtype != w.dtype:
            return f"{o}: shape {tuple(g.shape)} {g.dtype}, expected {tuple(w.shape)} {w.dtype}"
        if meta:
            continue
        rtol, atol = forms.TOL.get(g.dtype, (1e-4, 1e-4)) if o == "Y" else (1e-4, 1e-3 + 1e-5 * w.numel())
        try:
            torch.testing.assert_close(g.cpu(), w, rtol=rtol, atol=atol, equal_nan=False)
        except AssertionError as e:
            return f"{o}: {str(e).splitlines()[0]} {' '.join(str(e).split())[:300]}"
    return ""


def check_op(f: forms.Form, op: Any, paths: list[str], device: str, backend: str, report: dict,
             tag: str = "", texts: list | None = None) -> None:  # fmt: skip
    """Every call of ``f`` on ``paths`` (reported as ``tag + path``: "native " once a library serves the op);
    ``texts``: per call, the refusal another process's path gave (its text after the class), to match too."""
    compiled: dict = {}
    for j, c in enumerate(f.calls):
        base = forms.args_of(f, c, device)
        refuse = forms.must_refuse(f, c)
        layout = c["kind"] in ("strided", "transposed")  # refused for a layout: the values still exist
        want, acc_want = (None, None) if refuse and not layout else forms.expected(f, _clone(base, "cpu"))
        errors: dict[str, str] = {}
        for path in paths:
            if path in ("backward", "native"):
                continue
            a = _clone(base)
            report["calls"][tag + path] = report["calls"].get(tag + path, 0) + 1
            # JAX arrays have no strides: a padded or transposed tensor arrives as a plain array
            refuse = forms.must_refuse(f, c) and not (path == "jax" and c["kind"] in ("strided", "transposed"))
            try:
                got = _outs(_run(path, op, f, a, backend, compiled))
            except Exception as e:  # what each path refuses, compared as text
                errors[path] = _error(e)
                if not refuse:
                    _fail(report, f, c, tag + path, f"refused a valid call: {errors[path]}")
                elif a.get("ACC") is not None and not torch.equal(a["ACC"], base["ACC"]):
                    _fail(report, f, c, tag + path, "refused after writing ACC (a launch before the refusal)")
                continue
            if refuse:
                _fail(report, f, c, tag + path, f"accepted a call it must refuse ({c['kind']})")
                continue
            bad = _compare(f, got, want, meta=path == "fake")  # type: ignore[arg-type]
            if not bad and acc_want is not None and path != "fake" and path != "export":
                try:  # export's module works on its own copies of in-place inputs? no: it mutates them too
                    torch.testing.assert_close(a["ACC"].cpu(), acc_want, rtol=1e-4, atol=1e-3)
                except AssertionError as e:
                    bad = f"ACC: {str(e).splitlines()[0]}"
            if bad:
                _fail(report, f, c, tag + path, bad)
        if len(set(errors.values())) > 1:
            _fail(report, f, c, tag + "all", f"paths refuse differently: {errors}")
        if texts is not None and texts[j] and any(e.split(": ", 1)[1] != texts[j] for e in errors.values()):
            _fail(report, f, c, tag + "all", f"refused otherwise than the Python path's dry run ({texts[j]}): {errors}")
        if "backward" in paths and f.backward and not refuse and c["kind"] in ("valid", "strided"):
            _check_backward(f, op, base, c, report)


def _check_backward(f: forms.Form, op: Any, base: dict, c: dict, report: dict) -> None:
    report["calls"]["backward"] = report["calls"].get("backward", 0) + 1
    a = _clone(base)
    x = a["X"].detach().clone().requires_grad_()
    a["X"] = x
    try:
        y = _outs(op(*forms.positional(f, a)))[f.outputs.index("Y")]
        gy = torch.randn_like(y)
        (gx,) = torch.autograd.grad(y, x, gy)
    except Exception as e:
        _fail(report, f, c, "backward", f"raised {_error(e)}")
        return
    ref = forms.grad_fn(f)(gy, *[a[n] for n in forms.grad_args(f)[1:]])
    tol = forms.TOL.get(gx.dtype, (1e-4, 1e-4))
    try:
        torch.testing.assert_close(gx, ref, rtol=tol[0], atol=tol[1])
    except AssertionError as e:
        _fail(report, f, c, "backward", str(e).splitlines()[0])


def _fail(report: dict, f: forms.Form, c: dict, path: str, what: str) -> None:
    report["failures"].append({"op": f.name, "seed": f.seed, "path": path, "kind": c["kind"], "what": what,
                               "snippet": forms.snippet(f, c)})  # fmt: skip


def _registered(first: int, count: int, n_calls: int, ns: str) -> tuple[dict, list]:
    """(a fresh report, the registered forms with their calls as (form, op)); a form registration refuses is a
    failure: every generated form is valid."""
    report: dict[str, Any] = {"ops": 0, "registered": 0, "calls": {}, "failures": []}
    work = Path(tempfile.mkdtemp(prefix="opsmith_forms_"))
    sys.path.insert(0, str(work))
    done = []
    for seed in range(first, first + count):
        f = forms.draw(seed, ns)
        f.calls = forms.calls(f, n_calls, random.Random(seed * 7919 + 1))
        report["ops"] += 1
        try:
            done.append((f, forms.declare(f, work)))
        except Exception as e:
            _fail(report, f, {"kind": "register"}, "register", f"registration raised {_error(e)}")
    report["registered"] = len(done)
    return report, done


def _native(done: list, report: dict) -> list:
    """The forms a native library can serve: not those whose backward is a Python function (counted)."""
    from opsmith.native.build import refusal

    kept = [(f, op) for f, op in done if refusal(op) is None]
    report["not_native"] = len(done) - len(kept)
    return kept


def run(first: int, count: int, paths: list[str], device: str = "cpu", backend: str = "aot_eager",
        n_calls: int = 12, ns: str = "forms") -> dict:  # fmt: skip
    """Draw forms ``first .. first + count - 1``, register them, run their calls on ``paths``."""
    # poison: outputs opsmith allocates read NaN (floats) until a kernel writes them
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True  # type: ignore[attr-defined]
    torch._dynamo.config.recompile_limit = 256  # every call's shapes, dtypes and scalars may recompile
    report, done = _registered(first, count, n_calls, ns)
    for f, op in done:
        check_op(f, op, paths, device, backend, report)
    native_ops = _native(done, report) if "native" in paths else []
    if native_ops:  # the same calls served by a native library built from the records
        from opsmith import native

        native.use([op for _, op in native_ops])
        for f, op in native_ops:
            check_op(f, op, [p for p in ("eager", "graph", "backward") if p in paths or p == "eager"], device,
                     backend, report, tag="native ")  # fmt: skip
    return report


def run_dry(first: int, count: int, n_calls: int = 12, ns: str = "formsdry", native: bool = True) -> dict:
    """The forms' call plans without launching (not interpreted: the kernels compile for the GPU): the Python
    path's dry run and, with ``native``, a dry-run native library built from the same records, in a process
    without opsmith (``differential.py``). Both must refuse what the form must refuse, with one text; launch
    exactly when the grid has blocks and something is written (``forms.launches``); and leave each ``init=``
    output holding its init before the launch."""
    from differential import Registered, compare, native_outcomes, python_outcomes

    report, done = _registered(first, count, n_calls, ns)
    # each call twice: on CPU tensors (the plan, launches, init bytes) and on meta tensors (the Python fake against
    # the native library's Meta kernel: shapes, dtypes, strides and refusals), ids j and len(calls) + j
    pairs = [(f, Registered(op, [forms.diff_call(f, c) for c in f.calls] + [_on_meta(forms.diff_call(f, c))
                                                                            for c in f.calls])) for f, op in done]  # fmt: skip
    gens = [g for _, g in pairs]
    py, cases = python_outcomes(gens)
    report["calls"]["python-meta"] = sum(_is_meta(k, pairs) for k in py)
    report["calls"]["python-dry"] = len(py) - report["calls"]["python-meta"]
    for f, _ in pairs:
        for j, c in enumerate(f.calls):
            _against_meaning(f, c, py[f"{f.name}#{j}"], report)
    if importlib.util.find_spec("jax") is not None:  # JAX's CPU platform: the op's reference=, after its checks
        for f, op in done:
            if f.compile != "kernel":
                texts = [py[f"{f.name}#{j}"].get("error", ": ").split(": ", 1)[1] for j in range(len(f.calls))]
                check_op(f, op, ["jax"], "cpu", "", report, texts=texts)
    if native:
        kept = {op.record.op_name for _, op in _native(done, report)}
        gens = [g for g in gens if g.op_name in kept]
        cases = [c for c in cases if c["op"] in kept]
        py = {k: v for k, v in py.items() if k.split("#")[0] in kept}
        nat = native_outcomes(gens, cases, Path(tempfile.mkdtemp(prefix="opsmith_forms_lib_")))
        report["calls"]["native-dry"] = len(nat)
        for bad in compare(gens, py, nat):
            f = next(f for f, _ in pairs if bad.startswith(f.name + "#"))
            j = int(bad.split("#")[1].split()[0])
            _fail(report, f, f.calls[j % len(f.calls)], "native-dry" if j < len(f.calls) else "native-meta", bad[:2000])
        report["calls"]["native-meta"] = sum(_is_meta(k, pairs) for k in nat)
        report["calls"]["native-dry"] = len(nat) - report["calls"]["native-meta"]
    return report


def _is_meta(cid: str, pairs: list) -> bool:
    name, j = cid.split("#")
    return int(j) >= len(next(f for f, _ in pairs if f.name == name).calls)


def _on_meta(call: list[dict]) -> list[dict]:
    return [dict(a, device="meta") if a["t"] == "tensor" else a for a in call]


def _against_meaning(f: forms.Form, c: dict, o: dict, report: dict) -> None:
    """A dry run's outcome against the form: refused or not, launches, output shapes and dtypes, init bytes."""
    if o["ok"] == forms.must_refuse(f, c):
        _fail(report, f, c, "python-dry", f"{'accepted' if o['ok'] else 'refused'}: {o.get('error', '')}")
        return
    if not o["ok"]:
        return
    if len(o["launches"]) != forms.launches(f, c):
        _fail(report, f, c, "python-dry", f"{len(o['launches'])} launches, expected {forms.launches(f, c)}")
    want, _ = forms.expected(f, forms.args_of(f, c))
    shapes = [[list(w.shape), str(w.dtype)] for w in want]
    if [x[:2] for x in o["outputs"]] != shapes:
        _fail(report, f, c, "python-dry", f"outputs {o['outputs']}, expected {shapes}")
        return
    inits = [torch.full(w.shape, float(f.init[n]), dtype=w.dtype) for n, w in zip(f.outputs, want, strict=True)
             if f.init[n] is not None]  # fmt: skip
    if o.get("inits", []) != [t.contiguous().reshape(-1).view(torch.uint8).numpy().tobytes().hex() if t.numel() else ""
                              for t in inits]:  # fmt: skip
        _fail(report, f, c, "python-dry", "an init= output does not hold its init before the launch")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--first", type=int, default=0)
    p.add_argument("--count", type=int, default=6)
    p.add_argument("--calls", type=int, default=12)
    p.add_argument("--device", default="cpu")
    p.add_argument("--backend", default="aot_eager")
    p.add_argument("--paths", default="eager,fake,export,compile,backward")
    p.add_argument("--dry", action="store_true", help="the call plans, Python and native, without launching")
    p.add_argument("--no-native", action="store_true", help="with --dry: the Python path's dry run only")
    a = p.parse_args()
    if a.dry:
        rep = run_dry(a.first, a.count, a.calls, native=not a.no_native)
    else:
        rep = run(a.first, a.count, a.paths.split(","), a.device, a.backend, a.calls)
    for x in rep["failures"][:20]:
        print(f"FAIL {x['op']} {x['path']} {x['kind']}: {x['what']}\n{x['snippet']}\n", file=sys.stderr)
    print(json.dumps({k: v for k, v in rep.items() if k != "failures"} | {"failed": len(rep["failures"]),
                      "failures": [{k: v for k, v in x.items() if k != "snippet"} for x in rep["failures"]]}))  # fmt: skip


if __name__ == "__main__":
    main()
