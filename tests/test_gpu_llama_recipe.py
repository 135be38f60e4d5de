"""The Llama recipe on the GPU at small size: the opsmith-swapped model's loss and every parameter's gradient
against Hugging Face eager (bf16), eagerly and under torch.compile(fullgraph=True), the latter also with
``causal_sdpa`` (no materialized causal mask); benchmarks/bench_llama.py measures the full-size model."""

import copy

import pytest
import torch

pytestmark = pytest.mark.gpu
if not torch.cuda.is_available():
    pytest.skip("needs a CUDA GPU", allow_module_level=True)
pytest.importorskip("liger_kernel", reason="liger-kernel is not installed (a test extra)")
transformers = pytest.importorskip("transformers", reason="transformers is not installed (a test extra)")

from examples.llama.model import causal_sdpa, swap_in  # noqa: E402


@pytest.mark.parametrize(("compiled", "causal"), [(False, False), (True, False), (True, True)])
def test_loss_and_gradients_match_hugging_face(compiled, causal):
    from transformers.models.llama import modeling_llama

    cfg = transformers.LlamaConfig(vocab_size=4096, hidden_size=512, intermediate_size=1408, num_hidden_layers=2,
                                   num_attention_heads=8, num_key_value_heads=4, use_cache=False)  # fmt: skip
    torch.manual_seed(0)
    with torch.device("cuda"):
        ref = transformers.LlamaForCausalLM(cfg).to(torch.bfloat16)
    original = modeling_llama.apply_rotary_pos_emb
    ids = torch.randint(0, 4096, (2, 256), device="cuda")
    ids[0, :7] = 5
    want = ref(input_ids=ids, labels=ids).loss
    want.backward()
    mine = copy.deepcopy(ref)
    mine.zero_grad(set_to_none=True)
    try:
        swap_in(mine, "t_gpu_llama")
        if causal:
            causal_sdpa(mine)

        def step(i: torch.Tensor) -> torch.Tensor:
            return mine(input_ids=i, labels=i).loss

        loss = (torch.compile(step, fullgraph=True) if compiled else step)(ids)
        loss.backward()
    finally:
        modeling_llama.apply_rotary_pos_emb = original
    torch.testing.assert_close(loss.float(), want.float(), atol=2e-3, rtol=2e-3)
    for (name, p), q in zip(ref.named_parameters(), mine.parameters(), strict=True):
        err = (p.grad.float() - q.grad.float()).norm() / p.grad.float().norm()
        assert err < 3e-2, (name, float(err))
