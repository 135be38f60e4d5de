"""The demo: register the example ops and exercise them.

On a GPU: run every example op on fresh random inputs, compare with PyTorch, then run a small model with
``torch.compile(fullgraph=True, dynamic=True)`` and ``torch.export``. Without a GPU: compile every kernel
with NVRTC for sm_90, register them, and trace them with fake CUDA tensors through the same compile and
export paths, then say what only a GPU can do. Exit status 1 if any check fails.

    python -m examples.demo
"""

from __future__ import annotations

import sys
import time

import torch
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv

from examples.catalog.basic import register_all
from examples.catalog.shapes import register_shapes
from examples.catalog.tuned import register_tuned, triton_available
from opsmith.errors import InputError
from opsmith.flavors.cuda_cpp import default_arch


class _Model(torch.nn.Module):
    def __init__(self, ops) -> None:
        super().__init__()
        self.ops = ops

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        h = self.ops["add_bias_2d"].op(x, bias)
        h = self.ops["relu"].op(h) * 2.0
        return self.ops["softmax"].op(h) + self.ops["row_sum"].op(h).unsqueeze(-1)


def _row(*cols: object) -> str:
    widths = (16, 10, 28, 12, 6)
    return "  ".join(str(c).ljust(w) for c, w in zip(cols, widths, strict=False))


def _numerics(examples: dict) -> bool:
    ok = True
    print(_row("op", "dtype", "input shapes", "max |err|", "ok"))
    for name, ex in examples.items():
        for dt in ex.dtypes:
            for args in ex.samples(torch.device("cuda"), dt):
                ref_args = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
                got = ex.op(*args)
                want = ex.reference(*ref_args)
                if got is None:  # an in-place op: compare the written input
                    got, want = args[0], ref_args[0]
                got, want = (got if isinstance(got, tuple) else (got,)), (want if isinstance(want, tuple) else (want,))
                err = max((float((g.float() - w.float()).abs().max()) if g.numel() else 0.0)
                          for g, w in zip(got, want, strict=True))  # fmt: skip
                try:
                    for g, w in zip(got, want, strict=True):
                        tol = ex.tol if g.dtype == torch.float32 else {"atol": 2e-2, "rtol": 2e-2}
                        torch.testing.assert_close(g, w, **tol)
                    good = True
                except AssertionError:
                    good = ok = False
                shapes = " ".join(str(tuple(a.shape)) for a in args if isinstance(a, torch.Tensor))
                print(_row(name, str(dt).removeprefix("torch."), shapes[:28], f"{err:.2e}", "yes" if good else "NO"))
    return ok


def _trace_fake(examples: dict) -> None:
    graphs: list = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    model = _Model(examples)
    fake = FakeTensorMode(shape_env=ShapeEnv())
    with fake:
        x, b = torch.empty(4, 64, 96, device="cuda"), torch.empty(96, device="cuda")
        out = torch.compile(model, backend=backend, fullgraph=True, dynamic=True)(x, b)
    calls = [n.target for n in graphs[0].graph.nodes if n.op == "call_function" and "demo" in str(n.target)]
    print(f"torch.compile(fullgraph=True, dynamic=True): 1 graph, no break; out {tuple(out.shape)}; "
          f"opsmith ops in the graph: {', '.join(str(c) for c in calls)}")  # fmt: skip
    from torch.export import Dim

    with fake:
        ep = torch.export.export(model, (x, b), dynamic_shapes={"x": {0: Dim("batch"), 1: Dim("rows")}, "bias": None})
    kept = sorted({str(n.target) for n in ep.graph.nodes if n.op == "call_function" and "demo" in str(n.target)})
    x_shape = next(tuple(str(d) for d in n.meta["val"].shape) for n in ep.graph.nodes if n.op == "placeholder")
    print(f"torch.export with dynamic batch and rows: ops kept {', '.join(kept)}; x traced as {x_shape}")


def _short_input_refused(examples: dict, fake: bool) -> bool:
    """axpby declares x and y of one shape (``("*S",)``): a y of 10 elements beside an x of 1,000 is refused
    before any launch (the kernel would read y[10..999] past its end)."""
    op = examples["axpby_float32"].op
    try:
        with FakeTensorMode() if fake else torch.no_grad():
            op(torch.empty(1000, device="cuda"), torch.empty(10, device="cuda"), 1.0, 1.0)
    except InputError as e:
        print(f"a short input is refused before launch{' (traced)' if fake else ''}: {e}")
        return True
    print("a short input was NOT refused")
    return False


def _rmsnorm_lab() -> bool:
    """The RMSNorm lab: both kernels forward and backward against the reference, then the benchmark's
    main shape (8, 4096, 4096) bf16 against every other implementation."""
    from benchmarks.bench_rmsnorm import run
    from opsmith.ops.rmsnorm import reference_rms_norm, rms_norm

    good = True
    print("\nRMSNorm lab: forward and backward against the PyTorch reference (fp32 math)")
    for impl in ("triton", "cuda"):
        for dt in (torch.float32, torch.bfloat16):
            x = torch.randn(64, 4096, device="cuda", dtype=dt, requires_grad=True)
            w = torch.randn(4096, device="cuda", dtype=dt, requires_grad=True)
            dy = torch.randn(64, 4096, device="cuda", dtype=dt)
            got = [rms_norm(x, w, 1e-6, impl), *torch.autograd.grad(rms_norm(x, w, 1e-6, impl), (x, w), dy)]
            xf, wf = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
            yf = reference_rms_norm(xf, wf, 1e-6)
            want = [yf, *torch.autograd.grad(yf, (xf, wf), dy.float())]
            tol = 1e-4 if dt == torch.float32 else 5e-2
            errs = [
                ((g.float() - r).abs().max() / r.abs().max().clamp_min(1)).item()
                for g, r in zip(got, want, strict=True)
            ]
            fine = all(e < tol for e in errs)
            good = good and fine
            print(f"  {impl:7s} {str(dt).removeprefix('torch.'):9s} rel err y {errs[0]:.1e}, dx {errs[1]:.1e}, "
                  f"dweight {errs[2]:.1e}: {'ok' if fine else 'NO'}")  # fmt: skip
    res = run(None, quick=True)  # prints the table
    m = res["main"]["impls"]
    print(f"  forward: opsmith triton {m['opsmith triton']['fwd_ms'] * 1e3:.0f} us, opsmith cuda "
          f"{m['opsmith cuda']['fwd_ms'] * 1e3:.0f} us, HF eager {m['HF eager']['fwd_ms'] * 1e3:.0f} us "
          f"(python benchmarks/bench_rmsnorm.py runs the sweep, the plot and the JSON)")  # fmt: skip
    return good


def main() -> int:
    t0 = time.perf_counter()
    examples = register_all("demo")
    examples.update(register_tuned("demo"))
    examples.update(register_shapes("demo"))
    flavors = [e.op.record.flavor for e in examples.values()]
    print(f"opsmith demo: registered {len(examples)} example ops in {time.perf_counter() - t0:.2f} s "
          f"({flavors.count('cuda')} CUDA C++ compiled by NVRTC for {default_arch()}, {flavors.count('ptx')} "
          f"pre-compiled PTX, {flavors.count('triton')} Triton{'' if triton_available() else ' (Triton not installed)'}; "
          f"{sum(e.op.record.tuned for e in examples.values())} autotuned; a second run reads compiled kernels "
          "from the disk cache)")  # fmt: skip
    for name, ex in examples.items():
        print(f"  {name:14s} {ex.op.schema}")
    if not torch.cuda.is_available():
        print("\nNo CUDA GPU here: tracing with fake CUDA tensors instead of running.")
        _trace_fake(examples)
        if not _short_input_refused(examples, fake=True):
            return 1
        from opsmith.ops.rmsnorm import rmsnorm_ops

        t1 = time.perf_counter()
        kinds = ["cuda", "triton"] if triton_available() else ["cuda"]
        for impl in kinds:
            rmsnorm_ops(impl)
        print(f"RMSNorm lab: registered the differentiable RMSNorm ops ({', '.join(kinds)}; forward and backward "
              f"kernels) in {time.perf_counter() - t1:.1f} s; the lab and its benchmark need a GPU.")  # fmt: skip
        print("\nNeeds a GPU (run this again on one): launching the kernels, numerics against PyTorch, "
              "opcheck, CUDA graphs, benchmarks.")  # fmt: skip
        return 0
    print(f"\nRunning on {torch.cuda.get_device_name()}: numerics against PyTorch on fresh random inputs")
    ok = _numerics(examples) and _short_input_refused(examples, fake=False)
    print("\nautotuning decisions (key: dtypes + size buckets -> chosen config):")
    for name, ex in examples.items():
        if ex.op.tuner is not None:
            for key, c in sorted(ex.op.tuner.decisions.items(), key=str):
                print(
                    f"  {name:14s} {tuple(str(k).removeprefix('torch.') for k in key)} -> "
                    f"{ex.op.record.configs[c]['params']} num_warps={ex.op.record.configs[c]['num_warps']}"
                )
    model = _Model(examples)
    x, b = torch.randn(4, 64, 96, device="cuda"), torch.randn(96, device="cuda")
    want = model(x, b)
    got = torch.compile(model, fullgraph=True, dynamic=True)(x, b)
    same = torch.allclose(got, want, atol=1e-4, rtol=1e-4)
    print(f"\ntorch.compile(fullgraph=True, dynamic=True) of a 4-op model: matches eager: {same}")
    from torch.export import Dim

    ep = torch.export.export(model, (x, b), dynamic_shapes={"x": {0: Dim("batch"), 1: Dim("rows")}, "bias": None})
    x2 = torch.randn(2, 33, 96, device="cuda")
    same_ep = torch.allclose(ep.module()(x2, b), model(x2, b), atol=1e-4, rtol=1e-4)
    print(f"torch.export with dynamic batch/rows, run at a new shape (2, 33, 96): matches eager: {same_ep}")
    ok = ok and same and same_ep and _rmsnorm_lab()
    print("\nall checks passed" if ok else "\nSOME CHECKS FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
