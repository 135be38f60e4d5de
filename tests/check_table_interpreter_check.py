"""Run by test_check_table_cpu.py with TRITON_INTERPRET=1: ``opsmith check`` over the table of
``declared_ops.py`` on CPU, where the interpreter runs the kernels. Prints one JSON object: {case: {row: [result,
detail]}}, and the DeclarationWarnings registration gave."""

import json
import sys
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))

from declared_ops import register_table

import opsmith as ok

with warnings.catch_warnings(record=True) as seen:
    warnings.simplefilter("always")
    cases = register_table("t_checktab")
said = sorted(str(w.message) for w in seen if issubclass(w.category, ok.DeclarationWarning))
only = sys.argv[1:] or list(cases)
out = {}
for name in only:
    torch.manual_seed(0)
    report = ok.check(cases[name], device="cpu", examples=4)
    print(report.table(), file=sys.stderr)
    out[name] = {c: [r, d] for c, r, d in report.rows}
print(json.dumps({"rows": out, "warnings": said}))
