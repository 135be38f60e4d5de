"""JAX's x64 flag for a block of a test, put back after it (the flag is process-wide: left on, every later JAX
test on the worker gets float64 arrays; conftest.py fails a test that leaves it changed)."""

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def x64() -> Iterator[None]:
    import jax

    before = bool(jax.config.jax_enable_x64)
    jax.config.update("jax_enable_x64", True)
    try:
        yield
    finally:
        jax.config.update("jax_enable_x64", before)
