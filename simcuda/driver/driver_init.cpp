// Driver configuration (environment), cuInit, CUDA_INJECTION64_PATH, version
// and error-string queries.
#include <atomic>
#include <dlfcn.h>
#include <pthread.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "../error_table.h"
#include "driver_internal.h"

namespace simcuda {
namespace {

constexpr uint64_t kDefaultCapacity = uint64_t(16) << 30;
constexpr uint64_t kMaxCapacity = uint64_t(4) << 40;

// Accepts a byte count with an optional binary suffix (K, M, G, T, with or
// without "iB"/"B"). Returns 0 on a malformed or out-of-range value.
uint64_t parse_bytes(const char *s)
{
    errno = 0;
    char *end = nullptr;
    unsigned long long v = std::strtoull(s, &end, 10);
    if (errno || end == s || *s == '-')
        return 0;
    int shift = 0;
    switch (*end) {
    case 'K': case 'k': shift = 10; ++end; break;
    case 'M': case 'm': shift = 20; ++end; break;
    case 'G': case 'g': shift = 30; ++end; break;
    case 'T': case 't': shift = 40; ++end; break;
    default: break;
    }
    if (shift && std::strcmp(end, "iB") == 0)
        end += 2;
    else if (shift && std::strcmp(end, "B") == 0)
        end += 1;
    if (*end || v == 0 || v > (kMaxCapacity >> shift))
        return 0;
    return uint64_t(v) << shift;
}

Config load_config()
{
    Config c{kDefaultCapacity, 1};
    if (const char *s = std::getenv("SIMCUDA_MEMORY_BYTES"); s && *s) {
        if (uint64_t v = parse_bytes(s); v >= (uint64_t(1) << 20))
            c.capacity = v;
        else
            std::fprintf(stderr,
                         "simcuda: invalid SIMCUDA_MEMORY_BYTES='%s' (want 1MiB..4TiB), "
                         "using 16GiB\n", s);
    }
    if (const char *s = std::getenv("SIMCUDA_DEVICES"); s && *s) {
        char *end = nullptr;
        long v = std::strtol(s, &end, 10);
        if (*end == 0 && v >= 1 && v <= kMaxDevices)
            c.devices = int(v);
        else
            std::fprintf(stderr, "simcuda: invalid SIMCUDA_DEVICES='%s' (want 1..%d), using 1\n",
                         s, kMaxDevices);
    }
    return c;
}

Config g_config;
std::atomic<bool> g_initialized{false};
std::once_flag g_init_once;
CUresult g_init_result = CUDA_SUCCESS;

void load_injection()
{
    const char *path = std::getenv("CUDA_INJECTION64_PATH");
    if (!path || !*path)
        return;
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) {
        std::fprintf(stderr, "simcuda: cannot load CUDA_INJECTION64_PATH: %s\n", dlerror());
        return;
    }
    auto init = reinterpret_cast<int (*)(void)>(dlsym(h, "InitializeInjection"));
    if (!init) {
        std::fprintf(stderr, "simcuda: %s has no InitializeInjection\n", path);
        return;
    }
    init();
}

const char *lookup(CUresult e, bool name)
{
    const ErrorEntry *row = find_error(kDriverErrors, int(e));
    return row ? (name ? row->name : row->text) : nullptr;
}

}  // namespace

const Config &config() { return g_config; }
bool initialized() { return g_initialized.load(std::memory_order_acquire); }

std::mutex &driver_mutex()
{
    static std::mutex m;
    return m;
}

namespace {
// fork() while another thread holds the driver lock would leave the child's
// copy locked forever (PyTorch's DataLoader forks workers from a process whose
// other threads may be inside CUDA). Hold the lock across fork so the child
// starts with it free and the state it guards consistent.
// The allocator shards' locks are held too, taken after the driver's (the
// lock order), so a child never inherits a half-updated shard.
void fork_prepare()
{
    driver_mutex().lock();
    small_lock_all();
}
void fork_release()
{
    small_unlock_all();
    driver_mutex().unlock();
}
[[maybe_unused]] const int g_atfork = [] {
    driver_mutex();  // construct before the first fork
    return pthread_atfork(fork_prepare, fork_release, fork_release);
}();
}  // namespace

}  // namespace simcuda

using namespace simcuda;

extern "C" {

CUresult CUDAAPI cuInit(unsigned int flags)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    bool first = false;
    std::call_once(g_init_once, [&] {
        g_config = load_config();
        {
            Lock lock(driver_mutex());
            devices_locked().resize(g_config.devices);
            if (heap_init())
                small_init();
            else
                g_init_result = CUDA_ERROR_OUT_OF_MEMORY;
        }
        if (g_init_result == CUDA_SUCCESS) {
            // Outside the driver lock, as every driver thread is started.
            static DriverThread worker = start_driver_thread("cuda00001400006");
            (void)worker;
            g_initialized.store(true, std::memory_order_release);
        }
        first = true;
    });
    // The tool runs after the driver is usable, as with the real driver, and
    // outside call_once so it may itself call cuInit.
    if (first && g_init_result == CUDA_SUCCESS)
        load_injection();
    return g_init_result;
}

CUresult CUDAAPI cuDriverGetVersion(int *version)
{
    if (!version)
        return CUDA_ERROR_INVALID_VALUE;
    *version = CUDA_VERSION;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **str)
{
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    *str = lookup(error, false);
    return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **str)
{
    if (!str)
        return CUDA_ERROR_INVALID_VALUE;
    *str = lookup(error, true);
    return *str ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// Driver log callbacks (PyTorch registers one at lazy init). simcuda emits no
// driver logs, so a registration only hands out a unique handle.
CUresult CUDAAPI cuLogsRegisterCallback(CUlogsCallback callbackFunc, void *,
                                        CUlogsCallbackHandle *callback_out)
{
    if (!callbackFunc || !callback_out)
        return CUDA_ERROR_INVALID_VALUE;
    static std::atomic<uintptr_t> next{1};
    *callback_out = reinterpret_cast<CUlogsCallbackHandle>(next.fetch_add(1) * 16);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLogsUnregisterCallback(CUlogsCallbackHandle callback)
{
    return callback ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

}  // extern "C"
