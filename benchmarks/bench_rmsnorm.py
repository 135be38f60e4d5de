"""The RMSNorm lab benchmark: forward and forward+backward of every implementation, side by side in one run.

For each shape: the opsmith Triton, CUDA C++ and CuTe DSL ops (the last where CuTe DSL is installed), the
native library's copies of the first two, Hugging Face's eager chain, F.rms_norm eager,
torch.compile(F.rms_norm), and Liger-Kernel's and quack's (CuTe DSL) RMSNorm when they are installed. Times
are medians of ``triton.testing.do_bench`` (L2 flushed before each run). Bandwidth counts the bytes that must move:
forward reads x and writes y (2 passes); backward reads x and dy and writes dx (3 passes); weights and the
dweight partials are not counted. At the main shape the forwards are also timed back to back without the
flush (``back_to_back``). The backward is timed alone (one graph differentiated repeatedly, with
dweight's reduction and autograd's own work); forward+backward is timed whole. The copy bandwidth of a tensor
of the same size is measured before and after each row, and a 1 GiB copy at the run's start and end: a row the
device slowed by more than 5 % while it ran says so on the table, and the summary lists it first (a throttled
run is reported, never silently compared).
Short rows are host-bound in eager mode (the GPU work of a 64 MB backward is ~60 us), so ``host_times``
also reports each implementation's host time per call at a tiny shape.

    python benchmarks/bench_rmsnorm.py [--out bench-results/rmsnorm.json] [--quick] [--sweep 2048x65536,...]

The "opsmith" rows are the ops on their default path: served by their native library, built in the
background after registration. Each shape is first run once by every implementation (its tuning), and the
run waits for the rebuilt libraries that hold what that tuned, so the rows time the steady state rather
than the Python path of a shape's first seconds; "(native)" rows are copies served by ``native.use``. ``bench_host.py`` times host cost on the
default path after warming up exactly what it times.
The demo runs the quick form (the main shape) on a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F

from opsmith.ops.rmsnorm import rms_norm, rmsnorm_ops

__all__ = ["main", "run", "summary", "table"]

MAIN = (8, 4096, 4096)
SWEEP = [(32768, 1024), (32768, 2048), (32768, 4096), (16384, 8192), (8192, 16384), (2048, 65536)]
EPS = 1e-6
HOST_SHAPE = (64, 4096)  # decode-sized: the host sets the pace


def hf_eager(x, w):
    """transformers' LlamaRMSNorm.forward."""
    h = x.to(torch.float32)
    var = h.pow(2).mean(-1, keepdim=True)
    h = h * torch.rsqrt(var + EPS)
    return w * h.to(x.dtype)


def opsmith_implementations() -> dict:
    """The opsmith ops; the CuTe DSL one where CuTe DSL is installed (``opsmith[cute]``)."""
    impls = {
        "opsmith triton": lambda x, w: rms_norm(x, w, EPS, "triton"),
        "opsmith cuda": lambda x, w: rms_norm(x, w, EPS, "cuda"),
    }
    try:
        rmsnorm_ops("cute")
        impls["opsmith cute"] = lambda x, w: rms_norm(x, w, EPS, "cute")
    except Exception as e:
        print(f"opsmith cute not available ({type(e).__name__}: {e}); skipped", file=sys.stderr)
    return impls


def implementations() -> dict:
    """The peers: PyTorch's ways, Liger-Kernel and quack where installed."""
    impls = {
        "HF eager": hf_eager,
        "F.rms_norm eager": lambda x, w: F.rms_norm(x, (x.shape[-1],), w, EPS),
        "torch.compile(F.rms_norm)": torch.compile(lambda x, w: F.rms_norm(x, (x.shape[-1],), w, EPS), dynamic=False),
    }
    try:
        from liger_kernel.ops.rms_norm import LigerRMSNormFunction

        impls["Liger"] = lambda x, w: LigerRMSNormFunction.apply(x, w, EPS, 0.0, "llama", False)
    except Exception as e:  # not installed (or incompatible): reported, not fatal
        print(f"Liger-Kernel not available ({type(e).__name__}: {e}); skipped", file=sys.stderr)
    try:
        from quack.rmsnorm import rmsnorm as quack_rmsnorm

        impls["quack"] = lambda x, w: quack_rmsnorm(x, w, eps=EPS)
    except Exception as e:  # quack-kernels (CuTe DSL) not installed, or another CuTe DSL version
        print(f"quack not available ({type(e).__name__}: {e}); skipped", file=sys.stderr)
    return impls


def native_implementations(shapes: list[tuple]) -> dict:
    """Both kernels served by a native library (opsmith.native.use), beside the JIT ops: a second copy of
    each op under namespace ``opsmith_native``, given the JIT ops' tuning decisions (so both run the same
    configs), run once per shape (forward and backward) to compile what the library embeds, then served
    natively."""
    from opsmith import native

    out, ops = {}, []
    for impl in ("triton", "cuda"):
        jit_fwd, jit_bwd = rmsnorm_ops(impl)
        fwd, bwd = rmsnorm_ops(impl, ns="opsmith_native")
        for shape in shapes:  # the JIT ops tune (or read their cached decisions) for these shapes first
            for op in (jit_fwd, fwd):
                x = torch.randn(shape, device="cuda", dtype=torch.bfloat16, requires_grad=True)
                w = torch.randn(shape[-1], device="cuda", dtype=torch.bfloat16, requires_grad=True)
                if op is fwd:
                    fwd.tuner.decisions.update(jit_fwd.tuner.decisions)
                    bwd.tuner.decisions.update(jit_bwd.tuner.decisions)
                torch.autograd.grad(op(x, w, EPS), (x, w), torch.randn_like(x))
        ops.append(fwd)
        out[f"opsmith {impl} (native)"] = lambda x, w, f=fwd: f(x, w, EPS)
    report = native.use(ops)
    print(f"  native library: {report.summary()}", flush=True)
    return out


def bench(fn, reps: int) -> float:
    from triton.testing import do_bench

    return do_bench(fn, warmup=max(5, reps // 4), rep=reps, return_mode="median")  # ms


def measure(shape: tuple, dtype: torch.dtype, impls: dict, reps: int) -> dict:
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=dtype)
    w = torch.randn(shape[-1], device="cuda", dtype=dtype)
    dy = torch.randn(shape, device="cuda", dtype=dtype)
    nbytes = x.numel() * x.element_size()
    src, dst = torch.empty_like(x), torch.empty_like(x)
    copy_ms = bench(lambda: dst.copy_(src), reps)
    copy_gbs = 2 * nbytes / (copy_ms * 1e-3) / 1e9
    ref = hf_eager(x.float(), w.float())
    row: dict = {"shape": list(shape), "dtype": str(dtype).removeprefix("torch."), "copy_ms": copy_ms,
                 "copy_GBps": copy_gbs, "impls": {}}  # fmt: skip
    warm_up(impls, x, w, dy)
    for name, fn in impls.items():
        y = fn(x, w)
        err = (y.float() - ref).abs().max().item()
        xg, wg = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        fwd = bench(lambda fn=fn: fn(x, w), reps)
        both = bench(lambda fn=fn, xg=xg, wg=wg: torch.autograd.grad(fn(xg, wg), (xg, wg), dy), reps)
        yg = fn(xg, wg)  # the backward alone: one graph, differentiated again and again
        bwd = bench(lambda yg=yg, xg=xg, wg=wg: torch.autograd.grad(yg, (xg, wg), dy, retain_graph=True), reps)
        del yg
        row["impls"][name] = {
            "fwd_ms": fwd, "fwd_bwd_ms": both, "bwd_ms": bwd, "max_abs_err_vs_fp32": err,
            "fwd_GBps": 2 * nbytes / (fwd * 1e-3) / 1e9, "bwd_GBps": 3 * nbytes / (bwd * 1e-3) / 1e9,
            "fwd_frac_copy": (2 * nbytes / (fwd * 1e-3) / 1e9) / copy_gbs,
            "bwd_frac_copy": (3 * nbytes / (bwd * 1e-3) / 1e9) / copy_gbs,
        }  # fmt: skip
    # The same copy after the row: a device that slowed while the row ran (an H100 sweep once fell from 2,944 to
    # 1,879-2,128 GB/s mid-run) makes its fractions of copy meaningless; the row says so (slowed()).
    row["copy_end_GBps"] = 2 * nbytes / (bench(lambda: dst.copy_(src), reps) * 1e-3) / 1e9
    return row


SLOWED = 0.05  # a copy more than 5 % slower at a row's end than at its start: the device throttled


def slowed(start_gbs: float, end_gbs: float) -> float | None:
    """How much slower the device copied at the end than at the start, when past SLOWED; else None."""
    drop = 1 - end_gbs / start_gbs
    return drop if drop > SLOWED else None


def copy_check() -> float:
    """Copy bandwidth of a fixed 1 GiB tensor (GB/s): the run's start and end figures."""
    src = torch.empty(1 << 29, device="cuda", dtype=torch.bfloat16)
    dst = torch.empty_like(src)
    ms = bench(lambda: dst.copy_(src), 50)
    return 2 * (1 << 30) / (ms * 1e-3) / 1e9


def warm_up(impls: dict, x: torch.Tensor, w: torch.Tensor, dy: torch.Tensor) -> None:
    """One forward+backward of each implementation (tuning this shape's keys), then a wait for the native
    libraries that learn them: every row then times the path that serves this shape from now on. Without the
    wait a new shape's first seconds time the Python path while its library is rebuilt in the background
    (H100, (32768, 1024): the CUDA C++ backward took 439 us that way, 86 us once served natively)."""
    from opsmith.native import wait

    for fn in impls.values():
        xg, wg = x.detach().clone().requires_grad_(), w.detach().clone().requires_grad_()
        torch.autograd.grad(fn(xg, wg), (xg, wg), dy)
    torch.cuda.synchronize()
    wait(900)


def back_to_back(shape: tuple, dtype: torch.dtype, impls: dict, rounds: int = 15, batch: int = 20) -> dict:
    """Forward kernels timed back to back, without do_bench's L2 flush: ``batch`` calls between two events,
    ``rounds`` rounds alternating the implementations; median us per call. Apart from the flush this is the
    same work, so a gap that shows only with the flush comes from how a launch meets a cold L2."""
    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=dtype)
    w = torch.randn(shape[-1], device="cuda", dtype=dtype)
    times: dict[str, list[float]] = {k: [] for k in impls}
    for fn in impls.values():  # x and w need no grad: the forward alone, as in measure()
        fn(x, w)
    for _ in range(rounds):
        for name, fn in impls.items():
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            for _ in range(batch):
                fn(x, w)
            b.record()
            b.synchronize()
            times[name].append(a.elapsed_time(b) / batch * 1e3)
    return {k: sorted(v)[len(v) // 2] for k, v in times.items()}


def host_times(impls: dict, shape: tuple = HOST_SHAPE, calls: int = 300, rounds: int = 7) -> dict:
    """Host time per call where the GPU work is a few us, so the host sets the pace: the forward without
    grad, with inputs that require grad (autograd records the graph), and forward+backward. Median over
    ``rounds`` of ``calls`` calls, each round ended by a synchronize; us per call."""
    import time

    torch.manual_seed(0)
    x = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(shape[-1], device="cuda", dtype=torch.bfloat16)
    dy = torch.randn(shape, device="cuda", dtype=torch.bfloat16)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    forms = {"fwd": lambda fn: fn(x, w), "fwd (grad inputs)": lambda fn: fn(xg, wg),
             "fwd+bwd": lambda fn: torch.autograd.grad(fn(xg, wg), (xg, wg), dy)}  # fmt: skip
    out: dict = {}
    for name, fn in impls.items():
        if name == "HF eager":  # eight kernels a call: its host time says nothing about a fused op's
            continue
        out[name] = {}
        for form, call in forms.items():
            call(fn)
            per: list[float] = []
            for _ in range(rounds):
                torch.cuda.synchronize()
                t = time.perf_counter()
                for _ in range(calls):
                    call(fn)
                torch.cuda.synchronize()
                per.append((time.perf_counter() - t) / calls * 1e6)
            out[name][form] = sorted(per)[len(per) // 2]
    return out


def table(row: dict, device: str | None = None) -> str:
    device = device or torch.cuda.get_device_name()
    lines = [f"RMSNorm {tuple(row['shape'])} {row['dtype']} on {device}: copy "
             f"{row['copy_GBps']:.0f} GB/s",
             f"  {'implementation':28s} {'fwd us':>8s} {'GB/s':>6s} {'%copy':>6s} {'fwd+bwd us':>11s} {'bwd us':>8s} "
             f"{'GB/s':>6s} {'%copy':>6s} {'max err':>8s}"]  # fmt: skip
    for name, r in row["impls"].items():
        lines.append(f"  {name:28s} {r['fwd_ms'] * 1e3:8.1f} {r['fwd_GBps']:6.0f} {r['fwd_frac_copy']:6.1%} "
                     f"{r['fwd_bwd_ms'] * 1e3:11.1f} {r['bwd_ms'] * 1e3:8.1f} {r['bwd_GBps']:6.0f} "
                     f"{r['bwd_frac_copy']:6.1%} {r['max_abs_err_vs_fp32']:8.1e}")  # fmt: skip
    drop = slowed(row["copy_GBps"], row.get("copy_end_GBps", row["copy_GBps"]))
    if drop is not None:
        lines.append(f"  !! THE DEVICE SLOWED during this row: copy {row['copy_GBps']:.0f} GB/s at its start, "
                     f"{row['copy_end_GBps']:.0f} at its end ({drop:.1%} slower). Its figures are not comparable: "
                     "rerun it on a cool device.")  # fmt: skip
    return "\n".join(lines)


def plot(rows: list, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for ax, key, title in ((axes[0], "fwd_frac_copy", "forward"), (axes[1], "bwd_frac_copy", "backward")):
        names = list(rows[0]["impls"])
        xs = [r["shape"][-1] for r in rows]
        for name in names:
            ax.plot(xs, [r["impls"][name][key] * 100 for r in rows], marker="o", label=name)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("hidden size")
        ax.set_ylabel("% of copy bandwidth")
        ax.set_title(f"RMSNorm {title}, bf16, {torch.cuda.get_device_name()}")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def run(out: str | None, quick: bool = False, sweep: list[tuple] | None = None) -> dict:
    # Timing the backward alone differentiates one graph repeatedly (retain_graph=True), which compiled
    # graphs with donated buffers refuse; donation saves memory, not time.
    import torch._functorch.config as functorch_config

    functorch_config.donated_buffer = False
    for impl in ("triton", "cuda"):
        rmsnorm_ops(impl)
    reps = 50 if quick else 200
    res = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "main": None, "sweep": [],
           "copy_start_GBps": copy_check()}  # fmt: skip

    sweep = SWEEP if sweep is None else sweep
    shapes = [MAIN, HOST_SHAPE] + ([] if quick else list(sweep))
    native = native_implementations(shapes)
    from opsmith.native import wait

    wait(900)  # the default path's library, built since registration: every row times one path

    def fresh() -> dict:
        # torch.compile gets a fresh start per shape: one compiled function over seven shapes, with and
        # without grad, reaches Dynamo's recompile limit (8) and silently falls back to eager.
        import torch._dynamo

        torch._dynamo.reset()
        return {**opsmith_implementations(), **native, **implementations()}

    impls = fresh()
    res["main"] = measure(MAIN, torch.bfloat16, impls, reps)
    print(table(res["main"]), flush=True)
    res["main_fwd_back_to_back_us"] = back_to_back(MAIN, torch.bfloat16, impls)
    print("  forward back to back (no L2 flush), us: " + ", ".join(
        f"{k} {v:.1f}" for k, v in res["main_fwd_back_to_back_us"].items()), flush=True)  # fmt: skip
    res["host_us"] = host_times(impls)
    print("  host time per call at (64, 4096) bf16, us (fwd / fwd with grad inputs / fwd+bwd): " + "; ".join(
        f"{k} {v['fwd']:.1f} / {v['fwd (grad inputs)']:.1f} / {v['fwd+bwd']:.1f}"
        for k, v in res["host_us"].items()), flush=True)  # fmt: skip
    if not quick:
        for shape in sweep:
            res["sweep"].append(measure(shape, torch.bfloat16, fresh(), reps))
            print(table(res["sweep"][-1]), flush=True)
    res["copy_end_GBps"] = copy_check()
    if out:
        os.makedirs(os.path.dirname(out) or ".", exist_ok=True)
        with open(out, "w") as f:
            json.dump(res, f, indent=1)
        if res["sweep"]:
            plot(res["sweep"], out.removesuffix(".json") + ".png")
    return res


def summary(res: dict) -> str:
    m = res["main"]["impls"]
    others = {k: v for k, v in m.items() if not k.startswith("opsmith")}
    lines = [f"RMSNorm (8, 4096, 4096) bf16 on {res['device']}, copy {res['main']['copy_GBps']:.0f} GB/s:"]
    drop = slowed(res["copy_start_GBps"], res["copy_end_GBps"])
    rows = [r for r in [res["main"], *res["sweep"]] if slowed(r["copy_GBps"], r["copy_end_GBps"]) is not None]
    if drop is not None or rows:
        lines.insert(0, f"!! THE DEVICE SLOWED: 1 GiB copy {res['copy_start_GBps']:.0f} GB/s at the start, "
                        f"{res['copy_end_GBps']:.0f} at the end; rows that slowed while they ran: "
                        f"{', '.join(str(tuple(r['shape'])) for r in rows) or 'none'}. Rerun those, do not report them.")  # fmt: skip
    for name in ("opsmith triton", "opsmith cuda"):
        r = m[name]
        best_f = min(others, key=lambda k: others[k]["fwd_ms"])
        best_b = min(others, key=lambda k: others[k]["bwd_ms"])
        lines.append(
            f"  {name}: fwd {r['fwd_ms'] * 1e3:.1f} us ({r['fwd_frac_copy']:.1%} of copy, target >= 95%), "
            f"bwd {r['bwd_ms'] * 1e3:.1f} us ({r['bwd_frac_copy']:.1%}, target >= 85%), "
            f"{m['HF eager']['fwd_ms'] / r['fwd_ms']:.1f}x faster than HF eager fwd (target >= 10x); "
            f"best other fwd {best_f} {others[best_f]['fwd_ms'] * 1e3:.1f} us, bwd {best_b} "
            f"{others[best_b]['bwd_ms'] * 1e3:.1f} us")  # fmt: skip
    h = res.get("host_us", {})
    base = h.get("F.rms_norm eager")
    for impl in ("triton", "cuda"):
        jit, nat = m.get(f"opsmith {impl}"), m.get(f"opsmith {impl} (native)")
        if not (jit and nat and base):
            continue
        hn = h[f"opsmith {impl} (native)"]
        lines.append(
            f"  opsmith {impl} native vs JIT: fwd {nat['fwd_ms'] * 1e3:.1f} / {jit['fwd_ms'] * 1e3:.1f} us "
            f"({nat['fwd_ms'] / jit['fwd_ms'] - 1:+.1%}), bwd {nat['bwd_ms'] * 1e3:.1f} / {jit['bwd_ms'] * 1e3:.1f} us "
            f"({nat['bwd_ms'] / jit['bwd_ms'] - 1:+.1%}; target within 1%); host at {HOST_SHAPE}: fwd {hn['fwd']:.1f} us "
            f"= {hn['fwd'] / base['fwd']:.2f}x F.rms_norm (target <= 1.2x, JIT "
            f"{h[f'opsmith {impl}']['fwd'] / base['fwd']:.2f}x), fwd+bwd {hn['fwd+bwd']:.1f} us = "
            f"{hn['fwd+bwd'] / base['fwd+bwd']:.2f}x (target <= 1.3x, JIT "
            f"{h[f'opsmith {impl}']['fwd+bwd'] / base['fwd+bwd']:.2f}x)")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench-results/rmsnorm.json")
    ap.add_argument("--quick", action="store_true", help="the main shape only, fewer repetitions")
    ap.add_argument("--sweep", default="", help="sweep shapes instead of the default, e.g. 8192x16384,2048x65536")
    args = ap.parse_args()
    sweep = [tuple(int(d) for d in s.split("x")) for s in args.sweep.split(",")] if args.sweep else SWEEP
    res = run(args.out, args.quick, sweep)
    print(summary(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
