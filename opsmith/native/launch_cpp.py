"""The launch half of the C++ runtime every generated op library carries: the CUDA driver (loaded at first
use, like PyTorch does), kernels loaded once per device from embedded images, the launch on the current
stream (``launch.py``'s job in Python), and the torch-version check.

It uses only device-generic torch headers (the current stream through the device guard interface), so the
library links against libc10 and libtorch alone and compiles against a CPU build of torch too. Built with
``-DOPSMITH_DRY_RUN`` (``tests/test_differential.py``) it records launches instead, on CPU tensors.
"""

LAUNCH_CPP = r"""
namespace opsmith {

constexpr int kMaxDevices = 64;

// The driver's refusals: LaunchError where opsmith runs in the process (raise_opsmith), else RuntimeError.
[[noreturn]] inline void launch_error(const std::string& text) {
  raise_opsmith("launch", {text});
  OPSMITH_CHECK(false, text);
}
#define OPSMITH_LAUNCH_CHECK(cond, ...)                          \
  do {                                                           \
    if (!(cond)) opsmith::launch_error(opsmith::cat(__VA_ARGS__)); \
  } while (0)

// The driver, loaded at first use: libcuda.so.1 is the driver itself, present wherever a GPU is.
struct Driver {
  CUresult (*ModuleLoadData)(CUmodule*, const void*);
  CUresult (*ModuleLoadDataEx)(CUmodule*, const void*, unsigned int, CUjit_option*, void**);
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           CUstream, void**, void**);
  CUresult (*FuncSetAttribute)(CUfunction, CUfunction_attribute, int);
  CUresult (*FuncGetAttribute)(int*, CUfunction_attribute, CUfunction);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*DeviceGetAttribute)(int*, CUdevice_attribute, CUdevice);
  CUresult (*GetErrorName)(CUresult, const char**);
  CUresult (*CtxGetCurrent)(CUcontext*);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*PrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*StreamIsCapturing)(CUstream, CUstreamCaptureStatus*);
  CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);  // an XLA output's declared fill
  CUresult (*MemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*MemsetD32Async)(CUdeviceptr, unsigned int, size_t, CUstream);

  static const Driver& get() {
    static const Driver d = [] {
      Driver d{};
      void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
      OPSMITH_CHECK(lib != nullptr, "opsmith native ops need the CUDA driver (libcuda.so.1): ", dlerror());
      auto sym = [&](const char* name) {
        void* p = dlsym(lib, name);
        OPSMITH_CHECK(p != nullptr, "opsmith native ops: the CUDA driver lacks ", name);
        return p;
      };
      d.ModuleLoadData = reinterpret_cast<decltype(d.ModuleLoadData)>(sym("cuModuleLoadData"));
      d.ModuleLoadDataEx = reinterpret_cast<decltype(d.ModuleLoadDataEx)>(sym("cuModuleLoadDataEx"));
      d.ModuleGetFunction = reinterpret_cast<decltype(d.ModuleGetFunction)>(sym("cuModuleGetFunction"));
      d.LaunchKernel = reinterpret_cast<decltype(d.LaunchKernel)>(sym("cuLaunchKernel"));
      d.FuncSetAttribute = reinterpret_cast<decltype(d.FuncSetAttribute)>(sym("cuFuncSetAttribute"));
      d.FuncGetAttribute = reinterpret_cast<decltype(d.FuncGetAttribute)>(sym("cuFuncGetAttribute"));
      d.DeviceGet = reinterpret_cast<decltype(d.DeviceGet)>(sym("cuDeviceGet"));
      d.DeviceGetAttribute = reinterpret_cast<decltype(d.DeviceGetAttribute)>(sym("cuDeviceGetAttribute"));
      d.GetErrorName = reinterpret_cast<decltype(d.GetErrorName)>(sym("cuGetErrorName"));
      d.CtxGetCurrent = reinterpret_cast<decltype(d.CtxGetCurrent)>(sym("cuCtxGetCurrent"));
      d.CtxSetCurrent = reinterpret_cast<decltype(d.CtxSetCurrent)>(sym("cuCtxSetCurrent"));
      d.PrimaryCtxRetain = reinterpret_cast<decltype(d.PrimaryCtxRetain)>(sym("cuDevicePrimaryCtxRetain"));
      d.StreamIsCapturing = reinterpret_cast<decltype(d.StreamIsCapturing)>(sym("cuStreamIsCapturing"));
      d.MemsetD8Async = reinterpret_cast<decltype(d.MemsetD8Async)>(sym("cuMemsetD8Async"));
      d.MemsetD16Async = reinterpret_cast<decltype(d.MemsetD16Async)>(sym("cuMemsetD16Async"));
      d.MemsetD32Async = reinterpret_cast<decltype(d.MemsetD32Async)>(sym("cuMemsetD32Async"));
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
  OPSMITH_CHECK(drv.DeviceGet(&d, device) == CUDA_SUCCESS, "opsmith: cannot query cuda:", device);
  int v = 0;
  OPSMITH_CHECK(drv.DeviceGetAttribute(&v, attr, d) == CUDA_SUCCESS, "opsmith: cannot query cuda:", device);
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

// The driver JIT's options for a PTX image (the op's declared options=): 0 leaves the driver's default.
struct Jit {
  unsigned max_registers = 0;
  int line_info = 0;
  int debug = 0;
};

// A kernel, loaded once per device (the first call on a device loads its module; later ones read an atomic).
class Kernel {
 public:
  Kernel(const char* op, const char* symbol, std::vector<Image> images, int shared_mem, Jit jit = {})
      : op_(op), symbol_(symbol), images_(std::move(images)), shared_mem_(shared_mem), jit_(jit) {}

  CUfunction function(int device, CUstream stream) {
    OPSMITH_LAUNCH_CHECK(device >= 0 && device < kMaxDevices, op_, ": cuda:", device, " is past the devices opsmith serves");
    CUfunction f = fns_[device].load(std::memory_order_acquire);
    return f != nullptr ? f : load(device, stream);
  }

  bool loaded(int device) const {
    return device < 0 || device >= kMaxDevices || fns_[device].load(std::memory_order_acquire) != nullptr;
  }

  const char* op() const { return op_; }
  const char* symbol() const { return symbol_; }

  // FNV-1a of the first image's bytes (its size counts the NUL the embedding appends): what the dry run
  // records to name the kernel a call chose, as the Python dry run does (launch_code.fnv1a64).
  std::string identity() const {
    uint64_t h = 0xcbf29ce484222325ULL;
    const Image& im = images_.front();
    for (size_t i = 0; i + 1 < im.size; ++i) h = (h ^ im.data[i]) * 0x100000001b3ULL;
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
  }

 private:
  CUfunction load(int device, CUstream stream) {
    std::lock_guard<std::mutex> lock(mu_);
    CUfunction f = fns_[device].load(std::memory_order_acquire);
    if (f != nullptr) return f;
    CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
    Driver::get().StreamIsCapturing(stream, &capturing);
    OPSMITH_LAUNCH_CHECK(capturing == CU_STREAM_CAPTURE_STATUS_NONE, op_, ": first use on cuda:", device,
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
    OPSMITH_LAUNCH_CHECK(image != nullptr, op_, ": this library holds no kernel image for cuda:", device, " (sm_", arch,
                "); it holds ", have, ". Fix: build the library on (or for) a GPU of that architecture.");
    const Driver& drv = Driver::get();
    CUmodule module;
    CUjit_option names[3];
    void* values[3];
    unsigned n = 0;
    if (image->arch == 0) {  // PTX: the driver compiles it, with the declared options
      if (jit_.max_registers) names[n] = CU_JIT_MAX_REGISTERS, values[n++] = reinterpret_cast<void*>(uintptr_t(jit_.max_registers));
      if (jit_.line_info) names[n] = CU_JIT_GENERATE_LINE_INFO, values[n++] = reinterpret_cast<void*>(uintptr_t(1));
      if (jit_.debug) names[n] = CU_JIT_GENERATE_DEBUG_INFO, values[n++] = reinterpret_cast<void*>(uintptr_t(1));
    }
    CUresult r = n ? drv.ModuleLoadDataEx(&module, image->data, n, names, values) : drv.ModuleLoadData(&module, image->data);
    OPSMITH_LAUNCH_CHECK(r == CUDA_SUCCESS, op_, ": loading the kernel image on cuda:", device, " failed with ",
                error_name(r), ".");
    r = drv.ModuleGetFunction(&f, module, symbol_);
    OPSMITH_LAUNCH_CHECK(r == CUDA_SUCCESS, op_, ": finding '", symbol_, "' on cuda:", device, " failed with ",
                error_name(r), ".");
    int allow = shared_mem_;
    if (shared_mem_ < 0) {  // a size expression gives it per call: all the device allows, less the static part
      int fixed = 0;
      r = drv.FuncGetAttribute(&fixed, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f);
      OPSMITH_LAUNCH_CHECK(r == CUDA_SUCCESS, op_, ": reading the kernel's static shared memory on cuda:", device,
                  " failed with ", error_name(r), ".");
      allow = device_attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN) - fixed;
    }
    if (allow > 48 * 1024) {  // above 48 KiB, dynamic shared memory must be opted into
      r = drv.FuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, allow);
      OPSMITH_LAUNCH_CHECK(r == CUDA_SUCCESS, op_, ": allowing ", allow, " bytes of shared memory failed with ",
                  error_name(r), ".");
    }
    fns_[device].store(f, std::memory_order_release);
    return f;
  }

  const char* op_;
  const char* symbol_;
  std::vector<Image> images_;
  int shared_mem_;
  Jit jit_;
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
    OPSMITH_CHECK(drv.DeviceGet(&d, device) == CUDA_SUCCESS, "opsmith: cannot open cuda:", device);
    CUresult r = drv.PrimaryCtxRetain(&c, d);
    OPSMITH_CHECK(r == CUDA_SUCCESS, "opsmith: retaining the context of cuda:", device, " failed with ", error_name(r));
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

// Whether a launch of `k` on `device` can proceed: false only while the current stream captures a CUDA graph
// and the kernel's module is not loaded yet (modules cannot load then). A library serving the process that
// registered the op hands such a call to the Python path, whose warm-up loaded its own module. A loaded
// kernel costs one atomic load here; the stream is asked for only before the first load.
inline bool ready(const Kernel& k, const Device& device) {
  if (k.loaded(device.index())) return true;
  CUstreamCaptureStatus capturing = CU_STREAM_CAPTURE_STATUS_NONE;
  Driver::get().StreamIsCapturing(current_stream(device), &capturing);
  return capturing == CU_STREAM_CAPTURE_STATUS_NONE;
}

// What a call launches: its config, grid, block and shared memory, and its parameters (pointers to the
// values, and each value's size for the dry run).
struct Launch {
  int config;
  int64_t grid[3];
  int64_t block[3];
  int64_t shared_mem;
};

// A variant that compiled parameters in (Triton: integers equal to 1; bit p of ``dropped``) takes the others,
// in order: ``args`` and ``sizes`` (n parameters, then 4 trailing NULL scratch pointers) are compacted in
// place. Returns how many parameters remain.
inline int keep_arguments(void** args, uint8_t* sizes, int n, uint64_t dropped) {
  int m = 0;
  for (int p = 0; p < n; ++p)
    if (p >= 64 || !((dropped >> p) & 1)) args[m] = args[p], sizes[m++] = sizes[p];
  for (int t = 0; t < 4; ++t) args[m + t] = args[n + t];
  return m;
}

#ifdef OPSMITH_DRY_RUN
// A library built with -DOPSMITH_DRY_RUN (the differential tests) records launches instead of making them,
// and accepts CPU tensors as the call's device: the whole CUDA entry runs on a machine without a GPU.
inline std::vector<std::string>& dry_run_launches() {
  static std::vector<std::string> launches;
  return launches;
}

inline std::mutex& dry_run_lock() {  // threads call ops without the GIL
  static std::mutex lock;
  return lock;
}

inline std::string dry_run_take() {
  std::lock_guard<std::mutex> hold(dry_run_lock());
  std::string out = "[";
  for (size_t i = 0; i < dry_run_launches().size(); ++i) out += (i ? ", " : "") + dry_run_launches()[i];
  dry_run_launches().clear();
  return out + "]";
}

inline void launch(Kernel& k, const Device&, const Launch& l, void** args, const uint8_t* sizes, int n) {
  std::string hex, pointers;
  for (int p = 0; p < n; ++p) {
    unsigned char slot[8] = {0};  // each parameter in an 8-byte slot, as the Python dry run packs it
    std::memcpy(slot, args[p], sizes[p]);
    char two[3];
    for (unsigned char b : slot) std::snprintf(two, sizeof two, "%02x", b), hex += two;
  }
  std::string record = cat(
      "{\"config\": ", l.config, ", \"symbol\": \"", k.symbol(), "\", \"image\": \"", k.identity(),
      "\", \"grid\": [", l.grid[0], ", ", l.grid[1], ", ", l.grid[2], "], \"block\": [", l.block[0], ", ",
      l.block[1], ", ", l.block[2], "], \"shared_mem\": ", l.shared_mem, ", \"args\": \"", hex, "\"}");
  std::lock_guard<std::mutex> hold(dry_run_lock());
  dry_run_launches().push_back(std::move(record));
}
#else
// Launch on the device's current stream (what the caller's torch.cuda.stream(...) selected). The plan checked
// the grid; cuLaunchKernel's parameters are unsigned int, so a value outside them is refused here too rather
// than wrapped (2^32 + k blocks would launch k).
inline void launch(Kernel& k, const Device& device, const Launch& l, void** args, const uint8_t*, int) {
  const int dev = device.index();
  const int64_t most[3] = {2147483647, 65535, 65535};
  for (int a = 0; a < 3; ++a)
    OPSMITH_LAUNCH_CHECK(l.grid[a] >= 1 && l.grid[a] <= most[a] && l.block[a] >= 1 && l.block[a] <= 1024, k.op(),
                ": launch grid=(", l.grid[0], ", ", l.grid[1], ", ", l.grid[2], ") block=(", l.block[0], ", ",
                l.block[1], ", ", l.block[2], ") is outside what CUDA launches; this is an opsmith bug.");
  ContextScope scope(dev);
  CUstream stream = current_stream(device);
  CUfunction f = k.function(dev, stream);
  CUresult r = Driver::get().LaunchKernel(f, unsigned(l.grid[0]), unsigned(l.grid[1]), unsigned(l.grid[2]),
                                          unsigned(l.block[0]), unsigned(l.block[1]), unsigned(l.block[2]),
                                          unsigned(l.shared_mem), stream, args, nullptr);
  OPSMITH_LAUNCH_CHECK(r == CUDA_SUCCESS, k.op(), ": launching grid=(", l.grid[0], ", ", l.grid[1], ", ", l.grid[2],
              ") block=(", l.block[0], ", ", l.block[1], ", ", l.block[2], ") shared_mem=", l.shared_mem,
              " on cuda:", dev, " failed with ", error_name(r), ".");
}
#endif

#ifdef OPSMITH_NO_ATEN
// A stable-ABI library runs under any torch from its target version on (the C shim it calls is versioned); an
// XLA handler library calls no torch at all.
inline void require_torch() {}
#else
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
  OPSMITH_CHECK(running == OPSMITH_BUILT_FOR_TORCH, "this opsmith op library was built for torch ",
              OPSMITH_BUILT_FOR_TORCH, ", but this process runs torch ", running, ". Fix: rebuild it against the "
              "installed torch (python -m opsmith build ..., or opsmith.native.build).");
}
#endif

}  // namespace opsmith
"""
