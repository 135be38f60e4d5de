"""Triton's own decorators, taken as they are: ``@triton.autotune`` becomes the op's ``Autotune``, each
``@triton.heuristics`` value a constexpr computed per call by the generated code.

A published kernel arrives stacked (``@triton.autotune(...)`` over ``@triton.heuristics(...)`` over
``@triton.jit``). ``unwrap`` peels the stack: the autotuner's configs (``triton.Config``: kwargs, num_warps,
num_stages, num_ctas, maxnreg), ``key``, ``prune_configs_by``, ``reset_to_zero``, ``restore_value`` and
``warmup``/``rep`` become an ``Autotune``, so its decisions persist on disk, are made once per job and are
embedded in native libraries; the heuristics are traced (``symbolic.py``) into size expressions, per config
where they read a config's values, and join the call's specialization, so Python and a native library compute
the same constexpr from the same call.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ..declare.spec import Autotune
from ..errors import SpecError

__all__ = ["Heuristic", "drop_agreeing", "heuristic_entries", "make_pruner", "trace_heuristics", "unwrap"]


@dataclass(frozen=True)
class Heuristic:
    """``@triton.heuristics(values={name: fn})``: the constexpr ``name`` is ``fn(args)`` on every call."""

    name: str
    fn: Any


def _kind(obj: object) -> str | None:
    try:
        from triton.runtime.autotuner import Autotuner, Heuristics
    except ImportError:
        return None
    return "autotune" if isinstance(obj, Autotuner) else "heuristics" if isinstance(obj, Heuristics) else None


def unwrap(op: str, kernel: Any, autotune: Autotune | None) -> tuple[Any, Autotune | None, tuple[Heuristic, ...]]:
    """(the ``@triton.jit`` function, the op's Autotune, its heuristics in the order Triton applies them)."""
    heuristics: list[Heuristic] = []
    tuner = None
    while (kind := _kind(kernel)) is not None:
        if kind == "autotune":
            if tuner is not None:
                raise SpecError(op, "kernel", "the kernel is decorated with @triton.autotune twice.",
                                "keep one @triton.autotune.")  # fmt: skip
            tuner = kernel
        else:
            heuristics += [Heuristic(n, f) for n, f in kernel.values.items()]
        kernel = kernel.fn
    if tuner is None:
        return kernel, autotune, tuple(heuristics)
    if autotune is not None:
        raise SpecError(op, "autotune", "the kernel is decorated with @triton.autotune and autotune= is given too.",
                        "keep one: drop autotune= to tune over the decorator's configs, or drop the decorator.")  # fmt: skip
    return kernel, _from_autotuner(op, tuner), tuple(heuristics)


def _from_autotuner(op: str, at: Any) -> Autotune:
    if getattr(at, "user_defined_pre_hook", False) or getattr(at, "user_defined_post_hook", False):
        raise SpecError(op, "kernel", "the @triton.autotune pre_hook/post_hook are Python callbacks around each launch, "
                        "which opsmith's generated launch and native libraries do not make.",
                        "drop them: outputs the kernel accumulates into take OutputDecl(init=0); reset_to_zero and "
                        "restore_value are honoured.")  # fmt: skip
    if getattr(at, "_do_bench", None) is not None and getattr(at, "num_warmups", None) is None \
            and getattr(at, "num_reps", None) is None and not getattr(at, "use_cuda_graph", False):  # fmt: skip
        raise SpecError(op, "kernel", "the @triton.autotune do_bench= replaces how configs are timed; opsmith times "
                        "them itself (CUDA events, L2 flushed between runs).", "drop do_bench=.")  # fmt: skip
    prune = None
    if getattr(at, "early_config_prune", None) or getattr(at, "perf_model", None):
        prune = {"early_config_prune": at.early_config_prune, "perf_model": at.perf_model,
                 "top_k": getattr(at, "configs_top_k", 1.0)}  # fmt: skip
    from ..declare.validate import from_triton_config

    configs = [from_triton_config(op, f"@triton.autotune configs[{k}]", c) for k, c in enumerate(at.configs)]
    return Autotune(configs=configs, key=list(at.keys), prune_configs_by=prune,
                    reset_to_zero=tuple(at.reset_to_zero or ()), restore_value=tuple(at.restore_value or ()),
                    warmup=getattr(at, "num_warmups", None), rep=getattr(at, "num_reps", None))  # fmt: skip


def trace_heuristics(source: Any, record: Any) -> list[Any]:
    """Per heuristic of ``source`` (a TritonSource bound to ``record``, one config): its value under this
    config, a constant or an expression tree over the record's refs."""
    from ..declare.symbolic import Sym

    args, optional = _arguments(source, record)
    if len(optional) > 6:
        raise SpecError(source.op_name, "heuristics", f"{len(optional)} optional tensors: tracing each heuristic over "
                        "every combination of given and None would take 2^n traces.",
                        "declare at most 6 optional tensor inputs on a kernel with heuristics.")  # fmt: skip
    out = []
    for h in source.heuristics:
        v = _trace_present(source, record, h, args, optional, 0)
        args[h.name] = Sym(v) if isinstance(v, list) else v
        out.append(v)
    return out


def _arguments(source: Any, record: Any) -> tuple[dict[str, Any], list[str]]:
    """(the arguments as the heuristics see them: symbols for sizes and scalars, the config's values; the
    kernel parameters of the optional tensors)."""
    from ..declare.symbolic import Sym, SymTensor, _Opaque
    from .base import param_roles

    args: dict[str, Any] = {}
    tensors = [a.name for a in record.tensor_inputs]
    for name, (role, a) in zip(source.runtime_params, param_roles(record), strict=True):
        if role == "tensor":
            args[name] = SymTensor(f"i{tensors.index(a.name)}", a.name)
        elif role == "output":
            args[name] = SymTensor(f"o{list(record.outputs).index(a)}", a.name)
        elif role == "extra":
            args[name] = a.expr if isinstance(a.expr, int | float) else Sym(a.expr)
        else:
            args[name] = _Opaque(a.name)
    for e in record.extras:
        if e.static and e.name:
            args[e.name] = Sym(e.expr)
    # An int or bool scalar input (passed or compiled in) reads as its value in the call; a float is no size.
    args |= {record.inputs[p].name: Sym(["var", f"s{p}"]) for p in record.int_scalars}
    # What a call passes, as Triton's heuristics see it: the declared constexprs (``constexprs=``, the values a
    # caller gives by keyword) even where a heuristic then sets that name (unsloth's backward computes GEMMA
    # from the GEMMA it is passed), the config's values and the launch options.
    args |= source.fixed | source.constexprs | {k: v for k, v in source.options.items() if v is not None}
    # An optional tensor is given or None, and ``args["b"] is not None`` cannot be traced through an object (Python's
    # ``is`` has no hook): each heuristic is traced once per combination of the optional tensors, and values that
    # differ become a choice on ``present(b)``. A constant from one trace would compile a call without ``b`` as if
    # it had one (a null read on the GPU).
    optional = [n for n, (role, a) in zip(source.runtime_params, param_roles(record), strict=True)
                if role == "tensor" and a.optional]  # fmt: skip
    return args, optional


def drop_agreeing(source: Any, record: Any) -> frozenset[str]:
    """The names of ``source``'s heuristics to keep: all but those a ``Present`` extra also sets, which are
    dropped where the heuristic gives the same value on every call (``args["b"] is not None``, or unsloth's
    ``bool(args["HAS_ROPE_INDICES"])`` reading back what the host passed). Traced twice, with the tensor given
    and the flag 1, then None and 0: a value that is not that constant both times (it reads a size, or says
    the opposite) could disagree with the flag, and is refused naming both. A heuristic beside any other
    static extra sets one constexpr twice."""
    static = {e.name: e for e in record.extras if e.static and e.name}
    keep = set()
    for h in source.heuristics:
        e = static.get(h.name)
        if e is None:
            keep.add(h.name)
            continue
        if not (isinstance(e.expr, list) and e.expr[0] == "present"):
            raise SpecError(source.op_name, f"heuristics['{h.name}']", f"the constexpr '{h.name}' is set twice: by "
                            f"the extra {e.label} and by the heuristic.", "let one of them set it: drop the extra, "
                            "or the heuristic (a kernel's own @triton.heuristics cannot be dropped; name the extra "
                            "after no constexpr).")  # fmt: skip
        _agrees(source, record, h, e)
    return frozenset(keep)


def _agrees(source: Any, record: Any, h: Any, e: Any) -> None:
    from .base import param_roles

    k = int(e.expr[1][1:])
    tensors = [a.name for a in record.tensor_inputs]
    param = next(n for n, (role, a) in zip(source.runtime_params, param_roles(record), strict=True)
                 if role == "tensor" and tensors.index(a.name) == k)  # fmt: skip
    for given in (True, False):
        args, optional = _arguments(source, record)
        args |= {h.name: int(given)} | ({} if given else {param: None})
        values = _trace_present(source, record, h, args, [n for n in optional if n != param], 0)
        if not isinstance(values, bool | int) or bool(values) is not given:
            raise SpecError(source.op_name, f"heuristics['{h.name}']", f"the constexpr '{h.name}' is set by "
                            f"{e.label} and by the heuristic, which gives {values!r} where '{tensors[k]}' is "
                            f"{'given' if given else 'None'}: the two can disagree.", f"drop the Present extra, "
                            f"or make the heuristic say whether '{param}' is given (args[{param!r}] is not None).")  # fmt: skip


def _trace_present(source: Any, record: Any, h: Any, args: dict, optional: list[str], k: int) -> Any:
    """Heuristic ``h``'s value with the optional tensors from ``optional[k]`` on given and None in turn:
    ``["where", ["present", ref], given, absent]`` where the two differ."""
    if k < len(optional):
        name = optional[k]
        given = _trace_present(source, record, h, args, optional, k + 1)
        absent = _trace_present(source, record, h, {**args, name: None}, optional, k + 1)
        if given == absent:
            return given
        present = ["present", args[name]._ref]
        if given is True and absent is False:  # ``args["b"] is not None``: the truth value of present(b)
            return ["ne", present, 0]
        if given is False and absent is True:
            return ["eq", present, 0]
        return ["where", present, given, absent]
    return _trace_one(source, h, args)


def _trace_one(source: Any, h: Any, args: dict) -> Any:
    from ..declare.symbolic import Untraceable, trace

    try:
        return trace(h.fn, args)
    except KeyError as e:
        raise SpecError(source.op_name, f"heuristics['{h.name}']", f"the heuristic reads args[{e}], which is not "
                        f"a parameter of '{source.kernel_name}' with a value here.",
                        "read the kernel's parameters by their names.") from None  # fmt: skip
    except Untraceable as e:
        raise SpecError(source.op_name, f"heuristics['{h.name}']", f"the heuristic cannot be computed from the "
                        f"declaration: {e}.", "write it with arithmetic, //, %, comparisons, min/max, "
                        "triton.cdiv and triton.next_power_of_2 over sizes and config values.") from None  # fmt: skip
    except (AttributeError, TypeError) as e:
        absent = [n for n, v in args.items() if v is None]
        if not absent:
            raise
        raise SpecError(source.op_name, f"heuristics['{h.name}']", f"the heuristic fails where the optional tensor "
                        f"{absent[0]!r} is None ({type(e).__name__}: {e}); a call may pass None.",
                        f"test it first: args[{absent[0]!r}] is not None and ...") from None  # fmt: skip


def heuristic_entries(op: str, per_config: list[list[Any]], names: list[str]) -> tuple[tuple[dict, ...], list[dict]]:
    """(the record's heuristics: those whose value is a number or an expression, with their distinct
    expressions and each config's pick; per config, the constant values of the others (a string, a float),
    which are plain constexprs of that config)."""
    entries = []
    constants: list[dict] = [{} for _ in per_config]
    for j, name in enumerate(names):
        values = [vals[j] for vals in per_config]
        if not all(isinstance(v, list | bool | int) for v in values):
            if any(isinstance(v, list) for v in values):
                raise SpecError(op, f"heuristics['{name}']", "the heuristic gives a number that varies per call under "
                                "some configs and a non-number under others.", "make it give numbers.")  # fmt: skip
            for c, v in enumerate(values):
                constants[c][name] = v
            continue
        exprs: list[Any] = []
        pick = []
        for v in values:
            key = json.dumps(v)
            found = next((k for k, e in enumerate(exprs) if json.dumps(e) == key), None)
            if found is None:
                exprs.append(v)
                found = len(exprs) - 1
            pick.append(found)
        entries.append({"name": name, "exprs": exprs, "pick": pick})
    return tuple(entries), constants


def make_pruner(prune: dict, configs: list) -> Any:
    """``prune_configs_by`` as the tuner calls it: ``(named_args, kwargs) -> the config indices to time``.
    The functions see ``triton.Config`` objects and the call's arguments by kernel parameter name, as under
    Triton's autotuner; a config they return that is not one of the op's (a pruner that builds new ones) cannot
    be launched, since every config is compiled from the declaration: it is left out, with a warning."""
    import logging

    import triton

    log = logging.getLogger("opsmith.autotune")
    early, model, top_k = prune.get("early_config_prune"), prune.get("perf_model"), prune.get("top_k", 1.0)
    tconfigs = [triton.Config(dict(c.params), num_warps=c.num_warps or 4, num_stages=c.num_stages or 3,
                              num_ctas=c.num_ctas or 1, maxnreg=c.maxnreg) for c in configs]  # fmt: skip

    def pruned(named: dict, kwargs: dict) -> list[int]:
        cands = list(tconfigs)
        if early:
            cands = list(early(cands, named, **kwargs))
            if not cands:
                raise ValueError("early_config_prune returned no configs; it must return at least one")
        if model:
            k = max(1, int(len(cands) * top_k)) if isinstance(top_k, float) and top_k <= 1.0 else int(top_k)
            if len(cands) > k:
                est = [model(**named, **kwargs, **c.all_kwargs()) for c in cands]
                cands = [c for _, c in sorted(zip(est, cands, strict=True), key=lambda p: p[0])][:k]
        out = []
        for c in cands:
            hit = next((j for j, t in enumerate(tconfigs) if t.all_kwargs() == c.all_kwargs()), None)
            if hit is None:
                log.warning("prune_configs_by returned %s, which is not one of the op's configs; left out", c)
            elif hit not in out:
                out.append(hit)
        return out or list(range(len(tconfigs)))

    return pruned
