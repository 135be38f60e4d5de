#!/usr/bin/env python3
"""Planted bugs: does the test suite catch each one?

Each mutant is one textual change to the library (a guard removed, a key part dropped, a refusal made
lenient), applied to a copy of the repository; the tests meant to catch it run there, and the mutant is
*caught* when they fail. The report lists every mutant and the survival rate (survivors / valid mutants).
A mutant whose text no longer matches the source is reported as stale, never silently skipped.

    python scripts/mutants.py            # the CPU mutants (~50 minutes on 2 cores)
    python scripts/mutants.py --gpu      # also the ones only a GPU can catch (run on the GPU machine)
    python scripts/mutants.py -k cache   # the mutants whose id contains "cache"

The mutants (``scripts/mutant_cases.py``, ``scripts/mutant_cases_plan.py``) cover the first adversarial review's sixteen defects and its blind
spots, the binding and layout rules (issues 14 and 17), and the third review (issue 22): both printers of the
call plan, the native generator, size expressions, the tuning protocol, the sharding rules, native.use, the CLI;
and named dimensions (issue 23): ties in every printer, preconditions, alignment, output ranks, SameAs, the
sharding of names and of max with a backward; ``scripts/mutant_cases_49.py``: issue 49's int widths, dtype
constexprs, shared memory expressions, backwards over optional inputs, template types of optional inputs and
the boundary table's written outcomes.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))


from mutant_cases import MUTANTS as FIRST  # noqa: E402
from mutant_cases import Mutant  # noqa: E402
from mutant_cases_49 import MUTANTS as ROUND3  # noqa: E402
from mutant_cases_check import MUTANTS as CHECK  # noqa: E402
from mutant_cases_plan import MUTANTS as PLAN  # noqa: E402

MUTANTS = [*FIRST, *PLAN, *CHECK, *ROUND3]


def _copy_repo(dst: Path) -> None:
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True,
                           check=True).stdout.split()  # fmt: skip
    for f in files:
        src = ROOT / f
        if src.is_file():
            (dst / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / f)


def run(m: Mutant, timeout: int) -> tuple[str, float, str]:
    """(verdict, seconds, detail): verdict in caught / SURVIVED / stale / invalid / timeout."""
    with tempfile.TemporaryDirectory(prefix=f"mutant-{m.id}-") as tmp:
        work = Path(tmp)
        _copy_repo(work)
        path = work / m.file
        text = path.read_text()
        if text.count(m.old) != 1:
            return "stale", 0.0, f"the text to change occurs {text.count(m.old)} times in {m.file}"
        path.write_text(text.replace(m.old, m.new))
        compiled = subprocess.run([sys.executable, "-m", "py_compile", str(path)], capture_output=True, text=True)
        if compiled.returncode:
            return "invalid", 0.0, compiled.stderr.strip().splitlines()[-1]
        env = {**os.environ, "PYTHONPATH": str(work), "OPSMITH_CACHE_DIR": str(work / ".cache")}
        t0 = time.perf_counter()
        try:
            out = subprocess.run([sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *m.tests],
                                 cwd=work, env=env, capture_output=True, text=True, timeout=timeout)  # fmt: skip
        except subprocess.TimeoutExpired:
            return "timeout", time.perf_counter() - t0, f"no verdict in {timeout} s"
        dt = time.perf_counter() - t0
        last = (out.stdout.strip().splitlines() or [""])[-1]
        if out.returncode == 0:
            return "SURVIVED", dt, last
        failed = next((line for line in out.stdout.splitlines() if line.startswith("FAILED")), last)
        return "caught", dt, failed[:110]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", action="store_true", help="also run the mutants only a GPU can catch")
    ap.add_argument("-k", action="append", default=[], help="only mutants whose id contains this (repeatable)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per mutant")
    args = ap.parse_args()
    chosen = [m for m in MUTANTS if (not args.k or any(k in m.id for k in args.k)) and (args.gpu or not m.gpu)]
    verdicts: dict[str, int] = {}
    print(f"{'mutant':38} {'verdict':9} {'s':>6}  detail")
    for m in chosen:
        verdict, dt, detail = run(m, args.timeout)
        verdicts[verdict] = verdicts.get(verdict, 0) + 1
        print(f"{m.id:38} {verdict:9} {dt:6.1f}  {detail}", flush=True)
    valid = sum(verdicts.get(v, 0) for v in ("caught", "SURVIVED", "timeout"))
    survived = verdicts.get("SURVIVED", 0) + verdicts.get("timeout", 0)
    print(f"\n{valid} valid mutants: {verdicts.get('caught', 0)} caught, {survived} survived "
          f"(survival rate {survived / max(valid, 1):.1%}); {verdicts.get('stale', 0)} stale, "
          f"{verdicts.get('invalid', 0)} invalid")  # fmt: skip
    return 1 if survived or verdicts.get("stale") or verdicts.get("invalid") else 0


if __name__ == "__main__":
    sys.exit(main())
