"""The ops of ``declared_kernels.py`` declared as a user would, each with its ``CheckCase``: the table that
``opsmith check``'s own tests run (``check_table_interpreter_check.py`` on CPU, ``test_gpu_check_table.py``).

Correct declarations: ``vec4`` (a precondition, a dtype set, an int and a float scalar), ``rms_rows`` (a float32
statistic beside a differentiable output), ``colsum`` (non-empty output over zero rows, ``init=0``), and the two
declarations opsmith corrects from the kernel's body (``rows_scale``: an unread weight stride; ``pair_add``: one
tensor's stride addressing another). Wrong ones, kept wrong with ``silence=``: the same two, silenced.
"""

from __future__ import annotations

import torch

import opsmith as ok

__all__ = ["register_table"]


def _rand(shape, dtype, device, scale=1.0):
    return (torch.rand(shape, device=device) * 2 - 1).mul_(scale).to(dtype)


def _rows_scale(ns: str, name: str, silence: tuple = (), w_dim: str = "N") -> ok.Op:
    from declared_kernels import rows_scale_kernel

    return ok.triton_op(
        f"{ns}::{name}", rows_scale_kernel,
        inputs=[ok.InputDecl("X", shape=("R", "N")), ok.InputDecl("W", shape=(w_dim,), dtype="X")],
        outputs=[ok.OutputDecl("Y", ok.SameAs("X"))],
        extras=[ok.Stride("Y", 0, name="Y_row_stride"), ok.Stride("X", 0, name="X_row_stride"),
                ok.Stride("W", 0, name="W_row_stride"), ok.Dim("N", name="n_cols"),
                ok.DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=ok.Reduction(reduce_dims=(-1,)), silence=silence)  # fmt: skip


def _pair_add(ns: str, name: str, silence: tuple = ()) -> ok.Op:
    from declared_kernels import pair_add_kernel

    return ok.triton_op(
        f"{ns}::{name}", pair_add_kernel,
        inputs=[ok.InputDecl("A", shape=("R", "N")), ok.InputDecl("B", shape=("R", "N"), dtype="A")],
        outputs=[ok.OutputDecl("C", ok.SameAs("A"))],
        extras=[ok.Stride("A", 0, name="stride_a"), ok.Stride("B", 0, name="stride_b"), ok.Stride("C", 0, name="stride_c"),
                ok.Dim("N", name="n_cols"), ok.DimSize("A", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=ok.Reduction(reduce_dims=(-1,)), silence=silence)  # fmt: skip


def _rms_backward(grad_y, x, w, rstd):
    xf, wf, g = x.float(), w.float(), grad_y.float()
    normed = xf * rstd[:, None]
    gw = g * wf
    dx = rstd[:, None] * (gw - normed * (gw * normed).mean(-1, keepdim=True))
    return dx.to(x.dtype), (g * normed).sum(0).to(w.dtype)


def _rms_reference(x, w, eps):
    rstd = torch.rsqrt(x.float().pow(2).mean(-1) + eps)
    return (x.float() * rstd[:, None] * w.float()).to(x.dtype), rstd


def register_table(ns: str) -> dict[str, ok.CheckCase]:
    """{name: CheckCase}; the ``wrong_*`` ones are declarations a check must fail, naming the cause."""
    from declared_kernels import colsum_kernel, rms_rows_kernel, vec4_kernel

    two = ((5, 300), (3, 64))
    cases: dict[str, ok.CheckCase] = {}
    vec4 = ok.triton_op(
        f"{ns}::vec4", vec4_kernel,
        inputs=[ok.InputDecl("X", shape=("R", "C"), dtype={torch.float32, torch.float16}),
                ok.ScalarInput("alpha", float), ok.ScalarInput("shift", int)],
        outputs=[ok.OutputDecl("Y", ok.SameAs("X"))], extras=[ok.Dim("C", name="n_cols")],
        geometry=ok.Grid(grid=("R", "cdiv(C, 4)")),
        requires=[ok.Divisible("C", 4, why="four columns per program, without masks")])  # fmt: skip
    # Sizes the kernel cannot take (7, 301): check fits them to whole groups of 4.
    cases["vec4"] = ok.CheckCase(vec4, lambda s, dt, dev: (_rand(s, dt, dev), 1.5, int(torch.randint(1, 99, ()))),
                                 lambda x, alpha, shift: (alpha * x.float() + shift).to(x.dtype),
                                 shapes=((7, 301), (2, 18)), dtypes=(torch.float32, torch.float16))  # fmt: skip
    rms = ok.triton_op(
        f"{ns}::rms_rows", rms_rows_kernel,
        inputs=[ok.InputDecl("X", shape=("R", "N")), ok.InputDecl("W", shape=("N",), dtype="X"),
                ok.ScalarInput("eps", float)],
        outputs=[ok.OutputDecl("Y", ok.SameAs("X")), ok.OutputDecl("RSTD", shape=("R",), dtype=torch.float32)],
        extras=[ok.Dim("N", name="n_cols"), ok.DimSize("X", -1, name="BLOCK_SIZE", bucket="pow2")],
        geometry=ok.Reduction(reduce_dims=(-1,)),
        backward=ok.Backward(_rms_backward, args=("grad_Y", "X", "W", "RSTD"), grads=("X", "W")))  # fmt: skip
    cases["rms_rows"] = ok.CheckCase(rms, lambda s, dt, dev: (_rand(s, dt, dev), _rand(s[-1:], dt, dev), 1e-6),
                                     _rms_reference, shapes=two, tol=1e-4)  # fmt: skip
    colsum = ok.triton_op(
        f"{ns}::colsum", colsum_kernel, inputs=[ok.InputDecl("X", shape=("R", "C"))],
        outputs=[ok.OutputDecl("OUT", shape=("C",), dtype=torch.float32, init=0)],
        extras=[ok.Dim("R", name="n_rows"), ok.Dim("C", name="n_cols")], constexprs={"BLOCK_SIZE": 64},
        geometry=ok.Grid(grid=("cdiv(C, 64)",)))  # fmt: skip
    cases["colsum"] = ok.CheckCase(colsum, lambda s, dt, dev: (_rand(s, dt, dev),), lambda x: x.float().sum(0),
                                   shapes=two, tol=1e-4)  # fmt: skip

    def ab(s, dt, dev):
        return _rand(s, dt, dev), _rand(s, dt, dev)

    def xw(s, dt, dev):
        return _rand(s, dt, dev), _rand(s[-1:], dt, dev)

    def scale(x, w):
        return x * w

    def add(a, b):
        return a + b

    cases["rows_scale"] = ok.CheckCase(_rows_scale(ns, "rows_scale"), xw, scale, shapes=two)
    cases["pair_add"] = ok.CheckCase(_pair_add(ns, "pair_add"), ab, add, shapes=two)
    cases["wrong_rows_scale"] = ok.CheckCase(_rows_scale(ns, "wrong_rows_scale", silence=("W_row_stride",)), xw,
                                             scale, shapes=two)  # fmt: skip
    cases["wrong_pair_add"] = ok.CheckCase(_pair_add(ns, "wrong_pair_add", silence=("stride_a", "stride_b")), ab,
                                           add, shapes=two)  # fmt: skip
    return cases
