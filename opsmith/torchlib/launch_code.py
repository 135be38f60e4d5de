"""The launch part of the generated eager code (``eager.py``): the plan's ``Launch`` printed for Python.

A plain op's launch is inlined; a tuned or specialized op chooses its config and variant first; a Triton
kernel goes through Triton's own C launcher; a ``Custom`` geometry or a CuTe DSL host function launches its
own way; the dry run records the launch instead. Grids are computed and checked as the plan says, for the
config that launches (tuning's trial launches included).

Lines are returned without indentation; ``eager.py`` places them in the function body.
"""

from __future__ import annotations

from typing import Any

from ..flavors.base import UNIT, scalar_key
from .variants import Variants

__all__ = ["custom_launch", "dry_launch", "inline_simple", "variant_launch"]


def smem_per_call(pr: Any) -> bool:
    """Whether the shared memory is a size expression, computed per call with the grid (``_sm``)."""
    return any(not isinstance(s, int) for s in pr.plan.launch.shared_mem)


def _grid_functions(pr: Any) -> str:
    """One function per config computing its checked grid from the call's locals (tuned ops): the hot path
    calls the chosen config's, tuning calls each config's for its trial launch. Returns the call's text with
    ``@C@`` for the config index. With shared memory per call, each returns (grid, block, shared memory), the
    launch a ``Custom`` geometry gives."""
    plan = pr.plan
    n_t, n_o = len(pr.t), len(plan.outputs)
    params = [*pr.t, *(f"_o{k}" for k in range(n_o)), *(f"_n{k}" for k in range(n_t)), "_dev"]
    fns = []
    for c in range(len(plan.launch.grids)):
        body = pr.grid(c)
        if smem_per_call(pr):
            sm = "_sm" if not isinstance(plan.launch.shared_mem[c], int) else str(plan.launch.shared_mem[c])
            ret = f"    return _g0, _g1, _g2, {', '.join(map(str, plan.launch.blocks[c]))}, {sm}"
        else:
            ret = "    return _g0, _g1, _g2"
        src = "\n".join([f"def _grid{c}({', '.join(params)}):", *("    " + x for x in body), ret])
        scope: dict[str, Any] = {}
        exec(compile(src, f"<opsmith grid {plan.op} config {c}>", "exec"), pr.g, scope)
        fns.append(scope[f"_grid{c}"])
        pr.sources.append(src)
    pr.g["_gridf"] = fns
    return f"_gridf[@C@]({', '.join(params)})"


def _pointer_locals(pr: Any) -> tuple[list[str], list[str]]:
    """Pointers read once into locals (the specialization reads their alignment, the launch passes them)."""
    values, L, vals = pr.values(), [], []
    for k, v in enumerate(values):
        if v.endswith(".data_ptr()"):
            L.append(f"_p{k} = {v}")
            vals.append(f"_p{k}")
        else:
            vals.append(v)
    return L, vals


def _spec(pr: Any, variants: Variants, vals: list[str]) -> list[str]:
    spec = []
    for kind, p in variants.spec_layout:
        if kind == "dtype":
            spec.append(pr.dtype_of(p))
        elif kind == "none":  # kernel parameter p's optional tensor is None: compiled in (Triton)
            role, k = pr.plan.launch.params[p].source
            spec.append(f"{pr.t[k] if role == 'in' else f'_o{k}'} is None")
        elif kind == "align":
            spec.append(f"{vals[p]} & 15 == 0")
        elif kind == "static":
            spec.append(pr.refs[f"x{p}"])
        elif kind == "scalar":  # a scalar compiled in: its key (a float's bits)
            pr.g["_scalar_key"] = scalar_key
            spec.append(f"_scalar_key({pr.record.inputs[p].py_type!r}, {pr.args[p]})")
        elif kind == "heur":
            spec.append(_heuristic(pr, p))
        elif kind == "wide":  # an int scalar outside int32: compiled as i64 (Triton)
            spec.append(f"not -2147483648 <= {vals[p]} <= 2147483647")
        else:  # "int": UNIT when 1, else divisibility by 16
            spec.append(f"({UNIT} if {vals[p]} == 1 else {vals[p]} % 16 == 0)")
    return [f"_sk = ({', '.join(spec)}{',' if spec else ''})"]


def _heuristic(pr: Any, h: int) -> str:
    """A heuristic's value; one per distinct expression where configs differ (``Variants`` picks the launched
    config's): computing them all keeps the specialization one tuple, computed before the config is chosen."""
    name = pr.record.heuristics[h]["name"]
    exprs = [pr.expr(e, (name, f"the heuristic for the constexpr {name}")) for e in pr.plan.launch.heuristics[h]]
    return exprs[0] if len(exprs) == 1 else f"({', '.join(exprs)})"


def _tune_key(pr: Any) -> str:
    parts = [pr.dtype_of(k) for k in range(len(pr.t))]
    for expr, pow2 in pr.plan.launch.tune_key:
        v = pr.expr(expr)
        parts.append(f"_pow2({v})" if pow2 else v)
    return "(" + ", ".join(parts) + ",)"


def _outs(pr: Any) -> tuple[str, str]:
    outs = [f"_o{k}" for k in range(len(pr.plan.outputs))]
    # Outputs with an ``init`` are read by the kernel (it accumulates): tuning restores them between runs too.
    mutated = [
        f"*(() if {pr.t[k]} is None else ({pr.t[k]},))" if k in pr.plan.optional else pr.t[k] for k in pr.plan.mutated
    ] + [f"_o{k}" if o.when is None else f"*(() if _o{k} is None else (_o{k},))"
         for k, o in enumerate(pr.record.outputs) if o.init is not None]  # fmt: skip
    return f"({', '.join(mutated)}{',' if mutated else ''})", f"({', '.join(outs)}{',' if outs else ''})"


def inline_simple(pr: Any, variants: Variants) -> list[str]:
    """One kernel and a declarative geometry: DeviceKernel.launch inlined for the current device (another
    device takes the method, which switches the device)."""
    kernel = variants.first
    assert kernel is not None
    block = ", ".join(str(b) for b in kernel.block)
    smem = "_sm" if smem_per_call(pr) else kernel.shared_mem
    vals = pr.values()
    ret = pr.ret()
    pr.g.update(kernel.fast_path_globals())
    return [*pr.grid(0), *pr.skip_empty_grid(),
            "_f = _fns.get(_dev)",
            "if _f is None: _f = _kfn(_dev)",
            f"if _dev != _curdev(): _launch(_dev, _g0, _g1, _g2, {block}, {smem}, {', '.join(vals)}); return {ret}",
            "_pb, _pa = _P.v",
            f"_pack(_pb, 0, {', '.join(vals)})",
            "_s = _raw(_dev)",
            "_cs = _streams.get(_s)",
            "if _cs is None: _cs = _mkstream(_s)",
            f"_err = _cu(_f, _g0, _g1, _g2, {block}, {smem}, _cs, _pa, 0)[0]",
            f"if _err: _err = _retry(_err, _dev, lambda: _cu(_f, _g0, _g1, _g2, {block}, {smem}, _cs, _pa, 0))",
            f"if _err: _fail(_err, _dev, (_g0, _g1, _g2), ({block}), {smem})"]  # fmt: skip


def _launch_globals(pr: Any, variants: Variants) -> None:
    from cuda.bindings.driver import cuLaunchKernel

    from ..flavors.launch import _STREAMS, _current_device, _raw_stream, _stream_handle, retry_launch

    pr.g.update({"_fast": variants.fast, "_entry": variants.entry, "_run": variants.run, "_pack": variants.pack,
                 "_P": variants.params, "_raw": _raw_stream, "_streams": _STREAMS, "_mkstream": _stream_handle,
                 "_curdev": _current_device, "_retry": retry_launch, "_cu": cuLaunchKernel,
                 "_params": [c["params"] for c in pr.record.configs], "_fixed": pr.record.flavor == "triton"})  # fmt: skip


def _choose(pr: Any, variants: Variants, vals: list[str], geo: str) -> list[str]:
    """The config (tuned: the decision, tuning on a miss with ``geo`` as each config's launch) and the variant."""
    if not pr.record.tuned:
        return ["_v = _fast.get(_sk)", "if _v is None: _v = _entry(_sk)"]
    pr.g["_chosen"] = variants.tuner.decisions  # type: ignore[union-attr]
    pr.g["_decide"] = variants.tuner.decide  # type: ignore[union-attr]
    mutated, outs = _outs(pr)
    named = f", lambda: {_named_args(pr)}" if variants.tuner.prune is not None else ""  # type: ignore[union-attr]
    return [f"_tk = {_tune_key(pr)}",
            "_c = _chosen.get(_tk)",
            f"if _c is None: _c = _decide(_tk, _dev, lambda c: _run(c, _sk, _dev, {geo.replace('@C@', 'c')}, "
            f"({', '.join(vals)},)), {mutated}, {outs}{named})",
            "_vk = (_c, _sk)", "_v = _fast.get(_vk)", "if _v is None: _v = _entry(_vk)"]  # fmt: skip


def _named_args(pr: Any) -> str:
    """(the kernel's runtime arguments by parameter name, its constexprs bound by extras): what
    ``prune_configs_by`` receives, as under Triton's autotuner (tensors as tensors)."""
    items = []
    for p, rp in zip(pr.plan.launch.params, pr.record.params, strict=True):
        kind, i = p.source
        v = pr.t[i] if kind == "in" else f"_o{i}" if kind == "out" else pr.args[i] if kind == "scalar" \
            else pr.refs[f"x{i}"]  # fmt: skip
        items.append(f"{rp.name!r}: {v}")
    static = [f"{pr.record.extras[k].name!r}: {pr.refs[f'x{k}']}" for k in pr.record.static_extras]
    return f"({{{', '.join(items)}}}, {{{', '.join(static)}}})"


def variant_launch(pr: Any, variants: Variants) -> list[str]:
    """Several kernels: pick the config (tuned) and the specialization (dtypes, alignment, values compiled
    in), then launch that kernel."""
    _launch_globals(pr, variants)
    L, vals = _pointer_locals(pr)
    L += _spec(pr, variants, vals)
    geo = _grid_functions(pr) if pr.record.tuned else "(_g0, _g1, _g2)"
    L += _choose(pr, variants, vals, geo)
    per_call = smem_per_call(pr)
    geo_now = geo.replace("@C@", "_c")
    grid = [f"_g0, _g1, _g2{', _, _, _, _sm' if per_call else ''} = {geo_now}"] if pr.record.tuned else pr.grid(0)
    grid += pr.skip_empty_grid()
    ret = pr.ret()
    if variants.c_launched:  # Triton: its own C launcher takes every kernel parameter in order
        raw = [v[len("_bf16(") : -1] if v.startswith("_bf16(") else v for v in vals]  # it packs floats itself
        targs = ", ".join("None" if k is None else raw[k] for k in variants.sources[0].launcher_slots())  # type: ignore[attr-defined]
        return [*L, *grid,
                "_hs, _tl, _md, _kd = _v",
                "_h = _hs.get(_dev)",
                "if _h is None: _h = _kd.handle(_dev)",
                "if _tl is None or _dev != _curdev(): "
                f"_kd.launch(_dev, _g0, _g1, _g2, *_kd.block, _kd.shared_mem, {', '.join(vals)}); return {ret}",
                f"try: _tl(_g0, _g1, _g2, _raw(_dev), _h, False, False, None, None, _md, None, None, None, {targs})",
                "except RuntimeError as _x: _kd.fail_c(_x, _dev, (_g0, _g1, _g2))"]  # fmt: skip
    return [*L, *grid, f"_fns, _b0, _b1, _b2, {'_' if per_call else '_sm'}, _kd = _v", *_driver_launch(vals, ret)]


def _driver_launch(vals: list[str], ret: str) -> list[str]:
    return ["_f = _fns.get(_dev)",
            "if _f is None: _f = _kd.function(_dev)",
            f"if _dev != _curdev(): _kd.launch(_dev, _g0, _g1, _g2, _b0, _b1, _b2, _sm, {', '.join(vals)}); "
            f"return {ret}",
            "_pb, _pa = _P.v",
            f"_pack(_pb, 0, {', '.join(vals)})",
            "_s = _raw(_dev)",
            "_cs = _streams.get(_s)",
            "if _cs is None: _cs = _mkstream(_s)",
            "_err = _cu(_f, _g0, _g1, _g2, _b0, _b1, _b2, _sm, _cs, _pa, 0)[0]",
            "if _err: _err = _retry(_err, _dev, lambda: _cu(_f, _g0, _g1, _g2, _b0, _b1, _b2, _sm, _cs, _pa, 0))",
            "if _err: _kd._fail(_err, _dev, (_g0, _g1, _g2), (_b0, _b1, _b2), _sm)"]  # fmt: skip


def custom_launch(pr: Any, variants: Variants, custom: Any, takes_config: bool) -> list[str]:
    """A ``Custom`` geometry (its launch from Python per call, checked by ``_norm_geo``) or a CuTe DSL host
    function (it launches its kernels itself)."""
    from ..plan.guards import check_extent, norm_geo

    _launch_globals(pr, variants)
    pr.g.update({"_custom": custom, "_norm": norm_geo, "_extent": check_extent})
    ins = "{" + ", ".join(f"{n!r}: {v}" for n, v in zip(pr.plan.names, pr.args, strict=True)) + "}"
    onames = "{" + ", ".join(f"{o!r}: _o{k}" for k, o in enumerate(pr.plan.outputs)) + "}"
    if variants.host_launched:
        geo = "()"
    else:
        cfg = ", _params[@C@]" if takes_config else ""
        least = ", 0" if pr.plan.launch.empty_ok else ""
        geo = f"_norm(_op, _custom({ins}, {onames}{cfg}), _fixed, {pr.tn[0]!r}{least})"
        if pr.record.index_dtype == "int32" and pr.record.flavor != "triton":
            geo = f"_extent(_op, _E, {geo}, {pr.tn[0]!r})"
    L: list[str] = []
    early = not pr.record.tuned and not variants.host_launched
    if early:  # a Custom geometry's mistakes (a float grid, too many threads) refused before a pointer is read
        L.append(f"_geo = {geo.replace('@C@', '0')}")
        geo = "_geo"
    pl, vals = _pointer_locals(pr)
    L += pl + _spec(pr, variants, vals) + _choose(pr, variants, vals, geo)
    if variants.host_launched:
        return [*L, f"_v.launch(_dev, {', '.join(vals)})"]
    c = "_c" if pr.record.tuned else "0"
    geo_now = geo.replace("@C@", c)
    # every output holds its init: an empty grid launches nothing
    empty = [f"if 0 in _g: return {pr.ret()}"] if pr.plan.launch.empty_ok else []
    if variants.c_launched:
        raw = [v[len("_bf16(") : -1] if v.startswith("_bf16(") else v for v in vals]
        targs = ", ".join("None" if k is None else raw[k] for k in variants.sources[0].launcher_slots())  # type: ignore[attr-defined]
        return [*L, f"_g = _g0, _g1, _g2 = {geo_now}", *empty,
                "_hs, _tl, _md, _kd = _v",
                "_h = _hs.get(_dev)",
                "if _h is None: _h = _kd.handle(_dev)",
                "if _tl is None or _dev != _curdev(): "
                f"_kd.launch(_dev, _g0, _g1, _g2, *_kd.block, _kd.shared_mem, {', '.join(vals)}); return {pr.ret()}",
                f"try: _tl(_g0, _g1, _g2, _raw(_dev), _h, False, False, None, None, _md, None, None, None, {targs})",
                "except RuntimeError as _x: _kd.fail_c(_x, _dev, (_g0, _g1, _g2))"]  # fmt: skip
    return [*L, f"_g0, _g1, _g2, _b0, _b1, _b2, _sm = {geo_now}", "_g = _g0, _g1, _g2", *empty,
            "_fns = _v[0]", "_kd = _v[5]",
            *_driver_launch(vals, pr.ret())]  # fmt: skip


# -- the dry run ---------------------------------------------------------------------------------------------


def fnv1a64(data: bytes) -> str:
    """A kernel image's identity both the Python and the C++ dry run can compute (C++ has no sha256)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def dry_launch(pr: Any, variants: Variants) -> list[str]:
    """The launch recorded, not made: the config (the tuning decision, never tuned), the kernel, the grid as
    the plan computes and checks it, the variant's block and shared memory, the packed argument bytes."""
    record = pr.record
    launches: list[dict] = []
    idents: dict[tuple, str] = {}

    def rec(c: int, spec: tuple, grid: tuple, values: tuple, smem: int | None = None) -> None:
        if variants.host_launched:  # a CuTe DSL host function: it decides its own launches
            launches.append({"config": c, "symbol": record.kernel_name, "spec": [str(v) for v in spec],
                             "args": [v if isinstance(v, int | float) else str(v) for v in values]})  # fmt: skip
            return
        kd = variants.kernel(c, spec)
        binary = kd.binary_for(record.arch)
        ident = idents.get((c, spec))
        if ident is None:
            ident = idents[(c, spec)] = fnv1a64(binary.data)
        launches.append({"config": c, "symbol": binary.symbol, "image": ident, "grid": list(grid),
                         "block": list(kd.block), "shared_mem": kd.shared_mem if smem is None else smem,
                         "args": kd.argument_bytes(values).hex()})  # fmt: skip

    pr.g.update({"_launches": launches, "_rec": rec, "_default": record.tune_default,
                 "_chosen": variants.tuner.decisions if variants.tuner else {}})  # fmt: skip
    L, vals = _pointer_locals(pr)
    L += _spec(pr, variants, vals)
    if variants.host_launched:  # no grid of ours to compute or check
        L += [f"_tk = {_tune_key(pr)}" if record.tuned else "", "_c = _chosen.get(_tk, _default)" if record.tuned
              else "_c = 0", "_g0 = _g1 = _g2 = 0"]  # fmt: skip
        L = [x for x in L if x]
    elif record.tuned:
        geo = _grid_functions(pr)
        L += [f"_tk = {_tune_key(pr)}", "_c = _chosen.get(_tk, _default)",
              f"_g0, _g1, _g2{', _, _, _, _sm' if smem_per_call(pr) else ''} = {geo.replace('@C@', '_c')}"]  # fmt: skip
    else:
        L += ["_c = 0", *pr.grid(0)]
    if not variants.host_launched:
        L += pr.skip_empty_grid()
    sm = ", _sm" if not variants.host_launched and smem_per_call(pr) else ""
    return [*L, f"_rec(_c, _sk, (_g0, _g1, _g2), ({', '.join(vals)},){sm})"]
