"""Registration time the declaration analysis adds (opsmith/analysis), per flavor, over issue 61's table.

Every op of tests/analysis_table.py (correct styles and planted misuses; Liger's where liger-kernel is installed)
is registered in a fresh namespace, its disk cache off so each registration compiles. The analysis
(``check_against_kernel``: reading the kernel, from the compiler's IR made for it (Triton's TTIR; the PTX of one
more NVRTC compile) or its text, the findings, and re-resolving a declaration it changes) is timed inside each
registration, beside the whole registration, and the reading alone inside it. Medians per flavor, and the
analysis's share of the registration. Host work only: a CPU machine measures it; the device is named in the output all the same.

    python benchmarks/bench_analysis.py [--rounds 3] [--out docs/measurements/FILE.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]


def _entries() -> dict:
    import analysis_table as A

    entries = {**A.CORRECT, **{k: v[0] for k, v in A.MISUSES.items()}}
    import importlib.util

    for package, more in (("liger_kernel", A.LIGER_CORRECT), ("fla", A.FLA_CORRECT)):
        if importlib.util.find_spec(package) is not None:
            entries |= more
    return entries


def _round(r: int, entries: dict, timed: list, reading: list) -> list[dict]:
    """Each entry registered once: (flavor, analysis seconds, reading seconds, registration seconds) per op."""
    rows = []
    for k, (name, build) in enumerate(entries.items()):
        before = len(timed)
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            build(f"bench_analysis_r{r}_{k}")
        total = time.perf_counter() - t0
        mine = timed[before:]
        read = reading[before:]
        for (flavor, seconds), (_, where, read_s) in zip(mine, read, strict=True):  # an entry registering several
            rows.append(
                {
                    "entry": name,
                    "flavor": flavor,
                    "analysis_s": seconds,
                    "reading_s": read_s,  # ops shares
                    "read_from": where,
                    "registration_s": total / len(mine),
                }
            )  # its time among them
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    os.environ["OPSMITH_DISABLE_DISK_CACHE"] = "1"  # every registration compiles, as a first one does
    import torch

    import opsmith.analysis as analysis
    from opsmith.torchlib import registration

    timed: list[tuple[str, float]] = []
    reading: list[tuple[str, str, float]] = []
    inner, inner_read = registration.check_against_kernel, analysis.reads_of

    def timing(op, sources, *rest):  # the one call registration makes: the analysis, whole
        t0 = time.perf_counter()
        try:
            return inner(op, sources, *rest)
        finally:
            timed.append((getattr(sources[0], "flavor", "?"), time.perf_counter() - t0))

    def timing_read(source, *rest):  # inside it: reading the kernel (making its IR included)
        t0 = time.perf_counter()
        reads = inner_read(source, *rest)
        reading.append((source.flavor, reads.where if reads else "nothing", time.perf_counter() - t0))
        return reads

    registration.check_against_kernel, analysis.reads_of = timing, timing_read
    entries = _entries()
    rows = [row for r in range(args.rounds) for row in _round(r, entries, timed, reading)]
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else f"CPU ({os.cpu_count()} cores)"
    print(f"analysis time per registration ({device}, {platform.machine()}, {len(entries)} entries x {args.rounds} "
          f"rounds; medians)")  # fmt: skip
    print(
        f"{'flavor':8} {'ops':>5} {'analysis ms':>12} {'reading ms':>11} {'registration ms':>16} {'share':>7}  read from"
    )
    summary = {}
    for flavor in sorted({row["flavor"] for row in rows}):
        mine = [row for row in rows if row["flavor"] == flavor]
        a = statistics.median(row["analysis_s"] for row in mine) * 1e3
        rd = statistics.median(row["reading_s"] for row in mine) * 1e3
        reg = statistics.median(row["registration_s"] for row in mine) * 1e3
        share = statistics.median(row["analysis_s"] / row["registration_s"] for row in mine) * 100
        where = {w: sum(row["read_from"] == w for row in mine) for w in sorted({row["read_from"] for row in mine})}
        summary[flavor] = {"ops": len(mine), "analysis_ms": a, "reading_ms": rd, "registration_ms": reg,
                           "share_pct": share, "read_from": where}  # fmt: skip
        print(
            f"{flavor:8} {len(mine):5d} {a:12.2f} {rd:11.2f} {reg:16.1f} {share:6.1f}%  "
            + ", ".join(f"{w}: {n}" for w, n in where.items())
        )
    if args.out:
        args.out.write_text(json.dumps({"device": device, "summary": summary, "rows": rows}, indent=1))


if __name__ == "__main__":
    main()
