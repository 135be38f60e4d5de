"""Probe (issue 26, item 1): how long does a background native build stop the registering process's Python?

Registers the RMSNorm ops of one kernel (``cuda`` or ``triton``), then spins a busy loop on the main thread
until ``opsmith.native.wait()`` returns in another thread, recording the longest gap between iterations: the
longest stretch the build's thread (code generation, NVRTC or Triton compiles of the guessed dtypes) held the
GIL. The C++ compile is a process of its own and holds nothing. Runs on CPU with ``OPSMITH_NATIVE=dry-run``
(the same build, compiled with the launch recorded rather than made), or on a GPU machine as is.

    PYTHONPATH=. OPSMITH_NATIVE=dry-run python benchmarks/probes/serving_gil.py cuda|triton
"""

from __future__ import annotations

import sys
import threading
import time

from opsmith import native
from opsmith.ops.rmsnorm import rmsnorm_ops


def main(impl: str) -> None:
    t0 = time.perf_counter()
    fwd, _ = rmsnorm_ops(impl, "probe_gil")  # type: ignore[arg-type]
    registered = time.perf_counter() - t0
    done = threading.Event()
    threading.Thread(target=lambda: (native.wait(), done.set())).start()
    gaps, last = [], time.perf_counter()
    while not done.is_set():
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
        sum(range(200))
    gaps.sort()
    print(f"{impl}: registered in {registered:.2f} s; {len(gaps)} iterations while the library was built; longest "
          f"gap {gaps[-1] * 1e3:.1f} ms, 99.9th percentile {gaps[int(len(gaps) * 0.999)] * 1e3:.3f} ms; serving: "
          f"{fwd.serving} ({fwd.serving_why})")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "cuda")
