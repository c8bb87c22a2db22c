// Device memory: one reserved PROT_NONE address arena shared by all devices
// (so the host faults on device pointers, as with real GPUs), a shadow
// mapping of the same size that holds the bytes, and per-device capacity
// accounting. Placement is first-fit over free address intervals (under the
// driver mutex; small allocations take whole 2 MiB slabs from it, see
// small_blocks.cpp); capacity is enforced separately, so fragmentation of
// the larger arena never causes a spurious OOM. The capacity counters are
// atomic because the small-allocation path charges without the mutex (and
// mostly through its shard's credit, see small_blocks.cpp).
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>

#include "driver_internal.h"

namespace simcuda {
namespace {

uintptr_t g_base;
size_t g_span;
char *g_shadow;
Immortal<std::map<uintptr_t, size_t>> g_free;  // start -> length, coalesced
std::atomic<uint64_t> g_charged[kMaxDevices];

constexpr size_t kMaxArena = size_t(32) << 40;  // leaves room in 47-bit VA

void *reserve(size_t n, int prot)
{
    void *p = mmap(nullptr, n, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

bool va_carve_once(size_t size, size_t align, uintptr_t hint, uintptr_t *out)
{
    if (size == 0 || size > g_span)
        return false;
    auto take = [&](std::map<uintptr_t, size_t>::iterator it, uintptr_t at) {
        uintptr_t start = it->first;
        size_t len = it->second;
        g_free->erase(it);
        if (at > start)
            (*g_free)[start] = at - start;
        if (at + size < start + len)
            (*g_free)[at + size] = start + len - (at + size);
        *out = at;
        return true;
    };
    if (hint) {
        auto it = g_free->upper_bound(hint);
        if (it != g_free->begin()) {
            --it;
            if (hint % align == 0 && hint + size <= it->first + it->second)
                return take(it, hint);
        }
    }
    for (auto it = g_free->begin(); it != g_free->end(); ++it) {
        uintptr_t at = round_up(it->first, align);
        if (at + size <= it->first + it->second)
            return take(it, at);
    }
    return false;
}

}  // namespace

bool heap_init()
{
    const Config &c = config();
    // Address space for linear allocations and VMM reservations (PyTorch's
    // expandable segments reserve ~1.125x capacity per segment).
    size_t want = std::min<size_t>(kMaxArena, size_t(c.capacity) * 8 * c.devices);
    want = round_up(std::max<size_t>(want, size_t(1) << 30), kGranularity);
    for (size_t n = want; n >= (size_t(1) << 30); n /= 2) {
        void *dev = reserve(n + kGranularity, PROT_NONE);
        if (!dev)
            continue;
        void *sh = reserve(n + kGranularity, PROT_READ | PROT_WRITE);
        if (!sh) {
            munmap(dev, n + kGranularity);
            continue;
        }
        // Device pointers are 2 MiB aligned at the arena start like real VA.
        g_base = round_up(reinterpret_cast<uintptr_t>(dev), kGranularity);
        g_shadow = static_cast<char *>(sh) + (g_base - reinterpret_cast<uintptr_t>(dev));
        g_span = n;
        (*g_free)[g_base] = n;
        return true;
    }
    std::fprintf(stderr, "simcuda: cannot reserve device address space\n");
    return false;
}

bool va_carve(size_t size, size_t align, uintptr_t hint, uintptr_t *out)
{
    if (va_carve_once(size, align, hint, out))
        return true;
    // Shards keep empty slabs for reuse; that address space must never turn
    // into an OOM the capacity does not explain.
    return small_reclaim_locked() && va_carve_once(size, align, hint, out);
}

void va_release(uintptr_t p, size_t size)
{
    auto next = g_free->lower_bound(p);
    if (next != g_free->end() && p + size == next->first) {
        size += next->second;
        next = g_free->erase(next);
    }
    if (next != g_free->begin()) {
        auto prev = std::prev(next);
        if (prev->first + prev->second == p) {
            prev->second += size;
            return;
        }
    }
    (*g_free)[p] = size;
}

uintptr_t arena_base() { return g_base; }
size_t arena_span() { return g_span; }

bool try_charge(int dev, uint64_t bytes)
{
    // A compare-and-swap loop, not fetch_add then undo: a transient
    // over-count would make a concurrent allocation that fits fail.
    std::atomic<uint64_t> &c = g_charged[dev];
    uint64_t cur = c.load(std::memory_order_relaxed);
    do {
        if (bytes > config().capacity - cur)
            return false;
    } while (!c.compare_exchange_weak(cur, cur + bytes, std::memory_order_acq_rel,
                                      std::memory_order_relaxed));
    return true;
}

bool charge(int dev, uint64_t bytes)
{
    if (try_charge(dev, bytes))
        return true;
    // Maybe only credit the shards hold and do not use stands in the way.
    small_drain_credit_locked(dev);
    return try_charge(dev, bytes);
}

void uncharge(int dev, uint64_t bytes) { g_charged[dev].fetch_sub(bytes, std::memory_order_acq_rel); }

uint64_t charged(int dev) { return g_charged[dev].load(std::memory_order_acquire); }

bool in_arena(uintptr_t p) { return p >= g_base && p < g_base + g_span; }

char *shadow_of(uintptr_t p) { return g_shadow + (p - g_base); }

void shadow_discard(uintptr_t p, size_t n)
{
    // Give the committed shadow pages back; keeps long tests from growing RSS.
    const size_t page = size_t(sysconf(_SC_PAGESIZE));
    uintptr_t s = round_up(reinterpret_cast<uintptr_t>(shadow_of(p)), page);
    uintptr_t e = (reinterpret_cast<uintptr_t>(shadow_of(p)) + n) / page * page;
    if (e > s)
        madvise(reinterpret_cast<void *>(s), e - s, MADV_DONTNEED);
}

bool shadow_map_fd(uintptr_t p, size_t n, int fd, size_t offset)
{
    void *r = mmap(shadow_of(p), n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd,
                   off_t(offset));
    return r != MAP_FAILED;
}

void shadow_unmap(uintptr_t p, size_t n)
{
    mmap(shadow_of(p), n, PROT_READ | PROT_WRITE,
         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
}

}  // namespace simcuda
