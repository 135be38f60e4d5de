"""Host time of the opsmith Llama variant's step (benchmarks/bench_llama.py --small), and how each op was served
(native library or Python path, and why), after 8 steps; then the same with OPSMITH_NATIVE=off in a child.

    python benchmarks/probes/llama_host.py [--child]
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

import torch

sys.path.insert(0, ".")
from benchmarks.bench_llama import build, config


def main() -> None:
    c = config(True)
    model, loss_of = build("opsmith", c)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    ids = torch.randint(0, c["vocab"], (c["batch"], c["seq"]), device="cuda")
    for k in range(12):
        torch.cuda.synchronize()
        t = time.perf_counter()
        loss_of(ids, ids).backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        print(f"step {k}: {(time.perf_counter() - t) * 1e3:.1f} ms", flush=True)
        if k == 3:
            from opsmith import native

            native.wait(120)
    from opsmith.native import serving

    print(f"OPSMITH_NATIVE={os.environ.get('OPSMITH_NATIVE', 'auto')}")
    print(serving.table())


if __name__ == "__main__":
    main()
    if "--child" not in sys.argv:
        subprocess.run([sys.executable, __file__, "--child"], env=dict(os.environ, OPSMITH_NATIVE="off"), check=False)
