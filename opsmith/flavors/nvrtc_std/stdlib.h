// opsmith: <stdlib.h> for NVRTC, which ships no C or C++ standard headers. abs and div for device code from libcu++.
#pragma once
#include <cuda/std/cstdlib>
