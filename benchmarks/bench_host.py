"""Host time per call on the default path (issues 26 and 39), side by side, medians of interleaved rounds, in
several fresh processes (the first may compile the native libraries, later ones load them from the cache):

- default: the op as registered, after ``opsmith.native.wait()`` (the native library built in the background);
- python: the same op registered with ``OPSMITH_NATIVE=off`` (the Python path);
- native: registered off, then ``opsmith.native.use`` (the explicit build);
- aten: ``torch.relu`` / ``torch.nn.functional.rms_norm``.

Ops: relu on 1,024 floats in CUDA C++ and in Triton; RMSNorm (64, 4096) bf16 forward and forward+backward
(CUDA C++ and Triton kernels, and CuTe DSL's when it is importable: its library links the DSL's export). Each row prints min / median / max over
the processes of each path's ratio to aten (one process's median each), and beside the default path the
serving counters of its timed rounds (``op.serving_counts()``: calls the native library ran, calls the Python
path ran and why), so a row that ran on the Python path shows as such. The first process also times the
backward at (8, 4096, 4096) bf16: forward+backward per step on each path, the Python path's backward on
autograd's worker thread and on the calling thread.

    python benchmarks/bench_host.py [--out bench-results/host.json] [--rounds 15] [--processes 3] [--impls cute]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import torch
import torch.nn.functional as F

import opsmith as ok
from benchmarks.bench_llama import copy_bandwidth  # a throttled GPU shows here: its figures are rerun
from examples.catalog.basic import RELU
from opsmith import native
from opsmith.ops.rmsnorm import rmsnorm_ops

EPS = 1e-6
BACKWARD_SHAPE = (8, 4096, 4096)  # backward_table's


_IMPLS: tuple[str, ...] = ()  # --impls


def _impls() -> tuple[str, ...]:
    """The RMSNorm flavors measured: CUDA C++ and Triton, and CuTe DSL where it is importable (or those
    ``--impls`` names)."""
    if _IMPLS:
        return _IMPLS
    try:
        import cutlass  # noqa: F401
    except ImportError:
        return ("cuda", "triton")
    return ("cuda", "triton", "cute")


@contextlib.contextmanager
def _native_mode(mode: str) -> Iterator[None]:
    old = os.environ.get("OPSMITH_NATIVE")
    os.environ["OPSMITH_NATIVE"] = mode
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("OPSMITH_NATIVE", None)
        else:
            os.environ["OPSMITH_NATIVE"] = old


def _relus(ns: str) -> dict:
    from examples.catalog.kernels import triton_kernels as tk

    ops = {"relu (CUDA C++)": ok.cuda_kernel_op(f"{ns}::relu", ok.KernelSpec(
        kernel_source=RELU, kernel_name="my_relu", inputs=[ok.InputDecl("x")],
        outputs=[ok.OutputDecl("y", shape=ok.SameAs("x"))], extras=[ok.Numel("x")],
        geometry=ok.Elementwise(block=(256,), layout="flat")))}  # fmt: skip
    ops["relu (Triton)"] = ok.triton_op(f"{ns}::relu_tt", tk.relu_kernel, inputs=[ok.InputDecl("x")],
                                        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
                                        geometry=ok.Elementwise(block=("BLOCK",)))  # fmt: skip
    return ops


def _paths(backward: bool = False) -> tuple[dict, dict, float]:
    """{path: {op name: op}} for default, python and native; and the seconds from the default path's first
    registration until ``wait()`` returned."""
    t0 = time.perf_counter()
    default = _relus("hdef")
    for impl in _impls():
        default[f"rmsnorm {impl}"] = rmsnorm_ops(impl, "hdef")[0]
    with _native_mode("off"):
        python = _relus("hpy")
        explicit = _relus("hnat")
        for impl in _impls():
            python[f"rmsnorm {impl}"] = rmsnorm_ops(impl, "hpy")[0]
            explicit[f"rmsnorm {impl}"] = rmsnorm_ops(impl, "hnat")[0]
    x = torch.randn(1024, device="cuda")
    h = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    hg, wg = h.clone().requires_grad_(), w.clone().requires_grad_()
    # The backward table's shape too: each path tunes it here, so the explicit library (built next, as a
    # deployment would be) holds its decisions and the default path's rebuild lands before wait() returns.
    # Without this the explicit library ran the declared default config there and the default path ran its
    # first calls on the Python path, so the table compared configs and paths, not serving.
    big = (BACKWARD_SHAPE, torch.randn(BACKWARD_SHAPE[-1], device="cuda", dtype=torch.bfloat16)) if backward else ()
    for ops in (default, python, explicit):  # the kernels each path needs, compiled (a library embeds them)
        for name, op in ops.items():
            if not name.startswith("rmsnorm"):
                op(x)
                continue
            op(hg, wg, EPS).backward(torch.randn_like(h))  # the backward ops' kernels too
            if big:
                xb = torch.randn(big[0], device="cuda", dtype=torch.bfloat16, requires_grad=True)
                op(xb, big[1].clone().requires_grad_(), EPS).backward(torch.randn_like(xb))
    native.use(list(explicit.values()))
    assert native.wait(900), "the default path's library did not finish in 900 s"
    waited = time.perf_counter() - t0
    return (
        {"default": default, "python": python, "native": explicit},
        {n: (op.serving, op.serving_why) for n, op in default.items()},
        waited,
    )


def _rounds(fns: dict[str, Callable[[], object]], calls: int, rounds: int) -> dict[str, list[float]]:
    """Mean microseconds per call in each round; the candidates alternate round by round."""
    for f in fns.values():
        for _ in range(200):
            f()
    torch.cuda.synchronize()
    res: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(calls):
                f()
            torch.cuda.synchronize()
            res[k].append((time.perf_counter() - t) / calls * 1e6)
    return res


def _fwd_bwd(fwd: Callable, x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor) -> Callable[[], None]:
    def step() -> None:
        fwd(x, w).backward(dy)

    return step


def _counts(ops: list) -> dict[str, int]:
    """The default path's serving counters over ``ops`` (each op and the ops its backward calls)."""
    from opsmith.native.build import closure

    total: dict[str, int] = {"native": 0}
    for op in closure(ops):
        c = op.serving_counts()
        total["native"] += c.native
        for why, n in c.python.items():
            total[why] = total.get(why, 0) + n
    return total


def host_table(paths: dict, rounds: int) -> dict:
    x = torch.randn(1024, device="cuda")
    h = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    hg = h.clone().requires_grad_()
    wg = w.clone().requires_grad_()
    dy = torch.randn_like(h)
    rows: dict[str, dict[str, Callable]] = {
        "relu (CUDA C++), 1,024 floats": {"aten": lambda: torch.relu(x)},
        "relu (Triton), 1,024 floats": {"aten": lambda: torch.relu(x)},
    }
    served = {"relu (CUDA C++), 1,024 floats": [paths["default"]["relu (CUDA C++)"]],
              "relu (Triton), 1,024 floats": [paths["default"]["relu (Triton)"]]}  # fmt: skip
    for impl in _impls():
        rows[f"rmsnorm {impl} forward (64, 4096) bf16"] = {"aten": lambda: F.rms_norm(h, (4096,), w, EPS)}
        rows[f"rmsnorm {impl} forward+backward (64, 4096) bf16"] = {
            "aten": _fwd_bwd(lambda a, b: F.rms_norm(a, (4096,), b, EPS), hg, wg, dy)
        }
        for row in (f"rmsnorm {impl} forward (64, 4096) bf16", f"rmsnorm {impl} forward+backward (64, 4096) bf16"):
            served[row] = [paths["default"][f"rmsnorm {impl}"]]
    for path, ops in paths.items():
        rows["relu (CUDA C++), 1,024 floats"][path] = lambda op=ops["relu (CUDA C++)"]: op(x)
        rows["relu (Triton), 1,024 floats"][path] = lambda op=ops["relu (Triton)"]: op(x)
        for impl in _impls():
            op = ops[f"rmsnorm {impl}"]
            rows[f"rmsnorm {impl} forward (64, 4096) bf16"][path] = lambda op=op: op(h, w, EPS)
            rows[f"rmsnorm {impl} forward+backward (64, 4096) bf16"][path] = _fwd_bwd(
                lambda a, b, op=op: op(a, b, EPS), hg, wg, dy
            )
    out = {}
    for row, fns in rows.items():
        calls = 100 if "backward" in row else 1000
        before = _counts(served[row])
        res = _rounds(fns, calls, rounds)
        after = _counts(served[row])
        out[row] = {k: {"median_us": statistics.median(v), "quartiles": statistics.quantiles(v)[::2]}
                    for k, v in res.items()}  # fmt: skip
        out[row]["default"]["serving"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    return out


def backward_table(paths: dict, rounds: int) -> dict:
    """Forward+backward per step at (8, 4096, 4096) bf16, each path, the Python path's backward on autograd's
    worker thread (as always) and on the calling thread."""
    x = torch.randn(BACKWARD_SHAPE, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    w = torch.randn(BACKWARD_SHAPE[-1], device="cuda", dtype=torch.bfloat16, requires_grad=True)
    dy = torch.randn(BACKWARD_SHAPE, device="cuda", dtype=torch.bfloat16)
    fns: dict[str, Callable] = {"aten": _fwd_bwd(lambda a, b: F.rms_norm(a, (4096,), b, EPS), x, w, dy)}
    for impl in _impls():
        for path, ops in paths.items():
            fns[f"{impl} {path}"] = _fwd_bwd(lambda a, b, op=ops[f"rmsnorm {impl}"]: op(a, b, EPS), x, w, dy)

        def caller(step: Callable = fns[f"{impl} python"]) -> None:
            with torch.autograd.set_multithreading_enabled(False):
                step()

        fns[f"{impl} python, calling thread"] = caller
    served = [paths["default"][f"rmsnorm {impl}"] for impl in _impls()]
    before = _counts(served)
    res = _rounds(fns, 10, rounds)
    after = _counts(served)
    out = {k: {"median_us": statistics.median(v), "quartiles": statistics.quantiles(v)[::2]} for k, v in res.items()}
    out["serving"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    out["decisions"] = {impl: {path: _decisions(ops[f"rmsnorm {impl}"]) for path, ops in paths.items()}
                        for impl in _impls()}  # fmt: skip
    return out


def _decisions(op: object) -> dict[str, list]:
    """The tuning decisions of ``op`` and the ops its backward calls, by op name without its namespace."""
    from opsmith.native.build import closure

    out = {}
    for o in closure([op]):
        made = o.tuner.decisions.items() if o.tuner else ()
        out[o.record.op_name.split("::")[1]] = sorted([str(k), c] for k, c in made)
    return out


def child(args: argparse.Namespace) -> int:
    """One fresh process's measurements, as JSON to ``args.out``."""
    from opsmith.native.build import closure

    paths, serving, waited = _paths(args.backward)
    libraries = {o.record.op_name: [how for _, how, _ in o.serving_counts().rebuilds]
                 for o in closure(list(paths["default"].values()))}  # fmt: skip
    results = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "seconds_to_native": waited,
               "serving": serving, "libraries": libraries, "copy_gbs": copy_bandwidth(),
               "host": host_table(paths, args.rounds)}  # fmt: skip
    if args.backward:
        results["backward_8x4096x4096"] = backward_table(paths, args.rounds)
    Path(args.out).write_text(json.dumps(results, indent=2))
    return 0


def _spread(values: list[float]) -> str:
    return f"{min(values):.2f} / {statistics.median(values):.2f} / {max(values):.2f}x"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench-results/host.json")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--processes", type=int, default=3, help="fresh processes, each measuring every row")
    ap.add_argument("--impls", help="RMSNorm flavors, comma-separated (cuda,triton,cute); default: all importable")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--backward", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    global _IMPLS
    _IMPLS = tuple(args.impls.split(",")) if args.impls else ()
    if args.child:
        return child(args)
    runs = []
    with tempfile.TemporaryDirectory() as tmp:
        for k in range(args.processes):
            out = Path(tmp) / f"{k}.json"
            cmd = [sys.executable, __file__, "--child", "--rounds", str(args.rounds), "--out", str(out),
                   *(["--backward"] if k == 0 else []), *(["--impls", args.impls] if args.impls else [])]  # fmt: skip
            subprocess.run(cmd, check=True)
            runs.append(json.loads(out.read_text()))
    dev = runs[0]["device"]
    results = {"device": dev, "torch": runs[0]["torch"], "runs": runs}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2))
    print(f"\n== host time per call on {dev} (torch {runs[0]['torch']}), {args.processes} fresh processes, medians "
          f"of {args.rounds} interleaved rounds each; min / median / max over the processes of the ratio to aten ==")  # fmt: skip
    print("registration to native serving: " + ", ".join(f"{r['seconds_to_native']:.1f} s" for r in runs)
          + "; default path: " + ", ".join(f"{n}: {s}" for n, (s, _) in runs[-1]["serving"].items()))  # fmt: skip
    print("copy bandwidth per process: " + ", ".join(f"{r['copy_gbs']:.0f} GB/s" for r in runs))
    for k, r in enumerate(runs):
        hows = sorted({how for got in r["libraries"].values() for how in got})
        timed = [p["default"]["serving"] for p in r["host"].values()]
        native_calls = sum(t.get("native", 0) for t in timed)
        total = sum(sum(t.values()) for t in timed)
        print(f"process {k + 1}: libraries {', '.join(hows)}; default path's timed calls native: {native_calls} of "
              f"{total} ({100 * native_calls / max(total, 1):.1f}%)")  # fmt: skip
    for row in runs[0]["host"]:
        per = [r["host"][row] for r in runs]
        aten = [p["aten"]["median_us"] for p in per]
        cells = [f"aten {statistics.median(aten):.2f} us"]
        for path in ("default", "python", "native"):
            cells.append(f"{path} {_spread([p[path]['median_us'] / a for p, a in zip(per, aten, strict=True)])}")
        counters = " | ".join(", ".join(f"{k} {v}" for k, v in p["default"]["serving"].items() if v or k == "native")
                              for p in per)  # fmt: skip
        print(f"  {row}: {'; '.join(cells)}\n      default path's timed calls per process: {counters}")
    b = runs[0]["backward_8x4096x4096"]
    print("forward+backward (8, 4096, 4096) bf16 per step (first process): " + ", ".join(
        f"{k} {v['median_us']:.1f} us" for k, v in b.items() if "median_us" in v))  # fmt: skip
    print("  default path's timed calls: " + ", ".join(f"{k} {v}" for k, v in b["serving"].items()))
    for impl, per in b["decisions"].items():
        same = all(d == per["default"] for d in per.values())
        print(f"  {impl} tuning decisions: {'the same on every path' if same else 'DIFFER: ' + json.dumps(per)}")
    for impl in _impls():
        print(f"  {impl}: default / native {b[f'{impl} default']['median_us'] / b[f'{impl} native']['median_us']:.3f}; "
              f"python / native {b[f'{impl} python']['median_us'] / b[f'{impl} native']['median_us']:.3f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
