"""From a declaration to the record's parts: inputs, extras and outputs checked, names turned into
positions, every tensor given its element type and every parameter its C type (``binding.py`` matches them
to the kernel's own parameters).

Every mistake raises ``SpecError`` (a ``ValueError``) naming the op, the field and the fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .binding import Item, Typing, bind, declared_items
from .errors import SpecError
from .geometry import LaunchPlan, lower_geometry, min_rank
from .record import ExtraArg, OutputArg, Param, ScalarArg, TensorArg
from .signature import KernelParam
from .spec import Config, Const, DimSize, InputDecl, Numel, OutputDecl, ReduceDims, SameAs, ScalarInput, Stride, TuneDim
from .validate import check_geometry, ident, ref_index, tune_key_entries

__all__ = ["Resolved", "resolve"]

_DEFAULT_SCALAR_CTYPE = {"float": "f32", "int": "i32", "bool": "bool"}
_INDEX_CTYPE = {"int32": "i32", "int64": "i64", None: ""}


@dataclass(frozen=True)
class Resolved:
    inputs: tuple[TensorArg | ScalarArg, ...]
    extras: tuple[ExtraArg, ...]
    outputs: tuple[OutputArg, ...]
    launch: LaunchPlan | None
    launches: tuple[LaunchPlan | None, ...] = ()
    tune_key: tuple = ()
    params: tuple[Param, ...] = ()


def _check_inputs(op: str, inputs: Sequence) -> tuple[list[str], list[str]]:
    names: list[str] = []
    tensors: list[str] = []
    scalars: list[str] = []
    for k, d in enumerate(inputs):
        field = f"inputs[{k}]"
        if not isinstance(d, InputDecl | ScalarInput):
            raise SpecError(op, field, f"{d!r} is not an InputDecl or ScalarInput.", "wrap it in InputDecl(name).")
        ident(op, field + ".name", d.name)
        if d.name in names:
            raise SpecError(op, field + ".name", f"'{d.name}' is declared twice.", "give every input a unique name.")
        names.append(d.name)
        if isinstance(d, ScalarInput):
            if d.py_type not in (float, int, bool):
                raise SpecError(op, field + ".py_type", f"{d.py_type!r} is not float, int or bool.",
                                "use py_type=float, int or bool.")  # fmt: skip
            scalars.append(d.name)
            continue
        if d.dtype is not None and not isinstance(d.dtype, torch.dtype):
            raise SpecError(op, field + ".dtype", f"{d.dtype!r} is not a torch.dtype.", "pass e.g. torch.float32.")
        if d.contiguous not in ("make", "require"):
            raise SpecError(op, field + ".contiguous", f"{d.contiguous!r} is not a policy.",
                            "use 'make' (copy non-contiguous inputs) or 'require' (refuse them).")  # fmt: skip
        if d.ndim is not None and (not isinstance(d.ndim, int) or d.ndim < 0):
            raise SpecError(op, field + ".ndim", f"{d.ndim!r} is not a rank.", "use a non-negative int or None.")
        if not isinstance(d.mutates, bool):
            raise SpecError(op, field + ".mutates", f"{d.mutates!r} is not a bool.", "pass True or False.")
        if d.shape is not None:
            if not isinstance(d.shape, tuple | list) or not all(
                    e is None or (isinstance(e, int) and not isinstance(e, bool) and e >= 0) or isinstance(e, DimSize)
                    for e in d.shape):  # fmt: skip
                raise SpecError(op, field + ".shape", f"{d.shape!r} is not a shape.",
                                "use a tuple of ints, DimSize(other_input, axis) and None (any size).")  # fmt: skip
            if d.ndim is not None and d.ndim != len(d.shape):
                raise SpecError(op, field + ".ndim", f"ndim={d.ndim} disagrees with shape={d.shape!r}.",
                                "drop ndim; shape implies it.")  # fmt: skip
        tensors.append(d.name)
    return tensors, scalars


def _check_outputs(op: str, outputs: Sequence, names: list[str]) -> list[str]:
    out_names: list[str] = []
    for k, o in enumerate(outputs):
        field = f"outputs[{k}]"
        if not isinstance(o, OutputDecl):
            raise SpecError(op, field, f"{o!r} is not an OutputDecl.", "wrap it in OutputDecl(name, shape=...).")
        ident(op, field + ".name", o.name)
        if o.name in names or o.name in out_names:
            raise SpecError(op, field + ".name", f"'{o.name}' is already used by another input or output.",
                            "give every input and output a unique name.")  # fmt: skip
        out_names.append(o.name)
    return out_names


def _axis(op: str, field: str, axis: object) -> int:
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise SpecError(op, field + ".axis", f"{axis!r} is not an axis.", "pass an int (negative allowed).")
    return axis


def _extras(op: str, extras: Sequence, tensors: list[str], scalars: list[str], out_names: list[str],
            static_names: frozenset[str], taken: set[str]) -> list[ExtraArg]:  # fmt: skip
    """Integers (and constants) computed per call, as geometry expressions over tensor refs."""
    out: list[ExtraArg] = []
    for k, e in enumerate(extras):
        field = f"extras[{k}]"
        if not isinstance(e, Numel | DimSize | Stride | Const):
            raise SpecError(op, field, f"{e!r} is not Numel, DimSize, Stride or Const.",
                            "use Numel(name), DimSize(name, axis), Stride(name, axis) or Const(value).")  # fmt: skip
        if e.dtype not in (None, "int32", "int64"):
            raise SpecError(op, field + ".dtype", f"{e.dtype!r} is not an index type.", "use 'int32' or 'int64'.")
        if e.name is not None:
            ident(op, field + ".name", e.name)
            if e.name in taken:
                raise SpecError(op, field + ".name", f"'{e.name}' is already the name of an input, output or extra.",
                                "name each extra after the one kernel parameter it fills.")  # fmt: skip
            taken.add(e.name)
        same: tuple[str, ...] = ()
        if isinstance(e, Numel):
            idx = ref_index(op, field + ".input_name", e.input_name, tensors, scalars)
            expr, label = ["numel", f"i{idx}"], f"numel({e.input_name})"
        elif isinstance(e, DimSize):
            idx = ref_index(op, field + ".input_name", e.input_name, tensors, scalars)
            expr, label = ["size", f"i{idx}", _axis(op, field, e.axis)], f"size({e.input_name}, {e.axis})"
            if e.bucket not in ("exact", "pow2"):
                raise SpecError(op, field + ".bucket", f"{e.bucket!r} is not a bucket.", "use 'exact' or 'pow2'.")
            if e.bucket == "pow2":
                expr, label = ["pow2", expr], f"pow2({label})"
        elif isinstance(e, Stride):
            names = (e.tensor,) if isinstance(e.tensor, str) else tuple(e.tensor)
            if not names or not all(isinstance(n, str) for n in names) or len(set(names)) != len(names):
                raise SpecError(op, field + ".tensor", f"{e.tensor!r} is not a tensor name or a tuple of distinct "
                                "names.", "pass Stride('x', axis) or Stride(('a', 'b'), axis).")  # fmt: skip
            refs = []
            for n in names:
                if n in out_names:
                    refs.append(f"o{out_names.index(n)}")
                else:
                    refs.append(f"i{ref_index(op, field + '.tensor', n, tensors, scalars)}")
            expr = ["stride", refs[0], _axis(op, field, e.axis)]
            label, same = f"stride({'/'.join(names)}, {e.axis})", tuple(refs[1:])
        else:
            if isinstance(e.value, bool) or not isinstance(e.value, int | float):
                raise SpecError(op, field + ".value", f"{e.value!r} is not a number.", "pass an int or a float.")
            if isinstance(e.value, float) and e.dtype is not None:
                raise SpecError(op, field + ".dtype", "a float constant takes its type from the kernel's parameter.",
                                "drop dtype=, or pass an int value.")  # fmt: skip
            expr, label = e.value, f"const {e.value!r}"
        static = e.name is not None and e.name in static_names
        out.append(ExtraArg(label, expr, _INDEX_CTYPE[e.dtype], e.name, static, same))
    return out


def _outputs(op: str, outputs: Sequence, tensors: list[str], scalars: list[str]) -> list[OutputArg]:
    out_args: list[OutputArg] = []
    for k, o in enumerate(outputs):
        field = f"outputs[{k}]"
        rel = o.shape
        if isinstance(rel, SameAs):
            shape = {"same_as": ref_index(op, field + ".shape.input_idx", rel.input_idx, tensors, scalars)}
        elif isinstance(rel, ReduceDims):
            ref = ref_index(op, field + ".shape.input_idx", rel.input_idx, tensors, scalars)
            dims = rel.dims
            if not isinstance(dims, tuple | list) or not dims or not all(isinstance(d, int) for d in dims):
                raise SpecError(op, field + ".shape.dims", f"{dims!r} is not a non-empty tuple of axes.",
                                "pass e.g. dims=(-1,); use SameAs for an unreduced output.")  # fmt: skip
            if len(set(dims)) != len(dims):
                raise SpecError(op, field + ".shape.dims", f"{tuple(dims)} repeats an axis.", "list each axis once.")
            shape = {"reduce": ref, "dims": list(dims), "keepdim": bool(rel.keepdim)}
            if rel.combine is not None:
                if rel.combine not in ("sum", "max", "min"):
                    raise SpecError(op, field + ".shape.combine", f"{rel.combine!r} is not a way to combine partial "
                                    "results.", "use 'sum', 'max' or 'min', or None when partial results do not "
                                    "combine (a mean, a norm).")  # fmt: skip
                shape["combine"] = rel.combine
        else:
            raise SpecError(op, field + ".shape", f"{rel!r} is not a shape relation.",
                            "use SameAs(input) or ReduceDims(input, dims), or pass meta_fn=.")  # fmt: skip
        src = 0 if o.dtype_from is None else ref_index(op, field + ".dtype_from", o.dtype_from, tensors, scalars)
        out_args.append(OutputArg(o.name, shape, src))
    return out_args


def _min_ranks(inputs: Sequence, out_args: list[OutputArg], extra_args: list[ExtraArg], geometry: object,
               n_tensors: int, launches: Sequence = ()) -> list[int]:  # fmt: skip
    """Per tensor input, the least rank the geometry, the reduced axes, the extras and the grid's size
    expressions need (an axis of an output needs its source input's rank plus the axes a reduction drops)."""
    min_nd = [0] * n_tensors
    mutated = next((j for j, d in enumerate(d for d in inputs if isinstance(d, InputDecl)) if d.mutates), 0)

    def need(k: int, axis: int) -> None:
        min_nd[k] = max(min_nd[k], axis + 1 if axis >= 0 else -axis)

    def need_ref(ref: str, axis: int) -> None:
        if ref.startswith("i"):
            need(int(ref[1:]), axis)
            return
        if not out_args:  # an in-place op's o0 is its first written input
            need(mutated, axis)
            return
        o = out_args[int(ref[1:])]
        if "meta" in o.shape:
            return  # a meta_fn's output: its rank is not known here
        src = o.shape.get("same_as", o.shape.get("reduce"))
        lost = 0 if "same_as" in o.shape or o.shape["keepdim"] else len(o.shape["dims"])
        rank = (axis + 1 if axis >= 0 else -axis) + lost
        min_nd[src] = max(min_nd[src], rank)

    def walk(e: object) -> None:
        if isinstance(e, list):
            if e[0] in ("size", "stride"):
                need_ref(e[1], e[2])
            for a in e[1:]:
                walk(a)

    for o in out_args:
        if "reduce" in o.shape:
            for d in o.shape["dims"]:
                need(o.shape["reduce"], d)
    for e in extra_args:
        walk(e.expr)
        for r in e.same:
            if isinstance(e.expr, list) and e.expr[0] == "stride":
                need_ref(r, e.expr[2])
    for plan in launches:
        for g in plan.grid if plan is not None else ():
            walk(g)
    if geometry is not None:
        ref, rank = min_rank(geometry)  # type: ignore[arg-type]
        if ref == "i0":
            min_nd[0] = max(min_nd[0], rank)
        elif rank:
            need_ref("o0", rank - 1)
    return min_nd


def _shapes(op: str, inputs: Sequence, tensors: list[str], min_nd: list[int]) -> list[tuple | None]:
    """Each tensor input's declared shape as record entries (int, or [input index, axis]); raises the axes a
    reference needs into the referenced input's minimum rank."""
    out: list[tuple | None] = []
    for d in (x for x in inputs if isinstance(x, InputDecl)):
        if d.shape is None:
            out.append(None)
            continue
        entries: list = []
        for e in d.shape:
            if e is None or isinstance(e, int):
                entries.append(e)
                continue
            if e.input_name not in tensors or e.input_name == d.name:
                raise SpecError(op, f"inputs '{d.name}'.shape", f"DimSize('{e.input_name}', ...) names no other tensor "
                                "input.", f"reference one of {[t for t in tensors if t != d.name]}.")  # fmt: skip
            j = tensors.index(e.input_name)
            min_nd[j] = max(min_nd[j], e.axis + 1 if e.axis >= 0 else -e.axis)
            entries.append([j, e.axis])
        out.append(tuple(entries))
    return out


def resolve(
    op: str,
    inputs: Sequence[InputDecl | ScalarInput] | None,
    outputs: Sequence[OutputDecl] | None,
    extras: Sequence,
    geometry: object,
    params: list[KernelParam] | None,
    *,
    typed: str,
    has_meta_fn: bool,
    has_eager_fn: bool,
    has_schema: bool,
    meta_outputs: int = 0,
    configs: Sequence[Config] = (Config(),),
    tune_key: Sequence[TuneDim] = (),
    dtype_generic: bool = False,
    names_why: str = "",
    param_order: Sequence[str] | None = None,
    static_names: frozenset[str] = frozenset(),
    host_launched: bool = False,
) -> Resolved | None:
    """Check the declaration against itself and the kernel's ``params``; ``None`` when it is too partial to
    describe a launch (the ``eager_fn`` override path). ``meta_outputs``: how many outputs a ``meta_fn``
    allocates when ``outputs`` is omitted."""
    check_geometry(op, geometry)
    if host_launched and geometry is not None:
        raise SpecError(op, "geometry", "a CuTe DSL host function launches its kernels itself.",
                        "drop geometry=; the host function's .launch(grid=..., block=...) decides.")  # fmt: skip
    if outputs is None and not has_meta_fn:
        raise SpecError(op, "outputs", "no outputs are declared and no meta_fn was given.",
                        "declare outputs=[OutputDecl(...)] or pass meta_fn= to derive output shapes.")  # fmt: skip
    if geometry is None and not has_eager_fn and not host_launched:
        raise SpecError(op, "geometry", "no launch geometry is declared and no eager_fn was given.",
                        "declare geometry=Elementwise(...)/Reduction(...)/Custom(...) or pass eager_fn=.")  # fmt: skip
    if inputs is None:
        if not (has_schema or has_meta_fn):
            raise SpecError(op, "inputs", "no inputs are declared, and neither schema nor meta_fn was given.",
                            "declare inputs=[InputDecl(...)], or pass schema= or a type-hinted meta_fn=.")  # fmt: skip
        return None
    if not inputs:
        raise SpecError(op, "inputs", "the input list is empty.", "declare at least one InputDecl.")
    mutating = any(isinstance(d, InputDecl) and d.mutates is True for d in inputs)
    if outputs is not None and not outputs and not mutating:
        raise SpecError(op, "outputs", "the output list is empty and no input is mutated.",
                        "declare at least one OutputDecl, or mark the input the kernel writes mutates=True.")  # fmt: skip
    tensors, scalars = _check_inputs(op, inputs)
    if outputs is None and has_eager_fn:
        return None  # meta_fn describes the outputs and eager_fn launches
    if outputs is None:
        out_names = ["out" if meta_outputs == 1 else f"out{k}" for k in range(meta_outputs)]
        out_args = [OutputArg(n, {"meta": True}, 0) for n in out_names]
    else:
        out_names = _check_outputs(op, outputs, tensors + scalars)
        if not tensors:
            raise SpecError(op, "inputs", "declarative outputs need at least one tensor input to take a shape from.",
                            "add an InputDecl, or pass meta_fn= and eager_fn= for this kernel.")  # fmt: skip
        out_args = _outputs(op, outputs, tensors, scalars)
    extra_args = _extras(op, extras or (), tensors, scalars, out_names, static_names,
                         set(tensors + scalars + out_names))  # fmt: skip
    launches = tuple(_lower(op, geometry, c.params, tensors, out_names) for c in configs)
    key = tune_key_entries(op, tune_key, tensors, scalars) if len(configs) > 1 else ()
    axes = [["size", e[1], e[2]] for e in key if e[0] == "dim"]  # a tuning key's axes need their dims too
    min_nd = _min_ranks(inputs, out_args, [*extra_args, *(ExtraArg("", a, "i64") for a in axes)], geometry,
                        len(tensors), launches)  # fmt: skip
    tensor_decls = [d for d in inputs if isinstance(d, InputDecl)]
    typing = Typing(dtypes=[d.dtype for d in tensor_decls], like=[None] * len(tensors),
                    scalar_ctypes={d.name: _DEFAULT_SCALAR_CTYPE[d.py_type.__name__] for d in inputs
                                   if isinstance(d, ScalarInput)},
                    out_dtypes=[None] * len(out_args), out_like=[None] * len(out_args))  # fmt: skip
    kinds = [("tensor" if isinstance(d, InputDecl) else "scalar", d.name) for d in inputs]
    items = declared_items(kinds, extra_args, out_args)
    if params is not None:
        bound = bind(op, items, params, typing, extra_args, typed=typed, tensor_names=tensors,
                     scalar_types={d.name: d.py_type.__name__ for d in inputs if isinstance(d, ScalarInput)},
                     names_why=names_why, param_order=param_order)  # fmt: skip
    else:
        bound = _convention(items, extra_args, typing)
    extra_args = [e if e.ctype else dataclasses.replace(e, ctype="f32" if isinstance(e.expr, float) else "i32")
                  for e in extra_args]  # fmt: skip
    tensor_of_input = {k: j for j, k in enumerate(k for k, d in enumerate(inputs) if isinstance(d, InputDecl))}
    open_dtype = _open_dtypes(params, bound, typed, dtype_generic, tensor_of_input)
    for k, d in enumerate(tensor_decls):
        if typing.dtypes[k] is None and typing.like[k] is None and not open_dtype[k]:
            raise SpecError(op, f"inputs[{list(inputs).index(d)}].dtype",
                            f"the element type of '{d.name}' is unknown (the kernel's parameter does not say it).",
                            f"declare InputDecl('{d.name}', dtype=torch.float32) (or the dtype the kernel reads), or "
                            f"make it a template parameter of the kernel bound by {{T_{d.name}}}.")  # fmt: skip
    out_args = _output_dtypes(op, outputs, out_args, typing, tensors)
    shapes = _shapes(op, inputs, tensors, min_nd)
    strided = [sorted({e.expr[2] for e in extra_args if isinstance(e.expr, list) and e.expr[0] == "stride"
                       and f"i{k}" in (e.expr[1], *e.same)}) for k in range(len(tensors))]  # fmt: skip
    resolved_inputs: list[TensorArg | ScalarArg] = []
    ti = 0
    for d in inputs:
        if isinstance(d, ScalarInput):
            resolved_inputs.append(ScalarArg(d.name, d.py_type.__name__, typing.scalar_ctypes[d.name]))
            continue
        dt, nd_min = typing.dtypes[ti], min_nd[ti]
        nd = d.ndim if d.ndim is not None else len(d.shape) if d.shape is not None else None
        if nd is not None and nd < nd_min:
            what = "ndim" if d.ndim is not None else "shape"
            raise SpecError(op, f"inputs[{ti}].{what}", f"'{d.name}' is declared with {nd} dims but the "
                            f"geometry, a ReduceDims or an extra needs at least {nd_min}.", f"fix {what} or the axes.")  # fmt: skip
        resolved_inputs.append(TensorArg(d.name, str(dt).removeprefix("torch.") if dt else None,
                                         "require" if d.mutates else d.contiguous,
                                         len(d.shape) if d.shape is not None else d.ndim, nd_min, d.mutates,
                                         shapes[ti], typing.like[ti], tuple(strided[ti])))  # fmt: skip
        ti += 1
    return Resolved(tuple(resolved_inputs), tuple(extra_args), tuple(out_args), launches[0], launches, key, bound)


def _lower(op: str, geometry: object, params: dict, tensors: list[str], out_names: list[str]) -> LaunchPlan | None:
    if geometry is None:
        return None
    from .expr import ExprError

    refs = {**{n: f"i{k}" for k, n in enumerate(tensors)}, **{n: f"o{k}" for k, n in enumerate(out_names)}}
    try:
        return lower_geometry(geometry, params, refs)  # type: ignore[arg-type]
    except ExprError as e:
        raise SpecError(op, "geometry.grid", f"{e}.", "write sizes like 'cdiv(numel(x), 256)' or "
                        "'min(size(p, 0), sm_count * MINB)' (see opsmith/expr.py).") from None  # fmt: skip


def _convention(items: list[Item], extras: list[ExtraArg], typing: Typing) -> tuple[Param, ...]:
    """The default calling convention with default C types, where nothing describes the kernel's parameters."""
    out = []
    for d in items:
        if d.kind in ("tensor", "output"):
            out.append(Param(d.name or "", d.role, d.index, "ptr", 8))  # type: ignore[arg-type]
        elif d.kind == "scalar":
            out.append(Param(d.name or "", "input", d.index, typing.scalar_ctypes[d.name], 0))  # type: ignore[index]
        else:
            ctype = extras[d.index].ctype or ("f32" if isinstance(extras[d.index].expr, float) else "i32")
            out.append(Param(d.name or "", "extra", d.index, ctype, 0))
    return tuple(out)


def _open_dtypes(params: list[KernelParam] | None, bound: tuple[Param, ...], typed: str, dtype_generic: bool,
                 tensor_of_input: dict[int, int]) -> list[bool]:  # fmt: skip
    """Per tensor input: may it take any dtype? (a ``void*``, a template parameter of its own, or a flavor
    that compiles one kernel per dtype)."""
    if typed == "none" or params is None:
        return [dtype_generic] * len(tensor_of_input)
    out = [False] * len(tensor_of_input)
    for kp, b in zip(params, bound, strict=True):
        if b.role == "input" and b.ctype == "ptr":
            out[tensor_of_input[b.index]] = kp.ctype == "void" or (kp.slot is not None and dtype_generic)
    return out


def _output_dtypes(op: str, outputs: Sequence | None, out_args: list[OutputArg], typing: Typing,
                   tensors: list[str]) -> list[OutputArg]:  # fmt: skip
    """Each output's dtype: fixed by the kernel's pointer type, taken from the input whose template parameter
    types it, or from ``dtype_from`` (default: the first tensor input)."""
    res = []
    for k, o in enumerate(out_args):
        explicit = outputs is not None and outputs[k].dtype_from is not None
        src, fixed, like = o.dtype_from, typing.out_dtypes[k], typing.out_like[k]
        if like is not None:
            j = tensors.index(like)
            if explicit and j != src:
                raise SpecError(op, f"outputs[{k}].dtype_from", f"'{o.name}' takes its dtype from '{tensors[src]}' "
                                f"but the kernel types it by the template parameter of '{like}'.",
                                f"drop dtype_from (the kernel decides), or set it to '{like}'.")  # fmt: skip
            src = j
        src_dt = typing.dtypes[src]
        if fixed is not None and explicit and src_dt is not None and fixed != src_dt:
            raise SpecError(op, f"outputs[{k}].dtype_from", f"'{o.name}' takes its dtype from '{tensors[src]}' "
                            f"({src_dt}) but the kernel writes it as {fixed}.",
                            "point dtype_from at an input of the output's element type, drop it, or fix the kernel.")  # fmt: skip
        dt = fixed or src_dt
        res.append(OutputArg(o.name, o.shape, src, str(dt).removeprefix("torch.") if dt else None))
    return res
