// Per-handle memory of the simulated math libraries. Each library links its
// own copy of simcuda's static runtime (as NVIDIA's link cudart_static), so
// these calls reach the driver through cuGetProcAddress pointers and their
// frames lie inside the library, as on a GPU.
#pragma once

#include <cstddef>

namespace simmath {

// Device memory for a handle; nullptr when the device is out of memory or
// the driver cannot be reached.
void *device_alloc(std::size_t bytes);
void device_free(void *p);
// Page-locked host memory (cuMemHostAlloc through the static runtime).
void *pinned_alloc(std::size_t bytes);

}  // namespace simmath
