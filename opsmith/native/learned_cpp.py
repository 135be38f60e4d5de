"""What a served library learns after its build, as C++: the kernels and tuning decisions ``learned.py`` hands it at
run time (a dtype, a compiled-in size or a tuning key first met in this process), kept beside the tables its build
embedded. A served library is thus a function of the op records alone: the next process finds it in the cache
instead of compiling one that holds what the last process learned (~19 s on an H200 for the RMSNorm library).

Appended under a lock and read without one: an entry is written whole before the count that covers it is
published (release/acquire), and no entry is ever removed, so a call in flight reads either the old count or the
new one. The capacities bound a process's learning (``REBUILDS`` used to bound its rebuilds to 16 per op); past
them calls stay on the Python path, counted as misses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .cpp import SCALAR_TYPE, cpp_str

__all__ = ["LEARNED_CPP", "LEARNED_DECISIONS", "LEARNED_KERNELS", "learned_entries", "learned_functions"]

LEARNED_KERNELS = 512  # per op: far past the specialization limit's compiled-in values times a few configs
LEARNED_DECISIONS = 4096  # per tuned op: tuning keys are power-of-two buckets, a few dozen in a real job

LEARNED_CPP = rf"""
#include <deque>
#include <memory>

namespace opsmith {{
constexpr size_t kLearnedKernels = {LEARNED_KERNELS}, kLearnedDecisions = {LEARNED_DECISIONS};

// Entries appended at run time, read without a lock (see learned_cpp.py).
template <typename T, size_t Capacity>
class Learned {{
 public:
  template <typename Match>
  const T* find(Match&& match) const {{
    const size_t n = n_.load(std::memory_order_acquire);
    for (size_t i = 0; i < n; ++i)
      if (match(items_[i])) return &items_[i];
    return nullptr;
  }}
  bool full() const {{ return n_.load(std::memory_order_acquire) == Capacity; }}
  bool add(const T& item) {{
    std::lock_guard<std::mutex> hold(mu_);
    const size_t n = n_.load(std::memory_order_relaxed);
    if (n == Capacity) return false;
    items_[n] = item;
    n_.store(n + 1, std::memory_order_release);
    return true;
  }}

 private:
  std::array<T, Capacity> items_{{}};
  std::atomic<size_t> n_{{0}};
  std::mutex mu_;
}};

// A kernel handed over at run time. The library keeps its symbol and image bytes (NUL-terminated, as the
// embedded ones are: PTX must be) for the process's life: a launch may hold its pointer at any time.
inline Kernel* learned_kernel(const char* op, const char* symbol, const int* archs, const unsigned char* const* data,
                              const size_t* sizes, int images, int shared_mem, Jit jit) {{
  struct Kept {{
    std::string symbol;
    std::vector<std::string> bytes;
    std::unique_ptr<Kernel> kernel;
  }};
  static std::mutex mu;
  static std::deque<Kept> kept;  // a deque never moves its elements
  std::lock_guard<std::mutex> hold(mu);
  Kept& k = kept.emplace_back();
  k.symbol = symbol;
  k.bytes.reserve(images);  // no reallocation below: each Image points into its string
  std::vector<Image> list;
  for (int i = 0; i < images; ++i) {{
    k.bytes.emplace_back(reinterpret_cast<const char*>(data[i]), sizes[i]).push_back('\0');
    list.push_back({{archs[i], reinterpret_cast<const unsigned char*>(k.bytes.back().data()), k.bytes.back().size()}});
  }}
  k.kernel = std::make_unique<Kernel>(op, k.symbol.c_str(), std::move(list), shared_mem, jit);
  return k.kernel.get();
}}
}}  // namespace opsmith
"""


def learned_functions(n: Any, width: int, key_width: int) -> list[str]:
    """An op's two entries, in its scope: a kernel for (config, specialization), a decision for a tuning key.
    Each returns whether the library holds it now (0: not this op's kind of entry, or the table is full)."""
    op = cpp_str(n.record.op_name)
    L = [
        "// A kernel the Python path compiled after the build (learned_cpp.py); 1 when this library holds it now.",
        "int learn_kernel(int config, const int64_t* spec, int64_t width, const char* symbol, const int* archs,",
        "                 const unsigned char* const* data, const size_t* sizes, int images, const int64_t* launch,",
        "                 uint64_t dropped, const int* jit) {",
    ]
    if n.record.flavor == "cute":  # a host function linked into the library: only a rebuild holds a new one
        L += ["  return 0;", "}"]
    else:
        L += [
            f"  if (width != {width} || learned_variants.full()) return 0;",
            "  Variant v{};",
            "  v.config = config;",
            "  std::copy(spec, spec + width, v.spec.begin());",
            "  if (find(config, v.spec) != nullptr) return 1;",
            f"  v.kernel = opsmith::learned_kernel({op}, symbol, archs, data, sizes, images, int(launch[3]),",
            "                                     {unsigned(jit[0]), jit[1], jit[2]});",
            "  v.bx = launch[0], v.by = launch[1], v.bz = launch[2], v.smem = launch[3], v.dropped = dropped;",
            "  return learned_variants.add(v) ? 1 : 0;",
            "}",
        ]
    L += ["", "// A tuning decision made (or read from the tuning cache) after the build; 1 when held now.",
          "int learn_decision(const int64_t* key, int64_t width, int config) {"]  # fmt: skip
    if not n.record.tuned:
        return [*L, "  return 0;", "}"]
    return [
        *L,
        f"  if (width != {key_width}) return 0;",
        f"  std::pair<std::array<int64_t, {key_width}>, int> d{{}};",
        "  std::copy(key, key + width, d.first.begin());",
        "  d.second = config;",
        "  return decided(d.first) == config || learned_decisions.add(d) ? 1 : 0;",
        "}",
    ]


def learned_entries(ops: Sequence[Any]) -> list[str]:
    """The library's C entries ``learned.py`` calls: by the op's index in the served order (the counters')."""
    vis = 'extern "C" __attribute__((visibility("default")))'
    kernel = [f"{vis} int opsmith_served_learn_kernel(int64_t op, int config, const int64_t* spec, int64_t width,",
              "    const char* symbol, const int* archs, const unsigned char* const* data, const size_t* sizes, int images,",
              "    const int64_t* launch, uint64_t dropped, const int* jit) {", "  switch (op) {"]  # fmt: skip
    kernel += [f"    case {k}: return {n.scope}::learn_kernel(config, spec, width, symbol, archs, data, sizes, images, "
               "launch, dropped, jit);" for k, n in enumerate(ops)]  # fmt: skip
    kernel += ["  }", "  return 0;", "}", ""]
    decision = [f"{vis} int opsmith_served_learn_decision(int64_t op, const int64_t* key, int64_t width, int config) {{",
                "  switch (op) {"]  # fmt: skip
    decision += [f"    case {k}: return {n.scope}::learn_decision(key, width, config);" for k, n in enumerate(ops)]
    decision += ["  }", "  return 0;", "}", ""]
    # ScalarType's numbers are C++'s to say: learned.py numbers dtypes as this library does
    types = ", ".join(SCALAR_TYPE.values())
    scalar = ["// The ScalarType numbers of cpp.SCALAR_TYPE's dtypes, in its order (learned.py reads them once).",
              f"{vis} int64_t opsmith_served_scalar_types(int64_t* out, int64_t n) {{",
              f"  const c10::ScalarType types[] = {{{types}}};",
              "  int64_t k = 0;", "  for (c10::ScalarType t : types)", "    if (k < n) out[k++] = static_cast<int64_t>(t);",
              "  return k;", "}"]  # fmt: skip
    return kernel + decision + scalar
