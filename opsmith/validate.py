"""Registration-time checks: the declaration against itself, the override rules and the kernel's signature.

Every mistake raises ``SpecError`` (a ``ValueError``) naming the op, the field and the fix. What passes is
resolved into record parts: names become positions, every pointer gets its element type, every by-value
parameter its C type.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .errors import SpecError
from .geometry import LaunchPlan, lower_geometry, min_rank
from .record import ExtraArg, OutputArg, ScalarArg, TensorArg
from .signature import DTYPE_OF_CTYPE, SIZE_OF_CTYPE, CParam
from .spec import (
    Autotune,
    Config,
    Custom,
    DimSize,
    Elementwise,
    InputDecl,
    Numel,
    OutputDecl,
    ReduceDims,
    Reduction,
    SameAs,
    ScalarInput,
    TuneDim,
)

__all__ = ["Resolved", "check_autotune", "check_op_name", "resolve"]

_DEFAULT_SCALAR_CTYPE = {"float": "f32", "int": "i32", "bool": "bool"}
_INT_CTYPES = {"i32", "u32", "i64", "u64"}
_SCALAR_CTYPES = {
    "float": {"f32", "f64", "f16", "bf16"},
    "int": {"i8", "u8", "i16", "u16", "i32", "u32", "i64", "u64"},
    "bool": {"bool", "u8", "i8", "i32"},
}


@dataclass(frozen=True)
class Resolved:
    inputs: tuple[TensorArg | ScalarArg, ...]
    extras: tuple[ExtraArg, ...]
    outputs: tuple[OutputArg, ...]
    launch: LaunchPlan | None
    launches: tuple[LaunchPlan | None, ...] = ()
    tune_key: tuple = ()


def check_op_name(op_name: str) -> tuple[str, str]:
    ns, sep, name = op_name.partition("::")
    ok = sep and all(re.fullmatch(r"[A-Za-z_]\w*", p) for p in (ns, name)) and "." not in name
    if not ok:
        raise SpecError(op_name, "op_name", f"'{op_name}' is not of the form 'namespace::name'.",
                        "name the op like 'myns::relu' (identifiers only).")  # fmt: skip
    return ns, name


def _ident(op: str, field: str, name: object) -> None:
    if not isinstance(name, str) or not name.isidentifier() or keyword.iskeyword(name):
        raise SpecError(op, field, f"{name!r} is not a usable argument name.",
                        "use a Python identifier that is not a keyword, e.g. 'x' or 'alpha'.")  # fmt: skip


def _ref(op: str, field: str, ref: int | str, tensors: list[str], scalars: list[str]) -> int:
    if isinstance(ref, bool) or not isinstance(ref, int | str):
        raise SpecError(op, field, f"{ref!r} is neither an input name nor a position.",
                        "pass the name of a tensor input (preferred) or its position.")  # fmt: skip
    if isinstance(ref, int):
        if not -len(tensors) <= ref < len(tensors):
            raise SpecError(op, field, f"position {ref} is out of range: there are {len(tensors)} tensor "
                            f"inputs {tensors} (scalar inputs are not counted).",
                            f"use a position in [0, {len(tensors)}) or a name from {tensors}.")  # fmt: skip
        return ref % len(tensors)
    if ref in scalars:
        raise SpecError(op, field, f"'{ref}' is a scalar input, not a tensor.",
                        f"reference one of the tensor inputs {tensors}.")  # fmt: skip
    if ref not in tensors:
        raise SpecError(op, field, f"'{ref}' is not an input.", f"use one of the tensor inputs {tensors}.")
    return tensors.index(ref)


def _check_geometry(op: str, geometry: object) -> None:
    if isinstance(geometry, Elementwise):
        b = geometry.block
        if geometry.layout not in ("flat", "nd"):
            raise SpecError(op, "geometry.layout", f"{geometry.layout!r} is not a layout.", "use 'flat' or 'nd'.")
        if (
            not isinstance(b, tuple | list)
            or not 1 <= len(b) <= 3
            or not all(isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool) and v > 0) for v in b)
        ):
            raise SpecError(op, "geometry.block", f"{b!r} is not a block of 1 to 3 positive ints or config "
                            "parameter names.", "pass e.g. block=(256,), block=(16, 16) or block=('BLOCK',).")  # fmt: skip
        if geometry.layout == "flat" and len(b) != 1:
            raise SpecError(
                op,
                "geometry.block",
                f"layout='flat' takes a 1-D block, got {tuple(b)}.",
                "use block=(N,) with layout='flat', or layout='nd' for a multi-dimensional block.",
            )
        threads = 1
        for v in b:
            threads *= v if isinstance(v, int) else 1
        if threads > 1024 or (len(b) == 3 and b[2] > 64):
            raise SpecError(op, "geometry.block", f"block {tuple(b)} has {threads} threads (z={b[2] if len(b) == 3 else 1}).",
                            "keep the product at most 1024 threads and z at most 64 (CUDA limits).")  # fmt: skip
    elif isinstance(geometry, Reduction):
        bs = geometry.block_size
        if not isinstance(bs, str) and (not isinstance(bs, int) or isinstance(bs, bool) or not 1 <= bs <= 1024):
            raise SpecError(op, "geometry.block_size", f"{bs!r} is not a block size.",
                            "use an int in [1, 1024], usually a multiple of 32.")  # fmt: skip
        dims = geometry.reduce_dims
        if not isinstance(dims, tuple | list) or not dims or not all(isinstance(d, int) for d in dims):
            raise SpecError(op, "geometry.reduce_dims", f"{dims!r} is not a non-empty tuple of axes.",
                            "pass e.g. reduce_dims=(-1,).")  # fmt: skip
        if not isinstance(geometry.shared_mem, int) or geometry.shared_mem < 0:
            raise SpecError(op, "geometry.shared_mem", f"{geometry.shared_mem!r} is not a byte count.",
                            "pass a non-negative int.")  # fmt: skip
    elif isinstance(geometry, Custom):
        if not callable(geometry.fn):
            raise SpecError(op, "geometry.fn", f"Custom.fn is {type(geometry.fn).__name__}, not callable.",
                            "pass fn(inputs, outputs) -> (grid, block[, shared_mem]).")  # fmt: skip
    elif geometry is not None:
        raise SpecError(op, "geometry", f"{type(geometry).__name__} is not a geometry.",
                        "use Elementwise, Reduction or Custom.")  # fmt: skip


def check_autotune(op: str, autotune: Autotune | None, geometry: object, *, triton: bool,
                   defaults: dict | None = None) -> list[Config]:  # fmt: skip
    """The configs to build (one, empty, when not tuned); every geometry parameter name must be defined.
    ``defaults``: the kernel's own constexpr defaults (Triton), which configs may leave out."""
    if autotune is None:
        configs = [Config()]
    else:
        if not isinstance(autotune, Autotune):
            raise SpecError(op, "autotune", f"{autotune!r} is not an Autotune.", "pass Autotune(configs=[...]).")
        configs = list(autotune.configs) if isinstance(autotune.configs, Sequence) else []
        if not configs:
            raise SpecError(op, "autotune.configs", "no configs are given.", "list at least one Config(...).")
        for k, c in enumerate(configs):
            field = f"autotune.configs[{k}]"
            if not isinstance(c, Config):
                raise SpecError(op, field, f"{c!r} is not a Config.", "wrap it in Config(params={...}).")
            if not isinstance(c.params, dict) or not all(isinstance(n, str) and n.isidentifier() for n in c.params):
                raise SpecError(op, field + ".params", f"{c.params!r} is not a dict of identifiers to values.",
                                "pass e.g. params={'BLOCK': 256}.")  # fmt: skip
            for n, v in c.params.items():
                if not isinstance(v, int | float | bool | str):
                    raise SpecError(op, f"{field}.params['{n}']", f"{v!r} is not an int, float, bool or str.",
                                    "use plain values; they become defines or constexprs.")  # fmt: skip
            for opt in ("num_warps", "num_stages"):
                v = getattr(c, opt)
                if v is None:
                    continue
                if not triton:
                    raise SpecError(op, f"{field}.{opt}", f"{opt} is a Triton option; this is a CUDA C++ kernel.",
                                    "set the block size through the geometry (block=('NAME',)) instead.")  # fmt: skip
                ok = isinstance(v, int) and not isinstance(v, bool) and v >= 1
                if opt == "num_warps":
                    ok = ok and v <= 32 and v & (v - 1) == 0
                if not ok:
                    raise SpecError(op, f"{field}.{opt}", f"{v!r} is not a valid {opt}.",
                                    "num_warps: a power of two in [1, 32]; num_stages: a positive int.")  # fmt: skip
        d = autotune.default
        if not isinstance(d, int) or isinstance(d, bool) or not 0 <= d < len(configs):
            raise SpecError(op, "autotune.default", f"{d!r} is not a config index.",
                            f"use an int in [0, {len(configs)}).")  # fmt: skip
    if defaults:
        configs = [Config({**defaults, **c.params}, c.num_warps, c.num_stages) for c in configs]
    names: list[str] = []
    if isinstance(geometry, Elementwise):
        names = [v for v in geometry.block if isinstance(v, str)]
    elif isinstance(geometry, Reduction) and isinstance(geometry.block_size, str):
        names = [geometry.block_size]
    for n in names:
        for k, c in enumerate(configs):
            v = c.params.get(n)
            if autotune is None and v is None:
                raise SpecError(op, "geometry", f"the block names the config parameter '{n}' but the op has no "
                                "autotune configs.", "pass autotune=Autotune(configs=[Config(params={"
                                f"'{n}': 256}})]) or write the number.")  # fmt: skip
            if not isinstance(v, int) or isinstance(v, bool) or v <= 0 or (not triton and v > 1024):
                raise SpecError(op, f"autotune.configs[{k}].params", f"the geometry's block uses '{n}', which is "
                                f"{'missing' if v is None else repr(v)} here.",
                                f"give every config a positive int '{n}'"
                                f"{'' if triton else ' (at most 1024 threads)'}.")  # fmt: skip
    return configs


def _tune_key(op: str, key: Sequence[TuneDim], tensors: list[str], scalars: list[str]) -> tuple:
    if not key:
        return tuple(["numel", f"i{k}", "pow2"] for k in range(len(tensors)))
    out = []
    for k, t in enumerate(key):
        field = f"autotune.key[{k}]"
        if not isinstance(t, TuneDim):
            raise SpecError(op, field, f"{t!r} is not a TuneDim.", "use TuneDim(input_name, axis).")
        if t.bucket not in ("pow2", "exact"):
            raise SpecError(op, field + ".bucket", f"{t.bucket!r} is not a bucket.", "use 'pow2' or 'exact'.")
        ref = f"i{_ref(op, field + '.input_name', t.input_name, tensors, scalars)}"
        if t.axis is None:
            out.append(["numel", ref, t.bucket])
            continue
        if not isinstance(t.axis, int) or isinstance(t.axis, bool):
            raise SpecError(op, field + ".axis", f"{t.axis!r} is not an axis.",
                            "pass an int (negative allowed), or None for the numel.")  # fmt: skip
        out.append(["dim", ref, t.axis, t.bucket])
    return tuple(out)


def resolve(
    op: str,
    inputs: Sequence[InputDecl | ScalarInput] | None,
    outputs: Sequence[OutputDecl] | None,
    extras: Sequence[Numel | DimSize],
    geometry: object,
    signature: list[CParam] | None,
    *,
    pointers_typed: bool,
    has_meta_fn: bool,
    has_eager_fn: bool,
    has_schema: bool,
    configs: Sequence[Config] = (Config(),),
    tune_key: Sequence[TuneDim] = (),
    dtype_generic: bool = False,
) -> Resolved | None:
    """Check the declaration; ``None`` when it is too partial to describe a launch (override path)."""
    _check_geometry(op, geometry)
    if outputs is None and not has_meta_fn:
        raise SpecError(op, "outputs", "no outputs are declared and no meta_fn was given.",
                        "declare outputs=[OutputDecl(...)] or pass meta_fn= to derive output shapes.")  # fmt: skip
    if geometry is None and not has_eager_fn:
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
    names: list[str] = []
    tensors: list[str] = []
    scalars: list[str] = []
    for k, d in enumerate(inputs):
        field = f"inputs[{k}]"
        if not isinstance(d, InputDecl | ScalarInput):
            raise SpecError(op, field, f"{d!r} is not an InputDecl or ScalarInput.", "wrap it in InputDecl(name).")
        _ident(op, field + ".name", d.name)
        if d.name in names:
            raise SpecError(op, field + ".name", f"'{d.name}' is declared twice.", "give every input a unique name.")
        names.append(d.name)
        if isinstance(d, ScalarInput):
            if d.py_type not in (float, int, bool):
                raise SpecError(op, field + ".py_type", f"{d.py_type!r} is not float, int or bool.",
                                "use py_type=float, int or bool.")  # fmt: skip
            scalars.append(d.name)
        else:
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
                        (isinstance(e, int) and not isinstance(e, bool) and e >= 0) or isinstance(e, DimSize)
                        for e in d.shape):  # fmt: skip
                    raise SpecError(op, field + ".shape", f"{d.shape!r} is not a shape.",
                                    "use a tuple of ints and DimSize(other_input, axis).")  # fmt: skip
                if d.ndim is not None and d.ndim != len(d.shape):
                    raise SpecError(op, field + ".ndim", f"ndim={d.ndim} disagrees with shape={d.shape!r}.",
                                    "drop ndim; shape implies it.")  # fmt: skip
            tensors.append(d.name)
    if outputs is None:
        return None  # meta_fn describes the outputs; the launch needs eager_fn or Custom
    out_names: list[str] = []
    for k, o in enumerate(outputs):
        field = f"outputs[{k}]"
        if not isinstance(o, OutputDecl):
            raise SpecError(op, field, f"{o!r} is not an OutputDecl.", "wrap it in OutputDecl(name, shape=...).")
        _ident(op, field + ".name", o.name)
        if o.name in names or o.name in out_names:
            raise SpecError(op, field + ".name", f"'{o.name}' is already used by another input or output.",
                            "give every input and output a unique name.")  # fmt: skip
        out_names.append(o.name)
    if not tensors:
        raise SpecError(op, "inputs", "declarative outputs need at least one tensor input to take a shape from.",
                        "add an InputDecl, or pass meta_fn= and eager_fn= for this kernel.")  # fmt: skip

    # Extras: integers computed from input shapes.
    extra_args: list[ExtraArg] = []
    for k, e in enumerate(extras):
        field = f"extras[{k}]"
        if not isinstance(e, Numel | DimSize):
            raise SpecError(op, field, f"{e!r} is not Numel or DimSize.", "use Numel(name) or DimSize(name, axis).")
        if e.dtype not in (None, "int32", "int64"):
            raise SpecError(op, field + ".dtype", f"{e.dtype!r} is not an index type.", "use 'int32' or 'int64'.")
        idx = _ref(op, field + ".input_name", e.input_name, tensors, scalars)
        if isinstance(e, Numel):
            expr, label = ["numel", f"i{idx}"], f"numel({e.input_name})"
        else:
            if not isinstance(e.axis, int) or isinstance(e.axis, bool):
                raise SpecError(op, field + ".axis", f"{e.axis!r} is not an axis.", "pass an int (negative allowed).")
            expr, label = ["size", f"i{idx}", e.axis], f"size({e.input_name}, {e.axis})"
        extra_args.append(ExtraArg(label, expr, {"int32": "i32", "int64": "i64", None: ""}[e.dtype]))

    # Outputs: shape relation and dtype source.
    out_args: list[OutputArg] = []
    for k, o in enumerate(outputs):
        field = f"outputs[{k}]"
        rel = o.shape
        if isinstance(rel, SameAs):
            shape = {"same_as": _ref(op, field + ".shape.input_idx", rel.input_idx, tensors, scalars)}
        elif isinstance(rel, ReduceDims):
            ref = _ref(op, field + ".shape.input_idx", rel.input_idx, tensors, scalars)
            dims = rel.dims
            if not isinstance(dims, tuple | list) or not dims or not all(isinstance(d, int) for d in dims):
                raise SpecError(op, field + ".shape.dims", f"{dims!r} is not a non-empty tuple of axes.",
                                "pass e.g. dims=(-1,); use SameAs for an unreduced output.")  # fmt: skip
            if len(set(dims)) != len(dims):
                raise SpecError(op, field + ".shape.dims", f"{tuple(dims)} repeats an axis.", "list each axis once.")
            shape = {"reduce": ref, "dims": list(dims), "keepdim": bool(rel.keepdim)}
        else:
            raise SpecError(op, field + ".shape", f"{rel!r} is not a shape relation.",
                            "use SameAs(input) or ReduceDims(input, dims), or pass meta_fn=.")  # fmt: skip
        src = 0 if o.dtype_from is None else _ref(op, field + ".dtype_from", o.dtype_from, tensors, scalars)
        out_args.append(OutputArg(o.name, shape, src))

    # Rank needs of the geometry and of ReduceDims.
    min_nd = [0] * len(tensors)
    for o in out_args:
        if "reduce" in o.shape:
            min_nd[o.shape["reduce"]] = max(
                min_nd[o.shape["reduce"]], *(d + 1 if d >= 0 else -d for d in o.shape["dims"])
            )
    for e in extra_args:
        if e.expr[0] == "size":
            k, axis = int(e.expr[1][1:]), e.expr[2]
            min_nd[k] = max(min_nd[k], axis + 1 if axis >= 0 else -axis)
    if geometry is not None:
        ref, rank = min_rank(geometry)  # type: ignore[arg-type]
        if ref == "i0":
            min_nd[0] = max(min_nd[0], rank)
        elif rank and not out_args:  # no outputs: the geometry spans the first mutated input
            k = next(i for i, d in enumerate(d for d in inputs if isinstance(d, InputDecl)) if d.mutates)
            min_nd[k] = max(min_nd[k], rank)
        elif rank:  # the first output's rank follows from its source input's
            o = out_args[0]
            src = o.shape.get("same_as", o.shape.get("reduce"))
            lost = 0 if "same_as" in o.shape or o.shape["keepdim"] else len(o.shape["dims"])
            min_nd[src] = max(min_nd[src], rank + lost)

    tensor_decls = [d for d in inputs if isinstance(d, InputDecl)]
    dtypes: list[torch.dtype | None] = [d.dtype for d in tensor_decls]
    scalar_ctypes = {d.name: _DEFAULT_SCALAR_CTYPE[d.py_type.__name__] for d in inputs if isinstance(d, ScalarInput)}
    out_dtypes: list[torch.dtype | None] = [None] * len(out_args)

    if signature is not None:
        _match_signature(op, inputs, extra_args, out_args, signature, pointers_typed, dtypes, scalar_ctypes, out_dtypes)
    elif pointers_typed and (scalar_ctypes or extra_args):
        import warnings

        warnings.warn(f"{op}: could not read the kernel's parameter list from the source (a macro or unusual "
                      "syntax), so scalar and extra parameter types are assumed: float -> 32-bit float, int -> "
                      "32-bit int, extras -> their declared dtype or int32. A kernel taking double or long long "
                      "would read garbage. Fix: write the __global__ definition plainly in the source.",
                      stacklevel=4)  # fmt: skip
    for k, e in enumerate(extra_args):
        if not e.ctype:
            extra_args[k] = ExtraArg(e.name, e.expr, "i32")
    # Every tensor needs a known element type unless the kernel takes void* (or compiles one per dtype).
    for k, d in enumerate(tensor_decls):
        if dtypes[k] is None and not dtype_generic and not _is_void(signature, inputs, d.name):
            raise SpecError(op, f"inputs[{list(inputs).index(d)}].dtype",
                            f"the element type of '{d.name}' is unknown (the kernel's signature does not say it).",
                            f"declare InputDecl('{d.name}', dtype=torch.float32) (or the dtype the kernel reads).")  # fmt: skip
    for k, o in enumerate(out_args):
        src_dt = dtypes[o.dtype_from]
        if out_dtypes[k] is not None and src_dt is not None and out_dtypes[k] != src_dt:
            raise SpecError(op, f"outputs[{k}].dtype_from",
                            f"'{o.name}' takes its dtype from '{tensors[o.dtype_from]}' ({src_dt}) but the kernel "
                            f"writes it as {out_dtypes[k]}.",
                            "point dtype_from at an input of the output's element type, or fix the kernel.")  # fmt: skip
        if out_dtypes[k] is not None and src_dt is None:
            dtypes[o.dtype_from] = out_dtypes[k]
        fixed = out_dtypes[k] or dtypes[o.dtype_from]
        out_args[k] = OutputArg(o.name, o.shape, o.dtype_from, str(fixed).removeprefix("torch.") if fixed else None)

    shapes = _resolve_shapes(op, inputs, tensors, min_nd)
    resolved_inputs: list[TensorArg | ScalarArg] = []
    ti = 0
    for d in inputs:
        if isinstance(d, InputDecl):
            dt = dtypes[ti]
            nd_min = min_nd[ti]
            if d.ndim is not None and d.ndim < nd_min:
                raise SpecError(op, f"inputs[{ti}].ndim", f"'{d.name}' is declared with {d.ndim} dims but the "
                                f"geometry or a ReduceDims needs at least {nd_min}.", "fix ndim or the axes.")  # fmt: skip
            resolved_inputs.append(TensorArg(d.name, str(dt).removeprefix("torch.") if dt else None,
                                             "require" if d.mutates else d.contiguous,
                                             len(d.shape) if d.shape is not None else d.ndim, nd_min,
                                             d.mutates, shapes[ti]))  # fmt: skip
            ti += 1
        else:
            resolved_inputs.append(ScalarArg(d.name, d.py_type.__name__, scalar_ctypes[d.name]))
    launches = tuple(lower_geometry(geometry, c.params) if geometry is not None else None  # type: ignore[arg-type]
                     for c in configs)  # fmt: skip
    key = _tune_key(op, tune_key, tensors, scalars) if len(configs) > 1 else ()
    return Resolved(tuple(resolved_inputs), tuple(extra_args), tuple(out_args), launches[0], launches, key)


def _resolve_shapes(op: str, inputs: Sequence, tensors: list[str], min_nd: list[int]) -> list[tuple | None]:
    """Each tensor input's declared shape as record entries (int, or [input index, axis]); raises the
    axes a reference needs into the referenced input's minimum rank."""
    out: list[tuple | None] = []
    for d in (x for x in inputs if isinstance(x, InputDecl)):
        if d.shape is None:
            out.append(None)
            continue
        entries: list = []
        for e in d.shape:
            if isinstance(e, int):
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


def _is_void(signature: list[CParam] | None, inputs: Sequence, name: str) -> bool:
    if signature is None:
        return False
    pos = [d.name for d in inputs].index(name)
    return pos < len(signature) and signature[pos].ctype == "void"


def _match_signature(op, inputs, extras, outputs, sig, pointers_typed, dtypes, scalar_ctypes, out_dtypes) -> None:
    roles = [("tensor" if isinstance(d, InputDecl) else "scalar", d.name) for d in inputs]
    roles += [("extra", e.name) for e in extras] + [("output", o.name) for o in outputs]
    if len(sig) != len(roles):
        want = ", ".join(f"{n} ({r})" for r, n in roles)
        have = ", ".join(p.spelled for p in sig)
        raise SpecError(op, "kernel signature", f"the kernel takes {len(sig)} parameters ({have}) but the "
                        f"declaration implies {len(roles)}: {want}.",
                        "the order is inputs and scalars as declared, then extras, then outputs; "
                        "make the declaration and the kernel agree.")  # fmt: skip
    ti = ei = oi = 0
    for (role, name), p in zip(roles, sig, strict=True):
        where = f"parameter '{p.spelled}' (for {role} '{name}')"
        if role in ("tensor", "output"):
            is_ptr = p.pointer if pointers_typed else SIZE_OF_CTYPE.get(p.ctype) == 8
            if not is_ptr:
                raise SpecError(op, "kernel signature", f"{where} is not a pointer.",
                                f"pass '{name}' as a pointer, or declare it as a ScalarInput/extra instead.")  # fmt: skip
            elem = DTYPE_OF_CTYPE.get(p.ctype) if pointers_typed else None
            if role == "tensor":
                declared = dtypes[ti]
                if elem is not None and declared is not None and elem != declared:
                    raise SpecError(op, f"inputs '{name}'.dtype", f"declared {declared} but the kernel reads "
                                    f"{p.spelled}.", "make InputDecl.dtype match the kernel's pointer type.")  # fmt: skip
                if declared is None:
                    dtypes[ti] = elem
                ti += 1
            else:
                out_dtypes[oi] = elem
                oi += 1
        else:
            if pointers_typed and p.pointer:
                raise SpecError(op, "kernel signature", f"{where} is a pointer but '{name}' is passed by value.",
                                "declare it as an InputDecl/OutputDecl or change the kernel.")  # fmt: skip
            if role == "scalar":
                py = next(d for d in inputs if d.name == name).py_type.__name__
                if p.ctype not in _SCALAR_CTYPES[py]:
                    raise SpecError(op, f"ScalarInput '{name}'", f"py_type={py} cannot be passed as {where}.",
                                    "make ScalarInput.py_type match the kernel's parameter type.")  # fmt: skip
                scalar_ctypes[name] = p.ctype
            else:
                e = extras[ei]
                if p.ctype not in _INT_CTYPES:
                    raise SpecError(op, f"extras '{name}'", f"{where} is not a 32- or 64-bit integer.",
                                    "take extras as int, unsigned, long long or int64_t.")  # fmt: skip
                if e.ctype and SIZE_OF_CTYPE[e.ctype] != SIZE_OF_CTYPE[p.ctype]:
                    raise SpecError(op, f"extras '{name}'.dtype", f"declared {e.ctype} but {where} has "
                                    f"{SIZE_OF_CTYPE[p.ctype]} bytes.", "make the dtype match the parameter.")  # fmt: skip
                extras[ei] = ExtraArg(e.name, e.expr, p.ctype)
                ei += 1
