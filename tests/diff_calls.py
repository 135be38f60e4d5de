"""The calls of the differential tests, built the same way in both processes (the one that runs the Python
path and the one that loads only the native library), and their outcomes as plain data.

A call is a list of argument specs: ``{"t": "tensor", "shape", "dtype", "device", "view", "seed"}`` or
``{"t": "scalar", "v": value}``. A view: "plain", "t" (the last two axes transposed), "slice" (the last axis
narrowed from a wider tensor), "expand" (axis 0 broadcast from size 1), "offset" (one element into its
storage: not 16-byte aligned), "zeros", "wide" (the last axis of a 4x wider tensor, uninitialized). An outcome:
``{"ok": True, "outputs": [[shape, dtype, strides], ...], "launches": [...]}`` (a real launch: "written" and
"values" bytes instead of launches) or ``{"ok": False, "error": "ValueError: <first line>"}``. Launch arguments come back
with every pointer named by what it points at (an input as passed, an output, or "fresh": a copy the call
made), since addresses differ between processes.

No opsmith import: the native side runs without it.
"""

from __future__ import annotations

import json
import math
from typing import Any

import torch

__all__ = ["build_args", "outcome"]


def _tensor(spec: dict) -> torch.Tensor:
    shape, dtype, device, view = list(spec["shape"]), getattr(torch, spec["dtype"]), spec["device"], spec["view"]
    g = torch.Generator().manual_seed(spec.get("seed", 0))

    def fresh(s: list[int]) -> torch.Tensor:
        if device == "meta":
            return torch.empty(s, dtype=dtype, device="meta")
        t = torch.randint(-3, 4, s, generator=g) if not dtype.is_floating_point else torch.randn(s, generator=g)
        return t.to(dtype).to(device)

    if view == "t" and len(shape) >= 2:
        base = fresh([*shape[:-2], shape[-1], shape[-2]])
        return base.transpose(-1, -2)
    if view == "slice" and shape:
        return fresh([*shape[:-1], shape[-1] + 2])[..., : shape[-1]]
    if view == "expand" and shape:
        return fresh([1, *shape[1:]]).expand(shape)
    if view == "zeros":
        return torch.zeros(shape, dtype=dtype, device=device)
    if view == "wide":  # the last axis a quarter of a wider tensor's, uninitialized (large views stay cheap)
        return torch.empty([*shape[:-1], 4 * shape[-1]], dtype=dtype, device=device)[..., : shape[-1]]
    if view == "offset":
        n = math.prod(shape)
        return fresh([n + 1]).narrow(0, 1, n).view(shape)
    return fresh(shape)


def build_args(call: list[dict]) -> list[Any]:
    return [_tensor(a) if a["t"] == "tensor" else None if a["t"] == "none" else a["v"] for a in call]


def _error(e: BaseException) -> str:
    base = "ValueError" if isinstance(e, ValueError) else "RuntimeError" if isinstance(e, RuntimeError) else \
        type(e).__name__  # fmt: skip
    first = (str(e).splitlines() or [""])[0]
    return f"{base}: {first}"


def _classify(launch: dict, pointers: list[int], args: list[Any], outs: list[torch.Tensor]) -> dict:
    raw = bytes.fromhex(launch["args"])
    slots = [raw[8 * k : 8 * k + 8] for k in range(len(raw) // 8)]
    named = []
    for k, slot in enumerate(slots):
        if k not in pointers:
            named.append(slot.hex())
            continue
        p = int.from_bytes(slot, "little")
        if p == 0:  # an optional tensor passed as None
            named.append("null")
            continue
        where = next((f"in{i}" for i, a in enumerate(args) if isinstance(a, torch.Tensor) and a.data_ptr() == p), None)
        where = where or next((f"out{i}" for i, o in enumerate(outs) if o is not None and o.data_ptr() == p), "fresh")
        named.append(where + (":misaligned" if p % 16 else ""))
    return {**launch, "args": named}


def _positions(pointers: Any, launch: dict) -> list[int]:
    """The argument slots holding pointers: a list, or per kernel image (a Triton kernel that compiled
    parameters in, a 1 or an optional tensor's None, leaves them out of its arguments)."""
    if isinstance(pointers, dict):
        return pointers.get(launch.get("image"), pointers.get("*", []))
    return list(pointers or [])


def _bytes(t: torch.Tensor) -> str:
    # reshape(-1): a 0-dim tensor of a 2-byte dtype cannot be viewed as bytes
    return t.detach().contiguous().cpu().reshape(-1).view(torch.uint8).numpy().tobytes().hex() if t.numel() else ""


def outcome(fn: Any, args: list[Any], pointers: list[int] | None = None, take: Any = None, *,
            written: tuple[int, ...] = (), values: bool = False, inits: tuple[int, ...] = ()) -> dict:  # fmt: skip
    """Run ``fn(*args)``; ``take()`` returns the launches it recorded (a list, or its JSON). A real launch (GPU):
    ``written`` (argument positions written in place) and, with ``values``, the outputs come back as bytes. A
    dry run: ``inits`` (outputs declaring ``init=``) come back as bytes, what the path left before the launch."""
    try:
        got = fn(*args)
        if written or values:
            torch.cuda.synchronize()
    except Exception as e:  # what each path refuses, compared as text
        if take is not None:
            take()  # forget launches of a refused call
        return {"ok": False, "error": _error(e)}
    outs = [] if got is None else [got] if isinstance(got, torch.Tensor) else list(got)
    # None: an optional output the call did not ask for
    res: dict[str, Any] = {"ok": True, "outputs": [None if o is None else [list(o.shape), str(o.dtype), list(o.stride())]
                                                   for o in outs]}  # fmt: skip
    if written:
        res["written"] = [_bytes(args[k]) for k in written]
    if values:
        res["values"] = [_bytes(o) for o in outs]
    if inits:
        res["inits"] = [_bytes(outs[k]) for k in inits]
    if take is not None:
        launches = take()
        launches = json.loads(launches) if isinstance(launches, str) else list(launches)
        res["launches"] = [_classify(x, _positions(pointers, x), args, outs) for x in launches]
    return res
