// opsmith: <limits.h> for NVRTC, which ships no C or C++ standard headers. The limits come from libcu++ (nvidia-cuda-cccl, a dependency of opsmith).
#pragma once
#include <cuda/std/climits>
