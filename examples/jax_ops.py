"""opsmith ops in JAX: the RMSNorm ops and three catalog ops, each from its one PyTorch declaration.

``jax_examples(ns)`` registers them under namespace ``ns`` and returns ``{name: JaxOp}``:

- ``rmsnorm_cuda`` / ``rmsnorm_triton``: RMSNorm (CUDA C++ / Triton); ``jax.grad`` runs the declared backward
  program (the backward kernel, whose partial sums XLA aliases in place, then the dweight kernel);
  ``jax.vmap`` maps over the ``"*B"`` rows.
- ``row_minmax``: a CUDA C++ row reduction with two ``ReduceDims`` outputs.
- ``softmax_tt``: a tuned Triton softmax; the first call of a shape on a GPU tunes it, as in PyTorch.
- ``axpy_inplace``: ``x += alpha * y`` in place (``mutates=True``): in JAX it returns the new ``x``.

    python -m examples.jax_ops      # on a GPU: each op against a jax.numpy reference
"""

from __future__ import annotations

import sys
from typing import Any

from examples.catalog.basic import register_all
from examples.catalog.tuned import register_tuned, triton_available
from opsmith.jax import jax_op
from opsmith.ops.rmsnorm import rmsnorm_ops


def jax_examples(ns: str) -> dict[str, Any]:
    """The example ops as JAX functions, registered under ``ns``."""
    basic, tuned = register_all(ns), register_tuned(ns)
    ex = {"rmsnorm_cuda": jax_op(rmsnorm_ops("cuda", ns)[0]), "row_minmax": jax_op(basic["row_minmax"].op),
          "axpy_inplace": jax_op(tuned["axpy_inplace"].op)}  # fmt: skip
    if triton_available():
        ex["rmsnorm_triton"] = jax_op(rmsnorm_ops("triton", ns)[0])
        ex["softmax_tt"] = jax_op(tuned["softmax_tt"].op)
    return ex


def references() -> dict[str, Any]:
    """The jax.numpy reference of each example (float32 accumulation, the result in the input's dtype)."""
    import jax
    import jax.numpy as jnp

    def rmsnorm(x: Any, w: Any, eps: float) -> Any:
        a = x.astype(jnp.float32)
        y = a * jax.lax.rsqrt(jnp.mean(a * a, axis=-1, keepdims=True) + eps)
        return (y * w.astype(jnp.float32)).astype(x.dtype)

    return {
        "rmsnorm_cuda": rmsnorm,
        "rmsnorm_triton": rmsnorm,
        "row_minmax": lambda x: (jnp.min(x, -1, keepdims=True), jnp.max(x, -1, keepdims=True)),
        "softmax_tt": lambda x: jax.nn.softmax(x.astype(jnp.float32), -1).astype(x.dtype),
        "axpy_inplace": lambda x, y, alpha: x + alpha * y,
    }


def main() -> int:
    import jax
    import jax.numpy as jnp

    if jax.default_backend() != "gpu":
        print(f"examples.jax_ops: JAX sees no GPU (backend {jax.default_backend()!r}); the handlers run on one.")
        return 0
    ex, ref, key = jax_examples("jaxdemo"), references(), jax.random.key(0)
    x, y = jax.random.normal(key, (64, 4096), jnp.float32), jax.random.normal(jax.random.key(1), (64, 4096))
    w = 1 + 0.25 * jax.random.normal(jax.random.key(2), (4096,))
    # (arrays, scalars) per op: the scalars are static, the arrays traced under jax.jit.
    args = {"rmsnorm_cuda": ((x, w), (1e-6,)), "rmsnorm_triton": ((x, w), (1e-6,)), "row_minmax": ((x,), ()),
            "softmax_tt": ((x,), ()), "axpy_inplace": ((x, y), (-0.5,))}  # fmt: skip
    bad = 0
    for name, op in ex.items():
        arrays, scalars = args[name]
        got = jax.jit(lambda *a, op=op, s=scalars: op(*a, *s))(*arrays)
        want = ref[name](*arrays, *scalars)
        pairs = zip(got, want, strict=True) if isinstance(got, tuple) else [(got, want)]
        err = max(float(jnp.max(jnp.abs(g.astype(jnp.float32) - r.astype(jnp.float32)))) for g, r in pairs)
        ok = err < 1e-4
        bad += not ok
        print(f"{name:16s} {'ok' if ok else 'MISMATCH'}  max |jax op - jax.numpy| = {err:.2e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
