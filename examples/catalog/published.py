"""Triton kernels in the styles the tutorials publish, declared as a newcomer would declare them: a fused softmax
and an autotuned matmul, a split-K style sum under ``@triton.autotune(reset_to_zero=...)`` and ``@triton.heuristics``,
and a row max whose block size a heuristic picks (``kernels/published_triton.py``).

``register_published(ns)`` returns ``{name: CheckCase}`` like ``catalog.register_all`` (empty without Triton).
"""

from __future__ import annotations

import torch

from opsmith import Autotune, CheckCase, Config, Dim, DimSize, Grid, InputDecl, Numel, OutputDecl, Stride

from .basic import _rand

__all__ = ["register_published"]


def register_published(ns: str) -> dict[str, CheckCase]:
    from .tuned import triton_available

    if not triton_available():
        return {}
    from opsmith import triton_op

    from .kernels import published_triton as pt

    ex: dict[str, CheckCase] = {}
    # The tutorial launches min(rows, programs that fit) persistent programs with num_warps=8 and
    # num_stages 4 or 2 by shared memory; here both stage counts are configs, and tuning picks.
    softmax = triton_op(
        f"{ns}::softmax", pt.softmax_kernel,
        inputs=[InputDecl("input", shape=("R", "C"))], outputs=[OutputDecl("output", shape=("R", "C"))],
        extras=[Stride("input", 0, name="input_row_stride"), Dim("C", name="output_row_stride"),
                Dim("R", name="n_rows"), Dim("C", name="n_cols"), DimSize("input", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=Grid(grid=("min(R, sm_count * 4)",)),
        autotune=Autotune([Config(num_warps=8, num_stages=4), Config(num_warps=8, num_stages=2)]),
    )  # fmt: skip
    ex["softmax"] = CheckCase(softmax, lambda s, dt, dev: (_rand(*s, device=dev, dtype=dt),),
                              lambda x: torch.softmax(x.float(), -1).to(x.dtype), ((7, 100), (33, 1000)),
                              (torch.float32, torch.float16))  # fmt: skip
    matmul = triton_op(
        f"{ns}::matmul", pt.matmul_kernel,
        inputs=[InputDecl("a", shape=("M", "K"), dtype=torch.float16), InputDecl("b", shape=("K", "N"),
                                                                                 dtype=torch.float16)],
        outputs=[OutputDecl("c", shape=("M", "N"))],
        extras=[Dim("M"), Dim("N"), Dim("K"), Stride("a", 0, name="stride_am"), Stride("a", 1, name="stride_ak"),
                Stride("b", 0, name="stride_bk"), Stride("b", 1, name="stride_bn"),
                Stride("c", 0, name="stride_cm"), Stride("c", 1, name="stride_cn")],
        geometry=Grid(grid=("cdiv(M, BLOCK_SIZE_M) * cdiv(N, BLOCK_SIZE_N)",)),
        constexprs={"ACTIVATION": ""},
    )  # fmt: skip
    ex["matmul"] = CheckCase(matmul, lambda s, dt, dev: (_rand(s[0], s[1], device=dev, dtype=dt),
                                                         _rand(s[1], s[2], device=dev, dtype=dt)),
                             lambda a, b: (a.float() @ b.float()).to(a.dtype), ((64, 96, 80), (129, 257, 65)),
                             (torch.float16,), lowp_tol={"atol": 2e-2, "rtol": 2e-2})  # fmt: skip
    total = triton_op(
        f"{ns}::sum", pt.sum_kernel, inputs=[InputDecl("x")], outputs=[OutputDecl("out", shape=(1,), init=0,
                                                                                  dtype=torch.float32)],
        extras=[Numel("x", name="n_elements")], geometry=Grid(grid=("cdiv(numel(x), BLOCK)",)),
    )  # fmt: skip
    ex["sum"] = CheckCase(total, lambda s, dt, dev: (_rand(*s, device=dev, dtype=dt),),
                          lambda x: x.float().sum().reshape(1), ((1000,), (4096,), (3, 700)),
                          (torch.float32, torch.float16), tol={"atol": 1e-3, "rtol": 1e-4})  # fmt: skip
    rowmax = triton_op(
        f"{ns}::rowmax", pt.rowmax_kernel, inputs=[InputDecl("x", shape=("R", "C"))],
        outputs=[OutputDecl("y", shape=("R",)), OutputDecl("flag", shape=("R",), dtype=torch.int32)],
        extras=[Dim("R", name="n_rows"), Dim("C", name="n_cols")], geometry=Grid(grid=("R",)),
    )  # fmt: skip

    def rowmax_ref(x):
        wide = int(x.shape[1] > 1024 and x.shape[0] % 2 == 0)
        return x.amax(-1), torch.full((x.shape[0],), wide, dtype=torch.int32, device=x.device)

    ex["rowmax"] = CheckCase(rowmax, lambda s, dt, dev: (_rand(*s, device=dev, dtype=dt),), rowmax_ref,
                             ((6, 100), (4, 2000), (3, 2000)), (torch.float32,))  # fmt: skip
    return ex
