#!/usr/bin/env python3
"""The differential tests' longer run: batches of generated declarations and calls, the Python path against a
native library built from the same records (``tests/differential.py``), on a machine without a GPU.

    python scripts/differential.py                 # 10 batches of 16 ops (~12 minutes on 2 cores)
    python scripts/differential.py --batches 40 --seed 7

Prints one line per batch and every disagreement in full; exits 1 when there is one.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--batches", type=int, default=10)
    ap.add_argument("--ops", type=int, default=16, help="ops per batch (one native library each)")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()

    from differential import compare, run_batch, summary
    from hypothesis import HealthCheck, Phase, given, seed, settings
    from hypothesis import strategies as st

    totals = {"ops": 0, "calls": 0, "accepted": 0, "refused": 0, "launches": 0}
    failures: list[str] = []
    n = [0]

    @seed(args.seed)
    @settings(max_examples=args.batches, deadline=None, database=None, phases=[Phase.generate],
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(data=st.data())
    def batch(data: st.DataObject) -> None:
        n[0] += 1
        t0 = time.perf_counter()
        with tempfile.TemporaryDirectory() as tmp:
            gens, py, nat = run_batch(data, f"dfrun{args.seed}x{n[0]}", args.ops, Path(tmp))
        bad = compare(gens, py, nat)
        s = summary(gens, py)
        for k in totals:
            totals[k] += s[k]
        failures.extend(bad)
        print(f"batch {n[0]}: {s} disagreements={len(bad)} ({time.perf_counter() - t0:.0f} s)", flush=True)

    batch()
    for f in failures:
        print(f"\nDISAGREEMENT {f}")
    print(f"\n{args.batches} batches: {totals}; {len(failures)} disagreements")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
