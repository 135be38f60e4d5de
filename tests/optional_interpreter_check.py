"""Run by test_optional_cpu.py with TRITON_INTERPRET=1: cross-entropy kernels whose optional buffers are passed
as None or given (class weights, z-loss), ours in Liger's style and, where liger-kernel is installed, Liger's own
(unweighted: its kernel converts its float scalars with ``.to``, which the interpreter's Python floats lack),
against PyTorch: the loss, the gradient written into the logits, the z-loss; outputs poisoned first."""

import torch

from examples.catalog.optional import ce_reference, liger_cross_entropy, register_optional

ops = register_optional("t_opt_interp")
torch.manual_seed(0)
n = 0
for weighted in (False, True):
    for with_z in (False, True):
        for rows, v in ((6, 40), (9, 130)):
            x, y = torch.randn(rows, v), torch.randint(0, v, (rows,))
            y[1] = -100  # an ignored row
            w = torch.rand(v) + 0.5 if weighted else None
            keep = y != -100
            total = float(w[y[keep]].sum()) if weighted else float(keep.sum())
            loss_want, grad_want, z_want = ce_reference(x, y, w)
            z = torch.full((rows,), float("nan")) if with_z else None
            xx = x.clone()
            loss = ops["ce_rows"](xx, y, w, z, total, -100)
            torch.testing.assert_close(loss.sum(), loss_want, atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(xx, grad_want, atol=1e-5, rtol=1e-5)
            if with_z:
                torch.testing.assert_close(z, z_want, atol=1e-4, rtol=1e-4)
            n += 1
try:
    liger = liger_cross_entropy("t_opt_interp")
except ImportError:
    liger = None
skipped = ""


def run_liger() -> int:
    done = 0
    for with_z in (False, True):
        x, y = torch.randn(6, 40), torch.randint(0, 40, (6,))
        y[2] = -100
        kept = int((y != -100).sum())
        loss_want, grad_want, _ = ce_reference(x, y, None)
        z = torch.full((6,), float("nan")) if with_z else None
        xx = x.clone()
        loss = liger(xx, y, None, z, None, None, kept, float(kept), 0.0, -100, 0.0, 0.0)
        torch.testing.assert_close(loss.sum(), loss_want, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(xx, grad_want, atol=1e-5, rtol=1e-5)
        if with_z:  # lse_square_scale 0: a z-loss of 0; an ignored row's entry is not written (Liger zeroes it)
            keep = y != -100
            assert torch.equal(z[keep], torch.zeros(5)) and z[~keep].isnan().all(), z
        done += 1
    return done


if liger is not None:
    from triton.runtime.errors import InterpreterError

    try:
        n += run_liger()
    except InterpreterError as e:  # Triton 3.6's interpreter passes a runtime int as a 1-element array
        if "only 0-dimensional arrays" not in str(e):
            raise
        skipped = f": this Triton's interpreter cannot run it ({e}; Triton 3.9's can)"
print(f"checked {n} cases ({'with' if liger is not None and not skipped else 'without'} Liger's own kernel{skipped})")
