"""The launch part of the generated eager code (``eager.py``): a plain op's launch inlined, or the choice of
config and specialization for a tuned or specialized op, then the launch of that kernel.

Lines are returned without indentation; ``eager.py`` places them in the function body.
"""

from __future__ import annotations

from .autotune import key_to_python
from .geometry import to_python
from .record import KernelRecord
from .variants import Variants

__all__ = ["inline_simple", "variant_launch"]


def _reuse(expr: str, known: dict[str, str]) -> str:
    for call, var in known.items():
        expr = expr.replace(call, var)
    return expr


def inline_simple(g: dict, record: KernelRecord, variants: Variants, refs: dict, values: list, ret: str,
                  known: dict[str, str]) -> list[str]:  # fmt: skip
    """One kernel and a declarative geometry: DeviceKernel.launch inlined for the current device (another
    device takes the method, which switches the device)."""
    kernel = variants.first
    assert kernel is not None and record.launch is not None
    block = ", ".join(str(b) for b in kernel.block)
    smem = kernel.shared_mem
    gl = [_reuse(to_python(x, refs), known) for x in record.launch.grid]
    g.update(kernel.fast_path_globals())
    return [f"_g0, _g1, _g2 = {', '.join(gl)}",
            "_f = _fns.get(_dev)",
            "if _f is None: _f = _kfn(_dev)",
            f"if _dev != _curdev(): _launch(_dev, _g0, _g1, _g2, {block}, {smem}, {', '.join(values)}); return {ret}",
            "_b, _a = _P.v",
            f"_pack(_b, 0, {', '.join(values)})",
            "_s = _raw(_dev)",
            "_cs = _streams.get(_s)",
            "if _cs is None: _cs = _mkstream(_s)",
            f"_e = _cu(_f, _g0, _g1, _g2, {block}, {smem}, _cs, _a, 0)[0]",
            f"if _e: _e = _retry(_e, _dev, lambda: _cu(_f, _g0, _g1, _g2, {block}, {smem}, _cs, _a, 0))",
            f"if _e: _fail(_e, _dev, (_g0, _g1, _g2), ({block}), {smem})"]  # fmt: skip


def variant_launch(g: dict, record: KernelRecord, variants: Variants, refs: dict, values: list, ret: str,
                   tnames: list, outs: list, mutated: list, custom_takes_config: bool, known: dict[str, str],
                   xs: list[str]) -> list[str]:  # fmt: skip
    """Several kernels: pick the config (tuned) and the specialization (dtypes, alignment, values compiled
    in), then launch that kernel. An untuned op's grid comes first: a Custom geometry's mistakes (a float
    grid, too many threads) are refused before any pointer is read."""
    from cuda.bindings.driver import cuLaunchKernel

    from .launch import _STREAMS, _current_device, _raw_stream, _stream_handle, retry_launch

    g.update({"_fast": variants.fast, "_entry": variants.entry, "_run": variants.run, "_grids": variants.grids,
              "_pack": variants.pack, "_P": variants.params, "_raw": _raw_stream, "_streams": _STREAMS,
              "_mkstream": _stream_handle, "_curdev": _current_device, "_retry": retry_launch, "_cu": cuLaunchKernel,
              "_params": [c["params"] for c in record.configs], "_fixed": record.flavor == "triton"})  # fmt: skip
    L: list[str] = []
    args = ", ".join(tnames + outs)
    ins = "{" + ", ".join(f"{a.name!r}: {a.name}" for a in record.inputs) + "}"
    onames = "{" + ", ".join(f"{o.name!r}: _o{k}" for k, o in enumerate(record.outputs)) + "}"
    if variants.host_launched:  # the host function launches its own kernels
        geo = "()"
    elif record.launch is not None:
        geo = f"_grids[@C@]({args})"
    else:
        cfg = ", _params[@C@]" if custom_takes_config else ""
        geo = f"_norm(_op, _custom({ins}, {onames}{cfg}), _fixed)"
        if record.index_dtype == "int32" and record.flavor != "triton":
            geo = f"_extent(_op, _E, {geo})"
    c = "_c" if record.tuned else "0"
    early = record.launch is None and not record.tuned and not variants.host_launched
    if early:
        L += [f"_geo = {geo.replace('@C@', '0')}"]
        geo = "_geo"
    # Pointers once, into locals: the specialization reads their alignment and the launch passes them.
    ptr_locals = {}
    for k, v in enumerate(values):
        if v.endswith(".data_ptr()"):
            L += [f"_p{k} = {v}"]
            ptr_locals[k] = f"_p{k}"
    vals = [ptr_locals.get(k, v) for k, v in enumerate(values)]
    spec = []
    for kind, p in variants.spec_layout:
        if kind == "dtype":
            spec.append(f"{tnames[p]}.dtype")
        elif kind == "align":
            spec.append(f"{vals[p]} & 15 == 0")
        elif kind == "static":
            spec.append(xs[p])
        else:
            spec.append(f"{vals[p]} % 16 == 0")
    L += [f"_sk = ({', '.join(spec)}{',' if spec else ''})"]
    if record.tuned:
        g["_chosen"] = variants.tuner.decisions  # type: ignore[union-attr]
        g["_decide"] = variants.tuner.decide  # type: ignore[union-attr]
        tk = key_to_python(record.tune_key, refs, tnames)
        L += [f"_tk = {tk}",
              "_c = _chosen.get(_tk)",
              f"if _c is None: _c = _decide(_tk, _dev, lambda c: _run(c, _sk, _dev, {geo.replace('@C@', 'c')}, "
              f"({', '.join(vals)},)), ({', '.join(mutated)}{',' if mutated else ''}), "
              f"({', '.join(outs)}{',' if outs else ''}))",
              "_vk = (_c, _sk)", "_v = _fast.get(_vk)", "if _v is None: _v = _entry(_vk)"]  # fmt: skip
    else:
        L += ["_v = _fast.get(_sk)", "if _v is None: _v = _entry(_sk)"]
    if variants.host_launched:
        return [*L, f"_v.launch(_dev, {', '.join(vals)})"]
    if variants.c_launched:  # Triton: its own C launcher takes every kernel parameter in order
        grid = (", ".join(_reuse(to_python(x, refs), known) for x in record.launch.grid)
                if record.launch is not None and not record.tuned else geo.replace("@C@", c))  # fmt: skip
        raw = [v[len("_bf16(") : -1] if v.startswith("_bf16(") else v for v in vals]  # it packs floats itself
        targs = ", ".join("None" if k is None else raw[k] for k in variants.sources[0].launcher_slots())  # type: ignore[attr-defined]
        return [*L, f"_g0, _g1, _g2 = {grid}",
                    "_hs, _tl, _md, _kd = _v",
                    "_h = _hs.get(_dev)",
                    "if _h is None: _h = _kd.handle(_dev)",
                    "if _tl is None or _dev != _curdev(): "
                    f"_kd.launch(_dev, _g0, _g1, _g2, *_kd.block, _kd.shared_mem, {', '.join(vals)}); return {ret}",
                    f"try: _tl(_g0, _g1, _g2, _raw(_dev), _h, False, False, None, None, _md, None, None, None, {targs})",
                    "except RuntimeError as _x: _kd.fail_c(_x, _dev, (_g0, _g1, _g2))"]  # fmt: skip
    if record.launch is not None and not record.tuned:  # one plan: its grid inline
        L += [f"_g0, _g1, _g2 = {', '.join(_reuse(to_python(x, refs), known) for x in record.launch.grid)}",
              "_fns, _b0, _b1, _b2, _sm, _kd = _v"]  # fmt: skip
    elif record.launch is not None:  # the plan knows its block
        L += [f"_g0, _g1, _g2 = {geo.replace('@C@', c)}", "_fns, _b0, _b1, _b2, _sm, _kd = _v"]
    else:  # a Custom geometry gives the block per call
        L += [f"_g0, _g1, _g2, _b0, _b1, _b2, _sm = {geo.replace('@C@', c)}", "_fns = _v[0]", "_kd = _v[5]"]
    return [*L, "_f = _fns.get(_dev)",
                "if _f is None: _f = _kd.function(_dev)",
                f"if _dev != _curdev(): _kd.launch(_dev, _g0, _g1, _g2, _b0, _b1, _b2, _sm, {', '.join(vals)}); "
                f"return {ret}",
                "_b, _a = _P.v",
                f"_pack(_b, 0, {', '.join(vals)})",
                "_s = _raw(_dev)",
                "_cs = _streams.get(_s)",
                "if _cs is None: _cs = _mkstream(_s)",
                "_e = _cu(_f, _g0, _g1, _g2, _b0, _b1, _b2, _sm, _cs, _a, 0)[0]",
                "if _e: _e = _retry(_e, _dev, lambda: _cu(_f, _g0, _g1, _g2, _b0, _b1, _b2, _sm, _cs, _a, 0))",
                "if _e: _kd._fail(_e, _dev, (_g0, _g1, _g2), (_b0, _b1, _b2), _sm)"]  # fmt: skip
