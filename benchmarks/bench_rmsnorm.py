"""The RMSNorm lab benchmark (see ``opsmith/rmsnorm_bench.py``): every implementation at (8, 4096, 4096) bf16
and over a sweep of hidden sizes; prints tables and a summary, writes JSON and a PNG plot.

    python benchmarks/bench_rmsnorm.py [--out bench-results/rmsnorm.json] [--quick]
"""

import sys

from opsmith.rmsnorm_bench import main

if __name__ == "__main__":
    sys.exit(main())
