"""Declarations that state every shape, on the GPU: the shipped axpby refuses a short y before launch; the
examples only named dimensions can declare (Triton matmul with a transposed b read in place, CUDA embedding,
float4 axpby with align and Divisible) match PyTorch, and their preconditions hold where a view would break
the kernel. (``opsmith check`` on them, compile and export included: test_gpu_check.py; their native library:
test_gpu_native.py.)"""

import pytest
import torch

import opsmith as ok
from examples.catalog.basic import register_all
from examples.catalog.shapes import register_shapes
from examples.catalog.tuned import triton_available

pytestmark = pytest.mark.gpu
NS = "t_gpu_shapes"


@pytest.fixture(scope="module")
def ex():
    return {**register_all(NS), **register_shapes(NS)}


def test_axpby_with_a_short_y_is_refused_before_launch(ex):
    x, y = torch.randn(1000, device="cuda"), torch.randn(10, device="cuda")
    with pytest.raises(ok.InputError, match=r"argument 'y': expected shape \(\*S,\) where S = \(1000,\) from 'x', "
                                            r"got shape \(10,\)"):  # fmt: skip
        ex["axpby_float32"].op(x, y, 1.0, 2.0)
    torch.cuda.synchronize()  # nothing was launched that could have faulted


def test_vec4_copies_a_misaligned_view_and_refuses_a_ragged_size(ex):
    op = ex["axpby_vec4"].op
    base, y = torch.randn(1028, device="cuda"), torch.randn(1024, device="cuda")
    x = base.narrow(0, 1, 1024)  # 4 bytes past a 16-byte boundary: float4 loads from it would fault
    assert x.data_ptr() % 16 == 4
    torch.testing.assert_close(op(x, y, 0.5, 2.0), 0.5 * x + 2.0 * y)
    with pytest.raises(ok.InputError, match=r"expected numel\(x\) divisible by 4 \(each thread loads and stores one "
                                            r"float4, with no scalar tail\), got numel\(x\) = 1001"):  # fmt: skip
        op(torch.randn(1001, device="cuda"), torch.randn(1001, device="cuda"), 1.0, 1.0)


def test_embedding_matches_indexing_and_marks_bad_ids(ex):
    for dt in (torch.float32, torch.float16, torch.bfloat16):
        op = ex[f"embedding_{str(dt).removeprefix('torch.')}"].op
        table = torch.randn(1000, 96, device="cuda").to(dt)
        ids = torch.randint(0, 1000, (4, 33), device="cuda")
        assert torch.equal(op(ids, table), table[ids])  # a gather: bit-identical
    ids[1, 2] = 1000  # past the table: the row is NaN, never another row or memory past the table
    out = op(ids, table)
    assert out[1, 2].isnan().all() and not out[0].isnan().any()
    with pytest.raises(ok.InputError, match=r"argument 'ids': expected dtype torch.int64"):
        op(ids.int(), table)


@pytest.mark.skipif(not triton_available(), reason="needs Triton")
@pytest.mark.parametrize("dt", [torch.float16, torch.bfloat16])
def test_matmul_reads_a_transposed_weight_in_place(ex, dt):
    op = ex["matmul"].op
    a = torch.randn(512, 384, device="cuda", dtype=dt)
    w = torch.randn(640, 384, device="cuda", dtype=dt)
    before = torch.cuda.memory_allocated()
    c = op(a, w.t())  # (384, 640) with strides (1, 384): no copy
    # Only the output was allocated (a copy of w.t() would add 640 * 384 elements).
    assert torch.cuda.memory_allocated() - before <= c.numel() * c.element_size() + 512
    torch.testing.assert_close(c, (a.float() @ w.float().t()).to(dt), atol=5e-2, rtol=2e-2)
    with pytest.raises(ok.InputError, match=r"argument 'b': expected shape \(K, N\) where K = 384 from 'a'"):
        op(a, w)
    with pytest.raises(ok.InputError, match=r"argument 'b': expected dtype"):
        op(a, w.t().float())
