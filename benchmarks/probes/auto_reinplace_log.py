"""Why did the compile="auto" Llama variant log no reinplacing decision (2026-11-28: 0 of the 211 nodes its
default twin logged)? One small Llama step compiled per variant, each in its own process: every record Inductor's
reinplace logger emits is counted raw (any wording), beside what ``watch_reinplacing`` parses, and the logger's
effective level is read before the compile, after the first step and after the last.

    python benchmarks/probes/auto_reinplace_log.py [--variants opsmith-compile,opsmith-auto-compile] [--explain]
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

LOGGER = "torch._inductor.fx_passes.reinplace"


def one(variant: str, explain_first: bool) -> dict:
    import torch

    from benchmarks.bench_llama import build, config, explain
    from benchmarks.step_profile import watch_reinplacing

    c = config(small=True)
    _model, loss_of = build(variant, c)
    ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), device="cuda")
    if explain_first:  # as bench_llama.run_one does: Dynamo's explain (after a reset) before the compile
        explain(loss_of, ids)
    raw: dict = {"records": 0, "first": [], "whole": []}

    class Raw(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            raw["records"] += 1
            if len(raw["first"]) < 3:
                raw["first"].append(record.getMessage()[:300])

    class Whole(logging.Handler):  # opsmith's own reasons for keeping an op whole under torch.compile
        def emit(self, record: logging.LogRecord) -> None:
            if "kept whole" in record.getMessage() and len(raw["whole"]) < 5:
                raw["whole"].append(record.getMessage()[:300])

    logging.getLogger("opsmith").addHandler(Whole())
    logging.getLogger("opsmith").setLevel(logging.INFO)
    log = logging.getLogger(LOGGER)
    missed = watch_reinplacing()
    log.addHandler(Raw())
    levels = {"before": log.getEffectiveLevel()}
    step = torch.compile(loss_of, fullgraph=True)
    for k in range(2):
        step(ids, ids).backward()
        levels[f"after step {k}"] = log.getEffectiveLevel()
    torch.cuda.synchronize()
    return {"variant": variant, "raw": raw, "parsed_logged": missed["logged"], "not_reinplaced": missed["tensors"],
            "levels": levels, "handlers": len(log.handlers), "disabled": log.disabled}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", default="opsmith-compile,opsmith-auto-compile")
    ap.add_argument("--explain", action="store_true", help="run bench_llama's explain() first, as the bench does")
    ap.add_argument("--one", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.one:
        print("RESULT " + json.dumps(one(a.one, a.explain)))
        return
    for variant in a.variants.split(","):
        flags = ["--explain"] if a.explain else []
        run = subprocess.run([sys.executable, __file__, "--one", variant, *flags], capture_output=True, text=True)
        lines = [line for line in run.stdout.splitlines() if line.startswith("RESULT ")]
        if not lines:
            print(f"{variant}: failed (rc {run.returncode})\n{run.stderr[-3000:]}")
            continue
        r = json.loads(lines[-1].removeprefix("RESULT "))
        print(f"{variant}: {r['raw']['records']} records from {LOGGER}, {r['parsed_logged']} parsed, "
              f"{r['not_reinplaced']} not reinplaced; levels {r['levels']}; handlers {r['handlers']}, "
              f"disabled {r['disabled']}")  # fmt: skip
        for text in r["raw"]["first"]:
            print(f"    {text}")
        for text in r["raw"]["whole"]:
            print(f"    opsmith: {text}")


if __name__ == "__main__":
    main()
