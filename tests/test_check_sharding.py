"""The sharding row of ``opsmith check`` (issue 38, item 5), on CPU through Triton's interpreter, which runs the
kernels: for every placement the derived rule offers, the kernel runs per simulated shard (2 and 3, uneven) and
is compared with the unsharded call. A gather whose kernel bounds its table read by ``Numel(idx)`` (the extra used
twice) shows the derived rule wrong: held back by default (the row passes and says it would be wrong), a FAIL
naming the placement and the fix when the op asks for it with ``sharding="derive"``; a tied elementwise op's
placements all match."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import pythonpath

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = r"""
import sys, warnings, torch, triton, triton.language as tl, opsmith as ok

@triton.jit
def gather_kernel(table_ptr, idx_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    i = tl.load(idx_ptr + offs, mask=m, other=0)
    tl.store(out_ptr + offs, tl.load(table_ptr + i, mask=m & (i < n), other=0.0), mask=m)

@triton.jit
def scale_kernel(x_ptr, y_ptr, n, out_ptr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=m) * tl.load(y_ptr + offs, mask=m), mask=m)

def gather(name, **kw):
    return ok.triton_op(f"t_shard_check::{name}", gather_kernel, inputs=[ok.InputDecl("table", dtype=torch.float32), ok.InputDecl("idx", dtype=torch.int64)],
        outputs=[ok.OutputDecl("out", ok.SameAs("idx"), dtype_from="table")], extras=[ok.Numel("idx", name="n")],
        geometry=ok.Elementwise(block=("BLOCK",)), autotune=ok.Autotune([ok.Config({"BLOCK": 64})]), **kw)

mul = ok.triton_op("t_shard_check::mul", scale_kernel, inputs=[ok.InputDecl("x", dtype=torch.float32), ok.InputDecl("y", shape=ok.SameAs("x"), dtype=torch.float32)],
    outputs=[ok.OutputDecl("out", ok.SameAs("x"))], extras=[ok.Numel("x", name="n")],
    geometry=ok.Elementwise(block=("BLOCK",)), autotune=ok.Autotune([ok.Config({"BLOCK": 64})]))
gin = lambda s, d, dev: (torch.randn(s[0], device=dev), torch.randint(0, max(s[0], 1), (s[0],), device=dev))
gref = lambda t, i: t[i]
cases = {"gather": ok.CheckCase(gather("gather"), gin, reference=gref, shapes=[(16,)]),
         "gather_derive": ok.CheckCase(gather("gather_derive", sharding="derive"), gin, reference=gref, shapes=[(16,)]),
         "mul": ok.CheckCase(mul, lambda s, d, dev: (torch.randn(s, device=dev), torch.randn(s, device=dev)), reference=torch.mul, shapes=[(4, 6), (5, 7)])}
for name, case in cases.items():
    r = {c: (res, d) for c, res, d in ok.check(case, device="cpu", only=["numerics", "sharding"], examples=3).rows}
    print(name, "|", r["numerics"][0], "|", r["sharding"][0], "|", r["sharding"][1][:400], "|", r["numerics"][1][:300])
"""


def test_the_sharding_row_runs_the_kernel_on_simulated_shards():
    pytest.importorskip("triton", reason="Triton is not installed here: pip install '.[triton]'")
    env = {**os.environ, "TRITON_INTERPRET": "1", "OPSMITH_NATIVE": "off", "PYTHONPATH": pythonpath(ROOT)}
    r = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    rows = {line.split(" | ")[0]: line.split(" | ")[1:4] for line in r.stdout.strip().splitlines() if " | " in line}
    numerics, result, detail = rows["gather"]
    assert (numerics, result) == ("pass", "pass"), rows["gather"]
    assert "0 derived placement(s)" in detail and "held back (the declaration cannot justify them)" in detail
    assert "inputs ['R', 'S(0)'] -> outputs ['S(0)'] (would be wrong: 2 shards: output 0 differs" in detail
    numerics, result, detail = rows["gather_derive"]
    assert result == "FAIL" and "placement inputs ['R', 'S(0)'] -> outputs ['S(0)']: 2 shards" in detail, detail
    assert "Fix: tie the inputs' axes with named dimensions" in detail
    numerics, result, detail = rows["mul"]
    assert (numerics, result) == ("pass", "pass") and detail.startswith("2 derived placement(s) x 2 and 3"), detail
