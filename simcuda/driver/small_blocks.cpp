// Small device allocations (up to kSmallMax bytes): the path every
// cudaMalloc of a typical tensor takes, so it must scale with threads rather
// than serialise on driver_mutex (a real driver sub-allocates small requests
// from larger chunks too). Threads are spread over kShards shards; a shard
// owns 2 MiB slabs carved from the arena and cuts each slab into equal blocks
// of one size class. The slab directory maps every 2 MiB of the arena to the
// slab there, so a free or query from any thread finds the owner in O(1).
//
// Capacity: a shard charges the device counter in batches (kRefill) and keeps
// what it has not used as credit, so alloc/free pairs do not bounce the shared
// counter between cores. Near capacity that credit could cause an OOM the
// usage does not explain, so the exact check (charge, under the driver mutex)
// first drains every shard's credit and marks the device tight: no batches,
// frees pay back directly, until the device has kLooseMargin free again.
//
// Locks: a shard's mutex guards its slabs, their records, free lists and
// credit. The driver mutex is taken only to carve or give back a slab's
// address range and for the exact capacity check, never while a shard lock
// is held (order: driver mutex, then shards in index order). A directory
// entry changes only under the owning shard's lock, so a reader that loaded
// one without it re-checks it under that lock.
#include <sys/mman.h>

#include <algorithm>
#include <array>
#include <bit>

#include "driver_internal.h"

namespace simcuda {
namespace {

constexpr int kShards = 32;
constexpr int kClasses = 40;
// Empty slabs a shard keeps (for any size class) before giving them back.
constexpr size_t kSpareSlabs = 2;
constexpr uint64_t kRefill = 128 << 10;      // credit taken per batch
constexpr uint64_t kMaxCredit = 256 << 10;   // above this, frees pay back
// Free bytes at which a tight device takes batches again: more than all
// shards can hold as credit (each at most one largest block plus a batch).
constexpr uint64_t kLooseMargin = uint64_t(kShards) * 2 * (kSmallMax + kRefill);

// Block sizes: 512-byte steps up to 4 KiB, then four steps per power of two,
// so a block wastes under 25% of its address range. Capacity is charged on
// the requested size rounded to 512 bytes, never on the block size.
constexpr int class_of(size_t charged)
{
    if (charged <= 4096)
        return int(charged / kAlign) - 1;
    int k = int(std::bit_width(charged - 1)) - 1;  // charged in (2^k, 2^(k+1)]
    size_t step = (size_t(1) << k) / 4;
    return 8 + (k - 12) * 4 + int((round_up(charged, step) - (size_t(1) << k)) / step) - 1;
}

constexpr size_t class_bytes(int cls)
{
    if (cls < 8)
        return size_t(cls + 1) * kAlign;
    int k = 12 + (cls - 8) / 4;
    return (size_t(1) << k) + size_t((cls - 8) % 4 + 1) * ((size_t(1) << k) / 4);
}

constexpr bool classes_fit()
{
    for (size_t s = kAlign; s <= kSmallMax; s += kAlign) {
        int c = class_of(s);
        if (c < 0 || c >= kClasses || class_bytes(c) < s || (c > 0 && class_bytes(c - 1) >= s) ||
            class_bytes(c) % kAlign || kGranularity / class_bytes(c) < 2)
            return false;
    }
    return class_of(kSmallMax) == kClasses - 1;
}
static_assert(classes_fit(), "every small size has exactly one smallest class");

struct Record {
    uint32_t size;  // requested bytes; 0: the block is free
    int32_t device;
    CUctx_st *ctx;
};

// Cache-line aligned, and the free list sized once: a slab is written on
// every allocation by its shard's thread, so it must share no line with
// another thread's data.
struct alignas(64) Slab {
    explicit Slab(int owner) : shard(owner) {}

    const int shard;
    uintptr_t base = 0;  // 0: no address range (an idle object)
    int cls = -1;        // -1: no class (a spare, or idle)
    uint32_t block = 0, count = 0, bump = 0, live = 0;
    std::vector<uint32_t> free;  // freed blocks, reused last in, first out
    std::vector<Record> rec;

    bool full() const { return free.empty() && bump == count; }
};

struct alignas(64) Shard {
    std::mutex m;
    std::vector<Slab *> slabs;            // every slab with an address range
    std::vector<Slab *> avail[kClasses];  // slabs of a class with a free block
    std::vector<Slab *> spare;            // empty slabs kept for reuse
    std::vector<Slab *> idle;             // Slab objects without a range
    uint64_t credit[kMaxDevices] = {};    // charged to the device, unused
};

// Slab objects are never deleted and never change shard: a thread may hold a
// pointer loaded from the directory while the slab is being detached.
Immortal<std::array<Shard, kShards>> g_shards;
Slab **g_dir;  // arena_span() / kGranularity entries, zero-filled
std::atomic<bool> g_tight[kMaxDevices];
std::atomic<unsigned> g_next_shard{0};
thread_local int t_shard = -1;

std::atomic_ref<Slab *> dir_entry(uintptr_t p)
{
    return std::atomic_ref<Slab *>(g_dir[(p - arena_base()) / kGranularity]);
}

Slab *slab_at(uintptr_t p)
{
    if (!g_dir || !in_arena(p))
        return nullptr;
    return dir_entry(p).load(std::memory_order_acquire);
}

// Round-robin, so up to kShards threads never share a shard.
int my_shard()
{
    if (t_shard < 0)
        t_shard = int(g_next_shard.fetch_add(1, std::memory_order_relaxed) % kShards);
    return t_shard;
}

// Charges bytes to dev for the shard locked by lock: from its credit, else a
// batch from the device counter, else exactly bytes. Only the exact check
// (charge) may take the driver mutex, and never with a shard lock held.
bool charge_small(Shard &sh, std::unique_lock<std::mutex> &lock, int dev, uint64_t bytes)
{
    uint64_t &credit = sh.credit[dev];
    if (credit >= bytes) {
        credit -= bytes;
        return true;
    }
    // Read under the shard lock: a drain sets tight before it visits this
    // shard, so credit taken here is either drained or never taken.
    if (!g_tight[dev].load(std::memory_order_acquire) && try_charge(dev, bytes + kRefill)) {
        credit += kRefill;
        return true;
    }
    if (try_charge(dev, bytes))
        return true;
    lock.unlock();
    bool ok;
    {
        Lock driver(driver_mutex());
        ok = charge(dev, bytes);
    }
    lock.lock();
    return ok;
}

// Pays back a freed block's charge, shard lock held.
void refund(Shard &sh, int dev, uint64_t bytes)
{
    if (g_tight[dev].load(std::memory_order_acquire)) {
        uncharge(dev, bytes);
        return;
    }
    uint64_t &credit = sh.credit[dev];
    credit += bytes;
    if (credit > kMaxCredit) {
        uncharge(dev, credit - kRefill);
        credit = kRefill;
    }
}

// After a free, no lock held: a tight device with room again goes back to
// batches. Under the driver mutex, so never during a drain.
void maybe_loosen(int dev)
{
    auto roomy = [dev] { return charged(dev) + kLooseMargin <= config().capacity; };
    if (!g_tight[dev].load(std::memory_order_relaxed) || !roomy())
        return;
    Lock driver(driver_mutex());
    if (roomy())
        g_tight[dev].store(false, std::memory_order_release);
}

void format(Slab *s, int cls)
{
    s->cls = cls;
    s->block = uint32_t(class_bytes(cls));
    s->count = uint32_t(kGranularity / s->block);
    s->bump = s->live = 0;
    s->free.clear();
    s->free.reserve(s->count);
    s->rec.assign(s->count, Record{});
}

void attach(Shard &sh, int index, uintptr_t base, int cls)
{
    Slab *s;
    if (!sh.idle.empty()) {
        s = sh.idle.back();
        sh.idle.pop_back();
    } else {
        s = new Slab(index);
    }
    s->base = base;
    format(s, cls);
    sh.slabs.push_back(s);
    sh.avail[cls].push_back(s);
    dir_entry(base).store(s, std::memory_order_release);
}

// Takes an empty slab out of its shard; the caller gives the range back
// (under the driver mutex, so not while holding the shard lock).
uintptr_t detach(Shard &sh, Slab *s)
{
    uintptr_t base = s->base;
    dir_entry(base).store(nullptr, std::memory_order_release);
    sh.slabs.erase(std::find(sh.slabs.begin(), sh.slabs.end(), s));
    s->base = 0;
    s->cls = -1;
    s->free = {};
    s->rec = {};
    sh.idle.push_back(s);
    return base;
}

// Frees block i of s, shard lock held. Returns a slab range to give back, or
// 0. Keeps one slab per class even when empty, so an alloc/free loop does not
// carve and return a slab every time.
uintptr_t free_block(Shard &sh, Slab *s, uint32_t i, Record *was)
{
    *was = s->rec[i];
    s->rec[i] = Record{};
    refund(sh, was->device, round_up(was->size, kAlign));
    // Before the block can be handed out again, or the discard would wipe the
    // next owner's bytes.
    shadow_discard(s->base + uintptr_t(i) * s->block, s->block);
    bool was_full = s->full();
    s->free.push_back(i);
    --s->live;
    std::vector<Slab *> &av = sh.avail[s->cls];
    if (was_full)
        av.push_back(s);
    if (s->live || av.size() == 1)
        return 0;
    av.erase(std::find(av.begin(), av.end(), s));
    if (sh.spare.size() < kSpareSlabs) {
        s->cls = -1;
        sh.spare.push_back(s);
        return 0;
    }
    return detach(sh, s);
}

void give_back_locked(uintptr_t base)
{
    shadow_discard(base, kGranularity);
    va_release(base, kGranularity);
}

// Block index of p in s if p is inside a live block, shard lock held.
bool live_block(const Slab *s, uintptr_t p, uint32_t *index)
{
    if (s->cls < 0)
        return false;
    uint32_t i = uint32_t((p - s->base) / s->block);
    if (i >= s->bump || !s->rec[i].size || p - (s->base + uintptr_t(i) * s->block) >= s->rec[i].size)
        return false;
    *index = i;
    return true;
}

// Runs fn(shard, slab) with the shard owning p's slab locked and the slab
// still attached; returns false (fn not run) when p is in no slab.
template <class Fn>
bool with_slab(uintptr_t p, Fn &&fn)
{
    for (;;) {
        Slab *s = slab_at(p);
        if (!s)
            return false;
        Shard &sh = (*g_shards)[s->shard];
        Lock lock(sh.m);
        if (dir_entry(p).load(std::memory_order_relaxed) == s) {
            fn(sh, s);
            return true;
        }
        // Detached meanwhile: the range may now belong to someone else.
    }
}

}  // namespace

void small_init()
{
    size_t bytes = arena_span() / kGranularity * sizeof(Slab *);
    void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    // Without a directory every allocation takes the locked path.
    g_dir = p == MAP_FAILED ? nullptr : static_cast<Slab **>(p);
}

CUresult small_alloc(CUctx_st *c, size_t n, uintptr_t *out)
{
    if (!g_dir)
        return CUDA_ERROR_NOT_FOUND;
    size_t charged_bytes = round_up(n, kAlign);
    int cls = class_of(charged_bytes);
    int index = my_shard();
    Shard &sh = (*g_shards)[index];
    std::unique_lock<std::mutex> lock(sh.m);
    if (!charge_small(sh, lock, c->device, charged_bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    std::vector<Slab *> &av = sh.avail[cls];
    if (av.empty() && !sh.spare.empty()) {
        Slab *s = sh.spare.back();
        sh.spare.pop_back();
        format(s, cls);
        av.push_back(s);
    }
    if (av.empty()) {
        lock.unlock();
        uintptr_t base;
        bool carved;
        {
            Lock driver(driver_mutex());
            carved = va_carve(kGranularity, kGranularity, 0, &base);
        }
        if (!carved) {
            uncharge(c->device, charged_bytes);
            return CUDA_ERROR_NOT_FOUND;
        }
        lock.lock();
        attach(sh, index, base, cls);
    }
    // Checked under the shard lock: destroy_context clears alive before it
    // visits the shards, so either it sees this block or this sees !alive.
    if (!c->alive.load(std::memory_order_acquire)) {
        refund(sh, c->device, charged_bytes);
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    }
    Slab *s = av.back();
    uint32_t i;
    if (!s->free.empty()) {
        i = s->free.back();
        s->free.pop_back();
    } else {
        i = s->bump++;
    }
    s->rec[i] = Record{uint32_t(n), c->device, c};
    ++s->live;
    if (s->full())
        av.pop_back();
    *out = s->base + uintptr_t(i) * s->block;
    return CUDA_SUCCESS;
}

CUresult small_free(uintptr_t p)
{
    CUresult r = CUDA_ERROR_INVALID_VALUE;
    Record was{};
    uintptr_t back = 0;
    bool in_slab = with_slab(p, [&](Shard &sh, Slab *s) {
        uint32_t i;
        if (!live_block(s, p, &i) || p != s->base + uintptr_t(i) * s->block)
            return;
        back = free_block(sh, s, i, &was);
        r = CUDA_SUCCESS;
    });
    if (!in_slab)
        return CUDA_ERROR_NOT_FOUND;
    if (back) {
        Lock driver(driver_mutex());
        give_back_locked(back);
    }
    if (r == CUDA_SUCCESS)
        maybe_loosen(was.device);
    return r;
}

bool small_find(uintptr_t p, uintptr_t *base, Alloc *out)
{
    bool found = false;
    with_slab(p, [&](Shard &, Slab *s) {
        uint32_t i;
        if (!live_block(s, p, &i))
            return;
        const Record &r = s->rec[i];
        *base = s->base + uintptr_t(i) * s->block;
        *out = Alloc{r.size, round_up(r.size, kAlign), s->block, r.device, r.ctx, Kind::Device,
                     nullptr};
        found = true;
    });
    return found;
}

void small_release_context_locked(CUctx_st *c)
{
    for (Shard &sh : *g_shards) {
        std::vector<uintptr_t> back;
        {
            Lock lock(sh.m);
            std::vector<Slab *> slabs = sh.slabs;  // free_block may detach
            for (Slab *s : slabs) {
                for (uint32_t i = 0; s->cls >= 0 && i < s->bump; ++i) {
                    if (!s->rec[i].size || s->rec[i].ctx != c)
                        continue;
                    Record was;
                    if (uintptr_t b = free_block(sh, s, i, &was))
                        back.push_back(b);
                }
            }
        }
        for (uintptr_t b : back)
            give_back_locked(b);
    }
}

size_t small_reclaim_locked()
{
    size_t slabs = 0;
    for (Shard &sh : *g_shards) {
        std::vector<uintptr_t> back;
        {
            Lock lock(sh.m);
            std::vector<Slab *> all = sh.slabs;  // detach edits the list
            for (Slab *s : all) {
                if (s->live)
                    continue;
                std::vector<Slab *> &from = s->cls >= 0 ? sh.avail[s->cls] : sh.spare;
                from.erase(std::find(from.begin(), from.end(), s));
                back.push_back(detach(sh, s));
            }
        }
        for (uintptr_t b : back)
            give_back_locked(b);
        slabs += back.size();
    }
    return slabs;
}

void small_drain_credit_locked(int dev)
{
    g_tight[dev].store(true, std::memory_order_seq_cst);
    for (Shard &sh : *g_shards) {
        Lock lock(sh.m);
        uncharge(dev, sh.credit[dev]);
        sh.credit[dev] = 0;
    }
}

uint64_t used_locked(int dev)
{
    small_lock_all();
    uint64_t used = charged(dev);
    for (Shard &sh : *g_shards)
        used -= sh.credit[dev];
    small_unlock_all();
    return used;
}

void small_lock_all()
{
    for (Shard &sh : *g_shards)
        sh.m.lock();
}

void small_unlock_all()
{
    for (Shard &sh : *g_shards)
        sh.m.unlock();
}

}  // namespace simcuda
