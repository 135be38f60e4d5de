"""Which swapped-in piece of the opsmith Llama fails under torch.compile: each compiled alone (forward and
backward, parameters that require grad), on a GPU.

    python benchmarks/probes/llama_compile_parts.py
"""

from __future__ import annotations

import sys
import traceback

import torch

sys.path.insert(0, ".")
from examples.llama.kernels import llama_kernels
from examples.llama.model import FusedLinearCrossEntropy, Rope, swap_in


def main() -> None:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=1024, hidden_size=256, intermediate_size=512, num_hidden_layers=1,
                      num_attention_heads=4, num_key_value_heads=2, use_cache=False)  # fmt: skip
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)
    swap_in(model, "parts")
    ops = llama_kernels("parts")
    dev = {"device": "cuda", "dtype": torch.bfloat16}
    x = torch.randn(2, 64, 256, **dev, requires_grad=True)
    w = torch.randn(256, **dev, requires_grad=True)
    a, b = torch.randn(2, 64, 512, **dev, requires_grad=True), torch.randn(2, 64, 512, **dev, requires_grad=True)
    q, k = torch.randn(2, 4, 64, 64, **dev, requires_grad=True), torch.randn(2, 2, 64, 64, **dev, requires_grad=True)
    cos, sin = torch.randn(2, 64, 64, **dev), torch.randn(2, 64, 64, **dev)
    lm = torch.randn(1024, 256, **dev, requires_grad=True)
    tgt = torch.randint(0, 1024, (128,), device="cuda")
    parts = {
        "rms_norm": (lambda: ops["rms_norm"](x, w, 1e-6)[0].float().sum()),
        "swiglu": (lambda: ops["swiglu"](a, b).float().sum()),
        "rope": (lambda: sum(t.float().sum() for t in Rope.apply(q, k, cos, sin))),
        "flce": (lambda: FusedLinearCrossEntropy.apply(x.reshape(-1, 256), lm, tgt)),
        "model": (lambda: model(input_ids=tgt.view(2, 64), labels=tgt.view(2, 64)).loss),
    }
    for name, f in parts.items():
        torch._dynamo.reset()
        try:
            torch.compile(f, fullgraph=True)().backward()
            torch.cuda.synchronize()
            from opsmith.flavors.triton_traced import _WHOLE

            print(f"{name}: ok; kept whole: {_WHOLE}", flush=True)
        except Exception as e:
            print(f"{name}: FAILED {type(e).__name__}: {str(e).splitlines()[0][:300]}", flush=True)
            traceback.print_exc(limit=-8)


if __name__ == "__main__":
    main()
