"""Dynamic shared memory as a size expression (issue 49, item 1): ``Grid(shared_mem="(3 * Bc * d + Bc * Br) * 4")``
over config parameters, named dimensions and the tensors' sizes, as a FlashAttention-style kernel's host code
computes it. The eager code and a native library compute it per call, check it before the launch and record
the same launches (dry runs on CPU); a name that is neither a config parameter nor a dimension is refused
naming ``geometry.shared_mem``, also on an op without autotune."""

from __future__ import annotations

import pytest
import torch
from differential import Registered, both_dry_runs, tensor_call

import opsmith as ok

NS = "t_smem_expr"
SRC = r"""
// One row per block, staged through shared memory (the declared amount is at least the row's).
extern "C" __global__ void attend(const float* q, int d, float* o) {
  extern __shared__ float tiles[];
  const float* row = q + static_cast<long long>(blockIdx.x) * d;
  for (int i = threadIdx.x; i < d; i += blockDim.x) tiles[i] = row[i];
  __syncthreads();
  for (int i = threadIdx.x; i < d; i += blockDim.x) o[static_cast<long long>(blockIdx.x) * d + i] = tiles[i];
}
"""
TUNED = ok.Autotune([ok.Config({"Bc": 32, "Br": 32}), ok.Config({"Bc": 16, "Br": 64})], key=[ok.TuneDim("q", -1)])


def _op(name: str, smem: object, autotune: ok.Autotune | None = None) -> ok.Op:
    return ok.cuda_kernel_op(f"{NS}::{name}", ok.KernelSpec(
        kernel_source=SRC, kernel_name="attend", inputs=[ok.InputDecl("q", shape=("B", "d"))],
        outputs=[ok.OutputDecl("o", ok.SameAs("q"))], extras=[ok.Dim("d")],
        geometry=ok.Grid(grid=("B",), block=(32,), shared_mem=smem), autotune=autotune))  # fmt: skip


def _calls(ds):
    return [[tensor_call((3, d))] for d in ds]


@pytest.mark.slow
def test_an_expression_of_sizes_gives_each_call_its_shared_memory_on_both_paths():
    op = _op("fixed_tiles", "(3 * 32 * size(q, -1) + 32 * 32) * 4")
    py = both_dry_runs([Registered(op, _calls((64, 128, 1)))])
    assert [py[f"{NS}::fixed_tiles#{j}"]["launches"][0]["shared_mem"] for j in range(3)] == \
        [(3 * 32 * d + 32 * 32) * 4 for d in (64, 128, 1)]  # fmt: skip


@pytest.mark.slow
def test_each_config_computes_its_own_expression_on_both_paths():
    """Tuned: the decision's config gives the expression its Bc and Br (never tuned in a dry run: the default)."""
    op = _op("tuned_tiles", "(3 * Bc * d + Bc * Br) * 4", TUNED)
    py = both_dry_runs([Registered(op, _calls((64, 96)))])
    assert [py[f"{NS}::tuned_tiles#{j}"]["launches"][0]["shared_mem"] for j in range(2)] == \
        [(3 * 32 * d + 32 * 32) * 4 for d in (64, 96)]  # fmt: skip


@pytest.mark.slow
def test_more_than_a_block_may_hold_is_refused_before_the_launch_on_both_paths():
    op = _op("big_tiles", "(3 * 32 * size(q, -1) + 32 * 32) * 4")
    py = both_dry_runs([Registered(op, _calls((700,)))])
    assert py[f"{NS}::big_tiles#0"] == {"ok": False, "error": (
        f"ValueError: {NS}::big_tiles: argument 'q': expected dynamic shared memory of 0 to 232448 bytes per block "
        "((3 * 32 * size(q, -1) + 32 * 32) * 4), got 272896. Fix: pass inputs the kernel's shared memory can hold "
        "(a smaller size along the axes the expression reads), or a config that needs less.")}  # fmt: skip


@pytest.mark.parametrize("smem, autotune, why", [
    ("(3 * Bc * d + Bc * Br) * 4", None, r"'Bc' is not sm_count, a named dimension or a parameter of the config"),
    ("SMEM", None, r"'SMEM' is not sm_count, a named dimension or a parameter of the config"),
    ("(3 * Bc * d", TUNED, r"does not parse"),
    (-4, None, r"-4 is not a byte count in \[0, 232448\]"),
])  # fmt: skip
def test_a_wrong_expression_is_refused_naming_geometry_shared_mem(smem, autotune, why):
    with pytest.raises(ok.SpecError, match=r"geometry\.shared_mem: .*" + why):
        _op(f"bad_{abs(hash(str(smem))) % 10**6}", smem, autotune)


def test_a_config_parameter_by_name_still_needs_every_config_to_give_bytes():
    tuned = ok.Autotune([ok.Config({"SMEM": 1024}), ok.Config({"SMEM": -1})])
    with pytest.raises(
        ok.SpecError,
        match=r"autotune\.configs\[1\]\.params: the geometry's shared_mem uses 'SMEM', "
        r"which is -1 here",
    ):
        _op("named_param", "SMEM", tuned)


def test_a_triton_kernels_shared_memory_is_its_compilers():
    triton = pytest.importorskip("triton")
    import triton.language as tl

    @triton.jit
    def k(x_ptr, y_ptr):
        tl.store(y_ptr, tl.load(x_ptr))

    with pytest.raises(
        ok.SpecError,
        match=r"geometry\.shared_mem: a Triton kernel's shared memory is what its "
        r"compiler allocates",
    ):
        ok.triton_op(f"{NS}::triton_smem", k, inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
                     geometry=ok.Grid(grid=(1,), shared_mem="numel(x) * 4"))  # fmt: skip


def test_the_opted_in_amount_is_the_devices_for_a_per_call_expression():
    """A kernel whose shared memory comes per call opts into what the device allows (the C++ Kernel the
    same: shared_mem -1 in its table)."""
    from opsmith.flavors.launch import SMEM_PER_CALL

    op = _op("opt_in", "numel(q) * 4")
    x = torch.randn(6, 4)
    from opsmith.torchlib.eager import make_dry_run

    dry, _ = make_dry_run(op)
    dry(x)
    assert op.variants.first.shared_mem == SMEM_PER_CALL
    assert dry.launches[0]["shared_mem"] == 96


@pytest.mark.slow
def test_the_styled_softmax_stages_each_row_in_shared_memory_sized_per_call():
    """tests/styled_kernels.py's llm.c-style softmax (its GPU run: tests/test_gpu_ported.py): both paths launch
    it with 4 bytes a column, and refuse a row past 227 KiB."""
    from styled_kernels import register_softmax_rows

    op = register_softmax_rows(NS)
    py = both_dry_runs([Registered(op, [[tensor_call((4, c))] for c in (100, 50_000, 60_000)])])
    got = [py[f"{NS}::softmax_rows#{j}"] for j in range(3)]
    assert [g["launches"][0]["shared_mem"] for g in got[:2]] == [400, 200_000]
    assert got[2]["error"].startswith(
        f"ValueError: {NS}::softmax_rows: argument 'inp': expected dynamic shared memory of 0 to 232448 bytes per block"
    )  # (the outcome shortens the text)
