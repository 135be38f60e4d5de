"""Running one of the ``*_interpreter_check.py`` scripts in a child process under ``TRITON_INTERPRET=1`` (a kernel
is interpreted or compiled as its module is imported, so the switch needs a process of its own)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

__all__ = ["run_interpreted"]


def run_interpreted(script: str, timeout: int = 900) -> str:
    """The stdout of ``tests/<script>`` run interpreted, with the repository importable; its stderr in the
    assertion when it fails."""
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    out = subprocess.run([sys.executable, str(HERE / script)], capture_output=True, text=True, env=env,
                         timeout=timeout)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout
