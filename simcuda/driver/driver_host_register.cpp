// Page-locked registration of the caller's own host memory
// (cuMemHostRegister / cuMemHostUnregister). Nothing is really locked: a
// registration is a record of the range, checked as the documentation says
// (flags, overlap, a range the process has mapped), and freed with its
// context. Registered ranges are host memory to copies and pointer queries.
#include <sys/mman.h>
#include <unistd.h>

#include "driver_internal.h"

namespace simcuda {
namespace {

struct Registration {
    size_t size;
    unsigned flags;
    CUctx_st *ctx;
};

Immortal<std::map<uintptr_t, Registration>> g_registered;

constexpr unsigned kRegisterFlags = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                                    CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;

// Every page of [p, p+n) is mapped in this process: msync fails with ENOMEM
// on a hole, without touching the pages.
bool host_mapped(uintptr_t p, size_t n)
{
    uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
    uintptr_t lo = p / page * page;
    return msync(reinterpret_cast<void *>(lo), p + n - lo, MS_ASYNC) == 0;
}

bool overlaps_registered_locked(uintptr_t p, size_t n)
{
    auto it = g_registered->lower_bound(p + n);
    if (it == g_registered->begin())
        return false;
    --it;
    return it->first + it->second.size > p;
}

// Pinned allocations from cuMemHostAlloc are registered already.
bool overlaps_pinned_locked(uintptr_t p, size_t n)
{
    auto &allocs = allocs_locked();
    auto it = allocs.lower_bound(p + n);
    while (it != allocs.begin()) {
        --it;
        if (it->first + it->second.span <= p)
            return false;
        if (it->second.kind == Kind::Host || it->second.kind == Kind::Managed)
            return true;
    }
    return false;
}

CUresult host_register(void *ptr, size_t bytesize, unsigned flags)
{
    uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    if (!p || bytesize == 0 || (flags & ~kRegisterFlags) || p + bytesize < p)
        return CUDA_ERROR_INVALID_VALUE;
    // I/O memory (a PCI BAR) cannot be told from ordinary memory here.
    if (flags & CU_MEMHOSTREGISTER_IOMEMORY)
        return CUDA_ERROR_NOT_SUPPORTED;
    CUctx_st *c;
    if (CUresult r = current_live(&c))
        return r;
    if (in_arena(p) || !host_mapped(p, bytesize))
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    if (!c->alive.load(std::memory_order_relaxed))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (overlaps_registered_locked(p, bytesize) || overlaps_pinned_locked(p, bytesize))
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    (*g_registered)[p] = Registration{bytesize, flags, c};
    return CUDA_SUCCESS;
}

}  // namespace

bool registered_find_locked(uintptr_t p, uintptr_t *base, size_t *size)
{
    auto it = g_registered->upper_bound(p);
    if (it == g_registered->begin())
        return false;
    --it;
    if (p >= it->first + it->second.size)
        return false;
    *base = it->first;
    *size = it->second.size;
    return true;
}

void registered_release_context_locked(CUctx_st *c)
{
    for (auto it = g_registered->begin(); it != g_registered->end();)
        it = it->second.ctx == c ? g_registered->erase(it) : std::next(it);
}

}  // namespace simcuda

using namespace simcuda;

extern "C" {

CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemHostRegister_v2, p, bytesize, Flags) {
        return host_register(p, bytesize, Flags);
    } SIM_TRACED_END;
}

// The pre-6.5 entry point: same prototype and behaviour.
CUresult CUDAAPI cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemHostRegister, p, bytesize, Flags) {
        return host_register(p, bytesize, Flags);
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuMemHostUnregister(void *p)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuMemHostUnregister, p) {
        if (!p)
            return CUDA_ERROR_INVALID_VALUE;
        Lock lock(driver_mutex());
        // Only the base address the range was registered with.
        if (g_registered->erase(reinterpret_cast<uintptr_t>(p)) == 0)
            return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

}  // extern "C"
