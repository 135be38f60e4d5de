"""Probe (issue 40, item 2): a constexpr set per call through opsmith.jax on a GPU (the XLA handler keys its
variant by the scalar as the ATen library does). PYTHONPATH=. python benchmarks/probes/jax_constexpr_scalar.py"""

import jax
import jax.numpy as jnp

from examples.catalog.rows import register_rows
from opsmith.jax import jax_op

ops = register_rows("jxg")
f = jax.jit(lambda x, ls: jax_op(ops["smooth"])(x, ls), static_argnums=1)
x = jax.nn.softmax(jax.random.normal(jax.random.key(0), (8, 1000)), -1)
for ls in (0.0, 0.1, 0.2):
    y = f(x, ls)
    want = x * (1 - ls) + ls / 1000 if ls else x
    print("jax smooth", ls, float(jnp.max(jnp.abs(y - want))))
