"""The eager CUDA implementation, generated once per op from its record.

Every per-call decision that can be made at registration is made here: which guards run, how each output
is allocated, which extras need an overflow check, the launch expressions. The result is one flat Python
function (its source is kept on the op as ``impl_source`` for debugging), so a call pays for the checks
it needs and nothing else.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from .autotune import key_to_python, pow2
from .errors import InputError
from .fake import INT32_MAX, large_tensor_error, out_shape
from .geometry import to_python
from .launch import bf16_bits
from .record import KernelRecord, ScalarArg, TensorArg, dtype_from_name
from .variants import Variants

__all__ = ["make_eager"]

_INT_LIMITS = {"i32": (-(2**31), 2**31 - 1), "u32": (0, 2**32 - 1), "i64": (-(2**63), 2**63 - 1),
               "u64": (0, 2**64 - 1), "i16": (-(2**15), 2**15 - 1), "u16": (0, 2**16 - 1),
               "i8": (-128, 127), "u8": (0, 255)}  # fmt: skip


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

    def rank(self, name: str, t: torch.Tensor, want: str) -> InputError:
        return InputError(self.op, name, want, f"{t.dim()} dims (shape {tuple(t.shape)})")

    def contiguous(self, name: str, t: torch.Tensor) -> InputError:
        return InputError(self.op, name, "a contiguous tensor (declared contiguous='require')",
                          f"strides {t.stride()} for shape {tuple(t.shape)}", f"Fix: pass {name}.contiguous().")  # fmt: skip

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

    def value(self, name: str, value: int, ctype: str, hint: str) -> InputError:
        lo, hi = _INT_LIMITS[ctype]
        return InputError(self.op, name, f"a value in [{lo}, {hi}] for the kernel's {ctype} parameter",
                          f"{value}", hint)  # fmt: skip


def _norm_launch(op: str, got: tuple) -> tuple[tuple[int, int, int], tuple[int, int, int], int]:
    if not isinstance(got, tuple | list) or len(got) not in (2, 3):
        raise TypeError(f"{op}: Custom geometry fn must return (grid, block) or (grid, block, shared_mem), "
                        f"got {got!r}.")  # fmt: skip
    grid, block = ((*(g if isinstance(g, tuple | list) else (g,)), 1, 1)[:3] for g in got[:2])
    return tuple(int(v) for v in grid), tuple(int(v) for v in block), int(got[2]) if len(got) == 3 else 0  # type: ignore[return-value]


def _norm_geo(op: str, got: object, block_fixed: bool) -> tuple:
    """A Custom geometry's result as a flat tuple: the grid (Triton: the compiler fixed the block), or
    grid + block + shared_mem."""
    if block_fixed:
        g = got if isinstance(got, tuple | list) else (got,)
        if not 1 <= len(g) <= 3 or not all(isinstance(v, int) for v in g):
            raise TypeError(f"{op}: a Triton op's Custom geometry fn must return the grid (1 to 3 ints), got {got!r}.")
        return tuple(int(v) for v in (*g, 1, 1)[:3])
    grid, block, smem = _norm_launch(op, got)  # type: ignore[arg-type]
    return (*grid, *block, smem)


def make_eager(record: KernelRecord, variants: Variants, custom: Callable | None = None,
               custom_takes_config: bool = False, refuse_grad: bool = False) -> tuple[Callable, str]:  # fmt: skip
    """(the CUDA implementation of ``record``, its generated source). ``refuse_grad``: the op has no backward,
    so a call that builds a graph re-arms the error that differentiating through it raises."""
    names = [a.name for a in record.inputs]
    tnames = [a.name for a in record.inputs if isinstance(a, TensorArg)]
    mutated = [a.name for a in record.mutated]
    refs = {f"i{k}": n for k, n in enumerate(tnames)}
    refs.update({f"o{k}": f"_o{k}" for k in range(len(record.outputs))})
    if not record.outputs:
        refs["o0"] = mutated[0]
    g: dict[str, object] = {"torch": torch, "_E": _Errors(record.op_name), "_out_shape": out_shape,
                            "_prod": math.prod, "_bf16": bf16_bits, "_norm": _norm_geo, "_custom": custom,
                            "_op": record.op_name, "_pow2": pow2}  # fmt: skip
    L = [f"def impl({', '.join(names)}):"]
    first = None
    for k, a in enumerate(record.tensor_inputs):
        n = a.name
        if first is None:
            L += [f"    _dev = {n}.get_device()", f"    if _dev < 0: raise _E.device({n!r}, {n}, None, -1)"]
            first = n
        else:
            L += [f"    if {n}.get_device() != _dev: raise _E.device({n!r}, {n}, {first!r}, _dev)"]
        if a.dtype:
            g[f"_dt{k}"] = dtype_from_name(a.dtype)
            L += [f"    if {n}.dtype is not _dt{k}: raise _E.dtype({n!r}, {n}, _dt{k})"]
        if a.ndim is not None:
            L += [f"    if {n}.dim() != {a.ndim}: raise _E.rank({n!r}, {n}, '{a.ndim} dims')"]
        elif a.min_ndim:
            L += [f"    if {n}.dim() < {a.min_ndim}: raise _E.rank({n!r}, {n}, 'at least {a.min_ndim} dims "
                  "(the launch geometry or a reduced axis needs them)')"]  # fmt: skip
        if a.contiguous == "make":
            L += [f"    if not {n}.is_contiguous(): {n} = {n}.contiguous()"]
        else:
            L += [f"    if not {n}.is_contiguous(): raise _E.contiguous({n!r}, {n})"]
    if refuse_grad and tnames:  # ~40 ns per input; the rare branch only re-installs a warnings filter
        from .autograd import refuse_inplace_grad, refuse_silent_backward

        # An in-place op gets no "no autograd kernel" warning from PyTorch: its mutated input keeps its old
        # grad_fn and gradients flow through as if the op were the identity. Refuse the call instead.
        refuse = refuse_inplace_grad if mutated else refuse_silent_backward
        g.update({"_grad_on": torch.is_grad_enabled, "_refuse": refuse})
        L += [f"    if ({' or '.join(f'{n}.requires_grad' for n in tnames)}) and _grad_on(): _refuse(_op)"]
    L += _shape_guards(record.tensor_inputs, tnames)
    values = []
    for a in record.inputs:
        if isinstance(a, TensorArg):
            values.append(f"{a.name}.data_ptr()")
            continue
        assert isinstance(a, ScalarArg)
        if a.ctype in _INT_LIMITS:
            lo, hi = _INT_LIMITS[a.ctype]
            L += [f"    if not {lo} <= {a.name} <= {hi}: raise _E.value({a.name!r}, {a.name}, {a.ctype!r}, '')"]
        values.append(f"_bf16({a.name})" if a.ctype == "bf16" else a.name)
    # Outputs: contiguous, on the inputs' device. Every numel is read once (each call costs ~0.1 us) and an
    # output of its source's dtype is a plain empty_like (passing dtype= costs ~0.25 us more).
    declared = {k: a.dtype for k, a in enumerate(record.tensor_inputs)}
    numel = {n: f"_n{k}" for k, n in enumerate(tnames)}
    L += [f"    _n{k} = {n}.numel()" for k, n in enumerate(tnames)]
    if record.index_dtype == "int32" and tnames:  # outputs are never larger than the largest input
        ns = [f"_n{k}" for k in range(len(tnames))]
        L += [f"    if {' or '.join(f'{n} > {INT32_MAX}' for n in ns)}: raise _E.large({tnames!r}, [{', '.join(ns)}])"]
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
            L += [f"    _o{k} = torch.empty_like({sname})" if same_dtype else
                  f"    _o{k} = torch.empty_like({sname}, dtype={dt})"]  # fmt: skip
            onumel.append(numel[sname])
        else:
            g[f"_rel{k}"] = o.shape
            L += [f"    _o{k} = {sname}.new_empty(_out_shape(_op, _rel{k}, {sname}, {sname!r}), dtype={dt})"]
            onumel.append(f"_o{k}.numel()")
    outs = [f"_o{k}" for k in range(len(record.outputs))]
    ret = "None" if not outs else outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
    # Zero-size: nothing to launch when everything written is empty; refuse non-empty outputs from empty inputs.
    written = onumel + [numel[m] for m in mutated]
    L += [f"    if {' and '.join(f'{w} == 0' for w in dict.fromkeys(written))}: return {ret}"]
    # (unreachable, so not emitted, when one input's numel decides both: relu, softmax)
    if outs and not (len(set(written)) == 1 and set(written) == {numel[n] for n in tnames}):
        L += [f"    if {' or '.join(f'{numel[n]} == 0' for n in tnames)}: "
              f"raise _E.empty({tnames!r}, [{', '.join(tnames)}], [{', '.join(outs)}])"]  # fmt: skip
    for k, e in enumerate(record.extras):
        expr = numel[tnames[int(e.expr[1][1:])]] if e.expr[0] == "numel" else to_python(e.expr, refs)
        L += [f"    _x{k} = {expr}"]
        if e.expr[0] == "numel" and e.ctype == "i32" and record.index_dtype == "int32":
            values.append(f"_x{k}")  # the 32-bit index check above bounds it already
            continue
        lo, hi = _INT_LIMITS[e.ctype]
        hint = ("Fix: declare the extra with dtype='int64' and take it as long long / int64_t in the kernel."
                if e.ctype in ("i32", "u32") else "")  # fmt: skip
        L += [f"    if _x{k} > {hi}: raise _E.value({e.name!r}, _x{k}, {e.ctype!r}, {hint!r})"]
        values.append(f"_x{k}")
    values += [f"{o}.data_ptr()" for o in outs]
    # Launch expressions reuse the numels read above.
    known = {f"{n}.numel()": v for n, v in numel.items()}
    known.update({f"{o}.numel()": v for o, v in zip(outs, onumel, strict=True) if v.startswith("_n")})
    if variants.simple and record.launch is not None:
        _inline_simple(L, g, record, variants, refs, values, ret, known)
    else:
        _variant_launch(L, g, record, variants, refs, values, ret, tnames, outs, mutated, custom_takes_config, known)
    L += [f"    return {ret}"]
    # In a child forked after CUDA use, PyTorch's allocation fails with a bare "initialization error" before
    # the launcher's own check; the handler (free until something raises) names the cause and the fix.
    from .launch import forked_error, in_forked_child

    g.update({"_in_forked": in_forked_child, "_forked_error": forked_error})
    L = [
        L[0],
        "    try:",
        *("    " + line for line in L[1:]),
        "    except RuntimeError as _x:",
        "        if _in_forked(): raise _forked_error(_op) from _x",
        "        raise",
    ]
    src = "\n".join(L) + "\n"
    scope: dict[str, object] = {}
    exec(compile(src, f"<opsmith eager {record.op_name}>", "exec"), g, scope)
    return scope["impl"], src  # type: ignore[return-value]


def _shape_guards(targs: tuple, tnames: list[str]) -> list[str]:
    """Declared exact shapes, checked after every tensor's rank (a reference reads another input's size)."""
    lines = []
    for a in targs:
        if a.shape is None:
            continue
        n = a.name
        want = [str(e) if isinstance(e, int) else f"{tnames[e[0]]}.shape[{e[1]}]" for e in a.shape]
        conds = [f"{n}.dim() != {len(want)}"] + [f"{n}.shape[{i}] != {w}" for i, w in enumerate(want)]
        lines.append(f"    if {' or '.join(conds)}: raise _E.shape({n!r}, {n}, ({', '.join(want)},))")
    return lines


def _reuse(expr: str, known: dict[str, str]) -> str:
    for call, var in known.items():
        expr = expr.replace(call, var)
    return expr


def _inline_simple(L: list, g: dict, record: KernelRecord, variants: Variants, refs: dict, values: list,
                   ret: str, known: dict[str, str]) -> None:  # fmt: skip
    """One kernel and a declarative geometry: DeviceKernel.launch inlined for the current device (another
    device takes the method, which switches the device)."""
    kernel = variants.first
    assert kernel is not None and record.launch is not None
    block = ", ".join(str(b) for b in kernel.block)
    smem = kernel.shared_mem
    gl = [_reuse(to_python(x, refs), known) for x in record.launch.grid]
    g.update(kernel.fast_path_globals())
    L += [f"    _g0, _g1, _g2 = {', '.join(gl)}",
          "    _f = _fns.get(_dev)",
          "    if _f is None: _f = _kfn(_dev)",
          f"    if _dev != _curdev(): _launch(_dev, _g0, _g1, _g2, {block}, {smem}, {', '.join(values)}); return {ret}",
          "    _b, _a = _P.v",
          f"    _pack(_b, 0, {', '.join(values)})",
          "    _s = _raw(_dev)",
          "    _cs = _streams.get(_s)",
          "    if _cs is None: _cs = _mkstream(_s)",
          f"    _e = _cu(_f, _g0, _g1, _g2, {block}, {smem}, _cs, _a, 0)[0]",
          f"    if _e: _e = _retry(_e, _dev, lambda: _cu(_f, _g0, _g1, _g2, {block}, {smem}, _cs, _a, 0))",
          f"    if _e: _fail(_e, _dev, (_g0, _g1, _g2), ({block}), {smem})"]  # fmt: skip


def _variant_launch(L: list, g: dict, record: KernelRecord, variants: Variants, refs: dict, values: list, ret: str,
                    tnames: list, outs: list, mutated: list, custom_takes_config: bool,
                    known: dict[str, str]) -> None:  # fmt: skip
    """Several kernels: pick the config (tuned) and the specialization (Triton), then launch that kernel."""
    from .launch import _STREAMS, _current_device, _raw_stream, _stream_handle, retry_launch

    g.update({"_fast": variants.fast, "_entry": variants.entry, "_run": variants.run, "_grids": variants.grids,
              "_pack": variants.pack, "_P": variants.params,
              "_raw": _raw_stream, "_streams": _STREAMS, "_mkstream": _stream_handle, "_curdev": _current_device,
              "_retry": retry_launch, "_params": [c["params"] for c in record.configs], "_fixed": record.flavor == "triton"})  # fmt: skip
    from cuda.bindings.driver import cuLaunchKernel

    g["_cu"] = cuLaunchKernel
    # Pointers once, into locals: the specialization reads their alignment and the launch passes them.
    ptr_locals = {}
    for k, v in enumerate(values):
        if v.endswith(".data_ptr()"):
            L += [f"    _p{k} = {v}"]
            ptr_locals[k] = f"_p{k}"
    vals = [ptr_locals.get(k, v) for k, v in enumerate(values)]
    spec = []
    for kind, p in variants.spec_layout:
        if kind == "dtype":
            spec.append(f"{tnames[p]}.dtype")
        elif kind == "align":
            spec.append(f"{vals[p]} & 15 == 0")
        else:
            spec.append(f"{vals[p]} % 16 == 0")
    L += [f"    _sk = ({', '.join(spec)}{',' if spec else ''})"]
    args = ", ".join(tnames + outs)
    ins = "{" + ", ".join(f"{a.name!r}: {a.name}" for a in record.inputs) + "}"
    onames = "{" + ", ".join(f"{o.name!r}: _o{k}" for k, o in enumerate(record.outputs)) + "}"
    if record.launch is not None:
        geo = f"_grids[@C@]({args})"
    else:
        cfg = ", _params[@C@]" if custom_takes_config else ""
        geo = f"_norm(_op, _custom({ins}, {onames}{cfg}), _fixed)"
    if record.tuned:
        g["_chosen"] = variants.tuner.decisions  # type: ignore[union-attr]
        g["_decide"] = variants.tuner.decide  # type: ignore[union-attr]
        dtype_refs = tnames
        tk = key_to_python(record.tune_key, refs, dtype_refs)
        L += [f"    _tk = {tk}",
              "    _c = _chosen.get(_tk)",
              f"    if _c is None: _c = _decide(_tk, _dev, lambda c: _run(c, _sk, _dev, {geo.replace('@C@', 'c')}, "
              f"({', '.join(vals)},)), ({', '.join(mutated)}{',' if mutated else ''}), "
              f"({', '.join(outs)}{',' if outs else ''}))"]  # fmt: skip
        L += ["    _vk = (_c, _sk)", "    _v = _fast.get(_vk)", "    if _v is None: _v = _entry(_vk)"]
    else:
        L += ["    _v = _fast.get(_sk)", "    if _v is None: _v = _entry(_sk)"]
    if variants.c_launched:  # Triton: its own C launcher takes every kernel parameter in order
        grid = (", ".join(_reuse(to_python(x, refs), known) for x in record.launch.grid)
                if record.launch is not None and not record.tuned else geo.replace("@C@", "_c" if record.tuned else "0"))  # fmt: skip
        raw = [v[len("_bf16(") : -1] if v.startswith("_bf16(") else v for v in vals]  # it packs floats itself
        targs = ", ".join("None" if k is None else raw[k] for k in variants.sources[0].launcher_slots())  # type: ignore[attr-defined]
        L += [f"    _g0, _g1, _g2 = {grid}",
              "    _hs, _tl, _md, _kd = _v",
              "    _h = _hs.get(_dev)",
              "    if _h is None: _h = _kd.handle(_dev)",
              "    if _tl is None or _dev != _curdev(): "
              f"_kd.launch(_dev, _g0, _g1, _g2, *_kd.block, _kd.shared_mem, {', '.join(vals)}); return {ret}",
              f"    try: _tl(_g0, _g1, _g2, _raw(_dev), _h, False, False, None, None, _md, None, None, None, {targs})",
              "    except RuntimeError as _x: _kd.fail_c(_x, _dev, (_g0, _g1, _g2))"]  # fmt: skip
        return
    if record.launch is not None and not record.tuned:  # one plan: its grid inline
        L += [f"    _g0, _g1, _g2 = {', '.join(_reuse(to_python(x, refs), known) for x in record.launch.grid)}",
              "    _fns, _b0, _b1, _b2, _sm, _kd = _v"]  # fmt: skip
    elif record.launch is not None:  # the plan knows its block
        L += [f"    _g0, _g1, _g2 = {geo.replace('@C@', '_c' if record.tuned else '0')}",
              "    _fns, _b0, _b1, _b2, _sm, _kd = _v"]  # fmt: skip
    else:  # a Custom geometry gives the block per call
        L += [f"    _g0, _g1, _g2, _b0, _b1, _b2, _sm = {geo.replace('@C@', '_c' if record.tuned else '0')}",
              "    _fns = _v[0]",
              "    _kd = _v[5]"]  # fmt: skip
    L += ["    _f = _fns.get(_dev)",
          "    if _f is None: _f = _kd.function(_dev)",
          f"    if _dev != _curdev(): _kd.launch(_dev, _g0, _g1, _g2, _b0, _b1, _b2, _sm, {', '.join(vals)}); "
          f"return {ret}",
          "    _b, _a = _P.v",
          f"    _pack(_b, 0, {', '.join(vals)})",
          "    _s = _raw(_dev)",
          "    _cs = _streams.get(_s)",
          "    if _cs is None: _cs = _mkstream(_s)",
          "    _e = _cu(_f, _g0, _g1, _g2, _b0, _b1, _b2, _sm, _cs, _a, 0)[0]",
          "    if _e: _e = _retry(_e, _dev, lambda: _cu(_f, _g0, _g1, _g2, _b0, _b1, _b2, _sm, _cs, _a, 0))",
          "    if _e: _kd._fail(_e, _dev, (_g0, _g1, _g2), (_b0, _b1, _b2), _sm)"]  # fmt: skip
