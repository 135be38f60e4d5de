#!/usr/bin/env python3
"""The JSON beside a measurement kept as a log: probes that print tables (and runs from before the benchmarks wrote
JSON) are parsed here, so that every figure a page quotes is computed from a file (scripts/figures.py), never
retyped. Each parser reads its probe's printed table exactly; a line it cannot read is an error, not skipped.

    python scripts/log_json.py flce docs/measurements/2026-11-28-flce-gemms-h200.txt
    python scripts/log_json.py rmsnorm-configs docs/measurements/2026-11-28-rmsnorm-bwd-65536-overlap-h200.txt

writes the ``.json`` beside the log.
"""

from __future__ import annotations

import argparse
import json
import re
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
                                       "frac_copy": float(c.group(2)) / 100,
                                       "params": {k: int(v) for k, v in params.items()}})  # fmt: skip
        elif line.strip():
            break  # the probe's notes after its tables
    if not shapes:
        raise ValueError("no shape table found")
    return {"device": head.group(1).strip(), "sms": int(head.group(2)), "shapes": shapes}


PARSERS = {"flce": flce, "rmsnorm-configs": rmsnorm_configs}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("kind", choices=sorted(PARSERS))
    p.add_argument("log", type=Path)
    a = p.parse_args()
    data = PARSERS[a.kind](a.log.read_text())
    data["log"], data["parsed_by"] = a.log.name, a.kind
    a.log.with_suffix(".json").write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {a.log.with_suffix('.json')}")


if __name__ == "__main__":
    main()
