"""The native side of the differential tests, in a process that loads only the library (no opsmith).

    python tests/diff_native.py LIB CASES.json    prints JSON {case id: outcome} on its last line

CASES: [{"id", "op", "call": [arg specs], "pointers": [kernel parameter positions holding pointers]}].
A call on CPU tensors runs the library's CUDA kernel (built with -DOPSMITH_DRY_RUN, so it records its launch);
one on meta tensors runs its Meta kernel.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch
from diff_calls import build_args, outcome


def main(lib: str, cases_file: str) -> dict:
    torch.ops.load_library(lib)
    take = torch.ops.opsmith_dry_run.take
    out = {}
    for case in json.loads(Path(cases_file).read_text()):
        ns, name = case["op"].split("::")
        op = getattr(getattr(torch.ops, ns), name).default
        args = build_args(case["call"])
        meta = any(a.get("device") == "meta" for a in case["call"] if a["t"] == "tensor")
        out[case["id"]] = outcome(op, args, case["pointers"], None if meta else take)
    return out


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2])
    print(json.dumps({"opsmith_imported": "opsmith" in sys.modules, "cases": result}))
