#!/usr/bin/env python3
"""The JSON beside a measurement kept as a log: probes that print tables (and runs from before the benchmarks wrote
JSON) are parsed here, so that every figure a page quotes is computed from a file (scripts/figures.py), never
retyped. Each parser reads its probe's printed table exactly; a line it cannot read is an error, not skipped.

    python scripts/log_json.py KIND LOG [--out JSON]
    python scripts/log_json.py flce docs/measurements/2026-11-28-flce-gemms-h200.txt
    python scripts/log_json.py rmsnorm-configs docs/measurements/2026-11-28-rmsnorm-bwd-65536-overlap-h200.txt
    python scripts/log_json.py rmsnorm-configs docs/measurements/2026-11-27-compile-round2-h100.txt \
        --out docs/measurements/2026-11-27-rmsnorm-bwd-65536-overlap-h100.json

writes the ``.json`` beside the log (``--out`` names another file, for a log of several runs whose own JSON holds
another benchmark's results). KIND: ``core`` (bench_core.py), ``native`` (bench_core.py then bench_rmsnorm.py
--quick), ``rmsnorm-bench`` (bench_rmsnorm.py), ``rmsnorm-configs`` (probes/rmsnorm_bwd_cluster_count.py),
``published-matmul`` (bench_published.py), ``tuning`` (bench_tuning.py), ``host`` (bench_host.py), ``rows-us`` (probes/rmsnorm_fwd_epilogue.py), ``ncu`` (a probe's log with ncu's report), ``memory-phases`` (probes/llama_memory_phases.py), ``cute-host`` (probes/cute_host_probe.py's part of the CuTe DSL
probes' log), ``flce`` (probes/flce_chunk_gemms.py); the one-off probes' lab logs (scripts/probe_logs.py):
``cute-probe`` (the CuTe DSL RMSNorm probes), ``cluster-backward`` (the CUDA C++ cluster backward),
``rmsnorm-order`` (the 65,536 backward in several orders), ``step-kernels`` (probes/llama_step_profile.py's
kernel lists), ``serving-gil`` (probes/serving_gil.py), ``distributed`` (examples/distributed/train.py's RESULT lines). The JSON records its log and KIND; tests/test_figures.py
parses the log again and compares.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
from functools import partial
from pathlib import Path


def flce(text: str) -> dict:
    """benchmarks/probes/flce_chunk_gemms.py: {"device", "ways": {label: {"ms", "tflops", "peak_mib", "chunk"}}}."""
    head = re.search(r"^(.+): LM head GEMMs, (\d+) rows, hidden (\d+), vocabulary (\d+)", text, re.M)
    if head is None:
        raise ValueError("no 'LM head GEMMs' header: not a flce_chunk_gemms.py log")
    ways = {}
    table = text[text.index("\nway ") :].splitlines()[2:]
    for line in table:
        m = re.match(r"^(whole \(3 GEMMs\)|chunks of (\d+).*?)\s+([\d.]+)\s+(\d+)\s+(\d+)$", line)
        if m is None:
            if line.strip():
                raise ValueError(f"unreadable line of the GEMM table: {line!r}")
            continue
        chunk = int(m.group(2)) if m.group(2) else int(head.group(2))
        ways[m.group(1).strip()] = {"chunk": chunk, "ms": float(m.group(3)), "tflops": int(m.group(4)),
                                    "peak_mib": int(m.group(5)), "liger": "(Liger)" in m.group(1)}  # fmt: skip
    return {"device": head.group(1).strip(), "rows": int(head.group(2)), "hidden": int(head.group(3)),
            "vocab": int(head.group(4)), "ways": ways}  # fmt: skip


def rmsnorm_configs(text: str) -> dict:
    """benchmarks/probes/rmsnorm_bwd_cluster_count.py: {"device", "shapes": {"RxH": {"copy_us", "configs": [...]}}},
    each config {"config", "us", "frac_copy", "params"} in the log's order (fastest first)."""
    head = re.search(r"^(.+), (\d+) SMs: CUDA C\+\+ RMSNorm backward", text, re.M)
    if head is None:
        raise ValueError("no 'RMSNorm backward' header: not a rmsnorm_bwd_cluster_count.py log")
    shapes: dict = {}
    current = None
    for line in text[head.end() :].splitlines()[1:]:
        s = re.match(r"^\s+\((\d+), (\d+)\): copy of x ([\d.]+) us", line)
        c = re.match(r"^\s+([\d.]+) us\s+([\d.]+)% of copy\s+config (\d+): (.*)$", line)
        if s:
            current = shapes[f"{s.group(1)}x{s.group(2)}"] = {"copy_us": float(s.group(3)), "configs": []}
        elif c and current is not None:
            params = dict(kv.split("=") for kv in c.group(4).split())
            current["configs"].append({"config": int(c.group(3)), "us": float(c.group(1)),
                                       "frac_copy": round(float(c.group(2)) / 100, 6),
                                       "params": {k: int(v) for k, v in params.items()}})  # fmt: skip
        elif line.strip():
            break  # the probe's notes after its tables
    if not shapes:
        raise ValueError("no shape table found")
    return {"device": head.group(1).strip(), "sms": int(head.group(2)), "shapes": shapes}


def published_matmul(text: str) -> dict:
    """benchmarks/bench_published.py's matmul log: {"device", "worst_ratio", "shapes": {"MxNxK": {"opsmith_us",
    "triton_us", "torch_us", "chosen_us", "best_us"}}, "second_process": {"tuned_keys", "trial_runs"}}."""
    head = re.search(r"^== published matmul benchmark on (.+) \(medians\) ==$", text, re.M)
    worst = re.search(r"^chosen/best worst ratio ([\d.]+)", text, re.M)
    second = re.search(r"^second process: \{'tuned_keys': (\d+), 'trial_runs': (\d+)\}", text, re.M)
    if head is None or worst is None or second is None:
        raise ValueError("no matmul header, chosen/best line or second-process line: not a bench_published.py log")
    shapes: dict = {}
    for m in re.finditer(r"\((\d+), (\d+), (\d+)\): opsmith ([\d.]+)us, triton autotune ([\d.]+)us, torch.matmul "
                         r"([\d.]+)us", text):  # fmt: skip
        shapes["x".join(m.group(1, 2, 3))] = {"opsmith_us": float(m.group(4)), "triton_us": float(m.group(5)),
                                              "torch_us": float(m.group(6))}  # fmt: skip
    for m in re.finditer(r"\((\d+), (\d+), (\d+)\): ([\d.]+)/([\d.]+)us", worst.string[worst.start() :].split("\n")[0]):
        shapes["x".join(m.group(1, 2, 3))].update(chosen_us=float(m.group(4)), best_us=float(m.group(5)))
    return {"device": head.group(1), "worst_ratio": float(worst.group(1)), "shapes": shapes,
            "second_process": {"tuned_keys": int(second.group(1)), "trial_runs": int(second.group(2))}}  # fmt: skip


def core(text: str) -> dict:
    """benchmarks/bench_core.py's log: {"device", "host_us": {row: us}, "nvrtc_ms": {"fresh", "after_init", "next"},
    "cache_ms_per_op", "bandwidth_gbs": {"copy", "opsmith relu", "float4 relu", "torch.relu"}}."""
    head = re.search(r"^== opsmith core benchmark on (.+?) \(torch", text, re.M)
    nvrtc = re.search(r"^NVRTC compile: first in a fresh process (\d+) ms, first after CUDA init (\d+) ms.*?next (\d+) ms",
                      text, re.M)  # fmt: skip
    cache = re.search(r"^second process, 10 ops from the disk cache.*?: ([\d.]+) ms per op", text, re.M)
    band = re.search(r"^2\^28 floats: copy (\d+) GB/s; opsmith relu (\d+) GB/s .*?; float4 relu (\d+) GB/s .*?; "
                     r"torch.relu (\d+) GB/s", text, re.M)  # fmt: skip
    if None in (head, nvrtc, cache, band):
        raise ValueError("a line of bench_core.py's summary is missing: not a bench_core.py log")
    host = {m.group(1).strip(): float(m.group(2)) for m in re.finditer(r"^  host (.+?)\s+([\d.]+) us \(", text, re.M)}
    return {"device": head.group(1), "host_us": host,
            "nvrtc_ms": dict(zip(("fresh", "after_init", "next"), map(int, nvrtc.groups()), strict=True)),
            "cache_ms_per_op": float(cache.group(1)),
            "bandwidth_gbs": dict(zip(("copy", "opsmith relu", "float4 relu", "torch.relu"), map(int, band.groups()),
                                      strict=True))}  # fmt: skip


_BENCH_ROW = re.compile(r"^  (\S.*?)\s+([\d.]+)\s+\d+\s+([\d.]+)%\s+([\d.]+)\s+([\d.]+)\s+\d+\s+([\d.]+)%\s+(\S+)$")


def _pairs(line: str, sep: str) -> list[tuple[str, str]]:
    """ "name value<sep>name value..." as (name, value) pairs, the name being all but the last word."""
    return [tuple(part.strip().rsplit(" ", 1)) for part in line.split(sep)]  # type: ignore[misc]


def rmsnorm_bench(text: str) -> dict:
    """benchmarks/bench_rmsnorm.py's log: its table per shape (a shape met twice keeps its first), then, where
    printed, the main shape's forwards back to back and the host times at (64, 4096): {"device", "shapes":
    {"8x4096x4096": {"copy_gbs", "impls": {name: {"fwd_us", "fwd_frac_copy", "fwd_bwd_us", "bwd_us",
    "bwd_frac_copy", "max_err"}}}}, "back_to_back_us": {name: us}, "host_64x4096_us": {name: {"fwd", "fwd_grad",
    "fwd_bwd"}}}."""
    shapes: dict = {}
    device = None
    lines = text.splitlines()
    for k, line in enumerate(lines):
        head = re.match(r"^RMSNorm \(([\d, ]+)\) bfloat16 on (.+): copy (\d+) GB/s$", line)
        if head is None or "x".join(x.strip() for x in head.group(1).split(",")) in shapes:
            continue
        device = device or head.group(2)
        impls = {}
        for row in lines[k + 2 :]:
            m = _BENCH_ROW.match(row)
            if m is None:
                break
            impls[m.group(1)] = {"fwd_us": float(m.group(2)), "fwd_frac_copy": round(float(m.group(3)) / 100, 6),
                                 "fwd_bwd_us": float(m.group(4)), "bwd_us": float(m.group(5)),
                                 "bwd_frac_copy": round(float(m.group(6)) / 100, 6), "max_err": float(m.group(7))}  # fmt: skip
        if not impls:
            raise ValueError(f"no implementation rows under {line!r}")
        shapes["x".join(x.strip() for x in head.group(1).split(","))] = {"copy_gbs": int(head.group(3)), "impls": impls}
    if not shapes:
        raise ValueError("no 'RMSNorm (...) bfloat16 on ...: copy' table: not a bench_rmsnorm.py log")
    data: dict = {"device": device, "shapes": shapes}
    b2b = re.search(r"^  forward back to back \(no L2 flush\), us: (.+)$", text, re.M)
    if b2b:
        data["back_to_back_us"] = {name: float(v) for name, v in _pairs(b2b.group(1), ", ")}
    host = re.search(r"^  host time per call at \(64, 4096\) bf16, us \(fwd / fwd with grad inputs / fwd\+bwd\): (.+)$",
                     text, re.M)  # fmt: skip
    if host:
        times = {}
        for part in host.group(1).split("; "):
            m = re.fullmatch(r"(.+?) ([\d.]+) / ([\d.]+) / ([\d.]+)", part.strip())
            if m is None:
                raise ValueError(f"unreadable host time: {part!r}")
            times[m.group(1)] = dict(zip(("fwd", "fwd_grad", "fwd_bwd"), map(float, m.group(2, 3, 4)), strict=True))
        data["host_64x4096_us"] = times
    return data


def native(text: str) -> dict:
    """A native-libraries run: bench_core.py's log (``core``) with its native rows and library build, then
    ``bench_rmsnorm.py --quick``'s (``rmsnorm_bench``): adds "build_s": {"cold", "cached"}, "rmsnorm" (the table at
    (8, 4096, 4096)) and "host_64x4096_us"."""
    data = core(text)
    build = re.search(r"^native library of .*: build ([\d.]+) s cold, ([\d.]+) s cached", text, re.M)
    bench = rmsnorm_bench(text)
    if build is None or "host_64x4096_us" not in bench:
        raise ValueError("no native build line or host-time line: not a native-libraries log")
    data.update(build_s={"cold": float(build.group(1)), "cached": float(build.group(2))},
                rmsnorm=bench["shapes"]["8x4096x4096"]["impls"], host_64x4096_us=bench["host_64x4096_us"])  # fmt: skip
    return data


def tuning(text: str) -> dict:
    """benchmarks/bench_tuning.py's log: the JSON it printed first (``tuned``: per op and shape the chosen and the
    best config), then its summary: adds "worst_ratio": {op: ratio}, "host_us": {"torch.relu", "opsmith triton
    relu", "triton jit launch"} and "second_process_ms": {"register", "first_call", "ready", "triton_alone"}."""
    data, end = json.JSONDecoder().raw_decode(text)
    rest = text[end:]
    worst = dict(re.findall(r"^(\w+): chosen/best worst ratio ([\d.]+)", rest, re.M))
    host = re.search(r"^host us/call 1024 floats: torch.relu ([\d.]+), opsmith triton relu ([\d.]+) .*triton jit launch "
                     r"([\d.]+)$", rest, re.M)  # fmt: skip
    second = re.search(r"^second process .*?register the Triton softmax op ([\d.]+) ms; .*?first call ([\d.]+) ms; "
                       r"ready after ([\d.]+) ms vs Triton alone loading the same kernel ([\d.]+) ms", rest, re.M)  # fmt: skip
    if not worst or host is None or second is None:
        raise ValueError("no chosen/best, host or second-process line after the JSON: not a bench_tuning.py log")
    data.update(worst_ratio={k: float(v) for k, v in worst.items()},
                host_us=dict(zip(("torch.relu", "opsmith triton relu", "triton jit launch"), map(float, host.groups()),
                                 strict=True)),
                second_process_ms=dict(zip(("register", "first_call", "ready", "triton_alone"),
                                           map(float, second.groups()), strict=True)))  # fmt: skip
    return data


def host(text: str) -> dict:
    """benchmarks/bench_host.py's printed report (runs that wrote no JSON): {"device", "rows": {row: {"aten_us",
    path: [min, median, max] of the ratio to aten over the processes}}}, and where printed "backward_us": {path: us
    a step at (8, 4096, 4096)} and "backward_native_calls"."""
    head = re.search(r"^== host time per call on (.+?) \(torch", text, re.M)
    if head is None:
        raise ValueError("no 'host time per call' header: not a bench_host.py log")
    rows = {}
    for m in re.finditer(r"^  (.+?): aten ([\d.]+) us; (.+)$", text, re.M):
        paths = {
            p: [float(x) for x in r.split(" / ")]
            for p, r in re.findall(r"(\w+) ([\d.]+ / [\d.]+ / [\d.]+)x", m.group(3))
        }
        rows[m.group(1)] = {"aten_us": float(m.group(2)), **paths}
    if not rows:
        raise ValueError("no host row: not a bench_host.py log")
    data: dict = {"device": head.group(1), "rows": rows}
    # the per-step table at (8, 4096, 4096), where the run printed one
    step = re.search(r"^forward\+backward \(8, 4096, 4096\) bf16 per step.*?: (.+)$", text, re.M)
    if step:
        # "aten 1136.0 us, cute default 742.9 us, cute python, calling thread 763.1 us": a name may hold a comma
        data["backward_us"] = {name: float(us) for name, us in re.findall(r"(.+?) ([\d.]+) us(?:, |$)", step.group(1))}
    calls = re.search(r"^  default path's timed calls: native (\d+)$", text, re.M)
    if calls:
        data["backward_native_calls"] = int(calls.group(1))
    return data


def rows_us(text: str) -> dict:
    """A probe's one table of labelled medians (benchmarks/probes/rmsnorm_fwd_epilogue.py): its title line, then
    "  label  123.4 us  (lo-hi)" rows: {"title", "rows": {label: us}}."""
    lines = text.strip().splitlines()
    rows = {}
    for line in lines[1:]:
        m = re.fullmatch(r"  (\S.*?)\s+([\d.]+) us  \(([\d.]+)-([\d.]+)\)", line)
        if m is None:
            raise ValueError(f"unreadable row: {line!r}")
        rows[m.group(1)] = float(m.group(2))
    if not rows:
        raise ValueError("no row under the title: not a one-table probe log")
    return {"title": lines[0], "rows": rows}


_NCU_KERNEL = re.compile(r"^  (?:void )?([A-Za-z_]\w*)(?= ?[<(]).*\(\d+, \d+, \d+\)x\(\d+, \d+, \d+\)")
_NCU_METRIC = re.compile(r"^    (\S.*?)\s{2,}(?:(\S+)\s+)?([\d,]+(?:\.\d+)?)$")


def ncu(text: str) -> dict:
    """A probe's log with ncu's report of its kernels (``--metrics`` lists or ``--section`` tables), and the
    probe's own timings where it prints them: {"kernels": [{"name", "metrics": {metric: value}}] in the log's
    order, values in the unit ncu names beside each ("units": {metric: unit}), "timings": {label: {"us",
    "frac_copy"}}} (``rmsnorm_long_rows.py``'s "impl: bwd X us (Y% of copy)" and ``rmsnorm_fwd_16384.py``'s
    "impl median X us (Y% of copy)" lines)."""
    kernels: list[dict] = []
    for line in text.splitlines():
        k = _NCU_KERNEL.match(line)
        if k:
            kernels.append({"name": k.group(1), "metrics": {}, "units": {}})
            continue
        m = _NCU_METRIC.match(line)
        if m and kernels and not m.group(1).startswith(("-", "Metric Name")):
            # a metric two sections name alike ("Memory Throughput": % and Tbyte/s) keeps its first
            kernels[-1]["metrics"].setdefault(m.group(1).strip(), float(m.group(3).replace(",", "")))
            kernels[-1]["units"].setdefault(m.group(1).strip(), m.group(2) or "")
    if not kernels:
        raise ValueError("no kernel of ncu's report: not an ncu log")
    timings = {}
    for m in re.finditer(r"^  (opsmith \w+|copy|torch\.compile)(?::| +median) +(?:bwd )?([\d.]+) us \( *([\d.]+)% of copy\)",
                         text, re.M):  # fmt: skip
        timings.setdefault(m.group(1), {"us": float(m.group(2)), "frac_copy": round(float(m.group(3)) / 100, 6)})
    return {"kernels": kernels, "timings": timings}


def memory_phases(text: str) -> dict:
    """benchmarks/probes/llama_memory_phases.py's tables ("GiB allocated, one training step"; a log may hold
    several, in order): {"tables": [{"variants": [...], "gib": {phase: [GiB per variant]}, "diff_mib": {phase:
    MiB}}]}."""
    tables = []
    lines = text.splitlines()
    for k, line in enumerate(lines):
        if not line.endswith(": GiB allocated, one training step"):
            continue
        variants = lines[k + 1].split()[:-2]  # the header ends in "MiB diff"
        gib, diff = {}, {}
        for row in lines[k + 2 :]:
            m = re.fullmatch(r"(\S.*?)\s+((?:[\d.]+\s+){" + str(len(variants)) + r"})(-?[\d.]+)", row)
            if m is None:
                break
            gib[m.group(1)] = [float(x) for x in m.group(2).split()]
            diff[m.group(1)] = float(m.group(3))
        if not gib:
            raise ValueError(f"no phase under the table at line {k + 1}")
        tables.append({"variants": variants, "gib": gib, "diff_mib": diff})
    if not tables:
        raise ValueError("no 'GiB allocated, one training step' table: not a llama_memory_phases.py log")
    return {"tables": tables}


def cute_host(text: str) -> dict:
    """The CuTe DSL probes' log, item 2 (benchmarks/probes/cute_host_probe.py): one forward call's host time before
    and after the flavor writes the call's C arguments itself: {"before": {"cuda_us", "cute_us", "launch_us",
    "dsl_call_us", "executor_us"}, "after": {"cuda_us", "cute_us", "launch_us"}}."""
    calls = re.findall(r"op call: CUDA C\+\+ ([\d.]+) us, CuTe DSL ([\d.]+) us; CuteKernel.launch ([\d.]+)", text)
    inner = re.search(r"the DSL's __call__ with prepared\s+arguments ([\d.]+); its executor with prepared C arguments (\d+(?:\.\d+)?)",
                      text)  # fmt: skip
    if len(calls) != 2 or inner is None:
        raise ValueError("not the two 'op call' lines and the DSL's own times of cute_host_probe.py")
    keys = ("cuda_us", "cute_us", "launch_us")
    before = dict(zip(keys, map(float, calls[0]), strict=True))
    before.update(dsl_call_us=float(inner.group(1)), executor_us=float(inner.group(2)))
    return {"before": before, "after": dict(zip(keys, map(float, calls[1]), strict=True))}


def _probe_logs():
    """scripts/probe_logs.py (the one-off probes' lab logs), loaded from its path as this module is."""
    spec = importlib.util.spec_from_file_location("probe_logs", Path(__file__).with_name("probe_logs.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_PROBES = _probe_logs()
PARSERS = {"core": core, "cute-host": cute_host, "host": host, "memory-phases": memory_phases, "ncu": ncu, "rows-us": rows_us, "tuning": tuning, "flce": flce, "native": native, "rmsnorm-bench": rmsnorm_bench,
           "rmsnorm-configs": rmsnorm_configs, "published-matmul": published_matmul,
           "cute-probe": partial(_PROBES.cute_probe, host=cute_host),
           "cluster-backward": partial(_PROBES.cluster_backward, ncu=ncu),
           "rmsnorm-order": partial(_PROBES.rmsnorm_order, tables=rmsnorm_bench), "step-kernels": _PROBES.step_kernels,
           "serving-gil": _PROBES.serving_gil, "distributed": _PROBES.distributed_results}  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=sorted(PARSERS))
    p.add_argument("log", type=Path)
    p.add_argument("--out", type=Path, default=None, help="the JSON's path (default: the log's, .json)")
    a = p.parse_args()
    data = PARSERS[a.kind](a.log.read_text())
    data["log"], data["parsed_by"] = a.log.name, a.kind
    out = a.out or a.log.with_suffix(".json")
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
