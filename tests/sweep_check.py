"""``opsmith check`` over issue 60's sweep (``sweep_ops.SWEEP``): every kernel's rows, on the device (CUDA) or on CPU
under TRITON_INTERPRET=1 (Triton kernels only). Prints each kernel's table, then one summary line per kernel:
``<name>: <passed> passed, <failed> failed, <skipped> skipped``, and ``unexplained FAIL: ...`` for any FAIL or
ERROR row not listed in ``EXPLAINED`` with its reason; exits 1 when there is one. Arguments: kernel names (all when
none); ``--examples N`` for hypothesis's draws (default 10)."""

import os
import sys

import torch
from sweep_ops import SWEEP, case_of

import opsmith as ok

#: (kernel, row) -> why a FAIL there is the kernel's or the case's own, not opsmith's. Empty: none is expected.
EXPLAINED: dict[tuple[str, str], str] = {}
#: Kernels Triton's interpreter cannot run (tests/sweep_interpreter_check.py checks they fail that way only).
INTERPRETER_LIMITS = {"liger_poly_norm", "liger_modulated_rms_norm"}

args = sys.argv[1:]
examples = 10
if "--examples" in args:
    k = args.index("--examples")
    examples = int(args[k + 1])
    del args[k : k + 2]
# Under TRITON_INTERPRET=1 the kernels are interpreted: CPU tensors, even on a machine with a GPU
device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" or not torch.cuda.is_available() else "cuda"
unexplained, lines = [], []
for name, e in SWEEP.items():
    if args and name not in args:
        continue
    try:
        op = e.build("t_sweep_check")
    except ImportError as err:
        lines.append(f"{name}: skipped ({err})")
        continue
    if device == "cpu" and (op.record.flavor != "triton" or name in INTERPRETER_LIMITS):
        lines.append(f"{name}: not run on CPU ({'CUDA C++' if op.record.flavor != 'triton' else 'interpreter limit'})")
        continue
    report = ok.check(case_of(name, op), device=device, examples=examples)
    print(report.table(), flush=True)
    counts = {r: sum(1 for _, res, _ in report.rows if res == r) for r in ("pass", "FAIL", "ERROR", "skip", "traced")}
    lines.append(f"{name}: {counts['pass']} passed, {counts['FAIL'] + counts['ERROR']} failed, "
                 f"{counts['skip'] + counts['traced']} skipped")  # fmt: skip
    for row, res, detail in report.failures:
        if (name, row) not in EXPLAINED:
            unexplained.append(f"{name} {row} {res}: {detail[:300]}")
print("\n".join(lines))
for u in unexplained:
    print(f"unexplained FAIL: {u}")
sys.exit(1 if unexplained else 0)
