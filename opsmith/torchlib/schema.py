"""The torch.library schema of a declared op: ``(Tensor x, float alpha) -> Tensor``."""

from __future__ import annotations

from ..declare.record import KernelRecord, ScalarArg

__all__ = ["derive_schema"]

# int scalars are SymInt so that a size passed under torch.compile(dynamic=True) stays symbolic.
_SCALAR_SCHEMA = {"float": "float", "int": "SymInt", "bool": "bool"}


def derive_schema(record: KernelRecord) -> str:
    """In-place inputs get their own alias set each (``Tensor(a!) x``), as torch.library requires; an optional
    input is ``Tensor? w``."""
    parts = []
    alias = iter("abcdefghijklmnopqrstuvwxyz")
    for a in record.inputs:
        if isinstance(a, ScalarArg):
            parts.append(f"{_SCALAR_SCHEMA[a.py_type]} {a.name}")
        else:
            t = f"Tensor({next(alias)}!)" if a.mutates else "Tensor"
            parts.append(f"{t}{'?' if a.optional else ''} {a.name}")
    n = len(record.outputs)
    ret = "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
    return f"({', '.join(parts)}) -> {ret}"
