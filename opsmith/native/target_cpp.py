"""The API a generated library is written against: its headers and the few names the runtime and the
generated kernels use that differ between the three targets.

- **ATen** (the default): ``ATen/ATen.h`` and ``torch/library.h``. The library serves the whole op (CUDA, CPU,
  SymInt-aware Meta and Autograd kernels) for exactly the torch it was compiled against.
- **Stable ABI** (``native.build(..., stable=True)``): ``torch/csrc/stable`` and ``torch/headeronly`` only,
  with ``TORCH_TARGET_VERSION`` 2.10, so one file loads in every torch from 2.10 on. The stable C API has no
  SymInt sizes, no ``requires_grad`` getter and no redispatch below Autograd, so such a library carries the
  CUDA and CPU kernels and a Meta kernel for concrete sizes, and no Autograd kernel (docs/native.md).
- **XLA** (``opsmith.jax``): XLA FFI handlers over XLA's buffers and stream; its glue is ``xla_cpp.py``.

Everything else (guards, sizes, expressions, the launch) is one runtime over ``opsmith::Tensor``: the glue
is all that tells the targets apart, and it is short because the stable ``Tensor`` (and the XLA target's own)
keeps ATen's method names for what the runtime reads (``dim``, ``numel``, ``size``, ``sizes``, ``strides``, ``data_ptr``,
``scalar_type``, ``is_contiguous``, ``storage_offset``).
"""

from __future__ import annotations

__all__ = ["STABLE_TARGET_VERSION", "TENSOR_TYPE", "glue"]

#: The oldest torch a stable-ABI library loads in (2.10: the first with STABLE_TORCH_LIBRARY's boxed kernels
#: taking std::string and torch::stable::Device, and Tensor::sizes()).
STABLE_TARGET_VERSION = "0x020a000000000000"

#: The C++ tensor type of each target: what the generated kernels take and declare.
TENSOR_TYPE = {"aten": "at::Tensor", "stable": "torch::stable::Tensor", "xla": "opsmith::Tensor"}

_COMMON_HEADERS = """#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>
"""

_ATEN = r"""#include <ATen/ATen.h>
#include <ATen/Version.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

@COMMON
namespace opsmith {

using Tensor = at::Tensor;
using Device = c10::Device;

#define OPSMITH_CHECK TORCH_CHECK
#define OPSMITH_CHECK_VALUE TORCH_CHECK_VALUE  // raises ValueError in Python

template <typename... Args>
std::string cat(const Args&... args) {
  return c10::str(args...);
}

// opsmith's own error classes, where opsmith runs in this process: its error bridge (opsmith/native/
// error_bridge.py) defines opsmith_errors::raise_, whose Python kernel raises the class the Python path raises
// (InputError, DifferentiationError, LaunchError) from the same parts, so the same text; the exception crosses
// this library as torch's python_error. Returns where no bridge is defined (a process without opsmith): the
// caller then throws torch's builtin class (ValueError for a refusal, RuntimeError otherwise; docs/errors.md).
// A cold path: it runs only on the way to an error.
inline void raise_opsmith(const char* kind, std::initializer_list<std::string> parts) {
  const auto handle = c10::Dispatcher::singleton().findOp(c10::OperatorName("opsmith_errors::raise_", ""));
  if (!handle.has_value() || !handle->hasKernelForDispatchKey(c10::DispatchKey::CompositeExplicitAutograd)) return;
  c10::List<std::string> list;
  for (const std::string& p : parts) list.push_back(p);
  std::vector<c10::IValue> stack{c10::IValue(std::string(kind)), c10::IValue(std::move(list))};
  handle->callBoxed(stack);
}

inline std::string device_name(const Device& d) { return c10::str(d); }
inline bool is_meta(const Tensor& t) { return t.is_meta(); }
inline Tensor contiguous(const Tensor& t) { return t.contiguous(); }
inline Tensor aligned_copy(const Tensor& t) { return t.clone(at::MemoryFormat::Contiguous); }
inline Tensor empty(c10::IntArrayRef sizes, const Tensor& like, c10::ScalarType dtype) {
  return at::empty(sizes, like.options().dtype(dtype));
}
// torch.empty_like: the source's strides where it is dense (the Python path allocates so), else contiguous.
inline Tensor empty_like(const Tensor& t, c10::ScalarType dtype, bool contiguous_format) {
  return contiguous_format ? at::empty_like(t, t.options().dtype(dtype), at::MemoryFormat::Contiguous)
                           : at::empty_like(t, t.options().dtype(dtype));
}
inline void fill(Tensor& t, double v) { v == 0 ? t.zero_() : t.fill_(v); }

inline CUstream current_stream(const Device& device) {
  return static_cast<CUstream>(c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device).native_handle());
}

}  // namespace opsmith
"""

_STABLE = r"""#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/library.h>
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

@COMMON
#define OPSMITH_STABLE_ABI 1
#define OPSMITH_NO_ATEN 1  // the runtime's parts over SymInt and ATen stay out

namespace opsmith {

using Tensor = torch::stable::Tensor;
using Device = torch::stable::Device;

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream s;
  ((s << args), ...);
  return s.str();
}

// A stable kernel's exception reaches Python as RuntimeError (ValueError needs ATen's c10::ValueError), with
// its text: the Python path's, not prefixed with a function and line as STD_TORCH_CHECK's would be.
#define OPSMITH_CHECK(cond, ...)                                     \
  do {                                                               \
    if (!(cond)) throw std::runtime_error(opsmith::cat(__VA_ARGS__)); \
  } while (0)
#define OPSMITH_CHECK_VALUE OPSMITH_CHECK

// The stable C API cannot call the dispatcher with the Python error's class intact (the shim turns exceptions
// into error codes): every error of such a library arrives as RuntimeError, with the Python path's text.
inline void raise_opsmith(const char*, std::initializer_list<std::string>) {}

inline std::string device_name(const Device& d) {
  std::string type = d.type() == torch::headeronly::DeviceType::CUDA ? "cuda"
                     : d.type() == torch::headeronly::DeviceType::Meta ? "meta"
                     : d.type() == torch::headeronly::DeviceType::CPU ? "cpu" : "device";
  return d.has_index() ? type + ":" + std::to_string(int(d.index())) : type;
}
inline bool is_meta(const Tensor& t) { return t.device().type() == torch::headeronly::DeviceType::Meta; }
inline Tensor contiguous(const Tensor& t) { return torch::stable::contiguous(t); }
inline Tensor aligned_copy(const Tensor& t) { return torch::stable::clone(torch::stable::contiguous(t)); }
inline Tensor empty(const std::vector<int64_t>& sizes, const Tensor& like, c10::ScalarType dtype) {
  return torch::stable::new_empty(like, torch::headeronly::IntHeaderOnlyArrayRef(sizes.data(), sizes.size()), dtype);
}
inline Tensor empty(torch::headeronly::IntHeaderOnlyArrayRef sizes, const Tensor& like, c10::ScalarType dtype) {
  return torch::stable::new_empty(like, sizes, dtype);
}
// torch.empty_like keeps a dense source's strides; the stable API's empty_like keeps its dtype, so another
// dtype (or a strided source) gets a contiguous tensor, as the ATen build gives for strided sources.
inline Tensor empty_like(const Tensor& t, c10::ScalarType dtype, bool contiguous_format) {
  if (!contiguous_format && dtype == t.scalar_type()) return torch::stable::empty_like(t);
  return empty(t.sizes(), t, dtype);
}
inline void fill(Tensor& t, double v) { v == 0 ? (void)torch::stable::zero_(t) : (void)torch::stable::fill_(t, v); }

// The current stream lives in libtorch_cuda's C shim (declared only in CUDA builds of torch): found at run time
// in the torch that loaded the library, so one file serves CPU and CUDA builds of every torch it targets.
inline CUstream current_stream(const Device& device) {
  using GetStream = AOTITorchError (*)(int32_t, void**);
  static const GetStream get = [] {
    void* cuda = dlopen("libtorch_cuda.so", RTLD_NOW | RTLD_NOLOAD);
    return cuda ? reinterpret_cast<GetStream>(dlsym(cuda, "aoti_torch_get_current_cuda_stream")) : nullptr;
  }();
  STD_TORCH_CHECK(get != nullptr, "opsmith: this torch has no CUDA stream API (a CPU-only build of torch?)");
  void* stream = nullptr;
  STD_TORCH_CHECK(get(device.index(), &stream) == AOTI_TORCH_SUCCESS, "opsmith: no current stream on cuda:",
                  int(device.index()));
  return static_cast<CUstream>(stream);
}

}  // namespace opsmith
"""


def glue(target: str) -> str:
    """The headers and the target's names, first in a library's source (``target``: "aten", "stable" or "xla",
    whose glue is ``xla_cpp.XLA_GLUE``)."""
    from .xla_cpp import XLA_GLUE

    return {"aten": _ATEN, "stable": _STABLE, "xla": XLA_GLUE}[target].replace("@COMMON", _COMMON_HEADERS)
