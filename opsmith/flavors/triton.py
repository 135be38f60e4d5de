"""The Triton flavor: a ``@triton.jit`` kernel compiled by ``triton.compile`` to a cubin, launched by opsmith.

Triton compiles one binary per *specialization*: the element types of the pointers and what is known about
the values (a 16-byte aligned pointer, an integer divisible by 16 lets it vectorize). Its own launcher
decides that on every call in Python (~15 us per launch measured on an H200 host). Here the decision is
made once at registration: ``spec_layout`` lists what a call specializes on, the generated eager code
computes that tuple, and each distinct tuple is compiled once (into opsmith's verified disk cache, so a later
process loads the cubin without calling Triton's compiler), loaded by the same ``DeviceKernel`` as CUDA C++
kernels and launched by Triton's own C launcher (``c_launcher``), or by cuda-bindings where that cannot be built.

Under ``torch.compile`` the op is not opaque: ``triton_traced.py`` runs the same kernel through
``torch.library.wrap_triton`` so Inductor sees it (the mechanism of ``torch.library.triton_op``).
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import torch

from ..cache import compile_cache, make_key
from ..declare.record import KernelRecord
from ..declare.signature import KernelParam, parse_ptx_entry
from ..declare.spec import Config, DtypeOf
from ..errors import LaunchError, SpecError
from .base import UNIT, Binary, constexpr_values, param_roles, scalar_from_key
from .triton_errors import compile_error

__all__ = ["TritonSource", "is_triton_kernel"]

log = logging.getLogger("opsmith.triton")

_TRITON_DTYPE = {
    torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16", torch.float64: "fp64",
    torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8",
    torch.bool: "i1", torch.float8_e4m3fn: "fp8e4nv", torch.float8_e5m2: "fp8e5",
}  # fmt: skip
_TRITON_SCALAR = {"f32": "fp32", "f64": "fp64", "i32": "i32", "i64": "i64", "u32": "u32", "u64": "u64",
                  "bool": "i1", "i8": "i8", "i16": "i16", "f16": "fp16", "bf16": "bf16"}  # fmt: skip
#: Triton's language dtypes by name, where torch names them otherwise (``triton_dtype``).
_TL_NAME = {torch.bool: "int1", torch.float8_e4m3fn: "float8e4nv", torch.float8_e5m2: "float8e5"}


def triton_dtype(op_name: str, name: str, dt: torch.dtype) -> Any:
    """The ``tl.dtype`` of a torch dtype (``torch.bfloat16`` -> ``tl.bfloat16``), for a ``DtypeOf`` constexpr."""
    import triton.language as tl

    value = getattr(tl, _TL_NAME.get(dt, str(dt).removeprefix("torch.")), None)
    if not isinstance(value, tl.dtype):
        raise LaunchError(f"{op_name}: Triton has no dtype for {dt} (the constexpr '{name}' takes the input's).")
    return value


#: Triton's launch options that a kernel's constexpr may share a name with, and their defaults.
LAUNCH_OPTIONS: dict[str, Any] = {"num_warps": 4, "num_stages": 3, "num_ctas": 1, "maxnreg": None}
PER_CALL_OPTIONS = ("num_warps", "num_stages")  # what a heuristic may choose per call (Triton's run() keywords)

_PARAM_SIZE = {"fp32": 4, "fp64": 8, "i32": 4, "i64": 8, "u32": 4, "u64": 8, "i1": 1, "i8": 1, "i16": 2,
               "fp16": 2, "bf16": 2}  # fmt: skip


def is_triton_kernel(obj: object) -> bool:
    """A ``@triton.jit`` function (an ``InterpretedFunction`` when ``TRITON_INTERPRET=1`` at import)."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
    except ImportError:
        return False
    return isinstance(obj, JITFunction | InterpretedFunction)


def _interpreted(kernel: Any) -> bool:
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(kernel, InterpretedFunction)


def _unspecialized(kernel: Any) -> dict[str, set[str]]:
    """The parameters ``@triton.jit(do_not_specialize=..., do_not_specialize_on_alignment=...)`` names."""
    params = getattr(kernel, "params", ())
    return {"value": {p.name for p in params if getattr(p, "do_not_specialize", False)},
            "align": {p.name for p in params if getattr(p, "do_not_specialize_on_alignment", False)}}  # fmt: skip


def _params(kernel: Any) -> list[tuple[str, bool, Any]]:
    if hasattr(kernel, "params"):  # JITFunction
        return [(p.name, bool(p.is_constexpr), p.default) for p in kernel.params]
    import triton.language as tl

    out = []
    for p in inspect.signature(kernel.fn).parameters.values():
        ann = p.annotation
        is_c = ann is tl.constexpr or (isinstance(ann, str) and ann.split(".")[-1] == "constexpr")
        out.append((p.name, is_c, p.default))
    return out


class TritonSource:
    """A ``@triton.jit`` kernel bound to one ``Config`` (constexpr values, num_warps, num_stages).

    ``static``: constexpr parameters bound by extras (``DimSize("x", -1, name="n_cols")``), whose values
    come per call: one specialization per distinct value."""

    typed = "none"
    dtype_generic = True  # tensors without a declared dtype get one compile per dtype
    specialized = True  # compiled per call specialization (``spec_layout``)
    flavor = "triton"
    #: An int ScalarInput is held as 64 bits and compiled as Triton's launcher types it per call: i32 when the
    #: value fits, i64 otherwise (("wide", p) in ``spec_layout``), so a seed past 2^31 is a specialization.
    int_scalar = "i64"

    def __init__(self, op_name: str, kernel: Any, config: Config | None = None,
                 static: frozenset[str] = frozenset(), heuristics: tuple = (),
                 fixed: dict[str, Any] | None = None) -> None:  # fmt: skip
        if not is_triton_kernel(kernel):
            raise SpecError(op_name, "kernel", f"{kernel!r} is not a @triton.jit function.",
                            "decorate the kernel with @triton.jit (@triton.autotune and @triton.heuristics over it "
                            "are taken as they are).")  # fmt: skip
        self.op_name, self.kernel, self.config = op_name, kernel, config or Config()
        self.heuristics = tuple(heuristics)  # ``triton_decorators.Heuristic``: constexprs computed per call
        self.fixed = dict(fixed or {})  # ``triton_op(constexprs=...)``: defaults the kernel does not have
        #: Constexprs set per call to an input's Triton dtype (``DtypeOf``): constexpr name -> input name.
        self.dtype_of = {n: v.input for n, v in self.fixed.items() if isinstance(v, DtypeOf)}
        derived = {h.name for h in self.heuristics} | set(self.dtype_of)
        self.kernel_name = kernel.__name__
        self.interpreted = _interpreted(kernel)
        self.params_ = [(n, c, self.fixed.get(n, d) if c and n not in self.dtype_of else d)
                        for n, c, d in _params(kernel)]  # fmt: skip
        constexpr_names = {n for n, c, _ in self.params_ if c}
        unknown = set(self.fixed) - constexpr_names
        import triton.language as tl

        # A tl.dtype too: Liger's RMSNorm backward casts to an X_dtype its host code passes (fixed per op, or
        # per call from an input with DtypeOf)
        if unknown or not all(
            isinstance(v, int | float | bool | str | tl.dtype | DtypeOf) for v in self.fixed.values()
        ):
            raise SpecError(op_name, "constexprs", f"{self.fixed!r} sets {sorted(unknown) or 'values'} that are not "
                            f"tl.constexpr parameters of '{self.kernel_name}' with plain values.",
                            "name the kernel's constexpr parameters, with ints, floats, bools, strings, Triton "
                            "dtypes (tl.bfloat16) or DtypeOf('<input>') for an input's dtype per call.")  # fmt: skip
        self.static = frozenset(static) & constexpr_names
        self.runtime_params = [n for n, c, _ in self.params_ if not c]
        # Constexprs named like a launch option are that option (``_options``); their defaults stay here.
        self.constexpr_defaults = {n: d for n, c, d in self.params_ if c and d is not inspect.Parameter.empty
                                   and n not in self.static | derived and n not in LAUNCH_OPTIONS}  # fmt: skip
        for h in self.heuristics:
            if h.name not in constexpr_names | set(PER_CALL_OPTIONS):
                raise SpecError(op_name, f"heuristics['{h.name}']", f"'{h.name}' is not a tl.constexpr parameter of "
                                f"'{self.kernel_name}' or a launch setting a call may choose "
                                f"({', '.join(PER_CALL_OPTIONS)}).", "a heuristic sets a constexpr or num_warps/"
                                "num_stages; name one.")  # fmt: skip
        # Heuristics that set a launch option (the layer-norm tutorial's num_warps from its block size): compiled
        # per value, as Triton's heuristics set run()'s keywords.
        self.option_heuristics = frozenset(h.name for h in self.heuristics if h.name in PER_CALL_OPTIONS)
        # A static extra a heuristic also sets is refused at binding unless it is a ``Present`` the heuristic
        # agrees with on every call (``triton_decorators.drop_agreeing``: unsloth's HAS_ROPE_INDICES).
        clash = (self.static | derived) & set(self.config.params)
        if clash:
            raise SpecError(op_name, "autotune.configs", f"constexprs {sorted(clash)} are set twice (by an extra, a "
                            "heuristic or a config).", "let one of them set each constexpr.")  # fmt: skip
        self.options = self._options(constexpr_names)
        # The unbound source (config None) only describes the kernel.
        self.constexprs: dict[str, Any] = (
            {}
            if config is None
            else constexpr_values(
                op_name,
                {n: d for n, c, d in self.params_ if c and n not in LAUNCH_OPTIONS},
                self.config,
                self.static | derived,
                "the kernel's constexpr",
            )
            | {n: self.options[n] for n in constexpr_names & set(LAUNCH_OPTIONS)}
        )
        unknown = set(self.config.params) - constexpr_names
        if unknown:
            raise SpecError(op_name, "autotune.configs", f"params {sorted(unknown)} are not constexpr parameters "
                            f"of '{self.kernel_name}'.", "only tl.constexpr parameters can be set by a Config.")  # fmt: skip
        self.num_warps, self.num_stages = self.options["num_warps"], self.options["num_stages"]
        self._record: KernelRecord | None = None
        self._roles: list[tuple[str, Any]] = []
        self._globals = _global_values(kernel)  # the constexpr globals it compiles with, fixed at registration

    def _options(self, constexpr_names: set[str]) -> dict[str, Any]:
        """Triton's compile options under this config. A constexpr named like one (``num_stages`` in the
        fused-softmax tutorial) is the same value, as when Triton's launcher gets it by keyword: the config's
        params, else its option field, else the kernel's default, else Triton's default."""
        c = self.config
        opts: dict[str, Any] = {n: getattr(c, n) for n in LAUNCH_OPTIONS}
        defaults = {n: d for n, is_c, d in self.params_ if is_c and d is not inspect.Parameter.empty}
        for n in sorted(constexpr_names & set(LAUNCH_OPTIONS)):
            if n in self.static:
                raise SpecError(self.op_name, "extras", f"the constexpr '{n}' is Triton's {n} launch option, which "
                                "a size cannot set per call.", f"set {n} in the configs instead.")  # fmt: skip
            v = c.params.get(n)
            if v is not None and opts[n] is not None and v != opts[n]:
                raise SpecError(self.op_name, "autotune.configs", f"the config sets the constexpr '{n}' to {v!r} and "
                                f"the {n} option to {opts[n]!r}; for '{self.kernel_name}' they are one value.",
                                f"set {n} once.")  # fmt: skip
            opts[n] = next((x for x in (v, opts[n], defaults.get(n)) if x is not None), None)
        return {n: v if v is not None else LAUNCH_OPTIONS[n] for n, v in opts.items()}

    def for_config(self, config: Config) -> TritonSource:
        return TritonSource(self.op_name, self.kernel, config, self.static, self.heuristics, self.fixed)

    def params(self, binary: Binary | None, arch: str) -> tuple[list[KernelParam], str]:
        """The runtime (non-constexpr) parameters by name; their types are what the declaration compiles for."""
        return [KernelParam(n, False, "?", n) for n in self.runtime_params], ""

    def static_names(self) -> frozenset[str]:
        return frozenset(n for n, c, _ in self.params_ if c)

    def fingerprint(self) -> str:
        opts = {"warps": self.num_warps, "stages": self.num_stages}
        opts |= {k: v for k in ("num_ctas", "maxnreg") if (v := self.options[k]) != LAUNCH_OPTIONS[k]}
        if self.heuristics:
            from ..declare.fingerprint import describe

            opts["heuristics"] = [[h.name, describe(h.fn)] for h in self.heuristics]
        return make_key({"flavor": "triton", "kernel": source_digest(self.kernel), "name": self.kernel_name,
                         "globals": self._globals, "constexprs": self.constexprs, **opts,
                         "static": sorted(self.static), **({"dtype_of": self.dtype_of} if self.dtype_of else {})})  # fmt: skip

    # -- binding to the resolved declaration --------------------------------------------------------
    def bind(self, record: KernelRecord) -> None:
        """Note each runtime parameter's role, in the kernel's order (``binding.py`` ordered them)."""
        self._record, self._roles = record, param_roles(record)
        names = {a.name: a for a in record.tensor_inputs}
        for n, inp in self.dtype_of.items():
            a = names.get(inp)
            if a is None or a.optional:
                raise SpecError(self.op_name, f"constexprs['{n}']", f"DtypeOf('{inp}') names no "
                                f"{'required ' if a is not None else ''}tensor input (the tensor inputs: "
                                f"{[x.name for x in record.tensor_inputs if not x.optional]}).",
                                "name a tensor input every call passes.")  # fmt: skip

    def spec_layout(self) -> list[tuple[str, int]]:
        """What a call specializes on, by parameter position: ("dtype", k) for tensor input k without a
        declared dtype, ("align", p) for each input pointer p, ("int", p) for each integer parameter (``UNIT``
        when it is 1, true when divisible by 16, as Triton's JIT specializes). Outputs are always 16-byte
        aligned (opsmith allocates them; the caching allocator aligns to 512 bytes), so they are compiled as
        aligned without a per-call check. ("wide", p) for each int scalar parameter: whether its value is
        outside int32, compiling it as i64 rather than i32 (Triton's ``specialize_impl``; values of 2^63 and more,
        its u64, cannot reach a PyTorch int). ("static", e) for each extra bound to a constexpr: its value.
        Parameters the kernel lists in ``do_not_specialize`` (``_on_alignment``) get no entry, as under Triton."""
        assert self._record is not None
        layout: list[tuple[str, int]] = []
        for k, a in enumerate(self._record.tensor_inputs):
            if a.dtype is None and a.dtype_like is None:
                layout.append(("dtype", k))
        loose = _unspecialized(self.kernel)
        for p, ((role, a), name) in enumerate(zip(self._roles, self.runtime_params, strict=True)):
            if (role == "tensor" and a.optional and a.absent == "none") or (role == "output" and a.when is not None):
                layout.append(("none", p))  # None is compiled in, as Triton's JIT does
            if role == "scalar" and a.ctype == "i64":  # i32 or i64 by the call's value, even unspecialized
                layout.append(("wide", p))
            if role == "tensor" and name not in loose["align"]:
                layout.append(("align", p))
            elif name in loose["value"] or role not in ("extra", "scalar"):
                continue
            elif (role == "extra" and not isinstance(a.expr, float)) or (role == "scalar" and a.py_type == "int"):
                layout.append(("int", p))
        return (layout + [("static", k) for k in self._record.static_extras]
                + [("scalar", k) for k in self._record.static_scalars]
                + [("heur", h) for h in range(len(self._record.heuristics))])  # fmt: skip

    def _in_dtypes(self, spec: tuple) -> list[torch.dtype]:
        """Each tensor input's dtype under a call specialization: declared, the call's, or another input's."""
        assert self._record is not None
        tensors = self._record.tensor_inputs
        in_dtypes = [torch.float32 if a.dtype is None else getattr(torch, a.dtype) for a in tensors]
        for (kind, k), v in zip(self.spec_layout(), spec, strict=True):
            if kind == "dtype":
                in_dtypes[k] = v
        names = [a.name for a in tensors]
        for k, a in enumerate(tensors):
            if a.dtype_like is not None:
                in_dtypes[k] = in_dtypes[names.index(a.dtype_like)]
        return in_dtypes

    def dtype_values(self, dtypes: dict[str, torch.dtype]) -> dict[str, Any]:
        """The ``DtypeOf`` constexprs' values for the inputs' dtypes (input name -> torch dtype)."""
        return {n: triton_dtype(self.op_name, n, dtypes[inp]) for n, inp in self.dtype_of.items()}

    def _types(self, spec: tuple) -> tuple[dict[str, str], dict[tuple[int], list]]:
        assert self._record is not None
        layout = self.spec_layout()
        tensors = self._record.tensor_inputs
        in_dtypes = self._in_dtypes(spec)
        names = [a.name for a in tensors]
        types: dict[str, str] = {}
        nones = set(self.nones(spec))
        narrow = {self.runtime_params[p] for (kind, p), v in zip(layout, spec, strict=True) if kind == "wide" and not v}
        for name, (role, a) in zip(self.runtime_params, self._roles, strict=True):
            if name in nones:  # an optional tensor passed as None: compiled in
                types[name] = "constexpr"
                continue
            if role == "tensor":
                dt = in_dtypes[names.index(a.name)]
            elif role == "output":
                dt = getattr(torch, a.dtype) if a.dtype else in_dtypes[a.dtype_from]
            else:
                ctype = a.ctype
                if ctype not in _TRITON_SCALAR:
                    raise SpecError(self.op_name, "kernel signature", f"parameter '{name}' would be {ctype}, "
                                    "which Triton kernels do not take.", "use a float, int or bool.")  # fmt: skip
                types[name] = "i32" if name in narrow else _TRITON_SCALAR[ctype]
                continue
            if dt not in _TRITON_DTYPE:
                raise LaunchError(f"{self.op_name}: Triton has no pointer type for {dt} (parameter '{name}').")
            types[name] = "*" + _TRITON_DTYPE[dt]
        # In the kernel's parameter order (constexprs where they are declared): Triton's C launcher takes its
        # arguments in this dict's order.
        signature = {name: "constexpr" if is_c else types[name] for name, is_c, _ in self.params_}
        for name in self.units(spec) + self.nones(spec):
            signature[name] = "constexpr"  # compiled in, as Triton's JIT does: strides of 1 let loads vectorize
        attrs = {(p,): [["tt.divisibility", 16]] for (kind, p), v in zip(layout, spec, strict=True)
                 if ((kind == "align" and v) or (kind == "int" and v == 1)) and self.runtime_params[p] not in nones}  # fmt: skip
        attrs.update({(p,): [["tt.divisibility", 16]] for p, (role, _) in enumerate(self._roles)
                      if role == "output" and self.runtime_params[p] not in nones})  # fmt: skip
        # Attribute keys are positions among all the kernel's parameters, constexprs included.
        runtime_at = [k for k, (_, is_c, _) in enumerate(self.params_) if not is_c]
        return signature, {(runtime_at[p[0]],): v for p, v in attrs.items()}

    def units(self, spec: tuple) -> list[str]:
        """The integer parameters this specialization compiles in as 1. The native library drops them by a
        64-bit mask, so parameters past the 64th stay runtime values."""
        if not spec:
            return []
        return [self.runtime_params[p] for (kind, p), v in zip(self.spec_layout(), spec, strict=True)
                if kind == "int" and v == UNIT and p < 64]  # fmt: skip

    def nones(self, spec: tuple) -> list[str]:
        """The pointer parameters this specialization compiles in as None (optional tensors the call passed as
        None). Dropped from the arguments as ``units`` are, so they must be among the first 64."""
        if not spec:
            return []
        out = [self.runtime_params[p] for (kind, p), v in zip(self.spec_layout(), spec, strict=True)
               if kind == "none" and v]  # fmt: skip
        if any(self.runtime_params.index(n) >= 64 for n in out):
            raise SpecError(self.op_name, "inputs", "an optional tensor is kernel parameter 64 or later, past what a "
                            "compiled-in None can drop.", "move the optional tensor parameters earlier.")  # fmt: skip
        return out

    def dropped(self, spec: tuple) -> tuple[int, ...]:
        """Positions among the runtime values that the compiled kernel does not take (``units``, ``nones``)."""
        gone = set(self.units(spec)) | set(self.nones(spec))
        return tuple(p for p, n in enumerate(self.runtime_params) if n in gone)

    def static_values(self, spec: tuple) -> dict[str, Any]:
        """The constexprs bound by extras, computed by heuristics and compiled in as 1 (``units``), from a
        call specialization (its heuristics' values are this config's: ``Variants.project``)."""
        out: dict[str, Any] = dict.fromkeys(self.units(spec), 1) | dict.fromkeys(self.nones(spec))
        if self.dtype_of:
            assert self._record is not None
            names = [a.name for a in self._record.tensor_inputs]
            out |= self.dtype_values(dict(zip(names, self._in_dtypes(spec), strict=True)))
        if not self.static and not self.heuristics:
            return out
        assert self._record is not None
        constexprs = self.static_names()
        for (kind, k), v in zip(self.spec_layout(), spec, strict=True):
            if kind == "static":
                out[self._record.extras[k].name] = int(v)
            elif kind == "scalar":
                a = self._record.inputs[k]
                out[a.name] = scalar_from_key(a.py_type, v)
            elif kind == "heur" and (name := self._record.heuristics[k]["name"]) in constexprs:
                out[name] = v if isinstance(v, bool) else int(v)
        return out

    def launch_options(self, spec: tuple = ()) -> dict[str, Any]:
        """Triton's compile options for a call specialization: the config's, with the values of heuristics that
        set num_warps or num_stages (their own constexpr too, where the kernel has one of that name)."""
        opts = dict(self.options)
        if self.option_heuristics and spec:
            assert self._record is not None
            for (kind, k), v in zip(self.spec_layout(), spec, strict=True):
                if kind == "heur" and (name := self._record.heuristics[k]["name"]) in self.option_heuristics:
                    opts[name] = int(v)
        return opts

    def build(self, arch: str, spec: tuple = ()) -> Binary:
        if _interpreted(self.kernel):
            raise LaunchError(f"{self.op_name}: the kernel was defined with TRITON_INTERPRET=1, so it can only run "
                              "in the interpreter, on CPU tensors. Fix: unset TRITON_INTERPRET to run on a GPU.")  # fmt: skip
        import triton
        from triton.backends.compiler import GPUTarget
        from triton.compiler import ASTSource

        self._check_globals()
        cc = int(arch.removeprefix("sm_").rstrip("af"))
        signature, attrs = self._types(spec)
        constexprs = {**self.constexprs, **self.static_values(spec)}
        t0 = time.perf_counter()
        # opsmith's own verified cache first: a hit skips triton.compile, whose cache key hashes the whole
        # Triton installation once per process (~300 ms, most of a second process's start).
        options = {k: v for k, v in self.launch_options(spec).items() if v is not None}
        key = make_key({"flavor": "triton", **self.compile_inputs(signature, constexprs, attrs, options),
                        "arch": f"sm_{cc}"})  # fmt: skip
        cache = compile_cache()
        hit = _from_cache(cache.get(key) if cache else None, f"sm_{cc}", t0, self.dropped(spec))
        if hit is not None:
            return hit
        _refresh_triton_hash(self.kernel)
        src = ASTSource(self.kernel, signature=signature, constexprs=constexprs, attrs=attrs)
        try:
            ck = triton.compile(src, target=GPUTarget("cuda", cc, 32), options=options)
        except Exception as e:  # Triton's CompilationError carries the offending kernel line
            raise compile_error(self.op_name, self.kernel, e) from None
        md = ck.metadata
        for what, bad in (("cluster launch (num_ctas > 1)", md.num_ctas != 1),
                          ("a cooperative grid", md.launch_cooperative_grid),
                          ("programmatic dependent launch", md.launch_pdl),
                          ("global scratch memory", md.global_scratch_size > 0),
                          ("profile scratch memory", getattr(md, "profile_scratch_size", 0) > 0)):  # fmt: skip
            if bad:
                raise LaunchError(f"{self.op_name}: this Triton kernel needs {what}, which opsmith's launcher does "
                                  "not provide yet. Fix: use a config without it, or call the kernel directly.")  # fmt: skip
        entry = parse_ptx_entry(ck.asm["ptx"], md.name) or []
        user = [signature[n] for n in self.runtime_params if signature[n] != "constexpr"]
        sizes = [8 if t.startswith("*") else _PARAM_SIZE[t] for t in user]
        got = [8 if p.pointer else _PARAM_SIZE.get({"f32": "fp32", "f64": "fp64", "bool": "i1"}.get(p.ctype, p.ctype), 8)
               for p in entry]  # fmt: skip
        if got[: len(sizes)] != sizes or not all(p.pointer for p in entry[len(sizes) :]):
            raise LaunchError(f"{self.op_name}: the compiled Triton kernel's parameters ({[p.spelled for p in entry]}) "
                              f"are not the expected {user} plus scratch pointers; this Triton version "
                              f"({triton.__version__}) is not supported.")  # fmt: skip
        binary = Binary(ck.asm["cubin"], "cubin", f"sm_{cc}", md.name, seconds=time.perf_counter() - t0,
                        block=(32 * md.num_warps, 1, 1), shared_mem=int(md.shared),
                        trailing_params=len(entry) - len(sizes), dropped=self.dropped(spec))  # fmt: skip
        if cache:  # only binaries that passed the checks above are stored
            cache.put(key, {"symbol": binary.symbol, "kernel": self.kernel_name, "arch": binary.arch,
                            "block": list(binary.block or ()), "shared_mem": binary.shared_mem,
                            "trailing_params": binary.trailing_params, "dropped": list(binary.dropped)},
                      binary.data)  # fmt: skip
        return binary

    def compile_inputs(self, signature: dict, constexprs: dict, attrs: dict, options: dict) -> dict:
        """What besides the target decides Triton's output for a specialization: a cache key's parts (the
        binary's here, the analysis's TTIR in ``triton_ir.py``)."""
        return {"source": self.fingerprint(), "signature": signature, "constexprs": constexprs,
                "attrs": sorted((list(k), v) for k, v in attrs.items()), "triton": _triton_identity(),
                "options": options}  # fmt: skip

    def _check_globals(self) -> None:
        """A constexpr global the kernel reads changed since registration: this op's kernels would mix the
        old and new values (Triton's own launcher refuses the same, "Global variable ... has changed")."""
        now = _global_values(self.kernel)
        if now != self._globals:
            changed = sorted(k for k in set(now) | set(self._globals) if now.get(k) != self._globals.get(k))
            raise SpecError(self.op_name, "kernel", f"the global constexprs {changed} that '{self.kernel_name}' reads "
                            f"changed since the op was registered (then {[self._globals.get(k) for k in changed]}, now "
                            f"{[now.get(k) for k in changed]}).", "register the op again under a new name after "
                            "changing them, or restart the process.")  # fmt: skip

    # -- launching through Triton's own C launcher -------------------------------------------------------
    def c_launcher(self, spec: tuple = ()) -> Callable | None:
        """Triton's C launcher for this specialization, or None where it cannot be had (another Triton
        version, no C compiler): then the op launches through cuda-bindings like every other flavor.

        It is what Triton's JIT calls: one ``PyArg_ParseTuple`` and ``cuLaunchKernelEx``. The eager code of a
        relu with it took 6.9 us per call vs 8.1 us with cuda-bindings' ``cuLaunchKernel`` and a packed
        parameter buffer (H200 host; torch.relu 6.5 us). Triton builds it from the signature and keeps it in
        its own cache: a C compile the first time a signature is seen on a machine, a module load after."""
        if self.interpreted:
            return None
        try:
            from triton.backends.nvidia.driver import CudaLauncher
            from triton.compiler import ASTSource

            signature, attrs = self._types(spec)
            constexprs = {**self.constexprs, **self.static_values(spec)}
            src = ASTSource(self.kernel, signature=signature, constexprs=constexprs, attrs=attrs)
            # What CudaLauncher reads of a compiled kernel's metadata; build() refuses kernels needing more.
            md = SimpleNamespace(num_ctas=1, global_scratch_size=0, global_scratch_align=1, profile_scratch_size=0,
                                 profile_scratch_align=1, launch_cooperative_grid=False, launch_pdl=False,
                                 tensordesc_meta=None)  # fmt: skip
            return CudaLauncher(src, md).launch
        except Exception as e:  # any failure leaves the portable launch path
            log.info("%s: Triton's C launcher is not available (%s: %s); launching with cuda-bindings",
                     self.op_name, type(e).__name__, e)  # fmt: skip
            return None

    def launcher_slots(self) -> list[int | None]:
        """Per kernel parameter, in order: its position among the runtime values, or None for a constexpr
        (the C launcher takes every parameter and ignores constexprs)."""
        pos = {n: k for k, n in enumerate(self.runtime_params)}
        return [None if is_c else pos[name] for name, is_c, _ in self.params_]


def _global_values(kernel: Any) -> dict[str, str]:
    """The current values of the global constexprs ``kernel`` and the jit functions it calls read, as Triton's
    own dependency walk finds them (``used_global_vals``; it memoizes ``cache_key`` with the values seen
    first, so a changed global must be read here)."""
    if not hasattr(kernel, "used_global_vals"):  # interpreted: the interpreter reads globals when it runs
        return {}
    kernel.cache_key  # noqa: B018 (fills used_global_vals)
    missing = object()
    return {name: repr(d.get(name, missing)) for (name, _), (_, d) in sorted(kernel.used_global_vals.items())}


def _refresh_triton_hash(kernel: Any) -> None:
    """Triton memoizes a kernel's ``cache_key`` with the global constexpr values it saw first, and its own
    compile cache is keyed by it: after a global changed, ``triton.compile`` would return the kernel compiled
    with the old value. Dropping the memo makes Triton hash the current values."""
    vals = getattr(kernel, "used_global_vals", None)
    if vals and any(repr(v) != repr(d.get(name)) for (name, _), (v, d) in vals.items()) and hasattr(kernel, "hash"):
        kernel.hash = None


def _triton_identity() -> dict:
    """What besides the kernel decides Triton's output: its version, the compile-affecting environment
    variables it names itself, and the installed libtriton (size and mtime: a reinstall is a miss)."""
    import triton
    from triton._C import libtriton

    st = os.stat(libtriton.__file__)
    return {"version": triton.__version__, "env": libtriton.get_cache_invalidating_env_vars(),
            "lib": [st.st_size, st.st_mtime_ns]}  # fmt: skip


def _from_cache(hit: tuple[dict, bytes] | None, arch: str, t0: float, dropped: tuple[int, ...]) -> Binary | None:
    """A verified cache entry as a Binary; an entry whose metadata is malformed or disagrees is a miss."""
    if hit is None:
        return None
    meta, data = hit
    try:
        block = tuple(int(b) for b in meta["block"])
        if len(block) != 3 or meta["arch"] != arch or tuple(meta["dropped"]) != dropped:
            return None
        return Binary(data, "cubin", arch, str(meta["symbol"]), from_cache=True, seconds=time.perf_counter() - t0,
                      block=block, shared_mem=int(meta["shared_mem"]),  # type: ignore[arg-type]
                      trailing_params=int(meta["trailing_params"]), dropped=dropped)  # fmt: skip
    except (KeyError, TypeError, ValueError):
        return None


def source_digest(kernel: Any) -> str:
    """Triton's own content hash (source, the jit functions it calls and the globals it reads). Interpreted,
    there is none: the source texts of the kernel and of every jit function it calls, as Triton's hash covers them
    (a changed helper is a changed kernel), each read from its file, or for a function built without a source file
    (``exec``, a notebook) what its bytecode computes (``fingerprint.describe``: code, constants, globals read)."""
    if hasattr(kernel, "cache_key"):
        return kernel.cache_key
    return make_key({"sources": _interpreted_sources(kernel.fn, {})})


def _interpreted_sources(fn: Any, seen: dict[int, str]) -> list[str]:
    """The source (or bytecode description) of ``fn`` and of the jit functions it calls, found by the names its
    code reads (``helper(...)``, ``module.helper(...)``), once each, in the order met."""
    if id(fn) in seen:
        return []
    try:
        seen[id(fn)] = inspect.getsource(fn)
    except (OSError, TypeError):
        from ..declare.fingerprint import describe

        seen[id(fn)] = make_key({"code": describe(fn)})
    out = [seen[id(fn)]]
    code = getattr(fn, "__code__", None)
    if code is None:
        return out
    scope = getattr(fn, "__globals__", {})
    for name in code.co_names:
        v = scope.get(name)
        candidates = [v] + ([getattr(v, n, None) for n in code.co_names] if inspect.ismodule(v) else [])
        for c in candidates:
            inner = getattr(c, "fn", None)  # a JITFunction or an InterpretedFunction wraps the Python function
            if inner is not None and inspect.isfunction(inner) and _is_jit(c):
                out += _interpreted_sources(inner, seen)
    return out


def _is_jit(obj: Any) -> bool:
    from triton.runtime.interpreter import InterpretedFunction
    from triton.runtime.jit import JITFunction

    return isinstance(obj, InterpretedFunction | JITFunction)
