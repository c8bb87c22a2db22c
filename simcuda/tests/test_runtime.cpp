// Runtime API on simcuda.
#include <cuda_profiler_api.h>
#include <cuda_runtime_api.h>

#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"

TEST_CASE("runtime basics: versions, device, properties", "[runtime]")
{
    int n = 0;
    REQUIRE(cudaGetDeviceCount(&n) == cudaSuccess);
    CHECK(n == 1);
    int v = 0;
    REQUIRE(cudaRuntimeGetVersion(&v) == cudaSuccess);
    CHECK(v == 13000);
    REQUIRE(cudaDriverGetVersion(&v) == cudaSuccess);
    CHECK(v == 13000);
    cudaDeviceProp prop;
    REQUIRE(cudaGetDeviceProperties(&prop, 0) == cudaSuccess);
    CHECK(prop.major == 9);
    CHECK(prop.minor == 0);
    CHECK(prop.totalGlobalMem == 16 * kGiB);
    CHECK(prop.multiProcessorCount > 0);
    CHECK(prop.warpSize == 32);
    CHECK(cudaSetDevice(5) == cudaErrorInvalidDevice);
    CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
    CHECK(cudaSetDevice(0) == cudaSuccess);
    int dev = -1;
    REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
    CHECK(dev == 0);
    CHECK(std::string(cudaGetErrorName(cudaErrorMemoryAllocation)) == "cudaErrorMemoryAllocation");
    int attr = 0;
    REQUIRE(cudaDeviceGetAttribute(&attr, cudaDevAttrMaxThreadsPerBlock, 0) == cudaSuccess);
    CHECK(attr == 1024);
}

TEST_CASE("last error is sticky and thread local", "[runtime]")
{
    REQUIRE(cudaFree(nullptr) == cudaSuccess);
    cudaGetLastError();
    void *p;
    CHECK(cudaMalloc(&p, kPiB) == cudaErrorMemoryAllocation);
    void *q;
    REQUIRE(cudaMalloc(&q, 64) == cudaSuccess);  // success does not clear it
    CHECK(cudaPeekAtLastError() == cudaErrorMemoryAllocation);
    std::thread([] { CHECK(cudaPeekAtLastError() == cudaSuccess); }).join();
    CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
    CHECK(cudaGetLastError() == cudaSuccess);
    CHECK(cudaFree(reinterpret_cast<void *>(0x1000)) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    CHECK(cudaFree(q) == cudaSuccess);
}

TEST_CASE("every allocation family round-trips", "[runtime]")
{
    void *d = nullptr, *h = nullptr, *ph = nullptr, *m = nullptr, *pitched = nullptr;
    REQUIRE(cudaMalloc(&d, 1 << 16) == cudaSuccess);
    REQUIRE(cudaHostAlloc(&h, 1 << 16, cudaHostAllocDefault) == cudaSuccess);
    REQUIRE(cudaMallocHost(&ph, 100) == cudaSuccess);
    REQUIRE(cudaMallocManaged(&m, 4096, cudaMemAttachGlobal) == cudaSuccess);
    size_t pitch = 0;
    REQUIRE(cudaMallocPitch(&pitched, &pitch, 100, 7) == cudaSuccess);
    CHECK(pitch >= 100);
    cudaPitchedPtr p3{};
    REQUIRE(cudaMalloc3D(&p3, cudaExtent{100, 4, 3}) == cudaSuccess);
    CHECK(p3.ptr != nullptr);
    CHECK(p3.pitch >= 100);

    auto *src = static_cast<unsigned char *>(h);
    for (int i = 0; i < (1 << 16); ++i)
        src[i] = static_cast<unsigned char>(i * 13);
    REQUIRE(cudaMemcpy(d, h, 1 << 16, cudaMemcpyHostToDevice) == cudaSuccess);
    std::vector<unsigned char> back(1 << 16);
    cudaStream_t s;
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    REQUIRE(cudaMemcpyAsync(back.data(), d, back.size(), cudaMemcpyDeviceToHost, s) == cudaSuccess);
    REQUIRE(cudaStreamSynchronize(s) == cudaSuccess);
    CHECK(std::memcmp(back.data(), h, back.size()) == 0);
    REQUIRE(cudaMemset(d, 0x7f, 16) == cudaSuccess);
    REQUIRE(cudaMemcpy(m, d, 16, cudaMemcpyDefault) == cudaSuccess);
    CHECK(static_cast<unsigned char *>(m)[15] == 0x7f);

    cudaPointerAttributes attr;
    REQUIRE(cudaPointerGetAttributes(&attr, d) == cudaSuccess);
    CHECK(attr.type == cudaMemoryTypeDevice);
    REQUIRE(cudaPointerGetAttributes(&attr, h) == cudaSuccess);
    CHECK(attr.type == cudaMemoryTypeHost);
    REQUIRE(cudaPointerGetAttributes(&attr, m) == cudaSuccess);
    CHECK(attr.type == cudaMemoryTypeManaged);
    int local = 0;
    REQUIRE(cudaPointerGetAttributes(&attr, &local) == cudaSuccess);
    CHECK(attr.type == cudaMemoryTypeUnregistered);

    CHECK(cudaFree(d) == cudaSuccess);
    CHECK(cudaFreeHost(h) == cudaSuccess);
    CHECK(cudaFreeHost(ph) == cudaSuccess);
    CHECK(cudaFree(m) == cudaSuccess);
    CHECK(cudaFree(pitched) == cudaSuccess);
    CHECK(cudaFree(p3.ptr) == cudaSuccess);
    CHECK(cudaStreamDestroy(s) == cudaSuccess);
    cudaGetLastError();
}

TEST_CASE("runtime pool accounting as PyTorch reads it", "[runtime]")
{
    cudaMemPool_t pool;
    REQUIRE(cudaDeviceGetDefaultMemPool(&pool, 0) == cudaSuccess);
    uint64_t threshold = UINT64_MAX;
    REQUIRE(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &threshold) == cudaSuccess);
    int reuse = 1;
    REQUIRE(cudaMemPoolSetAttribute(pool, cudaMemPoolReuseAllowOpportunistic, &reuse) == cudaSuccess);
    std::vector<void *> ptrs(10);
    for (auto &p : ptrs)
        REQUIRE(cudaMallocAsync(&p, 1 << 20, nullptr) == cudaSuccess);
    uint64_t used = 0, reserved = 0;
    REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess);
    REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess);
    CHECK(used == 10 * kMiB);
    CHECK(reserved == 20 * kMiB);
    for (auto p : ptrs)
        REQUIRE(cudaFreeAsync(p, nullptr) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
    REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrUsedMemCurrent, &used) == cudaSuccess);
    REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess);
    CHECK(used == 0);
    CHECK(reserved == 20 * kMiB);  // threshold keeps the cache
    REQUIRE(cudaMemPoolTrimTo(pool, 0) == cudaSuccess);
    REQUIRE(cudaMemPoolGetAttribute(pool, cudaMemPoolAttrReservedMemCurrent, &reserved) == cudaSuccess);
    CHECK(reserved == 0);

    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = 0;
    cudaMemPool_t mine;
    REQUIRE(cudaMemPoolCreate(&mine, &props) == cudaSuccess);
    void *p;
    REQUIRE(cudaMallocFromPoolAsync(&p, 4096, mine, nullptr) == cudaSuccess);
    REQUIRE(cudaFreeAsync(p, nullptr) == cudaSuccess);
    REQUIRE(cudaMemPoolDestroy(mine) == cudaSuccess);
}

// cudaGetDriverEntryPoint is deprecated but still what older PyTorch calls.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
TEST_CASE("driver entry points come from the driver; probes leave no error", "[runtime]")
{
    cudaGetLastError();
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    REQUIRE(cudaGetDriverEntryPointByVersion("cuMemCreate", &fn, 12000, cudaEnableDefault, &q) ==
            cudaSuccess);
    CHECK(q == cudaDriverEntryPointSuccess);
    CHECK(fn != nullptr);
    REQUIRE(cudaGetDriverEntryPoint("cuMemAlloc", &fn, cudaEnableDefault, &q) == cudaSuccess);
    CHECK(fn != nullptr);
    CHECK(cudaGetDriverEntryPoint("cuMulticastCreateNoSuch", &fn, cudaEnableDefault, &q) == cudaSuccess);
    CHECK(q == cudaDriverEntryPointSymbolNotFound);
    CHECK(fn == nullptr);
    CHECK(cudaPeekAtLastError() == cudaSuccess);
}
#pragma GCC diagnostic pop

TEST_CASE("streams, events, priorities", "[runtime]")
{
    int least = 1, greatest = 1;
    REQUIRE(cudaDeviceGetStreamPriorityRange(&least, &greatest) == cudaSuccess);
    CHECK(least == 0);
    CHECK(greatest < 0);
    cudaStream_t s;
    REQUIRE(cudaStreamCreateWithPriority(&s, cudaStreamNonBlocking, greatest) == cudaSuccess);
    cudaEvent_t e1, e2, nt;
    REQUIRE(cudaEventCreate(&e1) == cudaSuccess);
    REQUIRE(cudaEventCreate(&e2) == cudaSuccess);
    REQUIRE(cudaEventCreateWithFlags(&nt, cudaEventDisableTiming) == cudaSuccess);
    REQUIRE(cudaEventRecord(e1, s) == cudaSuccess);
    REQUIRE(cudaEventRecord(e2, s) == cudaSuccess);
    REQUIRE(cudaEventRecord(nt, s) == cudaSuccess);
    REQUIRE(cudaStreamWaitEvent(nullptr, e2, 0) == cudaSuccess);
    CHECK(cudaEventQuery(e2) == cudaSuccess);
    REQUIRE(cudaEventSynchronize(e2) == cudaSuccess);
    float ms = -1;
    REQUIRE(cudaEventElapsedTime(&ms, e1, e2) == cudaSuccess);
    CHECK(ms >= 0);
    CHECK(cudaEventElapsedTime(&ms, e1, nt) == cudaErrorInvalidResourceHandle);
    cudaGetLastError();
    cudaStreamCaptureStatus cs;
    REQUIRE(cudaStreamIsCapturing(s, &cs) == cudaSuccess);
    CHECK(cs == cudaStreamCaptureStatusNone);
    CHECK(cudaStreamQuery(s) == cudaSuccess);
    CHECK(cudaStreamDestroy(s) == cudaSuccess);
    for (auto e : {e1, e2, nt})
        CHECK(cudaEventDestroy(e) == cudaSuccess);
}

TEST_CASE("cudaDeviceReset frees the device and the runtime recovers", "[runtime]")
{
    void *p;
    REQUIRE(cudaMalloc(&p, 100 * kMiB) == cudaSuccess);
    size_t free0, total;
    REQUIRE(cudaMemGetInfo(&free0, &total) == cudaSuccess);
    REQUIRE(cudaDeviceReset() == cudaSuccess);
    size_t free1;
    REQUIRE(cudaMemGetInfo(&free1, &total) == cudaSuccess);
    CHECK(free1 - free0 >= 100 * kMiB);
    CHECK(cudaFree(p) == cudaErrorInvalidValue);
    cudaGetLastError();
    REQUIRE(cudaMalloc(&p, 1) == cudaSuccess);
    CHECK(cudaFree(p) == cudaSuccess);
}

extern "C" {
void **__cudaRegisterFatBinary(void *);
void __cudaRegisterFatBinaryEnd(void **);
void __cudaUnregisterFatBinary(void **);
void __cudaRegisterFunction(void **, const char *, char *, const char *, int, uint3 *, uint3 *,
                            dim3 *, dim3 *, int *);
unsigned __cudaPushCallConfiguration(dim3, dim3, size_t, struct CUstream_st *);
cudaError_t __cudaPopCallConfiguration(dim3 *, dim3 *, size_t *, void *);
}

static void fake_kernel_stub() {}

TEST_CASE("module registration and launches are recorded, not executed", "[runtime]")
{
    static char fatbin[16];
    void **h = __cudaRegisterFatBinary(fatbin);
    REQUIRE(h != nullptr);
    __cudaRegisterFunction(h, reinterpret_cast<const char *>(&fake_kernel_stub),
                           const_cast<char *>("k"), "k", -1, nullptr, nullptr, nullptr, nullptr, nullptr);
    __cudaRegisterFatBinaryEnd(h);
    REQUIRE(__cudaPushCallConfiguration(dim3(4), dim3(128), 0, nullptr) == 0);
    dim3 g, b;
    size_t shm;
    cudaStream_t st;
    REQUIRE(__cudaPopCallConfiguration(&g, &b, &shm, &st) == cudaSuccess);
    CHECK(g.x == 4);
    CHECK(b.x == 128);
    CHECK(cudaLaunchKernel(reinterpret_cast<const void *>(&fake_kernel_stub), g, b, nullptr, 0,
                           nullptr) == cudaSuccess);
    CHECK(cudaGetLastError() == cudaSuccess);
    __cudaUnregisterFatBinary(h);
}

TEST_CASE("8 threads allocate and free concurrently", "[threads]")
{
    REQUIRE(cudaFree(nullptr) == cudaSuccess);
    size_t free0, total;
    REQUIRE(cudaMemGetInfo(&free0, &total) == cudaSuccess);
    std::vector<std::thread> threads;
    std::vector<int> failures(8, 0);
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([t, &failures] {
            std::vector<void *> mine;
            for (int i = 0; i < 500; ++i) {
                void *p = nullptr;
                size_t n = size_t(1 + (i * 37 + t) % 8192);
                cudaError_t e = (i % 3 == 0) ? cudaMallocAsync(&p, n, nullptr)
                                : (i % 3 == 1) ? cudaMalloc(&p, n)
                                               : cudaMallocManaged(&p, n, cudaMemAttachGlobal);
                if (e != cudaSuccess || !p) {
                    ++failures[t];
                    continue;
                }
                unsigned char tag = static_cast<unsigned char>(t);
                if (cudaMemset(p, tag, 1) != cudaSuccess)
                    ++failures[t];
                mine.push_back(p);
                if (i % 4 == 3) {
                    void *q = mine[mine.size() / 2];
                    mine.erase(mine.begin() + long(mine.size() / 2));
                    if (cudaFree(q) != cudaSuccess)
                        ++failures[t];
                }
            }
            for (void *p : mine) {
                unsigned char got = 0;
                cudaMemcpy(&got, p, 1, cudaMemcpyDefault);
                if (got != static_cast<unsigned char>(t))
                    ++failures[t];  // another thread got the same address
                if (cudaFree(p) != cudaSuccess)
                    ++failures[t];
            }
        });
    }
    for (auto &th : threads)
        th.join();
    for (int f : failures)
        CHECK(f == 0);
    cudaMemPool_t pool;
    cudaDeviceGetDefaultMemPool(&pool, 0);
    cudaMemPoolTrimTo(pool, 0);
    size_t free1;
    REQUIRE(cudaMemGetInfo(&free1, &total) == cudaSuccess);
    CHECK(free1 == free0);
}

TEST_CASE("the current device is per thread", "[.devices]")
{
    int n = 0;
    REQUIRE(cudaGetDeviceCount(&n) == cudaSuccess);
    REQUIRE(n == 3);
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    std::thread([] {
        REQUIRE(cudaSetDevice(2) == cudaSuccess);
        void *p;
        REQUIRE(cudaMalloc(&p, 4096) == cudaSuccess);
        cudaPointerAttributes a;
        REQUIRE(cudaPointerGetAttributes(&a, p) == cudaSuccess);
        CHECK(a.device == 2);
        CHECK(cudaFree(p) == cudaSuccess);
    }).join();
    int dev = -1;
    REQUIRE(cudaGetDevice(&dev) == cudaSuccess);
    CHECK(dev == 0);
    void *p;
    REQUIRE(cudaMalloc(&p, 4096) == cudaSuccess);
    cudaPointerAttributes a;
    REQUIRE(cudaPointerGetAttributes(&a, p) == cudaSuccess);
    CHECK(a.device == 0);
    CHECK(cudaFree(p) == cudaSuccess);
}

// What PyTorch 2.15 calls beyond the basics (tests/torch): capture queries,
// host functions, graph-memory attributes, ExC launches, 2D copies, and the
// driver's explicit-context synchronize that cudaDeviceSynchronize may reach.
namespace {
void CUDART_CB host_fn(void *p) { ++*static_cast<int *>(p); }
void CUDART_CB stream_cb(cudaStream_t, cudaError_t, void *p) { ++*static_cast<int *>(p); }
}  // namespace

TEST_CASE("calls PyTorch makes: capture info, host funcs, graph memory, 2D copies", "[runtime]")
{
    cudaStream_t s = nullptr;
    REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
    cudaStreamCaptureStatus st = cudaStreamCaptureStatusActive;
    unsigned long long id = 7;
    REQUIRE(cudaStreamGetCaptureInfo(s, &st, &id) == cudaSuccess);
    CHECK(st == cudaStreamCaptureStatusNone);
    CHECK(id == 0);
    CHECK(cudaStreamGetCaptureInfo(s, nullptr) == cudaErrorInvalidValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);

    int calls = 0;
    REQUIRE(cudaLaunchHostFunc(s, host_fn, &calls) == cudaSuccess);
    REQUIRE(cudaStreamAddCallback(s, stream_cb, &calls, 0) == cudaSuccess);
    CHECK(calls == 2);

    unsigned long long used = 1;
    REQUIRE(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used) == cudaSuccess);
    CHECK(used == 0);
    unsigned long long zero = 0;
    CHECK(cudaDeviceSetGraphMemAttribute(0, cudaGraphMemAttrUsedMemHigh, &zero) == cudaSuccess);

    int dummy_kernel = 0;
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(1);
    cfg.blockDim = dim3(32);
    cfg.stream = s;
    CHECK(cudaLaunchKernelExC(&cfg, &dummy_kernel, nullptr) == cudaSuccess);

    // A 4x3 sub-block of a 4x8 host matrix to the device and back, pitched.
    unsigned char host[4][8], back[4][3] = {};
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 8; ++c)
            host[r][c] = static_cast<unsigned char>(r * 8 + c);
    void *dev = nullptr;
    REQUIRE(cudaMalloc(&dev, 64) == cudaSuccess);
    REQUIRE(cudaMemcpy2DAsync(dev, 16, &host[0][2], 8, 3, 4, cudaMemcpyHostToDevice, s) ==
            cudaSuccess);
    REQUIRE(cudaMemcpy2D(back, 3, dev, 16, 3, 4, cudaMemcpyDeviceToHost) == cudaSuccess);
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 3; ++c)
            CHECK(back[r][c] == host[r][c + 2]);
    CHECK(cudaMemcpy2D(back, 2, dev, 16, 3, 4, cudaMemcpyDeviceToHost) == cudaErrorInvalidPitchValue);
    CHECK(cudaGetLastError() == cudaErrorInvalidPitchValue);

    CHECK(cudaDeviceSynchronize() == cudaSuccess);
    CHECK(cudaProfilerStart() == cudaSuccess);
    CHECK(cudaProfilerStop() == cudaSuccess);
    CHECK(cudaFree(dev) == cudaSuccess);
    CHECK(cudaStreamDestroy(s) == cudaSuccess);
    CHECK(cudaGetLastError() == cudaSuccess);
}
