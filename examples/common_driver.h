// Shared helper for the driver-API example programs (linked with -lcuda).
#pragma once

#include <cuda.h>

#include <cstdio>
#include <cstdlib>

// Stops the program at the first failing driver call, naming it.
#define DRV(call)                                                              \
  do {                                                                         \
    CUresult drv_err_ = (call);                                                \
    if (drv_err_ != CUDA_SUCCESS) {                                            \
      std::fprintf(stderr, "%s:%d: %s failed (%d)\n", __FILE__, __LINE__, #call, \
                   static_cast<int>(drv_err_));                                \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)
