"""Registration-time checks of the declaration's parts on their own: the op name, argument names, references
between them, the launch geometry and the autotuning configs. ``resolve.py`` puts them together.

Every mistake raises ``SpecError`` (a ``ValueError``) naming the op, the field and the fix.
"""

from __future__ import annotations

import dataclasses
import inspect
import keyword
import re
from collections.abc import Sequence

import torch

from ..errors import SpecError
from .limits import SMEM_MAX
from .spec import Autotune, Config, Custom, Elementwise, Grid, Reduction, ScalarInput, TuneDim

__all__ = [
    "PYTHON_PATH_NS",
    "RESERVED_NAMESPACES",
    "check_autotune",
    "check_geometry",
    "check_op_name",
    "ident",
    "named_key",
    "ref_index",
    "tune_key_entries",
]

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # ASCII: torch's schema parser takes nothing else

#: Where a served op's Python implementation stays callable: ``opsmith_python_<ns>::<name>`` (native/serving.py).
PYTHON_PATH_NS = "opsmith_python"
#: Namespaces opsmith defines ops in itself (and every namespace that starts with one): served ops' Python
#: paths, the error bridge of native libraries, dry-run launch records. A user op there could collide with
#: one of them only where serving is on, so registration refuses them on every machine.
RESERVED_NAMESPACES = (PYTHON_PATH_NS, "opsmith_errors", "opsmith_dry_run")


def _torch_attribute(ns: str, name: str) -> str | None:
    """Why ``torch.ops.<ns>.<name>`` would not reach the op: the name is an attribute of torch's op
    namespace objects (``name``, ``_dir``, ``__file__``, ``load_library``...), where attribute lookup finds
    that attribute instead of the op."""
    missing = object()
    have = inspect.getattr_static(torch.ops, ns, missing)
    if have is not missing and not isinstance(have, torch._ops._OpNamespace):
        return f"'{ns}' is an attribute of torch.ops ({type(have).__name__}), so torch.ops.{ns} is not a namespace"
    if inspect.getattr_static(torch._ops._OpNamespace("opsmith_probe"), name, missing) is not missing:
        return f"'{name}' is an attribute of torch's op namespaces, so torch.ops.{ns}.{name} would not be the op"
    return None


def _torch_reserved() -> dict[str, str]:
    """Namespaces torch.library refuses to define ops in, and why: its reserved list (``prim``), and ``_``, which
    its C++ registration takes for the wildcard of an implementation for every namespace."""
    reserved = getattr(torch.library, "_reserved_namespaces", ["prim"])
    return {ns: "torch.library reserves it" for ns in reserved} | {"_": "the wildcard of torch's C++ registration"}


def check_op_name(op_name: object) -> tuple[str, str]:
    if not isinstance(op_name, str):
        raise SpecError(str(op_name), "op_name", f"{op_name!r} is not a string.", "name the op like 'myns::relu'.")
    ns, sep, name = op_name.partition("::")
    if not (sep and _IDENT.fullmatch(ns) and _IDENT.fullmatch(name)):
        raise SpecError(op_name, "op_name", f"'{op_name}' is not of the form 'namespace::name' with ASCII identifiers.",
                        "name the op like 'myns::relu' (letters, digits and underscores).")  # fmt: skip
    reserved = next((r for r in RESERVED_NAMESPACES if ns.startswith(r)), None)
    if reserved is not None:
        raise SpecError(op_name, "op_name", f"the namespace '{ns}' is reserved: opsmith defines its own ops under "
                        f"'{reserved}*' (served ops' Python paths, native libraries' errors, dry runs).",
                        "pick another namespace.")  # fmt: skip
    torch_reserved = _torch_reserved().get(ns)
    if torch_reserved is not None:
        raise SpecError(op_name, "op_name", f"the namespace '{ns}' is reserved by torch ({torch_reserved}).",
                        f"pick another namespace, e.g. 'my_{ns.strip('_') or 'ops'}'.")  # fmt: skip
    for part in (ns, name):
        if keyword.iskeyword(part):
            raise SpecError(op_name, "op_name", f"'{part}' is a Python keyword, so torch.ops.{ns}.{name} cannot be "
                            "written.", f"use another name, e.g. '{part}_'.")  # fmt: skip
    why = _torch_attribute(ns, name)
    if why:
        raise SpecError(op_name, "op_name", why + ".", "use another name.")
    return ns, name


def ident(op: str, field: str, name: object) -> None:
    if not isinstance(name, str) or not _IDENT.fullmatch(name) or keyword.iskeyword(name):
        raise SpecError(op, field, f"{name!r} is not a usable argument name.",
                        "use a Python identifier that is not a keyword, e.g. 'x' or 'alpha'.")  # fmt: skip


def ref_index(op: str, field: str, ref: int | str, tensors: list[str], scalars: list[str]) -> int:
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


def check_geometry(op: str, geometry: object) -> None:
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
    elif isinstance(geometry, Grid):
        g, b = geometry.grid, geometry.block
        if not isinstance(g, tuple | list) or not 1 <= len(g) <= 3 or not all(
                isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool) and v > 0) for v in g):  # fmt: skip
            raise SpecError(op, "geometry.grid", f"{g!r} is not 1 to 3 grid entries.",
                            "pass ints or size expressions, e.g. grid=('cdiv(numel(x), 256)',).")  # fmt: skip
        if not isinstance(b, tuple | list) or len(b) > 3 or not all(
                isinstance(v, str) or (isinstance(v, int) and not isinstance(v, bool) and v > 0) for v in b):  # fmt: skip
            raise SpecError(op, "geometry.block", f"{b!r} is not a block of up to 3 positive ints or config names.",
                            "pass e.g. block=(256,) or block=('THREADS',) (empty for Triton).")  # fmt: skip
    elif isinstance(geometry, Custom):
        if not callable(geometry.fn):
            raise SpecError(op, "geometry.fn", f"Custom.fn is {type(geometry.fn).__name__}, not callable.",
                            "pass fn(inputs, outputs) -> (grid, block[, shared_mem]).")  # fmt: skip
    elif geometry is not None:
        raise SpecError(op, "geometry", f"{type(geometry).__name__} is not a geometry.",
                        "use Elementwise, Reduction, Grid or Custom.")  # fmt: skip


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
        configs = [from_triton_config(op, f"autotune.configs[{k}]", c) for k, c in enumerate(configs)]
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
            for opt in ("num_warps", "num_stages", "num_ctas", "maxnreg"):
                v = getattr(c, opt)
                if v is None:
                    continue
                if not triton:
                    raise SpecError(op, f"{field}.{opt}", f"{opt} is a Triton option; this is a CUDA C++ kernel.",
                                    "set the block size through the geometry (block=('NAME',)) instead.")  # fmt: skip
                ok = isinstance(v, int) and not isinstance(v, bool) and v >= 1
                if opt == "num_warps":
                    ok = ok and v <= 32 and v & (v - 1) == 0
                if opt == "maxnreg":  # ptxas's range for .maxnreg
                    ok = ok and 24 <= v <= 255
                if not ok:
                    raise SpecError(op, f"{field}.{opt}", f"{v!r} is not a valid {opt}.",
                                    "num_warps: a power of two in [1, 32]; num_stages, num_ctas: a positive int; "
                                    "maxnreg: an int in [24, 255].")  # fmt: skip
                if opt == "num_ctas" and v > 1:  # refused here rather than at the first call's compile
                    raise SpecError(op, f"{field}.{opt}", f"num_ctas={v} launches thread-block clusters, which "
                                    "opsmith's launchers (Python and native) do not make yet.",
                                    "drop this config, or set num_ctas=1.")  # fmt: skip
        d = autotune.default
        if not isinstance(d, int) or isinstance(d, bool) or not 0 <= d < len(configs):
            raise SpecError(op, "autotune.default", f"{d!r} is not a config index.",
                            f"use an int in [0, {len(configs)}).")  # fmt: skip
    if defaults:
        configs = [dataclasses.replace(c, params={**defaults, **c.params}) for c in configs]
    names: list[str] = []
    if isinstance(geometry, Elementwise):
        names = [v for v in geometry.block if isinstance(v, str)]
    elif isinstance(geometry, Reduction) and isinstance(geometry.block_size, str):
        names = [geometry.block_size]
    elif isinstance(geometry, Grid):
        if triton and geometry.block:
            raise SpecError(op, "geometry.block", "a Triton kernel's block is its num_warps, fixed by the compiler.",
                            "leave Grid.block empty for Triton; set num_warps in the configs.")  # fmt: skip
        if not triton and not geometry.block:
            raise SpecError(op, "geometry.block", "a CUDA kernel needs its threads per block.",
                            "pass Grid(grid=..., block=(256,)).")  # fmt: skip
        names = [v for v in geometry.block if isinstance(v, str)]
        sm = geometry.shared_mem
        if isinstance(sm, str) and sm.strip().isidentifier() and any(sm.strip() in c.params for c in configs):
            _check_smem_param(op, sm.strip(), configs, autotune)
        elif not isinstance(sm, str) and (not isinstance(sm, int) or isinstance(sm, bool) or not 0 <= sm <= SMEM_MAX):
            raise SpecError(op, "geometry.shared_mem", f"{sm!r} is not a byte count in [0, {SMEM_MAX}].",
                            "pass the bytes as an int, a config parameter's name, or a size expression such as "
                            "'(3 * Bc * size(q, -1) + Bc * Br) * 4'.")  # fmt: skip
        if triton and sm != 0:
            raise SpecError(op, "geometry.shared_mem", "a Triton kernel's shared memory is what its compiler "
                            "allocates.", "leave Grid.shared_mem at 0 for Triton.")  # fmt: skip
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


def _check_smem_param(op: str, name: str, configs: list[Config], autotune: Autotune | None) -> None:
    """A Grid's shared_mem named after a config parameter: every config gives bytes, 0 included."""
    for k, c in enumerate(configs):
        v = c.params.get(name)
        if autotune is None or not isinstance(v, int) or isinstance(v, bool) or not 0 <= v <= SMEM_MAX:
            raise SpecError(op, f"autotune.configs[{k}].params", f"the geometry's shared_mem uses '{name}', which is "
                            f"{'missing' if v is None else repr(v)} here.",
                            f"give every config an int '{name}' of bytes in [0, {SMEM_MAX}].")  # fmt: skip


def from_triton_config(op: str, field: str, c: object) -> object:
    """A ``triton.Config`` as opsmith's ``Config`` (anything else unchanged, for the checks to judge).
    Its hooks are Python callbacks around each launch, which the generated launch (and a native library)
    does not make: refused, with what does the same."""
    if isinstance(c, Config) or type(c).__name__ != "Config" or not hasattr(c, "all_kwargs"):
        return c
    if getattr(c, "pre_hook", None) is not None:
        raise SpecError(op, field + ".pre_hook", "a triton.Config pre_hook is a Python callback before each launch, "
                        "which opsmith's generated launch and native libraries do not run.",
                        "drop it: declare the output it clears with OutputDecl(init=0), or list the tensor in "
                        "reset_to_zero/restore_value.")  # fmt: skip
    if getattr(c, "ir_override", None) is not None:
        raise SpecError(op, field + ".ir_override", "a config that replaces the kernel's IR from a file is not "
                        "supported.", "compile that IR to PTX and register it with ptx_op.")  # fmt: skip
    return Config(dict(c.kwargs), num_warps=c.num_warps, num_stages=c.num_stages,
                  num_ctas=getattr(c, "num_ctas", None), maxnreg=getattr(c, "maxnreg", None))  # fmt: skip


def tune_key_entries(op: str, key: Sequence[TuneDim], tensors: list[str], scalars: list[str]) -> tuple:
    if not key:
        return tuple(["numel", f"i{k}", "pow2"] for k in range(len(tensors)))
    out = []
    for k, t in enumerate(key):
        field = f"autotune.key[{k}]"
        if isinstance(t, str):  # a name, as @triton.autotune's key: mapped once the kernel's parameters are bound
            out.append(["name", t, field])
            continue
        if not isinstance(t, TuneDim):
            raise SpecError(op, field, f"{t!r} is not a TuneDim.", "use TuneDim(input_name, axis).")
        if t.bucket not in ("pow2", "exact"):
            raise SpecError(op, field + ".bucket", f"{t.bucket!r} is not a bucket.", "use 'pow2' or 'exact'.")
        ref = f"i{ref_index(op, field + '.input_name', t.input_name, tensors, scalars)}"
        if t.axis is None:
            out.append(["numel", ref, t.bucket])
            continue
        if not isinstance(t.axis, int) or isinstance(t.axis, bool):
            raise SpecError(op, field + ".axis", f"{t.axis!r} is not an axis.",
                            "pass an int (negative allowed), or None for the numel.")  # fmt: skip
        out.append(["dim", ref, t.axis, t.bucket])
    return tuple(out)


def named_key(op: str, key: tuple, params: Sequence, inputs: Sequence, extras: Sequence, outputs: list[str],
              constexprs: frozenset[str]) -> tuple:  # fmt: skip
    """The tuning key with each name (``["name", n, field]``) resolved as ``@triton.autotune`` keys: an extra
    (by its name or the kernel parameter it fills) on its exact value; a tensor adds nothing (every tensor
    input's dtype is in the key already), nor does a constexpr the configs or a heuristic set (Triton's key
    sees only the call's arguments). A scalar input's value is refused: a native library keys on sizes."""
    out = []
    for e in key:
        if e[0] != "name":
            out.append(e)
            continue
        _, n, field = e
        ext = next((j for j, x in enumerate(extras) if x.name == n), None)
        p = next((p for p in params if p.name == n), None)
        if ext is None and p is not None and p.role == "extra":
            ext = p.index
        if ext is not None:
            out.append(["extra", ext, "exact"])
            continue
        arg = inputs[p.index] if p is not None and p.role == "input" else next((a for a in inputs if a.name == n), None)
        if isinstance(arg, ScalarInput):
            raise SpecError(op, field, f"'{n}' is a scalar input; the tuning key holds sizes.",
                            f"declare '{n}' as an extra (Numel, DimSize, Dim) if it is a size, or drop it from the key.")  # fmt: skip
        if arg is not None or n in outputs or (p is not None and p.role == "output") or n in constexprs:
            continue
        raise SpecError(op, field, f"'{n}' names no argument of the kernel.",
                        "name a kernel parameter or a declared extra, or use TuneDim(input, axis).")  # fmt: skip
    return tuple(out)


def check_tuning_writes(op: str, autotune: Autotune, record: object) -> None:
    """``reset_to_zero``/``restore_value`` name tensors the kernel writes: in-place inputs (tuning restores them
    between runs) or outputs with an ``init`` (refilled between runs); ``prune_configs_by``, ``warmup`` and
    ``rep`` have Triton's types."""
    prune = autotune.prune_configs_by
    if prune is not None:
        unknown = set(prune) - {"early_config_prune", "perf_model", "top_k"} if isinstance(prune, dict) else {prune}
        if unknown or any(prune.get(k) is not None and not callable(prune[k]) for k in ("early_config_prune",
                                                                                         "perf_model")):  # fmt: skip
            raise SpecError(op, "autotune.prune_configs_by", f"{prune!r} is not Triton's prune dict.",
                            "pass {'early_config_prune': fn, 'perf_model': fn, 'top_k': k} (any of them).")  # fmt: skip
    for f in ("warmup", "rep"):
        v = getattr(autotune, f)
        if v is not None and (isinstance(v, bool) or not isinstance(v, int | float) or not 0 <= v <= 10_000):
            raise SpecError(
                op, f"autotune.{f}", f"{v!r} is not a time in milliseconds.", "pass a number in [0, 10000]."
            )
    names = {p.name: p for p in record.params if p.name}  # type: ignore[attr-defined]
    for f in ("reset_to_zero", "restore_value"):
        seq = getattr(autotune, f)
        if isinstance(seq, str) or not all(isinstance(n, str) for n in seq):
            raise SpecError(op, f"autotune.{f}", f"{seq!r} is not a list of names.", "pass e.g. ['c'].")
        for n in seq:
            p = names.get(n)
            decl = (record.inputs[p.index] if p.role == "input" else record.outputs[p.index] if p.role == "output"  # type: ignore[attr-defined]
                    else None) if p is not None else next((a for a in (*record.inputs, *record.outputs)  # type: ignore[attr-defined]
                                                           if a.name == n), None)  # fmt: skip
            if decl is None or getattr(decl, "kind", "") == "scalar" or (p is not None and p.role == "extra"):
                raise SpecError(op, f"autotune.{f}", f"'{n}' names no tensor of the op.",
                                "name the tensors the kernel writes, by their declared or kernel parameter names.")  # fmt: skip
            if getattr(decl, "mutates", False) or getattr(decl, "init", None) is not None:
                continue
            if hasattr(decl, "dtype_from"):  # an output opsmith allocates uninitialized
                raise SpecError(op, f"autotune.{f}", f"'{n}' is an output the kernel reads back (it accumulates into "
                                "it), but it is allocated uninitialized.",
                                f"declare OutputDecl('{decl.name}', ..., init=0) (or the value it starts from).")  # fmt: skip
            raise SpecError(op, f"autotune.{f}", f"'{n}' is an input the declaration says the kernel only reads.",
                            f"declare InputDecl('{decl.name}', mutates=True) if the kernel writes it.")  # fmt: skip
