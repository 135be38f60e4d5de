// opsmith: <assert.h> for NVRTC, which ships no C or C++ standard headers. assert() for device code from libcu++ (a failed assert traps the kernel).
#pragma once
#include <cuda/std/cassert>
