// Driver API: allocation families, errors, capacity, contexts.
#include <link.h>
#include <setjmp.h>
#include <sys/wait.h>
#include <unistd.h>
#include <signal.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "test_support.h"

TEST_CASE("driver requires cuInit and reports version 13000", "[driver]")
{
    int v = 0;
    REQUIRE(cuDriverGetVersion(&v) == CUDA_SUCCESS);
    CHECK(v == 13000);
    CUdevice d;
    CHECK(cuDeviceGet(&d, 0) == CUDA_ERROR_NOT_INITIALIZED);
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    CHECK(cuDeviceGet(&d, 0) == CUDA_SUCCESS);
    CHECK(cuDeviceGet(&d, 99) == CUDA_ERROR_INVALID_DEVICE);
    int major = 0;
    CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0) == CUDA_SUCCESS);
    CHECK(major == 9);
}

TEST_CASE("device allocations are unique, aligned and freed once", "[driver]")
{
    sim_primary_context();
    CUdeviceptr a = 0, b = 0;
    REQUIRE(cuMemAlloc(&a, 1000) == CUDA_SUCCESS);
    REQUIRE(cuMemAlloc(&b, 1) == CUDA_SUCCESS);
    CHECK(a != b);
    CHECK(a % 256 == 0);
    CHECK(b % 256 == 0);
    CHECK(cuMemAlloc(&a, 0) == CUDA_ERROR_INVALID_VALUE);
    CHECK(cuMemFree(b) == CUDA_SUCCESS);
    CHECK(cuMemFree(b) == CUDA_ERROR_INVALID_VALUE);  // double free
    CHECK(cuMemFree(a + 16) == CUDA_ERROR_INVALID_VALUE);  // interior pointer
    CHECK(cuMemFree(a) == CUDA_SUCCESS);
}

TEST_CASE("1 PiB fails cleanly with out-of-memory", "[driver]")
{
    sim_primary_context();
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc(&p, kPiB) == CUDA_ERROR_OUT_OF_MEMORY);
    CUdeviceptr q = 0;
    CHECK(cuMemAllocManaged(&q, kPiB, CU_MEM_ATTACH_GLOBAL) == CUDA_ERROR_OUT_OF_MEMORY);
    size_t pitch;
    CHECK(cuMemAllocPitch(&p, &pitch, kPiB, 1, 4) == CUDA_ERROR_OUT_OF_MEMORY);
    const char *name = nullptr;
    REQUIRE(cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &name) == CUDA_SUCCESS);
    CHECK(std::string(name) == "CUDA_ERROR_OUT_OF_MEMORY");
}

TEST_CASE("default capacity is 16 GiB and accounting is exact", "[driver]")
{
    sim_primary_context();
    size_t free0, total;
    REQUIRE(cuMemGetInfo(&free0, &total) == CUDA_SUCCESS);
    if (!std::getenv("SIMCUDA_MEMORY_BYTES"))
        CHECK(total == 16 * kGiB);
    CUdeviceptr p;
    REQUIRE(cuMemAlloc(&p, 3 * kMiB + 1) == CUDA_SUCCESS);
    size_t free1;
    cuMemGetInfo(&free1, &total);
    CHECK(free0 - free1 == 3 * kMiB + 512);  // rounded to the 512-byte alignment
    cuMemFree(p);
    cuMemGetInfo(&free1, &total);
    CHECK(free1 == free0);
}

TEST_CASE("capacity comes from SIMCUDA_MEMORY_BYTES", "[.capacity]")
{
    // Run with SIMCUDA_MEMORY_BYTES=64MiB.
    sim_primary_context();
    size_t free, total;
    REQUIRE(cuMemGetInfo(&free, &total) == CUDA_SUCCESS);
    CHECK(total == 64 * kMiB);
    CUdeviceptr a, b;
    REQUIRE(cuMemAlloc(&a, 48 * kMiB) == CUDA_SUCCESS);
    CHECK(cuMemAlloc(&b, 32 * kMiB) == CUDA_ERROR_OUT_OF_MEMORY);
    REQUIRE(cuMemFree(a) == CUDA_SUCCESS);
    CHECK(cuMemAlloc(&b, 32 * kMiB) == CUDA_SUCCESS);
}

TEST_CASE("a malformed SIMCUDA_MEMORY_BYTES falls back to 16 GiB", "[.badcapacity]")
{
    sim_primary_context();
    size_t free, total;
    REQUIRE(cuMemGetInfo(&free, &total) == CUDA_SUCCESS);
    CHECK(total == 16 * kGiB);
}

TEST_CASE("SIMCUDA_DEVICES sets the device count", "[.devices]")
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    int n = 0;
    REQUIRE(cuDeviceGetCount(&n) == CUDA_SUCCESS);
    CHECK(n == 3);
    sim_primary_context(2);
    CUdeviceptr p;
    REQUIRE(cuMemAlloc(&p, kMiB) == CUDA_SUCCESS);
    int ordinal = -1;
    REQUIRE(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p) == CUDA_SUCCESS);
    CHECK(ordinal == 2);
}

namespace {
sigjmp_buf g_jump;
void on_segv(int) { siglongjmp(g_jump, 1); }
}  // namespace

TEST_CASE("device pointers fault on the host; copies move real bytes", "[driver]")
{
    sim_primary_context();
    CUdeviceptr d;
    REQUIRE(cuMemAlloc(&d, 4096) == CUDA_SUCCESS);
    struct sigaction sa {}, old{};
    sa.sa_handler = on_segv;
    sigaction(SIGSEGV, &sa, &old);
    volatile bool faulted = false;
    if (sigsetjmp(g_jump, 1) == 0)
        (void)*reinterpret_cast<volatile char *>(d);
    else
        faulted = true;
    sigaction(SIGSEGV, &old, nullptr);
    CHECK(faulted);

    char in[4096], out[4096];
    for (size_t i = 0; i < sizeof in; ++i)
        in[i] = char(i * 7);
    REQUIRE(cuMemcpyHtoD(d, in, sizeof in) == CUDA_SUCCESS);
    CUdeviceptr d2;
    REQUIRE(cuMemAlloc(&d2, 4096) == CUDA_SUCCESS);
    REQUIRE(cuMemcpyDtoD(d2, d, sizeof in) == CUDA_SUCCESS);
    REQUIRE(cuMemcpyDtoH(out, d2, sizeof out) == CUDA_SUCCESS);
    CHECK(std::memcmp(in, out, sizeof in) == 0);
    REQUIRE(cuMemsetD32(d2 + 4, 0xdeadbeef, 2) == CUDA_SUCCESS);
    uint32_t words[4];
    REQUIRE(cuMemcpyDtoH(words, d2, sizeof words) == CUDA_SUCCESS);
    CHECK(words[1] == 0xdeadbeef);
    CHECK(words[2] == 0xdeadbeef);
    CHECK(cuMemcpyHtoD(d2 + 4000, in, 200) == CUDA_ERROR_INVALID_VALUE);  // past the end
    cuMemFree(d);
    cuMemFree(d2);
    CHECK(cuMemcpyDtoH(out, d, 16) == CUDA_ERROR_INVALID_VALUE);  // freed
}

TEST_CASE("pinned and managed memory are host accessible", "[driver]")
{
    sim_primary_context();
    void *h = nullptr;
    REQUIRE(cuMemHostAlloc(&h, 10000, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS);
    std::memset(h, 0x5a, 10000);
    void *h2 = nullptr;
    REQUIRE(cuMemAllocHost(&h2, 100) == CUDA_SUCCESS);
    CUdeviceptr m;
    size_t free0, free1, total;
    cuMemGetInfo(&free0, &total);
    REQUIRE(cuMemAllocManaged(&m, 8192, CU_MEM_ATTACH_GLOBAL) == CUDA_SUCCESS);
    cuMemGetInfo(&free1, &total);
    CHECK(free0 - free1 == 8192);  // managed memory counts against the device
    reinterpret_cast<char *>(m)[100] = 42;
    unsigned type = 0;
    REQUIRE(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CUdeviceptr(h)) == CUDA_SUCCESS);
    CHECK(type == CU_MEMORYTYPE_HOST);
    int managed = 0;
    REQUIRE(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, m) == CUDA_SUCCESS);
    CHECK(managed == 1);
    CHECK(cuMemFree(CUdeviceptr(h)) == CUDA_ERROR_INVALID_VALUE);  // wrong family
    CHECK(cuMemFreeHost(h) == CUDA_SUCCESS);
    CHECK(cuMemFreeHost(h2) == CUDA_SUCCESS);
    CHECK(cuMemFree(m) == CUDA_SUCCESS);
}

TEST_CASE("pitch allocations round the pitch", "[driver]")
{
    sim_primary_context();
    CUdeviceptr p;
    size_t pitch = 0;
    REQUIRE(cuMemAllocPitch(&p, &pitch, 1000, 10, 4) == CUDA_SUCCESS);
    CHECK(pitch == 1024);
    CUdeviceptr base;
    size_t size;
    REQUIRE(cuMemGetAddressRange(&base, &size, p + 5000) == CUDA_SUCCESS);
    CHECK(base == p);
    CHECK(size == 10240);
    CHECK(cuMemFree(p) == CUDA_SUCCESS);
}

TEST_CASE("context teardown frees what the context owns", "[teardown]")
{
    REQUIRE(cuInit(0) == CUDA_SUCCESS);
    CUcontext ctx;
    REQUIRE(cuCtxCreate(&ctx, nullptr, 0, 0) == CUDA_SUCCESS);
    size_t free0, free1, total;
    cuMemGetInfo(&free0, &total);
    CUdeviceptr p;
    REQUIRE(cuMemAlloc(&p, 10 * kMiB) == CUDA_SUCCESS);
    void *h;
    REQUIRE(cuMemAllocHost(&h, 4096) == CUDA_SUCCESS);
    REQUIRE(cuCtxDestroy(ctx) == CUDA_SUCCESS);
    CHECK(cuCtxDestroy(ctx) == CUDA_ERROR_INVALID_CONTEXT);
    CUcontext prim = sim_primary_context();
    cuMemGetInfo(&free1, &total);
    CHECK(free1 == free0);
    CHECK(cuMemFree(p) == CUDA_ERROR_INVALID_VALUE);

    unsigned flags;
    int active = 0;
    REQUIRE(cuDevicePrimaryCtxGetState(0, &flags, &active) == CUDA_SUCCESS);
    CHECK(active == 1);
    REQUIRE(cuMemAlloc(&p, kMiB) == CUDA_SUCCESS);
    REQUIRE(cuDevicePrimaryCtxReset(0) == CUDA_SUCCESS);
    REQUIRE(cuDevicePrimaryCtxGetState(0, &flags, &active) == CUDA_SUCCESS);
    CHECK(active == 0);
    CUdeviceptr q;
    CHECK(cuMemAlloc(&q, kMiB) == CUDA_ERROR_CONTEXT_IS_DESTROYED);
    CUcontext again;
    REQUIRE(cuDevicePrimaryCtxRetain(&again, 0) == CUDA_SUCCESS);
    CHECK(again == prim);  // the primary context is reusable after reset
    REQUIRE(cuMemGetInfo(&free1, &total) == CUDA_SUCCESS);
    CHECK(free1 == free0);
    REQUIRE(cuDevicePrimaryCtxRelease(0) == CUDA_SUCCESS);
    REQUIRE(cuDevicePrimaryCtxGetState(0, &flags, &active) == CUDA_SUCCESS);
    CHECK(active == 0);
}

TEST_CASE("streams and events are validated and timed", "[driver]")
{
    sim_primary_context();
    int least, greatest;
    REQUIRE(cuCtxGetStreamPriorityRange(&least, &greatest) == CUDA_SUCCESS);
    CHECK(least == 0);
    CHECK(greatest < 0);
    CUstream s;
    REQUIRE(cuStreamCreateWithPriority(&s, CU_STREAM_NON_BLOCKING, -1) == CUDA_SUCCESS);
    int prio = 0;
    REQUIRE(cuStreamGetPriority(s, &prio) == CUDA_SUCCESS);
    CHECK(prio == -1);
    CUevent a, b;
    REQUIRE(cuEventCreate(&a, CU_EVENT_DEFAULT) == CUDA_SUCCESS);
    REQUIRE(cuEventCreate(&b, CU_EVENT_DEFAULT) == CUDA_SUCCESS);
    REQUIRE(cuEventRecord(a, s) == CUDA_SUCCESS);
    REQUIRE(cuEventRecord(b, nullptr) == CUDA_SUCCESS);
    float ms = -1;
    REQUIRE(cuEventElapsedTime(&ms, a, b) == CUDA_SUCCESS);
    CHECK(ms >= 0);
    CHECK(cuEventQuery(b) == CUDA_SUCCESS);
    CHECK(cuStreamWaitEvent(s, b, 0) == CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(s) == CUDA_SUCCESS);
    CHECK(cuStreamDestroy(s) == CUDA_SUCCESS);
    CHECK(cuStreamSynchronize(s) == CUDA_ERROR_INVALID_HANDLE);
    CHECK(cuEventDestroy(a) == CUDA_SUCCESS);
    CHECK(cuEventDestroy(b) == CUDA_SUCCESS);
}

TEST_CASE("CUDA 13 explicit-context variants and driver log callbacks", "[driver]")
{
    CUcontext ctx = sim_primary_context();
    CHECK(cuCtxSynchronize_v2(ctx) == CUDA_SUCCESS);
    CHECK(cuCtxSynchronize_v2(nullptr) == CUDA_SUCCESS);  // the current context
    CUdevice dev = -1;
    CHECK(cuCtxGetDevice_v2(&dev, ctx) == CUDA_SUCCESS);
    CHECK(dev == 0);
    CHECK(cuCtxSynchronize_v2(reinterpret_cast<CUcontext>(0x1234)) == CUDA_ERROR_INVALID_CONTEXT);
    CUlogsCallbackHandle h = nullptr;
    CHECK(cuLogsRegisterCallback([](void *, CUlogLevel, char *, size_t) {}, nullptr, &h) ==
          CUDA_SUCCESS);
    CHECK(h != nullptr);
    CHECK(cuLogsUnregisterCallback(h) == CUDA_SUCCESS);
}

// DataLoader workers fork while other threads are inside CUDA: a child must
// never inherit the driver's lock held (pthread_atfork in driver_init.cpp).
TEST_CASE("fork while another thread allocates: the child can use the driver", "[threads]")
{
    sim_primary_context();
    std::atomic<bool> stop{false};
    std::thread busy([&] {
        sim_primary_context();
        while (!stop.load()) {
            CUdeviceptr p;
            if (cuMemAlloc(&p, 4096) == CUDA_SUCCESS)
                cuMemFree(p);
        }
    });
    int hung = 0;
    for (int i = 0; i < 50; ++i) {
        pid_t pid = fork();
        REQUIRE(pid >= 0);
        if (pid == 0) {
            alarm(10);  // a deadlock ends as SIGALRM
            CUdeviceptr p;
            _exit(cuMemAlloc(&p, 4096) == CUDA_SUCCESS && cuMemFree(p) == CUDA_SUCCESS ? 0 : 1);
        }
        int status = 0;
        REQUIRE(waitpid(pid, &status, 0) == pid);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
            ++hung;
    }
    stop = true;
    busy.join();
    CHECK(hung == 0);
}

namespace {
int threads_now(const char *name)
{
    int n = 0;
    for (const auto &entry : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream comm(entry.path() / "comm");
        std::string s;
        std::getline(comm, s);
        n += s == name;
    }
    return n;
}

// The process's threads named `name`, once the count has settled (a woken
// driver thread ends a moment after its context).
int threads_named(const char *name, int expect)
{
    int n = -1;
    for (int tries = 0; tries < 200; ++tries) {
        if ((n = threads_now(name)) == expect)
            break;
        usleep(5000);
    }
    return n;
}

// Whether the count stays at `expect` for `ms` milliseconds: a thread woken
// by mistake may take a while to end, so one look proves nothing.
bool threads_stay(const char *name, int expect, int ms)
{
    for (int t = 0; t < ms; t += 10) {
        if (threads_now(name) != expect)
            return false;
        usleep(10000);
    }
    return threads_now(name) == expect;
}

int eventfds_open()
{
    int n = 0;
    for (const auto &entry : std::filesystem::directory_iterator("/proc/self/fd")) {
        std::error_code ec;
        n += std::filesystem::read_symlink(entry.path(), ec).string() == "anon_inode:[eventfd]";
    }
    return n;
}

// Whether the loaded libcuda.so.1 is marked not to be unloaded.
bool libcuda_nodelete()
{
    bool found = false, nodelete = false;
    struct Seen {
        bool *found, *nodelete;
    } seen{&found, &nodelete};
    dl_iterate_phdr(
        [](dl_phdr_info *info, size_t, void *data) {
            auto *sn = static_cast<Seen *>(data);
            const char *name = info->dlpi_name ? info->dlpi_name : "";
            const char *slash = std::strrchr(name, '/');
            if (std::strcmp(slash ? slash + 1 : name, "libcuda.so.1") != 0)
                return 0;
            *sn->found = true;
            for (int i = 0; i < info->dlpi_phnum; ++i) {
                if (info->dlpi_phdr[i].p_type != PT_DYNAMIC)
                    continue;
                auto *d = reinterpret_cast<const ElfW(Dyn) *>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
                for (; d->d_tag != DT_NULL; ++d)
                    if (d->d_tag == DT_FLAGS_1 && (d->d_un.d_val & DF_1_NODELETE))
                        *sn->nodelete = true;
            }
            return 1;
        },
        &seen);
    return found && nodelete;
}
}  // namespace

TEST_CASE("the driver's threads: one from cuInit, one per live context", "[driver]")
{
    sim_primary_context();
    CHECK(threads_named("cuda00001400006", 1) == 1);
    int before = threads_named("cuda-EvtHandlr", 1);
    CHECK(before >= 1);  // the primary context's, and any other live one's
    CUcontext made = nullptr;
    REQUIRE(cuCtxCreate(&made, nullptr, 0, 0) == CUDA_SUCCESS);
    CHECK(threads_named("cuda-EvtHandlr", before + 1) == before + 1);
    // A forked child that tears the context down ends no thread of ours.
    pid_t pid = fork();
    if (pid == 0)
        _exit(cuCtxDestroy(made) == CUDA_SUCCESS ? 0 : 1);
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
    CHECK(threads_stay("cuda-EvtHandlr", before + 1, 200));
    // In a child: no driver thread survives the fork; a context torn down
    // there closes the child's copy of its descriptor; revived, it gets a
    // thread of the child's own.
    pid = fork();
    if (pid == 0) {
        int code = 0;
        if (threads_now("cuda-EvtHandlr") != 0 || threads_now("cuda00001400006") != 0)
            code |= 1;
        int fds = eventfds_open();
        if (cuDevicePrimaryCtxReset(0) != CUDA_SUCCESS || eventfds_open() != fds - 1)
            code |= 2;
        CUcontext again = nullptr;
        if (cuDevicePrimaryCtxRetain(&again, 0) != CUDA_SUCCESS ||
            threads_named("cuda-EvtHandlr", 1) != 1)
            code |= 4;
        _exit(code);
    }
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
    CHECK(threads_stay("cuda-EvtHandlr", before + 1, 100));
    REQUIRE(cuCtxDestroy(made) == CUDA_SUCCESS);
    CHECK(threads_named("cuda-EvtHandlr", before) == before);
    // The threads run libcuda's code until the process ends.
    CHECK(libcuda_nodelete());
    // Driver threads take no signal meant for the application's threads.
    for (const auto &entry : std::filesystem::directory_iterator("/proc/self/task")) {
        std::ifstream comm(entry.path() / "comm");
        std::string name;
        std::getline(comm, name);
        if (name.rfind("cuda", 0) != 0)
            continue;
        std::ifstream st(entry.path() / "status");
        std::string line;
        while (std::getline(st, line))
            if (line.rfind("SigBlk:", 0) == 0) {
                unsigned long long blocked = std::stoull(line.substr(7), nullptr, 16);
                for (int sig : {SIGINT, SIGTERM, SIGUSR1, SIGUSR2, SIGPROF, SIGCHLD})
                    CHECK((blocked >> (sig - 1) & 1) == 1);
            }
    }
    REQUIRE(cuCtxSetCurrent(sim_primary_context()) == CUDA_SUCCESS);
}
