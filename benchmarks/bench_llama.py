"""A Llama trained end to end (issue: A real model end to end), every variant in one run, each in its own process.

A ``transformers`` Llama (16 layers, hidden 2048, 32 heads of 64, 8 KV heads, MLP 5632, vocab 32000, sequence 2048,
batch 4, bf16, AdamW) trained on random tokens (fixed seed: the same model, data and updates in every process):

    hf                  Hugging Face (SDPA attention)
    liger               Liger-Kernel's own patching (apply_liger_kernel_to_llama: RMSNorm, RoPE, SwiGLU, fused
                        linear cross-entropy)
    opsmith             the same Liger Triton kernels, from the installed package, declared with opsmith and
                        swapped in (examples/llama/)
    opsmith-rmsnorm     as opsmith, with opsmith's own CUDA C++ RMSNorm (opsmith.ops) in place of Liger's
    opsmith-auto        as opsmith, its ops with a reference declared compile="auto": under torch.compile each
                        traces as Liger's kernel or as its plain-torch reference (which Inductor fuses), whichever
                        was faster at the traced shapes (compiled only)
    opsmith-ref         as opsmith, those ops declared compile="reference" (compiled only)

each eagerly and under ``torch.compile`` (``-compile``; ``fullgraph=True`` for the opsmith variants, whose step must
compile whole; the others as users compile them, breaks reported), and

    hf-masked-compile   Hugging Face compiled with its attention mask as it ships.

Every other variant runs attention through ``causal_sdpa`` (examples/llama/model.py): SDPA's ``is_causal``, as
transformers does eagerly when nothing is padded. While tracing, transformers materializes the causal mask
(transformers#48925), which made a compiled step's attention 2.5x slower on an H100 (30.7 against 12.4 ms).

Per variant: tokens per second (median over the timed steps, after warm-up), peak memory over the timed steps, the
graphs and graph breaks ``torch._dynamo.explain`` finds in the forward and loss, and every step's loss against
Hugging Face eager's (agreement: within 2% of it at every step; bf16 kernels differ in rounding). A device-to-device
copy measures the GPU's bandwidth in the same run, so a throttled device shows.

Then a step profile per variant (benchmarks/step_profile.py, torch.profiler over 3 more steps): the GPU's kernel
time a step by group (GEMMs, attention, the recipe's kernels, Inductor's kernels, copies, the optimizer, other ATen
kernels), the copy kernels (count and ms), the GPU waiting on the host (the step's CUDA-event time minus its
kernels), the profiled steps' span split into kernels, launch gaps and waits (each wait charged to the kernels it
lies between), and for compiled variants the mutated tensors Inductor could not reinplace, per graph node (each a
functionalization copy; read from Inductor's log). A compiled opsmith variant's groups are set against Hugging Face
compiled's: the measured parts of the difference between their steps.

    python benchmarks/bench_llama.py [--variants hf,liger-compile,...] [--steps 20] [--warmup 4] [--out r.json]
    python benchmarks/bench_llama.py --small   # 4 layers, sequence 512: minutes, for a quick look
    python benchmarks/bench_llama.py --merge a.json b.json   # one report of runs split over processes or calls

The opsmith variants' timed steps start once the native libraries opsmith builds in the background serve
their ops (``opsmith.native.wait``): the steady state a training run reaches in its first minute.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.step_profile import profile_steps, watch_reinplacing

VARIANTS = ["hf", "hf-compile", "hf-masked-compile", "liger", "liger-compile", "opsmith", "opsmith-compile",
            "opsmith-auto-compile", "opsmith-ref-compile", "opsmith-rmsnorm", "opsmith-rmsnorm-compile"]  # fmt: skip
#: compile= of the recipe's ops with a reference, per opsmith family (examples/llama/kernels.py)
COMPILE_MODES = {"opsmith-auto": "auto", "opsmith-ref": "reference"}
LOSS_RTOL = 0.02  # a step's loss within 2% of Hugging Face eager's (bf16 kernels round differently)


def config(small: bool) -> dict:
    if small:
        return {"layers": 4, "hidden": 2048, "heads": 32, "kv_heads": 8, "mlp": 5632, "vocab": 32000, "seq": 512,
                "batch": 4}  # fmt: skip
    return {"layers": 16, "hidden": 2048, "heads": 32, "kv_heads": 8, "mlp": 5632, "vocab": 32000, "seq": 2048,
            "batch": 4}  # fmt: skip


def build(variant: str, c: dict) -> tuple:
    """(the model with the variant's kernels, its loss function of (ids, labels), a note)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=c["vocab"], hidden_size=c["hidden"], intermediate_size=c["mlp"],
                      num_hidden_layers=c["layers"], num_attention_heads=c["heads"], num_key_value_heads=c["kv_heads"],
                      max_position_embeddings=c["seq"], use_cache=False, attn_implementation="sdpa")  # fmt: skip
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    family = variant.removesuffix("-compile")
    if family != "hf-masked":  # SDPA's is_causal under compile too, as eagerly (examples/llama/model.py)
        from examples.llama.model import causal_sdpa

        causal_sdpa(model)
    if family == "liger":
        from liger_kernel.transformers import apply_liger_kernel_to_llama

        apply_liger_kernel_to_llama(model=model)
    elif family.startswith("opsmith"):
        from examples.llama.model import swap_in

        norm = None
        if family == "opsmith-rmsnorm":
            from opsmith.ops.rmsnorm import rms_norm, rmsnorm_ops

            rmsnorm_ops("cuda")  # registered before tracing: torch.compile cannot trace a registration

            def norm(x: torch.Tensor, w: torch.Tensor, eps: float) -> torch.Tensor:
                return rms_norm(x, w, eps, impl="cuda")

        mode = COMPILE_MODES.get(family, "kernel")
        swap_in(model, f"bench_llama_{mode}", rms_norm=norm, compile=mode)

    def loss_of(ids: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
        return model(input_ids=ids, labels=labels).loss

    return model, loss_of


def explain(loss_of: object, ids: torch.Tensor) -> dict:
    """Dynamo's view of the forward and loss: graphs, breaks and their reasons."""
    torch._dynamo.reset()
    # Without gradients: the explained forward's autograd graph (its saved activations) was found kept alive after
    # explain returned, 9 GiB of the compiled variants' first measured peak (benchmarks/probes/llama_compile_memory.py)
    with torch.no_grad():
        e = torch._dynamo.explain(loss_of)(ids, ids)
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()
    reasons = sorted({str(getattr(b, "reason", b)).splitlines()[0][:160] for b in e.break_reasons})
    return {"graphs": e.graph_count, "breaks": e.graph_break_count, "reasons": reasons[:6]}


def copy_bandwidth() -> float:
    """GB/s of a 1 GiB device-to-device copy (read + write), median of 10."""
    a = torch.empty(2**30, dtype=torch.uint8, device="cuda")
    b = torch.empty_like(a)
    times = []
    for _ in range(12):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        b.copy_(a)
        e.record()
        e.synchronize()
        times.append(s.elapsed_time(e))
    return 2 * a.numel() / (statistics.median(times[2:]) * 1e-3) / 1e9


def timed_steps(loss_of: object, opt: object, batches: list, warmup: int, native: bool) -> tuple[list, list, dict]:
    """(losses, ms per timed step, notes): a training step per batch, the first ``warmup`` untimed. With
    ``native``, the timed steps start once the native libraries opsmith builds in the background for its ops serve
    them (docs/native.md): the steady state."""
    losses, times, notes = [], [], {}
    t0 = time.perf_counter()
    for k, ids in enumerate(batches):
        if k == warmup:
            torch.cuda.synchronize()
            notes["warmup_s"] = time.perf_counter() - t0
            if native:
                from opsmith import native as serving

                notes["native_ready"] = serving.wait(600)
                notes["native_wait_s"] = time.perf_counter() - t0 - notes["warmup_s"]
            torch.cuda.reset_peak_memory_stats()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        loss = loss_of(ids, ids)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        e.record()
        losses.append(loss.detach())
        times.append((s, e))
    torch.cuda.synchronize()
    return losses, [s.elapsed_time(e) for s, e in times[warmup:]], notes


def run_one(variant: str, c: dict, steps: int, warmup: int) -> dict:
    """One variant in this process: explain, then warm-up and timed training steps."""
    model, loss_of = build(variant, c)
    gen = torch.Generator(device="cuda").manual_seed(1)
    batches = [torch.randint(0, c["vocab"], (c["batch"], c["seq"]), device="cuda", generator=gen)
               for _ in range(warmup + steps)]  # fmt: skip
    out: dict = {"variant": variant}
    if variant.endswith("-compile"):  # the family's code as Dynamo sees it (the eager row shares it)
        out["explain"] = explain(loss_of, batches[0])
        missed = watch_reinplacing()
        fullgraph = variant.startswith("opsmith")
        loss_of = torch.compile(loss_of, fullgraph=fullgraph)
        out["fullgraph"] = fullgraph
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    losses, step_ms, notes = timed_steps(loss_of, opt, batches, warmup, variant.startswith("opsmith"))
    out.update(notes)
    if variant.endswith("-compile"):
        # no node logged: Inductor reported on none (a step without mutating ops, or a log this process did not
        # see: the compile="auto" variant of 2026-11-28 logged 0 of the 211 nodes its default twin logged), so the
        # count is unknown, not 0
        out["not_reinplaced"] = missed["tensors"] if missed["logged"] else None
        out["not_reinplaced_bytes"] = missed["bytes"]
        out["not_reinplaced_ops"] = missed["nodes"]
        out["reinplace_nodes_logged"] = missed["logged"]
    if variant.startswith("opsmith"):
        from opsmith.torchlib.registration import registered_ops

        out["compile_choices"] = {n: {",".join(map(str, k)): v for k, v in op.compile_choices().items()}
                                  for n, op in registered_ops().items() if op.compile_choices()}  # fmt: skip
    out["profile"] = profile_steps(loss_of, opt, batches[0], statistics.median(step_ms))
    tokens = c["batch"] * c["seq"]
    out.update({"losses": [float(x) for x in losses], "step_ms": step_ms,
                "tokens_per_s": tokens / (statistics.median(step_ms) * 1e-3),
                "peak_gib": torch.cuda.max_memory_allocated() / 2**30, "copy_gbs": copy_bandwidth()})  # fmt: skip
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=4)
    p.add_argument("--small", action="store_true")
    p.add_argument("--out", default=None)
    p.add_argument("--one", default=None, help=argparse.SUPPRESS)  # run one variant here (the child process)
    p.add_argument("--merge", nargs="+", default=None, help="print one report of earlier runs' --out files")
    a = p.parse_args()
    c = config(a.small)
    if a.merge:
        runs = [json.loads(Path(f).read_text()) for f in a.merge]
        report([r for run in runs for r in run["results"]], runs[0]["config"], a.steps, runs[0]["device"])
        return
    if a.one:
        print("RESULT " + json.dumps(run_one(a.one, c, a.steps, a.warmup)), flush=True)
        return
    results = []
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    for v in a.variants.split(","):
        t = time.perf_counter()
        args = [sys.executable, __file__, "--one", v, "--steps", str(a.steps), "--warmup", str(a.warmup)]
        proc = subprocess.run(args + (["--small"] if a.small else []), capture_output=True, text=True, env=env)
        line = next((x for x in proc.stdout.splitlines() if x.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            lines = [x for x in proc.stderr.strip().splitlines() if x.strip() and "TORCHDYNAMO_VERBOSE" not in x]
            err = next((x for x in reversed(lines) if "Error" in x or "error" in x), (lines or ["no output"])[-1])
            results.append({"variant": v, "error": err[:400]})
            print(f"{v}: FAILED ({err[:400]})\n" + "\n".join(lines[-40:]), flush=True)
            continue
        r = json.loads(line[len("RESULT ") :])
        r["wall_s"] = time.perf_counter() - t
        results.append(r)
        print(f"{v}: {r['tokens_per_s']:,.0f} tokens/s, peak {r['peak_gib']:.2f} GiB, copy {r['copy_gbs']:,.0f} GB/s, "
              f"{r['wall_s']:.0f} s", flush=True)  # fmt: skip
        if a.out:  # after every variant: a run stopped by a time limit keeps what it measured
            Path(a.out).write_text(json.dumps({"config": c, "device": torch.cuda.get_device_name(),
                                               "results": results}, indent=1))  # fmt: skip
    report(results, c, a.steps, torch.cuda.get_device_name())


def report(results: list[dict], c: dict, steps: int, device: str) -> None:
    base = next((r for r in results if r["variant"] == "hf" and "losses" in r), None)
    explained = {r["variant"].removesuffix("-compile"): r["explain"] for r in results if "explain" in r}
    print(f"\n{device}: Llama {c['layers']} layers, hidden {c['hidden']}, seq {c['seq']}, batch "
          f"{c['batch']}, bf16, AdamW; {steps} timed steps (median)")  # fmt: skip
    print(
        f"{'variant':26} {'tokens/s':>10} {'vs hf':>6} {'peak GiB':>9} {'graphs':>6} {'breaks':>6} {'max loss dev':>12}"
    )
    for r in results:
        if "error" in r:
            print(f"{r['variant']:26} FAILED: {r['error']}")
            continue
        e = explained.get(r["variant"].removesuffix("-compile"), {})
        dev = "" if base is None else f"{deviation(r, base):.2%}"
        ratio = "" if base is None else f"{r['tokens_per_s'] / base['tokens_per_s']:.2f}x"
        print(f"{r['variant']:26} {r['tokens_per_s']:>10,.0f} {ratio:>6} {r['peak_gib']:>9.2f} {e.get('graphs', ''):>6} "
              f"{e.get('breaks', ''):>6} {dev:>12}")  # fmt: skip
    for fam, e in explained.items():
        if e["breaks"]:
            print(f"  {fam}: {e['breaks']} graph break(s): {'; '.join(e['reasons'])}")
    profile_table(results)
    print(summary(results, base))


def profile_table(results: list[dict]) -> None:
    """The step profile of every variant side by side, ms per step."""
    prof = [(r["variant"], r["profile"], r.get("not_reinplaced")) for r in results if "profile" in r]
    if not prof:
        return
    names = sorted({g for _, p, _ in prof for g in p["groups"]})
    print("\nstep profile, ms per step (torch.profiler, 3 steps; host wait = median step - kernels)")
    print(f"{'':22}" + "".join(f"{v[:17]:>18}" for v, _, _ in prof))
    rows = [(g, [p["groups"].get(g, 0.0) for _, p, _ in prof]) for g in names]
    rows += [("kernels", [p["kernels_ms"] for _, p, _ in prof]), ("host wait", [p["host_wait_ms"] for _, p, _ in prof]),
             ("copy kernels (count)", [p["copies"] for _, p, _ in prof])]  # fmt: skip
    for label, vals in rows:
        print(f"{label:22}" + "".join(f"{x:18.2f}" for x in vals))
    print(f"{'not reinplaced':22}" + "".join(f"{'?' if n is None else n:>18}" for _, _, n in prof))
    gaps = [p.get("gaps") for _, p, _ in prof]
    if all(g and "span_ms" in g for g in gaps):  # the profiled steps: their span = kernels + launch gaps + waits
        for label, key in (("kernels (count)", "launches"), ("span (profiled)", "span_ms"),
                           ("  launch gaps (<4 us)", "launch_ms"), ("  waits (>=4 us)", "wait_ms")):  # fmt: skip
            print(f"{label:22}" + "".join(f"{g[key]:18.2f}" for g in gaps))
    for r in results:
        for node, d in (r.get("not_reinplaced_ops") or {}).items():
            if isinstance(d, dict):  # runs before 2026-11-28 kept a count only
                print(f"  {r['variant']}: not reinplaced at {node}: {len(d['args'])} ({d['bytes'] / 2**20:.1f} MiB): "
                      f"{', '.join(d['args'][:6])}")  # fmt: skip
        for name, ms, n in r.get("profile", {}).get("copy_kernels", [])[:4]:
            print(f"  {r['variant']}: copy {ms:.3f} ms, {n}x  {name[:90]}")
    gap_table(results)
    for r in results:
        for op, buckets in (r.get("compile_choices") or {}).items():
            for b, d in buckets.items():
                times = (
                    ""
                    if d["kernel_ms"] is None
                    else f" (kernel {d['kernel_ms']:.4f} ms, reference {d['reference_ms']:.4f} ms)"
                )
                print(f"  {r['variant']}: {op} [{b}] traced as the {d['choice']}{times}")


def gap_table(results: list[dict]) -> None:
    """Where each compiled variant's GPU sat idle (step_profile.idle_gaps), and an opsmith compiled variant's kernel
    groups against Hugging Face compiled's: the measured parts of the difference between their steps."""
    for r in results:
        g = r.get("profile", {}).get("gaps")
        if not g or "span_ms" not in g or not r["variant"].endswith("-compile"):
            continue
        print(f"\n  {r['variant']}: waits of the GPU on the host, {g['wait_ms']:.2f} ms a step (profiled), largest:")
        for key, ms, n in g["by_group"][:5] + g["by_name"][:5]:
            print(f"    {ms:6.3f} ms  {n:6.1f}x a step  {key}")
    base = next((r for r in results if r["variant"] == "hf-compile" and "profile" in r), None)
    if base is None:
        return
    for r in results:
        if not (r["variant"].startswith("opsmith") and r["variant"].endswith("-compile") and "profile" in r):
            continue
        p, q = r["profile"], base["profile"]
        step = statistics.median(r["step_ms"]) - statistics.median(base["step_ms"])
        parts = {g: p["groups"].get(g, 0.0) - q["groups"].get(g, 0.0) for g in set(p["groups"]) | set(q["groups"])}
        parts["host wait"] = p["host_wait_ms"] - q["host_wait_ms"]
        shown = ", ".join(
            f"{g} {d:+.2f}" for g, d in sorted(parts.items(), key=lambda kv: -abs(kv[1])) if abs(d) >= 0.05
        )
        print(f"\n  {r['variant']} - hf-compile: step {step:+.2f} ms = {shown}")


def deviation(r: dict, base: dict) -> float:
    """The largest relative difference of a step's loss from Hugging Face eager's, over every step."""
    return max(abs(x - y) / abs(y) for x, y in zip(r["losses"], base["losses"], strict=True))


def summary(results: list[dict], base: dict | None) -> str:
    """The issue's targets, each met or missed, on one line."""
    ok = {r["variant"]: r for r in results if "losses" in r}
    parts = []
    if "opsmith-compile" in ok and "explain" in ok["opsmith-compile"]:
        e = ok["opsmith-compile"]["explain"]
        parts.append(f"opsmith compiles whole: {'yes' if e['graphs'] == 1 and e['breaks'] == 0 else 'NO'} "
                     f"({e['graphs']} graph, {e['breaks']} breaks)")  # fmt: skip
    devs = [(deviation(r, base), v) for v, r in ok.items() if v.startswith("opsmith")] if base is not None else []
    if devs:
        worst = max(devs)
        parts.append(f"opsmith losses within {LOSS_RTOL:.0%} of hf: {'yes' if worst[0] <= LOSS_RTOL else 'NO'} "
                     f"(worst {worst[0]:.2%}, {worst[1]})")  # fmt: skip
    if "opsmith" in ok and "liger" in ok:
        r = ok["opsmith"]["tokens_per_s"] / ok["liger"]["tokens_per_s"]
        parts.append(f"eager opsmith/liger {r:.3f}x")
    compiled = {v: r["tokens_per_s"] for v, r in ok.items() if v.endswith("-compile")}
    others = [(t, v) for v, t in compiled.items() if not v.startswith("opsmith")]
    if "opsmith-compile" in compiled and others:
        best = max(others)
        parts.append(f"compiled opsmith/{best[1]} {compiled['opsmith-compile'] / best[0]:.3f}x")
    for v in ("opsmith-auto-compile", "opsmith-ref-compile"):
        if v in compiled and "hf-compile" in compiled:
            parts.append(f"{v}/hf-compile {compiled[v] / compiled['hf-compile']:.3f}x")
    if "opsmith-compile" in compiled and "opsmith" in ok:
        parts.append(f"opsmith compiled/eager {compiled['opsmith-compile'] / ok['opsmith']['tokens_per_s']:.3f}x")
    if "opsmith" in ok and "liger" in ok:
        parts.append(f"peak memory opsmith {ok['opsmith']['peak_gib']:.3f} GiB vs liger {ok['liger']['peak_gib']:.3f}")
    waits = {v: r["profile"]["host_wait_ms"] for v, r in ok.items() if "profile" in r and v.endswith("-compile")}
    if "hf-compile" in waits:
        parts.append("host wait ms " + ", ".join(f"{v} {w:.2f}" for v, w in waits.items()))
    missed = {v: r["not_reinplaced"] for v, r in ok.items() if "not_reinplaced" in r}
    if missed:
        parts.append("not reinplaced " + ", ".join(f"{v} {'?' if n is None else n}" for v, n in missed.items()))
    return "SUMMARY " + "; ".join(parts)


if __name__ == "__main__":
    main()
