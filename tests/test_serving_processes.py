"""Every fresh process at aten's speed (issue 62), on CPU: ``OPSMITH_NATIVE=dry-run`` libraries record their
launches, so which path served each call can be read. Process 1 registers, calls, tunes and builds; process 2,
with the same cache, loads that library from the cache and serves every call of the same shapes natively from the
first (a tuned op whose decisions the tuning cache holds, and an op with a backward), and a tuning key first
decided after its load is served natively after one call, with no rebuild. Before, a served library embedded what
its process had compiled and tuned when it collected (the key changed with what and when), and each new decision
or dtype cost a C++ rebuild (~19 s on an H200) while its calls ran on the Python path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import pythonpath, seeded_cache

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = r"""
import json, sys
import torch
import opsmith as ok
from opsmith import native

process = int(sys.argv[1])
from opsmith.native import serving
serving.QUIET_S = 5.0  # one library for the three ops, however slowly this process registers them (a loaded CPU)
T = "template <int BLOCK> __global__ void kt(const float* x, int n, float* y) {}"
tuned = ok.cuda_kernel_op("t_serving_proc::tuned", ok.KernelSpec(kernel_source=T, kernel_name="kt<{BLOCK}>",
    inputs=[ok.InputDecl("x", torch.float32)], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
    geometry=ok.Elementwise(block=("BLOCK",)), autotune=ok.Autotune([ok.Config({"BLOCK": b}) for b in (128, 256)],
    key=[ok.TuneDim("x", -1)])))
S = ("template <typename T> __global__ void f(const T* x, int n, T* y) {}\n"
     "template <typename T> __global__ void b(const T* g, const T* x, int n, T* dx) {}")
el = dict(extras=[ok.Numel("x")], geometry=ok.Elementwise(block=(128,)))
bwd = ok.cuda_kernel_op("t_serving_proc::bwd", ok.KernelSpec(kernel_source=S, kernel_name="b<{T_x}>",
    inputs=[ok.InputDecl("g"), ok.InputDecl("x")], outputs=[ok.OutputDecl("dx", ok.SameAs("x"))], **el))
fwd = ok.cuda_kernel_op("t_serving_proc::fwd", ok.KernelSpec(kernel_source=S, kernel_name="f<{T_x}>",
    inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], **el),
    backward=ok.Backward(bwd, args=("grad_y", "x"), grads=("x",)))
ops = {"tuned": tuned, "fwd": fwd, "bwd": bwd}

def launched():  # the configs of the tuned op's launches by the library since the last look
    return [r["config"] for r in json.loads(torch.ops.opsmith_dry_run.take()) if "2kt" in r["symbol"]]

def counts():
    return {n: (op.serving_counts().native, op.serving_counts().python_calls) for n, op in ops.items()}

if process == 1:  # as this machine's tuning decided: the keys of 3,000 and 1,000 floats run config 1
    tuned.tuner.record((torch.float32, 4096), None, 1)
    tuned.tuner.record((torch.float32, 1024), None, 1)
    tuned(torch.randn(3000))
    x = torch.randn(3000, requires_grad=True)
    fwd(x).sum().backward()
assert native.wait(600)
out = {"how": {n: [how for _, how, _ in op.serving_counts().rebuilds] for n, op in ops.items()}}
launched()
before = counts()
for _ in range(3):  # the shapes process 1 met, and a key it decided but never called
    tuned(torch.randn(3000)); tuned(torch.randn(1000))
    x = torch.randn(3000, requires_grad=True)
    fwd(x).sum().backward()
after = counts()
out["same shapes"] = {n: [after[n][0] - before[n][0], after[n][1] - before[n][1]] for n in ops}
out["tuned configs"] = sorted(set(launched()))
# A key decided after the load: one call on the Python path (which tunes it on a GPU; a dry run never tunes, so
# the decision is made here as a tuning would) hands the decision to the library; the next calls are native.
tuned.tuner.decisions[(torch.float32, 256)] = 1
before = counts()["tuned"]
for _ in range(3):
    tuned(torch.randn(200))
after = counts()["tuned"]
out["new key"] = [after[0] - before[0], after[1] - before[1], sorted(set(launched()))]
out["libraries"] = {n: len(op.serving_counts().rebuilds) for n, op in ops.items()}
print(json.dumps(out))
"""


def _process(k: int, cache: Path) -> dict:
    env = dict(os.environ, PYTHONPATH=pythonpath(ROOT), OPSMITH_CACHE_DIR=str(cache), OPSMITH_NATIVE="dry-run")
    env.pop("OPSMITH_DISABLE_DISK_CACHE", None)
    r = subprocess.run([sys.executable, "-c", _SCRIPT, str(k)], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_the_next_process_loads_the_library_and_serves_every_call_natively(tmp_path):
    cache = seeded_cache(tmp_path)
    first = _process(1, cache)
    assert first["how"] == {"tuned": ["compiled"], "fwd": ["compiled"], "bwd": ["compiled"]}, first
    second = _process(2, cache)
    assert second["how"] == {"tuned": ["from the cache"], "fwd": ["from the cache"], "bwd": ["from the cache"]}, second
    for out in (first, second):
        # every call native: the tuned op's two keys (6 calls, config 1 each), the forward and its backward
        assert out["same shapes"] == {"tuned": [6, 0], "fwd": [3, 0], "bwd": [3, 0]}, out
        assert out["tuned configs"] == [1], out
        assert out["new key"] == [2, 1, [1]], out  # one call on the Python path, then native: config 1
        assert out["libraries"] == {"tuned": 1, "fwd": 1, "bwd": 1}, out  # no rebuild
