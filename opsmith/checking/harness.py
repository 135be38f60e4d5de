"""The conformance harness: one call proves an op correct, compile-ready and stream-safe, or says what is not.

    case = ok.CheckCase(op, inputs=lambda shape, dtype, device: (torch.randn(shape, device=device).to(dtype),),
                        reference=torch.relu, shapes=[(1000,), (3, 257)], dtypes=[torch.float32, torch.float16])
    print(ok.check(case).table())        # or: ok.assert_check_passes(case) in a test
    $ opsmith check mypkg.ops:RELU_CASE  # the CLI (opsmith/cli.py); --sanitize adds compute-sanitizer

The checks (each a row: check, result, detail) run the op the way users and PyTorch will: ``opcheck`` over
samples with requires_grad, zero-size and non-contiguous inputs; numerics against the reference on
hypothesis-drawn shapes and every dtype, with the op's outputs landing in poisoned memory; ``torch.compile``
(fullgraph, static and dynamic); ``torch.export`` with dynamic dims; CUDA graph capture and replay; a side
stream whose input is written behind a long sleep (an op on the wrong stream reads the poison); gradcheck
and gradients against the reference's when the op is differentiable, else a clear error when differentiated.
The op may be any callable over a torch.library op, so users' hand-written ops can be checked too.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from .. import env
from ..errors import DifferentiationError, InputError, SpecError
from .case import (
    CHECKS,
    CaseError,
    CheckCase,
    CheckReport,
    Shape,
    _as_tuple,
    _clone,
    _compare,
    _describe,
    _is_float,
    _run_and_compare,
    _Skip,
    blamed,
    is_differentiable,
)
from .child import can_fork, in_child, spawned
from .numerics import check_numerics as _check_numerics
from .samples import ShapeSolver
from .sharding import check_sharding

__all__ = ["CheckCase", "CheckReport", "assert_check_passes", "check"]


def _check_opcheck(case: CheckCase, device: torch.device, solver: ShapeSolver) -> str:
    ov = case.overload
    if ov is None:
        raise _Skip("the op is not a torch.library op (pass the Op or torch.ops.<ns>.<name>)")
    grad = is_differentiable(case)
    samples, refused = [], []
    for dt in case.dtypes:
        for args in case.samples(device, dt, solver):
            try:
                case.op(*_clone(args))
            except InputError as e:  # a clear refusal of the input (contiguous="require") is fine; opcheck skips it
                refused.append(f"{_describe(args)}: {type(e).__name__}")
                continue
            samples.append(args)
            if grad and any(_is_float(a) for a in args):
                samples.append(tuple(a.detach().clone().requires_grad_() if _is_float(a) else a for a in args))
    if not samples:
        raise AssertionError(f"no sample ran: the op refused every one ({'; '.join(refused)})")
    for args in samples:
        torch.library.opcheck(ov, args)
    detail = f"{len(samples)} samples (zero-size, non-contiguous{', requires_grad' if grad else ''}) x all tests"
    return detail + (f"; refused clearly: {'; '.join(refused)}" if refused else "")


def _check_compile(case: CheckCase, device: torch.device, dynamic: bool, backend: str,
                   solver: ShapeSolver) -> str:  # fmt: skip
    torch._dynamo.reset()
    fn = torch.compile(lambda *a: case.op(*a), fullgraph=True, dynamic=dynamic, backend=backend)
    dt = case.dtypes[0]
    shapes = _grown(case, solver, dt, 3 if dynamic else 1)
    if not dynamic:
        shapes += [s for s in (solver.fit(t, dt) for t in case.shapes[1:2]) if s is not None]
    for s in shapes:
        _run_and_compare(case, case.inputs(s, dt, device), dt, f"compiled, shape {s}", fn)
    return f"fullgraph, backend={backend}, shapes {', '.join(str(s) for s in shapes)}"


def _grown(case: CheckCase, solver: ShapeSolver, dt: torch.dtype, n: int) -> list[Shape]:
    """``n`` shapes of the first example's rank, larger and each different, that the op's preconditions
    accept (``check_samples.ShapeSolver.grown``)."""
    shapes = solver.grown(_first(case, solver, dt), dt, n)
    if len(shapes) < n:
        raise _Skip(f"only {len(shapes)} of {n} grown shapes near {tuple(case.shapes[0])} satisfy the op's "
                    "preconditions")  # fmt: skip
    return shapes


def _first(case: CheckCase, solver: ShapeSolver, dt: torch.dtype) -> Shape:
    """The first example shape, fitted to the op's preconditions (``check_samples``)."""
    for s in case.shapes:
        got = solver.fit(tuple(s), dt)
        if got is not None:
            return got
    raise _Skip(f"no shape near the case's {[tuple(s) for s in case.shapes]} satisfies the op's preconditions "
                "(its InputError on each); give CheckCase shapes= that do")  # fmt: skip


def _check_export(case: CheckCase, device: torch.device, solver: ShapeSolver) -> str:
    from torch.export import Dim

    class _M(torch.nn.Module):
        def forward(self, *args):
            return case.op(*args)

    dt = case.dtypes[0]
    first, second = _grown(case, solver, dt, 2)
    args = case.inputs(first, dt, device)
    dyn = tuple({i: Dim.AUTO for i in range(a.dim())} if isinstance(a, torch.Tensor) else None for a in args)
    ep = torch.export.export(_M(), tuple(_clone(args)), dynamic_shapes=(dyn,))  # one entry: forward(*args)
    ov = case.overload
    if ov is not None and not any(n.target is ov for n in ep.graph.nodes):
        raise AssertionError(f"the exported graph does not call {ov.name()}: {ep.graph}")
    _check_exported_shapes(ep, case.op(*_clone(args)))
    for s in (first, second):
        # Scalar inputs as exported: torch.export specializes an int or float argument to its traced value
        # (a rerun with another one fails the program's guard), so only the tensors are fresh.
        fresh = tuple(f if isinstance(f, torch.Tensor) else a for f, a in zip(case.inputs(s, dt, device), args,
                                                                             strict=True))  # fmt: skip
        _run_and_compare(case, fresh, dt, f"exported, shape {s}", ep.module())
    return f"dynamic dims; the graph calls the op; ran shapes {first} and {second}"


def _check_exported_shapes(ep: Any, eager_out: Any) -> None:
    """The shapes the exported graph records for its outputs (from the op's fake implementation) must be the
    shapes the op returns: a program built on a lying fake sizes everything after it wrongly."""
    out_node = next(n for n in ep.graph.nodes if n.op == "output")
    recorded = [
        a.meta.get("val") if hasattr(a, "meta") else None for a in torch.utils._pytree.tree_leaves(out_node.args)
    ]
    for k, (v, g) in enumerate(zip(recorded, _as_tuple(eager_out), strict=False)):
        if not isinstance(v, torch.Tensor) or not isinstance(g, torch.Tensor):
            continue
        hints = [d.node.hint if isinstance(d, torch.SymInt) else int(d) for d in v.shape]
        if None not in hints and tuple(hints) != tuple(g.shape):
            raise AssertionError(f"the exported graph records output {k} with shape {tuple(hints)} (from the fake "
                                 f"implementation), the op returns {tuple(g.shape)}")  # fmt: skip


def _cuda_only(device: torch.device) -> None:
    if device.type != "cuda":
        raise _Skip("needs a CUDA device")


def _check_cuda_graph(case: CheckCase, device: torch.device, solver: ShapeSolver) -> str:
    _cuda_only(device)
    dt = case.dtypes[0]
    shape = _first(case, solver, dt)
    static = _clone(case.inputs(shape, dt, device))
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(2):  # warm-up: loads modules and makes any tuning decision before capture
            case.op(*_clone(static))
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = case.op(*static)
    for _ in range(2):  # replay on fresh values twice: the graph must read its inputs' current contents
        # Scalars as captured: a graph replays the values it was captured with (only tensors are refilled)
        fresh = tuple(f if isinstance(f, torch.Tensor) else s for f, s in zip(case.inputs(shape, dt, device), static,
                                                                            strict=True))  # fmt: skip
        for s, f in zip(static, fresh, strict=True):
            if isinstance(s, torch.Tensor):
                s.copy_(f)
        ref_args = _clone(fresh)
        want = case.reference(*ref_args)
        graph.replay()
        torch.cuda.synchronize(device)
        _compare(case, out, static, want, ref_args, dt, f"CUDA graph replay, shape {shape}")
    return f"captured once, replayed twice on fresh inputs, shape {shape}"


def _check_stream(case: CheckCase, device: torch.device, solver: ShapeSolver) -> str:
    _cuda_only(device)
    dt = case.dtypes[0]
    shape = _first(case, solver, dt)
    args = case.inputs(shape, dt, device)
    case.op(*_clone(args))  # warm-up: loading a module or tuning synchronizes the device, hiding the order
    ref_args = _clone(args)
    want = case.reference(*ref_args)
    staged = [torch.full_like(a, float("nan") if a.is_floating_point() else -1) if isinstance(a, torch.Tensor)
              else a for a in args]  # fmt: skip
    torch.cuda.synchronize(device)
    side = torch.cuda.Stream(device)
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # ~50 ms at 2 GHz: an op on another stream runs long before the copy
        for s, a in zip(staged, args, strict=True):
            if isinstance(s, torch.Tensor):
                s.copy_(a)
        got = case.op(*staged)
        done = torch.cuda.Event()
        done.record(side)
    queued = not done.query()
    side.synchronize()
    try:
        _compare(case, got, staged, want, ref_args, dt, "on a side stream")
    except AssertionError as e:
        raise AssertionError(f"wrong result on a non-default stream: the op does not launch on (or wait for) the "
                             f"current stream.\n{e}") from None  # fmt: skip
    if not queued:
        raise AssertionError("the op's work finished before the side stream's sleep: it ran on another stream")
    return "input written behind a 50 ms sleep on a side stream; the op waited for it"


def _check_autograd(case: CheckCase, device: torch.device, solver: ShapeSolver) -> str:
    dt = case.dtypes[0]
    shape = _first(case, solver, dt)
    if not is_differentiable(case):
        leaves = [a.detach().requires_grad_() for a in case.inputs(shape, dt, device) if _is_float(a)]
        if not leaves:
            raise _Skip("no floating-point tensor input")
        it = iter(leaves)  # the op gets non-leaf copies: an in-place op may write them
        args = [next(it).clone() if _is_float(a) else a for a in case.inputs(shape, dt, device)]
        written = case.written_args()
        from ..torchlib.registration import Op

        try:
            out = [o for o in _as_tuple(case.op(*args)) if isinstance(o, torch.Tensor)]
            out += [a for k, a in enumerate(args) if k in written]
            if not any(o.requires_grad for o in out):
                raise _Skip("no output of the op carries a gradient (none requires grad): nothing to differentiate")
            # Only what autograd tracks: an int output (rowmax's flag) has no grad_fn, and summing it would raise
            # PyTorch's own "does not require grad" before the op's refusal is reached.
            torch.autograd.grad([o.float().sum() for o in out if o.requires_grad], leaves, allow_unused=True)
        except (InputError, _Skip):
            raise  # the input was refused, or nothing is differentiable: nothing about differentiation was shown
        except Exception as e:
            if isinstance(case.op, Op) and not isinstance(e, DifferentiationError):
                raise AssertionError(f"differentiating raised {type(e).__name__} ({str(e).splitlines()[0][:120]}), "
                                     "not opsmith's DifferentiationError") from None  # fmt: skip
            return f"not differentiable; differentiating raises {type(e).__name__}: {str(e).splitlines()[0][:120]}"
        raise AssertionError("the op declares no backward, yet differentiating through it raised no error "
                             "(gradients would be silently wrong)")  # fmt: skip
    notes = []
    for dtp in case.dtypes:  # gradients against the reference's, per dtype
        args = case.inputs(shape, dtp, device)
        mine = [a.detach().clone().requires_grad_() if _is_float(a) else a for a in args]
        ref = [a.detach().clone().requires_grad_() if _is_float(a) else a for a in args]
        outs = _as_tuple(case.op(*mine))
        routs = _as_tuple(case.reference(*ref))
        # Only the outputs the op's backward differentiates (a saved float32 rstd beside y is marked
        # non-differentiable): the reference's at the same positions.
        keep = [k for k, o in enumerate(outs) if isinstance(o, torch.Tensor) and o.requires_grad]
        if not keep:
            raise AssertionError("no output of the op requires grad although its inputs do: its backward "
                                 "differentiates nothing")  # fmt: skip
        if len(routs) != len(outs):
            raise AssertionError(f"the op returned {len(outs)} values, the reference {len(routs)}")
        outs, routs = tuple(outs[k] for k in keep), tuple(routs[k] for k in keep)
        cot = [torch.randn_like(o) for o in outs]
        leaves, rleaves = [a for a in mine if _is_float(a)], [a for a in ref if _is_float(a)]
        g = torch.autograd.grad(outs, leaves, cot, allow_unused=True)
        rg = torch.autograd.grad(routs, rleaves, [c.to(r.dtype) for c, r in zip(cot, routs, strict=True)],
                                 allow_unused=True)  # fmt: skip
        for k, (a, b) in enumerate(zip(g, rg, strict=True)):
            if (a is None) != (b is None):
                raise AssertionError(f"{dtp}: gradient of input {k} is {'missing' if a is None else 'present'}, "
                                     f"the reference's is not")  # fmt: skip
            if a is not None:
                tol = case.tolerance(dtp)
                if dtp not in (torch.float16, torch.bfloat16):  # a gradient sums over a row: allow its rounding
                    tol = {"atol": max(tol.get("atol", 1e-5), 1e-4), "rtol": max(tol.get("rtol", 1.3e-6), 1e-4)}
                torch.testing.assert_close(a, b.to(a.dtype), **tol,
                                           msg=lambda m, k=k, d=dtp: f"{d}: gradient of input {k}: {m}")  # fmt: skip
    notes.append(f"gradients match the reference's ({', '.join(str(d) for d in case.dtypes)})")
    if torch.float64 in case.dtypes:
        small = tuple(min(d, 8) for d in shape)
        args = [a.detach().requires_grad_() if _is_float(a) else a for a in case.inputs(small, torch.float64, device)]

        def differentiated(*a: Any) -> tuple:
            return tuple(o for o in _as_tuple(case.op(*a)) if isinstance(o, torch.Tensor) and o.requires_grad)

        torch.autograd.gradcheck(differentiated, args, eps=1e-6, atol=1e-5, rtol=1e-3)
        notes.append(f"gradcheck float64 {small}")
    else:
        notes.append("gradcheck skipped: float64 is not among the dtypes")
    return "; ".join(notes)


def _fake_inputs(case: CheckCase, shape: Shape, fake: Any) -> tuple:
    with fake:
        try:
            return case.inputs(tuple(shape), case.dtypes[0], torch.device("cuda"))
        except Exception as e:
            raise _Skip(f"the case's inputs() cannot build fake CUDA tensors here ({type(e).__name__}: "
                        f"{str(e).splitlines()[0][:100]}); nothing to trace") from None  # fmt: skip


def _trace_compile(case: CheckCase, dynamic: bool, solver: ShapeSolver) -> str:
    """torch.compile(fullgraph=True) traced on fake CUDA tensors (no GPU here): one graph, no break, the op in
    it, the traced outputs' shapes the op's own. Nothing runs."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    graphs: list = []

    def backend(gm: Any, _inputs: Any) -> Any:
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    fake = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
    fn = torch.compile(lambda *a: case.op(*a), fullgraph=True, dynamic=dynamic, backend=backend)
    shapes = _grown(case, solver, case.dtypes[0], 3 if dynamic else 1)
    for s in shapes:
        args = _fake_inputs(case, s, fake)
        with fake:
            got, want = _as_tuple(fn(*args)), _as_tuple(case.op(*args))
        if [tuple(t.shape) for t in got] != [tuple(t.shape) for t in want]:
            raise AssertionError(
                f"traced outputs {[tuple(t.shape) for t in got]}, the op's {[tuple(t.shape) for t in want]}"
            )
    ov = case.overload
    if ov is not None and not any(n.target == ov for g in graphs for n in g.graph.nodes):
        raise AssertionError(f"no traced graph calls {ov.name()}")
    return f"traced on fake CUDA tensors (nothing ran): fullgraph, {len(graphs)} graph(s), shapes {shapes}"


def _trace_export(case: CheckCase, solver: ShapeSolver) -> str:
    """torch.export with dynamic dims, traced on fake CUDA tensors: the graph calls the op and records its
    outputs with the shapes the op gives."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.export import Dim
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    class _M(torch.nn.Module):
        def forward(self, *args):
            return case.op(*args)

    fake = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
    (first,) = _grown(case, solver, case.dtypes[0], 1)
    args = _fake_inputs(case, first, fake)
    dyn = tuple({i: Dim.AUTO for i in range(a.dim())} if isinstance(a, torch.Tensor) else None for a in args)
    with fake:
        ep = torch.export.export(_M(), tuple(args), dynamic_shapes=(dyn,))
        eager_out = case.op(*args)
    ov = case.overload
    if ov is not None and not any(n.target is ov for n in ep.graph.nodes):
        raise AssertionError(f"the exported graph does not call {ov.name()}: {ep.graph}")
    _check_exported_shapes(ep, eager_out)
    return f"traced on fake CUDA tensors (nothing ran): dynamic dims, the graph calls the op, shape {first}"


def _runner(case: CheckCase, dev: torch.device) -> tuple[str, str]:
    """What serves the op's calls on ``dev``: ("kernel", "") where its kernel runs (a GPU; Triton's interpreter
    on CPU); ("reference", why) where its CPU ``reference=`` runs in the kernel's place; ("fake", why) where it
    runs nowhere here (CUDA only, no GPU): those rows that tracing can show run on fake CUDA tensors."""
    if dev.type == "cuda":
        return "kernel", ""
    gpu = "no GPU here" if not torch.cuda.is_available() else "pass device='cuda'"
    from ..torchlib.registration import Op

    if isinstance(case.op, Op):
        if getattr(case.op, "reference", None) is not None:
            return "reference", (f"on {dev} the op runs its reference= in the kernel's place ({gpu}): nothing of the "
                                 "kernel ran, so nothing of it is checked here")  # fmt: skip
        if case.op.record.flavor == "triton" and getattr(case.op.variants.sources[0], "interpreted", False):
            return "kernel", ""  # TRITON_INTERPRET=1: the interpreter runs the kernel on CPU tensors
    try:
        case.op(*case.inputs(tuple(case.shapes[0]), case.dtypes[0], dev))
    except (InputError, NotImplementedError) as e:
        # opsmith's guard ("expected a CUDA tensor"), or the dispatcher: no kernel for this device (an eager_fn)
        if getattr(e, "expected", None) == "a CUDA tensor" or f"from the '{dev.type.upper()}' backend" in str(e):
            return "fake", f"the op runs on CUDA tensors only and the device is {dev} ({gpu})"
    except Exception:  # any other failure is the checks' to report
        return "kernel", ""
    return "kernel", ""


def check(case: CheckCase, *, device: str | torch.device | None = None, examples: int = 25,
          compile_backend: str = "inductor", only: Sequence[str] | None = None,
          isolate: bool | None = None, origin: tuple[str, int] | None = None) -> CheckReport:  # fmt: skip
    """Run every check (or those named in ``only``, from ``CHECKS``) on ``case``; never raises for a failing
    check: each failure is a FAIL row with its reason. ``device``: default cuda when available, else cpu.
    ``isolate``: run the rows that launch the kernel in a forked child, so a crash is a FAIL row (default: on
    CPU, where Triton's interpreter runs the kernel; never where CUDA is initialized, which cannot fork).
    ``origin``: how a new process finds the case again, ``("MODULE:NAME", k)`` for the k-th case the target names
    (``opsmith check`` passes it): isolated rows then run in spawned children, not forked ones (``child.py``).

    Every sample is first fitted to the op's declared preconditions (``check_samples``): a correct op's
    ``InputError`` for a shape it declares it cannot take is never counted against it.

    A row says ``pass`` only where the op's kernel ran and matched. Where it cannot run here (CUDA only, no GPU;
    or a CPU ``reference=`` serving CPU tensors in its place), the compile and export rows trace the op on fake
    CUDA tensors (``traced``: nothing ran) and the others skip, saying why."""
    from ..torchlib.registration import Op

    if not isinstance(case, CheckCase):
        what = "an opsmith op" if isinstance(case, Op | torch._ops.OpOverload) else type(case).__name__
        raise SpecError("opsmith check", "case", f"check() takes a CheckCase, not {what}.",
                        "wrap the op: ok.CheckCase(op, inputs=lambda shape, dtype, device: (torch.randn(shape, "
                        "device=device, dtype=dtype),), reference=...) (reference= may be left out when the op "
                        "was registered with one).")  # fmt: skip
    dev = torch.device(device if device is not None else ("cuda" if torch.cuda.is_available() else "cpu"))
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    name = f"{dev} ({torch.cuda.get_device_name(dev)})" if dev.type == "cuda" else str(dev)
    report = CheckReport(case.label, name)
    case = blamed(case)  # the case's own exceptions are its ERROR rows, not the op's FAIL
    solver = ShapeSolver(case, dev)  # every sample fitted to the op's declared preconditions
    runs: dict[str, Callable[[], str]] = {
        "opcheck": lambda: _check_opcheck(case, dev, solver),
        "numerics": lambda: _check_numerics(case, dev, examples, solver),
        "compile-static": lambda: _check_compile(case, dev, False, compile_backend, solver),
        "compile-dynamic": lambda: _check_compile(case, dev, True, compile_backend, solver),
        "export": lambda: _check_export(case, dev, solver),
        "cuda-graph": lambda: _check_cuda_graph(case, dev, solver),
        "stream": lambda: _check_stream(case, dev, solver),
        "autograd": lambda: _check_autograd(case, dev, solver),
        "sharding": lambda: check_sharding(case, dev, solver),
    }
    unknown = set(only or ()) - set(runs)
    if unknown:
        raise ValueError(f"check(only=...): unknown checks {sorted(unknown)}. Fix: choose from {list(CHECKS)}.")
    runner, why = _runner(case, dev)
    if isolate is None:
        isolate = dev.type == "cpu" and runner == "kernel"
    isolate = bool(isolate) and (origin is not None or can_fork())
    traced: dict[str, Callable[[], str]] = {
        "compile-static": lambda: _trace_compile(case, False, solver),
        "compile-dynamic": lambda: _trace_compile(case, True, solver),
        "export": lambda: _trace_export(case, solver),
    }
    for c in CHECKS:
        if only is not None and c not in only:
            continue
        torch.manual_seed(0x5EED + len(report.rows))
        result, run = "pass", runs[c]
        if runner != "kernel" and c in traced:
            result, run = "traced", traced[c]
        elif runner != "kernel" and c not in ("cuda-graph", "stream"):
            report.rows.append((c, "skip", why))
            continue
        row = _row_runner(result, run)
        if isolate and c in _RISKY and origin is not None:
            r, detail, hidden = spawned(origin, c, dev, examples, compile_backend)
        else:
            r, detail, hidden = in_child(row) if isolate and can_fork() and c in _RISKY else row()
        report.rows.append((c, r, detail))
        report.hidden_warnings += hidden
    return report


# The rows that run the kernel on many samples; under Triton's interpreter a kernel's stray store can abort the
# process (``check_child``), so on CPU these run in a forked child.
_RISKY = ("opcheck", "numerics", "compile-static", "compile-dynamic", "export", "autograd", "sharding")


def _row_runner(result: str, run: Callable[[], str]) -> Callable[[], tuple[str, str, int]]:
    """The row as (result, detail, deprecation warnings hidden). torch and Triton warn of their own deprecations
    while a row traces, compiles and exports (27 lines above the table of a round-four kernel on an H200); they
    say nothing of the op, so they are counted, not printed, unless ``OPSMITH_CHECK_WARNINGS=1``."""

    def row() -> tuple[str, str, int]:
        with warnings.catch_warnings(record=not env.CHECK_WARNINGS.get()) as caught:
            if caught is not None:
                warnings.simplefilter("always")
            out = _outcome(result, run)
        if caught is None:
            return (*out, 0)
        deprecations = [w for w in caught if issubclass(w.category, DeprecationWarning | FutureWarning)]
        for w in caught:  # anything else is shown as it would have been
            if w not in deprecations:
                warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
        return (*out, len(deprecations))

    return row


def _outcome(result: str, run: Callable[[], str]) -> tuple[str, str]:
    try:
        return result, run()
    except _Skip as s:
        return "skip", str(s)
    except CaseError as e:
        return "ERROR", str(e)
    except Exception as e:
        msg = str(e).strip() or type(e).__name__
        return "FAIL", f"{type(e).__name__}: {msg}"


def assert_check_passes(case: CheckCase, **kwargs: Any) -> CheckReport:
    """The pytest helper: ``check(case, **kwargs)``, raising AssertionError with the table on any failure."""
    report = check(case, **kwargs)
    if not report.ok:
        raise AssertionError("\n" + report.table())
    return report
