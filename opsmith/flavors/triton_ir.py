"""A Triton kernel's TTIR at registration, for the analysis (``opsmith/analysis``): made on CPU, without a GPU
or a driver, by Triton's own front end and its ttir stage (inlining, canonicalization, CSE, dead-code removal)
for an sm_90 target, for each distinct config of the op.

A call specialization is chosen to compile everything a call can reach: every optional tensor present, no
integer compiled in as 1, float16 for a generic input where it allows it (then bfloat16, float32: the next where a
kernel does not compile with one), each heuristic's value on sample arguments (meta tensors of size 64 per axis, 64
for each integer). ``SampledIR.complete`` says whether that choice covers every
call: a heuristic or a constexpr extra whose value was sampled, or configs beyond ``MAX_CONFIGS``, may compile
code other calls take, so the analysis then counts a parameter as read where the source text names it too.
"""

from __future__ import annotations

import copy
import inspect
import warnings
from dataclasses import dataclass
from typing import Any

import torch

from .base import UNIT, scalar_key

__all__ = ["MAX_CONFIGS", "SampledIR", "kernel_ttir", "sample_ttir"]

#: Configs made per op (~5-20 ms of the front end each on a 2-core CPU): autotune lists run to dozens, and
#: configs that differ in their block sizes compile the same reads.
MAX_CONFIGS = 4
_SAMPLE = 64  # a power of two (blocks, tl.arange) and not 1 (which Triton would compile in)


@dataclass(frozen=True)
class SampledIR:
    """TTIR texts (one per distinct config), each with its function's argument names in order."""

    texts: tuple[tuple[str, tuple[str, ...]], ...]
    complete: bool


#: The dtype a generic input gets, most preferred first: kernels written for half precision (the tutorial attention's
#: ``p.to(tl.float16)`` before its second dot) compile with float16 and may not with another.
_DTYPES = ("float16", "bfloat16", "float32")


def _spec(source: Any, choice: int = 0) -> tuple[tuple, bool]:
    """A call specialization that compiles everything a call can reach, and whether nothing in it was guessed;
    ``choice``: which of each generic input's allowed dtypes (in ``_DTYPES``'s order) to take."""
    rec = source._record
    out, complete = [], True
    for kind, k in source.spec_layout():
        if kind == "dtype":
            a = rec.tensor_inputs[k]
            allowed = [d for d in _DTYPES if not a.dtypes or d in a.dtypes] or list(a.dtypes)
            out.append(getattr(torch, allowed[min(choice, len(allowed) - 1)]))
        elif kind in ("none", "wide"):
            out.append(False)  # present; an int in int32
        elif kind == "align":
            out.append(True)
        elif kind == "int":
            out.append(False)  # a runtime value, neither 1 nor known divisible
        elif kind == "static":
            out.append(_SAMPLE)
            complete = False
        elif kind == "scalar":  # a scalar compiled in: its specialization key (a float by its bits)
            a = rec.inputs[k]
            out.append(scalar_key(a.py_type, {"bool": True, "float": 1.0}.get(a.py_type, _SAMPLE)))
            complete = False
        else:
            raise ValueError(f"no sample for a {kind} specialization")
    assert UNIT not in (False, True)  # the int entries above must not read as "compiled in as 1"
    return tuple(out), complete


def _sample_args(source: Any, spec: tuple) -> dict[str, Any]:
    """Each parameter's sample value, for a heuristic's ``args``: meta tensors, 64 for integers."""
    rec = source._record
    dtypes = dict(zip([a.name for a in rec.tensor_inputs], source._in_dtypes(spec), strict=True))
    args: dict[str, Any] = {}
    for name, (role, a) in zip(source.runtime_params, source._roles, strict=True):
        if role == "tensor":
            args[name] = torch.empty((_SAMPLE,) * max(a.ndim or a.min_ndim or 1, 1), device="meta",
                                     dtype=dtypes[a.name])  # fmt: skip
        elif role == "output":
            args[name] = torch.empty((_SAMPLE,), device="meta", dtype=torch.float32)
        else:
            py = getattr(a, "py_type", "int")
            args[name] = {"bool": True, "float": 1.0}.get(py, _SAMPLE)
    return args | {n: d for n, _, d in source.params_ if n not in args and d is not inspect.Parameter.empty}


def kernel_ttir(kernel: Any, signature: dict, constexprs: dict, attrs: dict | None = None,
                options: dict | None = None) -> str:  # fmt: skip
    """The TTIR of a ``@triton.jit`` function for an sm_90 target, made without a GPU: Triton's front end and
    its ttir stage, as ``triton.compile`` runs them (``signature``: parameter -> Triton type or "constexpr")."""
    from triton._C.libtriton import ir
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    target = GPUTarget("cuda", 90, 32)
    backend = make_backend(target)
    options = backend.parse_options({k: v for k, v in (options or {}).items() if v is not None})
    src = ASTSource(kernel, signature=signature, constexprs=constexprs, attrs=attrs or {})
    context = ir.context()
    ir.load_dialects(context)
    backend.load_dialects(context)
    codegen = backend.get_codegen_implementation(options)
    module_map = backend.get_module_map()
    takes_target = "target" in inspect.signature(src.make_ir).parameters  # Triton 3.5+ (3.6, 3.9) pass it
    module = (src.make_ir(target, options, codegen, module_map, context) if takes_target
              else src.make_ir(options, codegen, module_map, context))  # fmt: skip
    stages: dict[str, Any] = {}
    backend.add_stages(stages, options, src.language)
    return str(stages["ttir"](module, {}))


def _cached_ttir(s: Any, signature: dict, constexprs: dict, attrs: dict) -> str:
    """``kernel_ttir`` through the disk cache, under the same inputs as the kernel's compile: ~7 ms of Triton's
    front end per config (2-core CPU) becomes a file read in every process after the first."""
    from ..cache import compile_cache, make_key

    options = {k: v for k, v in s.options.items() if v is not None}
    key = make_key({"flavor": "triton-analysis-ttir", **s.compile_inputs(signature, constexprs, attrs, options)})
    cache = compile_cache()
    hit = cache.get(key) if cache else None
    if hit is not None and hit[0].get("kernel") == s.kernel_name:
        return hit[1].decode("utf-8", "replace")
    with warnings.catch_warnings():  # Triton 3.9 warns of its FP-fusion default here; the launch's compile says it
        warnings.simplefilter("ignore", UserWarning)
        text = kernel_ttir(s.kernel, signature, constexprs, attrs, options)
    if cache:
        cache.put(key, {"kernel": s.kernel_name}, text.encode())
    return text


def sample_ttir(sources: list[Any], record: Any) -> SampledIR:
    """The TTIR of each distinct config among ``sources`` (one per config), bound to ``record``."""
    texts: list[tuple[str, tuple[str, ...]]] = []
    seen: list[dict] = []
    complete = True
    for s in sources:
        s = copy.copy(s)
        s.bind(record)
        constexprs, exact = _constexprs(s, _spec(s)[0])
        if constexprs in seen:
            continue
        if len(seen) == MAX_CONFIGS:
            complete = False
            break
        seen.append(constexprs)
        for choice in range(len(_DTYPES)):  # the next dtype where one does not compile (an fp16-only kernel)
            spec, exact_spec = _spec(s, choice)
            constexprs, exact = _constexprs(s, spec)
            signature, attrs = s._types(spec)
            try:
                text = _cached_ttir(s, signature, constexprs, attrs)
                break
            except Exception:
                if choice == len(_DTYPES) - 1:
                    raise
        complete = complete and exact and exact_spec
        texts.append((text, tuple(n for n in s.runtime_params if signature[n] != "constexpr")))
    return SampledIR(tuple(texts), complete)


def _constexprs(s: Any, spec: tuple) -> tuple[dict, bool]:
    """The constexprs a call with ``spec`` compiles with: the config's, the extras', and each heuristic's value on
    sample arguments (then not exact)."""
    constexprs = {**s.constexprs, **s.static_values(spec)}
    if not s.heuristics:
        return constexprs, True
    args = _sample_args(s, spec) | constexprs
    for h in s.heuristics:  # applied in order, each seeing the ones before, as Triton's are
        args[h.name] = h.fn(args)
        if h.name not in s.option_heuristics:  # num_warps/num_stages are options, not constexprs
            constexprs[h.name] = args[h.name]
    return constexprs, False
