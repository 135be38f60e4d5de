"""Two GPUs (NCCL, torchrun): the derived DTensor rules and the tuning protocol on real devices, and the
distributed example (FSDP2, tensor parallel with sequence-parallel norms) under torch.compile matching a
one-GPU run of the same seed over 20 steps. Each prints its RESULT line (run with -s to see them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import pythonpath

ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two CUDA GPUs (run on nvidia-h200-x2)"),
]

#: NVLink multicast stays off (the device notes: a program using it can take the host's GPUs out of service).
NO_MULTICAST = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def _torchrun(args: list[str], port: int, **env: str) -> subprocess.CompletedProcess:
    full = dict(os.environ, PYTHONPATH=pythonpath(ROOT), **NO_MULTICAST, **env)
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(port), *args]
    r = subprocess.run(cmd, cwd=ROOT, env=full, capture_output=True, text=True, timeout=900)
    print(r.stdout[-6000:])
    return r


def test_derived_rules_and_tuning_on_two_gpus():
    r = _torchrun([str(ROOT / "tests" / "distributed_check.py")], 29801, OPSMITH_CHECK_DEVICE="cuda",
                  OPSMITH_TUNE_CLAIM_WAIT="0.5", OPSMITH_DISABLE_DISK_CACHE="1")  # fmt: skip
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    assert "rmsnorm: 5 placement cases" in r.stdout and "job tuning:" in r.stdout
    assert "classifier: optional outputs asked for or left out" in r.stdout, r.stdout  # issue 60, item 5


@pytest.mark.parametrize("mode", ["fsdp", "tp"])
def test_example_matches_one_gpu(mode, tmp_path):
    # A fresh cache: every key is decided in this job (none read from an earlier run's disk entries).
    r = _torchrun(["-m", "examples.distributed.train", "--mode", mode], 29802 if mode == "fsdp" else 29803,
                  OPSMITH_CACHE_DIR=str(tmp_path))  # fmt: skip
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-4000:]
    (result,) = [line for line in r.stdout.splitlines() if line.startswith("RESULT")]
    assert "losses=match" in result and "tuning=agree" in result and "compiled=True" in result
    # Each key was tuned once in the job: the keys the ranks tuned themselves add up to the keys decided.
    keys = int(result.split(" keys=")[1].split()[0])
    tuned = [int(t) for t in result.split("keys_tuned_by_rank=[")[1].split("]")[0].split(",")]
    assert keys > 0 and sum(tuned) == keys, result
