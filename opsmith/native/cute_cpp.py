"""The part of the C++ runtime a library holding CuTe DSL ops carries: the DSL's exported launch code
(``flavors/cute.py``, ``export_to_c``), loaded once per device through the CUDA runtime's library API and called
with pointers to the arguments. Only libraries with such ops include it (and link the CUDA runtime): the rest
stay on the driver API alone (``launch_cpp.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["CUTE_CPP", "cute_declarations"]

CUTE_CPP = r"""
// The CUDA runtime's own, declared here: its headers include nvcc's (crt/host_config.h), which a host compile of
// a library does not have. cudaError_t is an int-sized enum, cudaLibrary_t an opaque pointer.
extern "C" const char* cudaGetErrorName(int error);

namespace opsmith {

using cudaError_t = int;
using cudaLibrary_t = void*;
constexpr cudaError_t cudaSuccess = 0;

// One exported specialization: `init` loads its cubin as a CUDA library (once), `load` prepares it for a device
// (once per device), `call` is the host function: pointers to its arguments, the stream among them, then a
// pointer to the int32 the launch's cudaError is written to. The argument structs mirror the header
// export_to_c writes.
class CuteEntry {
 public:
  using Init = void (*)(void**);
  using Call = void (*)(void**, int32_t);
  CuteEntry(const char* op, const char* symbol, Init init, Init load, Call call)
      : op_(op), symbol_(symbol), init_(init), load_(load), call_(call) {}

  const char* op() const { return op_; }
  const char* symbol() const { return symbol_; }

  // Ready on `device` (loaded there at its first use); false when loading cannot happen now, inside a CUDA
  // graph capture on `stream`: a served op hands that call to the Python path, whose warm-up loaded its kernel.
  bool ready(int device, CUstream stream) {
    OPSMITH_LAUNCH_CHECK(device >= 0 && device < kMaxDevices, op_, ": cuda:", device, " is past the devices opsmith serves");
    if (loaded_[device].load(std::memory_order_acquire)) return true;
    CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
    Driver::get().StreamIsCapturing(stream, &capturing);
    if (capturing != CU_STREAM_CAPTURE_STATUS_NONE) return false;
    std::lock_guard<std::mutex> lock(mu_);
    if (loaded_[device].load(std::memory_order_acquire)) return true;
    cudaLibrary_t* library = &library_;
    cudaError_t ret = cudaSuccess;
    if (!inited_) {
      struct {
        cudaLibrary_t** library;
        cudaError_t* ret;
      } init_args = {&library, &ret};
      init_(reinterpret_cast<void**>(&init_args));
      OPSMITH_LAUNCH_CHECK(ret == cudaSuccess, op_, ": loading the CuTe DSL kernel '", symbol_, "' failed with ",
                           cudaGetErrorName(ret), ".");
      inited_ = true;
    }
    int32_t device_id = device;
    struct {
      cudaLibrary_t** library;
      int32_t* device_id;
      cudaError_t* ret;
    } load_args = {&library, &device_id, &ret};
    load_(reinterpret_cast<void**>(&load_args));
    OPSMITH_LAUNCH_CHECK(ret == cudaSuccess, op_, ": loading the CuTe DSL kernel '", symbol_, "' on cuda:", device,
                         " failed with ", cudaGetErrorName(ret), ".");
    loaded_[device].store(true, std::memory_order_release);
    return true;
  }

  void call(void** args, int32_t n) {
    call_(args, n);
    const cudaError_t ret = static_cast<cudaError_t>(*static_cast<int32_t*>(args[n - 1]));
    OPSMITH_LAUNCH_CHECK(ret == cudaSuccess, op_, ": the CuTe DSL host function '", symbol_, "' failed with ",
                         cudaGetErrorName(ret), ".");
  }

 private:
  const char* op_;
  const char* symbol_;
  Init init_, load_;
  Call call_;
  std::mutex mu_;
  bool inited_ = false;
  cudaLibrary_t library_{};
  std::array<std::atomic<bool>, kMaxDevices> loaded_{};
};

#ifdef OPSMITH_DRY_RUN
// The dry run records what the host function would get: the config and its arguments, each in an 8-byte slot.
inline void cute_launch(CuteEntry& e, const Device&, int config, void** args, const uint8_t* sizes, int n) {
  std::string hex;
  for (int p = 0; p < n; ++p) {
    unsigned char slot[8] = {0};
    std::memcpy(slot, args[p], sizes[p]);
    char two[3];
    for (unsigned char b : slot) std::snprintf(two, sizeof two, "%02x", b), hex += two;
  }
  std::string record = cat("{\"config\": ", config, ", \"symbol\": \"", e.symbol(), "\", \"args\": \"", hex, "\"}");
  std::lock_guard<std::mutex> hold(dry_run_lock());
  dry_run_launches().push_back(std::move(record));
}
#else
// The host function runs on the call's device (the runtime API reads the current one) and the stream in `args`.
inline void cute_launch(CuteEntry& e, const Device& device, int, void** args, const uint8_t*, int n) {
  ContextScope scope(device.index());
  e.call(args, n + 1);
}
#endif

}  // namespace opsmith
"""


def cute_declarations(variants: Sequence[Any]) -> list[str]:
    """The C symbols of the exported specializations (at file scope: C linkage outside any namespace)."""
    L = []
    for v in variants:
        p = v.cute.prefix
        L += [f'extern "C" void _mlir_{p}_cuda_init(void**);', f'extern "C" void _mlir_{p}_cuda_load_to_device(void**);',
              f'extern "C" void {v.cute.entry}(void**, int32_t);']  # fmt: skip
    return L
