"""RMSNorm in JAX: the opsmith ops (XLA handlers generated from the PyTorch declaration, CUDA C++ and Triton)
against ``jax.jit`` of a ``jax.numpy`` RMSNorm, forward and forward+backward, side by side in one run.

Times are medians over 15 repeats of 20 back-to-back calls of the jitted function, each repeat ended by
``block_until_ready`` (the tensors, 268 MB each at the main shape, are 5x the L2, so no flush is needed).
Forward+backward is ``jax.vjp`` of the function with a given output gradient, returning y, dx and dweight (a
vjp whose y is unused lets XLA drop the forward). The PyTorch opsmith ops are timed the same way (wall clock
around 20 calls, synchronized; after ``bench_rmsnorm.warm_up``, so their native libraries serve them) for
reference; the copy time of a tensor of x's size is measured in the same run.

Where a gap to PyTorch comes from (issue 39, item 5): "chained" runs CHAIN forwards inside one jitted function,
so XLA's cost per executable run is paid once for CHAIN kernels; "zeroed" runs forward+backward with the
program's buffers zeroed (``jnp.zeros``, what opsmith.jax did before ``jax.lax.empty``), so the difference is
the zeroing.

    python benchmarks/bench_jax_rmsnorm.py [--out bench-results/jax_rmsnorm.json] [--shape 8x4096x4096]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from typing import Any

import torch

EPS = 1e-6
CHAIN = 10


def _median_ms(run: Any, sync: Any, repeats: int = 15, calls: int = 20) -> float:
    for _ in range(3):
        sync(run())
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls - 1):
            run()
        sync(run())
        times.append((time.perf_counter() - t0) / calls * 1e3)
    return statistics.median(times)


def _forward_backward(f: Any, x: Any, w: Any, dy: Any) -> tuple:
    """y, dx and dweight: y is returned, so XLA cannot drop the forward as dead code."""
    import jax

    y, pull = jax.vjp(lambda x, w: f(x, w, EPS), x, w)
    return (y, *pull(dy))


def _chain(f: Any, x: Any, w: Any) -> Any:
    """CHAIN forwards in one executable, each on the last one's output (RMSNorm of a normalized row is
    itself, so the values stay finite)."""
    for _ in range(CHAIN):
        x = f(x, w, EPS)
    return x


def _zeroed(torch_op: Any, x: Any, w: Any, dy: Any, sync: Any) -> float:
    """Forward+backward with the backward program's buffers zeroed, as opsmith.jax allocated them before: a
    fresh wrapper of the op (JAX keeps an existing wrapper's traced backward), traced with ``jnp.zeros``."""
    import jax
    import jax.numpy as jnp

    from opsmith.jax import jax_op
    from opsmith.jax import op as jax_op_module

    empty, f = jax_op_module.new_buffer, jax_op(torch_op)
    jax_op_module.new_buffer = jnp.zeros
    try:
        both = jax.jit(lambda x, w, dy: _forward_backward(f, x, w, dy))
        text = both.lower(x, w, dy).as_text()  # traced now, with the zeros
        assert "AllocateBuffer" not in text, "bench_jax_rmsnorm: the zeroed variant reused a traced backward"
        both(x, w, dy)
    finally:
        jax_op_module.new_buffer = empty
    return _median_ms(lambda: both(x, w, dy), sync)


def run(shape: tuple[int, ...]) -> dict:
    import jax
    import jax.numpy as jnp

    from examples.jax_ops import jax_examples, references
    from opsmith.ops.rmsnorm import rmsnorm_ops

    ops, ref = jax_examples("jaxbench"), references()
    x = jax.random.normal(jax.random.key(0), shape, jnp.float32).astype(jnp.bfloat16)
    w = (1 + 0.25 * jax.random.normal(jax.random.key(1), shape[-1:], jnp.float32)).astype(jnp.bfloat16)
    dy = jax.random.normal(jax.random.key(2), shape, jnp.float32).astype(jnp.bfloat16)

    def jsync(out: Any) -> None:
        jax.block_until_ready(out)

    rows: dict[str, dict] = {}
    impls = {"jax.jit(jax.numpy)": ref["rmsnorm_cuda"]}
    impls |= {f"opsmith {k.removeprefix('rmsnorm_')} (JAX)": ops[k] for k in ("rmsnorm_cuda", "rmsnorm_triton")
              if k in ops}  # fmt: skip
    for name, f in impls.items():
        fwd = jax.jit(lambda x, w, f=f: f(x, w, EPS))
        both = jax.jit(lambda x, w, dy, f=f: _forward_backward(f, x, w, dy))
        chained = jax.jit(lambda x, w, f=f: _chain(f, x, w))
        rows[name] = {"forward_ms": _median_ms(lambda fwd=fwd: fwd(x, w), jsync),
                      "forward_chained_ms": _median_ms(lambda c=chained: c(x, w), jsync, calls=4) / CHAIN,
                      "forward_backward_ms": _median_ms(lambda both=both: both(x, w, dy), jsync)}  # fmt: skip
        if name.startswith("opsmith"):
            torch_op = rmsnorm_ops(name.split()[1], "jaxbench")[0]
            rows[name]["forward_backward_zeroed_ms"] = _zeroed(torch_op, x, w, dy, jsync)

    def tsync(_: Any) -> None:
        torch.cuda.synchronize()

    from benchmarks.bench_rmsnorm import warm_up

    xt, wt, dyt = (torch.from_dlpack(a).clone() for a in (x, w, dy))
    impls_t = {impl: rmsnorm_ops(impl, "jaxbench")[0] for impl in ("cuda", "triton") if f"opsmith {impl} (JAX)" in rows}
    warm_up({k: (lambda x, w, op=op: op(x, w, EPS)) for k, op in impls_t.items()}, xt, wt, dyt)
    for impl, op in impls_t.items():
        xg, wg = xt.clone().requires_grad_(), wt.clone().requires_grad_()

        def fb(op: Any = op, xg: Any = xg, wg: Any = wg) -> Any:
            y = op(xg, wg, EPS)
            return y, *torch.autograd.grad(y, (xg, wg), dyt)

        rows[f"opsmith {impl} (PyTorch)"] = {
            "forward_ms": _median_ms(lambda op=op: op(xt, wt, EPS), tsync),
            "forward_backward_ms": _median_ms(fb, tsync),
        }
    copy = _median_ms(lambda: xt.clone(), tsync)
    nbytes = xt.numel() * xt.element_size()
    return {"shape": list(shape), "dtype": "bfloat16", "device": torch.cuda.get_device_name(),
            "jax": jax.__version__, "copy_ms": copy, "copy_GBps": 2 * nbytes / copy / 1e6, "rows": rows}  # fmt: skip


def summary(result: dict) -> str:
    lines = [f"RMSNorm in JAX, {tuple(result['shape'])} bf16, {result['device']} (jax {result['jax']}; "
             f"copy of x {result['copy_ms'] * 1e3:.1f} us; (speed-up over jax.jit(jax.numpy)), medians):"]  # fmt: skip
    base = result["rows"]["jax.jit(jax.numpy)"]
    for name, r in result["rows"].items():
        lines.append(f"  {name:28s} forward {r['forward_ms'] * 1e3:8.1f} us ({base['forward_ms'] / r['forward_ms']:.2f}x"
                     f")   forward+backward {r['forward_backward_ms'] * 1e3:8.1f} us "
                     f"({base['forward_backward_ms'] / r['forward_backward_ms']:.2f}x)")  # fmt: skip
    lines.append(
        f"  where the JAX-vs-PyTorch gap goes, us ({CHAIN} forwards in one jit, per forward; forward+backward"
        " with the program's buffers zeroed):"
    )
    for name, r in result["rows"].items():
        if "forward_chained_ms" in r:
            zeroed = r.get("forward_backward_zeroed_ms")
            lines.append(f"  {name:28s} forward chained {r['forward_chained_ms'] * 1e3:8.1f}" +
                         ("" if zeroed is None else f"   forward+backward zeroed {zeroed * 1e3:8.1f}"))  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default="bench-results/jax_rmsnorm.json")
    p.add_argument("--shape", default="8x4096x4096")
    a = p.parse_args(argv)
    import jax

    if jax.default_backend() != "gpu" or not torch.cuda.is_available():
        print("bench_jax_rmsnorm: needs a GPU seen by both JAX and PyTorch.")
        return 1
    result = run(tuple(int(s) for s in a.shape.split("x")))
    from pathlib import Path

    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(result, indent=1))
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
