// opsmith: <stddef.h> for NVRTC, which ships no C or C++ standard headers. size_t, ptrdiff_t and offsetof from libcu++.
#pragma once
#include <cuda/std/cstddef>
