"""Run by test_triton_cpu.py with TRITON_INTERPRET=1: every Triton example on CPU tensors, checked."""

import torch

from opsmith.catalog_shapes import register_shapes
from opsmith.catalog_tuned import register_tuned

ex = {**register_tuned("t_interp"), **{f"{k}_tt": v for k, v in register_shapes("t_interp").items() if k == "matmul"}}
n = 0
torch.manual_seed(0)
for name, e in ex.items():
    if not name.endswith("_tt"):
        continue
    for dt in e.dtypes:
        if name == "matmul_tt" and dt == torch.bfloat16:
            # Triton's interpreter computes bf16 tl.dot wrongly (3.9: errors of 1e11 for the bare kernel, no
            # opsmith involved); the GPU tests check bf16.
            continue
        for args in e.samples(torch.device("cpu"), dt):
            ref_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
            got, want = e.op(*args), e.reference(*ref_args)
            if got is None:  # in place: compare the mutated input
                got, want = args[0], ref_args[0]
            tol = {"atol": 2e-2, "rtol": 2e-2} if dt != torch.float32 else {"atol": 1e-5, "rtol": 1e-4}
            torch.testing.assert_close(got, want, **tol, msg=lambda m, n=name, d=dt: f"{n} {d}: {m}")
            n += 1
print(f"checked {n} cases")
