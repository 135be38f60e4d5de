"""The example catalog: one op of each kind the declaration supports, each with inputs and a PyTorch reference.

- ``basic``: CUDA C++ and PTX ops (elementwise, reductions, named dimensions, a size expression, a scalar).
- ``tuned``: ops with tuning configs (CUDA C++ templates and defines, in place) and Triton ops.
- ``shapes``: what only named dimensions can declare (matmul, embedding, packed float4).
- ``published``: published Triton kernels registered unchanged (``@triton.autotune``, ``@triton.heuristics``).

Each ``register_*(ns)`` registers its ops under namespace ``ns`` (each test module uses its own) and returns
``{name: CheckCase}``, ready for ``opsmith.check``. The demo, the tests and the benchmarks use them.
"""

from __future__ import annotations

from opsmith import CheckCase

__all__ = ["shipped_cases"]


def shipped_cases(ns: str = "opsmith_examples") -> list[CheckCase]:
    """Every example op and the shipped RMSNorm ops as conformance cases:
    ``opsmith check examples.catalog:shipped_cases`` (from the repository root)."""
    from opsmith.ops.rmsnorm import check_cases

    from .basic import register_all
    from .shapes import register_shapes
    from .tuned import register_tuned

    cases = {**register_all(ns), **register_tuned(ns), **register_shapes(ns)}
    return [*(c for _, c in sorted(cases.items())), *check_cases()]
