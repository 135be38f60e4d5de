"""Where a training step's time goes, for benchmarks/bench_llama.py and bench_llama_fsdp.py (and their probes).

- ``profile_steps``: the CUDA kernels of a few steps under torch.profiler, in ms per step by group (GEMMs,
  attention, the recipe's kernels, Inductor's kernels, copies, the optimizer, collectives, other ATen kernels), the
  copy kernels, and the GPU's wait on the host: the unprofiled median step minus the kernels;
- ``idle_gaps``: that wait located. Every stretch the GPU sat idle between two kernels is charged to the pair it
  lies between (by group, and by kernel name), so a wait that one op's host code causes shows as the gaps before
  its kernels. The profiled steps carry the profiler's own cost per launch (a few us), so the gaps sum to a little
  more than the unprofiled wait; their split is what they are for;
- ``watch_reinplacing``: the mutated tensors Inductor could not reinplace (each a functionalization copy), per
  graph node, with the arguments and bytes Inductor names, whatever torch version's wording of its log.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

import torch

__all__ = ["GROUPS", "group", "idle_gaps", "kernel_times", "profile_steps", "watch_reinplacing"]

# (group, substrings of a kernel's name), first match wins; Inductor's kernels are those named triton_* (its fused
# kernels may carry an op's name, e.g. triton_poi_fused_add_rms_norm_backward_view_5)
GROUPS = [
    ("liger", ("_rms_norm_", "_swiglu_", "_triton_rope", "liger_cross_entropy")),
    ("opsmith", ("opsmith", "rmsnorm")),
    ("attention", ("flash", "fmha", "attention", "sdpa")),
    ("gemm", ("gemm", "sm90", "cutlass", "nvjet", "cublas", "xmma", "splitkreduce")),
    ("optimizer", ("multi_tensor_apply",)),
    ("comm", ("nccl",)),  # FSDP2's collectives (bench_llama_fsdp.py), on their own streams; before "cat"
    ("copy", ("copy", "memcpy", "memset", "cat", "fill")),
]
#: A gap shorter than this is a launch's own latency on a GPU that the host keeps fed, not a wait (an H100 starts
#: back-to-back kernels of one stream 1-3 us apart).
MIN_GAP_US = 4.0


def group(name: str) -> str:
    """The group of a CUDA kernel's name. An Inductor kernel that only copies (``triton_poi_fused_clone_3``: its
    fused ops all clones or copies; a ``_to_copy`` is a cast) counts as a copy; other Inductor kernels as "inductor"."""
    if name.startswith("triton_"):
        ops = set(name.split("fused_", 1)[-1].rsplit("_", 1)[0].split("_")) - {""}
        return "copy" if ops and ops <= {"clone", "copy"} else "inductor"
    low = name.lower()
    return next((g for g, keys in GROUPS if any(k.lower() in low for k in keys)), "aten other")


def _device_events(step: Callable[[], None], steps: int) -> list:
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as p:
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
    return [e for e in p.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def kernel_times(step: Callable[[], None], steps: int) -> dict[str, list]:
    """{CUDA kernel name: [ms per step, launches in all]} of ``steps`` runs of ``step`` under torch.profiler."""
    return _per_kernel(_device_events(step, steps), steps)


def _per_kernel(events: list, steps: int) -> dict[str, list]:
    kernels: dict[str, list] = {}
    for e in events:
        k = kernels.setdefault(e.name, [0.0, 0])
        k[0] += e.device_time / 1e3 / steps  # ms per step
        k[1] += 1
    return kernels


def idle_gaps(spans: list[tuple[float, float, str]], steps: int, top: int = 8) -> dict:
    """The GPU's idle time between kernels, from ``(start_us, end_us, name)`` spans of ``steps`` profiled steps, in
    ms per step: ``span_ms`` (first kernel's start to last one's end), ``idle_ms`` (all of it idle), split into
    ``launch_ms`` (gaps under MIN_GAP_US: one kernel starting after another, a cost per kernel) and ``wait_ms``
    (longer gaps: the host late), with the largest waits by (group before -> group after) and by kernel names, and
    ``launches`` (kernels a step). Collectives (their own streams, overlapping compute) are left out."""
    spans = sorted((s for s in spans if group(s[2]) != "comm"), key=lambda s: s[0])
    by_group: dict[str, list] = {}
    by_name: dict[str, list] = {}
    launch = wait = 0.0
    busy_until, before = None, ""
    for start, end, name in spans:
        gap = 0.0 if busy_until is None else max(0.0, start - busy_until)
        if gap >= MIN_GAP_US:
            wait += gap
            for table, key in (
                (by_group, f"{group(before)} -> {group(name)}"),
                (by_name, f"{before[:48]} -> {name[:48]}"),
            ):
                entry = table.setdefault(key, [0.0, 0])
                entry[0] += gap / 1e3 / steps
                entry[1] += 1
        else:
            launch += gap
        if busy_until is None or end >= busy_until:
            busy_until, before = end, name

    def largest(table: dict) -> list:
        return [[k, ms, n / steps] for k, (ms, n) in sorted(table.items(), key=lambda kv: -kv[1][0])[:top]]

    span = (max(e for _, e, _ in spans) - spans[0][0]) / 1e3 / steps if spans else 0.0
    return {"span_ms": span, "idle_ms": (launch + wait) / 1e3 / steps, "launch_ms": launch / 1e3 / steps,
            "wait_ms": wait / 1e3 / steps, "launches": len(spans) / steps, "by_group": largest(by_group),
            "by_name": largest(by_name)}  # fmt: skip


def profile_steps(loss_of: Callable, opt: torch.optim.Optimizer, ids: torch.Tensor, step_ms: float,
                  steps: int = 3) -> dict:  # fmt: skip
    """The step profile: kernel ms per step by group, the copy kernels (count, ms), the GPU's wait on the host
    (``step_ms``, the unprofiled median step, minus the kernels) and where it waited (``idle_gaps``)."""

    def step() -> None:
        loss_of(ids, ids).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    step()
    torch.cuda.synchronize()
    events = _device_events(step, steps)
    kernels = _per_kernel(events, steps)
    groups: dict[str, float] = {}
    for name, (ms, _) in kernels.items():
        groups[group(name)] = groups.get(group(name), 0.0) + ms
    copies = sum(n for name, (_, n) in kernels.items() if group(name) == "copy") / steps
    total = sum(ms for g, ms in groups.items() if g != "comm")  # collectives overlap compute on other streams
    top = sorted(kernels.items(), key=lambda kv: -kv[1][0])[:12]
    every = sorted(([n[:100], ms, c / steps] for n, (ms, c) in kernels.items() if ms >= 0.01), key=lambda x: -x[1])
    copy_kernels = sorted(
        ((n, ms, c // steps) for n, (ms, c) in kernels.items() if group(n) == "copy"), key=lambda x: -x[1]
    )
    spans = [(e.time_range.start, e.time_range.end, e.name) for e in events]
    return {"groups": groups, "kernels_ms": total, "host_wait_ms": step_ms - total, "copies": copies,
            "copy_ms": groups.get("copy", 0.0), "top": [[n[:100], ms, c // steps] for n, (ms, c) in top],
            "copy_kernels": [[n[:100], ms, c] for n, ms, c in copy_kernels[:10]],
            "kernels": every, "gaps": idle_gaps(spans, steps)}  # fmt: skip


# Inductor's reinplacing log line per mutating node, in torch 2.11's wording and in 2.13's.
_OLD_LOG = (
    r"For node (?P<node>\S+), attempted to reinplace .*?; (?P<missed>\[.*?\]) \(if non-empty\) are possible "
    r"missed.* is : (?P<bytes>\d+) bytes"
)
_NEW_LOG = (
    r"Reinplace for (?P<op>\S+) \(wrapped by (?P<node>\S+)\):.*missed opportunities=(?P<missed>\[.*?\]), "
    r"missed static bytes=(?P<bytes>\d+)"
)
_REINPLACE_LOGS = [re.compile(_OLD_LOG, re.S), re.compile(_NEW_LOG, re.S)]


def _args(text: str) -> list[str]:
    return [a for a in re.split(r"[\[\]\s,'\"]+", text) if a]


def watch_reinplacing() -> dict:
    """{"tensors": n, "bytes": n, "nodes": {node: {"args": [...], "bytes": n}}, "logged": n} of every tensor Inductor
    could not reinplace from now on (``logged``: the mutating nodes it reported on, reinplaced or not), filled while the step compiles. Counted from Inductor's own log of each node, not from
    its ``ReinplaceCounters``, which every Dynamo frame compile clears (a nested ``torch.compile`` included, as
    ``compile="auto"``'s measurement does)."""
    found: dict = {"tensors": 0, "bytes": 0, "nodes": {}, "logged": 0}

    class Watch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            for pattern in _REINPLACE_LOGS:
                m = pattern.search(text)
                if m is None:
                    continue
                found["logged"] += 1
                missed = _args(m.group("missed"))
                if missed:
                    node = m.groupdict().get("op") or m.group("node")
                    entry = found["nodes"].setdefault(node, {"args": [], "bytes": 0})
                    entry["args"] += missed
                    entry["bytes"] += int(m.group("bytes"))
                    found["tensors"] += len(missed)
                    found["bytes"] += int(m.group("bytes"))
                return

    log = logging.getLogger("torch._inductor.fx_passes.reinplace")
    log.addHandler(Watch())
    # torch's logging setup may reset this logger's level later (torch._logging's set_logs); its registered name
    # keeps INFO through that
    torch._logging.set_logs(modules={"torch._inductor.fx_passes.reinplace": logging.INFO})
    log.setLevel(logging.INFO)
    return found
