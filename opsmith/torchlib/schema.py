"""The torch.library schema of a declared op: ``(Tensor x, float alpha) -> Tensor``."""

from __future__ import annotations

from ..declare.record import KernelRecord, ScalarArg

__all__ = ["derive_schema"]

# int scalars are SymInt so that a size passed under torch.compile(dynamic=True) stays symbolic.
_SCALAR_SCHEMA = {"float": "float", "int": "SymInt", "bool": "bool"}


def derive_schema(record: KernelRecord) -> str:
    """In-place inputs get their own alias set each (``Tensor(a!) x``), as torch.library requires; an optional
    input is ``Tensor? w``; an optional output is ``Tensor?``, asked for by ``bool return_<name>=False``
    (positional with a default, last, so calls that leave it out read as before)."""
    parts = []
    alias = iter("abcdefghijklmnopqrstuvwxyz")
    for a in record.inputs:
        if isinstance(a, ScalarArg):
            parts.append(f"{_SCALAR_SCHEMA[a.py_type]} {a.name}{'=False' if a.flag else ''}")
        else:
            t = f"Tensor({next(alias)}!)" if a.mutates else "Tensor"
            parts.append(f"{t}{'?' if a.optional else ''} {a.name}")
    outs = ["Tensor?" if o.when is not None else "Tensor" for o in record.outputs]
    ret = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
    return f"({', '.join(parts)}) -> {ret}"
