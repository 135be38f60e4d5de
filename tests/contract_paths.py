"""One op, one contract: the bad-input rows walked through every path that can serve a call, each path's
outcome as "ErrorClass: first line" (or "ok"), printed as JSON on the last line.

    python tests/contract_paths.py python   the Python path's dry run (everything but the launch), in process
                                            (OPSMITH_NATIVE=dry-run and OPSMITH_CXX naming no compiler)
    python tests/contract_paths.py served   OPSMITH_NATIVE=dry-run: the rows before the switch (the Python path
                                            serves) and after it (the served library), in one process
    python tests/contract_paths.py use      opsmith.native.use(ops, dry_run=True)
    python tests/contract_paths.py load     a built dry-run library in a child that loads it with native.load
    python tests/contract_paths.py bare     the same library loaded with torch.ops.load_library, no opsmith ops:
                                            torch's builtin classes (ValueError, RuntimeError)
    python tests/contract_paths.py stable   the same rows through a stable-ABI dry-run library (RuntimeError)
    python tests/contract_paths.py reference  every op registered with a CPU reference=, called on CPU tensors
    python tests/contract_paths.py fake     the op's fake (Meta) implementation on fake CUDA tensors of the rows'
                                            shapes and strides, as torch.compile traces them
    python tests/contract_paths.py xla      the rows JAX can express, straight into the XLA dry-run handlers
    python tests/contract_paths.py jax      the rows JAX can express, traced through opsmith.jax for the GPU:
                                            refused at trace time as PyTorch refuses them

Rows: ``error_matrix.CPU_ARGS`` (every call row with CPU arguments), the autograd rows on CPU tensors, and
``BOUNDARY`` (each precondition, tie and group at, below and above its limit; square and prefix shapes; small
alignments per dtype), where "ok" is an outcome too: a path that accepts what another refuses is a mismatch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import error_matrix as em  # noqa: E402
import error_matrix_shapes as shaped  # noqa: E402
import torch  # noqa: E402

ROWS: dict[str, tuple[str, Callable[[str], tuple]]] = dict(em.CPU_ARGS)
ROWS.update({cid: (f"shaped:{kind}", args) for cid, (kind, args) in shaped.BOUNDARY.items()})
KINDS = sorted({kind for kind, _ in ROWS.values()} | {"plain", "inplace"})


def _no_backward(op: Callable) -> None:
    x = torch.randn(8).requires_grad_()
    (op("plain")(x.view(2, 4)).sum() + x.sum()).backward()


def _inplace_grad(op: Callable) -> None:
    op("inplace")(torch.randn(8).requires_grad_().clone())


GRAD_ROWS: dict[str, Callable[[Callable], None]] = {"no-backward": _no_backward, "inplace-grad": _inplace_grad}


def outcome(thunk: Callable[[], object]) -> str:
    try:
        thunk()
    except Exception as e:
        return f"{type(e).__name__}: {str(e).splitlines()[0]}"
    return "ok"


def walk(call: Callable[[str, tuple], object], grads: bool = True) -> dict[str, str]:
    """Each row's outcome with ``call(kind, args)`` serving the call."""
    out = {cid: outcome(lambda kind=kind, args=args: call(kind, args("cpu"))) for cid, (kind, args) in ROWS.items()}
    if grads:
        out.update(
            {cid: outcome(lambda fn=fn: fn(lambda kind: lambda *a: call(kind, a))) for cid, fn in GRAD_ROWS.items()}
        )
    return out


def ops() -> list:
    return [em.op(k) for k in KINDS]


def python_path() -> dict[str, str]:
    """The Python path's own guards on CPU tensors: run with OPSMITH_NATIVE=dry-run and no C++ compiler, so each
    op's CPU kernel is its Python dry run (everything but the launch) and no library ever takes over; the
    autograd rows go through the op's Python refusal node into it."""
    assert os.environ.get("OPSMITH_NATIVE") == "dry-run" and not os.path.exists(os.environ.get("OPSMITH_CXX", "/"))
    out = walk(lambda kind, args: em.op(kind)(*args))
    assert all(em.op(k).serving == "python" for k in KINDS), [em.op(k).serving_why for k in KINDS]
    return out


def served() -> dict[str, dict[str, str]]:
    """Before the switch and after it, in one process (OPSMITH_NATIVE=dry-run: the library serves CPU tensors)."""
    from opsmith import native
    from opsmith.native import serving

    assert os.environ.get("OPSMITH_NATIVE") == "dry-run"
    # The build waits for the walk: "before" is the Python path however fast the library builds (a race the
    # walk lost on a loaded 2-core machine, which left nothing to compare).
    walked, build = threading.Event(), serving._serve
    serving._serve = lambda batch: (walked.wait(900), build(batch))[1]
    all_ops = ops()
    before = walk(lambda kind, args: em.op(kind)(*args))
    still_python = all(op.serving == "python" for op in all_ops)
    walked.set()
    assert native.wait(900)
    assert all(op.serving == "native" for op in all_ops), [op.serving_why for op in all_ops]
    return {"before": before if still_python else {}, "after": walk(lambda kind, args: em.op(kind)(*args))}


def use() -> dict[str, str]:
    from opsmith import native

    native.use(ops(), dry_run=True)
    return walk(lambda kind, args: em.op(kind)(*args))


def loaded(how: str) -> dict[str, str]:
    """A dry-run library built here, walked in a child that loads it (``how``: load, bare or stable)."""
    from opsmith import native

    names = {k: em.op(k).record.op_name for k in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        lib = Path(tmp) / "librows.so"
        native.build(ops(), lib, dry_run=True, stable=how == "stable")
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")]))
        proc = subprocess.run([sys.executable, __file__, "child", how, str(lib), json.dumps(names)], env=env,
                              capture_output=True, text=True, timeout=900)  # fmt: skip
        if proc.returncode:
            raise SystemExit(proc.stderr[-4000:])
        return json.loads(proc.stdout.strip().splitlines()[-1])


def child(how: str, lib: str, names: dict[str, str]) -> dict[str, str]:
    if how == "load":
        from opsmith import native

        native.load(lib)
    else:
        torch.ops.load_library(lib)

    def call(kind: str, args: tuple) -> object:
        ns, name = names[kind].split("::")
        return getattr(getattr(torch.ops, ns), name)(*args)

    return walk(call, grads=how != "stable")  # a stable library has no Autograd kernels


def fake() -> dict[str, str]:
    """The rows as torch.compile and torch.export trace them: fake CUDA tensors of the rows' shapes and strides
    through the op's fake (Meta) implementation. Refusals that need data pointers or the launch (alignment, the
    grid) are not the fake's to make."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    out = {}
    for cid, (kind, args) in ROWS.items():
        real = args("cpu")
        with FakeTensorMode(allow_non_fake_inputs=True):
            strided = [torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device="cuda") if isinstance(a, torch.Tensor)
                       else a for a in real]  # fmt: skip
            out[cid] = outcome(lambda k=kind, c=strided: em.op(k)(*c))
    return out


def xla() -> dict[str, str]:
    """The rows JAX can express and the Meta kernel accepts, straight into the XLA dry-run handlers (a hand-made
    ffi_call with the declared results, as a caller that skips opsmith.jax's trace-time checks would make): the
    handler's own C++ checks (the launch's among them), with the same text."""
    import jax

    from opsmith.jax import jax_op

    out = {}
    with jax.default_device(jax.devices("cpu")[0]):
        for cid, (kind, args) in ROWS.items():
            call = args("cpu")
            tensors = [a for a in call if isinstance(a, torch.Tensor)]
            if not all(_in_jax(t, em.op(kind)) and t.numel() <= 1 << 24 for t in tensors):
                out[cid] = "not in JAX"
                continue
            call = [a.contiguous() if isinstance(a, torch.Tensor) else a for a in call]  # a broadcast materialized
            tensors = [a for a in call if isinstance(a, torch.Tensor)]
            op = em.op(kind)
            try:  # the result shapes the Meta kernel gives (it does not see launch refusals: the handler must)
                planned = op(*[a.to("meta") if isinstance(a, torch.Tensor) else a for a in call])
                planned = planned if isinstance(planned, tuple) else (planned,)
                results = [jax.ShapeDtypeStruct(tuple(t.shape), str(t.dtype).removeprefix("torch.")) for t in planned]
            except Exception:  # no declared results to give: opsmith.jax refuses it at trace time ("jax" mode)
                out[cid] = "not reached"
                continue
            target = jax_op(op, dry_run=True).handlers().targets[op.record.op_name]
            attrs = {d.name: a for d, a in zip(op.record.inputs, call, strict=True) if not isinstance(a, torch.Tensor)}
            arrays = [jax.numpy.asarray(t.numpy()) if t.dtype != torch.bfloat16 else
                      jax.numpy.asarray(t.float().numpy()).astype("bfloat16") for t in tensors]  # fmt: skip
            out[cid] = outcome(lambda t=target, r=results, a=arrays, k=attrs: jax.block_until_ready(
                jax.ffi.ffi_call(t, r)(*a, **k)))  # fmt: skip
    return out


def reference() -> dict[str, str]:
    """The matrix ops registered with a CPU ``reference=`` (returning empty outputs of the shapes the op's Meta
    kernel gives: a reference checks nothing itself), called on CPU tensors: the reference path must refuse what
    the kernel's path refuses."""
    import opsmith as ok

    real, made = ok.cuda_kernel_op, {}

    def outputs_of(name: str, *args: object) -> object:
        out = made[name](*[a.to("meta") if isinstance(a, torch.Tensor) else a for a in args])
        if out is None:
            return None
        outs = [torch.empty(t.shape, dtype=t.dtype) for t in (out if isinstance(out, tuple) else (out,))]
        return tuple(outs) if isinstance(out, tuple) else outs[0]

    def with_reference(name: str, spec: object, **kw: object) -> object:
        made[name] = real(name, spec, reference=lambda *a: outputs_of(name, *a), **kw)
        return made[name]

    ok.cuda_kernel_op = with_reference  # error_matrix registers through ok.cuda_kernel_op, looked up per call
    return walk(lambda kind, args: em.op(kind)(*args))


def jax_trace() -> dict[str, str]:
    """The rows JAX can express (dense, aligned arrays: no views), traced through ``jax_op`` for the GPU: every
    refusal must be made at trace time, with the PyTorch class and text. Other rows are "not in JAX"."""
    import jax

    from opsmith.jax import jax_op

    fns = {k: jax_op(em.op(k), platform="cuda") for k in KINDS}
    out = {}
    for cid, (kind, args) in ROWS.items():
        call = args("cpu")
        tensors = [a for a in call if isinstance(a, torch.Tensor)]
        if not all(_in_jax(t, em.op(kind)) for t in tensors):
            out[cid] = "not in JAX"
            continue
        shapes = [jax.ShapeDtypeStruct(tuple(t.shape), str(t.dtype).removeprefix("torch.")) for t in tensors]
        out[cid] = outcome(lambda f=fns[kind], c=call, s=shapes: jax.jit(_positional(f, c)).trace(*s))
    return out


def _in_jax(t: torch.Tensor, op: object) -> bool:
    """Whether a JAX array can stand for ``t``: dense and aligned (a broadcast view stands for its values unless
    the op reads strides; a slice past the start or a transposed view is a layout JAX never hands a kernel)."""
    reads_strides = any("stride(" in e.label for e in op.record.extras)
    return t.storage_offset() == 0 and (t.is_contiguous() or (0 in t.stride() and not reads_strides))


def _positional(f: Callable, call: tuple) -> Callable:
    """``f`` of the call's tensors, its scalars put back where the call has them."""

    def traced(*tensors: object) -> object:
        it = iter(tensors)
        return f(*[next(it) if isinstance(a, torch.Tensor) else a for a in call])

    return traced


def main(argv: list[str]) -> object:
    mode = argv[0]
    if mode == "child":
        return child(argv[1], argv[2], json.loads(argv[3]))
    modes = {
        "python": python_path,
        "served": served,
        "use": use,
        "jax": jax_trace,
        "reference": reference,
        "fake": fake,
        "xla": xla,
    }
    return modes.get(mode, lambda: loaded(mode))()


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
