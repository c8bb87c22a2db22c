// Built against the real toolkit headers and linked either against the real
// libcudart.so.13 (then run on simcuda via LD_LIBRARY_PATH) or against
// simcuda's libcudart_static.a. Exits nonzero on any mismatch.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstring>

#define EXPECT(cond)                                              \
    do {                                                          \
        if (!(cond)) {                                            \
            std::fprintf(stderr, "abi_probe: failed: %s\n", #cond); \
            return 1;                                             \
        }                                                         \
    } while (0)

int main()
{
    int n = 0;
    EXPECT(cudaGetDeviceCount(&n) == cudaSuccess && n >= 1);
    cudaDeviceProp prop;
    EXPECT(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
    EXPECT(std::strstr(prop.name, "simcuda") != nullptr);  // really on simcuda
    EXPECT(prop.major == 9);
    int v = 0;
    EXPECT(cudaRuntimeGetVersion(&v) == cudaSuccess && v == 13000);
    void *d = nullptr;
    EXPECT(cudaMalloc(&d, 1 << 20) == cudaSuccess);
    char in[64] = "through the shadow and back", out[64] = {};
    EXPECT(cudaMemcpy(d, in, sizeof in, cudaMemcpyHostToDevice) == cudaSuccess);
    EXPECT(cudaMemcpy(out, d, sizeof out, cudaMemcpyDeviceToHost) == cudaSuccess);
    EXPECT(std::strcmp(in, out) == 0);
    void *huge = nullptr;
    EXPECT(cudaMalloc(&huge, size_t(1) << 50) == cudaErrorMemoryAllocation);
    EXPECT(cudaGetLastError() == cudaErrorMemoryAllocation);
    void *a = nullptr;
    EXPECT(cudaMallocAsync(&a, 4096, nullptr) == cudaSuccess);
    EXPECT(cudaFreeAsync(a, nullptr) == cudaSuccess);
    EXPECT(cudaFree(d) == cudaSuccess);
    cudaGraph_t g;
    EXPECT(cudaGraphClone(&g, nullptr) == cudaErrorNotSupported);  // generated stub
    std::printf("abi_probe: ok\n");
    return 0;
}
