// Driver-API modules and launches: images of each kind, names, globals,
// launch argument checks, unload and context teardown.
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "test_support.h"

namespace {

const char kPtx[] = R"(
.version 9.0
.target sm_90
.address_size 64

.global .align 4 .u32 counter;
.visible .global .align 8 .b8 table[40];
.const .align 4 .f32 coeff[3] = {1.0, 2.0, 3.0};

.visible .entry fill(
	.param .u64 .ptr .global .align 4 fill_param_0,
	.param .u32 fill_param_1
)
{
	ld.param.u64 	%rd1, [fill_param_0];
	cvta.to.global.u64 	%rd2, %rd1;
	st.global.u32 	[%rd2], 1;
	ret;
}

.visible .entry noop()
{
	ret;
}
)";

std::vector<char> read_file(const char *path)
{
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    return std::vector<char>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// The kernels of examples/kernels/vec_kernels.cu, built by nvcc when the
// toolkit has it (meson passes the paths; empty without nvcc).
void check_vec_kernels(const void *image)
{
    CUmodule m;
    REQUIRE(cuModuleLoadData(&m, image) == CUDA_SUCCESS);
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, m, "vec_add") == CUDA_SUCCESS);
    CHECK(cuModuleGetFunction(&f, m, "scale") == CUDA_SUCCESS);
    CHECK(cuModuleGetFunction(&f, m, "missing") == CUDA_ERROR_NOT_FOUND);
    CUdeviceptr g;
    size_t bytes = 0;
    CHECK(cuModuleGetGlobal(&g, &bytes, m, "launch_count") == CUDA_SUCCESS);
    CHECK(bytes == 4);
    CHECK(cuModuleUnload(m) == CUDA_SUCCESS);
}

}  // namespace

TEST_CASE("a PTX module names its kernels and globals", "[driver]")
{
    sim_primary_context();
    CUmodule m;
    REQUIRE(cuModuleLoadData(&m, kPtx) == CUDA_SUCCESS);
    CUfunction fill, noop, other;
    REQUIRE(cuModuleGetFunction(&fill, m, "fill") == CUDA_SUCCESS);
    REQUIRE(cuModuleGetFunction(&noop, m, "noop") == CUDA_SUCCESS);
    CHECK(cuModuleGetFunction(&other, m, "fill") == CUDA_SUCCESS);
    CHECK(other == fill);
    CHECK(cuModuleGetFunction(&other, m, "fill_param_0") == CUDA_ERROR_NOT_FOUND);
    CHECK(cuModuleGetFunction(&other, m, "%rd2") == CUDA_ERROR_NOT_FOUND);
    CHECK(cuModuleGetFunction(nullptr, m, "fill") == CUDA_ERROR_INVALID_VALUE);

    CUdeviceptr counter, table, coeff;
    size_t bytes = 0;
    REQUIRE(cuModuleGetGlobal(&counter, &bytes, m, "counter") == CUDA_SUCCESS);
    CHECK(bytes == 4);
    REQUIRE(cuModuleGetGlobal(&table, &bytes, m, "table") == CUDA_SUCCESS);
    CHECK(bytes == 40);
    REQUIRE(cuModuleGetGlobal(&coeff, &bytes, m, "coeff") == CUDA_SUCCESS);
    CHECK(bytes == 12);
    CHECK(cuModuleGetGlobal(&counter, &bytes, m, "fill_param_0") == CUDA_ERROR_NOT_FOUND);
    // Globals are device memory, zeroed, the same on every query.
    uint32_t v = 7;
    REQUIRE(cuMemcpyDtoH(&v, counter, 4) == CUDA_SUCCESS);
    CHECK(v == 0);
    CUdeviceptr again;
    REQUIRE(cuModuleGetGlobal(&again, nullptr, m, "counter") == CUDA_SUCCESS);
    CHECK(again == counter);

    CHECK(cuModuleUnload(m) == CUDA_SUCCESS);
    CHECK(cuModuleUnload(m) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuModuleGetFunction(&other, m, "fill") == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuMemcpyDtoH(&v, counter, 4) == CUDA_ERROR_INVALID_VALUE);  // freed with the module
}

TEST_CASE("images that are not modules are refused", "[driver]")
{
    sim_primary_context();
    CUmodule m;
    CHECK(cuModuleLoadData(&m, "just some text") == CUDA_ERROR_INVALID_IMAGE);
    CHECK(cuModuleLoadData(&m, nullptr) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuModuleLoadData(nullptr, kPtx) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuModuleLoad(&m, "/nonexistent/module.cubin") == CUDA_ERROR_FILE_NOT_FOUND);
}

TEST_CASE("cuModuleLoadDataEx fills the JIT outputs", "[driver]")
{
    sim_primary_context();
    char log[64] = "stale";
    CUjit_option opts[] = {CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES,
                           CU_JIT_WALL_TIME};
    void *vals[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof log)), nullptr};
    CUmodule m;
    REQUIRE(cuModuleLoadDataEx(&m, kPtx, 3, opts, vals) == CUDA_SUCCESS);
    CHECK(vals[1] == nullptr);  // nothing written to the log
    CHECK(cuModuleUnload(m) == CUDA_SUCCESS);
    CHECK(cuModuleLoadDataEx(&m, kPtx, 1, nullptr, vals) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("launches check their arguments and do nothing", "[driver]")
{
    sim_primary_context();
    CUmodule m;
    REQUIRE(cuModuleLoadData(&m, kPtx) == CUDA_SUCCESS);
    CUfunction fill;
    REQUIRE(cuModuleGetFunction(&fill, m, "fill") == CUDA_SUCCESS);
    CUdeviceptr d;
    REQUIRE(cuMemAlloc(&d, 64) == CUDA_SUCCESS);
    REQUIRE(cuMemsetD8(d, 0, 64) == CUDA_SUCCESS);
    int n = 16;
    void *args[] = {&d, &n};
    CHECK(cuLaunchKernel(fill, 1, 1, 1, 16, 1, 1, 0, nullptr, args, nullptr) == CUDA_SUCCESS);
    CHECK(cuLaunchKernel(fill, 1, 1, 1, 16, 1, 1, 0, CU_STREAM_PER_THREAD, args, nullptr) ==
          CUDA_SUCCESS);
    uint32_t first = 9;
    REQUIRE(cuMemcpyDtoH(&first, d, 4) == CUDA_SUCCESS);
    CHECK(first == 0);  // kernels do not run
    CHECK(cuLaunchKernel(fill, 0, 1, 1, 16, 1, 1, 0, nullptr, args, nullptr) ==
          CUDA_ERROR_INVALID_VALUE);
    CHECK(cuLaunchKernel(fill, 1, 1, 1, 1025, 1, 1, 0, nullptr, args, nullptr) ==
          CUDA_ERROR_INVALID_VALUE);
    CHECK(cuLaunchKernel(fill, 1, 1, 1, 32, 32, 2, 0, nullptr, args, nullptr) ==
          CUDA_ERROR_INVALID_VALUE);
    CHECK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 300000, nullptr, args, nullptr) ==
          CUDA_ERROR_INVALID_VALUE);
    void *extra[] = {CU_LAUNCH_PARAM_END};
    CHECK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, nullptr, args, extra) ==
          CUDA_ERROR_INVALID_VALUE);
    int attr = 0;
    CHECK(cuFuncGetAttribute(&attr, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fill) ==
          CUDA_SUCCESS);
    CHECK(attr == 1024);
    REQUIRE(cuModuleUnload(m) == CUDA_SUCCESS);
    CHECK(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, nullptr, args, nullptr) ==
          CUDA_ERROR_INVALID_HANDLE);
    cuMemFree(d);
}

TEST_CASE("destroying a context unloads its modules", "[teardown]")
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    CUcontext ctx;
    REQUIRE(cuCtxCreate(&ctx, nullptr, 0, 0) == CUDA_SUCCESS);
    CUmodule m;
    REQUIRE(cuModuleLoadData(&m, kPtx) == CUDA_SUCCESS);
    CUdeviceptr counter;
    REQUIRE(cuModuleGetGlobal(&counter, nullptr, m, "counter") == CUDA_SUCCESS);
    REQUIRE(cuCtxDestroy(ctx) == CUDA_SUCCESS);
    sim_primary_context();
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, m, "fill") == CUDA_ERROR_INVALID_HANDLE);
    uint32_t v;
    CHECK(cuMemcpyDtoH(&v, counter, 4) == CUDA_ERROR_INVALID_VALUE);
}

TEST_CASE("nvcc's cubin and fatbin load", "[driver]")
{
    sim_primary_context();
    for (const char *var : {"SIMCUDA_TEST_CUBIN", "SIMCUDA_TEST_FATBIN"}) {
        const char *path = std::getenv(var);
        if (!path || !*path) {
            WARN(var << " not set (no nvcc at configure time)");
            continue;
        }
        INFO(path);
        std::vector<char> image = read_file(path);
        check_vec_kernels(image.data());
        CUmodule m;
        REQUIRE(cuModuleLoad(&m, path) == CUDA_SUCCESS);
        CHECK(cuModuleUnload(m) == CUDA_SUCCESS);
    }
}
