"""Probe (issue 39, item 4): where the CUDA C++ RMSNorm backward at (2048, 65536) bf16 loses to a copy. Forces
the fastest config of ``rmsnorm_bwd_cluster_count.py`` on an H100 (512 threads, clusters of 8 at 1 block per
SM, 14 clusters), then runs it and a copy of x once each inside ``torch.cuda.profiler`` start/stop, so

    ncu --profile-from-start off --section SpeedOfLight --section MemoryWorkloadAnalysis \\
        --section WarpStateStats --section Occupancy python benchmarks/probes/rmsnorm_bwd_65536_ncu.py

compares their DRAM throughput, bytes and stalls.
"""

from __future__ import annotations

import os

os.environ["OPSMITH_AUTOTUNE"] = "0"
os.environ["OPSMITH_NATIVE"] = "0"
import torch

from opsmith.declare.expr import evaluate, parse_size
from opsmith.ops.rmsnorm import _partial_rows, rmsnorm_ops

WANT = {"THREADS": 512, "MAXV": 4, "MINB": 1, "STAGED": 2, "CLUSTER": 8, "SHORT": 2}


def main() -> None:
    _, bwd = rmsnorm_ops("cuda", ns="ncuprobe")
    bwd.tuner.default = next(c for c, cfg in enumerate(bwd.record.configs)
                             if all(cfg["params"][k] == v for k, v in WANT.items()))  # fmt: skip
    torch.manual_seed(0)
    x = torch.randn(2048, 65536, device="cuda", dtype=torch.bfloat16)
    w = (1 + 0.25 * torch.randn(65536, device="cuda")).to(torch.bfloat16)
    dy = torch.randn_like(x)
    rows = evaluate(parse_size(_partial_rows("cuda"), {"x": "i0"}), {"i0": x})
    partial = torch.empty(rows, 65536, device="cuda", dtype=torch.float32)
    for _ in range(3):
        bwd(dy, x, w, 1e-6, partial)
        x.clone()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    bwd(dy, x, w, 1e-6, partial)
    x.clone()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    print(f"config {bwd.record.configs[bwd.tuner.default]['params']}, {rows} partial rows")


if __name__ == "__main__":
    main()
