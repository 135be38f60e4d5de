"""The C++ runtime every generated op library carries: the CUDA driver (loaded at first use, like PyTorch
does), kernels loaded once per device from embedded images, the launch on the current stream, and the
error texts of the Python path (``eager.py`` and ``fake.py``), word for word, so a refusal reads the same
whichever implementation made it.

It uses only device-generic torch headers (the current stream through the device guard interface), so the
library links against libc10 and libtorch alone and compiles against a CPU build of torch too.
"""

RUNTIME = r"""
namespace opsmith {

constexpr int kMaxDevices = 64;

// The driver, loaded at first use: libcuda.so.1 is the driver itself, present wherever a GPU is.
struct Driver {
  CUresult (*ModuleLoadData)(CUmodule*, const void*);
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           CUstream, void**, void**);
  CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*DeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*GetErrorName)(CUresult, const char**);
  CUresult (*CtxGetCurrent)(CUcontext*);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*PrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*StreamIsCapturing)(CUstream, CUstreamCaptureStatus*);

  static const Driver& get() {
    static const Driver d = [] {
      Driver d{};
      void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
      TORCH_CHECK(lib != nullptr, "opsmith native ops need the CUDA driver (libcuda.so.1): ", dlerror());
      auto sym = [&](const char* name) {
        void* p = dlsym(lib, name);
        TORCH_CHECK(p != nullptr, "opsmith native ops: the CUDA driver lacks ", name);
        return p;
      };
      d.ModuleLoadData = reinterpret_cast<decltype(d.ModuleLoadData)>(sym("cuModuleLoadData"));
      d.ModuleGetFunction = reinterpret_cast<decltype(d.ModuleGetFunction)>(sym("cuModuleGetFunction"));
      d.LaunchKernel = reinterpret_cast<decltype(d.LaunchKernel)>(sym("cuLaunchKernel"));
      d.FuncSetAttribute = reinterpret_cast<decltype(d.FuncSetAttribute)>(sym("cuFuncSetAttribute"));
      d.DeviceGet = reinterpret_cast<decltype(d.DeviceGet)>(sym("cuDeviceGet"));
      d.DeviceGetAttribute = reinterpret_cast<decltype(d.DeviceGetAttribute)>(sym("cuDeviceGetAttribute"));
      d.GetErrorName = reinterpret_cast<decltype(d.GetErrorName)>(sym("cuGetErrorName"));
      d.CtxGetCurrent = reinterpret_cast<decltype(d.CtxGetCurrent)>(sym("cuCtxGetCurrent"));
      d.CtxSetCurrent = reinterpret_cast<decltype(d.CtxSetCurrent)>(sym("cuCtxSetCurrent"));
      d.PrimaryCtxRetain = reinterpret_cast<decltype(d.PrimaryCtxRetain)>(sym("cuDevicePrimaryCtxRetain"));
      d.StreamIsCapturing = reinterpret_cast<decltype(d.StreamIsCapturing)>(sym("cuStreamIsCapturing"));
      return d;
    }();
    return d;
  }
};

inline std::string error_name(CUresult r) {
  const char* name = nullptr;
  Driver::get().GetErrorName(r, &name);
  return name ? name : std::to_string(static_cast<int>(r));
}

inline int device_attribute(int device, CUdevice_attribute attr) {
  CUdevice d;
  const Driver& drv = Driver::get();
  TORCH_CHECK(drv.DeviceGet(&d, device) == CUDA_SUCCESS, "opsmith: cannot query cuda:", device);
  int v = 0;
  TORCH_CHECK(drv.DeviceGetAttribute(&v, attr, d) == CUDA_SUCCESS, "opsmith: cannot query cuda:", device);
  return v;
}

// Multiprocessors of a device (the sm_count of size expressions), queried once per device.
inline int64_t sm_count(int device) {
  if (device < 0) return 132;  // no device (meta tensors): an H100/H200's count, as geometry._sm_count says
  static std::array<std::atomic<int>, kMaxDevices> counts{};
  int v = counts[device].load(std::memory_order_relaxed);
  if (v == 0) {
    v = device_attribute(device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
    counts[device].store(v, std::memory_order_relaxed);
  }
  return v;
}

inline int compute_capability(int device) {
  return 10 * device_attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) +
         device_attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
}

// One compiled kernel image: a cubin for one architecture (sm_XY as XY), or PTX (arch 0) the driver compiles.
struct Image {
  int arch;
  const unsigned char* data;
  size_t size;
};

// A kernel, loaded once per device (the first call on a device loads its module; later ones read an atomic).
class Kernel {
 public:
  Kernel(const char* op, const char* symbol, std::vector<Image> images, int shared_mem)
      : op_(op), symbol_(symbol), images_(std::move(images)), shared_mem_(shared_mem) {}

  CUfunction function(int device, CUstream stream) {
    TORCH_CHECK(device >= 0 && device < kMaxDevices, op_, ": cuda:", device, " is past the devices opsmith serves");
    CUfunction f = fns_[device].load(std::memory_order_acquire);
    return f != nullptr ? f : load(device, stream);
  }

  const char* op() const { return op_; }

 private:
  CUfunction load(int device, CUstream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    CUfunction f = fns_[device].load(std::memory_order_acquire);
    if (f != nullptr) return f;
    CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
    Driver::get().StreamIsCapturing(stream, &capturing);
    TORCH_CHECK(capturing == CU_STREAM_CAPTURE_STATUS_NONE, op_, ": first use on cuda:", device,
                " happened during CUDA graph capture, where modules cannot be loaded. Fix: run the op once before "
                "capturing (the usual warm-up).");
    const int arch = compute_capability(device);
    const Image* image = nullptr;
    std::string have;
    for (const Image& im : images_) {
      have += (have.empty() ? "" : ", ") + (im.arch ? "sm_" + std::to_string(im.arch) : std::string("PTX"));
      if (im.arch == arch) image = &im;
    }
    for (const Image& im : images_)
      if (image == nullptr && im.arch == 0) image = &im;  // PTX: the driver compiles it for this device
    TORCH_CHECK(image != nullptr, op_, ": this library holds no kernel image for cuda:", device, " (sm_", arch,
                "); it holds ", have, ". Fix: build the library on (or for) a GPU of that architecture.");
    const Driver& drv = Driver::get();
    CUmodule module;
    CUresult r = drv.ModuleLoadData(&module, image->data);
    TORCH_CHECK(r == CUDA_SUCCESS, op_, ": loading the kernel image on cuda:", device, " failed with ",
                error_name(r), ".");
    r = drv.ModuleGetFunction(&f, module, symbol_);
    TORCH_CHECK(r == CUDA_SUCCESS, op_, ": finding '", symbol_, "' on cuda:", device, " failed with ",
                error_name(r), ".");
    if (shared_mem_ > 48 * 1024) {  // above 48 KiB, dynamic shared memory must be opted into
      r = drv.FuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, shared_mem_);
      TORCH_CHECK(r == CUDA_SUCCESS, op_, ": allowing ", shared_mem_, " bytes of shared memory failed with ",
                  error_name(r), ".");
    }
    fns_[device].store(f, std::memory_order_release);
    return f;
  }

  const char* op_;
  const char* symbol_;
  std::vector<Image> images_;
  int shared_mem_;
  std::mutex mu_;
  std::array<std::atomic<CUfunction>, kMaxDevices> fns_{};
};

// The primary context of a device (the one PyTorch's runtime calls use), retained once.
inline CUcontext primary_context(int device) {
  static std::array<std::atomic<CUcontext>, kMaxDevices> contexts{};
  CUcontext c = contexts[device].load(std::memory_order_acquire);
  if (c == nullptr) {
    const Driver& drv = Driver::get();
    CUdevice d;
    TORCH_CHECK(drv.DeviceGet(&d, device) == CUDA_SUCCESS, "opsmith: cannot open cuda:", device);
    CUresult r = drv.PrimaryCtxRetain(&c, d);
    TORCH_CHECK(r == CUDA_SUCCESS, "opsmith: retaining the context of cuda:", device, " failed with ", error_name(r));
    contexts[device].store(c, std::memory_order_release);  // a second retain by a racing thread is harmless
  }
  return c;
}

// Makes the device's primary context current for one launch and restores the caller's after: a thread that
// made no runtime call yet (an autograd worker) may have none, and a launch must not switch the caller's device.
class ContextScope {
 public:
  explicit ContextScope(int device) {
    const Driver& drv = Driver::get();
    want_ = primary_context(device);
    drv.CtxGetCurrent(&had_);
    if (had_ != want_) drv.CtxSetCurrent(want_);
  }
  ~ContextScope() {
    if (had_ != want_ && had_ != nullptr) Driver::get().CtxSetCurrent(had_);
  }

 private:
  CUcontext had_ = nullptr, want_ = nullptr;
};

inline CUstream current_stream(const c10::Device& device) {
  return static_cast<CUstream>(c10::impl::getDeviceGuardImpl(c10::DeviceType::CUDA)->getStream(device).native_handle());
}

// Launch on the device's current stream (what the caller's torch.cuda.stream(...) selected).
inline void launch(Kernel& k, const c10::Device& device, int64_t gx, int64_t gy, int64_t gz, int64_t bx, int64_t by,
                   int64_t bz, int64_t shared_mem, void** args) {
  const int dev = device.index();
  ContextScope scope(dev);
  CUstream stream = current_stream(device);
  CUfunction f = k.function(dev, stream);
  CUresult r = Driver::get().LaunchKernel(f, gx, gy, gz, bx, by, bz, shared_mem, stream, args, nullptr);
  TORCH_CHECK(r == CUDA_SUCCESS, k.op(), ": launching grid=(", gx, ", ", gy, ", ", gz, ") block=(", bx, ", ", by,
              ", ", bz, ") shared_mem=", shared_mem, " on cuda:", dev, " failed with ", error_name(r), ".");
}

// The torch this library was compiled against (OPSMITH_BUILT_FOR_TORCH) must be the one running: checked at
// the first call (a different libtorch whose symbols still resolve would otherwise run with another ABI).
inline void require_torch() {
  static const std::string running = [] {
    const std::string config = at::show_config();
    const size_t at = config.find("TORCH_VERSION=");
    if (at == std::string::npos) return std::string(OPSMITH_BUILT_FOR_TORCH);  // cannot tell: trust the build
    const size_t from = at + 14;
    return config.substr(from, config.find_first_of(", \n", from) - from);
  }();
  TORCH_CHECK(running == OPSMITH_BUILT_FOR_TORCH, "this opsmith op library was built for torch ",
              OPSMITH_BUILT_FOR_TORCH, ", but this process runs torch ", running, ". Fix: rebuild it against the "
              "installed torch (python -m opsmith build ..., or opsmith.native.build).");
}

// -- the texts of the Python path's errors ----------------------------------------------------------------
inline std::string dtype_name(at::ScalarType t) {
  switch (t) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kShort: return "torch.int16";
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kBool: return "torch.bool";
    case at::kFloat8_e4m3fn: return "torch.float8_e4m3fn";
    case at::kFloat8_e5m2: return "torch.float8_e5m2";
    default: return std::string("torch.") + c10::toString(t);
  }
}

template <typename Ints>
std::string tuple_str(const Ints& v) {  // Python's str of a tuple: (4,) and (2, 3)
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + c10::str(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

template <typename Items>
std::string list_str(const Items& v, bool quoted) {  // Python's str of a list: [0, 1] or ['x', 'y']
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + (quoted ? "'" + c10::str(v[i]) + "'" : c10::str(v[i]));
  return s + "]";
}

inline std::string device_str(const at::Tensor& t) { return c10::str(t.device()); }

[[noreturn]] inline void input_error(const char* op, const std::string& arg, const std::string& expected,
                                     const std::string& got, const std::string& fix = "") {
  TORCH_CHECK_VALUE(false, op, ": argument '", arg, "': expected ", expected, ", got ", got, ".",
                    fix.empty() ? "" : " ", fix);
}

[[noreturn]] inline void spec_error(const char* op, const char* field, const std::string& problem,
                                    const std::string& fix) {
  TORCH_CHECK_VALUE(false, op, ": ", field, ": ", problem, " Fix: ", fix);
}

[[noreturn]] inline void differentiation_error(const char* op, const std::string& problem, const std::string& fix) {
  TORCH_CHECK(false, op, ": ", problem, " Fix: ", fix);
}

// The first tensor's device; every later tensor must be on it.
inline c10::Device check_device(const char* op, const char* name, const at::Tensor& t, const char* first,
                                const c10::Device* dev) {
  if (dev == nullptr || !t.is_cuda()) {
    if (!t.is_cuda())
      input_error(op, name, "a CUDA tensor", "a tensor on " + device_str(t), std::string("Fix: pass ") + name + ".cuda().");
    return t.device();
  }
  if (t.device() != *dev)
    input_error(op, name, "a tensor on " + c10::str(*dev) + " (where '" + first + "' is)", "a tensor on " + device_str(t),
                "Fix: put every tensor argument on the same GPU.");
  return *dev;
}

inline void check_dtype(const char* op, const char* name, const at::Tensor& t, at::ScalarType want) {
  if (t.scalar_type() != want)
    input_error(op, name, "dtype " + dtype_name(want), dtype_name(t.scalar_type()),
                std::string("Fix: pass ") + name + ".to(" + dtype_name(want) + ").");
}

inline void check_like(const char* op, const char* name, const at::Tensor& t, const char* other, const at::Tensor& o,
                       bool with_fix) {
  if (t.scalar_type() != o.scalar_type())
    input_error(op, name, "dtype " + dtype_name(o.scalar_type()) + ", the dtype of '" + other +
                "' (the kernel types both with one template parameter)", dtype_name(t.scalar_type()),
                with_fix ? std::string("Fix: pass ") + name + ".to(" + other + ".dtype)." : "");
}

// A declared shape (-1: any size on that axis), as eager.py and fake.py word it.
inline bool any_size(int64_t v) { return v == -1; }
inline bool any_size(const c10::SymInt& v) { return v.maybe_as_int() == std::optional<int64_t>(-1); }

template <typename Size>
std::string want_str(const std::vector<Size>& want) {
  std::string s = "(";
  for (size_t i = 0; i < want.size(); ++i) s += (i ? ", " : "") + (any_size(want[i]) ? "None" : c10::str(want[i]));
  return s + (want.size() == 1 ? ",)" : ")");
}

[[noreturn]] inline void shape_error(const char* op, const char* name, const at::Tensor& t,
                                     const std::vector<int64_t>& want) {
  input_error(op, name, "shape " + want_str(want), "shape " + tuple_str(t.sizes()));
}

inline void check_shape_sym(const char* op, const char* name, const at::Tensor& t, const std::vector<c10::SymInt>& want) {
  bool ok = t.dim() == static_cast<int64_t>(want.size());
  for (size_t i = 0; ok && i < want.size(); ++i)
    if (!any_size(want[i])) ok = t.sym_size(i) == want[i];
  if (!ok) input_error(op, name, "shape " + want_str(want), "shape " + tuple_str(t.sym_sizes()));
}

inline void rank_error(const char* op, const char* name, const at::Tensor& t, const std::string& want) {
  input_error(op, name, want, std::to_string(t.dim()) + " dims (shape " + tuple_str(t.sizes()) + ")");
}

inline void layout_error(const char* op, const char* name, const at::Tensor& t, const std::vector<int64_t>& axes) {
  std::string want = axes.empty() ? "a contiguous tensor"
                                  : "a tensor the kernel can address with the strides of axes " +
                                        list_str(axes, false) + " (the others row-major)";
  input_error(op, name, want + " (declared contiguous='require')",
              "strides " + tuple_str(t.strides()) + " for shape " + tuple_str(t.sizes()),
              std::string("Fix: pass ") + name + ".contiguous().");
}

// layout.addressable: the declared axes at any stride, every other axis row-major around them.
inline bool addressable(const at::Tensor& t, const std::vector<int64_t>& axes) {
  const int64_t nd = t.dim();
  if (axes.empty()) return t.is_contiguous();
  int64_t next = 1;
  for (int64_t a = nd - 1; a >= 0; --a) {
    bool declared = false;
    for (int64_t d : axes) declared |= (d % nd + nd) % nd == a;
    const int64_t s = declared ? t.stride(a) : next;
    if (!declared && t.size(a) > 1 && t.stride(a) != s) return false;
    next = s * t.size(a);
  }
  return true;
}

[[noreturn]] inline void large_error(const char* op, const char* name, int64_t numel) {
  input_error(op, name, "at most 2147483647 elements (the kernel declares 32-bit indexing)",
              std::to_string(numel) + " elements",
              "Fix: index with 64 bits in the kernel (long long, or tl.int64 offsets in Triton) and declare "
              "index_dtype='int64'.");
}

[[noreturn]] inline void extent_error(const char* op, const char* name, const char* what, int64_t value, int64_t limit) {
  input_error(op, name, std::string(what) + " at most " + std::to_string(limit) +
              ": the launch covers it with more than 2^31 threads along one axis, and with 32-bit indexing "
              "(index_dtype='int32') the top thread index wraps", std::to_string(value),
              "Fix: index with 64 bits in the kernel (long long, or tl.int64 offsets in Triton) and declare "
              "index_dtype='int64'.");
}

[[noreturn]] inline void empty_error(const char* op, const char* name, std::initializer_list<const at::Tensor*> outs) {
  std::string shapes;
  for (const at::Tensor* o : outs) shapes += (shapes.empty() ? "" : ", ") + tuple_str(o->sym_sizes());
  input_error(op, name, "a non-empty tensor, since the outputs are non-empty (shapes " + shapes +
              ") and the kernel cannot fill them from no data", "an empty tensor");
}

inline void check_int_range(const char* op, const char* name, int64_t v, int64_t lo, int64_t hi, const char* ctype,
                            const char* hint = "") {
  if (v < lo || v > hi)
    input_error(op, name, "a value in [" + std::to_string(lo) + ", " + std::to_string(hi) + "] for the kernel's " +
                ctype + " parameter", std::to_string(v), hint);
}

inline std::string py_float(double v) {  // Python's repr of a float: the shortest digits that read back
  if (v != v) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  int digits = 1;
  for (; digits < 17; ++digits) {
    std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
    if (std::strtod(buf, nullptr) == v) break;
  }
  std::snprintf(buf, sizeof buf, "%.*e", digits - 1, v);
  const std::string sci = buf;
  const int exp = std::atoi(sci.c_str() + sci.find('e') + 1);
  if (exp >= -4 && exp < 16) {  // Python prints these positionally: 65504.0, 0.0001
    std::snprintf(buf, sizeof buf, "%.*f", std::max(digits - 1 - exp, 1), v);
    return buf;
  }
  std::string mant = sci.substr(0, sci.find('e'));
  if (mant.find('.') != std::string::npos) {
    while (mant.back() == '0') mant.pop_back();
    if (mant.back() == '.') mant.pop_back();
  }
  return mant + "e" + (exp < 0 ? "-" : "+") + (std::abs(exp) < 10 ? "0" : "") + std::to_string(std::abs(exp));
}

inline void check_float_range(const char* op, const char* name, double v, double max, const char* ctype) {
  if (!(v >= -max && v <= max) && v == v && std::abs(v) != INFINITY)
    input_error(op, name, "a value in [" + py_float(-max) + ", " + py_float(max) + "] (or inf, nan) for the kernel's " +
                ctype + " parameter", py_float(v), "Fix: scale the value, or take it as double in the kernel.");
}

// fake.out_shape for a ReduceDims output: the input's sizes without (or with 1 at) the reduced axes.
template <typename Size>
std::vector<Size> reduced(const char* op, const char* name, c10::ArrayRef<Size> shape,
                          const std::vector<int64_t>& dims, bool keepdim) {
  const int64_t nd = static_cast<int64_t>(shape.size());
  std::vector<bool> gone(nd, false);
  for (int64_t d : dims) {
    if (d < -nd || d >= nd)
      input_error(op, name, "a tensor with axis " + std::to_string(d) + " to reduce",
                  std::to_string(nd) + " dims (shape " + tuple_str(shape) + ")");
    gone[(d + nd) % nd] = true;
  }
  std::vector<Size> out;
  for (int64_t a = 0; a < nd; ++a) {
    if (!gone[a]) out.push_back(shape[a]);
    else if (keepdim) out.push_back(Size(1));
  }
  return out;
}

// layout.share_strides: tensors one stride parameter describes agree on `axis`, the inputs among them made
// contiguous (or refused, where required) when they do not.
inline void share_strides(const char* op, const std::vector<std::string>& names, std::vector<at::Tensor*> ts,
                          const std::vector<bool>& inputs, const std::vector<bool>& require, int64_t axis) {
  auto agree = [&] {
    bool any = false;
    int64_t first = 0;
    for (at::Tensor* t : ts) {
      if (t->dim() == 0 || t->size(axis) <= 1) continue;
      if (!any) first = t->stride(axis), any = true;
      else if (t->stride(axis) != first) return false;
    }
    return true;
  };
  if (agree()) return;
  for (size_t k = 0; k < ts.size(); ++k) {
    if (!inputs[k] || ts[k]->is_contiguous()) continue;
    if (require[k]) {
      std::vector<std::string> others;
      for (const auto& n : names) if (n != names[k]) others.push_back(n);
      input_error(op, names[k], "a contiguous tensor (declared contiguous='require'), since it shares one stride "
                  "parameter with " + list_str(others, true), "strides " + tuple_str(ts[k]->strides()) +
                  " for shape " + tuple_str(ts[k]->sizes()), "Fix: pass " + names[k] + ".contiguous().");
    }
    *ts[k] = ts[k]->contiguous();
  }
  if (!agree()) {
    std::string got;
    for (size_t k = 0; k < ts.size(); ++k)
      got += (k ? ", " : "") + names[k] + ": " + tuple_str(ts[k]->sizes()) + " strides " + tuple_str(ts[k]->strides());
    input_error(op, names[0], "tensors " + list_str(names, true) + " with one stride on axis " + std::to_string(axis) +
                " (the kernel takes a single stride parameter for them)", got, "Fix: pass tensors of the same shape.");
  }
}

// Whether every size of these tensors is a plain integer (fake tensors under torch.compile(dynamic=True)
// carry symbolic ones, which the size checks leave alone, as fake.py does).
inline bool all_static(std::initializer_list<const at::Tensor*> ts) {
  for (const at::Tensor* t : ts)
    for (const c10::SymInt& s : t->sym_sizes())
      if (s.is_heap_allocated()) return false;
  return true;
}

inline int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
inline int64_t pow2(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}
inline int64_t lead(const at::Tensor& t, int64_t k) {
  int64_t p = 1;
  for (int64_t a = 0; a + k < t.dim(); ++a) p *= t.size(a);
  return p;
}

// The tuning decision for a key: one made before the build, else the declared default config.
template <size_t N>
int lookup(const std::array<int64_t, N>& key, const std::vector<std::pair<std::array<int64_t, N>, int>>& decisions,
           int otherwise) {
  for (const auto& d : decisions)
    if (d.first == key) return d.second;
  return otherwise;
}

template <size_t N>
[[noreturn]] void missing_variant(const char* op, int config, const std::array<int64_t, N>& spec, const char* held) {
  TORCH_CHECK(false, op, ": this library holds no kernel for config ", config, " and specialization ",
              list_str(spec, false), " (dtypes as ScalarType numbers, alignment and sizes compiled in); it holds ",
              held, ". Fix: call the op with these dtypes and sizes before `opsmith build` (the build takes every "
              "kernel the process compiled), or pass dtypes= to the build.");
}

}  // namespace opsmith
"""
