"""From a declaration to the record's parts: inputs, extras and outputs checked, names turned into
positions, every tensor given its element type and every parameter its C type (``binding.py`` matches them
to the kernel's own parameters).

Every mistake raises ``SpecError`` (a ``ValueError``) naming the op, the field and the fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..errors import SpecError
from .binding import Item, Typing, bind, declared_items
from .dims import Shapes, check_axes, input_shapes, min_ranks, output_shape, requirements
from .extras import resolve_extras
from .geometry import LaunchPlan, lower_geometry
from .record import ExtraArg, OutputArg, Param, ScalarArg, TensorArg, dtype_from_name
from .signature import KernelParam
from .spec import Config, Elementwise, InputDecl, OutputDecl, ReduceDims, Reduction, SameAs, ScalarInput, TuneDim
from .validate import check_geometry, ident, named_key, ref_index, tune_key_entries

__all__ = ["Resolved", "resolve"]

_DEFAULT_SCALAR_CTYPE = {"float": "f32", "int": "i32", "bool": "bool"}


@dataclass(frozen=True)
class Resolved:
    inputs: tuple[TensorArg | ScalarArg, ...]
    extras: tuple[ExtraArg, ...]
    outputs: tuple[OutputArg, ...]
    launch: LaunchPlan | None
    launches: tuple[LaunchPlan | None, ...] = ()
    tune_key: tuple = ()
    params: tuple[Param, ...] = ()
    dims: tuple = ()
    groups: tuple = ()
    requires: tuple = ()


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
        if isinstance(d.dtype, str) and isinstance(getattr(torch, d.dtype.removeprefix("torch."), None), torch.dtype) \
                and d.dtype not in [x.name for x in inputs]:  # fmt: skip
            raise SpecError(op, field + ".dtype", f"{d.dtype!r} is the name of a dtype; a string names the tensor "
                            "input whose dtype this one must have.",
                            f"pass a torch.dtype: dtype=torch.{d.dtype.removeprefix('torch.')}.")  # fmt: skip
        if isinstance(d.dtype, set | frozenset | tuple | list):
            if not d.dtype or not all(isinstance(x, torch.dtype) for x in d.dtype):
                raise SpecError(op, field + ".dtype", f"{d.dtype!r} is not a set of torch.dtypes.",
                                "pass e.g. dtype={torch.float16, torch.bfloat16, torch.float32}.")  # fmt: skip
        elif d.dtype is not None and not isinstance(d.dtype, torch.dtype | str):
            raise SpecError(op, field + ".dtype", f"{d.dtype!r} is not a torch.dtype or an input's name.",
                            "pass e.g. torch.float32, a set of them, or the name of the tensor input whose dtype "
                            "it must have.")  # fmt: skip
        if d.contiguous not in ("make", "require"):
            raise SpecError(op, field + ".contiguous", f"{d.contiguous!r} is not a policy.",
                            "use 'make' (copy non-contiguous inputs) or 'require' (refuse them).")  # fmt: skip
        if d.ndim is not None and (not isinstance(d.ndim, int) or d.ndim < 0):
            raise SpecError(op, field + ".ndim", f"{d.ndim!r} is not a rank.", "use a non-negative int or None.")
        if not isinstance(d.mutates, bool):
            raise SpecError(op, field + ".mutates", f"{d.mutates!r} is not a bool.", "pass True or False.")
        if d.shape is not None and not isinstance(d.shape, tuple | list | SameAs):
            raise SpecError(op, field + ".shape", f"{d.shape!r} is not a shape.",
                            "use a tuple of names, ints, one '*group' and None, e.g. ('*B', 'C'), or SameAs('x').")  # fmt: skip
        if d.ndim is not None and isinstance(d.shape, tuple | list):
            grouped = any(isinstance(e, str) and e.startswith("*") for e in d.shape)
            if (d.ndim < len(d.shape) - 1) if grouped else d.ndim != len(d.shape):
                raise SpecError(op, field + ".ndim", f"ndim={d.ndim} disagrees with shape={tuple(d.shape)!r}.",
                                "drop ndim; shape implies it.")  # fmt: skip
        if not isinstance(d.optional, bool):
            raise SpecError(op, field + ".optional", f"{d.optional!r} is not a bool.", "pass True or False.")
        if d.absent not in ("none", "dummy") or (d.absent == "dummy" and not d.optional):
            raise SpecError(op, field + ".absent", f"{d.absent!r} " + ("is not an absent form." if d.absent not in
                            ("none", "dummy") else f"is the absent form of a required input ('{d.name}' is never "
                            "None)."), "use 'none' (a null pointer) or 'dummy' (a pointer never read) on an "
                            "optional=True input.")  # fmt: skip
        if d.optional and not tensors:
            raise SpecError(op, field + ".optional", f"'{d.name}' is the first tensor input, whose device is the "
                            "call's and whose rows a Reduction counts; it cannot be None.",
                            "declare a required tensor input before it (bind the kernel's parameters by name, or "
                            "give param_order, so the declaration order need not be the kernel's).")  # fmt: skip
        if d.align is not None and (isinstance(d.align, bool) or not isinstance(d.align, int) or d.align < 1
                                    or d.align & (d.align - 1) or d.align > 256):  # fmt: skip
            raise SpecError(op, field + ".align", f"{d.align!r} is not an alignment.",
                            "pass a power of two of bytes up to 256, e.g. align=16 for 128-bit loads.")  # fmt: skip
        tensors.append(d.name)
    return tensors, scalars


def _check_outputs(op: str, outputs: Sequence, names: list[str]) -> list[str]:
    out_names: list[str] = []
    for k, o in enumerate(outputs):
        field = f"outputs[{k}]"
        if not isinstance(o, OutputDecl):
            raise SpecError(op, field, f"{o!r} is not an OutputDecl.", "wrap it in OutputDecl(name, shape=...).")
        ident(op, field + ".name", o.name)
        if not isinstance(o.optional, bool):
            raise SpecError(op, field + ".optional", f"{o.optional!r} is not a bool.",
                            "pass optional=True or leave it out.")  # fmt: skip
        if o.name in names or o.name in out_names:
            raise SpecError(op, field + ".name", f"'{o.name}' is already used by another input or output.",
                            "give every input and output a unique name.")  # fmt: skip
        out_names.append(o.name)
    for k, o in enumerate(outputs):  # an optional output's flag is an argument of the op: its name is taken
        if o.optional is True and f"return_{o.name}" in names + out_names:
            raise SpecError(op, f"outputs[{k}].optional", f"its per-call flag 'return_{o.name}' is already the name "
                            "of an input or output.", f"rename the input or output called 'return_{o.name}'.")  # fmt: skip
    return out_names


def _outputs(op: str, outputs: Sequence, tensors: list[str], scalars: list[str], sh: Shapes,
             ranks: list[int | None]) -> list[OutputArg]:  # fmt: skip
    out_args: list[OutputArg] = []
    for k, o in enumerate(outputs):
        field = f"outputs[{k}]"
        rel = o.shape
        if o.dtype is not None and not isinstance(o.dtype, torch.dtype):
            raise SpecError(op, field + ".dtype", f"{o.dtype!r} is not a torch.dtype.", "pass e.g. torch.float32.")
        if o.dtype is not None and o.dtype_from is not None:
            raise SpecError(op, field + ".dtype", "both dtype and dtype_from are given.",
                            "keep one: dtype fixes the output's element type, dtype_from copies an input's.")  # fmt: skip
        if isinstance(rel, tuple | list):
            shape = output_shape(op, field + ".shape", rel, sh, tensors)
        elif isinstance(rel, SameAs):
            shape = {"same_as": ref_index(op, field + ".shape.input_idx", rel.input_idx, tensors, scalars)}
        elif isinstance(rel, ReduceDims):
            ref = ref_index(op, field + ".shape.input_idx", rel.input_idx, tensors, scalars)
            dims = rel.dims
            if not isinstance(dims, tuple | list) or not dims or not all(isinstance(d, int) for d in dims):
                raise SpecError(op, field + ".shape.dims", f"{dims!r} is not a non-empty tuple of axes.",
                                "pass e.g. dims=(-1,); use SameAs for an unreduced output.")  # fmt: skip
            check_axes(op, field + ".shape.dims", dims, ranks[ref], tensors[ref])
            shape = {"reduce": ref, "dims": list(dims), "keepdim": bool(rel.keepdim)}
            if rel.combine is not None:
                if rel.combine not in ("sum", "max", "min"):
                    raise SpecError(op, field + ".shape.combine", f"{rel.combine!r} is not a way to combine partial "
                                    "results.", "use 'sum', 'max' or 'min', or None when partial results do not "
                                    "combine (a mean, a norm).")  # fmt: skip
                shape["combine"] = rel.combine
        else:
            raise SpecError(op, field + ".shape", f"{rel!r} is not a shape.",
                            "use SameAs(input), ReduceDims(input, dims) or a tuple of names and sizes ('M', 'N').")  # fmt: skip
        src = 0 if o.dtype_from is None else ref_index(op, field + ".dtype_from", o.dtype_from, tensors, scalars)
        dt = None if o.dtype is None else str(o.dtype).removeprefix("torch.")
        init = getattr(o, "init", None)
        if init is not None and (isinstance(init, bool) or not isinstance(init, int | float)):
            raise SpecError(op, field + ".init", f"{init!r} is not a number.",
                            "pass the value every element starts from, e.g. init=0 for a kernel that accumulates.")  # fmt: skip
        out_args.append(OutputArg(o.name, shape, src, dt, init))
    return out_args


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
    int_scalar: str = "i32",
    host_launched: bool = False,
    requires: Sequence = (),
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
    if requires and (inputs is None or has_eager_fn):
        raise SpecError(op, "requires", "requirements are checked by the generated implementation, which an eager_fn "
                        "override replaces.", "declare inputs and outputs (drop eager_fn), or check the sizes in "
                        "your eager_fn.")  # fmt: skip
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
    gone = [d.name for d in inputs if isinstance(d, InputDecl) and d.optional]
    if gone and host_launched:
        raise SpecError(op, "inputs", f"{gone} are optional, and a CuTe DSL host function takes a cute.Tensor for "
                        "each tensor parameter, which None is not.", "declare the inputs required, and register "
                        "one op per combination of them.")  # fmt: skip
    if outputs is None and has_eager_fn:
        return None  # meta_fn describes the outputs and eager_fn launches
    out_names = (["out" if meta_outputs == 1 else f"out{k}" for k in range(meta_outputs)] if outputs is None
                 else _check_outputs(op, outputs, tensors + scalars))  # fmt: skip
    tensor_decls = [d for d in inputs if isinstance(d, InputDecl)]
    sh = input_shapes(op, tensor_decls, tensors, set(tensors + scalars + out_names))
    for k, j in enumerate(sh.like):
        if j is not None and tensor_decls[j].optional:
            raise SpecError(op, f"inputs[{k}].shape", f"SameAs('{tensors[j]}') names an optional input, which a call "
                            "may pass as None.", "name a required input, or declare the shape by names.")  # fmt: skip
    declared = [d.ndim if d.ndim is not None else sh.exact[k] for k, d in enumerate(tensor_decls)]
    if outputs is None:
        out_args = [OutputArg(n, {"meta": True}, 0) for n in out_names]
    else:
        if not tensors:
            raise SpecError(op, "inputs", "declarative outputs need at least one tensor input to take a shape from.",
                            "add an InputDecl, or pass meta_fn= and eager_fn= for this kernel.")  # fmt: skip
        out_args = _outputs(op, outputs, tensors, scalars, sh, declared)
        _outputs_of_required(op, out_args, tensor_decls)
    optional = frozenset(k for k, d in enumerate(tensor_decls) if d.optional)
    # An optional output's flag is appended to the inputs (``_requests``): its position is known now.
    asked = {o.name: len(inputs) + j for j, o in enumerate(o for o in outputs or () if o.optional is True)}
    extra_args = resolve_extras(op, extras or (), tensors, scalars, out_names, static_names,
                         set(tensors + scalars + out_names), sh, optional, asked)  # fmt: skip
    reqs = requirements(op, requires, sh, tensors)
    _check_dim_names(op, sh, configs)
    launches = tuple(_lower(op, geometry, c.params, tensors, out_names, sh) for c in configs)
    key = tune_key_entries(op, tune_key, tensors, scalars) if len(configs) > 1 else ()
    if isinstance(geometry, Reduction):
        check_axes(op, "geometry.reduce_dims", geometry.reduce_dims, declared[0], tensors[0])
    axes = [["size", e[1], e[2]] for e in key if e[0] == "dim"]  # a tuning key's axes need their dims too
    exprs = [e.expr for e in extra_args] + axes + [r["expr"] for r in reqs] + \
        [g for p in launches if p is not None for g in p.grid]  # fmt: skip
    mutated = next((j for j, d in enumerate(tensor_decls) if d.mutates), 0)
    min_nd = min_ranks(op, sh, out_args, extra_args, exprs, geometry, mutated)
    typing = Typing(dtypes=[d.dtype if isinstance(d.dtype, torch.dtype) else None for d in tensor_decls],
                    like=_dtype_likes(op, tensor_decls, tensors),
                    scalar_ctypes={d.name: int_scalar if d.py_type is int else _DEFAULT_SCALAR_CTYPE[d.py_type.__name__]
                                   for d in inputs if isinstance(d, ScalarInput)},
                    out_dtypes=[None] * len(out_args), out_like=[None] * len(out_args))  # fmt: skip
    kinds = [("tensor" if isinstance(d, InputDecl) else "scalar", d.name) for d in inputs]
    # A scalar named like a compile-time parameter (a Triton constexpr) is compiled in, not passed
    items = [
        d for d in declared_items(kinds, extra_args, out_args) if not (d.kind == "scalar" and d.name in static_names)
    ]
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
    _dtype_sets(op, inputs, tensor_decls, typing)
    out_args = _output_dtypes(op, outputs, out_args, typing, tensors)
    key = named_key(op, key, bound, inputs, extra_args, out_names, static_names)
    # A Triton input without a dtype takes floating dtypes (one compile each), not ints and bools that a float
    # kernel would compute with silently; ``dtype="any"`` (or a set) says otherwise.
    floats = typed == "none" and dtype_generic and not host_launched
    resolved_inputs = _input_args(op, inputs, tensors, extra_args, geometry, typing, min_nd, declared, sh, static_names,
                                  floats)  # fmt: skip
    if outputs is not None:
        shared = [["stride", r, 0] for e in extra_args for r in e.same]  # a Stride that also describes it
        out_args = _requests(op, outputs, out_args, resolved_inputs, exprs + shared, asked)
    return Resolved(tuple(resolved_inputs), tuple(extra_args), tuple(out_args), launches[0], launches, key, bound,
                    tuple((n, k, a) for n, (k, a) in sh.dims.items()),
                    tuple((n, *v) for n, v in sh.groups.items()), reqs)  # fmt: skip


def _input_args(op: str, inputs: Sequence[InputDecl | ScalarInput], tensors: list[str], extra_args: Sequence,
                geometry: object, typing: Typing, min_nd: list[int], declared: list[int | None],
                sh: Shapes, static_names: frozenset[str] = frozenset(),
                floats: bool = False) -> list[TensorArg | ScalarArg]:  # fmt: skip
    """The resolved inputs in declaration order: scalars with their C types, tensors with their dtype, layout
    policy, rank bounds, declared shape, the axes the kernel is given strides for and the alignment it needs."""
    strided = [sorted({e.expr[2] for e in extra_args if isinstance(e.expr, list) and e.expr[0] == "stride"
                       and f"i{k}" in (e.expr[1], *e.same)}) for k in range(len(tensors))]  # fmt: skip
    resolved_inputs: list[TensorArg | ScalarArg] = []
    for d in inputs:
        if isinstance(d, ScalarInput):
            static = d.name in static_names  # compiled in: its value is a constexpr (f64, i64 or bool in the key)
            resolved_inputs.append(ScalarArg(d.name, d.py_type.__name__, typing.scalar_ctypes[d.name], static=static))
            continue
        ti = tensors.index(d.name)
        dt, nd_min, nd = typing.dtypes[ti], min_nd[ti], declared[ti]
        if nd is not None and nd < nd_min:
            what = "ndim" if d.ndim is not None else "shape"
            raise SpecError(op, f"inputs[{ti}].{what}", f"'{d.name}' is declared with {nd} dims but the "
                            f"geometry, a ReduceDims, a named dimension or an extra needs at least {nd_min}.",
                            f"fix {what} or the axes.")  # fmt: skip
        # A '*' group before the strided axes (counted from the end) flattens into the axis it precedes: the
        # call-time rule (layout.addressable) passes a tensor whose group strides row-major around that axis,
        # which is what one row stride addresses, and copies one that does not; ("*R", "N") with the row stride
        # takes (B, T, N) as the published layer norms' host code does by viewing it as (B * T, N).
        entries = d.shape if isinstance(d.shape, tuple | list) else ()  # SameAs("x") names no group
        grouped = any(isinstance(e, str) and e.startswith("*") for e in entries)
        if grouped and all(a < 0 for a in strided[ti]):
            pass
        elif strided[ti] and nd is None and isinstance(geometry, Elementwise | Reduction):
            raise SpecError(op, f"inputs[{ti}].shape", f"'{d.name}' is addressed with its strides (a Stride extra), but "
                            f"its rank is not declared: the {type(geometry).__name__} geometry flattens the axes the "
                            "kernel is not given strides for, and a tensor of another rank would be read at the "
                            "wrong places.", f"declare its shape (e.g. InputDecl('{d.name}', shape=('M', 'N')), or "
                            f"('*R', 'N') with strides counted from the end) or ndim.")  # fmt: skip
        allowed = () if dt or not isinstance(d.dtype, set | frozenset | tuple | list) else \
            tuple(sorted(str(x).removeprefix("torch.") for x in d.dtype))  # fmt: skip
        if floats and d.dtype is None and not dt and typing.like[ti] is None:
            allowed = FLOATS
        resolved_inputs.append(TensorArg(d.name, str(dt).removeprefix("torch.") if dt else None,
                                         "require" if d.mutates else d.contiguous, nd, max(nd_min, sh.least[ti]),
                                         d.mutates, sh.entries[ti], typing.like[ti], tuple(strided[ti]),
                                         d.align or 0, sh.like[ti], optional=d.optional, dtypes=allowed,
                                         absent=d.absent, exprs=tuple(sh.exprs[ti])))  # fmt: skip
        if d.absent == "dummy" and not dt and typing.like[ti] is None:
            raise SpecError(op, f"inputs[{ti}].absent", f"'{d.name}' is passed as a dummy when None, and its dtype "
                            f"is {'a set' if allowed else 'open'}: the dummy has no pointer type to compile as.",
                            f"declare the dtype the kernel's pointer has, e.g. InputDecl('{d.name}', torch.int64, "
                            "optional=True, absent='dummy').")  # fmt: skip
    return resolved_inputs


def _requests(op: str, outputs: Sequence, out_args: list[OutputArg], resolved_inputs: list,
              exprs: list, asked: dict[str, int]) -> list[OutputArg]:  # fmt: skip
    """Each optional output's flag, ``bool return_<name>=False``, appended to the inputs at the position
    ``asked`` gave it (which ``Present`` of the output reads), so every earlier position stays what the record's
    expressions and parameters say. Its size may not feed the launch: a call that leaves it out has no tensor
    to read it from."""
    out = list(out_args)
    for k, o in enumerate(outputs):
        field = f"outputs[{k}].optional"
        if not o.optional:
            continue
        if _reads(exprs, f"o{k}"):
            raise SpecError(op, field, f"'{o.name}' is optional, but a launch size, extra or precondition reads its "
                            "size, which a call that leaves it out does not have.",
                            "read the size from the input it is shaped like (SameAs, a named dimension), or make "
                            "the output required.")  # fmt: skip
        assert asked[o.name] == len(resolved_inputs)  # one input per declared input, then the flags in order
        out[k] = dataclasses.replace(out[k], when=asked[o.name])
        resolved_inputs.append(ScalarArg(f"return_{o.name}", "bool", "bool", flag=True))
    return out


def _reads(expr: Any, ref: str) -> bool:
    """Whether a geometry expression (or a list of them) reads tensor ``ref``'s sizes."""
    if isinstance(expr, list | tuple):
        return (len(expr) > 1 and expr[1] == ref and expr[0] in ("numel", "size", "stride", "lead", "prod")) or \
            any(_reads(e, ref) for e in expr)  # fmt: skip
    return False


def _outputs_of_required(op: str, out_args: list[OutputArg], decls: list[InputDecl]) -> None:
    """An output takes its shape and dtype from inputs every call passes: an absent one has neither."""
    for k, o in enumerate(out_args):
        src = o.shape.get("same_as", o.shape.get("reduce"))
        for field, j in ((".shape", src), (".dtype_from", o.dtype_from if o.dtype is None else None)):
            if j is not None and decls[j].optional:
                raise SpecError(op, f"outputs[{k}]{field}", f"'{o.name}' takes its {field[1:]} from the optional "
                                f"input '{decls[j].name}', which a call may pass as None.",
                                "take it from a required input, or name the sizes ('N').")  # fmt: skip


def _dtype_sets(op: str, inputs: Sequence, decls: list[InputDecl], typing: Typing) -> None:
    """A declared set of dtypes against what the kernel's parameter fixes (``const float* x``): the fixed one
    must be in the set (it then stands alone); a dtype tied to another input (``dtype="x"``) takes x's set."""
    for k, d in enumerate(decls):
        if not isinstance(d.dtype, set | frozenset | tuple | list):
            continue
        fixed = typing.dtypes[k]
        if fixed is not None and fixed not in d.dtype:
            names = sorted(str(x) for x in d.dtype)
            raise SpecError(op, f"inputs[{list(inputs).index(d)}].dtype", f"the kernel's parameter fixes '{d.name}' "
                            f"to {fixed}, which is not in the declared {names}.",
                            f"declare dtype={fixed} (the kernel reads only that), or type the parameter with a "
                            f"template bound by {{T_{d.name}}}.")  # fmt: skip


#: What a Triton input declared without a dtype takes (``dtype="any"``: every dtype).
FLOATS = ("bfloat16", "float16", "float32", "float64", "float8_e4m3fn", "float8_e5m2")


def _dtype_likes(op: str, decls: list[InputDecl], tensors: list[str]) -> list[str | None]:
    """``InputDecl("b", dtype="a")``: ``b`` must have the dtype of tensor input ``a`` (a Triton matmul's operands,
    which ``tl.dot`` needs alike); followed to an input with a dtype of its own, so no chain or cycle is left."""
    like = [d.dtype if isinstance(d.dtype, str) and d.dtype != "any" else None for d in decls]
    if "any" in tensors and any(d.dtype == "any" for d in decls):
        raise SpecError(op, "inputs", "dtype='any' reads as both 'any dtype' and the dtype of the input named 'any'.",
                        "rename the input 'any'.")  # fmt: skip
    for k, d in enumerate(decls):
        if like[k] is not None and like[k] not in tensors:
            raise SpecError(op, f"inputs '{d.name}'.dtype", f"'{like[k]}' is not a tensor input (have {tensors}).",
                            "name another tensor input, or pass a torch.dtype.")  # fmt: skip
        if like[k] is not None and decls[tensors.index(like[k])].optional:
            raise SpecError(op, f"inputs '{d.name}'.dtype", f"'{like[k]}' is optional: a call may pass None, which "
                            "has no dtype.", f"name a required input, or give the optional one dtype='{d.name}' "
                            "instead.")  # fmt: skip
    for k, d in enumerate(decls):
        seen = {k}
        while like[k] is not None and like[tensors.index(like[k])] is not None:
            j = tensors.index(like[k])
            if j in seen:
                raise SpecError(op, f"inputs '{d.name}'.dtype", "the dtypes name each other in a cycle.",
                                "give one of them a torch.dtype, or none (read from the kernel or the call).")  # fmt: skip
            seen.add(j)
            like[k] = like[j]
    return like


def _check_dim_names(op: str, sh: Shapes, configs: Sequence[Config]) -> None:
    """A size expression's bare name must mean one thing: a dimension or a config parameter."""
    for c in configs:
        both = sorted(set(sh.trees()) & set(c.params))
        if both:
            raise SpecError(op, "inputs.shape", f"{both} name both a dimension and a config parameter.",
                            "rename the dimension or the parameter.")  # fmt: skip


def _lower(op: str, geometry: object, params: dict, tensors: list[str], out_names: list[str],
           sh: Shapes) -> LaunchPlan | None:  # fmt: skip
    if geometry is None:
        return None
    from .expr import ExprError

    refs = {**{n: f"i{k}" for k, n in enumerate(tensors)}, **{n: f"o{k}" for k, n in enumerate(out_names)}}
    try:
        return lower_geometry(geometry, params, refs, sh.trees())  # type: ignore[arg-type]
    except ExprError as e:
        field = getattr(e, "field", "geometry.grid")
        example = "'(3 * Bc * size(q, -1) + Bc * Br) * 4'" if field == "geometry.shared_mem" else \
            "'cdiv(numel(x), 256)' or 'min(size(p, 0), sm_count * MINB)'"  # fmt: skip
        raise SpecError(op, field, f"{e}.", f"write sizes like {example} (see opsmith/declare/expr.py).") from None


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
    """Each output's dtype: declared (``OutputDecl.dtype``), fixed by the kernel's pointer type, taken from
    the input whose template parameter types it, or from ``dtype_from`` (default: the first tensor input)."""
    res = []
    for k, o in enumerate(out_args):
        explicit = outputs is not None and outputs[k].dtype_from is not None
        src, fixed, like = o.dtype_from, typing.out_dtypes[k], typing.out_like[k]
        declared = dtype_from_name(o.dtype)
        if declared is not None and fixed is not None and declared != fixed:
            raise SpecError(op, f"outputs[{k}].dtype", f"'{o.name}' is declared {declared} but the kernel writes it "
                            f"as {fixed}.", "make OutputDecl.dtype match the kernel's pointer type, or drop it.")  # fmt: skip
        if declared is not None and like is not None:
            raise SpecError(op, f"outputs[{k}].dtype", f"'{o.name}' is declared {declared} but the kernel types it by "
                            f"the template parameter of '{like}'.", f"drop dtype (it takes the dtype of '{like}'), "
                            "or give the output a pointer type of its own in the kernel.")  # fmt: skip
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
        dt = declared or fixed or src_dt
        res.append(OutputArg(o.name, o.shape, src, str(dt).removeprefix("torch.") if dt else None, o.init))
    return res
