"""Seconds to compile a native library, with torch's headers read as text and precompiled
(``OPSMITH_NATIVE_PCH``, opsmith/native/pch.py), side by side in one run on this machine.

Each round compiles the same dry-run libraries (the examples catalog's first op; its first four) into an empty
cache twice: with the mode off, and with it on after the header is made (that making timed on its own, with the
size it takes on disk). Medians over rounds; a CPU machine with no GPU is enough (dry-run libraries compile
everything but the launch, the same C++ a GPU library compiles).

    python benchmarks/bench_native_build.py [--rounds 3] [--out docs/measurements/FILE.json]
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _compile(build, source: str, images: list, out: Path) -> float:
    t0 = time.perf_counter()
    cached, _ = build.compile_library(source, images, out, dry_run=True)
    assert not cached, "a cache hit is no compile: each timing needs an empty cache"
    return time.perf_counter() - t0


def _round(build, sources: dict, work: Path) -> dict:
    """One round: each library without the header, then the header made, then each library with it."""
    from opsmith.native import pch

    times: dict = {}
    os.environ["OPSMITH_NATIVE_PCH"] = "off"
    for name, (src, images) in sources.items():
        os.environ["OPSMITH_CACHE_DIR"] = str(Path(tempfile.mkdtemp(dir=work)))
        times[f"{name}, text"] = _compile(build, src, images, work / "x.so")
    os.environ["OPSMITH_NATIVE_PCH"] = "on"
    os.environ["OPSMITH_CACHE_DIR"] = cache = str(Path(tempfile.mkdtemp(dir=work)))
    pch._VERIFIED.clear()
    first = next(iter(sources.values()))[0]
    t0 = time.perf_counter()
    made = build._precompiled(first, build.compiler(), "aten", True)
    times["making the header"] = time.perf_counter() - t0
    assert made is not None, "GCC made no precompiled header"
    times["header MB"] = sum(f.stat().st_size for f in made[1].iterdir()) / 1e6
    for name, (src, images) in sources.items():
        os.environ["OPSMITH_CACHE_DIR"] = cache  # the header's cache, each library a miss in it
        times[f"{name}, precompiled"] = _compile(build, src + f"\n// round {time.time()}\n", images, work / "x.so")
    return times


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("bench-results/native_build.json"))
    args = ap.parse_args()
    import torch

    from examples.catalog.basic import register_all

    build = importlib.import_module("opsmith.native.build")
    ops = [c.op for _, c in sorted(register_all("bench_nb").items())]
    sources = {}
    for n in (1, 4):
        src, images, _, skipped = build.build_source(ops[:n], ["sm_90"])
        assert not skipped, skipped
        sources[f"{n} op{'s' if n > 1 else ''}"] = (src, images)
    rounds = []
    with tempfile.TemporaryDirectory() as work:
        for r in range(args.rounds):
            rounds.append(_round(build, sources, Path(work)))
            print(f"round {r + 1}: " + ", ".join(f"{k} {v:.1f}" for k, v in rounds[-1].items()), flush=True)
    medians = {k: statistics.median(r[k] for r in rounds) for k in rounds[0]}
    result = {"what": "native library compile seconds, torch's headers as text vs precompiled",
              "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, no GPU needed",
              "torch": torch.__version__, "compiler": build._compiler_version(build.compiler()),
              "rounds": rounds, "median": medians}  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    print(f"\n{'library':<10} {'text s':>8} {'precompiled s':>14} {'speedup':>8}")
    for name in sources:
        text, pre = medians[f"{name}, text"], medians[f"{name}, precompiled"]
        print(f"{name:<10} {text:8.1f} {pre:14.1f} {text / pre:7.2f}x")
    print(f"making the header once: {medians['making the header']:.1f} s, {medians['header MB']:.0f} MB; "
          f"medians of {args.rounds} rounds, {result['torch']}, {result['compiler']}; written to {args.out}")  # fmt: skip


if __name__ == "__main__":
    main()
