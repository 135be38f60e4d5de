"""Probe (issue 26, item 4): can an op library built against one torch load and run under another through
PyTorch's stable ABI (``torch/csrc/stable``, ``STABLE_TORCH_LIBRARY``; torch >= 2.10)?

``build OUT_DIR`` writes and compiles, against the installed torch's headers with ``TORCH_TARGET_VERSION``
2.10, a hand-written stable-ABI library in the shape opsmith's generated ones have: a CUDA kernel (guards,
output from ``empty_like``, the launch of an embedded cubin through the driver API on the current
stream), a CPU kernel and a Meta kernel. ``load LIB`` loads it in whatever torch runs and compares the op with ``torch.relu`` on
CPU and, with a GPU, on CUDA, eager and under ``torch.compile`` with static and dynamic shapes (the Meta
kernel sees concrete sizes only: the stable Tensor has no SymInt sizes).

    PYTHONPATH=. python benchmarks/probes/stable_abi.py build /tmp/stable
    python benchmarks/probes/stable_abi.py load /tmp/stable/libprobe_stable.so   # under another torch
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

SOURCE = r"""// A stable-ABI op library: it uses only torch/csrc/stable and torch/headeronly (the C shim underneath), so it
// loads in any torch from TORCH_TARGET_VERSION on.
#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>

#include <cuda.h>
#include <dlfcn.h>

#include <mutex>

using torch::stable::Tensor;

namespace {

const unsigned char kImage[] = {@IMAGE@};  // the kernel's cubin (sm_90)

template <typename F>
F driver(const char* name) {
  static void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  STD_TORCH_CHECK(lib != nullptr, "probe_stable: libcuda.so.1 not found");
  auto f = reinterpret_cast<F>(dlsym(lib, name));
  STD_TORCH_CHECK(f != nullptr, "probe_stable: the driver lacks ", name);
  return f;
}

void check(CUresult r, const char* what) { STD_TORCH_CHECK(r == CUDA_SUCCESS, "probe_stable: ", what, " failed: ", int(r)); }

CUfunction function(int device) {  // one module per device, loaded on first use
  static std::mutex lock;
  static CUfunction fns[64] = {};
  std::lock_guard<std::mutex> hold(lock);
  if (fns[device] == nullptr) {
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    check(driver<decltype(&cuDeviceGet)>("cuDeviceGet")(&dev, device), "cuDeviceGet");
    check(driver<decltype(&cuDevicePrimaryCtxRetain)>("cuDevicePrimaryCtxRetain")(&ctx, dev), "retain");
    check(driver<decltype(&cuCtxSetCurrent)>("cuCtxSetCurrent")(ctx), "cuCtxSetCurrent");
    check(driver<decltype(&cuModuleLoadData)>("cuModuleLoadData")(&mod, kImage), "cuModuleLoadData");
    check(driver<decltype(&cuModuleGetFunction)>("cuModuleGetFunction")(&fns[device], mod, "@SYMBOL@"), "get");
  }
  return fns[device];
}

Tensor guarded(const Tensor& x) {
  STD_TORCH_CHECK(x.scalar_type() == torch::headeronly::ScalarType::Float,
                  "probe_stable::relu: argument 'x': expected torch.float32, got another dtype.");
  STD_TORCH_CHECK(x.numel() <= 2147483647, "probe_stable::relu: argument 'x': over 2^31 - 1 elements.");
  return torch::stable::contiguous(x);
}

Tensor relu_cuda(Tensor x_in) {
  Tensor x = guarded(x_in);
  STD_TORCH_CHECK(x.is_cuda(), "probe_stable::relu: argument 'x': expected a CUDA tensor.");
  Tensor y = torch::stable::empty_like(x);
  int n = static_cast<int>(x.numel());
  if (n == 0) return y;
  const int device = x.get_device_index();
  // The C shim's current CUDA stream lives in libtorch_cuda (declared only with USE_CUDA): found at run time in
  // the torch that loaded us, so one file serves CPU and CUDA builds of torch.
  using GetStream = AOTITorchError (*)(int32_t, void**);
  static GetStream get_stream = [] {
    void* cuda = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    return cuda ? reinterpret_cast<GetStream>(dlsym(cuda, "aoti_torch_get_current_cuda_stream")) : nullptr;
  }();
  STD_TORCH_CHECK(get_stream != nullptr, "probe_stable::relu: this torch has no CUDA stream API.");
  void* stream = nullptr;
  STD_TORCH_CHECK(get_stream(device, &stream) == AOTI_TORCH_SUCCESS, "probe_stable::relu: no current stream");
  CUfunction f = function(device);
  void* xp = x.data_ptr();
  void* yp = y.data_ptr();
  void* args[] = {&xp, &n, &yp};
  unsigned blocks = static_cast<unsigned>((n + 255) / 256);
  check(driver<decltype(&cuLaunchKernel)>("cuLaunchKernel")(f, blocks, 1, 1, 256, 1, 1, 0,
                                                            static_cast<CUstream>(stream), args, nullptr),
        "cuLaunchKernel");
  return y;
}

Tensor relu_cpu(Tensor x_in) {
  Tensor x = guarded(x_in);
  Tensor y = torch::stable::empty_like(x);
  const float* a = static_cast<const float*>(x.data_ptr());
  float* b = static_cast<float*>(y.data_ptr());
  for (int64_t i = 0; i < x.numel(); ++i) b[i] = a[i] > 0.f ? a[i] : 0.f;
  return y;
}

Tensor relu_meta(Tensor x_in) { return torch::stable::empty_like(guarded(x_in)); }

}  // namespace

STABLE_TORCH_LIBRARY(probe_stable, m) { m.def("relu(Tensor x) -> Tensor"); }
STABLE_TORCH_LIBRARY_IMPL(probe_stable, CUDA, m) { m.impl("relu", TORCH_BOX(&relu_cuda)); }
STABLE_TORCH_LIBRARY_IMPL(probe_stable, CPU, m) { m.impl("relu", TORCH_BOX(&relu_cpu)); }
STABLE_TORCH_LIBRARY_IMPL(probe_stable, Meta, m) { m.impl("relu", TORCH_BOX(&relu_meta)); }
"""

RELU = r"""extern "C" __global__ void probe_relu(const float* x, int n, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}"""


def build(out: Path) -> Path:
    import torch
    from torch.utils.cpp_extension import include_paths

    import opsmith as ok
    from opsmith.native.build import _cuda_include, compiler

    op = ok.cuda_kernel_op("probe_stable_src::relu", ok.KernelSpec(
        kernel_source=RELU, kernel_name="probe_relu", inputs=[ok.InputDecl("x")],
        outputs=[ok.OutputDecl("y", ok.SameAs("x"))], extras=[ok.Numel("x")], geometry=ok.Elementwise()),
        native=False)  # fmt: skip
    image = ", ".join(str(b) for b in op.record.binary)
    out.mkdir(parents=True, exist_ok=True)
    src = out / "probe_stable.cpp"
    src.write_text(SOURCE.replace("@IMAGE@", image).replace("@SYMBOL@", op.record.symbol))
    lib = out / "libprobe_stable.so"
    torch_lib = Path(torch.__file__).parent / "lib"
    cmd = [compiler(), "-std=c++17", "-O2", "-fPIC", "-shared", "-fvisibility=hidden",
           "-DTORCH_TARGET_VERSION=0x020a000000000000", *(f"-I{d}" for d in include_paths()),
           f"-I{_cuda_include()}", f"-I{sysconfig.get_paths()['include']}", str(src), "-o", str(lib),
           f"-L{torch_lib}", "-ltorch_cpu", "-lc10", "-ldl"]  # fmt: skip
    subprocess.run(cmd, check=True)
    undefined = subprocess.run(["nm", "-D", "--undefined-only", str(lib)], capture_output=True, text=True).stdout
    torch_syms = sorted({line.split()[-1] for line in undefined.splitlines()
                         if "torch" in line or "aoti" in line or "c10" in line})  # fmt: skip
    print(f"built {lib} with torch {torch.__version__} (target 2.10); torch symbols it needs: {len(torch_syms)}")
    for s in torch_syms:
        print("  ", s)
    return lib


def load(lib: Path) -> None:
    import torch

    torch.ops.load_library(str(lib))
    relu = torch.ops.probe_stable.relu
    x = torch.randn(1000)
    torch.testing.assert_close(relu(x), torch.relu(x), rtol=0, atol=0)
    print(f"torch {torch.__version__}: CPU kernel ok")
    try:
        relu(x.double())
    except RuntimeError as e:
        print("refusal:", str(e).splitlines()[0][:110])
    device = "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda":
        for n in (1, 1000, 1 << 20):
            x = torch.randn(n, device="cuda")
            torch.testing.assert_close(relu(x), torch.relu(x), rtol=0, atol=0)
        print(f"torch {torch.__version__}: CUDA kernel ok on {torch.cuda.get_device_name()}")
    for dynamic in (False, True):  # the Meta kernel is C++ over the stable Tensor: concrete sizes only
        torch._dynamo.reset()
        f = torch.compile(lambda t: relu(t) * 2, fullgraph=True, dynamic=dynamic)
        try:
            for n in (300, 5000):
                x = torch.randn(n, device=device)
                torch.testing.assert_close(f(x), torch.relu(x) * 2, rtol=0, atol=0)
            print(f"torch.compile(dynamic={dynamic}) on {device}: ok")
        except Exception as e:
            print(f"torch.compile(dynamic={dynamic}) on {device}: {type(e).__name__}: {str(e).splitlines()[0][:150]}")


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(Path(sys.argv[2]))
    else:
        load(Path(sys.argv[2]))
