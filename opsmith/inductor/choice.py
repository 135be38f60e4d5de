"""``compile=``: under torch.compile, an op traces as its kernel or as its ``reference=``, whichever is faster.

A kernel is opaque to Inductor (torch 2.11 fuses nothing into a user Triton kernel); the op's ``reference=``, plain
torch, is what Inductor compiles and fuses with its neighbours. Where Inductor's code for the reference beats the
kernel, a compiled model is faster tracing the reference. The choice, per op:

- ``"kernel"`` (the default): the kernel, always;
- ``"reference"``: the reference, always, under torch.compile (eager calls still launch the kernel);
- ``"auto"``: decided once per shape bucket (each tensor's dtype and the next power of two of each size), the
  first time torch.compile traces the op there: both are timed on random inputs of the traced shapes (the kernel
  as the op launches it, the reference compiled by Inductor alone, so any fusion with neighbours it gains in the
  model comes on top), and the faster is kept. The decision is stored with the tuning decisions (the same disk
  cache, ``opsmith tuning export``/``import``, and in a job of several ranks one rank decides for all, so every
  rank traces the same graph).

Correctness never depends on the choice: ``opsmith check`` holds the kernel to its reference. ``torch.export``
keeps the op whole whatever the choice. ``Op.compile_choices()`` and ``opsmith serving`` report what was chosen,
with both times.
"""

from __future__ import annotations

import contextlib
import logging
import statistics
import threading
from collections.abc import Callable
from typing import Any

import torch

log = logging.getLogger("opsmith.compile")

__all__ = ["MODES", "CompileChoice", "check_mode", "choices_table", "register_traced"]

MODES = ("kernel", "reference", "auto")
#: Where "auto" times the two ways (elsewhere the kernel is traced, as for "kernel"); the CPU tests add "cpu" to
#: run the measurement inside a real trace with a given timer.
TIMED_DEVICES: set[str] = {"cuda"}
KERNEL, REFERENCE = 0, 1


def check_mode(op_name: str, mode: object, reference: Callable | None) -> str:
    """``compile=`` as declared, or a SpecError naming the fix."""
    from ..errors import SpecError

    if mode not in MODES:
        raise SpecError(op_name, "compile", f"{mode!r} is not a compile mode.",
                        "pass compile='kernel' (the default), 'reference' or 'auto'.")  # fmt: skip
    if mode != "kernel" and reference is None:
        raise SpecError(op_name, "compile", f"compile={mode!r} traces the op's reference under torch.compile, and "
                        "the op has none.", "pass reference= (a plain-torch function of the op's arguments), "
                        "or leave compile='kernel'.")  # fmt: skip
    return str(mode)


def _hint(v: Any) -> int:
    return int(v.node.hint) if isinstance(v, torch.SymInt) else int(v)


def _real(a: Any) -> Any:
    """A real tensor of ``a``'s traced shape and dtype (random values; zeros for integers, a valid index), or
    the scalar's value."""
    if isinstance(a, torch.Tensor):
        shape = [_hint(s) for s in a.shape]
        if a.dtype.is_floating_point:
            return torch.randn(shape, device=a.device).to(a.dtype)
        return torch.zeros(shape, dtype=a.dtype, device=a.device)
    if isinstance(a, torch.SymInt | torch.SymFloat | torch.SymBool):
        return a.node.hint
    return a


class CompileChoice:
    """The compile choice of one op: its mode, its decisions (a ``Tuner`` over the two ways), what it measured."""

    def __init__(self, op_name: str, mode: str, reference: Callable | None, identity: dict) -> None:
        from ..tuning.autotune import Tuner

        self.op_name, self.mode, self.reference = op_name, mode, reference
        self.tuner = Tuner(op_name, {**identity, "decision": "compile"}, [{"compile": "kernel"}, {"compile": "reference"}],
                           default=KERNEL)  # fmt: skip
        #: bucket -> {"choice": "kernel"|"reference", "kernel_ms": float|None, "reference_ms": float|None}
        self.chosen: dict[tuple, dict] = {}
        self._compiled: dict[tuple, Callable] = {}
        self._lock = threading.RLock()  # two threads tracing the same bucket decide once

    def bucket(self, args: tuple) -> tuple:
        from ..tuning.autotune import pow2

        key: list[Any] = []
        for a in args:
            if isinstance(a, torch.Tensor):
                key.append(str(a.dtype).removeprefix("torch."))
                key.extend(pow2(_hint(s)) for s in a.shape)
            elif a is None:
                key.append(None)
        return tuple(key)

    def traces_reference(self, overload: Any, args: tuple) -> bool:
        """Whether the op traces as its reference for these (traced) arguments."""
        if self.mode != "auto":
            return self.mode == "reference"
        tensors = [a for a in args if isinstance(a, torch.Tensor)]
        if not tensors or tensors[0].device.type not in TIMED_DEVICES:
            return False  # nothing to time on a CPU (the kernel is what runs there)
        key = self.bucket(args)
        dev = tensors[0].device
        device = None if dev.type != "cuda" else dev.index if dev.index is not None else torch.cuda.current_device()
        winner = self._decide(overload, key, device, args)
        return winner == REFERENCE

    def _decide(self, overload: Any, key: tuple, device: int, args: tuple) -> int:
        from ..distributed.tuning import in_job, job_decision

        tuner = self.tuner
        with self._lock:
            if key in tuner.decisions:
                return tuner.decisions[key]
            if in_job():
                winner = job_decision(tuner, key, device, lambda: self._local(overload, key, device, args))
            else:
                winner = self._local(overload, key, device, args)
            tuner.decisions[key] = winner
            self.chosen.setdefault(key, {"choice": ("kernel", "reference")[winner], "kernel_ms": None,
                                         "reference_ms": None})  # fmt: skip
            log.info("%s: under torch.compile, bucket %s traces the %s", self.op_name, key, self.chosen[key]["choice"])
            return winner

    def _local(self, overload: Any, key: tuple, device: int, args: tuple) -> int:
        hit = self.tuner.cached(key, device)
        return hit if hit is not None else self.measure(overload, key, device, args)

    def measure(self, overload: Any, key: tuple, device: int | None, args: tuple) -> int:
        """Time the kernel and the compiled reference on random inputs of the traced shapes (the tuner's timer:
        CUDA events, each run from a cold L2); store the faster."""
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        from torch.utils._python_dispatch import _disable_current_modes

        on = torch.cuda.device(device) if device is not None else contextlib.nullcontext()
        with unset_fake_temporarily(), _disable_current_modes(), _outside_fx_tracing(), torch.no_grad(), on:
            real = [_real(a) for a in args]
            mutated = [t for t in real if isinstance(t, torch.Tensor) and t.is_floating_point()]
            saved = [t.clone() for t in mutated]

            def restore() -> None:
                for t, s in zip(mutated, saved, strict=True):
                    t.copy_(s)

            compiled = self._compiled.get(key)
            if compiled is None:  # Inductor alone on the reference: what it would generate for the op's part
                compiled = self._compiled[key] = torch.compile(self.reference, dynamic=False, fullgraph=True)
            ways = {KERNEL: lambda: overload(*real), REFERENCE: lambda: compiled(*real)}
            times: dict[int, float] = {}
            for way, run in ways.items():
                restore()
                run()  # compiles (the reference) or loads (the kernel) outside the timing
                times[way] = statistics.median(self.tuner.timer(run, restore))
            restore()
        winner = REFERENCE if times[REFERENCE] < times[KERNEL] else KERNEL
        self.tuner.record(key, device, winner, times)
        self.chosen[key] = {"choice": ("kernel", "reference")[winner], "kernel_ms": times[KERNEL],
                            "reference_ms": times[REFERENCE]}  # fmt: skip
        log.info("%s: bucket %s: kernel %.4f ms, reference compiled %.4f ms", self.op_name, key, times[KERNEL],
                 times[REFERENCE])  # fmt: skip
        return winner


def _outside_fx_tracing() -> Any:
    """The measurement's own torch.compile of the reference runs while AOTAutograd traces the model (make_fx), whose
    flag makes Dynamo refuse ("using FX to symbolically trace a dynamo-optimized function"): the flag is cleared for
    the measurement, which traces nothing of the model (the modes are off and its tensors are real). Where torch
    keeps that flag moved in 2.14: ``compat.torch_private.fx_tracing_cleared``."""
    from ..compat.torch_private import fx_tracing_cleared

    return fx_tracing_cleared()


def register_traced(lib: Any, op_name: str, overload: Any, choice: CompileChoice | None,
                    decompose: Callable | None, record: Any = None) -> None:  # fmt: skip
    """The op's one rule under functionalization (torch.compile's tracing): its reference where the choice says
    so, else the flavor's own decomposition (a Triton op's kernel handed to Inductor), else the op whole."""
    if choice is None or choice.mode == "kernel":
        if decompose is not None:
            from torch._subclasses.functional_tensor import FunctionalTensorMode

            torch.library.register_torch_dispatch(op_name, FunctionalTensorMode, decompose, lib=lib)
        return
    from torch._subclasses.functional_tensor import FunctionalTensorMode

    reference = choice.reference

    def traced(mode: Any, op: Any, types: Any, args: Any, kwargs: Any) -> Any:
        if not _exporting() and choice.traces_reference(overload, tuple(args)):
            with mode:
                got = reference(*args, **kwargs)
            if record is not None:
                _check_reference(record, args, got, choice.mode)
            return got
        if decompose is not None:
            return decompose(mode, op, types, args, kwargs)
        return mode.__torch_dispatch__(op, types, args, kwargs)

    torch.library.register_torch_dispatch(op_name, FunctionalTensorMode, traced, lib=lib)


def _check_reference(record: Any, args: Any, got: Any, mode: str) -> None:
    """The traced reference returns the outputs the op declares, in number and dtype: a float32 result for a
    bfloat16 op would change the compiled model's dtypes silently (the fake says bfloat16), and under "auto"
    they would depend on which way won the timing. (Eager on CPU holds it to the same: ``reference.py``.)"""
    from ..declare.record import TensorArg, dtype_from_name
    from ..errors import SpecError

    tensors = [a for a, d in zip(args, record.inputs, strict=False) if isinstance(d, TensorArg)]
    want = [dtype_from_name(o.dtype) if o.dtype else tensors[o.dtype_from].dtype for o in record.outputs]
    have = [] if got is None else list(got) if isinstance(got, tuple | list) else [got]
    kinds = [t.dtype if isinstance(t, torch.Tensor) else type(t).__name__ for t in have]
    if kinds != want:
        raise SpecError(record.op_name, "reference", f"under torch.compile (compile={mode!r}) the "
                        f"reference returned {kinds}; the op declares {want} for these inputs.",
                        "return the declared outputs in the declared dtypes (cast with .to(x.dtype)): the traced "
                        "graph would otherwise change the op's output dtypes.")  # fmt: skip


def _exporting() -> bool:
    """torch.export keeps custom Triton ops whole (its own switch); the reference is then not traced either."""
    try:
        from torch.export._trace import custom_triton_ops_decomposition_disabled
    except ImportError:
        return False
    return bool(custom_triton_ops_decomposition_disabled())


def choices_table() -> str:
    """The ops whose compile mode is not "kernel", one row per decided bucket: what torch.compile traced and the
    two times (blank where the decision came from the disk or another rank). Empty when there are none."""
    from ..registry import registered_ops

    rows = [("op", "mode", "bucket", "traced", "kernel ms", "reference ms")]
    for name, op in sorted(registered_ops().items()):
        c = getattr(op, "compile_choice", None)
        if c is None:
            continue
        if c.mode == "reference":
            rows.append((name, c.mode, "all", "reference", "", ""))
        for key, d in sorted(c.chosen.items(), key=str):
            ms = [f"{d[k]:.4f}" if d[k] is not None else "" for k in ("kernel_ms", "reference_ms")]
            rows.append((name, c.mode, ",".join(map(str, key)), d["choice"], *ms))
    if len(rows) == 1:
        return ""
    widths = [max(len(r[k]) for r in rows) for k in range(6)]
    return "\n".join("  ".join(x.ljust(w) for x, w in zip(r, widths, strict=True)).rstrip() for r in rows)
