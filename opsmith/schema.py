"""The torch.library schema of a declared op: ``(Tensor x, float alpha) -> Tensor``."""

from __future__ import annotations

from .record import KernelRecord, ScalarArg

__all__ = ["derive_schema"]

# int scalars are SymInt so that a size passed under torch.compile(dynamic=True) stays symbolic.
_SCALAR_SCHEMA = {"float": "float", "int": "SymInt", "bool": "bool"}


def derive_schema(record: KernelRecord) -> str:
    """In-place inputs get their own alias set each (``Tensor(a!) x``), as torch.library requires."""
    parts = []
    alias = iter("abcdefghijklmnopqrstuvwxyz")
    for a in record.inputs:
        if isinstance(a, ScalarArg):
            parts.append(f"{_SCALAR_SCHEMA[a.py_type]} {a.name}")
        else:
            parts.append(f"Tensor({next(alias)}!) {a.name}" if a.mutates else f"Tensor {a.name}")
    n = len(record.outputs)
    ret = "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
    return f"({', '.join(parts)}) -> {ret}"
