"""The declaration checked against the kernel's body, at registration.

Three findings, each a ``DeclarationWarning`` naming the parameter or dimension, what opsmith does about it,
and the declaration to write instead (``silence=`` names what the user has judged: no warning, no change):

* **a declared extra the body never reads.** A ``Stride`` whose parameter is unread means the kernel addresses
  that axis as if dense (Liger's ``W_row_stride``: it loads ``W + cols``), so a strided tensor would give wrong
  values: opsmith stops letting that axis through at any stride (the tensor is copied to row-major there,
  ``layout.py``). An unread size (``Numel``, ``Dim``, ``DimSize``, ``Size``) is only reported.
* **one tensor's stride addressing another.** The tutorial attention offsets K, V and the output by Q's batch
  and head strides: the kernel is right only where they share Q's layout, so opsmith declares them as one
  ``Stride`` tuple (``layout.share_strides`` then makes them agree, or refuses).
* **a dimension named once.** A weight declared ``("M",)`` where the kernel reads ``N`` elements: no other
  tensor, output, extra or precondition names ``M`` and no extra passes the weight's size, so the kernel cannot
  know its length. Reported (a lookup table indexed by data legitimately has such a length: silence it).
"""

from __future__ import annotations

import os
import re
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..declare.spec import Dim, DimSize, Divisible, Grid, InputDecl, Numel, OutputDecl, Reduction, Size, Stride
from ..errors import DeclarationWarning, SpecError
from .reads import KernelReads

__all__ = ["Finding", "check_silence", "foreign_strides", "loop_only_sizes", "single_dims", "unread_extras"]

_IDENT = re.compile(r"[A-Za-z_]\w*")
_FUNCS = {"cdiv", "min", "max", "numel", "size", "stride", "sm_count", "lead", "prod", "pow2"}


@dataclass(frozen=True)
class Finding:
    """One disagreement: ``subject`` (what ``silence=`` names), the message, and for a stride the change."""

    subject: str
    message: str


def check_silence(op: str, silence: Any) -> tuple[str, ...]:
    if isinstance(silence, str) or not all(isinstance(n, str) for n in silence or ()):
        raise SpecError(op, "silence", f"{silence!r} is not a list of names.",
                        "name the kernel parameters or dimensions whose warning you have judged, e.g. "
                        "silence=('W_row_stride',).")  # fmt: skip
    return tuple(silence or ())


def warn(op: str, findings: Sequence[Finding], silence: Sequence[str]) -> None:
    level = _user_level()
    for f in findings:
        if f.subject not in silence:
            warnings.warn(DeclarationWarning(f"{op}: {f.message}"), stacklevel=level)


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # opsmith/


def _user_level() -> int:
    """The ``stacklevel`` (for the caller of this function) of the first frame outside opsmith: the user's
    registration call, whichever entry (``triton_op``, ``cuda_kernel_op``, a decorator) and depth led here. A
    fixed level pointed inside opsmith for every entry but one."""
    frame, level = sys._getframe(1), 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_PACKAGE + os.sep):
        frame, level = frame.f_back, level + 1
    return level


def _param_of_extra(record: Any, j: int) -> str | None:
    """The kernel parameter extra ``j`` fills (static extras: their declared name)."""
    p = next((p.name for p in record.params if p.role == "extra" and p.index == j), None)
    return p or record.extras[j].name


def _tensor_names(record: Any) -> dict[str, str]:
    """Record refs (``i0``, ``o1``) to declared names."""
    out = {f"i{k}": a.name for k, a in enumerate(record.tensor_inputs)}
    out.update({f"o{k}": o.name for k, o in enumerate(record.outputs)})
    return out


def _pointer_params(record: Any) -> dict[str, str]:
    """Kernel pointer parameter name -> record ref of the tensor it receives."""
    tensors = record.tensor_inputs
    out = {}
    for p in record.params:
        if p.ctype != "ptr" or not p.name:
            continue
        if p.role == "input":
            arg = record.inputs[p.index]
            out[p.name] = f"i{tensors.index(arg)}"
        elif p.role == "output":
            out[p.name] = f"o{p.index}"
    return out


def unread_extras(record: Any, reads: KernelReads, silence: Sequence[str]) -> tuple[Any, list[Finding]]:
    """Extras whose parameter the body never reads; an unread stride's axis stops being addressable."""
    names = _tensor_names(record)
    findings, drop = [], {}  # drop: tensor input index -> axes no longer passed at any stride
    covered = set()  # (ref, axis) that a stride the kernel does read describes (a shared one)
    for j, e in enumerate(record.extras):
        param = _param_of_extra(record, j)
        if isinstance(e.expr, list) and e.expr[0] == "stride" and (param not in reads.params or param in reads.read):
            covered |= {(r, e.expr[2]) for r in (e.expr[1], *e.same)}
    for j, e in enumerate(record.extras):
        param = _param_of_extra(record, j)
        kind = e.expr[0] if isinstance(e.expr, list) else "const"
        if not param or param not in reads.params or param in reads.read or kind in ("const", "present"):
            continue
        if kind == "stride":
            refs = [e.expr[1], *e.same]
            ins = [r for r in refs if r.startswith("i")]
            who = "/".join(names[r] for r in refs)
            if not ins:
                continue  # outputs are allocated contiguous: nothing can go wrong
            if all((r, e.expr[2]) in covered for r in ins):
                findings.append(Finding(param, (
                    f"the kernel never reads '{param}' (the declared {e.label}, read from {reads.where}); {who}'s "
                    f"stride along axis {e.expr[2]} reaches it through another stride {who} shares, so nothing "
                    f"changes. Declare instead: Const(0, name='{param}'), or silence=('{param}',).")))  # fmt: skip
                continue
            findings.append(Finding(param, (
                f"the kernel never reads '{param}' (the declared {e.label}, read from {reads.where}): it addresses "
                f"{who} as dense along axis {e.expr[2]}, so a strided {who} would give wrong values. opsmith makes "
                f"{who} row-major along axis {e.expr[2]} before the launch (a copy where it is not). Declare "
                f"instead: Const(0, name='{param}') in place of the Stride, or silence=('{param}',) if the kernel "
                "does read it in a way the analysis cannot see.")))  # fmt: skip
            if param not in silence:
                for r in ins:
                    if (r, e.expr[2]) not in covered:
                        drop.setdefault(int(r[1:]), set()).add(e.expr[2])
        elif kind in ("numel", "size", "lead", "prod", "pow2"):  # a size no access is bounded by
            findings.append(Finding(param, (
                f"the kernel never reads '{param}' (the declared {e.label}, read from {reads.where}): no load or "
                f"store is bounded by it. A kernel given a size it never reads most often lacks its mask "
                f"(tl.load(ptr + offs) without mask=offs < {param}, or a C++ loop without i < {param}), and reads "
                f"and writes past the end of every row shorter than its block: add the mask. Else the declaration "
                f"binds '{param}' to another parameter than you meant (check the names, or param_order); "
                f"silence=('{param}',) where the kernel needs no size.")))  # fmt: skip
        else:
            findings.append(Finding(param, (
                f"the kernel never reads '{param}' (the declared {e.label}, read from {reads.where}): nothing the "
                f"kernel computes depends on it. If it should, the declaration binds '{param}' to another parameter "
                f"than you meant (check the names, or param_order); else declare Const(0, name='{param}'), or "
                f"silence=('{param}',).")))  # fmt: skip
    if drop:
        tensors = list(record.tensor_inputs)
        fixed = {id(tensors[k]): replace(tensors[k], strided=tuple(a for a in tensors[k].strided if a not in axes))
                 for k, axes in drop.items()}  # fmt: skip
        record = replace(record, inputs=tuple(fixed.get(id(a), a) for a in record.inputs))
    return record, findings


def foreign_strides(record: Any, reads: KernelReads, extras: Sequence,
                    silence: Sequence[str]) -> tuple[list, list[Finding]]:  # fmt: skip
    """Stride extras whose parameter addresses another tensor too: the declared extras with those tensors
    added to the Stride's tuple (silenced ones unchanged), and the findings."""
    names = _tensor_names(record)
    pointers = _pointer_params(record)
    rank = _ranks(record)
    new = list(extras)
    findings = []
    declared_at = _declared_positions(record, extras)
    for j, e in enumerate(record.extras):
        param = _param_of_extra(record, j)
        if not (isinstance(e.expr, list) and e.expr[0] == "stride") or not param or j not in declared_at:
            continue
        own = [e.expr[1], *e.same]
        others = sorted({ref for ptr, ref in pointers.items() if param in reads.addresses.get(ptr, ())} - set(own))
        # Only tensors of the owner's rank can share its stride along the axis (a 1-D weight cannot), and
        # only where it can differ: two tensors held contiguous with the same sizes after the axis agree.
        others = [r for r in others if (rank.get(r) is None or rank.get(r) == rank.get(e.expr[1]))
                  and not _agree_always(record, e.expr[1], r, e.expr[2])]  # fmt: skip
        if not others:
            continue
        optional = [r for r in others if r.startswith("i") and record.tensor_inputs[int(r[1:])].optional]
        if optional:  # an absent tensor has no stride to share: said, not changed
            findings.append(Finding(param, (
                f"'{param}' (the declared {e.label}) also addresses the optional "
                f"{', '.join(names[r] for r in optional)} in {reads.where}: the kernel is right only where "
                f"{', '.join(names[r] for r in optional)} has {names[own[0]]}'s stride along axis {e.expr[2]}. "
                "An optional tensor cannot share a stride; declare it contiguous='require' with a shape whose "
                f"stride agrees, or silence=('{param}',).")))  # fmt: skip
            others = [r for r in others if r not in optional]
            if not others:
                continue
        certain = reads.certain or {}
        maybe = [
            r for r in others if not any(param in certain.get(ptr, ()) for ptr, ref in pointers.items() if ref == r)
        ]
        if maybe:  # the tie runs through a name given several values: no proof, said and not changed
            findings.append(Finding(param, (
                f"'{param}' (the declared {e.label}) may also address {', '.join(names[r] for r in maybe)} in "
                f"{reads.where}: the address is computed through a local name the kernel gives more than one value, "
                f"so which access uses '{param}' cannot be told from the text, and the declaration is left as it "
                f"is. If the kernel does address {', '.join(names[r] for r in maybe)} with it, declare "
                f"Stride({tuple(names[r] for r in own + maybe)!r}, {e.expr[2]}, name='{param}'); else "
                f"silence=('{param}',).")))  # fmt: skip
            others = [r for r in others if r not in maybe]
            if not others:
                continue
        group = tuple(names[r] for r in own + others)
        said = next((quote(reads, ptr, param) for ptr, ref in pointers.items() if ref in others
                     and quote(reads, ptr, param)), "")  # fmt: skip
        findings.append(Finding(param, (
            f"'{param}' (the declared {e.label}) also addresses {', '.join(names[r] for r in others)} in "
            f"{reads.where}{said}: the kernel is right only where they share {names[own[0]]}'s stride along axis "
            f"{e.expr[2]}. opsmith declares them as one stride (where they differ, the inputs among them are made "
            f"contiguous, or refused). Declare instead: Stride({group!r}, {e.expr[2]}, name='{param}'), or "
            f"silence=('{param}',).")))  # fmt: skip
        if param not in silence:
            k = declared_at[j]
            d = extras[k]
            new[k] = Stride(group, d.axis, dtype=d.dtype, name=d.name)
    return new, findings


def _ranks(record: Any) -> dict[str, int]:
    out = {}
    for k, a in enumerate(record.tensor_inputs):
        n = a.ndim if a.ndim is not None else (len(a.shape) if a.shape and not any(
            isinstance(x, str) and x.startswith("*") for x in a.shape) else None)  # fmt: skip
        if n is not None:
            out[f"i{k}"] = n
    for k, o in enumerate(record.outputs):
        sh = o.shape.get("shape")
        if sh is not None and not any(isinstance(x, list) and x[0] == "group" for x in sh):
            out[f"o{k}"] = len(sh)
    return out


def _held_contiguous(record: Any, ref: str) -> bool:
    """An output (allocated contiguous), or an input no stride lets through at any stride that must be
    contiguous (written in place, or contiguous='require')."""
    if ref.startswith("o"):
        return True
    a = record.tensor_inputs[int(ref[1:])]
    return not a.strided and (a.mutates or a.contiguous == "require")


def _trailing(record: Any, ref: str, axis: int) -> tuple | None:
    """The declared sizes after ``axis`` (names or ints), where the declaration fixes them all."""
    if ref.startswith("o"):
        o = record.outputs[int(ref[1:])]
        labels = o.shape.get("labels")
        if labels is None and "same_as" in o.shape:
            return _trailing(record, f"i{o.shape['same_as']}", axis)
        entries = tuple(labels) if labels is not None else None
    else:
        shape = record.tensor_inputs[int(ref[1:])].shape
        entries = tuple(shape) if shape is not None else None
    if entries is None or any(x is None or (isinstance(x, str) and x.startswith("*")) for x in entries):
        return None
    return tuple(str(x) for x in entries[axis:][1:]) if -len(entries) <= axis < len(entries) else None


def _agree_always(record: Any, a: str, b: str, axis: int) -> bool:
    ta, tb = _trailing(record, a, axis), _trailing(record, b, axis)
    return _held_contiguous(record, a) and _held_contiguous(record, b) and ta is not None and ta == tb


def _declared_positions(record: Any, extras: Sequence) -> dict[int, int]:
    """Record extra j -> position of its declaration among ``extras``, for the named Stride extras."""
    out = {}
    for j, e in enumerate(record.extras):
        for k, d in enumerate(extras):
            if isinstance(d, Stride) and d.name is not None and d.name == e.name:
                out[j] = k
    return out


def _grid_dims(decl: dict) -> set[str]:
    """The dimensions the launch itself gives the kernel: a ``Reduction`` runs one program per row of its first
    tensor input, so the names on that input's axes outside ``reduce_dims`` are the grid's (the row op's
    ``("R", "N")`` with ``Reduction((-1,))``: R is how many programs run)."""
    g = decl.get("geometry")
    first = next((d for d in decl.get("inputs") or () if isinstance(d, InputDecl)), None)
    if not isinstance(g, Reduction) or first is None or not isinstance(first.shape, tuple):
        return set()
    shape = first.shape
    if any(isinstance(x, str) and x.startswith("*") for x in shape):  # a group: only axes counted from the end
        reduced = {d for d in g.reduce_dims if d < 0}
        return {x for p, x in enumerate(shape) if isinstance(x, str) and p - len(shape) not in reduced
                and p > max((q for q, y in enumerate(shape) if isinstance(y, str) and y.startswith("*")))}  # fmt: skip
    reduced = {d % len(shape) for d in g.reduce_dims if -len(shape) <= d < len(shape)}
    return {x for p, x in enumerate(shape) if isinstance(x, str) and p not in reduced}


def quote(reads: KernelReads, pointer: str, param: str) -> str:
    """ " (the kernel's line N: ...)" where the IR placed the access (or loop) ``param`` reaches, else ""."""
    q = reads.lines.get((pointer, param))
    return f" (the kernel's {q})" if q else ""


def loop_only_sizes(record: Any, reads: KernelReads, decl: dict) -> list[Finding]:
    """Sizes that bound a loop stepping by blocks and no load, store or branch, with no declared precondition
    that they are a multiple of the step: the last block reads and writes past them."""
    dims = {e.param: e.dim for e in decl.get("extras") or () if isinstance(e, Dim)}
    divisible = [r for r in decl.get("requires") or () if isinstance(r, Divisible)]
    out = []
    for j, e in enumerate(record.extras):
        param = _param_of_extra(record, j)
        step = reads.loop_bounds.get(param or "")
        kind = e.expr[0] if isinstance(e.expr, list) else "const"
        if step is None or kind in ("stride", "const", "present"):
            continue
        if any(r.size in (param, dims.get(param)) and r.by % step == 0 for r in divisible):
            continue  # the declaration guarantees whole blocks
        out.append(Finding(param, (
            f"'{param}' (the declared {e.label}) only bounds a loop that steps by {step} in {reads.where}"
            f"{quote(reads, '', param)}: no load "
            f"or store is masked by it, so where {param} is not a multiple of {step} the last step reads and writes "
            f"up to {step - 1} elements past it. Add the mask (mask=offs < {param} on the loop's loads and stores); "
            f"or, if every call's {param} is a multiple of {step}, declare it: requires=[Divisible("
            f"'{dims.get(param, param)}', {step})].")))  # fmt: skip
    return out


def single_dims(record: Any, reads: KernelReads, decl: dict) -> list[Finding]:
    """Dimension names used once in the whole declaration, on a tensor whose size no extra passes and whose
    pointer the kernel reads."""
    counts: dict[str, int] = {}
    where: dict[str, str] = {}

    def count(text: str, owner: str | None = None) -> None:
        for n in _IDENT.findall(text):
            if n not in _FUNCS:
                counts[n] = counts.get(n, 0) + 1
                if owner is not None:
                    where[n] = owner

    sized: set[str] = set()  # tensors an extra or an expression passes a size of
    for d in decl.get("inputs") or ():
        if isinstance(d, InputDecl) and isinstance(d.shape, tuple):
            for x in d.shape:
                if isinstance(x, str) and not x.startswith("*"):
                    count(x, d.name)
    for o in decl.get("outputs") or ():
        if isinstance(o, OutputDecl) and isinstance(o.shape, tuple):
            for x in o.shape:
                if isinstance(x, str) and not x.startswith("*"):
                    count(x)
                    sized |= set(_IDENT.findall(x))
    texts = []
    for e in decl.get("extras") or ():
        if isinstance(e, Dim):
            count(e.dim)
        elif isinstance(e, Size):
            texts.append(e.expr)
        elif isinstance(e, Numel | DimSize):
            sized.add(e.input_name)
    texts += [r.size for r in decl.get("requires") or ()]
    g = decl.get("geometry")
    if isinstance(g, Grid):
        texts += [str(x) for x in (*g.grid, *g.block, g.shared_mem)]
    for t in texts:
        count(t)
        sized |= set(_IDENT.findall(t))
    pointers = {ref: ptr for ptr, ref in _pointer_params(record).items()}
    refs = {a.name: f"i{k}" for k, a in enumerate(record.tensor_inputs)}
    others = sorted(n for n, c in counts.items() if c > 1 and n not in refs)
    launched = _grid_dims(decl)
    findings = []
    for name, tensor in sorted(where.items()):
        ptr = pointers.get(refs.get(tensor, ""))
        if counts[name] != 1 or tensor in sized or ptr is None or ptr not in reads.read or name in launched:
            continue
        hint = f" (one of {others}?)" if others else ""
        findings.append(Finding(name, (
            f"dimension '{name}' of '{tensor}' is named nowhere else (no other tensor, output, extra or precondition "
            f"names it) and no extra passes {tensor}'s size, so the kernel cannot know how many elements of {tensor} "
            f"there are: it reads {tensor} by other sizes, past its end where {tensor} is shorter. If {tensor} has "
            f"the size of another dimension{hint}, name that one in its shape; if its size is free (a table the "
            f"kernel indexes by data), silence=('{name}',).")))  # fmt: skip
    return findings
