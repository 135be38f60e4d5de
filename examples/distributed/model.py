"""A Llama-style decoder stack whose norms are opsmith RMSNorm and whose MLP activation is the opsmith SwiGLU.

``tp_plan(mesh)`` is the tensor-parallel plan with sequence-parallel norms (as torchtitan lays out Llama):
the residual stream is split along the sequence, the norms run on sequence-sharded DTensors, attention and
MLP projections are column/row sharded, and the MLP's hidden activations reach SwiGLU as DTensors sharded
along the hidden axis.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from opsmith.ops.rmsnorm import RMSNorm

from .ops import swiglu_op


@dataclass(frozen=True)
class Config:
    vocab: int = 1024
    dim: int = 512
    n_layers: int = 4
    n_heads: int = 8
    hidden: int = 1408
    seq: int = 256
    norm_impl: str = "triton"


class Attention(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.head_dim = c.dim // c.n_heads
        self.wq, self.wk, self.wv, self.wo = (nn.Linear(c.dim, c.dim, bias=False) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        # -1 heads: under tensor parallelism each rank holds n_heads / tp of them.
        q, k, v = (w(x).view(b, s, -1, self.head_dim).transpose(1, 2) for w in (self.wq, self.wk, self.wv))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(y.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.w1 = nn.Linear(c.dim, c.hidden, bias=False)  # gate
        self.w3 = nn.Linear(c.dim, c.hidden, bias=False)  # up
        self.w2 = nn.Linear(c.hidden, c.dim, bias=False)
        self.swiglu = swiglu_op()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(self.swiglu(self.w1(x), self.w3(x)))


class Block(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(c.dim, eps=1e-6, impl=c.norm_impl)
        self.attention = Attention(c)
        self.ffn_norm = RMSNorm(c.dim, eps=1e-6, impl=c.norm_impl)
        self.feed_forward = FeedForward(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x))
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    def __init__(self, c: Config) -> None:
        super().__init__()
        self.tok_embeddings = nn.Embedding(c.vocab, c.dim)
        self.layers = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.norm = RMSNorm(c.dim, eps=1e-6, impl=c.norm_impl)
        self.output = nn.Linear(c.dim, c.vocab, bias=False)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h)
        return self.output(self.norm(h))


def tp_plan(model: Transformer, mesh) -> None:
    """Tensor parallel with sequence-parallel norms, applied in place."""
    from torch.distributed.tensor import Replicate, Shard
    from torch.distributed.tensor.parallel import (
        ColwiseParallel,
        PrepareModuleInput,
        RowwiseParallel,
        SequenceParallel,
        parallelize_module,
    )

    parallelize_module(model, mesh, {
        "tok_embeddings": RowwiseParallel(input_layouts=Replicate(), output_layouts=Shard(1)),
        "norm": SequenceParallel(),
        "output": ColwiseParallel(input_layouts=Shard(1), output_layouts=Replicate()),
    })  # fmt: skip
    for block in model.layers:
        parallelize_module(block, mesh, {
            "attention_norm": SequenceParallel(),
            "attention": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            "attention.wq": ColwiseParallel(), "attention.wk": ColwiseParallel(), "attention.wv": ColwiseParallel(),
            "attention.wo": RowwiseParallel(output_layouts=Shard(1)),
            "ffn_norm": SequenceParallel(),
            "feed_forward": PrepareModuleInput(input_layouts=(Shard(1),), desired_input_layouts=(Replicate(),)),
            # DTensor outputs (use_local_output=False): SwiGLU meets DTensors sharded along the hidden axis.
            "feed_forward.w1": ColwiseParallel(use_local_output=False),
            "feed_forward.w3": ColwiseParallel(use_local_output=False),
            "feed_forward.w2": RowwiseParallel(output_layouts=Shard(1)),
        })  # fmt: skip
