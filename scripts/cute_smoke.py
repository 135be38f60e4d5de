"""What the CuTe DSL flavor (issue 16) will rest on, checked where it runs: run with the carried packages on
the PYTHONPATH (scripts/cute-dsl-carry).

    python scripts/cute_smoke.py

1. ``cute.compile`` of a host function that takes opsmith's calling convention (tensors as pointers to their
   first element, sizes and scalars by value, the stream last), with and without a GPU: its compile time.
2. The compiled function exported to an ELF object (``dump_to_object``: what a disk cache would store), loaded
   back (``cute.runtime.load_module``), and the per-call host cost of calling it.
3. On a GPU: both launched on a side stream (torch's current stream) and checked against ``x * alpha``.
4. quack's RMSNorm (the benchmark's peer), when importable, against ``F.rms_norm`` at (8, 4096, 4096) bf16.
Prints one line per step and a last summary line.
"""

import importlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch


def main() -> int:
    t0 = time.perf_counter()
    import cuda.bindings.driver as cuda
    import cutlass
    import cutlass.cute as cute
    from cutlass.cute.runtime import load_module, make_ptr

    print(f"import cutlass {cutlass.__version__}: {time.perf_counter() - t0:.2f} s")

    @cute.kernel
    def scale_kernel(x: cute.Tensor, y: cute.Tensor, alpha: cutlass.Float32, n: cutlass.Int32):
        tidx, _, _ = cute.arch.thread_idx()
        bidx, bdim = cute.arch.block_idx()[0], cute.arch.block_dim()[0]
        i = bidx * bdim + tidx
        if i < n:
            y[i] = x[i] * alpha

    @cute.jit
    def scale(x: cute.Pointer, alpha: cutlass.Float32, n: cutlass.Int32, y: cute.Pointer, BLOCK: cutlass.Constexpr,
              stream: cuda.CUstream):  # fmt: skip
        layout = cute.make_layout(n)
        scale_kernel(cute.make_tensor(x, layout), cute.make_tensor(y, layout), alpha, n).launch(
            grid=((n + BLOCK - 1) // BLOCK, 1, 1), block=(BLOCK, 1, 1), stream=stream
        )

    def ptr(address: int):
        return make_ptr(cutlass.Float32, address, cute.AddressSpace.gmem, assumed_align=16)

    t0 = time.perf_counter()
    compiled = cute.compile(scale, ptr(16), 2.0, 1000, ptr(32), 256, cuda.CUstream(0))
    print(f"cute.compile (pointer convention): {time.perf_counter() - t0:.3f} s")
    obj = compiled.dump_to_object("opsmith_scale")
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "scale.o"
        path.write_bytes(obj)
        loaded = load_module(str(path)).opsmith_scale
    print(f"dump_to_object: {len(obj)} bytes; load_module: {type(loaded).__name__}")
    if not torch.cuda.is_available():
        print("SUMMARY cute: compiles here (no GPU to launch on)")
        return 0

    n = 1 << 20
    x = torch.randn(n, device="cuda")
    ok = []
    side = torch.cuda.Stream()
    for name, fn in (("compiled", compiled), ("loaded", loaded)):
        y = torch.full_like(x, float("nan"))
        with torch.cuda.stream(side):
            side.wait_stream(torch.cuda.current_stream())
            fn(ptr(x.data_ptr()), 3.0, n, ptr(y.data_ptr()), cuda.CUstream(side.cuda_stream))
        torch.cuda.current_stream().wait_stream(side)
        ok.append(torch.equal(y, x * 3.0))
        host = []
        for _ in range(200):
            t = time.perf_counter()
            fn(ptr(x.data_ptr()), 3.0, n, ptr(y.data_ptr()), cuda.CUstream(side.cuda_stream))
            host.append((time.perf_counter() - t) * 1e6)
        torch.cuda.synchronize()
        print(f"{name}: result {'matches' if ok[-1] else 'DIFFERS'}; host time per call (make_ptr x2 + call) "
              f"median {statistics.median(host):.1f} us")  # fmt: skip
    quack = _quack()
    print(f"SUMMARY cute on {torch.cuda.get_device_name()}: launch on a side stream "
          f"{'correct' if all(ok) else 'WRONG'} (compiled and loaded); quack: {quack}")  # fmt: skip
    return 0 if all(ok) else 1


def _quack() -> str:
    try:  # the module: the package re-exports a function of the same name, which `import ... as` would bind
        qr = importlib.import_module("quack.rmsnorm")
    except Exception as e:  # not carried, or another CuTe DSL version
        return f"not importable ({type(e).__name__}: {e})"
    import torch.nn.functional as F

    x = torch.randn(8, 4096, 4096, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(4096, device="cuda", dtype=torch.bfloat16)
    fn = getattr(qr, "rmsnorm", None)
    if fn is None:
        return f"no quack.rmsnorm.rmsnorm (has {sorted(n for n in dir(qr) if not n.startswith('_'))[:8]})"
    y = fn(x, w, eps=1e-6)
    want = F.rms_norm(x.float(), (4096,), w.float(), 1e-6)
    err = (y.float() - want).abs().max().item()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(20):
        start.record()
        fn(x, w, eps=1e-6)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return f"rmsnorm (8, 4096, 4096) bf16 max |err| {err:.3g}, forward median {statistics.median(times):.1f} us"


if __name__ == "__main__":
    sys.exit(main())
