"""The guard half of the C++ runtime: ``guards.py`` in C++. Every refusal is worded as the Python path words it,
character for character (the differential tests compare them), and the conversions of Python values to a
kernel's C types round as ``guards.py`` rounds (fp16 and bf16 once, from the double).
"""

GUARDS_CPP = r"""
namespace opsmith {

inline std::string dtype_name(c10::ScalarType t) {
  switch (t) {
    case c10::ScalarType::Float: return "torch.float32";
    case c10::ScalarType::Double: return "torch.float64";
    case c10::ScalarType::Half: return "torch.float16";
    case c10::ScalarType::BFloat16: return "torch.bfloat16";
    case c10::ScalarType::Int: return "torch.int32";
    case c10::ScalarType::Long: return "torch.int64";
    case c10::ScalarType::Short: return "torch.int16";
    case c10::ScalarType::Char: return "torch.int8";
    case c10::ScalarType::Byte: return "torch.uint8";
    case c10::ScalarType::Bool: return "torch.bool";
    case c10::ScalarType::Float8_e4m3fn: return "torch.float8_e4m3fn";
    case c10::ScalarType::Float8_e5m2: return "torch.float8_e5m2";
    default: return std::string("torch.") + c10::toString(t);
  }
}

template <typename Ints>
std::string tuple_str(const Ints& v) {  // Python's str of a tuple: (4,) and (2, 3)
  std::string s = "(";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + cat(v[i]);
  return s + (v.size() == 1 ? ",)" : ")");
}

template <typename Items>
std::string list_str(const Items& v, bool quoted) {  // Python's str of a list: [0, 1] or ['x', 'y']
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + (quoted ? "'" + cat(v[i]) + "'" : cat(v[i]));
  return s + "]";
}

#ifdef OPSMITH_NO_ATEN
inline std::string shape_str(const Tensor& t) { return tuple_str(t.sizes()); }
#else
inline std::string shape_str(const Tensor& t) { return tuple_str(t.sym_sizes()); }
#endif

inline std::string device_str(const Tensor& t) { return device_name(t.device()); }

// Refusals raise opsmith's InputError where opsmith runs in the process (raise_opsmith), else ValueError.
[[noreturn]] inline void input_error(const char* op, const std::string& arg, const std::string& expected,
                                     const std::string& got, const std::string& fix = "") {
  raise_opsmith("input", {op, arg, expected, got, fix});
  OPSMITH_CHECK_VALUE(false, op, ": argument '", arg, "': expected ", expected, ", got ", got, ".",
                    fix.empty() ? "" : " ", fix);
}

[[noreturn]] inline void differentiation_error(const char* op, const std::string& problem, const std::string& fix) {
  raise_opsmith("differentiation", {op, problem, fix});
  OPSMITH_CHECK(false, op, ": ", problem, " Fix: ", fix);
}

constexpr const char* kFix64 = "Fix: index with 64 bits in the kernel (long long, or tl.int64 offsets in Triton) and "
                               "declare index_dtype='int64'.";

// -- Refusals -------------------------------------------------------------------------------------------------

// The first tensor's device; every later tensor must be on it. The dry run takes CPU tensors as the device.
inline Device check_device(const char* op, const char* name, const Tensor& t, const char* first,
                                const Device* dev) {
#ifdef OPSMITH_DRY_RUN
  const bool device_ok = t.is_cuda() || t.is_cpu();
#else
  const bool device_ok = t.is_cuda();
#endif
  if (dev == nullptr || !device_ok) {
    if (!device_ok)
      input_error(op, name, "a CUDA tensor", "a tensor on " + device_str(t), std::string("Fix: pass ") + name + ".cuda().");
    return t.device();
  }
  if (t.device() != *dev)
    input_error(op, name, "a tensor on " + device_name(*dev) + " (where '" + first + "' is)", "a tensor on " + device_str(t),
                "Fix: put every tensor argument on the same GPU.");
  return *dev;
}

[[noreturn]] inline void missing_error(const char* op, const char* name) {
  input_error(op, name, "a tensor", "None", std::string("Fix: pass a tensor as ") + name +
              "; only inputs declared optional=True take None.");
}

inline void check_dtype(const char* op, const char* name, const Tensor& t, c10::ScalarType want) {
  if (t.scalar_type() != want)
    input_error(op, name, "dtype " + dtype_name(want), dtype_name(t.scalar_type()),
                std::string("Fix: pass ") + name + ".to(" + dtype_name(want) + ").");
}

// nearest: (refused dtype, the declared one the fix names) where that is not the first declared (guards.nearest_dtype)
inline void check_dtype_in(const char* op, const char* name, const Tensor& t,
                           std::initializer_list<c10::ScalarType> allowed,
                           std::initializer_list<std::pair<c10::ScalarType, c10::ScalarType>> nearest) {
  std::string names;
  for (c10::ScalarType a : allowed) {
    if (t.scalar_type() == a) return;
    names += (names.empty() ? "" : ", ") + dtype_name(a);
  }
  c10::ScalarType to = *allowed.begin();
  for (const auto& p : nearest)
    if (p.first == t.scalar_type()) to = p.second;
  input_error(op, name, "one of the dtypes " + names + " (declared)", dtype_name(t.scalar_type()),
              std::string("Fix: pass ") + name + ".to(" + dtype_name(to) + ").");
}

inline void check_like(const char* op, const char* name, const Tensor& t, const char* other, const Tensor& o) {
  if (t.scalar_type() != o.scalar_type())
    input_error(op, name, "dtype " + dtype_name(o.scalar_type()) + ", the dtype of '" + other +
                "' (the kernel types both with one template parameter)", dtype_name(t.scalar_type()),
                std::string("Fix: pass ") + name + ".to(" + other + ".dtype).");
}

inline void rank_error(const char* op, const char* name, const Tensor& t, int64_t exact, int64_t least,
                       const char* decl = nullptr) {
  std::string want;
  if (decl != nullptr)
    want = (exact >= 0 ? std::to_string(exact) + " dims" : "at least " + std::to_string(least) + " dims") +
           " (declared shape " + decl + ")";
  else
    want = exact >= 0 ? std::to_string(exact) + " dims"
                      : "at least " + std::to_string(least) +
                            " dims (the launch geometry, a reduced axis or an extra needs them)";
  input_error(op, name, want, std::to_string(t.dim()) + " dims (shape " + shape_str(t) + ")");
}

inline void layout_error(const char* op, const char* name, const Tensor& t, const std::vector<int64_t>& axes) {
  std::string want = axes.empty() ? "a contiguous tensor"
                                  : "a tensor the kernel can address with the strides of axes " +
                                        list_str(axes, false) + " (the others row-major)";
  input_error(op, name, want + " (declared contiguous='require')",
              "strides " + tuple_str(t.strides()) + " for shape " + tuple_str(t.sizes()),
              std::string("Fix: pass ") + name + ".contiguous().");
}

// layout.addressable: the declared axes at any stride, every other axis row-major around them.
inline bool addressable(const Tensor& t, const std::vector<int64_t>& axes) {
  if (t.numel() == 0) return true;  // zero elements: no address is read, whatever the strides
  const int64_t nd = t.dim();
  if (axes.empty()) return t.is_contiguous();
  int64_t next = 1;
  for (int64_t a = nd - 1; a >= 0; --a) {
    bool declared = false;
    for (int64_t d : axes) declared |= d >= -nd && d < nd && (d % nd + nd) % nd == a;
    const int64_t s = declared ? t.stride(a) : next;
    if (!declared && t.size(a) > 1 && t.stride(a) != s) return false;
    next = s * t.size(a);
  }
  return true;
}

[[noreturn]] inline void large_error(const char* op, const char* name, int64_t numel) {
  input_error(op, name, "at most 2147483647 elements (the kernel declares 32-bit indexing)",
              std::to_string(numel) + " elements", kFix64);
}

// guards.span: elements a view spans (its largest element offset + 1).
inline int64_t span(const Tensor& t) {
  if (t.numel() == 0) return 0;
  int64_t s = 1;
  for (int64_t a = 0; a < t.dim(); ++a) s += (t.size(a) - 1) * t.stride(a);
  return s;
}

inline void check_span(const char* op, const char* name, const Tensor& t) {
  const int64_t s = span(t);
  if (s > 2147483647)
    input_error(op, name, "a view spanning at most 2147483647 elements (the kernel declares 32-bit indexing and "
                "addresses it with its strides)", "shape " + tuple_str(t.sizes()) + " with strides " +
                tuple_str(t.strides()) + ", spanning " + std::to_string(s) + " elements", kFix64);
}

// An output's declared init must be a value its dtype holds (limits.init_fits): an integer in range, exactly,
// for an integer dtype (2.5 would truncate, -1 wrap in uint8); a float dtype takes inf, nan and its finite range.
inline void check_init(const char* op, const char* name, const char* output, const Tensor& o, double v,
                       const char* shown) {
  double lo = 0, hi = 0, most = 0;
  switch (o.scalar_type()) {
    case c10::ScalarType::Bool: hi = 1; break;
    case c10::ScalarType::Byte: hi = 255; break;
    case c10::ScalarType::Char: lo = -128; hi = 127; break;
    case c10::ScalarType::Short: lo = -32768; hi = 32767; break;
    case c10::ScalarType::Int: lo = -2147483648.0; hi = 2147483647.0; break;
    case c10::ScalarType::Long: lo = -9007199254740992.0; hi = 9007199254740992.0; break;
    case c10::ScalarType::Half: most = 65504.0; break;
    case c10::ScalarType::BFloat16: most = 3.3895313892515355e38; break;
    case c10::ScalarType::Float: most = 3.4028234663852886e38; break;
    case c10::ScalarType::Float8_e4m3fn: most = 448.0; break;
    case c10::ScalarType::Float8_e5m2: most = 57344.0; break;
    default: return;  // float64 and others: any double
  }
  const bool fits = most > 0 ? (v != v || std::isinf(v) || std::fabs(v) <= most)
                             : (std::isfinite(v) && v == std::floor(v) && v >= lo && v <= hi);
  if (!fits)
    input_error(op, name, std::string("a dtype that holds output '") + output + "''s declared init=" + shown,
                dtype_name(o.scalar_type()), "Fix: pass a tensor of a dtype that holds it (a float dtype for -inf "
                "or 2.5), or declare the output's dtype with OutputDecl(dtype=...).");
}

[[noreturn]] inline void empty_error(const char* op, const char* name, std::initializer_list<const Tensor*> outs) {
  std::string shapes;
  for (const Tensor* o : outs)  // an optional output the call did not ask for is undefined: no shape
    if (o->defined()) shapes += (shapes.empty() ? "" : ", ") + shape_str(*o);
  input_error(op, name, "a non-empty tensor, since the outputs are non-empty (shapes " + shapes +
              ") and the kernel cannot fill them from no data", "an empty tensor",
              "Fix: pass a non-empty tensor; or, where the answer from no data is a constant (a sum's 0, a max's "
              "-inf), declare it on every output with OutputDecl(..., init=value): outputs are filled with it and "
              "the kernel runs.");
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
template <typename Sizes, typename Size = std::decay_t<decltype(std::declval<Sizes>()[0])>>
std::vector<Size> reduced(const char* op, const char* name, const Sizes& shape, const std::vector<int64_t>& dims,
                          bool keepdim) {
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
inline void share_strides(const char* op, const std::vector<std::string>& names, std::vector<Tensor*> ts,
                          const std::vector<bool>& inputs, const std::vector<bool>& require, int64_t axis) {
  auto agree = [&] {
    bool any = false;
    int64_t first = 0;
    for (Tensor* t : ts) {
      if (t->dim() == 0 || t->size(axis) <= 1 || t->numel() == 0) continue;  // an empty tensor addresses nothing
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
    *ts[k] = opsmith::contiguous(*ts[k]);  // qualified: the stable API has a contiguous() too
  }
  if (!agree()) {
    std::string got;
    for (size_t k = 0; k < ts.size(); ++k)
      got += (k ? ", " : "") + names[k] + ": " + tuple_str(ts[k]->sizes()) + " strides " + tuple_str(ts[k]->strides());
    input_error(op, names[0], "tensors " + list_str(names, true) + " with one stride on axis " + std::to_string(axis) +
                " (the kernel takes a single stride parameter for them)", got, "Fix: pass tensors of the same shape.");
  }
}

// An optional output as the schema's Tensor? returns it: None where the call did not ask for it.
inline std::optional<Tensor> maybe(const Tensor& t) { return t.defined() ? std::optional<Tensor>(t) : std::nullopt; }

#ifndef OPSMITH_NO_ATEN  // the stable Tensor has no SymInt sizes: its Meta kernels see concrete ones
// Whether every size and stride of these tensors is a plain integer (fake tensors under dynamic shapes carry
// symbolic ones, which the size checks leave alone, as fake.py does).
inline bool all_static(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) {
    if (!t->defined()) continue;  // an optional input passed as None
    for (const c10::SymInt& s : t->sym_sizes())
      if (s.is_heap_allocated()) return false;
    for (const c10::SymInt& s : t->sym_strides())
      if (s.is_heap_allocated()) return false;
  }
  return true;
}
#endif

// -- conversions: guards.round_bits -------------------------------------------------------------------------

// The bits of v in a binary float format with `frac` fraction bits and normal exponents in [emin, emax],
// rounded once to nearest even from the double (through float, 1 + 2^-11 + 2^-40 would become 0x3c00 in fp16,
// not 0x3c01).
inline uint16_t round_bits(double v, int frac, int emin, int emax) {
  uint64_t b;
  std::memcpy(&b, &v, sizeof b);
  int exp_bits = 0;
  while ((1 << exp_bits) <= emax + 1) ++exp_bits;
  const uint32_t sign = static_cast<uint32_t>(b >> 63) << (frac + exp_bits);
  const int e_field = static_cast<int>((b >> 52) & 0x7FF);
  const uint64_t man = b & ((uint64_t(1) << 52) - 1);
  const uint32_t inf = ((uint32_t(1) << exp_bits) - 1) << frac;
  if (e_field == 0x7FF) return static_cast<uint16_t>(sign | inf | (man ? uint32_t(1) << (frac - 1) : 0));
  if (e_field == 0) return static_cast<uint16_t>(sign);
  int e = e_field - 1023;
  const uint64_t m = man | (uint64_t(1) << 52);
  const int shift = 52 - frac + std::max(emin - e, 0);
  uint64_t q = 0;
  if (shift <= 53) {  // beyond, m is below half a unit: rounds to zero
    const uint64_t rem = m & ((uint64_t(1) << shift) - 1), half = uint64_t(1) << (shift - 1);
    q = m >> shift;
    if (rem > half || (rem == half && (q & 1))) ++q;
  }
  if (e < emin) return static_cast<uint16_t>(sign | q);
  if (q == (uint64_t(1) << (frac + 1))) ++e, q >>= 1;
  if (e > emax) return static_cast<uint16_t>(sign | inf);
  return static_cast<uint16_t>(sign | (uint32_t(e + emax) << frac) | uint32_t(q - (uint64_t(1) << frac)));
}

inline uint16_t half_bits(double v) { return round_bits(v, 10, -14, 15); }
inline uint16_t bf16_bits(double v) { return round_bits(v, 7, -126, 127); }

// A float compiled into the kernel, as its specialization key: its IEEE bits (flavors.base.scalar_key), so
// -0.0 and 0.0 are distinct kernels.
inline int64_t f64_bits(double v) {
  int64_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

}  // namespace opsmith
"""
