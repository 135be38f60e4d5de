"""The native side of the differential tests, in a process that loads only the library (no opsmith).

    python tests/diff_native.py LIB CASES.json    prints JSON {case id: outcome} on its last line

CASES: [{"id", "op", "call": [arg specs], "pointers": [kernel parameter positions holding pointers], "written",
"values"}]. A call on CPU tensors runs the library's CUDA kernel (built with -DOPSMITH_DRY_RUN, so it records
its launch); one on CUDA tensors launches it (a library built without); one on meta tensors runs the Meta kernel.
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
    take = getattr(torch.ops.opsmith_dry_run, "take", None) if hasattr(torch.ops, "opsmith_dry_run") else None
    out = {}
    for case in json.loads(Path(cases_file).read_text()):
        ns, name = case["op"].split("::")
        op = getattr(getattr(torch.ops, ns), name).default
        args = build_args(case["call"])
        device = next((a["device"] for a in case["call"] if a["t"] == "tensor"), "cpu")
        if device == "cuda":
            out[case["id"]] = outcome(
                op, args, written=tuple(case.get("written", ())), values=case.get("values", False)
            )
        else:
            inits = tuple(case.get("inits", ())) if device == "cpu" else ()
            out[case["id"]] = outcome(op, args, case["pointers"], None if device == "meta" else take, inits=inits)
    return out


if __name__ == "__main__":
    result = main(sys.argv[1], sys.argv[2])
    print(json.dumps({"opsmith_imported": "opsmith" in sys.modules, "cases": result}))
