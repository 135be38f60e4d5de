"""The autotuner on CPU: choice under a fake timer, memory and disk decisions, stale and corrupt entries,
concurrent writers, the environment switches, and the debug comparison."""

import json
import logging
import multiprocessing as mp
import os

import pytest
import torch

import opsmith as ok
from opsmith import env
from opsmith.cache import DiskCache
from opsmith.errors import LaunchError
from opsmith.tuning.autotune import Tuner, pow2

CONFIGS = [{"params": {"BLOCK": b}, "num_warps": None, "num_stages": None} for b in (64, 128, 256)]


def fake_timer(times):
    """A timer that reports ``times[c]`` ms for config c (read from the run it is handed)."""
    state = {}

    def run_and_time(run, restore):
        restore()
        run()
        return [times[state["c"]]] * 5

    return state, run_and_time


def make_tuner(tmp_path, monkeypatch, times, identity=None, default=0):
    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path))
    state, timer = fake_timer(times)
    t = Tuner("t_at::op", identity or {"op": "t_at::op", "src": "abc"}, CONFIGS, default, timer=timer)
    runs = []

    def run(c):
        state["c"] = c
        runs.append(c)

    return t, run, runs


def test_pow2_buckets():
    assert [pow2(n) for n in (0, 1, 2, 3, 4, 5, 1000, 1024, 1025)] == [1, 1, 2, 4, 4, 8, 1024, 1024, 2048]


def test_fastest_config_wins_and_is_remembered(tmp_path, monkeypatch):
    t, run, runs = make_tuner(tmp_path, monkeypatch, {0: 3.0, 1: 1.0, 2: 2.0})
    assert t.decide((torch.float32, 1024), None, run) == 1
    assert sorted(set(runs)) == [0, 1, 2]
    runs.clear()
    assert t.decide((torch.float32, 1024), None, run) == 1 and runs == []  # memory
    assert t.decisions[(torch.float32, 1024)] == 1


def test_near_ties_go_to_an_interleaved_runoff(tmp_path, monkeypatch):
    """Configs within 3% of the first pass's winner are timed again; the runoff's medians decide, and a
    config outside the margin is not timed again."""
    monkeypatch.setenv("OPSMITH_CACHE_DIR", str(tmp_path))
    passes: dict[int, int] = {}
    first = {0: 1.02, 1: 1.00, 2: 2.00}  # 1 wins the first pass, 0 is within 3%
    later = {0: 0.90, 1: 1.00, 2: 2.00}  # but 0 is faster in the runoff
    seen = []

    def timer(run, restore):
        restore()
        run()
        c = seen[-1]
        passes[c] = passes.get(c, 0) + 1
        return [(first if passes[c] == 1 else later)[c]] * 5

    t = Tuner("t_at::op", {"op": "t_at::op", "src": "runoff"}, CONFIGS, 0, timer=timer)
    assert t.decide((torch.float32, 4096), None, seen.append) == 0
    assert passes == {0: 4, 1: 4, 2: 1}
    assert t.last_times[0] == 0.90 and t.last_times[2] == 2.00


def test_second_process_reads_disk_and_makes_no_runs(tmp_path, monkeypatch):
    t, run, _ = make_tuner(tmp_path, monkeypatch, {0: 3.0, 1: 1.0, 2: 2.0})
    t.decide((torch.float16, 64), None, run)
    fresh, run2, runs2 = make_tuner(tmp_path, monkeypatch, {0: 0.1, 1: 9.0, 2: 9.0})  # would pick 0 if it tuned
    assert fresh.decide((torch.float16, 64), None, run2) == 1 and runs2 == []
    entry = json.loads(DiskCache(tmp_path, "tuning").get(t.disk_key((torch.float16, 64), None))[1])
    assert entry["winner"] == 1 and entry["config"] == CONFIGS[1] and set(entry["times_ms"]) == {"0", "1", "2"}


@pytest.mark.parametrize("change", ["identity", "key"])
def test_each_key_part_separates_decisions(tmp_path, monkeypatch, change):
    t, run, _ = make_tuner(tmp_path, monkeypatch, {0: 3.0, 1: 1.0, 2: 2.0})
    t.decide((torch.float32, 8), None, run)
    ident = {"op": "t_at::op", "src": "CHANGED"} if change == "identity" else None
    other, run2, runs2 = make_tuner(tmp_path, monkeypatch, {0: 1.0, 1: 3.0, 2: 2.0}, identity=ident)
    key = (torch.float32, 8) if change == "identity" else (torch.float32, 16)
    assert other.decide(key, None, run2) == 0 and runs2  # a miss: tuned again


def test_corrupt_or_stale_entry_is_a_miss(tmp_path, monkeypatch):
    t, run, _ = make_tuner(tmp_path, monkeypatch, {0: 3.0, 1: 1.0, 2: 2.0})
    key = (torch.float32, 32)
    t.decide(key, None, run)
    path = DiskCache(tmp_path, "tuning").path_for(t.disk_key(key, None))
    blob = path.read_bytes()
    path.write_bytes(blob[: len(blob) // 2])  # truncated
    fresh, run2, runs2 = make_tuner(tmp_path, monkeypatch, {0: 1.0, 1: 3.0, 2: 2.0})
    assert fresh.decide(key, None, run2) == 0 and runs2
    # A verified entry whose winner is not one of our configs (stale): a miss, with a warning.
    cache = DiskCache(tmp_path, "tuning")
    bad = {"winner": 7, "config": {"params": {"BLOCK": 9}}, "times_ms": {}}
    cache.put(t.disk_key(key, None), {}, json.dumps(bad).encode())
    again, run3, runs3 = make_tuner(tmp_path, monkeypatch, {0: 3.0, 1: 3.0, 2: 1.0})
    assert again.decide(key, None, run3) == 2 and runs3


def _writer(root, n):
    os.environ["OPSMITH_CACHE_DIR"] = root
    t = Tuner("t_at::op", {"op": "t_at::op", "src": "abc"}, CONFIGS, 0, timer=lambda run, restore: [float(n)])
    for _ in range(20):
        t.decisions.clear()
        t._write(("k",), None, n % 3, {0: 1.0}, {})


def test_concurrent_writers_leave_a_valid_entry(tmp_path, monkeypatch):
    ctx = mp.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(tmp_path), n)) for n in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    t, run, runs = make_tuner(tmp_path, monkeypatch, {0: 1.0, 1: 1.0, 2: 1.0})
    assert t.decide(("k",), None, run) in (0, 1, 2) and runs == []
    assert not [p for p in (tmp_path / "tuning").iterdir() if p.name.startswith(".tmp-")]


def test_autotune_off_uses_default_and_force_retunes(tmp_path, monkeypatch):
    t, run, runs = make_tuner(tmp_path, monkeypatch, {0: 3.0, 1: 1.0, 2: 2.0}, default=2)
    monkeypatch.setenv(env.AUTOTUNE.name, "0")
    assert t.decide(("a",), None, run) == 2 and runs == []
    monkeypatch.delenv(env.AUTOTUNE.name)
    t2, run2, _ = make_tuner(tmp_path, monkeypatch, {0: 3.0, 1: 1.0, 2: 2.0})
    t2.decide(("b",), None, run2)
    monkeypatch.setenv(env.AUTOTUNE_FORCE.name, "1")
    t3, run3, runs3 = make_tuner(tmp_path, monkeypatch, {0: 0.5, 1: 1.0, 2: 2.0})
    assert t3.decide(("b",), None, run3) == 0 and runs3  # ignored the disk decision
    runs3.clear()
    assert t3.decide(("b",), None, run3) == 0 and runs3 == []  # forced once per key per process


def test_failing_configs_are_skipped_with_a_reason(tmp_path, monkeypatch, caplog):
    t, run, _ = make_tuner(tmp_path, monkeypatch, {0: 3.0, 1: 1.0, 2: 2.0})

    def flaky(c):
        if c == 1:
            raise LaunchError("t_at::op: too many resources requested for launch")
        run(c)

    with caplog.at_level(logging.WARNING, "opsmith.autotune"):
        assert t.decide(("f",), None, flaky) == 2
    assert "config 1" in caplog.text and "too many resources" in caplog.text

    def broken(c):
        raise LaunchError("nope")

    with pytest.raises(LaunchError, match="no tuning config could run"):
        t.decide(("g",), None, broken)


def test_mutated_inputs_are_restored_between_runs(tmp_path, monkeypatch):
    x = torch.randn(100)
    x0 = x.clone()
    t, _, _ = make_tuner(tmp_path, monkeypatch, {0: 3.0, 1: 1.0, 2: 2.0})
    seen = []

    def run(c):
        seen.append(torch.equal(x, x0))  # every run starts from the caller's data
        x.add_(1.0)
        state_c[0] = c

    state_c = [0]
    t.timer = lambda run_, restore: (restore(), run_(), [{0: 3.0, 1: 1.0, 2: 2.0}[state_c[0]]])[2]
    t.decide(("m",), None, run, mutated=(x,))
    assert seen and all(seen)
    assert torch.equal(x, x0)  # restored before the caller's real run


def test_check_mode_reports_disagreeing_configs(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(env.AUTOTUNE_CHECK.name, "1")
    out = torch.empty(10)
    t, run, _ = make_tuner(tmp_path, monkeypatch, {0: 3.0, 1: 1.0, 2: 2.0})

    def run_out(c):
        out.fill_(1.0 if c != 2 else 5.0)  # config 2 computes something else
        run(c)

    with caplog.at_level(logging.WARNING, "opsmith.autotune"):
        t.decide(("c",), None, run_out, outputs=(out,))
    assert "config 2" in caplog.text and "disagrees" in caplog.text and "config 1 " not in caplog.text


def test_no_tuning_while_compiling(tmp_path, monkeypatch):
    t, run, runs = make_tuner(tmp_path, monkeypatch, {0: 3.0, 1: 1.0, 2: 2.0}, default=2)
    monkeypatch.setattr(torch.compiler, "is_compiling", lambda: True)
    assert t.decide(("h",), None, run) == 2 and runs == [] and ("h",) not in t.decisions


def test_spec_errors_for_configs():
    src = 'extern "C" __global__ void k(const float* x, int n, float* y) { }'

    def reg(name, **kw):
        return ok.cuda_kernel_op(f"t_at::{name}", ok.KernelSpec(src, "k", inputs=[ok.InputDecl("x")],
                                 outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], **kw))  # fmt: skip

    with pytest.raises(ok.SpecError, match=r"autotune\.configs.*no configs"):
        reg("a", geometry=ok.Elementwise(), autotune=ok.Autotune([]))
    with pytest.raises(ok.SpecError, match="num_warps is a Triton option"):
        reg("b", geometry=ok.Elementwise(), autotune=ok.Autotune([ok.Config({}, num_warps=4)]))
    with pytest.raises(ok.SpecError, match="'B', which is missing"):
        reg("c", geometry=ok.Elementwise(block=("B",)), autotune=ok.Autotune([ok.Config({"B": 128}), ok.Config({})]))
    with pytest.raises(ok.SpecError, match="no autotune configs"):
        reg("d", geometry=ok.Elementwise(block=("B",)))
    with pytest.raises(ok.SpecError, match=r"autotune\.default"):
        reg("e", geometry=ok.Elementwise(), autotune=ok.Autotune([ok.Config({"A": 1})], default=3))
    with pytest.raises(ok.SpecError, match=r"autotune\.key\[0\]\.input_name"):
        reg("f", geometry=ok.Elementwise(), autotune=ok.Autotune([ok.Config({"A": 1}), ok.Config({"A": 2})],
                                                                  key=[ok.TuneDim("nope", -1)]))  # fmt: skip


def test_tuned_cuda_op_compiles_each_config_once(tmp_path, monkeypatch):
    from examples.catalog.tuned import BLOCKS, register_tuned

    ex = register_tuned("t_at")
    op = ex["softmax_tuned"].op
    assert op.tuner is not None and len(op.record.configs) == len(BLOCKS)
    assert [p.block[0] for p in op.record.launches] == list(BLOCKS)
    names = [s.kernel_name for s in op.variants.sources]
    assert names == [f"softmax_t<{b}>" for b in BLOCKS]
    symbols = {op.variants.kernel(c, ()).binary_for("sm_90").symbol for c in range(len(BLOCKS))}
    assert len(symbols) == len(BLOCKS)  # one template instantiation per config
    record = ok.KernelRecord.from_json(op.record.to_json())
    assert record.configs == op.record.configs and record.launches == op.record.launches
    assert record.tune_key == (["dim", "i0", -1, "pow2"],)
    assert "_chosen.get(_tk)" in op.impl_source and "_pow2(x.shape[-1])" in op.impl_source
