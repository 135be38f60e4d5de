"""The call-time rows of the bad-input matrix, walked through native kernels (run in its own process, since
``opsmith.native.use`` replaces the matrix ops' Python implementations for good).

    python tests/native_matrix.py            the rows' own calls (fake tensors: the Meta kernels), through use()

(The rows with CPU arguments go through every path's CUDA kernels in ``contract_paths.py``.) It prints JSON {case id: "ErrorClass: first line"} on its last line. Rows whose op cannot be native (a
``Custom`` geometry, a Python backward) are reported as "not native"; rows needing hardware missing here, or
taking CPU arguments only (a row the Meta kernel cannot show), as "not here".
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import error_matrix as em

from opsmith import native

# The op kinds behind the call rows, and the rows whose op cannot be native.
KINDS = (
    "plain",
    "shaped",
    "inplace",
    "flat768",
    "rows",
    "like",
    "scalar",
    "strided",
    "biggrid",
    "lowgrid",
    "divgrid",
    "widegrid",
    *(f"shaped:{k}" for k in ("mm", "axpby", "sameas", "vec", "heads", "repeat", "big", "like")),
)
# DTensor rows: DTensor's dispatch (Python) refuses before any kernel, native or not, is reached.
NOT_NATIVE = {"custom-float-grid": "Custom geometry", "double-backward": "Python backward",
              "dtensor-no-rule": "DTensor rule", "dtensor-inplace": "DTensor rule"}  # fmt: skip


def ops() -> list:
    """The matrix's call-time ops (also what test_native.py builds with `python -m opsmith build`)."""
    return [em.op(k) for k in KINDS]


def with_refusals() -> list:
    """The matrix ops and one that cannot be native (a Custom geometry): ``opsmith build`` lists the refusal."""
    return [*ops(), em.op("floatgrid")]


def main() -> dict:
    native.use(ops())
    out = {}
    for cid, when, _, thunk, _cls, where in em.cases():
        if when != "call":
            continue
        if cid in NOT_NATIVE:
            out[cid] = "not native"
            continue
        if where == "nodriver" or (where == "gpu" and not em.runs_here(cid)) or cid.startswith("grid-"):
            out[cid] = "not here"
            continue
        try:
            thunk()
            out[cid] = "no error"
        except Exception as e:  # what the native kernel raised, compared with the Python path's text
            out[cid] = f"{type(e).__name__}: {str(e).splitlines()[0]}"
    return out


if __name__ == "__main__":
    print(json.dumps(main()))
