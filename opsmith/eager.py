"""The eager CUDA implementation, generated once per op from its record.

Every per-call decision that can be made at registration is made here: which guards run, how each output
is allocated, which extras need an overflow check, the launch expressions, the order of the kernel's
parameters. The result is one flat Python function (its source is kept on the op as ``impl_source`` for
debugging), so a call pays for the checks it needs and nothing else.

Two entries share that body: ``impl`` for the CUDA (and CPU) dispatch keys, and, for ops that declare no
backward, ``impl_autograd`` for the Autograd key: plain CUDA tensors outside a graph run the body directly
(one Python crossing, as before); a call that builds a graph goes through a node that refuses to be
differentiated (``autograd.py``); anything else (fake, functional, subclass tensors, dispatch modes, meta
or CPU tensors) is redispatched below autograd to its own kernel.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .errors import InputError
from .fake import (
    FLOAT_MAX,
    INT32_MAX,
    INT_LIMITS,
    extent_error,
    float_range_error,
    int_range_error,
    large_tensor_error,
    out_shape,
)
from .geometry import EXPR_GLOBALS, describe, to_python
from .launch import bf16_bits
from .launch_code import _reuse, inline_simple, variant_launch
from .layout import addressable, layout_error, share_strides
from .record import KernelRecord, ScalarArg, TensorArg, dtype_from_name
from .variants import Variants

__all__ = ["make_eager"]

_INT_LIMITS, _FLOAT_MAX = INT_LIMITS, FLOAT_MAX


class _Errors:
    """Builders of the call-time errors, kept out of the generated code so it stays short."""

    def __init__(self, op: str) -> None:
        self.op = op

    def device(self, name: str, t: torch.Tensor, first: str | None, dev: int) -> InputError:
        if first is None or t.device.type != "cuda":
            return InputError(self.op, name, "a CUDA tensor", f"a tensor on {t.device}", f"Fix: pass {name}.cuda().")
        return InputError(self.op, name, f"a tensor on cuda:{dev} (where '{first}' is)", f"a tensor on {t.device}",
                          "Fix: put every tensor argument on the same GPU.")  # fmt: skip

    def dtype(self, name: str, t: torch.Tensor, dt: torch.dtype) -> InputError:
        return InputError(self.op, name, f"dtype {dt}", f"{t.dtype}", f"Fix: pass {name}.to({dt}).")

    def like(self, name: str, t: torch.Tensor, other: str, dt: torch.dtype) -> InputError:
        return InputError(self.op, name, f"dtype {dt}, the dtype of '{other}' (the kernel types both with one "
                          "template parameter)", f"{t.dtype}", f"Fix: pass {name}.to({other}.dtype).")  # fmt: skip

    def rank(self, name: str, t: torch.Tensor, want: str) -> InputError:
        return InputError(self.op, name, want, f"{t.dim()} dims (shape {tuple(t.shape)})")

    def contiguous(self, name: str, t: torch.Tensor, axes: tuple = ()) -> InputError:
        return layout_error(self.op, name, t, axes)

    def shape(self, name: str, t: torch.Tensor, want: tuple) -> InputError:
        return InputError(self.op, name, f"shape {want}", f"shape {tuple(t.shape)}")

    def empty(self, names: list[str], tensors: list[torch.Tensor], outs: list[torch.Tensor]) -> InputError:
        name = next(n for n, t in zip(names, tensors, strict=True) if t.numel() == 0)
        shapes = ", ".join(str(tuple(o.shape)) for o in outs)
        return InputError(self.op, name, "a non-empty tensor, since the outputs are non-empty "
                          f"(shapes {shapes}) and the kernel cannot fill them from no data", "an empty tensor")  # fmt: skip

    def large(self, names: list[str], numels: list[int]) -> InputError:
        name, n = next((a, b) for a, b in zip(names, numels, strict=True) if b > INT32_MAX)
        return large_tensor_error(self.op, name, n)

    def extent(self, what: str, value: int, limit: int) -> InputError:
        return extent_error(self.op, what, value, limit)

    def value(self, name: str, value: int, ctype: str, hint: str) -> InputError:
        return int_range_error(self.op, name, value, ctype, hint)

    def float_range(self, name: str, value: float, ctype: str) -> InputError:
        return float_range_error(self.op, name, value, ctype)

    def meta_out(self, k: int, t: object, dev: int, dt: torch.dtype | None) -> InputError | None:
        """Why output ``k`` that meta_fn allocated cannot take the kernel's writes (None: it can)."""
        name = f"meta_fn output {k}"
        if not isinstance(t, torch.Tensor):
            return InputError(self.op, name, "a tensor", type(t).__name__, "Fix: return new tensors from meta_fn.")
        if t.get_device() != dev:
            return InputError(self.op, name, f"a tensor on cuda:{dev}", f"a tensor on {t.device}",
                              "Fix: allocate outputs like the inputs (x.new_empty(...)).")  # fmt: skip
        if dt is not None and t.dtype != dt:
            return InputError(self.op, name, f"dtype {dt} (the kernel writes it so)", f"{t.dtype}",
                              f"Fix: allocate it with dtype={dt} in meta_fn.")  # fmt: skip
        if not t.is_contiguous():
            return InputError(self.op, name, "a contiguous tensor", f"strides {t.stride()}",
                              "Fix: allocate it with new_empty / empty.")  # fmt: skip
        return None


def _norm_launch(op: str, got: tuple) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    from .errors import SpecError

    if not isinstance(got, tuple | list) or len(got) not in (2, 3):
        raise SpecError(op, "geometry.fn", f"Custom geometry fn returned {got!r}.",
                        "return (grid, block) or (grid, block, shared_mem).")  # fmt: skip
    grid, block = ((*(g if isinstance(g, tuple | list) else (g,)), 1, 1)[:3] for g in got[:2])
    values = (*grid, *block, got[2] if len(got) == 3 else 0)
    bad = [v for v in values if isinstance(v, bool) or not isinstance(v, int)]
    if bad:  # int() would truncate a float grid (cdiv written as n / 256) and leave elements unlaunched
        raise SpecError(op, "geometry.fn", f"Custom geometry fn returned non-integer launch values {bad} in {got!r}.",
                        "return ints: write the grid as (n + 255) // 256, not n / 256.")  # fmt: skip
    return tuple(grid), tuple(block), values[6]  # type: ignore[return-value]


def _norm_geo(op: str, got: object, block_fixed: bool) -> tuple:
    """A Custom geometry's result as a flat tuple: the grid (Triton: the compiler fixed the block), or
    grid + block + shared_mem."""
    if block_fixed:
        from .errors import SpecError

        g = got if isinstance(got, tuple | list) else (got,)
        if not 1 <= len(g) <= 3 or not all(isinstance(v, int) and not isinstance(v, bool) for v in g):
            raise SpecError(op, "geometry.fn", f"a Triton op's Custom geometry fn returned {got!r}.",
                            "return the grid as 1 to 3 ints (write cdiv as (n + B - 1) // B).")  # fmt: skip
        return tuple(int(v) for v in (*g, 1, 1)[:3])
    grid, block, smem = _norm_launch(op, got)  # type: ignore[arg-type]
    return (*grid, *block, smem)


def _check_extent(op: str, errors: _Errors, g: tuple) -> tuple:
    """A Custom launch of a 32-bit kernel: x-axis threads must stay below 2^31 (``_norm_geo`` layout)."""
    if len(g) == 7 and g[0] * g[3] > 2**31:
        raise errors.extent("threads along x (grid x block)", g[0] * g[3], 2**31)
    return g


def make_eager(record: KernelRecord, variants: Variants, custom: Callable | None = None,
               custom_takes_config: bool = False, meta_fn: Callable | None = None,
               autograd: dict | None = None) -> tuple[Callable, Callable | None, str]:  # fmt: skip
    """(the CUDA implementation of ``record``, its Autograd-key entry or None, the generated source).
    ``autograd``: for an op without a backward, what the Autograd-key entry needs (``autograd.py``)."""
    names = [a.name for a in record.inputs]
    tnames = [a.name for a in record.inputs if isinstance(a, TensorArg)]
    mutated = [a.name for a in record.mutated]
    refs = {f"i{k}": n for k, n in enumerate(tnames)}
    refs.update({f"o{k}": f"_o{k}" for k in range(len(record.outputs))})
    if not record.outputs:
        refs["o0"] = mutated[0]
    refs["sm_count"] = "_sms(_dev)"
    errors = _Errors(record.op_name)
    g: dict[str, object] = {**EXPR_GLOBALS, "torch": torch, "_E": errors, "_out_shape": out_shape,
                            "_bf16": bf16_bits, "_norm": _norm_geo, "_custom": custom, "_op": record.op_name,
                            "_fits": addressable, "_share": share_strides, "_meta": meta_fn,
                            "_extent": _check_extent}  # fmt: skip
    first = tnames[0] if tnames else None
    body = _guards(record, g, tnames)
    outs, onumel, numel = _outputs(record, g, body, tnames)
    ret = "None" if not outs else outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
    # Zero-size: nothing to launch when everything written is empty; refuse non-empty outputs from empty inputs.
    written = onumel + [numel[m] for m in mutated]
    body += [f"if {' and '.join(f'{w} == 0' for w in dict.fromkeys(written))}: return {ret}"]
    # (unreachable, so not emitted, when one input's numel decides both: relu, softmax)
    if outs and not (len(set(written)) == 1 and set(written) == {numel[n] for n in tnames}):
        body += [f"if {' or '.join(f'{numel[n]} == 0' for n in tnames)}: "
                 f"raise _E.empty({tnames!r}, [{', '.join(tnames)}], [{', '.join(outs)}])"]  # fmt: skip
    body += _shared_strides(record, g, refs, tnames)
    xs = _extras(record, body, refs, numel)
    values = _values(record, xs)
    known = {f"{n}.numel()": v for n, v in numel.items()}
    known.update({f"{o}.numel()": v for o, v in zip(outs, onumel, strict=True) if v.startswith("_n")})
    if record.index_dtype == "int32":  # the tightest limit over the configs: checked before tuning launches any
        limits: dict[str, tuple[int, str]] = {}
        labels = {
            **{f"i{k}": n for k, n in enumerate(tnames)},
            **{f"o{k}": o.name for k, o in enumerate(record.outputs)},
        }
        if not record.outputs and mutated:
            labels["o0"] = mutated[0]
        for plan in record.launches or (record.launch,):
            for expr, limit in plan.limits if plan is not None else ():
                code = to_python(expr, refs)
                limits[code] = (min(limit, limits.get(code, (limit, ""))[0]), describe(expr, labels))
        derived = not record.outputs or "meta" not in record.outputs[0].shape
        for code, (limit, label) in limits.items():
            if derived and limit >= INT32_MAX:
                continue  # no output is larger than the inputs, whose numel is checked above
            v = _reuse(code, known)
            body += [f"if {v} > {limit}: raise _E.extent({label!r}, {v}, {limit})"]
    if variants.simple and record.launch is not None:
        body += inline_simple(g, record, variants, refs, values, ret, known)
    else:
        body += variant_launch(g, record, variants, refs, values, ret, tnames, outs, mutated, custom_takes_config,
                               known, xs)  # fmt: skip
    body += [f"return {ret}"]
    # In a child forked after CUDA use, PyTorch's allocation fails with a bare "initialization error" before
    # the launcher's own check; the handler (free until something raises) names the cause and the fix.
    from .launch import forked_error, in_forked_child

    g.update({"_in_forked": in_forked_child, "_forked_error": forked_error, "_bump": torch._C._increment_version})
    tail = [
        "    except RuntimeError as _x:",
        "        if _in_forked(): raise _forked_error(_op) from _x",
        "        raise",
    ]
    dev_raise = (
        [f"_dev = {first}.get_device()", f"if _dev < 0: raise _E.device({first!r}, {first}, None, -1)"] if first else []
    )
    src = [f"def impl({', '.join(names)}):", "    try:", *("        " + x for x in dev_raise + body), *tail]
    if autograd is not None:
        g.update(autograd)
        grad = " or ".join(f"{n}.requires_grad" for n in tnames) or "False"
        refuse = "_refuse_inplace(_op)" if mutated else f"return _nograd({', '.join(names)})"
        args = ", ".join(names)
        pre = [f"if ({grad}) and _grad_on(): {refuse}",
               f"if _ks.has(_PY) or not _ks.has(_CUDA): return _below(_ks, {args})",
               f"_dev = {first}.get_device()"]  # fmt: skip
        # An in-place op bumps its tensors' version counters, as the dispatcher's ADInplaceOrView step would
        # (autograd then refuses a backward that reads a tensor this op overwrote).
        pre += [f"_bump(({', '.join(mutated)},))"] if mutated else []
        src += [f"def impl_autograd(_ks, {args}):", "    try:", *("        " + x for x in pre + body), *tail]
    text = "\n".join(src) + "\n"
    scope: dict[str, object] = {}
    exec(compile(text, f"<opsmith eager {record.op_name}>", "exec"), g, scope)
    return scope["impl"], scope.get("impl_autograd"), text  # type: ignore[return-value]


def _guards(record: KernelRecord, g: dict, tnames: list[str]) -> list[str]:
    """Device, dtype, rank, layout and shape of every tensor input; the range of every scalar."""
    L: list[str] = []
    first = tnames[0] if tnames else None
    for k, a in enumerate(record.tensor_inputs):
        n = a.name
        if n != first:
            L += [f"if {n}.get_device() != _dev: raise _E.device({n!r}, {n}, {first!r}, _dev)"]
        if a.dtype:
            g[f"_dt{k}"] = dtype_from_name(a.dtype)
            L += [f"if {n}.dtype is not _dt{k}: raise _E.dtype({n!r}, {n}, _dt{k})"]
        if a.ndim is not None:
            L += [f"if {n}.dim() != {a.ndim}: raise _E.rank({n!r}, {n}, '{a.ndim} dims')"]
        elif a.min_ndim:
            L += [f"if {n}.dim() < {a.min_ndim}: raise _E.rank({n!r}, {n}, 'at least {a.min_ndim} dims "
                  "(the launch geometry, a reduced axis or an extra needs them)')"]  # fmt: skip
        check = f"not {n}.is_contiguous()" if not a.strided else f"not _fits({n}, {tuple(a.strided)!r})"
        if a.contiguous == "make":
            L += [f"if {check}: {n} = {n}.contiguous()"]
        else:
            L += [f"if {check}: raise _E.contiguous({n!r}, {n}, {tuple(a.strided)!r})"]
    for a in record.tensor_inputs:
        if a.dtype_like:
            L += [f"if {a.name}.dtype is not {a.dtype_like}.dtype: "
                  f"raise _E.like({a.name!r}, {a.name}, {a.dtype_like!r}, {a.dtype_like}.dtype)"]  # fmt: skip
    L += _shape_guards(record.tensor_inputs, tnames)
    for a in record.inputs:
        if not isinstance(a, ScalarArg):
            continue
        if a.ctype in _INT_LIMITS:
            lo, hi = _INT_LIMITS[a.ctype]
            L += [f"if not {lo} <= {a.name} <= {hi}: raise _E.value({a.name!r}, {a.name}, {a.ctype!r}, '')"]
        elif a.ctype in _FLOAT_MAX and a.py_type == "float":
            m = _FLOAT_MAX[a.ctype]
            g["_inf"] = math.inf
            L += [f"if not {-m!r} <= {a.name} <= {m!r} and {a.name} == {a.name} and abs({a.name}) != _inf: "
                  f"raise _E.float_range({a.name!r}, {a.name}, {a.ctype!r})"]  # fmt: skip
    return L


def _shape_guards(targs: tuple, tnames: list[str]) -> list[str]:
    """Declared exact shapes, checked after every tensor's rank (a reference reads another input's size)."""
    lines = []
    for a in targs:
        if a.shape is None:
            continue
        n = a.name
        want = ["None" if e is None else str(e) if isinstance(e, int) else f"{tnames[e[0]]}.shape[{e[1]}]"
                for e in a.shape]  # fmt: skip
        conds = [f"{n}.dim() != {len(want)}"] + [f"{n}.shape[{i}] != {w}" for i, w in enumerate(want) if w != "None"]
        lines.append(f"if {' or '.join(conds)}: raise _E.shape({n!r}, {n}, ({', '.join(want)},))")
    return lines


def _outputs(record: KernelRecord, g: dict, L: list[str], tnames: list[str]) -> tuple[list[str], list[str], dict]:
    """Allocate every output (contiguous, on the inputs' device). Every numel is read once (each call costs
    ~0.1 us) and an output of its source's dtype is a plain empty_like (passing dtype= costs ~0.25 us more)."""
    declared = {k: a.dtype for k, a in enumerate(record.tensor_inputs)}
    numel = {n: f"_n{k}" for k, n in enumerate(tnames)}
    L += [f"_n{k} = {n}.numel()" for k, n in enumerate(tnames)]
    if record.index_dtype == "int32" and tnames:  # outputs are never larger than the largest input
        ns = [f"_n{k}" for k in range(len(tnames))]
        L += [f"if {' or '.join(f'{n} > {INT32_MAX}' for n in ns)}: raise _E.large({tnames!r}, [{', '.join(ns)}])"]
    outs = [f"_o{k}" for k in range(len(record.outputs))]
    if record.outputs and "meta" in record.outputs[0].shape:
        names = [a.name for a in record.inputs]
        L += [f"_r = _meta({', '.join(names)})", f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = "
              f"{'(_r,)' if len(outs) == 1 else '_r'}"]  # fmt: skip
        for k, o in enumerate(record.outputs):
            g[f"_odt{k}"] = dtype_from_name(o.dtype)
            L += [f"_w = _E.meta_out({k}, _o{k}, _dev, _odt{k})", "if _w is not None: raise _w"]
        return outs, [f"_o{k}.numel()" for k in range(len(outs))], numel
    onumel = []
    for k, o in enumerate(record.outputs):
        src = o.shape.get("same_as", o.shape.get("reduce"))
        sname = tnames[src]
        same_dtype = (o.dtype is None and o.dtype_from == src) or (o.dtype is not None and declared[src] == o.dtype)
        fixed = dtype_from_name(o.dtype)
        if fixed is not None:
            g[f"_odt{k}"] = fixed
            dt = f"_odt{k}"
        else:
            dt = f"{tnames[o.dtype_from]}.dtype"
        if "same_as" in o.shape:
            # A strided input may be non-contiguous here, and empty_like would copy its strides.
            fmt = ", memory_format=torch.contiguous_format" if record.tensor_inputs[src].strided else ""
            L += [f"_o{k} = torch.empty_like({sname}{fmt})" if same_dtype else
                  f"_o{k} = torch.empty_like({sname}, dtype={dt}{fmt})"]  # fmt: skip
            onumel.append(numel[sname])
        else:
            g[f"_rel{k}"] = o.shape
            L += [f"_o{k} = {sname}.new_empty(_out_shape(_op, _rel{k}, {sname}, {sname!r}), dtype={dt})"]
            onumel.append(f"_o{k}.numel()")
    return outs, onumel, numel


def _shared_strides(record: KernelRecord, g: dict, refs: dict, tnames: list[str]) -> list[str]:
    """Tensors one stride parameter describes must agree (``layout.share_strides``)."""
    L = []
    for _k, e in enumerate(record.extras):
        if not e.same:
            continue
        group = [e.expr[1], *e.same]
        vars_ = [refs[r] for r in group]
        inputs = [r.startswith("i") for r in group]
        require = [r.startswith("i") and record.tensor_inputs[int(r[1:])].contiguous == "require" for r in group]
        labels = [tnames[int(r[1:])] if r.startswith("i") else record.outputs[int(r[1:])].name for r in group]
        L += [f"{', '.join(vars_)}, = _share(_op, {labels!r}, [{', '.join(vars_)}], {inputs!r}, {require!r}, "
              f"{e.expr[2]})"]  # fmt: skip
    return L


def _extras(record: KernelRecord, L: list[str], refs: dict, numel: dict) -> list[str]:
    """Compute every extra once, refusing values its C type cannot hold. Returns their variable names."""
    tnames = [a.name for a in record.tensor_inputs]
    xs = []
    for k, e in enumerate(record.extras):
        is_numel = isinstance(e.expr, list) and e.expr[0] == "numel" and e.expr[1].startswith("i")
        expr = numel[tnames[int(e.expr[1][1:])]] if is_numel else to_python(e.expr, refs)
        L += [f"_x{k} = {expr}"]
        xs.append(f"_x{k}")
        if e.static or e.ctype not in _INT_LIMITS or isinstance(e.expr, int | float):
            continue  # compiled in, a float, or a constant checked at registration
        if is_numel and e.ctype == "i32" and record.index_dtype == "int32":
            continue  # the 32-bit index check above bounds it already
        lo, hi = _INT_LIMITS[e.ctype]
        hint = ("Fix: declare the extra with dtype='int64' and take it as long long / int64_t in the kernel."
                if e.ctype in ("i32", "u32") else "")  # fmt: skip
        L += [f"if not {lo} <= _x{k} <= {hi}: raise _E.value({e.label!r}, _x{k}, {e.ctype!r}, {hint!r})"]
    return xs


def _values(record: KernelRecord, xs: list[str]) -> list[str]:
    """The kernel's runtime arguments in its own parameter order (pointers as ints, bf16 as its bits)."""
    values = []
    for p in record.params:
        if p.role == "input":
            a = record.inputs[p.index]
            if isinstance(a, TensorArg):
                values.append(f"{a.name}.data_ptr()")
            else:
                values.append(f"_bf16({a.name})" if p.ctype == "bf16" else a.name)
        elif p.role == "extra":
            values.append(xs[p.index])
        else:
            values.append(f"_o{p.index}.data_ptr()")
    return values
