// opsmith: <stdint.h> for NVRTC, which ships no C or C++ standard headers. The fixed-width types and their limits come from libcu++, at global scope as C has them.
#pragma once
#include <cuda/std/cstdint>
