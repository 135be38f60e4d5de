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


@pytest.mark.parametrize(("compiled", "causal", "mode"), [(False, False, "kernel"), (True, False, "kernel"),
                                                           (True, True, "kernel"), (True, True, "reference"),
                                                           (True, True, "auto")])  # fmt: skip
def test_loss_and_gradients_match_hugging_face(compiled, causal, mode):
    """``mode``: what the ops with a reference trace as under torch.compile (kernels.py)."""
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
        swap_in(mine, f"t_gpu_llama_{mode}", compile=mode)
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


def test_the_references_agree_with_the_kernels():
    """Each op's ``reference=`` (what torch.compile traces for compile="reference", and what "auto" may pick)
    computes what its Liger kernel computes, on random bf16 inputs of a Llama's shapes."""
    from examples.llama.kernels import llama_kernels

    ops = llama_kernels("t_gpu_llama_refs")
    g = torch.Generator(device="cuda").manual_seed(0)

    def rnd(*shape):
        return torch.randn(*shape, generator=g, device="cuda").to(torch.bfloat16)

    x, w = rnd(2, 64, 512), rnd(512)
    cases = {"rms_norm": (x, w, 1e-6), "swiglu": (rnd(2, 64, 1408), rnd(2, 64, 1408)),
             "swiglu_backward": (rnd(128, 1408), rnd(128, 1408), rnd(128, 1408)),
             "rope": (rnd(2, 64, 8, 64), rnd(2, 64, 4, 64), rnd(1, 64, 32).repeat(1, 1, 2), rnd(1, 64, 32).repeat(1, 1, 2)),
             "rope_backward": (rnd(2, 64, 8, 64), rnd(2, 64, 4, 64), rnd(1, 64, 32).repeat(1, 1, 2),
                               rnd(1, 64, 32).repeat(1, 1, 2))}  # fmt: skip
    for name, args in cases.items():
        op = ops[name]
        mine = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        theirs = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        got, want = op(*mine), op.reference(*theirs)
        got = [*(got if isinstance(got, tuple) else [got] if got is not None else []), *mine[:3]]
        want = [*(want if isinstance(want, tuple) else [want] if want is not None else []), *theirs[:3]]
        for a, b in zip(got, want, strict=True):
            if isinstance(a, torch.Tensor):
                torch.testing.assert_close(a.float(), b.float(), atol=3e-2, rtol=2e-2, msg=name)
