"""Run by test_distributed_cpu.py under ``torchrun --nproc-per-node 2`` on CPU (gloo, TRITON_INTERPRET=1), and
by test_gpu_distributed.py on two GPUs (NCCL) with ``OPSMITH_CHECK_DEVICE=cuda``.

Derived DTensor rules on a real two-rank mesh: every result is compared with the unsharded computation, and
the expected output placements are checked. Then the job-wide tuning protocol. Prints one line per group on
rank 0 and exits non-zero on any failure.
"""

import os
import sys
import time

import torch
import torch.distributed as dist
import triton
import triton.language as tl

import opsmith as ok
from opsmith.ops.rmsnorm import reference_rms_norm, rms_norm
from opsmith.tuning.autotune import Tuner

NS = "dist_check"


@triton.jit
def rowsum_kernel(x, out, n_cols, BLOCK: tl.constexpr = 64):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.zeros((BLOCK,), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc += tl.load(x + row * n_cols + offs, mask=offs < n_cols, other=0).to(tl.float32)
    tl.store(out + row, tl.sum(acc, 0))


@triton.jit
def twice_kernel(x, y, n, BLOCK: tl.constexpr = 128):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offs, tl.load(x + offs, mask=offs < n) * 2, mask=offs < n)


@triton.jit
def scale_inplace_kernel(x, n, BLOCK: tl.constexpr = 128):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(x + offs, tl.load(x + offs, mask=offs < n) * 3, mask=offs < n)


@triton.jit
def gather_kernel(idx, table, y, n, BLOCK: tl.constexpr = 128):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    i = tl.load(idx + offs, mask=offs < n, other=0)
    tl.store(y + offs, tl.load(table + i, mask=offs < n), mask=offs < n)


@triton.jit
def gather_bounded_kernel(idx, table, y, n, BLOCK: tl.constexpr = 128):
    """n bounds the table read too (a table as long as idx): on a shard of idx, n is the shard's length."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    i = tl.load(idx + offs, mask=offs < n, other=0)
    tl.store(y + offs, tl.load(table + i, mask=(offs < n) & (i < n), other=0.0), mask=offs < n)


@triton.jit
def rowmax_kernel(x, out, n_cols, BLOCK: tl.constexpr = 64):
    row = tl.program_id(0).to(tl.int64)
    acc = tl.full((BLOCK,), float("-inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        offs = start + tl.arange(0, BLOCK)
        acc = tl.maximum(acc, tl.load(x + row * n_cols + offs, mask=offs < n_cols, other=float("-inf")))
    tl.store(out + row, tl.max(acc, 0))


# Registered before torch.distributed.tensor is imported: their rules arrive when it is.
assert "torch.distributed.tensor" not in sys.modules
rowsum = ok.triton_op(f"{NS}::rowsum", rowsum_kernel, inputs=[ok.InputDecl("x", torch.float32, ndim=2)],
                      outputs=[ok.OutputDecl("out", ok.ReduceDims("x", (-1,), combine="sum"))],
                      extras=[ok.DimSize("x", -1, name="n_cols")], geometry=ok.Reduction(reduce_dims=(-1,)))  # fmt: skip
grid_kw = {"inputs": [ok.InputDecl("x")], "outputs": [ok.OutputDecl("y", ok.SameAs("x"))],
           "extras": [ok.Numel("x", name="n")], "geometry": ok.Grid(grid=("cdiv(numel(x), 128)",))}  # fmt: skip
twice_grid = ok.triton_op(f"{NS}::twice_grid", twice_kernel, **grid_kw)
twice_repl = ok.triton_op(f"{NS}::twice_repl", twice_kernel, **grid_kw, sharding="replicate")


def rows_only(x):  # a user rule: rows only, so any other placement is redistributed to rows first
    from torch.distributed.tensor import Shard

    return [([Shard(0)], [Shard(0)])]


twice_rows = ok.triton_op(f"{NS}::twice_rows", twice_kernel, **grid_kw, sharding=rows_only)
# y = table[idx], Elementwise over idx. Undeclared, the table is tied to nothing (replicated); declared, its
# axis V is named by nothing else (replicated too), while idx and y share the group.
gather_kw = {"outputs": [ok.OutputDecl("y", ok.SameAs("idx"), dtype_from="table")], "extras": [ok.Numel("idx", name="n")],
             "geometry": ok.Elementwise(block=("BLOCK",))}  # fmt: skip
gather_in = {
    "free": [ok.InputDecl("idx", torch.int64), ok.InputDecl("table", torch.float32)],
    "named": [ok.InputDecl("idx", torch.int64, shape=("*B",)), ok.InputDecl("table", torch.float32, shape=("V",))],
}
# The declaration cannot show what the kernel does with n = numel(idx) beside a table tied to nothing: by default
# idx's axis runs replicated (the bounded kernel, the issue's, then gives the right values too); sharding="derive"
# vouches for the derived rule (right for gather_kernel, which uses n for its loop only).
gathers = {f"gather_{decl}{'_derive' * derive}": ok.triton_op(
    f"{NS}::gather_{decl}{'_derive' * derive}", gather_kernel, inputs=gather_in[decl], **gather_kw,
    **({"sharding": "derive"} if derive else {})) for decl in gather_in for derive in (False, True)}  # fmt: skip
gathers["gather_bounded"] = ok.triton_op(f"{NS}::gather_bounded", gather_bounded_kernel, inputs=gather_in["free"],
                                         **gather_kw)  # fmt: skip
# A max over rows with a backward: the gradient goes to each row's maximum, which a split row does not know.
rowmax = ok.triton_op(f"{NS}::rowmax", rowmax_kernel, inputs=[ok.InputDecl("x", torch.float32, shape=("R", "C"))],
                      outputs=[ok.OutputDecl("out", ok.ReduceDims("x", (-1,), combine="max"))],
                      extras=[ok.Dim("C", name="n_cols")], geometry=ok.Reduction(reduce_dims=(-1,)),
                      backward=ok.Backward(lambda g, x, out: (x == out.unsqueeze(-1)) * g.unsqueeze(-1),
                                           args=("grad_out", "x", "out"), grads=("x",)))  # fmt: skip
rowmax_nobwd = ok.triton_op(f"{NS}::rowmax_nobwd", rowmax_kernel, inputs=[ok.InputDecl("x", torch.float32, shape=("R", "C"))],
                            outputs=[ok.OutputDecl("out", ok.ReduceDims("x", (-1,), combine="max"))],
                            extras=[ok.Dim("C", name="n_cols")], geometry=ok.Reduction(reduce_dims=(-1,)))  # fmt: skip
scale3 = ok.triton_op(f"{NS}::scale3", scale_inplace_kernel, inputs=[ok.InputDecl("x", mutates=True, contiguous="require")],
                      outputs=[], extras=[ok.Numel("x", name="n")], geometry=ok.Elementwise(block=("BLOCK",)))  # fmt: skip
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))
from round_four_ops import optional_classifier  # noqa: E402

from examples.distributed.ops import swiglu_op  # noqa: E402

classifier = optional_classifier(NS)

swiglu = swiglu_op()

from torch.distributed.device_mesh import init_device_mesh  # noqa: E402
from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor  # noqa: E402

DEV = os.environ.get("OPSMITH_CHECK_DEVICE", "cpu")
dist.init_process_group("nccl" if DEV == "cuda" else "gloo")
rank, world = dist.get_rank(), dist.get_world_size()
if DEV == "cuda":
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
mesh = init_device_mesh(DEV, (world,))
torch.manual_seed(0)  # every rank draws the same global tensors


def randn(*shape: int) -> torch.Tensor:
    return torch.randn(*shape).to(DEV)


failures: list[str] = []


def say(line: str) -> None:
    if rank == 0:
        print(line, flush=True)


def check(name: str, got, want, tol=None) -> None:
    try:
        torch.testing.assert_close(got, want, **(tol or {"atol": 1e-5, "rtol": 1e-4}))
    except AssertionError as e:
        failures.append(f"{name}: {str(e).splitlines()[0]}")


def expect(name: str, got, want) -> None:
    if tuple(got) != tuple(want):
        failures.append(f"{name}: placements {tuple(got)}, expected {tuple(want)}")


def leaf(t, placements):
    return distribute_tensor(t, mesh, placements).requires_grad_()


# -- RMSNorm (Reduction over -1, weight of DimSize(x, -1)) ----------------------------------------------
x, w, dy = randn(4, 6, 40), randn(40), randn(4, 6, 40)
xr, wr = x.clone().requires_grad_(), w.clone().requires_grad_()
reference_rms_norm(xr, wr, 1e-6).backward(dy)
want_y = reference_rms_norm(x, w, 1e-6)
n = 0
for xp, wp, yp in [(Shard(0), Replicate(), Shard(0)), (Shard(1), Replicate(), Shard(1)), (Shard(2), Replicate(), None),
                   (Replicate(), Replicate(), Replicate()), (Shard(1), Shard(0), Shard(1))]:  # fmt: skip
    xd, wd = leaf(x, [xp]), leaf(w, [wp])
    y = rms_norm(xd, wd, 1e-6)
    tag = f"rmsnorm x {xp} w {wp}"
    if yp is not None:
        expect(tag, y.placements, [yp])
    elif y.placements[0] == Shard(2):
        failures.append(f"{tag}: computed on split rows (output {y.placements})")
    y.backward(distribute_tensor(dy, mesh, list(y.placements)))
    check(tag + " y", y.full_tensor(), want_y)
    check(tag + " dx", xd.grad.full_tensor(), xr.grad)
    check(tag + " dw", wd.grad.full_tensor(), wr.grad)
    if xp.is_shard() and xp.dim < 2:  # rows split: each rank's dweight is its rows' part
        expect(tag + " dw", wd.grad.placements, [Partial()])
    n += 1
say(f"rmsnorm: {n} placement cases match the unsharded forward and backward")

# -- SwiGLU (Elementwise, up shaped like gate): matching, mismatched and replicated placements -----------
g, u, dy = randn(2, 8, 24), randn(2, 8, 24), randn(2, 8, 24)
gr, ur = g.clone().requires_grad_(), u.clone().requires_grad_()
(torch.nn.functional.silu(gr) * ur).backward(dy)
for gp, up, outp in [(Shard(2), Shard(2), Shard(2)), (Shard(0), Shard(0), Shard(0)), (Shard(2), Shard(1), None),
                     (Replicate(), Shard(1), None)]:  # fmt: skip
    gd, ud = leaf(g, [gp]), leaf(u, [up])
    out = swiglu(gd, ud)
    tag = f"swiglu gate {gp} up {up}"
    if outp is not None:
        expect(tag, out.placements, [outp])
    out.backward(distribute_tensor(dy, mesh, list(out.placements)))
    check(tag + " out", out.full_tensor(), torch.nn.functional.silu(g) * u)
    check(tag + " dgate", gd.grad.full_tensor(), gr.grad)
    check(tag + " dup", ud.grad.full_tensor(), ur.grad)
# The backward op is an opsmith op of its own, with its own derived rule.
dg, du = torch.ops.dist_example.swiglu_backward(*(distribute_tensor(t, mesh, [Shard(1)]) for t in (dy, g, u)))
expect("swiglu_backward", dg.placements, [Shard(1)])
check("swiglu_backward dup", du.full_tensor(), dy * torch.nn.functional.silu(g))
say("swiglu: matching placements pass through, mismatched ones are redistributed; backward op derived too")

# -- A sum reduction: sharding the reduced axis gives a Partial ------------------------------------------
x = randn(6, 50)
for xp, outp in [(Shard(0), Shard(0)), (Shard(1), Partial()), (Replicate(), Replicate())]:
    out = rowsum(distribute_tensor(x, mesh, [xp]))
    expect(f"rowsum x {xp}", out.placements, [outp])
    check(f"rowsum x {xp}", out.full_tensor(), x.sum(-1))
say("rowsum (combine='sum'): rows stay sharded, a sharded reduced axis gives Partial(sum)")

# -- Optional outputs (issue 60, item 5): asked for or left out, alternately, through DTensor's cache ----------
logits, targets = randn(6, 40), torch.randint(0, 40, (6,)).to(DEV)
want_p = torch.softmax(logits, -1)
want_d = (want_p - torch.nn.functional.one_hot(targets, 40)) * 0.5
for lp in (Shard(0), Replicate()):
    for rp, rd in [(True, False), (False, False), (False, True), (True, True), (False, False)]:
        loss, probs, dlogits = classifier(distribute_tensor(logits, mesh, [lp]), distribute_tensor(targets, mesh, [lp]),
                                          0.5, rp, rd)  # fmt: skip
        tag = f"classifier logits {lp} return_probs={rp} return_dlogits={rd}"
        expect(tag, loss.placements, [lp])
        check(tag + " loss", loss.full_tensor(), torch.nn.functional.cross_entropy(logits, targets, reduction="none"))
        for name, got, asked, want in (("probs", probs, rp, want_p), ("dlogits", dlogits, rd, want_d)):
            if not asked:
                if got is not None:
                    failures.append(f"{tag}: {name} is {type(got).__name__}, expected None")
                continue
            expect(tag + " " + name, got.placements, [lp])
            check(tag + " " + name, got.full_tensor(), want)
say("classifier: optional outputs asked for or left out alternately, None where left out, each call's own")

# -- A gather: the table is replicated whatever placement it arrives with -------------------------------
table, idx = randn(16), torch.randint(0, 16, (16,)).to(DEV)
import warnings  # noqa: E402

with warnings.catch_warnings(record=True) as said:
    warnings.simplefilter("always")
    for name, op in gathers.items():
        for ip, tp in [(Shard(0), Replicate()), (Shard(0), Shard(0)), (Replicate(), Shard(0))]:
            y = op(distribute_tensor(idx, mesh, [ip]), distribute_tensor(table, mesh, [tp]))
            tag = f"{op.qualname} idx {ip} table {tp}"
            if ip.is_shard():  # derive: the table is redistributed to Replicate, idx stays sharded; else both whole
                expect(tag, y.placements, [ip] if name.endswith("_derive") else [Replicate()])
            check(tag, y.full_tensor(), table[idx])  # (replicated idx: DTensor may shard it, a free slice)
held = [str(w.message).split(": ")[0] for w in said if issubclass(w.category, ok.ShardingWarning)]
expect(
    "ShardingWarning once per held op",
    sorted(held),
    sorted(op.qualname for n, op in gathers.items() if "derive" not in n),
)
say(
    "gather: a table tied to nothing beside numel(idx) runs replicated, said once (the bounded kernel right too); "
    "sharding='derive' shards idx"
)

# -- A max with a backward: never Partial(max) along the reduced axis ------------------------------------
x, dy = randn(6, 50), randn(6)
xr = x.clone().requires_grad_()
(xr.amax(-1) * dy).sum().backward()
for xp, outp in [(Shard(0), Shard(0)), (Shard(1), Replicate()), (Replicate(), Replicate())]:
    xd = leaf(x, [xp])
    out = rowmax(xd)
    tag = f"rowmax x {xp}"
    expect(tag, out.placements, [outp])
    check(tag, out.full_tensor(), x.amax(-1))
    out.backward(distribute_tensor(dy, mesh, list(out.placements)))
    check(tag + " dx", xd.grad.full_tensor(), xr.grad)
out = rowmax_nobwd(distribute_tensor(x, mesh, [Shard(1)]))
expect("rowmax without backward x Shard(1)", out.placements, [Partial("max")])
check("rowmax without backward x Shard(1)", out.full_tensor(), x.amax(-1))
say("rowmax (combine='max'): with a backward a split row is gathered first; without one, Partial(max)")

# -- Refusals and user rules -----------------------------------------------------------------------------
xd = distribute_tensor(randn(4, 64), mesh, [Shard(0)])
for op, needle in [(twice_grid, "sharding="), (scale3, "to_local")]:
    try:
        op(xd)
        failures.append(f"{op.qualname}: DTensor input was not refused")
    except ok.ShardingError as e:
        if op.qualname not in str(e) or needle not in str(e):
            failures.append(f"{op.qualname}: refusal does not name the op and the fix: {e}")
out = twice_repl(xd)
expect("sharding='replicate'", out.placements, [Replicate()])
check("sharding='replicate'", out.full_tensor(), xd.full_tensor() * 2)
xd = distribute_tensor(randn(4, 64), mesh, [Shard(1)])
out = twice_rows(xd)
expect("user rule", out.placements, [Shard(0)])
check("user rule", out.full_tensor(), xd.full_tensor() * 2)
say("refusals name the op and sharding=; sharding='replicate' and a user rule are used as given")

# -- One tuning decision per job -------------------------------------------------------------------------
pg = dist.distributed_c10d._get_default_group()


def fake_timer(run, restore):
    run()
    # Left alone, rank 0 would pick config 0 and rank 1 config 2.
    return [1.0 + 0.1 * abs(c_now[0] - (0 if rank == 0 else 2))] * 5


c_now = [0]


def run(c):
    c_now[0] = c


def tuner(tag: str) -> Tuner:
    return Tuner(f"{NS}::{tag}", {"op": tag, "pid_free": True}, [{"params": {"B": b}} for b in (1, 2, 3)], 0,
                 timer=fake_timer)  # fmt: skip


# a) SPMD: both ranks miss the same key; rank 1 arrives late. One tuning, rank 0's, and no collective.
t = tuner("spmd")
if rank == 1:
    time.sleep(0.5)
seq = pg._get_sequence_number_for_group()
winner = t.decide(("k",), None, run)
if pg._get_sequence_number_for_group() != seq:
    failures.append("tuning issued a collective")
gathered = [None] * world
dist.all_gather_object(gathered, (winner, t.tuned_keys))
if len({w for w, _ in gathered}) != 1 or [k for _, k in gathered] != [1, 0]:
    failures.append(f"spmd tuning: (winner, keys tuned) per rank {gathered}, expected one winner tuned by rank 0")
spmd = list(gathered)
# b) A key rank 0 never misses (it has it in memory): rank 1 claims it after the grace wait and tunes.
t = tuner("uneven")
if rank == 0:
    t.decisions[("k",)] = 1
winner = t.decide(("k",), None, run)
dist.all_gather_object(gathered, (winner, t.tuned_keys))
if [k for _, k in gathered] != [0, 1]:
    failures.append(f"uneven key: keys tuned per rank {gathered}, expected rank 1 alone")
say(
    f"job tuning: (winner, keys tuned) per rank {spmd}: rank 0 tuned, both launch its choice; a key only rank 1 "
    f"missed: {gathered}, tuned by rank 1 after the claim wait"
)
# c, d) Node-local disk caches that disagree: a rank holding a decision on its own disk still takes the job's.
import tempfile  # noqa: E402

os.environ["OPSMITH_DISABLE_DISK_CACHE"] = "0"
os.environ["OPSMITH_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"opsmith-rank{rank}-")
local = []
for tag, holder in (("disk_rank1", 1), ("disk_rank0", 0)):
    t = tuner(tag)
    if rank == holder:
        t._write(("k",), None, 1, {}, {})  # this node's cache says config 1
    winner = t.decide(("k",), None, run)
    dist.all_gather_object(gathered, (winner, t.tuned_keys))
    local.append(list(gathered))
    # Rank 0 claims: from its disk (d) or by tuning (c: config 0 on rank 0's timer); rank 1 takes its choice.
    want = [(0, 1), (0, 0)] if holder == 1 else [(1, 0), (1, 0)]
    if gathered != want:
        failures.append(f"node-local cache on rank {holder}: (winner, keys tuned) per rank {gathered}, expected {want}")
say(
    f"node-local caches: a decision on rank 1's disk only -> {local[0]}; on rank 0's only -> {local[1]}: one config per job"
)

dist.barrier()
if failures:
    print(f"rank {rank} FAILED:\n  " + "\n  ".join(failures), flush=True)
dist.destroy_process_group()
sys.exit(1 if failures else 0)
