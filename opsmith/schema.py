"""The torch.library schema of a declared op: ``(Tensor x, float alpha) -> Tensor``."""

from __future__ import annotations

from .record import KernelRecord, ScalarArg

__all__ = ["derive_schema"]

# int scalars are SymInt so that a size passed under torch.compile(dynamic=True) stays symbolic.
_SCALAR_SCHEMA = {"float": "float", "int": "SymInt", "bool": "bool"}


def derive_schema(record: KernelRecord) -> str:
    args = ", ".join(
        f"{_SCALAR_SCHEMA[a.py_type]} {a.name}" if isinstance(a, ScalarArg) else f"Tensor {a.name}"
        for a in record.inputs
    )
    n = len(record.outputs)
    ret = "Tensor" if n == 1 else "(" + ", ".join(["Tensor"] * n) + ")"
    return f"({args}) -> {ret}"
