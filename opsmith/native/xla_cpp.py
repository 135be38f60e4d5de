"""The third target of a generated library: XLA's FFI, for ``opsmith.jax``.

An XLA custom call hands a handler its input buffers, result buffers XLA already allocated (the shapes JAX's
abstract evaluation gave, which is the op's Meta kernel: ``jax/abstract.py``), the call's attributes and the
stream to run on. The op's plan prints as for the ATen and stable targets (the same guards, error texts,
variants, tuning decisions and launch) over ``opsmith::Tensor`` below, a view of an ``ffi::AnyBuffer``;
what differs is written here:

- an output is *planned* where the other targets allocate it (``empty``: its sizes and dtype, no memory),
  then ``bind`` takes XLA's result buffer for it, checking that XLA allocated exactly that;
- an input the op writes in place is the result buffer XLA aliases to it (``input_output_aliases``);
- the launch's current stream is the one XLA gives (``Device::stream``);
- a C++ exception becomes an ``ffi::Error`` carrying its text (``guarded``): JAX raises it with the same
  words the PyTorch op uses.

Headers: XLA's FFI API (``jax.ffi.include_dir()``) and torch's header-only ``ScalarType``; the library links
no torch and no JAX library. Built with ``-DOPSMITH_DRY_RUN`` it serves JAX's CPU platform and records its
launches (``opsmith_dry_run_take``) instead of making them, so CI compares them with the ATen library's.
"""

from __future__ import annotations

from typing import Any

import torch

from .cpp import cpp_str

__all__ = ["GIVEN", "XLA_GLUE", "XLA_RUNTIME", "handler_export", "handler_source", "handler_symbol"]

#: The attribute telling a handler whether optional input <name> was given (``opsmith.jax`` passes a zero-size
#: placeholder buffer for one that was not).
GIVEN = "opsmith_given_"

XLA_GLUE = r"""#include "xla/ffi/api/ffi.h"

#include <stdexcept>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

@COMMON
#define OPSMITH_NO_ATEN 1
#define OPSMITH_XLA 1

namespace opsmith {

namespace ffi = xla::ffi;

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream s;
  ((s << args), ...);
  return s.str();
}

// A refusal of the call (ValueError in PyTorch) is InvalidArgument in XLA; anything else is Internal.
#define OPSMITH_CHECK(cond, ...)                                      \
  do {                                                                \
    if (!(cond)) throw std::runtime_error(opsmith::cat(__VA_ARGS__)); \
  } while (0)
#define OPSMITH_CHECK_VALUE(cond, ...)                                   \
  do {                                                                   \
    if (!(cond)) throw std::invalid_argument(opsmith::cat(__VA_ARGS__)); \
  } while (0)

// An XLA handler's error reaches JAX as an XlaRuntimeError with the PyTorch text; opsmith.jax refuses what it
// can at trace time, with opsmith's classes, so these are the last line (docs/jax.md).
inline void raise_opsmith(const char*, std::initializer_list<std::string>) {}

// The device of a call and the stream XLA runs it on. A dry run serves JAX's CPU platform: index -1, as a CPU
// tensor's device has in the ATen library's dry run (sm_count then answers 132 without a driver).
struct Device {
  int ordinal = 0;
  CUstream stream = nullptr;
  bool cpu = false;
  int index() const { return cpu ? -1 : ordinal; }
  bool operator==(const Device& o) const { return ordinal == o.ordinal && cpu == o.cpu; }
  bool operator!=(const Device& o) const { return !(*this == o); }
};

inline c10::ScalarType scalar_type_of(ffi::DataType t) {
  switch (t) {
    case ffi::DataType::F32: return c10::ScalarType::Float;
    case ffi::DataType::F64: return c10::ScalarType::Double;
    case ffi::DataType::F16: return c10::ScalarType::Half;
    case ffi::DataType::BF16: return c10::ScalarType::BFloat16;
    case ffi::DataType::S32: return c10::ScalarType::Int;
    case ffi::DataType::S64: return c10::ScalarType::Long;
    case ffi::DataType::S16: return c10::ScalarType::Short;
    case ffi::DataType::S8: return c10::ScalarType::Char;
    case ffi::DataType::U8: return c10::ScalarType::Byte;
    case ffi::DataType::PRED: return c10::ScalarType::Bool;
    case ffi::DataType::F8E4M3FN: return c10::ScalarType::Float8_e4m3fn;
    case ffi::DataType::F8E5M2: return c10::ScalarType::Float8_e5m2;
    default: return c10::ScalarType::Undefined;  // the dtype guard names it
  }
}

// An XLA buffer as the runtime reads a tensor. XLA hands a custom call dense row-major buffers (ffi_call's
// default layouts), so the strides follow from the sizes and the storage offset is 0. An output is first
// planned (sizes and dtype, no data) and then bound to XLA's buffer.
class Tensor {
 public:
  Tensor() = default;  // undefined: an optional input passed as None
  Tensor(ffi::AnyBuffer b, Device d)
      : data_(b.untyped_data()), dtype_(scalar_type_of(b.element_type())), device_(d), defined_(true) {
    auto dims = b.dimensions();
    set_sizes(std::vector<int64_t>(dims.begin(), dims.end()));
  }
  Tensor(std::vector<int64_t> sizes, c10::ScalarType dtype, Device d) : dtype_(dtype), device_(d), defined_(true) {
    set_sizes(std::move(sizes));
  }

  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const { return numel_; }
  int64_t size(int64_t d) const { return sizes_[d < 0 ? d + dim() : d]; }
  int64_t stride(int64_t d) const { return strides_[d < 0 ? d + dim() : d]; }
  const std::vector<int64_t>& sizes() const { return sizes_; }
  const std::vector<int64_t>& strides() const { return strides_; }
  void* data_ptr() const { return data_; }
  c10::ScalarType scalar_type() const { return dtype_; }
  size_t element_size() const {
    switch (dtype_) {
      case c10::ScalarType::Double: case c10::ScalarType::Long: return 8;
      case c10::ScalarType::Float: case c10::ScalarType::Int: return 4;
      case c10::ScalarType::Half: case c10::ScalarType::BFloat16: case c10::ScalarType::Short: return 2;
      default: return 1;
    }
  }
  bool is_contiguous() const { return true; }
  int64_t storage_offset() const { return 0; }
  const Device& device() const { return device_; }
  bool is_cuda() const { return !device_.cpu; }
  bool is_cpu() const { return device_.cpu; }
  bool defined() const { return defined_; }

 private:
  void set_sizes(std::vector<int64_t> sizes) {
    sizes_ = std::move(sizes);
    strides_.assign(sizes_.size(), 1);
    numel_ = 1;
    for (int64_t d = dim() - 1; d >= 0; --d) strides_[d] = numel_, numel_ *= sizes_[d];
  }

  void* data_ = nullptr;
  std::vector<int64_t> sizes_, strides_;
  int64_t numel_ = 1;
  c10::ScalarType dtype_ = c10::ScalarType::Undefined;
  Device device_;
  bool defined_ = false;
};

inline std::string device_name(const Device& d) { return d.cpu ? "cpu" : "cuda:" + std::to_string(d.ordinal); }
inline bool is_meta(const Tensor&) { return false; }
inline Tensor contiguous(const Tensor& t) { return t; }  // XLA's buffers are row-major already
Tensor aligned_copy(const Tensor& t);
inline Tensor empty(const std::vector<int64_t>& sizes, const Tensor& like, c10::ScalarType dtype) {
  return Tensor(sizes, dtype, like.device());
}
inline Tensor empty_like(const Tensor& t, c10::ScalarType dtype, bool) { return empty(t.sizes(), t, dtype); }
void fill(Tensor& t, double v);
inline CUstream current_stream(const Device& device) { return device.stream; }

}  // namespace opsmith
"""

XLA_RUNTIME = r"""
namespace opsmith {

// XLA allocates device buffers at 16-byte alignment or more (the kernels' vector loads need 16): a buffer
// that is not is refused rather than copied (a custom call cannot allocate beside XLA's plan).
inline Tensor aligned_copy(const Tensor& t) {
  OPSMITH_CHECK(false, "opsmith: XLA passed a buffer at ", t.data_ptr(), ", not 16-byte aligned, to a kernel that "
                "needs it; this is an XLA layout opsmith does not serve. Fix: report it with the call.");
}

// The declared initial value of an output (a reduction's 0 before atomics), written on XLA's stream.
inline void fill(Tensor& t, double v) {
  if (t.numel() == 0) return;
  const size_t width = t.element_size(), n = static_cast<size_t>(t.numel());
  uint64_t bits = 0;
  switch (t.scalar_type()) {
    case c10::ScalarType::Float: { float f = float(v); std::memcpy(&bits, &f, 4); break; }
    case c10::ScalarType::Double: std::memcpy(&bits, &v, 8); break;
    case c10::ScalarType::Half: bits = half_bits(v); break;
    case c10::ScalarType::BFloat16: bits = bf16_bits(v); break;
    case c10::ScalarType::Bool: bits = v != 0; break;
    default: { const int64_t i = int64_t(v); std::memcpy(&bits, &i, width); }  // two's complement, little end
  }
#ifdef OPSMITH_DRY_RUN
  for (size_t k = 0; k < n; ++k) std::memcpy(static_cast<char*>(t.data_ptr()) + k * width, &bits, width);
#else
  const Driver& drv = Driver::get();
  const CUdeviceptr p = reinterpret_cast<CUdeviceptr>(t.data_ptr());
  ContextScope scope(t.device().index());
  CUresult r = CUDA_SUCCESS;
  if (width == 1 || bits == 0) r = drv.MemsetD8Async(p, static_cast<unsigned char>(bits), n * width, t.device().stream);
  else if (width == 2) r = drv.MemsetD16Async(p, static_cast<unsigned short>(bits), n, t.device().stream);
  else if (width == 4) r = drv.MemsetD32Async(p, static_cast<unsigned int>(bits), n, t.device().stream);
  else if (uint32_t(bits) == uint32_t(bits >> 32)) r = drv.MemsetD32Async(p, uint32_t(bits), 2 * n, t.device().stream);
  else OPSMITH_CHECK(false, "opsmith: filling an 8-byte output with ", v, " on XLA's stream is not supported. "
                     "Fix: declare init=0 (or a value whose two 32-bit halves are equal).");
  OPSMITH_CHECK(r == CUDA_SUCCESS, "opsmith: filling an output on cuda:", t.device().index(), " failed with ",
                error_name(r), ".");
#endif
}

// The planned output `want` in the buffer XLA allocated for it. They differ only when the custom call was made
// by hand with other result shapes than the declaration gives.
inline Tensor bind(const char* op, const char* name, const Tensor& want, const Tensor& got) {
  OPSMITH_CHECK_VALUE(want.sizes() == got.sizes() && want.scalar_type() == got.scalar_type(), op, ": output '",
                      name, "': the declaration gives shape ", tuple_str(want.sizes()), " and dtype ",
                      dtype_name(want.scalar_type()), ", XLA allocated shape ", tuple_str(got.sizes()), " and dtype ",
                      dtype_name(got.scalar_type()), ". Fix: call the op through opsmith.jax, whose abstract "
                      "evaluation is the declaration's.");
#ifdef OPSMITH_DRY_RUN
  // A dry run launches nothing: its outputs hold 0xFF bytes (NaN in every float dtype, all ones in an integer
  // one) rather than whatever the buffer held before, so no one reads them as results.
  std::memset(got.data_ptr(), 0xff, size_t(got.numel()) * got.element_size());
#endif
  return got;
}

// Runs one call; an exception becomes the ffi::Error XLA raises in Python, with the same text.
template <typename Body>
ffi::Error guarded(Body body) {
  try {
    body();
  } catch (const std::invalid_argument& e) {
    return ffi::Error::InvalidArgument(e.what());
  } catch (const std::exception& e) {
    return ffi::Error::Internal(e.what());
  }
  return ffi::Error::Success();
}

#ifdef OPSMITH_DRY_RUN
// The launches recorded since the last take, as JSON; the text lives until the next take.
extern "C" __attribute__((visibility("default"))) const char* opsmith_dry_run_take() {
  static std::string last;
  last = dry_run_take();
  return last.c_str();
}
#endif

}  // namespace opsmith

// The call's device and stream: XLA's on the GPU; none for a dry run on JAX's CPU platform.
#ifdef OPSMITH_DRY_RUN
#define OPSMITH_XLA_CONTEXT
#define OPSMITH_XLA_DEVICE (opsmith::Device{0, nullptr, true})
#define OPSMITH_XLA_BIND xla::ffi::Ffi::Bind()
#else
#define OPSMITH_XLA_CONTEXT CUstream stream, int32_t device,
#define OPSMITH_XLA_DEVICE (opsmith::Device{device, stream, false})
#define OPSMITH_XLA_BIND \
  xla::ffi::Ffi::Bind().Ctx<xla::ffi::PlatformStream<CUstream>>().Ctx<xla::ffi::DeviceOrdinal>()
#endif
"""

# The FFI attribute type of a schema scalar: jax.ffi.ffi_call passes a Python float as f64, an int as i64.
_ATTR = {"float": "double", "int": "int64_t", "SymInt": "int64_t", "bool": "bool"}


def handler_symbol(op_name: str) -> str:
    """The exported C symbol of an op's handler: ``opsmith_xla_<len(ns)><ns>_<name>``, one per op name (the
    length keeps ``a_b::c`` and ``a::b_c`` apart)."""
    ns, name = op_name.split("::")
    return f"opsmith_xla_{len(ns)}{ns}_{name}"


def handler_source(n: Any, args: list[str]) -> tuple[list[str], list[str]]:
    """The XLA FFI handler of one op (``n``: a NativeOp; ``args``: its C++ argument locals): buffers and
    attributes in, the plan's ``cuda_impl`` over them, its error as an ``ffi::Error``; and the binding's calls,
    for ``handler_export``. An input written in place is the result buffer XLA aliases to it, after the outputs."""
    schema = torch._C.parse_schema(f"{n.record.op_name}{n.record.schema}")
    mutated = set(n.plan.mutated)
    params, bind, call, inplace = [], [], [], []
    tensor_k = 0
    for a, local in zip(schema.arguments, args, strict=True):
        if str(a.type) == "Optional[Tensor]":  # a buffer (a placeholder when absent) and whether it was given
            bind += [".Arg<xla::ffi::AnyBuffer>()", f".Attr<bool>({cpp_str(GIVEN + a.name)})"]
            tensor = f"opsmith::Tensor({local}, at)"
            if tensor_k in mutated:
                params.append(f"xla::ffi::AnyBuffer {local}_aliased, bool {local}_given")
                inplace.append(f"xla::ffi::Result<xla::ffi::AnyBuffer> {local}")
                tensor = f"opsmith::Tensor(*{local}, at)"
            else:
                params.append(f"xla::ffi::AnyBuffer {local}, bool {local}_given")
            call.append(f"{local}_given ? std::optional<opsmith::Tensor>({tensor}) : std::nullopt")
            tensor_k += 1
        elif isinstance(a.type, torch.TensorType):
            bind.append(".Arg<xla::ffi::AnyBuffer>()")
            if tensor_k in mutated:  # the operand is unread: XLA aliases it to a result, which holds its values
                params.append(f"xla::ffi::AnyBuffer {local}_aliased")
                inplace.append(f"xla::ffi::Result<xla::ffi::AnyBuffer> {local}")
                call.append(f"opsmith::Tensor(*{local}, at)")
            else:
                params.append(f"xla::ffi::AnyBuffer {local}")
                call.append(f"opsmith::Tensor({local}, at)")
            tensor_k += 1
        else:
            params.append(f"{_ATTR[str(a.type)]} {local}")
            call.append(local)
            bind.append(f".Attr<{_ATTR[str(a.type)]}>({cpp_str(a.name)})")
    outs = [f"r{k}" for k in range(len(n.plan.outputs))]
    call += [f"opsmith::Tensor(*{r}, at)" for r in outs]
    # XLA's results: the outputs, then the in-place inputs in argument order (as opsmith.jax declares them).
    params += [f"xla::ffi::Result<xla::ffi::AnyBuffer> {r}" for r in outs] + inplace
    bind += [".Ret<xla::ffi::AnyBuffer>()"] * (len(outs) + len(inplace))
    return [
        f"xla::ffi::Error xla_impl(OPSMITH_XLA_CONTEXT {', '.join(params)}) {{",
        "  const opsmith::Device at = OPSMITH_XLA_DEVICE;",
        f"  return opsmith::guarded([&] {{ cuda_impl({', '.join(call)}); }});",
        "}",
    ], bind


def handler_export(n: Any, bind: list[str]) -> list[str]:
    """The exported symbol of an op's handler (at file scope, after the op's anonymous namespace): what
    ``jax.ffi.register_ffi_target`` registers, through ``jax.ffi.pycapsule``."""
    symbol = handler_symbol(n.record.op_name)
    return [
        f'extern "C" __attribute__((visibility("default"))) XLA_FFI_Error* {symbol}(XLA_FFI_CallFrame*);',
        f"XLA_FFI_DEFINE_HANDLER_SYMBOL({symbol}, {n.scope}::xla_impl,",
        f"                              OPSMITH_XLA_BIND{''.join(bind)});",
    ]
