"""The generated forms (``forms.py``) on the GPU: compiled Triton kernels through eager, the fake, ``torch.export``
+ ``run_decompositions()``, ``torch.compile`` (Inductor), CUDA graphs and the backward, then the same calls served
by a native library built from the records (``opsmith.native.use``), against the generator's expected values."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.gpu
HERE = Path(__file__).resolve().parent


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: torch.cuda.is_available() is False here")
def test_generated_forms_on_every_gpu_path():
    count = int(os.environ.get("OPSMITH_FORMS_GPU", "12"))
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    env["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    args = ["--device", "cuda", "--first", "0", "--count", str(count), "--calls", "10", "--backend", "inductor",
            "--paths", "eager,fake,export,compile,graph,backward,native"]  # fmt: skip
    out = subprocess.run([sys.executable, str(HERE / "forms_check.py"), *args], capture_output=True, text=True,
                         env=env, timeout=3000)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    rep = json.loads(out.stdout.strip().splitlines()[-1])
    sys.stderr.write(out.stderr[-20000:] if rep["failed"] else "")
    print(f"forms on the GPU: {count} ops, calls per path {rep['calls']}, {rep['failed']} failed")
    assert rep["failed"] == 0, json.dumps(rep["failures"][:12], indent=1)
    served = count - rep["not_native"]  # a Python-function backward stays on the Python path
    assert rep["registered"] == count and served > 0 and rep["calls"]["native eager"] == served * 10, rep
