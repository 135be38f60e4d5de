"""The numerics row of ``opsmith check``: the op against its reference on the fixed samples, on samples where one
input at a time is strided (a kernel addressing several tensors with one's strides shows only there), and on
hypothesis-drawn shapes and dtypes, every shape fitted to the op's preconditions (``check_samples``) and every
output landing in poisoned memory. A failure is narrowed down (``check_explain``) before it is reported."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ..errors import InputError
from .case import CaseError, CheckCase, Shape, _describe, _run_and_compare, noncontiguous
from .explain import explain, mixed_layouts
from .samples import ShapeSolver

__all__ = ["check_numerics"]


def _failure(case: CheckCase, args: Sequence, dt: torch.dtype, what: str, e: Exception, shape: Shape | None,
             solver: ShapeSolver) -> AssertionError:  # fmt: skip
    """The row's error: what failed, then what makes it pass (when something tried does)."""

    def passes(variant: Sequence) -> bool:
        try:
            _run_and_compare(case, variant, dt, what)
        except Exception:
            return False
        return True

    why = explain(case, args, dt, passes, shape, solver)
    head = f"{what} fails; {why}" if why else f"{what} fails"
    return AssertionError(f"{head}\n{type(e).__name__}: {e}")


def check_numerics(case: CheckCase, device: torch.device, examples: int, solver: ShapeSolver) -> str:
    done, poison = 0, True
    written = case.written_args()
    for dt in case.dtypes:
        samples = case.samples(device, dt, solver)
        # The case's own shapes, fitted to the preconditions and contiguous: calls the op must take. The rest
        # (a strided copy, an empty problem, mixed layouts) it may refuse with a clear error.
        valid = sum(1 for s in case.shapes if solver.fit(tuple(s), dt) is not None)
        last = solver.fit(tuple(case.shapes[-1]), dt)
        if last is not None:  # one input strided at a time, the others contiguous
            samples += mixed_layouts(case.inputs(last, dt, device), written)
        ran = 0
        for k, args in enumerate(samples):
            what = f"{dt} sample {k} ({_describe(args)})"
            try:
                poison &= _run_and_compare(case, args, dt, what)
            except InputError as e:
                if k < valid:
                    raise AssertionError(f"{what} is refused: {e} (a contiguous call of the case's shapes, fitted "
                                         "to the preconditions: the declaration refuses what the case says the op "
                                         "takes)") from None  # fmt: skip
                continue  # refused with a clear error (listed by opcheck's row)
            except AssertionError as e:
                raise _failure(case, args, dt, what, e, None, solver) from None
            ran += 1
        if ran == 0:
            raise AssertionError(f"no fixed sample of {dt} ran: the op refused every one")
        done += ran
    try:
        from hypothesis import HealthCheck, given, settings
        from hypothesis import strategies as st
    except ImportError:
        return f"{done} fixed samples; hypothesis is not installed (pip install hypothesis) for drawn shapes"
    bounds = [tuple(max(2 * d, 4) for d in s) for s in case.shapes]
    failing: list = []
    shapes = st.sampled_from(bounds).flatmap(lambda b: st.tuples(*(st.integers(1, d) for d in b)))

    @settings(max_examples=examples, deadline=None, database=None, derandomize=True, print_blob=False,
              suppress_health_check=list(HealthCheck))  # fmt: skip
    @given(shape=shapes, dt=st.sampled_from(list(case.dtypes)), strided=st.booleans())
    def drawn(shape: Shape, dt: torch.dtype, strided: bool) -> None:
        fitted = solver.fit(shape, dt)  # the nearest shape the op's preconditions accept
        if fitted is None:
            return
        args = case.inputs(fitted, dt, device)
        if strided:
            args = tuple(a if k in written else noncontiguous(a) for k, a in enumerate(args))
        what = f"{dt} {_describe(args)}"
        try:
            _run_and_compare(case, args, dt, what)
        except Exception as e:
            if strided and isinstance(e, InputError):
                return  # a declared contiguous="require" refusal
            failing[:] = [(args, dt, what, e, fitted)]  # hypothesis shrinks: the last one is the smallest
            raise

    try:
        drawn()
    except CaseError:
        raise  # the case's own builder or reference: its ERROR row, whichever draw met it
    except Exception as e:
        if not failing:
            raise AssertionError(f"smallest failing draw: {type(e).__name__}: {e}") from None
        if isinstance(failing[0][3], CaseError):
            raise failing[0][3] from None
        args, dt, what, err, shape = failing[0]
        raise _failure(case, args, dt, f"smallest failing draw, {what}", err, shape, solver) from None
    where = "outputs in poisoned memory" if poison else "outputs not poisoned (no CUDA MemPool here)"
    return f"{done} fixed samples + {examples} hypothesis draws over {', '.join(str(d) for d in case.dtypes)}; {where}"
