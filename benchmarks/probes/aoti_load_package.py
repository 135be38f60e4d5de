"""Does ``torch._inductor.aoti_load_package`` (the Python loader of an AOTInductor package) run a model with a custom
op? Three models, each exported and packaged here, then loaded and run in a child process of its own (a crash
there is its exit status, not ours): no custom op; a plain ``torch.library.custom_op`` (the control: nothing of
opsmith); an opsmith CUDA C++ op (registered in the child too). The C++ runner of examples/deploy/ is what
docs/native.md recommends where the Python loader fails.

    python benchmarks/probes/aoti_load_package.py [--out DIR]      # needs a GPU
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

_OPS = r"""
import torch

@torch.library.custom_op("aoti_probe::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2

@twice.register_fake
def _(x):
    return torch.empty_like(x)

def opsmith_relu():
    import opsmith as ok
    src = 'extern "C" __global__ void k(const float* x, int n, float* y) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f; }'
    return ok.cuda_kernel_op("aoti_probe::relu", ok.KernelSpec(kernel_source=src, kernel_name="k",
        inputs=[ok.InputDecl("x")], outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")],
        geometry=ok.Elementwise(block=(128,))), native=False)

def model(kind):
    relu = opsmith_relu() if kind == "opsmith" else None
    class M(torch.nn.Module):
        def forward(self, x):
            y = torch.sin(x)
            if kind == "custom_op":
                y = torch.ops.aoti_probe.twice(y)
            if kind == "opsmith":
                y = relu(y)
            return y + 1
    return M()
"""

_LOAD = r"""
import sys, torch
exec(open(sys.argv[1]).read())
model(sys.argv[3])  # registers the op in this process too
runner = torch._inductor.aoti_load_package(sys.argv[2])
x = torch.randn(1000, device="cuda")
got = runner(x)
got = got[0] if isinstance(got, (list, tuple)) else got
want = model(sys.argv[3])(x)
print("ran", bool(torch.allclose(got, want)))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=None)
    args = ap.parse_args()
    import torch

    work = Path(args.out or tempfile.mkdtemp())
    work.mkdir(parents=True, exist_ok=True)
    ops_file = work / "aoti_probe_ops.py"
    ops_file.write_text(_OPS)
    scope: dict = {}
    exec(ops_file.read_text(), scope)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    for kind in ("plain", "custom_op", "opsmith"):
        x = torch.randn(1000, device="cuda")
        ep = torch.export.export(scope["model"](kind), (x,))
        pkg = torch._inductor.aoti_compile_and_package(ep, package_path=str(work / f"{kind}.pt2"))
        child = subprocess.run([sys.executable, "-c", _LOAD, str(ops_file), pkg, kind], capture_output=True,
                               text=True, timeout=600)  # fmt: skip
        last = (child.stdout.strip().splitlines() or [""])[-1]
        err = (child.stderr.strip().splitlines() or [""])[-1][:160]
        print(f"{kind:10s} aoti_load_package: exit {child.returncode} {last} {err if child.returncode else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
