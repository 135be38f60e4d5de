"""Run under TRITON_INTERPRET=1 by tests/test_round_four_cpu.py: issue 60's sweep (``sweep_ops.SWEEP``) on CPU. Each
kernel registers and runs against its PyTorch reference on every check shape (its Triton kernels in the
interpreter; CUDA C++ ones are registered and dry-run by the CPU tests, and run on the device). Prints one line per
kernel: ``<name>: ran`` with its shapes, ``<name>: skipped (<why>)`` where its package is not installed, or
``<name>: interpreter limit (<why>)`` for a kernel Triton's interpreter cannot run (checked to fail that way and
no other; the device runs it)."""

import sys

import torch
from sweep_ops import SWEEP, run_forms

NS = "t_sweep_interp"
# Liger's norms take rsqrt from triton.language.extra.libdevice, which Triton 3.9's interpreter returns None for
# (the next arithmetic on it fails): the kernel's values come from the device run.
RSQRT = ("libdevice.rsqrt is None in Triton's interpreter", ("NoneType", "cannot convert None"))
LIMITS = {"liger_poly_norm": RSQRT, "liger_modulated_rms_norm": RSQRT}
torch.manual_seed(0)
only = set(sys.argv[1:])
for name, e in SWEEP.items():
    if only and name not in only:
        continue
    try:
        op = e.build(NS)
    except ImportError as err:
        print(f"{name}: skipped ({err})")
        continue
    if op.record.flavor != "triton":
        print(f"{name}: registered ({op.record.flavor}; runs on the device)")
        continue
    if name in LIMITS:
        why, said = LIMITS[name]
        try:
            op(*e.inputs(e.shapes[0], torch.float32, "cpu"))
        except Exception as err:  # only the interpreter's known failure is accepted
            if not any(w in str(err) for w in said):
                raise
            print(f"{name}: interpreter limit ({why})")
            continue
    run_forms(name, op, "cpu")
    print(f"{name}: ran {', '.join(str(s) for s in e.shapes)} in {len(e.forms)} form(s)")
