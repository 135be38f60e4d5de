"""The call-time rows of the bad-input matrix, walked through native kernels (run in its own process, since
``opsmith.native.use`` replaces the matrix ops' Python implementations for good).

    python tests/native_matrix.py            the rows' own calls (fake tensors: the Meta kernels), through use()
    python tests/native_matrix.py --dry-run  the rows with CPU arguments (error_matrix.CPU_ARGS) through the CUDA
                                             kernels of a library built with -DOPSMITH_DRY_RUN, in a process that
                                             loads only that library
Each prints JSON {case id: "ErrorClass: first line"} on its last line. Rows whose op cannot be native (a
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


def dry_run() -> dict:
    """The CPU-argument rows through a dry-run library's CUDA kernels, in a child that loads only it."""
    import os
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / "libmatrix.so"
        native.build(ops(), lib, dry_run=True)
        names = {kind: em.op(kind).record.op_name.split("::") for kind in {k for k, _ in em.CPU_ARGS.values()}}
        code = (f"import sys, json, torch; sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
                "import error_matrix as em\n"  # its module imports opsmith for the other rows' thunks only
                f"torch.ops.load_library({str(lib)!r})\nout = {{}}\nnames = {names!r}\n"
                "for cid, (kind, args) in em.CPU_ARGS.items():\n"
                "    ns, name = names[kind]\n"
                "    try:\n        getattr(getattr(torch.ops, ns), name)(*args('cpu')); out[cid] = 'no error'\n"
                "    except Exception as e:\n        out[cid] = f'{type(e).__name__}: {str(e).splitlines()[0]}'\n"
                "print(json.dumps(out))")  # fmt: skip
        env = dict(
            os.environ, PYTHONPATH=os.pathsep.join([str(Path(__file__).parents[1]), os.environ.get("PYTHONPATH", "")])
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
        if proc.returncode:
            raise SystemExit(proc.stderr[-4000:])
        return json.loads(proc.stdout.strip().splitlines()[-1])


if __name__ == "__main__":
    print(json.dumps(dry_run() if "--dry-run" in sys.argv else main()))
