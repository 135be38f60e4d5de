"""The Llama recipe (examples/llama, docs/llama.md) at toy size on CPU: Liger-Kernel's kernels register from the
package, swap into a transformers Llama, and one training step (forward, loss, backward) traces under
``torch.compile(fullgraph=True)`` on meta tensors: one forward graph and one backward graph, no break, every
parameter given a gradient. The backwards are programs, so every op is served natively. Numerics run on the GPU
(tests/test_gpu_llama_recipe.py, benchmarks/bench_llama.py), and in Triton's interpreter where Liger's kernels run
there (tests/recipe_interpreter_check.py)."""

import pytest
import torch

pytest.importorskip("triton", reason="the recipe's kernels are Triton kernels (the test extra installs Triton)")
pytest.importorskip("liger_kernel", reason="liger-kernel is not installed (a test extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (a test extra)")

from interpreted import run_interpreted  # noqa: E402

from examples.llama.kernels import llama_kernels  # noqa: E402
from examples.llama.model import causal_sdpa, flce_chunk, swap_in  # noqa: E402

NS = "t_llama_cpu"


def _config():
    return transformers.LlamaConfig(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                    num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                    use_cache=False)  # fmt: skip


def test_the_kernels_register_from_the_package_with_their_schemas():
    ops = llama_kernels(NS)
    assert ops["cross_entropy"].record.schema == ("(Tensor(a!) X, Tensor Y, Tensor? weight, Tensor(b!)? z_loss, "
                                                  "Tensor(c!)? token_accuracy, Tensor(d!)? predicted_tokens, "
                                                  "SymInt ignore_index) -> Tensor")  # fmt: skip
    assert ops["rope"].record.schema == "(Tensor(a!) q, Tensor(b!) k, Tensor cos, Tensor sin) -> ()"
    assert ops["rms_norm"].backward is not None and ops["swiglu"].backward is not None
    # Liger's host code, as the declarations state it: rows per program over the multiprocessors, the row block
    assert [e.label for e in ops["rms_norm_backward"].record.extras][-1] == "cdiv(numel(RSTD), sm_count)"


def test_every_op_can_be_served_natively(monkeypatch):
    """A Python-function backward would keep an op on the Python path (2.5x the host time of a native call on an
    H100, docs/llama.md); the recipe's backwards are programs."""
    monkeypatch.setenv("OPSMITH_NATIVE", "dry-run")
    ops = llama_kernels(NS + "_native")
    assert {n: op.serving_why for n, op in ops.items() if "cannot be native" in (op.serving_why or "")} == {}
    from opsmith.plan.backward_program import is_program

    assert is_program(ops["rms_norm"].backward.fn) and is_program(ops["swiglu"].backward.fn)


def test_the_backward_programs_in_the_interpreter():
    assert "checked 5 cases" in run_interpreted("recipe_interpreter_check.py")


def test_the_chunk_is_ligers():
    """Liger's chunk: next_power_of_2(cdiv(BT, cdiv(V, H))), at most BT."""
    assert flce_chunk(8192, 2048, 32000) == 512
    assert flce_chunk(100, 2048, 1000) == 100
    assert flce_chunk(4096, 4096, 128256) == 128


def test_one_step_traces_whole_on_meta_tensors():
    from torch._dynamo.backends.common import aot_autograd
    from transformers.models.llama import modeling_llama

    forward_graphs, backward_graphs = [], []
    backend = aot_autograd(fw_compiler=lambda gm, _: forward_graphs.append(gm) or gm.forward,
                           bw_compiler=lambda gm, _: backward_graphs.append(gm) or gm.forward)  # fmt: skip
    original = modeling_llama.apply_rotary_pos_emb
    try:
        with torch.device("meta"):
            model = swap_in(transformers.LlamaForCausalLM(_config()).to(torch.bfloat16), NS)
            ids = torch.randint(0, 256, (2, 16))
        torch._dynamo.reset()
        step = torch.compile(lambda ids: model(input_ids=ids, labels=ids).loss, fullgraph=True, backend=backend)
        loss = step(ids)
        loss.backward()
    finally:
        modeling_llama.apply_rotary_pos_emb = original  # swap_in patches the module for every Llama
        torch._dynamo.reset()
    assert loss.shape == () and len(forward_graphs) == 1 and len(backward_graphs) == 1
    assert all(p.grad is not None and p.grad.shape == p.shape for p in model.parameters())
    code = forward_graphs[0].code + backward_graphs[0].code
    # On meta tensors the ops with a reference (RMSNorm, SwiGLU, RoPE) stay whole: a tensor that is not CUDA runs the
    # reference. The others (RMSNorm's backward, the cross-entropy) decompose into their Triton kernels.
    assert f"{NS}.rms_norm.default" in code and code.count("triton_kernel_wrapper") >= 4


def _sdpa_call(fn, *args):
    """fn compiled whole; its output and the scaled_dot_product_attention call of its graph."""
    graphs = []
    torch._dynamo.reset()
    try:
        out = torch.compile(fn, fullgraph=True, backend=lambda gm, _: graphs.append(gm) or gm.forward)(*args)
    finally:
        torch._dynamo.reset()
    return out, next(line for line in graphs[0].code.splitlines() if "scaled_dot_product_attention" in line)


def test_causal_sdpa_keeps_a_plain_causal_mask_unmaterialized_under_compile_and_every_other_mask():
    """transformers materializes the causal mask while tracing; causal_sdpa leaves it to SDPA's is_causal when the
    call has no padding, position ids or cache, and any other call keeps transformers' mask (same outputs)."""
    torch.manual_seed(0)
    config = _config()
    config._attn_implementation = "sdpa"
    hf = transformers.LlamaForCausalLM(config).eval()
    ours = transformers.LlamaForCausalLM(config).eval()
    ours.load_state_dict(hf.state_dict())
    causal_sdpa(ours)
    ids = torch.randint(0, 256, (2, 16))
    _, shipped = _sdpa_call(lambda ids: hf(input_ids=ids).logits, ids)
    assert "is_causal = False" in shipped and "attn_mask = None" not in shipped  # what causal_sdpa is for
    out, call = _sdpa_call(lambda ids: ours(input_ids=ids).logits, ids)
    assert "attn_mask = None" in call and "is_causal = True" in call
    torch.testing.assert_close(out, hf(input_ids=ids).logits)
    padding = torch.ones(2, 16, dtype=torch.long)
    padding[0, :5] = 0
    packed = torch.cat([torch.arange(9), torch.arange(7)]).expand(2, -1)
    for kw in ({"attention_mask": padding}, {"position_ids": packed}):
        out, call = _sdpa_call(lambda ids, kw=kw: ours(input_ids=ids, **kw).logits, ids)
        assert "is_causal = False" in call and "attn_mask = None" not in call, kw
        torch.testing.assert_close(out, hf(input_ids=ids, **kw).logits)
        torch.testing.assert_close(ours(input_ids=ids, **kw).logits, hf(input_ids=ids, **kw).logits)
    with pytest.raises(TypeError, match=r"expected a transformers LlamaForCausalLM.*got LlamaModel"):
        causal_sdpa(hf.model)


@pytest.mark.slow
def test_the_chunked_gradients_accumulate_in_place_when_compiled():
    """The fused cross-entropy's two gradient buffers, written chunk by chunk through ``mm_into`` (a custom op that
    declares its write) and saved for the backward, as ``FusedLinearCrossEntropy`` does: compiled by Inductor
    (CPU), every write is reinplaced (Inductor's own counter: nothing missed), including the last chunk's, which
    AOTAutograd's partitioner moves into the backward graph (it writes donated buffers there: opsmith's pass);
    no graph has a functional ``addmm`` (which copies its input into a new buffer first), and the gradients
    equal eager's."""
    from torch._dynamo.utils import ReinplaceCounters
    from torch._inductor.utils import run_and_get_code

    from examples.llama.model import _mm_into
    from opsmith.inductor.donated import install

    assert install()  # what registering an opsmith op that writes an input does

    class Chunked(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, weight):
            grad_x, grad_w = torch.empty_like(x), torch.empty_like(weight)
            losses = []
            for start in range(0, x.shape[0], 16):
                xc = x[start : start + 16]
                logits = (xc @ weight.t()).softmax(-1)  # stands in for the cross-entropy and its gradient
                losses.append(logits.square().sum())
                _mm_into(grad_x[start : start + 16], logits, weight, False)
                _mm_into(grad_w, logits.t(), xc, start > 0)
            ctx.save_for_backward(grad_x, grad_w)
            return torch.stack(losses).sum()

        @staticmethod
        def backward(ctx, g):
            grad_x, grad_w = ctx.saved_tensors
            return grad_x * g, grad_w * g

    def step(x, weight):
        x.grad = weight.grad = None
        Chunked.apply(x, weight).backward()
        return x.grad, weight.grad

    gen = torch.Generator().manual_seed(0)
    x, weight = (
        torch.randn(64, 16, generator=gen, requires_grad=True),
        torch.randn(40, 16, generator=gen, requires_grad=True),
    )
    expected = [t.clone() for t in step(x, weight)]
    torch._dynamo.reset()
    ReinplaceCounters.clear()
    try:
        with torch._inductor.config.patch(force_disable_caches=True):
            # the backward() call inside step breaks the graph: the autograd function compiles forward and backward
            got, code = run_and_get_code(torch.compile(step), x, weight)
    finally:
        torch._dynamo.reset()
    assert ReinplaceCounters.get_total_missed() == 0
    assert sum(c.count("llama_recipe.mm_into.default(") for c in code) == 8
    assert not any("addmm" in c for c in code)
    for a, b in zip(got, expected, strict=True):
        torch.testing.assert_close(a, b)
