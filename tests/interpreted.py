"""Running code in a child process: one of the ``*_interpreter_check.py`` scripts under ``TRITON_INTERPRET=1`` (a
kernel is interpreted or compiled as its module is imported, so the switch needs a process of its own), or a
snippet that loads a native library the test process must not (``child_json``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

__all__ = ["child_json", "run_interpreted", "run_interpreted_args"]


def run_interpreted(script: str, timeout: int = 900) -> str:
    """The stdout of ``tests/<script>`` run interpreted, with the repository importable; its stderr in the
    assertion when it fails."""
    return run_interpreted_args(script, [], timeout)


def run_interpreted_args(script: str, args: list[str], timeout: int = 900) -> str:
    """``run_interpreted`` with command-line arguments; a failing run's stderr (its last 3000 characters) goes
    to this process's stderr too, where pytest shows it."""
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}  # fmt: skip
    out = subprocess.run([sys.executable, str(HERE / script), *args], capture_output=True, text=True, env=env,
                         timeout=timeout)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    if "FAIL " in out.stderr:
        sys.stderr.write(out.stderr[-20000:])
    return out.stdout


def child_json(code: str) -> object:
    """The JSON ``code`` prints on its last line, run by this Python with the repository and ``tests/`` importable
    (``sys.argv[1]`` is ``tests/``); its stderr in the assertion when it fails."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", code, str(HERE)], capture_output=True, text=True, env=env,
                         timeout=900)  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])
