"""CUDA C++ kernels in the published style of issue 60's, for tests/test_round_four_cpu.py and
tests/test_gpu_round_four.py: what llm.c's kernels include (C headers NVRTC does not ship, cooperative groups) and
how its fused classifier writes its extra outputs only where their pointers are given."""

#: Every standard header opsmith provides under NVRTC, each checked at compile time against its C value.
STD_HEADERS = r"""
#include <float.h>
#include <cfloat>
#include <math.h>
#include <cmath>
#include <stdint.h>
#include <cstdint>
#include <limits.h>
#include <climits>
#include <stddef.h>
#include <cstddef>
#include <stdlib.h>
#include <cstdlib>
#include <assert.h>
#include <cassert>
#include <limits>
#include <algorithm>

static_assert(FLT_MAX == 3.40282347e+38f && DBL_MAX > 1e308 && FLT_EPSILON == 1.19209290e-07f, "float.h");
static_assert(INT_MAX == 2147483647 && INT_MIN == -INT_MAX - 1 && CHAR_BIT == 8 && LLONG_MAX == 9223372036854775807LL,
              "limits.h");
static_assert(sizeof(int64_t) == 8 && sizeof(std::uint16_t) == 2 && INT64_MAX == LLONG_MAX && SIZE_MAX > 0, "stdint.h");
static_assert(sizeof(size_t) == 8 && sizeof(std::ptrdiff_t) == 8, "stddef.h");
static_assert(std::numeric_limits<float>::max() == FLT_MAX && std::numeric_limits<int>::min() == INT_MIN, "limits");
static_assert(FLT_MIN == std::numeric_limits<float>::min() && FLT_EPSILON == std::numeric_limits<float>::epsilon() &&
              FLT_TRUE_MIN == std::numeric_limits<float>::denorm_min() && DBL_MAX == std::numeric_limits<double>::max() &&
              DBL_MIN == std::numeric_limits<double>::min() && DBL_EPSILON == std::numeric_limits<double>::epsilon() &&
              DBL_TRUE_MIN == std::numeric_limits<double>::denorm_min() && FLT_MANT_DIG == 24 && DBL_DIG == 15,
              "float.h agrees with numeric_limits");
static_assert(INFINITY > FLT_MAX && M_PI > 3.14159 && M_PI < 3.1416 && HUGE_VAL > DBL_MAX, "math.h");
static_assert(sizeof(std::erf(1.f)) == 4 && sizeof(std::erf(1.0)) == 8 && sizeof(std::isnan(1.f)) == sizeof(bool),
              "cmath: float and double overloads, bool classification");
static_assert(std::max(3, 4) == 4 && std::min(2.5f, 1.5f) == 1.5f, "algorithm");

extern "C" __global__ void every_header(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  assert(n > 0);
  float v = std::fmax(x[i], -FLT_MAX) + std::fmod(2.f, 2.f) + std::erfc(40.f);
  v = std::isnan(v) ? NAN : std::min(v, float(INT_MAX));
  y[i] = v + float(abs(-1)) - 1.f + (std::isinf(INFINITY) ? 0.f : 1.f);
}
"""

#: A fused classifier in llm.c's style (<float.h> for FLT_MAX, cooperative groups for the warp reductions): per
#: row, the loss of the target and the gradient of the logits for a loss scaled by ``dloss``; the probabilities
#: are written only where ``probs`` is given (non-NULL), as llm.c's kernel writes them.
FUSED_CLASSIFIER = r"""
#include <float.h>
#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;

extern "C" __global__ void fused_classifier(const float* logits, const int64_t* targets, float* losses,
                                            float* dlogits, float* probs, float dloss, int V) {
  cg::thread_block block = cg::this_thread_block();
  cg::thread_block_tile<32> warp = cg::tiled_partition<32>(block);
  const int64_t row = blockIdx.x;
  const float* x = logits + row * V;
  float m = -FLT_MAX;
  for (int c = warp.thread_rank(); c < V; c += 32) m = fmaxf(m, x[c]);
  m = cg::reduce(warp, m, cg::greater<float>());
  float s = 0.f;
  for (int c = warp.thread_rank(); c < V; c += 32) s += expf(x[c] - m);
  s = cg::reduce(warp, s, cg::plus<float>());
  const int64_t t = targets[row];
  if (warp.thread_rank() == 0) losses[row] = logf(s) + m - x[t];
  for (int c = warp.thread_rank(); c < V; c += 32) {
    const float p = expf(x[c] - m) / s;
    if (probs != NULL) probs[row * V + c] = p;
    if (dlogits != NULL) dlogits[row * V + c] = (p - (c == t ? 1.f : 0.f)) * dloss;
  }
}
"""

#: A GLU over rows of ``2 * n``: y = a * sigmoid(b) for x = [a, b].
GLU_SRC = r"""
extern "C" __global__ void glu(const float* x, float* y, int n) {
  const float* a = x + blockIdx.x * 2 * n;
  for (int c = threadIdx.x; c < n; c += blockDim.x) y[blockIdx.x * n + c] = a[c] / (1.f + __expf(-a[n + c]));
}
"""

#: Liger's JSD's habit in CUDA C++: the label pointer is moved to the row before the flag says whether it is read.
LABEL_SRC = r"""
extern "C" __global__ void rows(const float* x, const long long* label, float* y, int n, int has_label) {
  label += blockIdx.x;  // moved before the flag says whether it is read, as Liger's JSD does
  float s = has_label && *label == 1 ? 2.f : 1.f;
  for (int c = threadIdx.x; c < n; c += blockDim.x) y[blockIdx.x * n + c] = x[blockIdx.x * n + c] * s;
}
"""
