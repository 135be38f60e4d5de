"""The fused attention forward in the Triton tutorial's style on the GPU (issue 40, item 6): the kernel offsets
K, V and Out by Q's batch and head strides, so its declaration shares those strides among the four; a Q given
as a transposed view is then made to agree (right values). A declaration with a stride per tensor is warned
about and shared by opsmith itself (issue 47); silenced, it gives the wrong values the issue saw. Eager against PyTorch, fp16 and fp8 (e5m2), compiled with
``fullgraph=True`` (Inductor compiles the kernel) and exported."""

import os

import pytest
import torch

import opsmith as ok

pytestmark = pytest.mark.gpu
pytest.importorskip("triton")
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)

from examples.catalog.attention import attention_reference, register_attention  # noqa: E402

NS = "t_gpu_attn"


@pytest.fixture(scope="module")
def ops(tmp_path_factory):
    os.environ["OPSMITH_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    with pytest.warns(ok.DeclarationWarning, match="stride_qz"):
        unshared = register_attention(NS, shared=False)  # opsmith shares Q's strides itself
    silenced = register_attention(NS, shared=False, silence=("stride_qz", "stride_qh", "stride_kz", "stride_kh",
                                                             "stride_vz", "stride_vh", "Z"))  # fmt: skip
    return register_attention(NS), unshared, silenced


def _qkv(dtype=torch.float16, z=2, h=3, n=256, d=64):
    return [torch.randn(z, h, n, d, device="cuda", dtype=torch.float16).to(dtype) for _ in range(3)]


def test_shared_strides_make_a_transposed_q_agree(ops):
    shared, unshared, silenced = ops
    q, k, v = _qkv()
    torch.testing.assert_close(shared(q, k, v, 0.125), attention_reference(q, k, v, 0.125), atol=2e-2, rtol=2e-2)
    qt = torch.randn(2, 256, 3, 64, device="cuda", dtype=torch.float16).transpose(1, 2)  # the view
    want = attention_reference(qt, k, v, 0.125)
    torch.testing.assert_close(shared(qt, k, v, 0.125), want, atol=2e-2, rtol=2e-2)
    # A stride per tensor, as a newcomer declares it: opsmith read the kernel and shared Q's strides itself
    torch.testing.assert_close(unshared(qt, k, v, 0.125), want, atol=2e-2, rtol=2e-2)
    # What that prevents: silenced, the per-tensor declaration stands and Q's strides offset K and V
    assert not torch.allclose(silenced(qt, k, v, 0.125).float(), want.float(), atol=2e-2, rtol=2e-2)


@pytest.mark.parametrize("dtype", [torch.float16, torch.float8_e5m2])
def test_attention_compiles_fullgraph_and_exports(ops, dtype):
    op = ops[0]
    q, k, v = _qkv(dtype)
    eager = op(q, k, v, 0.125)
    want = attention_reference(q, k, v, 0.125).float()
    if dtype == torch.float8_e5m2:
        # e5m2 keeps 2 mantissa bits: one step is up to 25% of a value, and the kernel's float sum and the
        # reference's round to neighbouring steps where they straddle a boundary (seen: 1 element in 98,304)
        torch.testing.assert_close(eager.float(), want, atol=6e-2, rtol=0.25)
        assert ((eager.float() - want).abs() > 6e-2 + 6e-2 * want.abs()).float().mean() < 1e-3
    else:
        torch.testing.assert_close(eager.float(), want, atol=6e-2, rtol=6e-2)
    compiled = torch.compile(lambda q, k, v: op(q, k, v, 0.125), fullgraph=True)
    torch.testing.assert_close(compiled(q, k, v).float(), eager.float())

    class M(torch.nn.Module):
        def forward(self, q, k, v):
            return op(q, k, v, 0.125)

    ep = torch.export.export(M(), (q, k, v))
    torch.testing.assert_close(ep.module()(q, k, v).float(), eager.float())
