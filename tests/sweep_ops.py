"""Issue 60's sweep: the seventeen published kernels it was filed from, wrapped unchanged and declared as a user
would, each with an inputs builder and a PyTorch reference, as ``opsmith check`` cases. Liger-Kernel's are taken
from its package (a test extra); those whose package is not installed here (fla-core, unsloth, llm.c's C file) are
ours in their style (``sweep_kernels.py``, ``round_four_kernels.py``, ``round_four_cuda.py``).

``SWEEP``: name -> (the op's builder, ``inputs(shape, dtype, device)``, reference, check shapes). Run by
tests/sweep_interpreter_check.py (CPU, Triton's interpreter) and tests/test_gpu_round_four.py (the device)."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import round_four_kernels as K
import sweep_kernels as S
import torch

import opsmith as ok

__all__ = ["SWEEP", "Entry", "case_of", "liger", "run_forms"]

F32 = torch.float32


class Entry:
    """A sweep kernel: its op's builder, its check case's inputs and reference, its shapes; ``forms``: every input
    builder the runs try (the case's, and the forms its optional tensors take: absent, packed sequences)."""

    def __init__(self, build: Callable[[str], Any], inputs: Callable, reference: Callable, shapes: list,
                 package: str = "", forms: tuple = ()) -> None:  # fmt: skip
        self.build, self.inputs, self.reference, self.shapes, self.package = build, inputs, reference, shapes, package
        self.forms = (inputs, *forms)


def fla(module: str, name: str) -> Any:
    """flash-linear-attention's kernel from fla-core (ImportError where it is not installed)."""
    import importlib

    return getattr(importlib.import_module(f"fla.modules.{module}"), name)


def liger(module: str, name: str) -> Any:
    """Liger-Kernel's kernel from its package (ImportError where liger-kernel is not installed)."""
    import importlib

    return getattr(importlib.import_module(f"liger_kernel.ops.{module}"), name)


def _rows(x: Any) -> Any:
    return x.reshape(-1, x.shape[-1])


# -- Liger-Kernel 0.8.5, from its package ------------------------------------------------------------------------


def _softmax(ns: str) -> Any:
    return ok.triton_op(f"{ns}::liger_softmax", liger("softmax", "_softmax_single_block_forward_kernel"),
        inputs=[ok.InputDecl("X", F32, shape=("R", "N"))], outputs=[ok.OutputDecl("Y", ok.SameAs("X"))],
        extras=[ok.Stride("Y", 0, name="Y_row_stride"), ok.Stride("X", 0, name="X_row_stride"),
                ok.Dim("N", name="n_cols"), ok.DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=ok.Reduction(reduce_dims=(-1,)))  # fmt: skip


def _kl_div(ns: str) -> Any:
    # reduction="none" (0): the loss per element; Liger's host loops the row in blocks of at most 16384
    return ok.triton_op(f"{ns}::liger_kl_div", liger("kl_div", "_kldiv_kernel_forward"),
        inputs=[ok.InputDecl("y", F32, shape=("BT", "V")), ok.InputDecl("gt", F32, shape=("BT", "V")),
                ok.ScalarInput("eps", float)],
        outputs=[ok.OutputDecl("loss", ok.SameAs("y"))],
        extras=[ok.Stride("y", 0, name="y_stride"), ok.Stride("gt", 0, name="gt_stride"),
                ok.Stride("loss", 0, name="loss_stride"), ok.Dim("V", name="n_cols")],
        geometry=ok.Grid(grid=("BT",)), constexprs={"BLOCK_SIZE": 1024, "reduction": 0})  # fmt: skip


def _tvd(ns: str) -> Any:
    # the label pointer is moved before HAS_LABEL says whether it is read (absent="dummy"); reduction "none"
    return ok.triton_op(f"{ns}::liger_tvd", liger("tvd", "_tv_distance_kernel"),
        inputs=[ok.InputDecl("p", F32, shape=("BT", "V")), ok.InputDecl("q", F32, shape=("BT", "V")),
                ok.InputDecl("label", torch.int64, shape=("BT",), optional=True, absent="dummy"),
                ok.ScalarInput("scale", float)],
        outputs=[ok.OutputDecl("loss", ok.SameAs("p")), ok.OutputDecl("grads", ok.SameAs("p"))],
        extras=[ok.Stride("p", 0, name="p_stride"), ok.Stride("q", 0, name="q_stride"),
                ok.Stride("loss", 0, name="loss_stride"), ok.Stride("grads", 0, name="grads_stride"),
                ok.Dim("V", name="n_cols"), ok.Present("label", name="HAS_LABEL")],
        geometry=ok.Grid(grid=("BT",)), constexprs={"ignore_index": -100, "BLOCK_SIZE": 1024, "reduction": 0})  # fmt: skip


def _poly_norm(ns: str) -> Any:
    return ok.triton_op(f"{ns}::liger_poly_norm", liger("poly_norm", "_poly_norm_forward_kernel"),
        inputs=[ok.InputDecl("X", F32, shape=("R", "N")), ok.InputDecl("W", F32, shape=(3,)),
                ok.InputDecl("B", F32, shape=(1,)), ok.ScalarInput("eps", float)],
        outputs=[ok.OutputDecl("Y", ok.SameAs("X")), ok.OutputDecl("RSTD", ("R", 3), dtype=F32)],
        extras=[ok.Stride("Y", 0, name="Y_row_stride"), ok.Stride("X", 0, name="X_row_stride"),
                ok.Stride("RSTD", 0, name="RSTD_row_stride"), ok.Dim("N", name="n_cols"),
                ok.DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=ok.Grid(grid=("R",)))  # fmt: skip


def _modulated_rms_norm(ns: str) -> Any:
    # X (M, P, N): M modulation rows (Scale, Shift) of P rows each; rows_per_modulation = P, compiled in
    return ok.triton_op(f"{ns}::liger_modulated_rms_norm", liger("modulated_rms_norm", "_modulated_rms_norm_forward_kernel"),
        inputs=[ok.InputDecl("X", F32, shape=("M", "P", "N")), ok.InputDecl("W", F32, shape=("N",)),
                ok.InputDecl("Scale", F32, shape=("M", "N")), ok.InputDecl("Shift", F32, shape=("M", "N"), optional=True),
                ok.ScalarInput("eps", float), ok.ScalarInput("offset", float)],
        outputs=[ok.OutputDecl("Y", ok.SameAs("X")), ok.OutputDecl("RSTD", ("M", "P"), dtype=F32)],
        extras=[ok.Stride("Y", 1, name="Y_row_stride"), ok.Stride("X", 1, name="X_row_stride"),
                ok.Const(0, name="W_row_stride"), ok.Stride("Scale", 0, name="Scale_row_stride"),
                ok.Stride("Shift", 0, name="Shift_row_stride"), ok.Stride("RSTD", 1, name="RSTD_row_stride"),
                ok.Dim("N", name="n_cols"), ok.Present("Shift", name="has_shift"),
                ok.Dim("P", name="rows_per_modulation"), ok.DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=ok.Grid(grid=("M * P",)), constexprs={"casting_mode": 0, "elementwise_affine": True})  # fmt: skip


def _mta_mask(ns: str) -> Any:
    # a constexpr named like a launch option (num_warps), set by the host as Liger's does
    return ok.triton_op(f"{ns}::liger_mta_mask", liger("multi_token_attention", "_mask_fwd_kernel"),
        inputs=[ok.InputDecl("scores", F32, shape=("N", "L", "L"))], outputs=[ok.OutputDecl("out", ok.SameAs("scores"))],
        extras=[ok.Stride(("scores", "out"), 0, name="stride_b"), ok.Stride(("scores", "out"), 1, name="stride_m"),
                ok.Stride(("scores", "out"), 2, name="stride_n"), ok.Dim("L", name="L")],
        geometry=ok.Grid(grid=("cdiv(L, BLOCK)", "cdiv(L, BLOCK)", "N")),
        constexprs={"mask_val": -1e9, "BLOCK": 32, "num_warps": 4})  # fmt: skip


def _relu_squared(ns: str) -> Any:
    # n_cols is a constexpr: one kernel per row length
    return ok.triton_op(f"{ns}::liger_relu_squared", liger("relu_squared", "_relu_squared_forward_kernel"),
        inputs=[ok.InputDecl("X", F32, shape=("R", "N"))], outputs=[ok.OutputDecl("Y", ok.SameAs("X"))],
        extras=[ok.Stride("Y", 0, name="Y_stride"), ok.Stride("X", 0, name="X_stride"), ok.Dim("N", name="n_cols"),
                ok.DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=ok.Grid(grid=("R",)))  # fmt: skip


def _sparsemax(ns: str) -> Any:
    # Liger's host sorts each row (descending) and passes both: the op takes x and its sorted rows
    return ok.triton_op(f"{ns}::liger_sparsemax", liger("sparsemax", "_sparsemax_forward_kernel"),
        inputs=[ok.InputDecl("x", F32, shape=("R", "N")), ok.InputDecl("sorted_x", F32, shape=("R", "N"))],
        outputs=[ok.OutputDecl("o", ok.SameAs("x"))],
        extras=[ok.Stride("x", 0, name="x_stride_row"), ok.Stride("sorted_x", 0, name="sorted_x_stride_row"),
                ok.Stride("o", 0, name="o_stride_row"), ok.Dim("N", name="n_cols"),
                ok.DimSize("x", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=ok.Grid(grid=("R",)), constexprs={"num_warps": 4})  # fmt: skip


def _llama4_rope(ns: str) -> Any:
    # q and k rotated in place; the rotary table is (S, Dh, 2) for a head dim of 2 * Dh (a size expression)
    return ok.triton_op(f"{ns}::liger_llama4_rope", liger("llama4_rope", "_llama4_rope_kernel"),
        inputs=[ok.InputDecl("q", F32, shape=("B", "S", "HQ", "2 * Dh"), mutates=True, contiguous="require"),
                ok.InputDecl("k", F32, shape=("B", "S", "HK", "2 * Dh"), mutates=True, contiguous="require"),
                ok.InputDecl("freqs_complex", F32, shape=("S", "Dh", 2)), ok.ScalarInput("imag_sign", float)],
        outputs=[],
        extras=[ok.Stride("q", 1, name="q_row_stride"), ok.Stride("k", 1, name="k_row_stride"),
                ok.Stride("q", 2, name="q_head_stride"), ok.Stride("k", 2, name="k_head_stride"),
                ok.Stride("freqs_complex", 0, name="freqs_row_stride"), ok.Dim("S", name="seq_len"),
                ok.Dim("B", name="batch_size"), ok.Dim("Dh", name="head_dim_half"), ok.Dim("HQ", name="n_q_heads"),
                ok.Dim("HK", name="n_k_heads")],
        geometry=ok.Grid(grid=("B * S", "max(HQ, HK)")), constexprs={"BLOCK_SIZE": 32})  # fmt: skip


def _jsd(ns: str) -> Any:
    from round_four_ops import liger_jsd

    return liger_jsd(ns)


# -- ours, in the style of packages not installed here --------------------------------------------------------------


def _l2norm(ns: str) -> Any:
    # fla's row kernel, autotuned over num_warps (its @triton.autotune configs become the op's)
    return ok.triton_op(f"{ns}::fla_l2norm", fla("norm.l2norm", "l2norm_fwd_kernel_row"),
        inputs=[ok.InputDecl("x", F32, shape=("T", "D")), ok.ScalarInput("eps", float)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x")), ok.OutputDecl("rstd", ("T",), dtype=F32)],
        extras=[ok.Dim("D", name="D"), ok.DimSize("x", -1, name="BD", bucket="pow2")],
        geometry=ok.Grid(grid=("T",)))  # fmt: skip


#: Sequences: B of them, or with cu_seqlens its numel - 1 (packed into one row of x).
SEQUENCES = "B + present(cu_seqlens) * (numel(cu_seqlens) - 1 - B)"


def _token_shift(ns: str) -> Any:
    # heuristics over two optional tensors (IS_VARLEN, USE_INITIAL_STATE) traced per call (item 1); the final
    # state an optional output its flag asks for (STORE_FINAL_STATE, item 5); one program per (sequence, token),
    # those past a packed sequence's end return
    return ok.triton_op(f"{ns}::fla_token_shift", fla("token_shift", "token_shift_fwd_kernel_short"),
        inputs=[ok.InputDecl("x", F32, shape=("B", "T", "D")),
                ok.InputDecl("cu_seqlens", torch.int32, shape=(None,), optional=True),
                ok.InputDecl("cache", F32, shape=(None, "D"), optional=True)],
        outputs=[ok.OutputDecl("y", ok.SameAs("x")), ok.OutputDecl("cache_out", (SEQUENCES, "D"), optional=True)],
        extras=[ok.Dim("T", name="T"), ok.Dim("D", name="D"), ok.DimSize("x", -1, name="BD", bucket="pow2"),
                ok.Present("cache_out", name="STORE_FINAL_STATE"), ok.Size("1 - min(T - 1, 1)", name="IS_DECODE")],
        geometry=ok.Grid(grid=(SEQUENCES, "T")))  # fmt: skip


def _unsloth_ce(ns: str) -> Any:
    # a heuristic over a float scalar's value would be refused: LOGIT_SCALE is an int here (0 or a whole scale)
    return ok.triton_op(f"{ns}::unsloth_cross_entropy", S.unsloth_cross_entropy_fwd,
        inputs=[ok.InputDecl("logits", F32, shape=("R", "V")), ok.InputDecl("labels", torch.int64, shape=("R",)),
                ok.ScalarInput("LOGIT_SCALE", int)],
        outputs=[ok.OutputDecl("loss", ("R",), dtype=F32), ok.OutputDecl("logsumexp", ("R",), dtype=F32)],
        extras=[ok.Stride("logits", 0, name="logits_row_stride"), ok.Dim("V", name="VOCAB_SIZE"),
                ok.DimSize("logits", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=ok.Grid(grid=("R",)))  # fmt: skip


def _encoder(ns: str) -> Any:
    return ok.cuda_kernel_op(f"{ns}::llmc_encoder", ok.KernelSpec(
        kernel_source=S.ENCODER, kernel_name="encoder_forward_kernel3",
        inputs=[ok.InputDecl("inp", shape=("B", "T")), ok.InputDecl("wte", shape=("V", "C")),
                ok.InputDecl("wpe", shape=("TMAX", "C"))],
        outputs=[ok.OutputDecl("out", ("B", "T", "C"))],
        extras=[ok.Dim("B"), ok.Dim("T"), ok.Dim("C")], geometry=ok.Elementwise(block=(256,)),
        requires=[ok.AtLeast("TMAX - T", 0, why="wpe holds one row per position")],
        silence=("V",)))  # the token table is indexed by data (inp): its size is free  # fmt: skip


def _classifier(ns: str) -> Any:
    from round_four_ops import cuda_optional_classifier

    return cuda_optional_classifier(ns, "llmc_fused_classifier")


def _unsloth_rope_flag(ns: str) -> Any:
    # unsloth's RoPE reads back the HAS_ROPE_INDICES flag its host passes, beside a heuristic deriving it (item 3)
    return ok.triton_op(f"{ns}::unsloth_rope_flag", K.add_readback,
        inputs=[ok.InputDecl("x", F32), ok.InputDecl("b", F32, optional=True)], outputs=[ok.OutputDecl("y", ok.SameAs("x"))],
        extras=[ok.Numel("x", name="n"), ok.Present("b", name="HAS_B")],
        geometry=ok.Grid(grid=("cdiv(numel(x), BLOCK)",)), constexprs={"BLOCK": 64})  # fmt: skip


# -- inputs and references ------------------------------------------------------------------------------------------


def _randn(shape: Any, dtype: Any, device: Any) -> Any:
    return torch.randn(shape, dtype=dtype, device=device)


def _kl_ref(y, gt, eps):
    return (gt * (torch.log(torch.clamp(gt, min=eps)) - y),)


def _tvd_ref(p, q, label, scale):
    loss, grads = 0.5 * (p - q).abs(), torch.where(p == q, 0.0, torch.where(p > q, 0.5, -0.5)) * scale
    if label is not None:
        keep = (label != -100)[:, None]
        loss, grads = loss * keep, grads * keep
    return loss, grads


def _poly_ref(X, W, B, eps):
    def norm(u):
        return u * torch.rsqrt((u * u).mean(-1, keepdim=True) + eps)

    Y = W[0] * norm(X**3) + W[1] * norm(X**2) + W[2] * norm(X) + B
    rstd = torch.stack([torch.rsqrt((u * u).mean(-1) + eps) for u in (X**3, X**2, X)], -1)
    return Y, rstd


def _modulated_ref(X, W, Scale, Shift, eps, offset):
    rstd = torch.rsqrt((X * X).mean(-1) + eps)
    Y = X * rstd[..., None] * (offset + W) * (1 + Scale[:, None, :])
    return Y + (Shift[:, None, :] if Shift is not None else 0), rstd


def _mask_ref(scores):
    L = scores.shape[-1]
    future = torch.ones(L, L, dtype=torch.bool, device=scores.device).triu(1)
    return (scores.masked_fill(future, -1e9),)


def _sparsemax_ref(x, sorted_x):
    z = sorted_x
    k = torch.arange(1, z.shape[-1] + 1, device=z.device, dtype=z.dtype)
    support = z > (z.cumsum(-1) - 1) / k
    kk = support.sum(-1, keepdim=True).clamp(min=1)
    tau = ((z * support).sum(-1, keepdim=True) - 1) / kk
    return (torch.clamp(x - tau, min=0),)


def _rope_inputs(shape, dtype, device):
    B, S, HQ, HK, Dh = shape
    return (_randn((B, S, HQ, 2 * Dh), dtype, device), _randn((B, S, HK, 2 * Dh), dtype, device),
            _randn((S, Dh, 2), dtype, device), 1.0)  # fmt: skip


def _rope_ref(q, k, freqs, imag_sign):
    f = torch.view_as_complex(freqs.contiguous()) if imag_sign == 1.0 else torch.view_as_complex(freqs).conj()
    for t in (q, k):
        c = torch.view_as_complex(t.reshape(*t.shape[:-1], t.shape[-1] // 2, 2).contiguous()) * f[None, :, None, :]
        t.copy_(torch.view_as_real(c).reshape(t.shape))
    return ()


def _jsd_ref(X, Y, label, n):
    from round_four_ops import jsd_reference

    return jsd_reference(X, Y, label, n)


def _l2_ref(x, eps):
    rstd = 1 / torch.sqrt((x * x).sum(-1) + eps)
    return x * rstd[:, None], rstd


def _shift_inputs(shape, dtype, device, cache=True, varlen=False, asked=True):
    B, T, D = shape
    if varlen:
        cu = torch.tensor([0, T // 3, T // 2, T], dtype=torch.int32, device=device)
        return _randn((1, T, D), dtype, device), cu, _randn((3, D), dtype, device) if cache else None, asked
    return _randn((B, T, D), dtype, device), None, _randn((B, D), dtype, device) if cache else None, asked


def _shift_ref(x, cu, cache, return_cache_out=False):
    """fla's own reference (no cache), the cache row as the first token's predecessor, the last token as the
    final state."""
    from fla.modules.token_shift import token_shift_ref

    y = token_shift_ref(x, cu)
    starts = [0] * x.shape[0] if cu is None else cu[:-1].tolist()
    ends = [x.shape[1]] * x.shape[0] if cu is None else cu[1:].tolist()
    rows = [(b, s, e) for b, (s, e) in enumerate(zip(starts, ends, strict=True))] if cu is None else \
        [(0, s, e) for s, e in zip(starts, ends, strict=True)]  # fmt: skip
    last = []
    for n, (b, s, e) in enumerate(rows):
        if cache is not None and e > s:
            y[b, s] = cache[n] - x[b, s]
        last.append(x[b, e - 1])
    final = torch.stack(last) if last else x.new_empty((0, x.shape[-1]))  # an empty batch: no sequences
    return y, final if return_cache_out else None


def _ce_inputs(shape, dtype, device):
    R, V = shape
    labels = torch.randint(0, V, (R,), device=device)
    labels[::3] = -100
    return _randn((R, V), dtype, device), labels, 0


def _ce_ref(logits, labels, scale):
    z = logits * scale if scale else logits
    lse = torch.logsumexp(z, -1)
    keep = labels != -100
    loss = torch.where(keep, lse - z.gather(-1, labels.clamp(min=0)[:, None])[:, 0], 0.0)
    return loss, lse


def _encoder_inputs(shape, dtype, device):
    B, T, C = shape
    V = 50
    return (torch.randint(0, V, (B, T), dtype=torch.int32, device=device), _randn((V, C), dtype, device),
            _randn((T + 3, C), dtype, device))  # fmt: skip


def _classifier_inputs(shape, dtype, device):
    R, V = shape
    return _randn((R, V), dtype, device), torch.randint(0, V, (R,), device=device), 0.5


def _classifier_ref(logits, targets, dloss, return_dlogits=False, return_probs=False):
    p = logits.softmax(-1)
    d = (p - torch.nn.functional.one_hot(targets, logits.shape[-1])) * dloss
    return (torch.nn.functional.cross_entropy(logits, targets, reduction="none"), d if return_dlogits else None,
            p if return_probs else None)  # fmt: skip


def _one(shape, dtype, device):
    return (_randn(shape, dtype, device),)


def _log_probs(shape, dtype, device):
    return _randn(shape, dtype, device).log_softmax(-1), _randn(shape, dtype, device).softmax(-1), 1e-10


def _tvd_inputs(shape, dtype, device, label=True):
    ids = torch.arange(shape[0], device=device) % 7
    ids[1::4] = -100  # ignored rows
    p, q = _randn(shape, dtype, device).softmax(-1), _randn(shape, dtype, device).softmax(-1)
    return p, q, ids if label else None, 0.25


def _poly_inputs(shape, dtype, device):
    return _randn(shape, dtype, device), _randn((3,), dtype, device), _randn((1,), dtype, device), 1e-6


def _modulated_inputs(shape, dtype, device, shift=True):
    M, N = shape[0], shape[-1]
    return (_randn(shape, dtype, device), _randn((N,), dtype, device), _randn((M, N), dtype, device),
            _randn((M, N), dtype, device) if shift else None, 1e-6, 0.5)  # fmt: skip


def _sorted_inputs(shape, dtype, device):
    x = _randn(shape, dtype, device)
    return x, x.sort(-1, descending=True).values


def _jsd_inputs(shape, dtype, device):
    return _randn(shape, dtype, device).log_softmax(-1), _randn(shape, dtype, device).log_softmax(-1), None, shape[0]


# fmt: off
SWEEP: dict[str, Entry] = {
    "liger_softmax": Entry(_softmax, _one, lambda x: (x.softmax(-1),), [(4, 100), (9, 1000)], "liger"),
    "liger_kl_div": Entry(_kl_div, _log_probs, _kl_ref, [(4, 100), (6, 3000)], "liger"),
    "liger_tvd": Entry(_tvd, _tvd_inputs, _tvd_ref, [(4, 100), (8, 3000)], "liger",
                       (partial(_tvd_inputs, label=False),)),
    "liger_poly_norm": Entry(_poly_norm, _poly_inputs, _poly_ref, [(4, 100), (9, 1000)], "liger"),
    "liger_modulated_rms_norm": Entry(_modulated_rms_norm, _modulated_inputs, _modulated_ref,
                                      [(2, 3, 64), (3, 4, 1000)], "liger", (partial(_modulated_inputs, shift=False),)),
    "liger_mta_mask": Entry(_mta_mask, _one, _mask_ref, [(2, 40, 40), (3, 100, 100)], "liger"),
    "liger_relu_squared": Entry(_relu_squared, _one, lambda x: (torch.relu(x) ** 2,), [(4, 100), (9, 1000)], "liger"),
    "liger_sparsemax": Entry(_sparsemax, _sorted_inputs, _sparsemax_ref, [(4, 100), (9, 1000)], "liger"),
    "liger_llama4_rope": Entry(_llama4_rope, _rope_inputs, _rope_ref, [(2, 5, 4, 2, 32), (1, 7, 8, 8, 64)], "liger"),
    "liger_jsd": Entry(_jsd, _jsd_inputs, _jsd_ref, [(4, 100), (6, 3000)], "liger"),
    "fla_l2norm": Entry(_l2norm, lambda s, dt, d: (_randn(s, dt, d), 1e-6), _l2_ref, [(5, 64), (9, 300)], "fla"),
    "fla_token_shift": Entry(_token_shift, _shift_inputs, _shift_ref, [(2, 6, 16), (3, 9, 40)], "fla",
                             (partial(_shift_inputs, cache=False), partial(_shift_inputs, varlen=True),
                              partial(_shift_inputs, cache=False, varlen=True, asked=False),
                              partial(_shift_inputs, asked=False))),
    "unsloth_cross_entropy": Entry(_unsloth_ce, _ce_inputs, _ce_ref, [(6, 100), (9, 1000)]),
    "unsloth_rope_flag": Entry(_unsloth_rope_flag, lambda s, dt, d: (_randn(s, dt, d), _randn(s, dt, d)),
                               lambda x, b: (x + b,), [(100,), (1000,)]),
    "llmc_encoder": Entry(_encoder, _encoder_inputs, lambda inp, wte, wpe: (wte[inp.long()] + wpe[: inp.shape[1]],),
                          [(2, 5, 16), (4, 64, 128)]),
    "llmc_fused_classifier": Entry(_classifier, _classifier_inputs, _classifier_ref, [(4, 100), (9, 1000)]),
}
# fmt: on


def case_of(name: str, op: Any, dtype: Any = F32) -> Any:
    """The entry's ``opsmith check`` case (float32; each kernel's own dtype)."""
    e = SWEEP[name]
    return ok.CheckCase(op, inputs=e.inputs, reference=e.reference, shapes=e.shapes, dtypes=[dtype], name=name)


def run_forms(name: str, op: Any, device: str) -> None:
    """The entry's op on every check shape in every form, against its reference: outputs (None where the reference
    says so) and the inputs it writes in place."""
    e = SWEEP[name]
    for shape, form in ((s, f) for s in e.shapes for f in e.forms):
        args = form(shape, torch.float32, device)
        want_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        want = e.reference(*want_args)
        got = op(*args)
        got = () if got is None else got if isinstance(got, tuple) else (got,)
        for k, (g, w) in enumerate(zip(got, want, strict=True)):
            where = f"{name} {shape} output {k}"
            if w is None:
                assert g is None, f"{where}: expected None"
                continue
            torch.testing.assert_close(g, w, atol=1e-4, rtol=1e-4, msg=lambda m, where=where: f"{where}: {m}")
        for a, w in zip(args, want_args, strict=True):  # written in place (RoPE)
            if isinstance(a, torch.Tensor) and a.is_floating_point():
                torch.testing.assert_close(a, w, atol=1e-4, rtol=1e-4)
