// Helpers shared by the simcuda unit tests.
#pragma once
#include <cuda.h>

#include <catch2/catch.hpp>

// cuInit plus device 0's primary context made current on this thread.
inline CUcontext sim_primary_context(CUdevice dev = 0)
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    CUcontext ctx = nullptr;
    REQUIRE(cuDevicePrimaryCtxRetain(&ctx, dev) == CUDA_SUCCESS);
    REQUIRE(cuCtxSetCurrent(ctx) == CUDA_SUCCESS);
    return ctx;
}

constexpr size_t kMiB = size_t(1) << 20;
constexpr size_t kGiB = size_t(1) << 30;
constexpr size_t kPiB = size_t(1) << 50;
