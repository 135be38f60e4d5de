"""Triton kernels in the tutorials' published styles on the GPU: a fused softmax with a ``num_stages`` constexpr
passes ``opsmith check`` (opcheck, compile with dynamic shapes, export); an autotuned matmul matches
torch.matmul and a second process tunes nothing; an accumulating kernel under ``reset_to_zero`` gives one sum
after tuning timed every config many times; heuristics agree with their Python meaning, eagerly, compiled and
from a native library."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import pythonpath

import opsmith as ok
from opsmith import native

pytestmark = pytest.mark.gpu
pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from examples.catalog.published import register_published  # noqa: E402

NS = "t_gpu_pub"
HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def ex(tmp_path_factory):
    os.environ["OPSMITH_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    return register_published(NS)


def test_num_stages_constexpr_passes_check(ex):
    report = ok.check(ex["softmax"], examples=6)
    print(report.table())
    rows = {c: r for c, r, _ in report.rows}
    assert report.ok, report.table()
    for name in ("opcheck", "numerics", "compile-dynamic", "export", "cuda-graph", "stream"):
        assert rows[name] == "pass", report.table()


def test_autotuned_matmul_matches_torch_and_every_config_ran(ex):
    op = ex["matmul"].op
    for m, k, n in ((512, 256, 384), (129, 257, 65)):
        a = torch.randn(m, k, device="cuda", dtype=torch.float16)
        b = torch.randn(k, n, device="cuda", dtype=torch.float16)
        before = op.tuner.tuned_keys
        c = op(a, b)
        torch.testing.assert_close(c, a @ b, atol=2e-2, rtol=2e-2)
        assert op.tuner.tuned_keys == before + 1
        assert len(op.tuner.last_times) == len(op.record.configs)  # every config of the decorator was timed


def test_second_process_tunes_nothing(ex):
    code = (
        "import torch, json\n"
        "from examples.catalog.published import register_published\n"
        f"op = register_published({NS!r})['matmul'].op\n"
        "a = torch.randn(512, 256, device='cuda', dtype=torch.float16)\n"
        "b = torch.randn(256, 384, device='cuda', dtype=torch.float16)\n"
        "torch.testing.assert_close(op(a, b), a @ b, atol=2e-2, rtol=2e-2)\n"
        "print(json.dumps({'tuned': op.tuner.tuned_keys, 'runs': op.tuner.trial_runs}))\n"
    )
    env = dict(os.environ, PYTHONPATH=pythonpath(HERE.parent))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == {"tuned": 0, "runs": 0}


@pytest.mark.parametrize("ta, tb", [(False, False), (False, True), (True, False), (True, True)])
def test_unit_strides_are_compiled_in_for_every_view(ex, ta, tb):
    """As under Triton's JIT, a stride equal to 1 is a constexpr: contiguous and transposed operands each get
    their kernel (the one stride that is 1 compiled in), and each matches torch.matmul."""
    from opsmith.flavors.base import UNIT

    op = ex["matmul"].op
    m, k, n = 256, 192, 320
    a = (
        torch.randn(k, m, device="cuda", dtype=torch.float16).t()
        if ta
        else torch.randn(m, k, device="cuda", dtype=torch.float16)
    )
    b = (
        torch.randn(n, k, device="cuda", dtype=torch.float16).t()
        if tb
        else torch.randn(k, n, device="cuda", dtype=torch.float16)
    )
    torch.testing.assert_close(op(a, b), a @ b, atol=2e-2, rtol=2e-2)
    names = [op.record.params[p].name for (kind, p) in op.variants.spec_layout]
    compiled = [{names[j] for j, v in enumerate(spec) if v == UNIT} for (_, spec) in op.variants.kernels]
    want = {"stride_am" if ta else "stride_ak", "stride_bk" if tb else "stride_bn", "stride_cn"}
    assert want in compiled, compiled


@pytest.mark.parametrize("n", [1000, 4096, 1 << 20])
def test_accumulating_kernel_is_reset_between_tuning_runs(ex, n):
    op = ex["sum"].op
    x = torch.randn(n, device="cuda")
    runs = op.tuner.trial_runs
    got = op(x)
    assert op.tuner.trial_runs > runs + len(op.record.configs)  # tuned now: each config ran several times
    torch.testing.assert_close(got, x.sum().reshape(1), atol=1e-3 * n**0.5, rtol=1e-4)
    torch.testing.assert_close(op(x), x.sum().reshape(1), atol=1e-3 * n**0.5, rtol=1e-4)  # decided: one run


@pytest.mark.parametrize("shape", [(6, 100), (4, 2000), (3, 2000), (2, 17)])
def test_heuristics_eager_compiled_and_native(ex, shape, tmp_path):
    op = ex["rowmax"].op
    x = torch.randn(shape, device="cuda")
    want = ex["rowmax"].reference(x)
    for got in (op(x), torch.compile(op, fullgraph=True, dynamic=True)(x)):
        torch.testing.assert_close(got[0], want[0])
        assert torch.equal(got[1], want[1])


def test_native_library_computes_the_heuristics_and_initial_values(ex, tmp_path):
    ops = [ex[k].op for k in ("rowmax", "sum", "softmax", "matmul")]
    calls = {"rowmax": [(torch.randn(s, device="cuda"),) for s in ((6, 100), (4, 2000), (3, 2000))],
             "sum": [(torch.randn(n, device="cuda"),) for n in (1000, 4096)],
             "softmax": [(torch.randn(33, 1000, device="cuda"),)],
             "matmul": [(torch.randn(512, 256, device="cuda", dtype=torch.float16),
                         torch.randn(256, 384, device="cuda", dtype=torch.float16)),
                        (torch.randn(512, 256, device="cuda", dtype=torch.float16),  # b transposed: its own
                         torch.randn(384, 256, device="cuda", dtype=torch.float16).t())]}  # fmt: skip
    want = {k: [ex[k].op(*a) for a in v] for k, v in calls.items()}  # the JIT ops (tuned here) first
    report = native.build(ops, tmp_path / "libpub.so")
    native.use(ops, report.path)
    for k, v in calls.items():
        for a, w in zip(v, want[k], strict=True):
            got = ex[k].op(*a)
            for g, r in zip(got if isinstance(got, tuple) else (got,), w if isinstance(w, tuple) else (w,),
                            strict=True):  # fmt: skip
                torch.testing.assert_close(g, r, atol=1e-3, rtol=1e-4)
    assert all(op.native == report.path for op in ops)
