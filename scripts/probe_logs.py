"""Parsers for the lab logs of one-off probes (scripts/log_json.py's CLI runs them): logs whose items mix a
probe's printed lines with a few lines of reading written beside them at the time. Each parser takes the
printed lines and the figures a page quotes from the reading, by their wording; a figure it cannot find is a
ValueError naming the item, never a default.
"""

from __future__ import annotations

import re
from collections.abc import Callable

_NUM = r"(\d+(?:\.\d+)?)"
# benchmarks/probes/rmsnorm_long_rows.py: "  cute: fwd 182.6 us (99.7% of copy), bwd 323.4 us (84.4%), fwd+bwd ..."
_RUN = re.compile(rf"^ +(\w+): fwd {_NUM} us \({_NUM}% of copy\), bwd {_NUM} us \({_NUM}%\), fwd\+bwd {_NUM} us(.*)$")
_HIDDEN = re.compile(r", (\d+), \d+\)'")
_SHAPE = re.compile(r"RMSNorm \((\d+), (\d+)\) bf16")


def _flat(text: str) -> str:
    """The text on one line (the reading wraps its sentences)."""
    return " ".join(text.split())


def _need(pattern: str, text: str, what: str) -> re.Match:
    m = re.search(pattern, _flat(text))
    if m is None:
        raise ValueError(f"{what}: no {pattern!r} in the log")
    return m


def _items(text: str, head: str) -> dict[str, str]:
    """The log cut at each line matching ``head`` (its first group names the part)."""
    parts: dict[str, str] = {}
    marks = list(re.finditer(head, text, re.M))
    for k, m in enumerate(marks):
        parts[m.group(1).strip()] = text[m.end() : marks[k + 1].start() if k + 1 < len(marks) else len(text)]
    if not parts:
        raise ValueError(f"no part headed {head!r}")
    return parts


def runs(text: str) -> list[dict]:
    """Each rmsnorm_long_rows.py line in order: {"impl", "shape" (the last "RMSNorm (R, H) bf16" header above it, or
    None), "hidden" (the newest key of its printed backward decisions, or None), "fwd_us", "fwd_frac_copy",
    "bwd_us", "bwd_frac_copy", "fwd_bwd_us"}."""
    out, shape = [], None
    for line in text.splitlines():
        head = _SHAPE.search(line)
        if head and ": RMSNorm" in line:
            shape = f"{head.group(1)}x{head.group(2)}"
        m = _RUN.match(line)
        if m is None:
            continue
        keys = _HIDDEN.findall(m.group(7))
        out.append({"impl": m.group(1), "shape": shape, "hidden": int(keys[-1]) if keys else None,
                    "fwd_us": float(m.group(2)), "fwd_frac_copy": round(float(m.group(3)) / 100, 6),
                    "bwd_us": float(m.group(4)), "bwd_frac_copy": round(float(m.group(5)) / 100, 6),
                    "fwd_bwd_us": float(m.group(6))})  # fmt: skip
    return out


def _floats(text: str) -> list[float]:
    return [float(x) for x in re.findall(_NUM, text)]


def cute_probe(text: str, host: Callable[[str], dict]) -> dict:
    """The CuTe DSL RMSNorm probes' log (benchmarks/probes/rmsnorm_cute_probe.py, 2026-11-23): item 1's kernels
    alone per shape and the registers ptxas gave, item 3's backward configs at (2048, 65536), item 4's backward
    time per count of partial rows, item 5's three tuned runs; item 2's host times as ``host`` (log_json's
    ``cute_host``) reads them."""
    item = _items(text, r"^(\d)\. ")
    alone = {}
    for m in re.finditer(rf"^   \((\d+), (\d+)\)\s+{_NUM}\s+{_NUM}\s+{_NUM}\s+{_NUM}$", item["1"], re.M):
        alone[f"{m.group(1)}x{m.group(2)}"] = dict(
            zip(("cute_bwd", "cuda_bwd", "cute_fwd", "cuda_fwd"), map(float, m.group(3, 4, 5, 6)), strict=True)
        )
    regs = _need(r"ptxas: (\d+)-(\d+) registers a thread", item["1"], "item 1")
    configs = {
        m.group(1): float(m.group(2)) for m in re.finditer(rf"^   (\(\d+, \d+, \d+\))\s+{_NUM}", item["3"], re.M)
    }
    every = _need(
        rf"At \(8192, 16384\) every config {_NUM}-{_NUM} us; at \(32768, 4096\) {_NUM}-{_NUM} us", item["3"], "item 3"
    )
    prows = {}
    for m in re.finditer(r"\((\d+), (\d+)\), clusters of (\d+): +p=([^u]+) us", _flat(item["4"])):
        pairs = [(p, float(v)) for p, v in (x.split() for x in m.group(4).split(", "))]
        prows[f"{m.group(1)}x{m.group(2)}"] = {"cluster": int(m.group(3)), "us": dict(pairs)}
    tuned = _need(
        rf"every backward config at \(2048, 65536\): {_NUM}-{_NUM} us \(kernel\).*?bwd kernel ([\d. /]+) us, "
        rf"dweight {_NUM} us, bwd column ([\d. /]+) us \(([\d.%, ]+) of copy\); forward ([\d. /]+) us \(([\d.%, ]+)\)"
        rf".*?the same backward measured {_NUM} us",
        item["5"], "item 5",
    )  # fmt: skip
    if not alone or not configs or len(prows) != 2:
        raise ValueError("items 1, 3 and 4 need their tables: not the CuTe DSL probes' log")
    return {
        "host": host(item["2"]),
        "kernels_alone_us": alone,
        "registers": [int(regs.group(1)), int(regs.group(2))],
        "bwd_configs_2048x65536_us": configs,
        "bwd_configs_range_us": {
            "8192x16384": [float(every.group(1)), float(every.group(2))],
            "32768x4096": [float(every.group(3)), float(every.group(4))],
        },
        "bwd_by_partial_rows": prows,
        "tuned_2048x65536": {
            "every_config_kernel_us": [float(tuned.group(1)), float(tuned.group(2))],
            "bwd_kernel_us": _floats(tuned.group(3)),
            "dweight_us": float(tuned.group(4)),
            "bwd_column_us": _floats(tuned.group(5)),
            "bwd_frac_copy": [round(x / 100, 6) for x in _floats(tuned.group(6))],
            "fwd_us": _floats(tuned.group(7)),
            "fwd_frac_copy": [round(x / 100, 6) for x in _floats(tuned.group(8))],
            "in_the_sweep_bwd_us": float(tuned.group(9)),
        },
    }


def cluster_backward(text: str, ncu: Callable[[str], dict]) -> dict:
    """The CUDA C++ cluster backward's log (2026-11-24): item 1's rmsnorm_long_rows.py runs and the streaming
    kernel's time before; item 3's backward times per config (the first machine) and per count of partial rows (a
    fresh machine, the configs in the first machine's order); item 4's two sweeps' best backward at 65,536; ncu's
    counts (item 2, read by ``ncu``: log_json's) and its reading of the tuned kernel (item 5)."""
    item = _items(text, r"^(\d)\. ")
    before = _need(rf"before the cluster kernel, .*?cuda bwd {_NUM} us at 65,536, {_NUM}% of copy", item["1"], "item 1")
    first = {}
    for m in re.finditer(rf"(\(\d+, \d+, (?:MINB )?\d+, \d+(?: stages)?, (?:C )?\d+\)) ([\d. /]+?)(?: us)? \({_NUM}%\)",
                         _flat(item["3"].split("(4096, 32768)")[0])):  # fmt: skip
        first[m.group(1)] = _floats(m.group(2))
    fresh = {}
    for m in re.finditer(r"(\d+) partial rows: ([\d. /()%]+?) us", _flat(item["3"].split("A fresh machine")[1])):
        fresh[m.group(1)] = _floats(re.sub(r"\([\d.]+%\)", "", m.group(2)))
    sweeps = {}
    for name in ("first", "second"):
        m = _need(
            rf"{name} sweep [^:]*: {_NUM} us \({_NUM}%; quack {_NUM}, torch\.compile {_NUM}\)", item["4"], "item 4"
        )
        sweeps[name] = {"bwd_us": float(m.group(1)), "bwd_frac_copy": round(float(m.group(2)) / 100, 6),
                        "quack_us": float(m.group(3)), "compile_us": float(m.group(4))}  # fmt: skip
    if len(first) != 5 or any(len(v) != 5 for v in fresh.values()) or not fresh:
        raise ValueError("item 3: not five configs on each machine")
    copy = _need(rf"copy-equivalent {_NUM}-{_NUM} us", item["3"], "item 3")
    why = _need(
        rf"DRAM Throughput {_NUM}% of peak.*?Max Active Clusters (\d+).*?Est\. Speedup: {_NUM}%", item["5"], "item 5"
    )
    return {"runs": runs(item["1"]), "ncu": ncu(item["2"])["kernels"],
            "copy_equivalent_us": [float(copy.group(1)), float(copy.group(2))],
            "tuned_ncu": {"dram_frac_peak": round(float(why.group(1)) / 100, 6), "max_active_clusters": int(why.group(2)),
                          "est_speedup_frac": round(float(why.group(3)) / 100, 6)},
            "streaming_before": {"bwd_us": float(before.group(1)), "bwd_frac_copy": float(before.group(2)) / 100},
            "configs_first_machine_us": first, "configs_fresh_machine_us": fresh, "sweeps": sweeps}  # fmt: skip


_SPREAD = re.compile(rf"^  clusters (\d/\d): min {_NUM}  median {_NUM}  max {_NUM}", re.M)


def rmsnorm_order(text: str, tables: Callable[[str], dict]) -> dict:
    """The (2048, 65536) backward in several orders (2026-11-24): per ``## `` section its rmsnorm_long_rows.py runs,
    its bench_rmsnorm.py tables (read by ``tables``: log_json's ``rmsnorm_bench``), and rmsnorm_cluster_spread.py's rounds: per shape the
    backward's min / median / max per fraction of clusters, and the host's time to issue one backward."""
    sections = []
    for title, body in _items(text, r"^## (.+)$").items():
        part: dict = {"title": title, "runs": runs(body)}
        if "implementation" in body:
            part["tables"] = tables(body)["shapes"]
        spread = []
        for block in re.split(r"(?m)^(?=.*: CuTe DSL RMSNorm backward at)", body)[1:]:
            shape = re.search(r"backward at \((\d+), (\d+)\)", block)
            host = re.search(rf"host time to issue one backward: median {_NUM} us \(min {_NUM}, max {_NUM}\)", block)
            spread.append({
                "shape": f"{shape.group(1)}x{shape.group(2)}",
                "host_issue_us": dict(zip(("median", "min", "max"), map(float, host.group(1, 2, 3)), strict=True)) if host else None,
                "clusters": {m.group(1): {"min": float(m.group(2)), "median": float(m.group(3)), "max": float(m.group(4))}
                             for m in _SPREAD.finditer(block)},
            })  # fmt: skip
        if spread:
            part["spread"] = spread
        sections.append(part)
    if not any(s["runs"] for s in sections):
        raise ValueError("no rmsnorm_long_rows.py line: not the 65,536 orders log")
    return {"sections": sections}


_STEP_HEAD = re.compile(rf"^== ([\w-]+): {_NUM} ms a step \(CUDA events\), kernels {_NUM} ms, peak {_NUM} GiB$")
_STEP_KERNEL = re.compile(rf"^ +{_NUM} ms +(\d+)x  \[([\w ]+)\] (.+)$")
_SIDE_ROW = re.compile(r"^(aten other|attention|copy|gemm|inductor|liger|optimizer) +((?:[\d.]+/\d+ +)+)(\S.*)$")


def step_kernels(text: str) -> dict:
    """benchmarks/probes/llama_step_profile.py's kernel lists in a Llama log: each "== variant: ... ms a step"
    block's heaviest kernels ("heaviest": {variant: {"step_ms", "kernels_ms", "peak_gib", "kernels": [{"ms",
    "calls", "group", "name"}]}}, the first block of a variant kept), the side-by-side table ("side_by_side":
    {"variants": [...], "rows": [{"group", "name", "ms": [...], "calls": [...]}]}) and the group table as printed
    ("groups": Inductor's kernels that carry an op's name counted as Inductor's, which the bench's JSON does not)."""
    heaviest: dict = {}
    current = None
    for line in text.splitlines():
        head = _STEP_HEAD.match(line)
        if head:
            current = None if head.group(1) in heaviest else head.group(1)
            if current:
                heaviest[current] = {"step_ms": float(head.group(2)), "kernels_ms": float(head.group(3)),
                                     "peak_gib": float(head.group(4)), "kernels": []}  # fmt: skip
            continue
        k = _STEP_KERNEL.match(line)
        if k and current:
            heaviest[current]["kernels"].append(
                {"ms": float(k.group(1)), "calls": int(k.group(2)), "group": k.group(3), "name": k.group(4)}
            )
        elif not line.startswith(" "):
            current = None
    side = re.search(r"^# \d+\. .*side by side.*: ([\w, -]+)$", text, re.M)
    if not heaviest or side is None:
        raise ValueError("no '== variant: ... ms a step' block or side-by-side table: not a step profile log")
    rows = []
    for line in text[side.end() :].splitlines()[1:]:
        m = _SIDE_ROW.match(line)
        if m is None:
            break
        cells = [c.split("/") for c in m.group(2).split()]
        rows.append({"group": m.group(1), "name": m.group(3).strip(),
                     "ms": [float(ms) for ms, _ in cells], "calls": [int(n) for _, n in cells]})  # fmt: skip
    return {
        "heaviest": heaviest,
        "side_by_side": {"variants": side.group(1).split(", "), "rows": rows},
        "groups": _group_table(text),
    }


def _group_table(text: str) -> dict:
    """The "ms per step by kernel group" table: {"variants": [...], "ms": {group: [ms per variant]}}."""
    head = re.search(r"^.+: ms per step by kernel group\ngroup +(.+)$", text, re.M)
    if head is None:
        raise ValueError("no 'ms per step by kernel group' table")
    variants, ms = head.group(1).split(), {}
    for line in text[head.end() :].splitlines()[1:]:
        m = re.fullmatch(r"([a-z][a-z -]*?) +((?:[\d.]+ +)*[\d.]+)", line)
        if m is None:
            break
        ms[m.group(1)] = [float(x) for x in m.group(2).split()]
        if len(ms[m.group(1)]) != len(variants):
            raise ValueError(f"unreadable group row: {line!r}")
    return {"variants": variants, "ms": ms}


def serving_gil(text: str) -> dict:
    """benchmarks/probes/serving_gil.py: per flavor, how long registering took and how long the busy main thread
    paused at most while the native library was built: {flavor: {"registered_s", "iterations", "longest_gap_ms",
    "p999_gap_ms", "compiled_s"}}."""
    out = {}
    for m in re.finditer(rf"^(\w+): registered in {_NUM} s; (\d+) iterations while the library was built; longest gap "
                         rf"{_NUM} ms, 99\.9th percentile {_NUM} ms; .*\(compiled in {_NUM} s\)\)$", text, re.M):  # fmt: skip
        out[m.group(1)] = {"registered_s": float(m.group(2)), "iterations": int(m.group(3)),
                           "longest_gap_ms": float(m.group(4)), "p999_gap_ms": float(m.group(5)),
                           "compiled_s": float(m.group(6))}  # fmt: skip
    if not out:
        raise ValueError("no 'FLAVOR: registered in' line: not a serving_gil.py log")
    return {"flavors": out}


def distributed_results(text: str) -> dict:
    """examples/distributed/train.py's "RESULT key=value ..." lines: {mode: {"device", "steps", "loss_first",
    "loss_last", "max_rel_diff", "tol", "keys", "keys_tuned_by_rank"}}, the first line of a mode kept."""
    out: dict = {}
    for m in re.finditer(r"^RESULT mode=(\w+) ranks=\d+ device=(.+?) dtype=.* steps=(\d+) loss ([\d.]+)->([\d.]+) "
                         r"max_rel_diff=(\S+) \(tol (\S+)\) .* keys=(\d+) keys_tuned_by_rank=\[([\d, ]+)\]", text, re.M):  # fmt: skip
        out.setdefault(m.group(1), {
            "device": m.group(2), "steps": int(m.group(3)), "loss_first": float(m.group(4)),
            "loss_last": float(m.group(5)), "max_rel_diff": float(m.group(6)), "tol": float(m.group(7)),
            "keys": int(m.group(8)), "keys_tuned_by_rank": [int(k) for k in m.group(9).split(", ")],
        })  # fmt: skip
    if not out:
        raise ValueError("no 'RESULT mode=' line: not a log of examples/distributed/train.py")
    return {"modes": out}
