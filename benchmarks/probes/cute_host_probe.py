"""Where the host time of a CuTe DSL op call goes (GPU): the opsmith op call, the flavor's launch, the DSL's
``__call__`` with prepared arguments, and the DSL executor with prepared C arguments; plus a cProfile of the
op call. The CUDA C++ RMSNorm forward is timed beside it.

    python benchmarks/cute_host_probe.py
"""

import cProfile
import pstats
import time

import torch

from opsmith.ops.rmsnorm import rmsnorm_ops


def per_call(fn, calls: int = 2000) -> float:
    fn()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(calls):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t) / calls * 1e6


def main() -> None:
    x = torch.randn(64, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    cuda_fwd, _ = rmsnorm_ops("cuda")
    fwd, _ = rmsnorm_ops("cute")
    print(
        f"op call: cuda {per_call(lambda: cuda_fwd(x, w, 1e-6)):.1f} us, cute {per_call(lambda: fwd(x, w, 1e-6)):.1f} us"
    )
    kernel = next(iter(fwd.variants.kernels.values()))
    kernel = getattr(kernel, "kernel", kernel)
    y = torch.empty_like(x)
    values = (x.data_ptr(), w.data_ptr(), 1e-6, x.numel(), y.data_ptr())
    print(f"CuteKernel.launch: {per_call(lambda: kernel.launch(0, *values)):.1f} us")
    args = [v if c is None else c(v) for c, v in zip(kernel._convert, values, strict=True)]
    from opsmith.flavors.launch import _STREAMS, _raw_stream

    s = _STREAMS[_raw_stream(0)]
    print(f"DSL __call__ with prepared args: {per_call(lambda: kernel.fn(*args, s)):.1f} us")
    fn = kernel.fn
    exe_args, _ = (
        fn.execution_args.generate_execution_args((*args, s), {}) if hasattr(fn, "execution_args") else (None, None)
    )
    if exe_args is not None:
        fn(*args, s)
        ex = fn._default_executor if getattr(fn, "_default_executor", None) is not None else fn
        print(f"executor with prepared C args: {per_call(lambda: ex.run_compiled_program(exe_args)):.1f} us")
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(2000):
        fwd(x, w, 1e-6)
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    # The backward: autograd, the backward program (two buffers, two ops), for the CUDA C++ and CuTe DSL ops.
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    dy = torch.randn_like(x)
    for name, op in (("cuda", cuda_fwd), ("cute", fwd)):
        print(
            f"fwd+bwd {name}: {per_call(lambda op=op: torch.autograd.grad(op(xg, wg, 1e-6), (xg, wg), dy), 500):.1f} us"
        )
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(500):
        torch.autograd.grad(fwd(xg, wg, 1e-6), (xg, wg), dy)
    torch.cuda.synchronize()
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(30)


if __name__ == "__main__":
    main()
