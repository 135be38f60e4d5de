"""The eager implementation: the call plan (``plan/steps.py``) printed as one flat Python function per op.

Every decision was made when the plan was lowered; this module only prints its steps, so a call pays for the
checks the plan kept and nothing else. The source is kept on the op as ``impl_source`` for reading.

Two entries share that body: ``impl`` for the CUDA (and CPU) dispatch keys, and, for ops that declare no
backward, ``impl_autograd`` for the Autograd key: plain CUDA tensors outside a graph run the body directly
(one Python crossing); a call that builds a graph goes through a node that refuses to be differentiated
(``autograd.py``); anything else (fake, functional, subclass tensors, dispatch modes, meta or CPU tensors) is
redispatched below autograd to its own kernel.

``make_dry_run`` prints the same plan with the launch replaced by a record of it (config, kernel, grid,
block, shared memory, the packed argument bytes) and CPU tensors accepted: the differential tests compare
that record with the native library's, built the same way (``-DOPSMITH_DRY_RUN``), on a machine without GPU.
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from typing import Any

import torch

from ..declare.expr import EXPR_GLOBALS, Where, to_python
from ..declare.limits import init_fits
from ..declare.record import KernelRecord, dtype_from_name
from ..plan import steps as P
from ..plan.guards import Refusals, bf16_bits, out_shape, span
from ..plan.layout import addressable, share_strides
from .launch_code import custom_launch, dry_launch, inline_simple, variant_launch
from .variants import Variants

__all__ = ["checks_of", "locals_for", "make_checks", "make_dry_run", "make_eager"]

_GLOBALS_USED = {"torch"}


def locals_for(names: tuple[str, ...]) -> list[str]:
    """Python locals for the op's arguments: the declared names, but a name that could meet a generated local
    (they all start with ``_``) or a global the code uses becomes ``_u<position>``."""
    return [n if not n.startswith("_") and n not in _GLOBALS_USED and not keyword.iskeyword(n) else f"_u{k}"
            for k, n in enumerate(names)]  # fmt: skip


class _Printer:
    """Prints one plan; ``g`` collects the globals the code needs, ``refs`` maps expression refs to locals."""

    def __init__(self, plan: P.CallPlan, record: KernelRecord, dry: bool) -> None:
        self.plan, self.record, self.dry = plan, record, dry
        self.args = locals_for(plan.names)
        self.t = [self.args[p] for p in plan.tensors]  # tensor locals, by tensor index
        self.tn = plan.tensor_names
        self.g: dict[str, Any] = {**EXPR_GLOBALS, "torch": torch, "_E": Refusals(plan.op), "_op": plan.op,
                                  "_out_shape": out_shape, "_fits": addressable, "_share": share_strides,
                                  "_span": span, "_bf16": bf16_bits}  # fmt: skip
        self.refs = {f"i{k}": v for k, v in enumerate(self.t)} | {f"o{k}": f"_o{k}" for k in range(len(plan.outputs))}
        self.refs |= {f"n{k}": f"_n{k}" for k in range(len(self.t))} | {"sm_count": "_sms(_dev)"}
        self.refs |= {f"x{k}": f"_x{k}" for k in range(len(record.extras))}
        self.refs |= {f"s{p}": self.args[p] for p in record.int_scalars}  # a heuristic over a scalar's value
        self.where_n = 0
        self.sources: list[str] = []  # functions printed besides the body (a tuned op's grids), for reading

    def expr(self, e: Any, where: tuple[str, str] | None = None, wide: bool = False, early: bool = False) -> str:
        """``early``: evaluated before the empty-tensor steps (sizes may be 0)."""
        name = None
        if where is not None:
            name = f"_W{self.where_n}"
            self.where_n += 1
            self.g[name] = Where(self.plan.op, *where)
        return to_python(e, self.refs, checked=name, wide=wide, facts=self.plan.early if early else self.plan.facts)

    def steps(self) -> list[str]:
        L: list[str] = []
        block = None  # the optional tensor's condition the last lines are under
        for s in self.plan.steps:
            lines = getattr(self, type(s).__name__.lower())(s)
            about = self.plan.about(s)
            if about and lines:  # an optional tensor's checks run when the call gave it
                cond = " and ".join(f"{self.t[k]} is not None" for k in about)
                head = f"if {cond}:"
                if block == head:  # the same tensor's next check: one block
                    L += ["    " + x for x in lines]
                    continue
                lines, block = [head, *("    " + x for x in lines)], head
            else:
                block = None
            L += lines
        return L

    def numel_of(self, k: int) -> str:
        """Tensor k's numel; 0 for an optional input the call passed as None."""
        t = self.t[k]
        return f"({t}.numel() if {t} is not None else 0)" if k in self.plan.optional else f"{t}.numel()"

    def ptr_of(self, k: int) -> str:
        """Tensor k's data pointer; for an optional input passed as None, 0, or where it is declared
        ``absent="dummy"`` the first tensor input's (never read)."""
        t = self.t[k]
        if k not in self.plan.optional:
            return f"{t}.data_ptr()"
        dummy = f"{self.t[0]}.data_ptr()" if self.record.tensor_inputs[k].absent == "dummy" else "0"
        return f"({t}.data_ptr() if {t} is not None else {dummy})"

    def dtype_of(self, k: int) -> str:
        t = self.t[k]
        return f"({t}.dtype if {t} is not None else None)" if k in self.plan.optional else f"{t}.dtype"

    def given(self, s: P.Given) -> list[str]:
        return [f"if {self.t[s.k]} is None: raise _E.missing({self.tn[s.k]!r})"]

    def device(self, s: P.Device) -> list[str]:
        t, n = self.t[s.k], self.tn[s.k]
        if s.k == 0:
            return [f"_dev = {t}.get_device()"] + (
                [] if self.dry else [f"if _dev < 0: raise _E.device({n!r}, {t}, None, -1)"]
            )
        return [f"if {t}.get_device() != _dev: raise _E.device({n!r}, {t}, {self.tn[0]!r}, _dev)"]

    def dtype(self, s: P.Dtype) -> list[str]:
        t, n = self.t[s.k], self.tn[s.k]
        if isinstance(s.dtype, tuple):  # a declared set
            self.g[f"_dt{s.k}"] = tuple(dtype_from_name(d) for d in s.dtype)
            return [f"if {t}.dtype not in _dt{s.k}: raise _E.dtype_in({n!r}, {t}, _dt{s.k})"]
        self.g[f"_dt{s.k}"] = dtype_from_name(s.dtype)
        return [f"if {t}.dtype is not _dt{s.k}: raise _E.dtype({n!r}, {t}, _dt{s.k})"]

    def rank(self, s: P.Rank) -> list[str]:
        t, n = self.t[s.k], self.tn[s.k]
        cond = f"{t}.dim() != {s.exact}" if s.exact is not None else f"{t}.dim() < {s.least}"
        return [f"if {cond}: raise _E.rank({n!r}, {t}, {s.exact}, {s.least}{f', {s.decl!r}' if s.decl else ''})"]

    def align(self, s: P.Align) -> list[str]:
        t, n = self.t[s.k], self.tn[s.k]
        if s.policy == "make":
            return [f"if {t}.data_ptr() % {s.bytes}: {t} = {t}.clone(memory_format=torch.contiguous_format)"]
        return [f"if {t}.data_ptr() % {s.bytes}: raise _E.align({n!r}, {t}, {s.bytes})"]  # the real pointer

    def numel(self, s: P.Numel) -> list[str]:
        n = self.tn[s.k]
        return [f"_n{s.k} = {self.numel_of(s.k)}"] + (
            [f"if _n{s.k} > {P.INT32_MAX}: raise _E.large({n!r}, _n{s.k})"] if s.narrow else []
        )

    def layout(self, s: P.Layout) -> list[str]:
        t, n = self.t[s.k], self.tn[s.k]
        check = f"not {t}.is_contiguous()" if not s.axes else f"not _fits({t}, {s.axes!r})"
        if s.policy == "make":
            return [f"if {check}: {t} = {t}.contiguous()"]
        return [f"if {check}: raise _E.contiguous({n!r}, {t}, {s.axes!r})"]

    def span(self, s: P.Span) -> list[str]:
        t, n = self.t[s.k], self.tn[s.k]
        return [f"_s = _span({t})", f"if _s > {P.INT32_MAX}: raise _E.span({n!r}, {t}, _s)"]

    def like(self, s: P.Like) -> list[str]:
        t, n, o, on = self.t[s.k], self.tn[s.k], self.t[s.other], self.tn[s.other]
        return [f"if {t}.dtype is not {o}.dtype: raise _E.like({n!r}, {t}, {on!r}, {o}.dtype)"]

    def shape(self, s: P.Shape) -> list[str]:
        conds = [f"{a} != {b}" for a, b in self._ties(s)]
        return [f"if {' or '.join(conds)}: raise {self._shape_error(s)}"]

    def _ties(self, s: P.Shape) -> list[tuple[str, str]]:
        """(this tensor's size or sizes, what the names say) per tie, as Python."""
        t = self.t[s.k]
        out = []
        for axis, want in s.ties:
            if isinstance(axis, tuple):
                out.append((f"{t}.shape[{_slice(axis[1], axis[2])}]", self._want(want)))
            else:
                out.append((f"{t}.shape[{axis}]", self._want(want)))
        return out

    def _want(self, want: Any) -> str:
        if isinstance(want, int):
            return str(want)
        if want[0] == "expr":  # a size expression of the declared shape ("2 * N")
            return self.expr(want[1], want[2], want[3], early=True)
        if want[0] == "size":
            return f"{self.t[want[1]]}.shape[{want[2]}]"
        return f"{self.t[want[1]]}.shape[{_slice(want[2], want[3])}]"

    def _shape_error(self, s: P.Shape) -> str:
        names = ", ".join(f"({n!r}, {self._want(w)}, {f!r})" for n, w, f in s.names)
        return f"_E.shape({self.tn[s.k]!r}, {self.t[s.k]}, {s.decl!r}, [{names}])"

    def shapeof(self, s: P.ShapeOf) -> list[str]:
        t, n, o, on = self.t[s.k], self.tn[s.k], self.t[s.other], self.tn[s.other]
        return [f"if {t}.shape != {o}.shape: raise _E.shape_of({n!r}, {t}, {on!r}, {o})"]

    def require(self, s: P.Require) -> list[str]:
        return [f"_r = {self.expr(s.expr, s.where, s.wide, early=True)}",
                f"if {_refused('_r', s.kind, s.value)}: raise {_require_error(s)}"]  # fmt: skip

    def scalar(self, s: P.Scalar) -> list[str]:
        v, n = self.args[s.pos], self.plan.names[s.pos]
        if s.ctype in P.INT_LIMITS:
            lo, hi = s.lo, s.hi
            return [f"if not {lo} <= {v} <= {hi}: raise _E.value({n!r}, {v}, {s.ctype!r}, '', {lo}, {hi})"]
        m = P.FLOAT_MAX[s.ctype]
        self.g["_inf"] = float("inf")
        return [f"if not {-m!r} <= {v} <= {m!r} and {v} == {v} and abs({v}) != _inf: "
                f"raise _E.float_range({n!r}, {v}, {s.ctype!r})"]  # fmt: skip

    def alloc(self, s: P.Alloc) -> list[str]:
        """Contiguous, on the inputs' device, then filled with its ``init`` where one is declared."""
        L = self._alloc(s)
        if s.init is not None:
            L += self.init_check(s)
            L.append(f"_o{s.k}.zero_()" if s.init == 0 else f"_o{s.k}.fill_({to_python(float(s.init))})")
        return self.requested(s, L)

    def requested(self, s: P.Alloc, lines: list[str]) -> list[str]:
        """An optional output's lines run when the call asked for it (its flag); else it is None."""
        if s.when is None:
            return lines
        return [f"if {self.args[s.when]}:", *("    " + x for x in lines), "else:", f"    _o{s.k} = None"]

    def out_ptr(self, k: int) -> str:
        """Output k's data pointer; 0 (NULL) for an optional output the call did not ask for."""
        if self.record.outputs[k].when is None:
            return f"_o{k}.data_ptr()"
        return f"(_o{k}.data_ptr() if _o{k} is not None else 0)"

    def signature(self) -> str:
        """The generated function's parameters: an optional output's flag has its schema default, since the
        dispatcher leaves trailing defaulted arguments out of a Python kernel's call."""
        return ", ".join(f"{a}=False" if getattr(x, "flag", False) else a
                         for a, x in zip(self.args, self.record.inputs, strict=False))  # fmt: skip

    def init_check(self, s: P.Alloc) -> list[str]:
        """An open dtype must hold the declared init: 2.5 or -inf would be truncated or overflow in an integer
        output, -1 would wrap in uint8."""
        if not s.check_init:
            return []
        self.g["_init_fits"] = init_fits
        v = to_python(float(s.init))  # type: ignore[arg-type]
        return [f"if not _init_fits({v}, str(_o{s.k}.dtype)[6:]): "
                f"raise _E.init({self.tn[s.dtype_from]!r}, {self.plan.outputs[s.k]!r}, {repr(s.init)!r}, _o{s.k}.dtype)"]  # fmt: skip

    def _alloc(self, s: P.Alloc) -> list[str]:
        """An output of its source's dtype is a plain empty_like (passing dtype= costs ~0.25 us more a call)."""
        if s.rule == "meta":
            return self._meta_outputs() if s.k == 0 else []
        src = self.t[s.src]
        fixed = dtype_from_name(s.dtype)
        same_dtype = (s.dtype is None and s.dtype_from == s.src) or (
            s.dtype is not None and self.record.tensor_inputs[s.src].dtype == s.dtype
        )
        if fixed is not None:
            self.g[f"_odt{s.k}"] = fixed
        dt = f"_odt{s.k}" if fixed is not None else f"{self.t[s.dtype_from]}.dtype"
        if s.rule == "shape":
            L = [f"_s{s.k} = {self.out_shape(s)}"]
            if s.narrow:
                L.append(f"if _prod(_s{s.k}) > {P.INT32_MAX}: raise _E.large_out({self.plan.outputs[s.k]!r}, _s{s.k})")
            if s.wide_bytes:
                L.append(f"if _prod(_s{s.k}) * {dt}.itemsize > 9223372036854775807: "
                         f"raise _E.huge_out({self.plan.outputs[s.k]!r}, _s{s.k}, {dt})")  # fmt: skip
            return [*L, f"_o{s.k} = {src}.new_empty(_s{s.k}{'' if same_dtype else f', dtype={dt}'})"]
        if s.rule == "same":
            # A strided input may be non-contiguous here, and empty_like would copy its strides.
            fmt = ", memory_format=torch.contiguous_format" if self.record.tensor_inputs[s.src].strided else ""
            return [f"_o{s.k} = torch.empty_like({src}{fmt})" if same_dtype else
                    f"_o{s.k} = torch.empty_like({src}, dtype={dt}{fmt})"]  # fmt: skip
        return [f"_o{s.k} = {src}.new_empty(_out_shape(_op, {s.dims!r}, {s.keepdim}, {src}, {self.tn[s.src]!r}), "
                f"dtype={dt})"]  # fmt: skip

    def out_shape(self, s: P.Alloc) -> str:
        """A declared output shape as a Python tuple."""
        items = []
        for e in s.entries:
            if e[0] == "int":
                items.append(str(e[1]))
            elif e[0] == "expr":
                items.append(self.expr(e[1], e[2], e[3], early=True))
            else:
                items.append(f"*{self.t[e[1]]}.shape[{_slice(e[2], e[3])}]")
        return f"({', '.join(items)},)" if items else "()"

    def _meta_outputs(self) -> list[str]:
        outs = [f"_o{k}" for k in range(len(self.plan.outputs))]
        L = [f"_r = _meta({', '.join(self.args)})",
             f"{', '.join(outs)}{',' if len(outs) == 1 else ''} = {'(_r,)' if len(outs) == 1 else '_r'}"]  # fmt: skip
        for k, o in enumerate(self.record.outputs):
            self.g[f"_odt{k}"] = dtype_from_name(o.dtype)
            L += [f"_w = _E.meta_out({k}, _o{k}, _dev, _odt{k})", "if _w is not None: raise _w"]
        return L

    def returnifempty(self, s: P.ReturnIfEmpty) -> list[str]:
        return [f"if {' and '.join(f'{self.expr(w)} == 0' for w in s.written)}: return {self.ret()}"]

    def refuseempty(self, s: P.RefuseEmpty) -> list[str]:
        ns = [f"_n{k}" for k in s.tensors]
        names = [self.tn[k] for k in s.tensors]
        written = [f"_o{k}" for k in range(len(self.plan.outputs))] + [self.t[k] for k in self.plan.mutated]
        conds = [f"({self.t[k]} is not None and {n} == 0)" if k in self.plan.optional else f"{n} == 0"
                 for k, n in zip(s.tensors, ns, strict=True)]  # fmt: skip
        return [f"if {' or '.join(conds)}: "
                f"raise _E.empty({names!r}, [{', '.join(ns)}], [{', '.join(written)}])"]  # fmt: skip

    def sharestrides(self, s: P.ShareStrides) -> list[str]:
        vars_ = [self.refs[r] for r in s.refs]
        inputs = [r.startswith("i") for r in s.refs]
        require = [r.startswith("i") and self.record.tensor_inputs[int(r[1:])].contiguous == "require" for r in s.refs]
        labels = [self.plan.labels[r] for r in s.refs]
        return [f"{', '.join(vars_)}, = _share(_op, {labels!r}, [{', '.join(vars_)}], {inputs!r}, {require!r}, "
                f"{s.axis})"]  # fmt: skip

    def extra(self, s: P.Extra) -> list[str]:
        if isinstance(s.expr, list) and s.expr[0] == "var" and s.check is None:
            self.refs[f"x{s.k}"] = self.refs[s.expr[1]]  # a numel read already: no copy
            return []
        L = [f"_x{s.k} = {self.expr(s.expr, s.where, s.wide)}"]
        if s.check is not None:
            lo, hi = s.check
            L += [f"if not {lo} <= _x{s.k} <= {hi}: raise _E.value({s.label!r}, _x{s.k}, {s.ctype!r}, {s.hint!r})"]
        return L

    def extent(self, s: P.Extent) -> list[str]:
        return [f"_e = {self.expr(s.expr, (s.arg, s.label), s.wide)}",
                f"if _e > {s.limit}: raise _E.extent({s.arg!r}, {s.label!r}, _e, {s.limit})"]  # fmt: skip

    def grid(self, c: int) -> list[str]:
        """``_g0, _g1, _g2`` of config ``c``, each checked where the plan says."""
        launch = self.plan.launch
        assert launch is not None and launch.grids[c] is not None
        checks = {g.axis: g for g in launch.grid_checks[c]}
        L, plain = [], {}
        smem = checks.get(P.SMEM_AXIS)
        if smem is not None:  # a size expression: computed and checked with the grid, passed as ``_sm``
            L.append(f"_sm = {self.expr(smem.expr, (smem.arg, smem.label), smem.wide)}")
            if smem.low or smem.high:
                L.append(f"if not 0 <= _sm <= {P.SMEM_MAX}: raise _E.smem({smem.arg!r}, {smem.label!r}, _sm)")
        for axis, e in enumerate(launch.grids[c]):
            chk = checks.get(axis)
            if chk is None:
                plain[f"_g{axis}"] = self.expr(e)
                continue
            L.append(f"_g{axis} = {self.expr(e, (chk.arg, chk.label), chk.wide)}")
            least = 0 if chk.low and launch.empty_ok else 1
            if chk.low or chk.high:
                L.append(f"if not {least} <= _g{axis} <= {P.GRID_MAX[axis]}: "
                         f"raise _E.grid({chk.arg!r}, {chk.label!r}, {axis}, _g{axis}, {least})")  # fmt: skip
        return [*L, f"{', '.join(plain)} = {', '.join(plain.values())}"] if plain else L

    def skip_empty_grid(self) -> list[str]:
        """Where every output holds its init (``Launch.empty_ok``): a grid checked to be empty along an axis
        launches nothing, and the outputs are the answer."""
        axes = sorted(P.empty_axes(self.plan.launch))
        if not axes:
            return []
        return [f"if {' or '.join(f'_g{a} == 0' for a in axes)}: return {self.ret()}"]

    def ret(self) -> str:
        outs = [f"_o{k}" for k in range(len(self.plan.outputs))]
        return "None" if not outs else outs[0] if len(outs) == 1 else "(" + ", ".join(outs) + ")"

    def values(self) -> list[str]:
        """The kernel's runtime arguments in its parameter order (pointers as ints, bf16 as its bits; struct's
        'e' rounds a float to fp16 once)."""
        out = []
        for p in self.plan.launch.params:  # type: ignore[union-attr]
            kind, k = p.source
            if kind == "in":
                out.append(self.ptr_of(k))
            elif kind == "out":
                out.append(self.out_ptr(k))
            elif kind == "scalar":
                out.append(f"_bf16({self.args[k]})" if p.ctype == "bf16" else self.args[k])
            else:
                out.append(self.refs[f"x{k}"])
        return out


def _slice(start: int, after: int) -> str:
    """The axes of a group: from ``start`` to ``after`` axes before the end."""
    return f"{start}:{-after}" if after else f"{start}:"


def _refused(v: str, kind: str, value: Any) -> str:
    """The Python condition under which requirement ``kind`` fails for value ``v``."""
    if kind == "divisible":
        return f"{v} % {value}"
    if kind == "at_most":
        return f"{v} > {value}"
    if kind == "at_least":
        return f"{v} < {value}"
    return f"{v} not in {tuple(value)!r}"


def _require_error(s: P.Require) -> str:
    return f"_E.require({s.arg!r}, {s.label!r}, {s.kind!r}, {s.value!r}, {s.why!r}, _r)"


def _body(pr: _Printer, variants: Variants, custom: Callable | None, takes_config: bool) -> list[str]:
    body = pr.steps()
    ret = pr.ret()
    if pr.dry:
        return [*body, *dry_launch(pr, variants), f"return {ret}"]
    if custom is not None or variants.host_launched or pr.record.launch is None:
        return [*body, *custom_launch(pr, variants, custom, takes_config), f"return {ret}"]
    if variants.simple:
        return [*body, *inline_simple(pr, variants), f"return {ret}"]
    return [*body, *variant_launch(pr, variants), f"return {ret}"]


def make_eager(record: KernelRecord, variants: Variants, plan: P.CallPlan, custom: Callable | None = None,
               custom_takes_config: bool = False, meta_fn: Callable | None = None,
               autograd: dict | None = None) -> tuple[Callable, Callable | None, str]:  # fmt: skip
    """(the CUDA implementation of ``record``, its Autograd-key entry or None, the generated source).
    ``autograd``: for an op without a backward, what the Autograd-key entry needs (``autograd.py``)."""
    pr = _Printer(plan, record, dry=False)
    pr.g["_meta"] = meta_fn
    body = _body(pr, variants, custom, custom_takes_config)
    # In a child forked after CUDA use, PyTorch's allocation fails with a bare "initialization error" before
    # the launcher's own check; the handler (free until something raises) names the cause and the fix.
    from ..flavors.launch import forked_error, in_forked_child

    pr.g.update({"_in_forked": in_forked_child, "_forked_error": forked_error, "_bump": torch._C._increment_version})
    tail = [
        "    except RuntimeError as _x:",
        "        if _in_forked(): raise _forked_error(_op) from _x",
        "        raise",
    ]
    args = ", ".join(pr.args)
    src = [f"def impl({pr.signature()}):", "    try:", *("        " + x for x in body), *tail]
    if autograd is not None:
        pr.g.update(autograd)
        grad = " or ".join(f"({n} is not None and {n}.requires_grad)" if k in plan.optional else f"{n}.requires_grad"
                           for k, n in enumerate(pr.t)) or "False"  # fmt: skip
        mutated = [pr.t[k] for k in plan.mutated]
        refuse = "_refuse_inplace(_op)" if mutated else f"return _nograd({args})"
        # None for a required tensor first (the body's Given steps): the grad test reads each tensor, and an
        # autograd Function given None for a tensor aborts the process
        given = [x for s in plan.steps if isinstance(s, P.Given) for x in pr.given(s)]
        pre = [*given, f"if ({grad}) and _grad_on(): {refuse}",
               f"if _ks.has(_PY) or not _ks.has(_CUDA): return _below(_ks, {args})"]  # fmt: skip
        # An in-place op bumps its tensors' version counters, as the dispatcher's ADInplaceOrView step would
        # (autograd then refuses a backward that reads a tensor this op overwrote).
        if any(k in plan.optional for k in plan.mutated):
            pre += [f"_bump(tuple(_t for _t in ({', '.join(mutated)},) if _t is not None))"]
        elif mutated:
            pre += [f"_bump(({', '.join(mutated)},))"]
        src += [f"def impl_autograd(_ks, {pr.signature()}):", "    try:", *("        " + x for x in pre + body), *tail]
    text = "\n".join(src) + "\n"
    scope: dict[str, object] = {}
    exec(compile(text, f"<opsmith eager {record.op_name}>", "exec"), pr.g, scope)
    return scope["impl"], scope.get("impl_autograd"), "\n\n".join([*pr.sources, text])  # type: ignore[return-value]


def make_dry_run(op: Any) -> tuple[Callable, str]:
    """(the op's call plan printed with the launch recorded instead of made, its source): CPU tensors pass
    the device guard, the tuning decision is looked up (never tuned), and each launch appends
    ``{"config", "symbol", "grid", "block", "shared_mem", "args"}`` to ``impl.launches`` (``args``: the
    packed parameter bytes, hex, pointers marked by ``impl.pointers``)."""
    pr = _Printer(op.plan, op.record, dry=True)
    body = _body(pr, op.variants, None, False)
    text = "\n".join([f"def impl({pr.signature()}):", *("    " + x for x in body)]) + "\n"
    scope: dict[str, Any] = {}
    exec(compile(text, f"<opsmith dry run {op.record.op_name}>", "exec"), pr.g, scope)
    fn = scope["impl"]
    fn.launches = pr.g["_launches"]
    return fn, text


def make_checks(op: Any) -> Callable:
    """The op's call plan run to the launch and not past it: every refusal a launch makes (guards, sizes, grid
    bounds, divisions and overflows in the launch arithmetic), the outputs allocated, nothing compiled, recorded
    or launched. For the paths that run something else in the kernel's place and must refuse what it refuses:
    the CPU reference (on the call's own CPU tensors) and JAX's trace (on meta tensors, dense and aligned as
    XLA's buffers are). Returns the outputs, as the op would."""
    fn, _ = make_dry_run(op)
    fn.__globals__["_rec"] = _record_nothing  # the generated code looks it up per call: a global of its own
    return fn


def _record_nothing(*_: Any) -> None:
    return None


def checks_of(op: Any) -> Callable:
    """``make_checks(op)``, made once per op (the first path that needs it) and kept on the op."""
    fn = op.__dict__.get("_checks")
    if fn is None:
        fn = op.__dict__["_checks"] = make_checks(op)
    return fn
