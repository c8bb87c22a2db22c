// cuGetProcAddress: (base name, cudaVersion, per-thread flag) -> entry point.
// The table is generated from the driver export list and the PFN_*_v<ver>
// typedefs of cudaTypedefs.h (gen_stubs.py), sorted by base name.
#include <algorithm>
#include <cstring>

#include "driver_internal.h"

extern "C" {
struct simcuda_proc_entry {
    const char *base;
    int version;
    int per_thread;
    const char *symbol;
    int (*fn)(void);
};
__attribute__((visibility("hidden"))) extern const simcuda_proc_entry simcuda_proc_table[];
__attribute__((visibility("hidden"))) extern const unsigned simcuda_proc_table_size;
}

namespace {

CUresult lookup(const char *symbol, void **pfn, int version, cuuint64_t flags,
                CUdriverProcAddressQueryResult *status)
{
    auto report = [&](CUdriverProcAddressQueryResult s, void *fn) {
        if (status)
            *status = s;
        *pfn = fn;
        return fn ? CUDA_SUCCESS : CUDA_ERROR_NOT_FOUND;
    };
    if (!symbol || !pfn)
        return CUDA_ERROR_INVALID_VALUE;
    const simcuda_proc_entry *begin = simcuda_proc_table;
    const simcuda_proc_entry *end = begin + simcuda_proc_table_size;
    auto less = [](const simcuda_proc_entry &e, const char *s) { return std::strcmp(e.base, s) < 0; };
    const simcuda_proc_entry *first = std::lower_bound(begin, end, symbol, less);
    const simcuda_proc_entry *it = first;
    const simcuda_proc_entry *best = nullptr, *best_pt = nullptr;
    for (; it != end && std::strcmp(it->base, symbol) == 0; ++it) {
        if (it->version > version)
            continue;
        const simcuda_proc_entry *&slot = it->per_thread ? best_pt : best;
        if (!slot || it->version >= slot->version)
            slot = it;
    }
    if (first == it)
        return report(CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND, nullptr);
    if (!best)
        return report(CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT, nullptr);
    // A per-thread twin is used only if it belongs to the chosen ABI variant.
    if ((flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && best_pt) {
        size_t n = std::strlen(best->symbol);
        if (std::strncmp(best_pt->symbol, best->symbol, n) == 0 &&
            std::strncmp(best_pt->symbol + n, "_pt", 3) == 0)
            best = best_pt;
    }
    return report(CU_GET_PROC_ADDRESS_SUCCESS, reinterpret_cast<void *>(best->fn));
}

}  // namespace

extern "C" {

CUresult CUDAAPI cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                     cuuint64_t flags, CUdriverProcAddressQueryResult *symbolStatus)
{
    return lookup(symbol, pfn, cudaVersion, flags, symbolStatus);
}

// The pre-12.0 entry point, without symbolStatus; cuda.h maps the name to _v2.
#undef cuGetProcAddress
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags);
CUresult CUDAAPI cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    return lookup(symbol, pfn, cudaVersion, flags, nullptr);
}

}  // extern "C"
