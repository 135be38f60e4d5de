"""Every form of a declaration on every path, with values (``forms.py``, ``forms_check.py``): generated Triton ops
(optional inputs at any position given or absent, heuristics over optional tensors and int scalars, ``Present``,
dtype sets in every collection form, ``DtypeOf`` over a bool input, one to three outputs with any mix of ``init=``,
named and grouped dimensions, shared and separate ``Stride`` tuples, tuned grids with 1-D and 2-D keys, the three
compile modes, a backward) run in Triton's interpreter through eager, the fake, ``torch.export`` +
``run_decompositions()`` and ``torch.compile``, against expected values computed from the generator's own
description; invalid calls are refused alike on every path before a launch. Their call plans run as dry runs
too (compiled for the GPU, not launched): the Python path's and a native library's, which must agree call for
call, launch exactly when the grid has blocks, and leave each ``init=`` output holding its init.

The fast tier runs a few forms derandomized (fixed seeds); ``scripts/test --all`` runs many more and compiles a
slice with Inductor; ``python tests/forms_check.py --first N --count M`` runs any range. A failure prints each
failing op and call as a script that reruns it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from interpreted import run_interpreted_args
from tiers import DEEP

HERE = Path(__file__).resolve().parent

pytest.importorskip("triton", reason="the generated kernels are Triton kernels (the test extra installs Triton)")


def _run(args: list[str]) -> dict:
    out = run_interpreted_args("forms_check.py", args, timeout=3000)
    return json.loads(out.strip().splitlines()[-1])


def _assert_clean(rep: dict, stderr_hint: str) -> None:
    assert rep["failed"] == 0, f"{rep['failed']} failures: {json.dumps(rep['failures'][:12], indent=1)}\n{stderr_hint}"


def test_generated_forms_agree_with_their_meaning_on_every_path():
    count = 24 if DEEP else 5
    rep = _run(["--first", "0", "--count", str(count), "--calls", "12"])
    _assert_clean(rep, "rerun: TRITON_INTERPRET=1 python tests/forms_check.py --first 0 --count N (snippets on stderr)")
    assert rep["registered"] == count
    # every path ran every call; some calls are refusals (one per mistake kind), the rest values
    assert all(rep["calls"][p] == count * 12 for p in ("eager", "fake", "export", "compile")), rep["calls"]


@pytest.mark.slow
def test_generated_forms_compiled_by_inductor():
    rep = _run(["--first", "100", "--count", "4", "--calls", "8", "--paths", "eager,compile", "--backend", "inductor"])
    _assert_clean(rep, "rerun: TRITON_INTERPRET=1 python tests/forms_check.py --first 100 --count 4 --backend inductor")


def _dry(args: list[str]) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    out = subprocess.run([sys.executable, str(HERE / "forms_check.py"), "--dry", *args], capture_output=True,
                         text=True, env=env, timeout=3000)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_generated_forms_call_plans_without_launching():
    rep = _dry(["--first", "0", "--count", "6", "--calls", "12", "--no-native"])
    _assert_clean(rep, "rerun: python tests/forms_check.py --dry --first 0 --count 6")
    assert rep["registered"] == 6 and rep["calls"]["python-dry"] == 72 and rep["calls"]["python-meta"] == 72


@pytest.mark.slow
def test_generated_forms_served_by_a_native_library_agree():
    """The Python path's dry run against a dry-run native library built from the same records: CPU calls
    (refusals, launches, init bytes) and meta calls (the library's Meta kernel against the Python fake)."""
    count = 12 if DEEP else 8
    rep = _dry(["--first", "0", "--count", str(count), "--calls", "12"])
    _assert_clean(rep, f"rerun: python tests/forms_check.py --dry --first 0 --count {count}")
    # a Python-function backward cannot be native: those forms stay on the Python path (counted)
    assert rep["calls"]["python-dry"] == count * 12
    assert rep["calls"]["native-dry"] == (count - rep["not_native"]) * 12 and rep["not_native"] < count
    # the same calls on meta tensors: the Python fake against the library's Meta kernel
    assert rep["calls"]["native-meta"] == rep["calls"]["native-dry"], rep["calls"]
