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

from .errors import InputError
from .fake import out_shape
from .geometry import to_python
from .launch import DeviceKernel, bf16_bits
from .record import KernelRecord, ScalarArg, TensorArg, dtype_from_name

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

    def empty(self, names: list[str], tensors: list[torch.Tensor], outs: list[torch.Tensor]) -> InputError:
        name = next(n for n, t in zip(names, tensors, strict=True) if t.numel() == 0)
        shapes = ", ".join(str(tuple(o.shape)) for o in outs)
        return InputError(self.op, name, "a non-empty tensor, since the outputs are non-empty "
                          f"(shapes {shapes}) and the kernel cannot fill them from no data", "an empty tensor")  # fmt: skip

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


def make_eager(record: KernelRecord, kernel: DeviceKernel, custom: Callable | None = None) -> tuple[Callable, str]:
    """(the CUDA implementation of ``record``, its generated source)."""
    names = [a.name for a in record.inputs]
    tnames = [a.name for a in record.inputs if isinstance(a, TensorArg)]
    refs = {f"i{k}": n for k, n in enumerate(tnames)}
    refs.update({f"o{k}": f"_o{k}" for k in range(len(record.outputs))})
    g: dict[str, object] = {"torch": torch, "_E": _Errors(record.op_name), "_launch": kernel.launch,
                            "_out_shape": out_shape, "_prod": math.prod, "_bf16": bf16_bits,
                            "_norm": _norm_launch, "_custom": custom, "_op": record.op_name}  # fmt: skip
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
    # Outputs: contiguous, on the inputs' device.
    for k, o in enumerate(record.outputs):
        src = o.shape.get("same_as", o.shape.get("reduce"))
        sname = tnames[src]
        fixed = dtype_from_name(o.dtype)
        if fixed is not None:
            g[f"_odt{k}"] = fixed
            dt = f"_odt{k}"
        else:
            dt = f"{tnames[o.dtype_from]}.dtype"
        if "same_as" in o.shape:
            L += [f"    _o{k} = torch.empty_like({sname}, dtype={dt})"]
        else:
            g[f"_rel{k}"] = o.shape
            L += [f"    _o{k} = {sname}.new_empty(_out_shape(_op, _rel{k}, {sname}, {sname!r}), dtype={dt})"]
    outs = [f"_o{k}" for k in range(len(record.outputs))]
    ret = outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"
    # Zero-size: nothing to launch when every output is empty; refuse non-empty outputs from empty inputs.
    L += [f"    if {' and '.join(f'{o}.numel() == 0' for o in outs)}: return {ret}"]
    L += [f"    if {' or '.join(f'{n}.numel() == 0' for n in tnames)}: "
          f"raise _E.empty({tnames!r}, [{', '.join(tnames)}], [{', '.join(outs)}])"]  # fmt: skip
    for k, e in enumerate(record.extras):
        L += [f"    _x{k} = {to_python(e.expr, refs)}"]
        lo, hi = _INT_LIMITS[e.ctype]
        hint = ("Fix: declare the extra with dtype='int64' and take it as long long / int64_t in the kernel."
                if e.ctype in ("i32", "u32") else "")  # fmt: skip
        L += [f"    if _x{k} > {hi}: raise _E.value({e.name!r}, _x{k}, {e.ctype!r}, {hint!r})"]
        values.append(f"_x{k}")
    values += [f"{o}.data_ptr()" for o in outs]
    if record.launch is not None:
        grid = ", ".join(to_python(x, refs) for x in record.launch.grid)
        block = ", ".join(str(b) for b in record.launch.block)
        launch = f"{grid}, {block}, {record.launch.shared_mem}"
    else:
        ins = "{" + ", ".join(f"{n!r}: {n}" for n in names) + "}"
        onames = "{" + ", ".join(f"{o.name!r}: _o{k}" for k, o in enumerate(record.outputs)) + "}"
        L += [f"    _grid, _block, _smem = _norm(_op, _custom({ins}, {onames}))"]
        launch = "*_grid, *_block, _smem"
    if record.launch is not None:
        # Inlined DeviceKernel.launch for the current device; another device takes the method (device guard).
        gl = [to_python(x, refs) for x in record.launch.grid]
        g.update(kernel.fast_path_globals())
        L += [f"    _g0, _g1, _g2 = {', '.join(gl)}",
              "    _f = _fns.get(_dev)",
              "    if _f is None: _f = _kfn(_dev)",
              f"    if _dev != _curdev(): _launch(_dev, _g0, _g1, _g2, {block}, {record.launch.shared_mem}, "
              f"{', '.join(values)}); return {ret}",
              f"    _pack(_P.buf, 0, {', '.join(values)})",
              "    _s = _raw(_dev)",
              "    _cs = _streams.get(_s)",
              "    if _cs is None: _cs = _mkstream(_s)",
              f"    _e = _cu(_f, _g0, _g1, _g2, {block}, {record.launch.shared_mem}, _cs, _P.addr, 0)[0]",
              f"    if _e: _fail(_e, _dev, (_g0, _g1, _g2), ({block}), {record.launch.shared_mem})"]  # fmt: skip
    else:
        L += [f"    _launch(_dev, {launch}, {', '.join(values)})"]
    L += [f"    return {ret}"]
    src = "\n".join(L) + "\n"
    scope: dict[str, object] = {}
    exec(compile(src, f"<opsmith eager {record.op_name}>", "exec"), g, scope)
    return scope["impl"], src  # type: ignore[return-value]
