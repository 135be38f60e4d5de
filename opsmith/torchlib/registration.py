"""The one registration path: every flavor's kernel becomes a torch.library op here.

``register_kernel_op`` validates the declaration, builds the first binary (so compile errors and a missing
kernel name surface at registration), assembles the ``KernelRecord``, derives schema, fake and eager
implementations from it, and defines the op with ``torch.library.Library`` + ``impl`` + ``register_fake``.
We use ``Library.define``/``impl`` rather than ``custom_op``: the latter adds 7-10 us of Python per call
(pytorch#177109), more than our whole budget over ``torch.relu``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from .. import env
from ..analysis import check_against_kernel, check_silence
from ..declare.fingerprint import declaration_fingerprint, differences
from ..declare.record import KernelRecord, ScalarArg
from ..declare.resolve import resolve
from ..declare.signature import KernelParam
from ..declare.spec import Autotune, Backward, Config, Custom, InputDecl, OutputDecl, ScalarInput, index_type_name
from ..declare.validate import check_autotune, check_op_name, check_tuning_writes
from ..distributed.sharding import attach, derive_plan
from ..errors import RegistrationError, SpecError
from ..flavors.base import KernelSource, likely_spec
from ..flavors.cuda_cpp import default_arch
from ..flavors.launch import DeviceKernel
from ..inductor.choice import CompileChoice, check_mode, register_traced
from ..native import error_bridge, serving
from ..plan.backward_program import check_backward
from ..plan.guards import no_backend
from ..plan.lowering import lower
from ..progress import configure_logging
from ..registry import _REGISTRY, registered_ops
from ..tuning.autotune import Tuner
from .autograd import generic_no_backward, no_backward_globals, register_backward
from .eager import make_checks, make_dry_run, make_eager
from .fake import make_fake
from .schema import derive_schema
from .variants import Variants

log = logging.getLogger("opsmith.compile")  # the compile lines of registration and variants under one name

__all__ = ["Op", "register_kernel_op", "registered_ops", "tuning_identity"]

_LOCK = threading.Lock()


class Op(torch._ops.OpOverload):
    """A registered opsmith op: ``torch.ops.<ns>.<name>.default`` with opsmith's view of it.

    ``record``: the serializable kernel record. ``kernel``: the device kernel of config 0 (``kernel.launch_args``
    is how a hand-written ``eager_fn`` launches; None for Triton ops, whose kernels are built per call
    specialization). ``variants``: every kernel of the op. ``tuner``: its autotuning decisions (None when
    not tuned). ``impl_source``: the generated eager implementation. ``overload``: the OpOverload itself.
    ``impl_lib``: the torch.library.Library holding its implementations (None once ``opsmith.native.use``
    replaced them); ``native``: the path of the native library serving it, or None. ``serving``: "python",
    "native" or "mixed" (some calls on the Python path), and ``serving_why`` why; ``serving_counts()`` the calls
    each path served (``native/serving.py``). ``sharding_plan``: how its tensors shard as
    DTensors (``opsmith/distributed/sharding.py``).

    Why an OpOverload subclass: ``OpOverload.__call__`` is a Python frame that only forwards to the C++
    entry ``_op``; it cost 0.44 us of a ~10 us eager call on the H200 host (4% of the host-time budget). Each
    op's class takes ``_op`` itself as ``__call__``, so calling the handle is C from the caller to the
    dispatcher. Being an OpOverload that hashes and compares equal to the real one, Dynamo puts it in the
    graph as the op (no graph break), and AOTAutograd, Inductor and torch.export, which re-dispatch through
    C++, record the real OpOverload.
    """

    def __new__(cls, qualname: str, *rest: Any) -> Op:
        overload = _overload(qualname)
        # One class per op: Python looks __call__ up on the type. A builtin is not a descriptor, so the
        # call reaches _op without ``self``.
        sub = type(cls.__name__, (cls,), {"__call__": overload._op, "__module__": cls.__module__,
                                          "__qualname__": cls.__qualname__})  # fmt: skip
        return object.__new__(sub)

    def __init__(self, qualname: str, record: KernelRecord, variants: Variants, impl_source: str | None,
                 fingerprint: str, lib: torch.library.Library) -> None:  # fmt: skip
        # No OpOverload.__init__: the state (schema, dispatch caches, py_kernels) is the real overload's.
        overload = _overload(qualname)
        self.__dict__.update(overload.__dict__)
        self.overload = overload
        self.qualname, self.record, self.variants = qualname, record, variants
        self.kernel: DeviceKernel | None = variants.first
        self.tuner: Tuner | None = variants.tuner
        self.impl_source, self.fingerprint, self._lib = impl_source, fingerprint, lib
        self.schema = str(overload._schema)

    def compile_choices(self) -> dict[tuple, dict]:
        """What the op traces as under torch.compile, per shape bucket decided so far in this process: {bucket:
        {"choice": "kernel"|"reference", "kernel_ms", "reference_ms"}} (times None where the decision came from
        the disk or another rank). Empty for ``compile="kernel"``, which always traces the kernel."""
        choice = getattr(self, "compile_choice", None)
        return {} if choice is None else dict(choice.chosen)

    def serving_counts(self) -> Any:
        """What served this op's calls: a ``native.serving.ServingCounts`` (calls the native library ran, calls
        it handed to the Python path and why, the libraries built for it and their time)."""
        from ..native.serving import counts

        return counts(self)

    def __eq__(self, other: object) -> bool:
        return other is self or other is self.overload

    def __hash__(self) -> int:
        return hash(self.overload)

    def __repr__(self) -> str:
        return f"<opsmith op {self.schema}>"


def _overload(qualname: str) -> torch._ops.OpOverload:
    ns, name = qualname.split("::")
    return getattr(getattr(torch.ops, ns), name).default


def _check_schema(op: str, schema: str, record: KernelRecord) -> None:
    """An explicit schema must agree with the declaration it is used with."""
    try:
        parsed = torch._C.parse_schema(f"{op}{schema}")
    except RuntimeError as e:
        raise SpecError(op, "schema", f"{schema!r} does not parse ({e}).",
                        "write it like '(Tensor x, float alpha) -> Tensor'.") from None  # fmt: skip
    kinds = ["scalar" if isinstance(a, ScalarArg) else "tensor" for a in record.inputs]
    got = ["tensor" if isinstance(a.type, torch.TensorType) else "scalar" for a in parsed.arguments]
    if got != kinds or len(parsed.returns) != len(record.outputs):
        raise SpecError(op, "schema", f"{schema!r} takes {got} and returns {len(parsed.returns)} tensors, but "
                        f"the declaration takes {kinds} and returns {len(record.outputs)}.",
                        "drop schema= to derive it, or make it match the inputs and outputs.")  # fmt: skip


def static_scalar_refusal(op_name: str, names: list[str]) -> SpecError:
    """Scalar inputs named like compile-time parameters of a flavor that cannot compile them in per call."""
    return SpecError(op_name, "inputs", f"the scalar inputs {names} are named like compile-time parameters; a scalar "
                     "compiled in per call is built for Triton constexprs and int or bool CUDA C++ template arguments "
                     "(C++17 has no float ones).", "pass the value as a kernel parameter (a by-value argument), or compile one op per value.")  # fmt: skip


def register_kernel_op(
    op_name: str,
    source: KernelSource,
    *,
    inputs: Sequence[InputDecl | ScalarInput] | None,
    outputs: Sequence[OutputDecl] | None,
    extras: Sequence = (),
    geometry: object = None,
    meta_fn: Callable | None = None,
    eager_fn: Callable | None = None,
    schema: str | None = None,
    autotune: Autotune | None = None,
    backward: Backward | None = None,
    index_dtype: str = "int32",
    param_order: Sequence[str] | None = None,
    sharding: Callable | str | None = None,
    requires: Sequence = (),
    reference: Callable | None = None,
    native: bool = True,
    silence: Sequence[str] = (),
    compile: str = "kernel",
) -> Op:
    """Register ``source``'s kernel as ``op_name``; see ``cuda_kernel_op`` for the rules."""
    configure_logging()  # OPSMITH_LOG, read once per process
    ns, name = check_op_name(op_name)
    error_bridge.install()  # native kernels of this process raise opsmith's classes (native/error_bridge.py)
    index_dtype = index_type_name(index_dtype)
    if index_dtype not in ("int32", "int64"):
        raise SpecError(op_name, "index_dtype", f"{index_dtype!r} is not an index width.",
                        "use 'int32' (the kernel indexes with int) or 'int64' (with long long / int64_t).")  # fmt: skip
    for field, fn in (("meta_fn", meta_fn), ("eager_fn", eager_fn), ("reference", reference)):
        if fn is not None and not callable(fn):
            raise SpecError(op_name, field, f"{type(fn).__name__} is not callable.", f"pass a function as {field}=.")
    if param_order is not None and (isinstance(param_order, str) or not all(isinstance(n, str) for n in param_order)):
        raise SpecError(op_name, "param_order", f"{param_order!r} is not a list of names.",
                        "pass the declared names in the kernel's parameter order, e.g. ['y', 'x', 'n'].")  # fmt: skip
    extras = tuple(extras or ())
    silence = check_silence(op_name, silence)
    compile = check_mode(op_name, compile, reference)
    fingerprint, described = declaration_fingerprint({
        "source": source.fingerprint(), "inputs": inputs, "outputs": outputs, "extras": extras,
        "geometry": geometry, "meta_fn": meta_fn, "eager_fn": eager_fn, "schema": schema, "autotune": autotune,
        "backward": backward, "index_dtype": index_dtype, "param_order": param_order, "sharding": sharding,
        "requires": requires, "reference": reference, "silence": silence, "compile": compile,
    })  # fmt: skip
    with _LOCK:
        existing = _REGISTRY.get(op_name)
        if existing is not None:
            if existing.fingerprint == fingerprint:
                return existing
            changed = ", ".join(_changed(existing.described, described))
            raise RegistrationError(op_name, "op_name", "an op of this name is already registered with a different "
                                    f"declaration; what differs: {changed}.",
                                    "use a new name, or restart the process to redefine it.")  # fmt: skip
        if torch._C._dispatch_has_kernel(op_name) or _schema_exists(op_name):
            raise RegistrationError(op_name, "op_name", "an op of this name already exists outside opsmith.",
                                    "pick another namespace or name.")  # fmt: skip
        if outputs is None and meta_fn is not None and schema is None:
            schema = _meta_schema(op_name, meta_fn)
        meta_outputs = len(torch._C.parse_schema(f"{op_name}{schema}").returns) if outputs is None and schema else 0
        record, variants, resolved = _build(op_name, source, inputs, outputs, extras, geometry, autotune,
                                            index_dtype, param_order, meta_fn, eager_fn, schema, meta_outputs,
                                            requires, silence)  # fmt: skip
        if backward is not None:
            if resolved is None:
                raise SpecError(op_name, "backward", "a backward needs the declared inputs and outputs to name "
                                "its arguments.", "declare inputs=[...] and outputs=[...].")  # fmt: skip
            check_backward(op_name, record, backward)  # before anything is defined: a bad one leaves no op
        sharding_plan = derive_plan(
            record, geometry, eager_fn=eager_fn, sharding=sharding, has_backward=backward is not None
        )
        custom = geometry.fn if isinstance(geometry, Custom) else None
        lib = torch.library.Library(ns, "FRAGMENT")
        lib.define(name + record.schema)
        # The implementations in a library of their own: opsmith.native.use() replaces them with a native
        # library's kernels and keeps the schema.
        impl_lib = torch.library.Library(ns, "FRAGMENT")
        choice = (
            None
            if compile == "kernel"
            else CompileChoice(
                op_name, compile, reference, tuning_identity(op_name, record.flavor, variants.sources, record)
            )
        )
        impl, impl_source, plan, cpu_kernel = _define(impl_lib, name, record, variants, custom, meta_fn, eager_fn,
                                                      backward, resolved, reference, choice)  # fmt: skip
        op = Op(op_name, record, variants, impl_source, fingerprint, lib)
        op.described = described
        _dump(op_name, impl_source)
        op.plan = plan
        op.impl_lib, op.native = impl_lib, None
        op.eager, op.differentiable, op.backward = impl, backward is not None, backward
        op.cpu_kernel = cpu_kernel
        op.reference = reference
        op.compile_choice = choice
        op.sharding_plan = sharding_plan
        if torch.distributed.is_available():
            attach(op.overload, sharding_plan)
        _REGISTRY[op_name] = op
        serving.attach(op, native)  # a native library takes over in the background (native/serving.py)
        return op


def _changed(old: object, new: object) -> list[str]:
    """What differs between two declarations' descriptions, worded for the reader: the kernel itself (its
    source text, kernel name, options or decorators) is one fingerprint, told apart from the fields."""
    return [f"{p} (the kernel: its source, name, compile options or decorators)" if p == "source" else p
            for p in differences(old, new)]  # fmt: skip


def _meta_schema(op_name: str, meta_fn: Callable) -> str:
    """The schema a ``meta_fn`` declares with its type hints, or a SpecError saying how to declare it."""
    try:
        return torch.library.infer_schema(meta_fn, mutates_args=())
    except Exception as e:  # PyTorch's own reason: missing or unsupported annotations
        raise SpecError(op_name, "meta_fn", f"its schema cannot be inferred from its type hints ({e}).",
                        "annotate it, e.g. def meta(x: torch.Tensor, alpha: float) -> torch.Tensor, or pass "
                        "schema='(Tensor x, float alpha) -> Tensor'.") from None  # fmt: skip


def _build(op_name: str, source: KernelSource, inputs, outputs, extras, geometry, autotune, index_dtype: str,
           param_order, meta_fn, eager_fn, schema: str | None, meta_outputs: int, requires: Sequence,
           silence: Sequence[str] = ()) -> tuple:  # fmt: skip
    """Compile the first kernel, bind the declaration to its parameters and assemble the record and its
    variants. Compiling comes first: a missing kernel or a compile error is the root cause of anything after."""
    triton = source.flavor == "triton"
    configs = check_autotune(op_name, autotune, geometry, triton=triton,
                             defaults=getattr(source, "constexpr_defaults", None))  # fmt: skip
    sources = [source.for_config(c) for c in configs]
    specialized = bool(getattr(sources[0], "specialized", False))
    arch = default_arch()
    binary = None if specialized else sources[0].build(arch)
    if binary is not None:
        log.info("%s: %s kernel %s for %s: %s in %.2f s", op_name, source.flavor, source.kernel_name, binary.arch,
                 "read from the disk cache" if binary.from_cache else "compiled", binary.seconds)  # fmt: skip
    params, names_why = sources[0].params(binary, arch)

    def resolved_with(extras: Sequence) -> Any:
        return resolve(op_name, inputs, outputs, extras, geometry, params, typed=source.typed,
                       has_meta_fn=meta_fn is not None, has_eager_fn=eager_fn is not None,
                       has_schema=schema is not None, meta_outputs=meta_outputs, configs=configs,
                       tune_key=autotune.key if autotune else (), dtype_generic=getattr(source, "dtype_generic", False),
                       names_why=names_why, param_order=param_order, static_names=source.static_names(),
                       int_scalar=getattr(source, "int_scalar", "i32"),
                       host_launched=getattr(source, "host_launched", False), requires=requires)  # fmt: skip

    def record_of(resolved: Any) -> KernelRecord:
        return KernelRecord(
            op_name=op_name, kernel_name=source.kernel_name, symbol=binary.symbol if binary else source.kernel_name,
            binary_format=binary.fmt if binary else "cubin", arch=binary.arch if binary else arch,
            binary=binary.data if binary else b"", flavor=source.flavor,
            configs=tuple(_config_dict(c) for c in configs), tune_default=autotune.default if autotune else 0,
            index_dtype=index_dtype, compile_options=getattr(source, "compile_options", ()),
            **({} if resolved is None else {"inputs": resolved.inputs, "extras": resolved.extras,
                                            "outputs": resolved.outputs, "launch": resolved.launch,
                                            "launches": resolved.launches, "tune_key": resolved.tune_key,
                                            "params": resolved.params, "dims": resolved.dims,
                                            "groups": resolved.groups, "requires": resolved.requires}),
        )  # fmt: skip

    resolved = resolved_with(extras)
    if specialized and resolved is None:
        raise SpecError(op_name, "inputs/outputs", "a kernel compiled per dtype or size (a Triton kernel, or "
                        "placeholders in kernel_name) needs declared inputs and outputs.",
                        "declare inputs=[...] and outputs=[...]; eager_fn overrides need a fixed kernel.")  # fmt: skip
    record = record_of(resolved)
    if resolved is not None:  # the declaration checked against the kernel's body (opsmith/analysis)

        def rebuild(new_extras: list) -> KernelRecord:
            nonlocal resolved
            resolved = resolved_with(new_extras)
            return record_of(resolved)

        decl = {"inputs": inputs, "outputs": outputs, "extras": extras, "requires": requires, "geometry": geometry}
        record = check_against_kernel(op_name, sources, record, decl, silence, rebuild)
    if record.static_scalars and source.flavor not in ("triton", "cuda"):
        raise static_scalar_refusal(op_name, [record.inputs[k].name for k in record.static_scalars])
    if schema is None:
        schema = derive_schema(record)
    elif resolved is not None:
        _check_schema(op_name, schema, record)
    record = dataclasses.replace(record, schema=schema)
    for s in sources:
        if hasattr(s, "bind"):
            s.bind(record)
    if getattr(source, "heuristics", ()):
        record = _with_heuristics(op_name, record, sources)
        source.heuristics = sources[0].heuristics  # less those a Present sets (``drop_agreeing``)
    if autotune is not None:
        check_tuning_writes(op_name, autotune, record)
    ctypes_ = record.param_ctypes() if resolved is not None else _param_ctypes(params)
    tuner = None
    if record.tuned:
        identity = tuning_identity(op_name, source.flavor, sources, record)
        tuner = Tuner(op_name, identity, record.configs, record.tune_default, prune=_pruner(autotune, configs),
                      warmup=autotune.warmup, rep=autotune.rep)  # fmt: skip
    variants = Variants(record, sources, binary, ctypes_, tuner)
    if specialized and not getattr(source, "interpreted", False) and not record.static_extras and \
            not record.static_scalars and \
            not record.heuristics and \
            (not triton or all(a.dtype for a in record.tensor_inputs)):  # fmt: skip
        # Compile errors surface now (float32 for open dtypes); with sizes compiled in, at the first call.
        variants.kernel(0, likely_spec(variants.spec_layout, torch.float32))
    return record, variants, resolved


def _dump(op_name: str, impl_source: str | None) -> None:
    """``OPSMITH_DUMP_DIR``: the generated eager code of each op registered, for reading (<ns>.<name>.py)."""
    where = env.DUMP_DIR.get()
    if where and impl_source:
        path = Path(where)
        path.mkdir(parents=True, exist_ok=True)
        (path / f"{op_name.replace('::', '.')}.py").write_text(f"# opsmith: the generated eager code of {op_name}\n"
                                                              + impl_source)  # fmt: skip


def _with_heuristics(op_name: str, record: KernelRecord, sources: list) -> KernelRecord:
    """The record with its sources' heuristics traced per config (``flavors/triton_decorators.py``); values that
    are not numbers (a string) become each config's plain constexprs."""
    from ..flavors.triton_decorators import drop_agreeing, heuristic_entries, trace_heuristics

    kept = drop_agreeing(sources[0], record)
    for s in sources:
        s.heuristics = tuple(h for h in s.heuristics if h.name in kept)
    per_config = [trace_heuristics(s, record) for s in sources]
    entries, constants = heuristic_entries(op_name, per_config, [h.name for h in sources[0].heuristics])
    record = dataclasses.replace(record, heuristics=entries)
    for s, consts in zip(sources, constants, strict=True):
        s.constexprs.update(consts)
        s.bind(record)
    return record


def _pruner(autotune: Autotune | None, configs: list[Config]) -> Callable | None:
    if autotune is None or not autotune.prune_configs_by:
        return None
    from ..flavors.triton_decorators import make_pruner

    return make_pruner(autotune.prune_configs_by, configs)


def _define(lib: torch.library.Library, name: str, record: KernelRecord, variants: Variants, custom: Callable | None,
            meta_fn: Callable | None, eager_fn: Callable | None, backward: Backward | None, resolved,
            reference: Callable | None = None, choice: CompileChoice | None = None) -> tuple:  # fmt: skip
    """Register the implementations: CUDA; CPU (the ``reference``, else a clear error or Triton's interpreter);
    fake; autograd (the declared backward, or a refusal). Returns (impl, its source, the call plan or None,
    the CPU kernel)."""
    op_name = record.op_name
    overload = _overload(op_name)
    impl_source = impl_ag = None
    plan = lower(record, variants.spec_layout) if resolved is not None else None
    if eager_fn is not None:
        impl = eager_fn
    else:
        takes_config = custom is not None and _arity(custom) >= 3
        refusal = no_backward_globals(op_name, overload) if backward is None else None
        impl, impl_ag, impl_source = make_eager(record, variants, plan, custom, takes_config,
                                                meta_fn if resolved and resolved.outputs and
                                                "meta" in resolved.outputs[0].shape else None, refusal)  # fmt: skip
    lib.impl(name, impl, "CUDA")
    # Where no other kernel applies: a call with no tensor at all, which torch's dispatcher cannot route
    lib.impl(name, no_backend(record), "CompositeExplicitAutograd")
    if record.mutated:  # under torch.compile, a saved activation it overwrites is not cloned first
        from ..inductor.donated import install

        install()
    cpu = impl if eager_fn is not None else _python_cpu_kernel(impl, plan, record, variants)
    if reference is not None:  # models with the op run on CPU: the user's reference, under the op's guards
        from .reference import cpu_reference

        checks = None if plan is None else make_checks(SimpleNamespace(plan=plan, record=record, variants=variants))
        lib.impl(name, cpu_reference(op_name, overload, reference, checks), "CPU")
    decompose = None
    if record.flavor == "triton":
        # The flavor's visible implementation: Inductor traces into it and sees the kernel.
        from ..flavors.triton_traced import register_visible

        decompose = register_visible(
            lib, op_name, name, record, variants, custom, cpu, make_fake, register_cpu=reference is None
        )
    elif eager_fn is None and reference is None:  # CPU tensors reach the generated guards and a clear error
        lib.impl(name, cpu, "CPU")
    # what torch.compile traces (inductor/choice.py)
    register_traced(lib, op_name, overload, choice, decompose, record)
    # A meta_fn allocates the outputs inside the plan's fake implementation, after every dtype, device, rank
    # and shape guard (alone, it would let tracing accept what the eager call refuses).
    fake = meta_fn if plan is None else make_fake(record, plan, meta_fn)
    torch.library.register_fake(op_name, fake, lib=lib)
    if backward is not None:
        register_backward(lib, record, backward)
    elif impl_ag is not None:
        lib.impl(name, impl_ag, "Autograd", with_keyset=True)
    else:  # an eager_fn override: the same refusal, without the generated fast path
        lib.impl(name, generic_no_backward(op_name, overload), "Autograd", with_keyset=True)
    return impl, impl_source, plan, cpu


def _config_dict(c: Config) -> dict:
    d = {"params": dict(c.params), "num_warps": c.num_warps, "num_stages": c.num_stages}
    # Only when set: the records (and tuning identities) of configs that never name them stay as they were.
    return d | {k: v for k in ("num_ctas", "maxnreg") if (v := getattr(c, k)) is not None}


def _arity(fn: Callable) -> int:
    import inspect

    try:
        return len(inspect.signature(fn).parameters)
    except (TypeError, ValueError):
        return 2


def tuning_identity(op_name: str, flavor: str, sources: Sequence[KernelSource], record: KernelRecord) -> dict:
    """What makes a stored tuning decision valid for this op: every config's kernel, the configs, their
    launches, the key's shape, and the compiler versions (the device and torch version join in the Tuner)."""
    return {"op": op_name, "flavor": flavor, "sources": [s.fingerprint() for s in sources],
            "configs": list(record.configs), "launches": [p.to_json() if p else None for p in record.launches],
            "tune_key": list(record.tune_key), **_toolchain(flavor)}  # fmt: skip


def _toolchain(flavor: str) -> dict:
    """Versions a tuning decision depends on besides the kernel and the device."""
    if flavor == "triton":
        import triton

        return {"triton": triton.__version__}
    if flavor == "cuda":
        from ..flavors.cuda_cpp import nvrtc_version

        return {"nvrtc": list(nvrtc_version())}
    if flavor == "cute":
        from ..flavors.cute import cutlass_version

        return {"cutlass": cutlass_version()}
    return {}


def _schema_exists(op_name: str) -> bool:
    try:
        torch._C._dispatch_find_schema_or_throw(op_name, "")
        return True
    except RuntimeError:
        return False


def _param_ctypes(params: list[KernelParam] | None) -> list[str]:
    """Parameter types for ``kernel.launch_args`` when only the kernel's parameters describe them."""
    return ["ptr" if p.pointer or (p.size == 8 and p.ctype == "?") else ("u64" if p.ctype == "?" else p.ctype)
            for p in params or []]  # fmt: skip


def _python_cpu_kernel(impl: Any, plan: Any, record: Any, variants: Any) -> Any:
    """The CPU kernel of a generated implementation: ``impl`` (its guards refuse CPU tensors), or under
    ``OPSMITH_NATIVE=dry-run`` the Python path's dry run (``eager.make_dry_run``), which records its launches
    on CPU tensors as the served dry-run library does."""
    if serving.served_backend() != "CPU" or plan is None:
        return impl
    # A host launch (CuTe DSL) has no grid of ours to print; a Python grid (Custom geometry) has none the dry run
    # can print, and no library serves it.
    if not variants.host_launched and (plan.launch is None or any(g is None for g in plan.launch.grids)):
        return impl
    return make_dry_run(SimpleNamespace(plan=plan, record=record, variants=variants))[0]
