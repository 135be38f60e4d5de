"""Build the deployable artifacts of ``model.py`` into OUT (default ./deploy-out):

    python examples/deploy/build.py [OUT]

1. registers the ops and runs the model once eagerly (the JIT ops compile the kernels it needs);
2. ``opsmith.native.build`` -> OUT/libdeploy_ops.so, the ops as a C++ library;
3. ``opsmith.native.use`` (the ops now run natively here too), ``torch.export`` and
   ``torch._inductor.aoti_compile_and_package`` -> OUT/model.pt2;
4. the input and the eager output as raw float32 files, and OUT/runner compiled from runner.cpp.

Then ``OUT/runner OUT/libdeploy_ops.so OUT/model.pt2 OUT`` runs the model with no Python in the process.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from model import Model, register

from opsmith import native

ROWS, D_IN = 64, 256


def runner_command(out: Path) -> list[str]:
    """g++ against the installed torch: the runner links libtorch and nothing of opsmith or Python."""
    from torch.utils.cpp_extension import include_paths

    lib = Path(torch.__file__).parent / "lib"
    abi = int(torch._C._GLIBCXX_USE_CXX11_ABI)
    return ["g++", "-std=c++17", "-O2", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", *(f"-I{d}" for d in include_paths()),
            str(Path(__file__).with_name("runner.cpp")), "-o", str(out / "runner"), f"-L{lib}", "-ltorch",
            "-ltorch_cpu", "-ltorch_cuda", "-lc10", "-lc10_cuda", "-ldl", "-Xlinker", "-rpath", "-Xlinker", str(lib)]  # fmt: skip


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    ops = register()
    model = Model().cuda()
    x = torch.randn(ROWS, D_IN, device="cuda", generator=torch.Generator("cuda").manual_seed(1))
    with torch.no_grad():
        eager = model(x)
    report = native.build(ops, out / "libdeploy_ops.so")
    print(report.summary())
    native.use(ops, out / "libdeploy_ops.so")
    t0 = time.perf_counter()
    with torch.no_grad():
        ep = torch.export.export(model, (x,))
        package = torch._inductor.aoti_compile_and_package(ep, package_path=str(out / "model.pt2"))
    print(f"{package}: exported and compiled in {time.perf_counter() - t0:.1f} s")
    x.cpu().numpy().tofile(out / "input.bin")
    eager.cpu().numpy().tofile(out / "expected.bin")
    (out / "shapes.txt").write_text(f"{ROWS} {D_IN} {eager.shape[1]}\n")
    t0 = time.perf_counter()
    subprocess.run(runner_command(out), check=True)
    print(f"{out / 'runner'}: compiled in {time.perf_counter() - t0:.1f} s")
    print(f"run: {out / 'runner'} {out / 'libdeploy_ops.so'} {out / 'model.pt2'} {out}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "deploy-out"))
