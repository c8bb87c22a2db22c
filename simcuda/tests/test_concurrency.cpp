// Device allocations from many threads at once: the sharded small-block path
// (driver/small_blocks.cpp) must keep every single-threaded guarantee, with
// frees from other threads, bad frees, exact capacity and context teardown.
//
// Worker threads use no Catch2 macro (they are not thread safe); they count
// failures for the main thread to check.
//
// Each thread keeps its own allocator shard as long as the process has made
// fewer threads than there are shards, which the double-free checks rely on
// (no other thread can be handed the freed block in between); these groups
// run in processes of their own and make far fewer.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "test_support.h"

namespace {

constexpr int kThreads = 8;

struct Block {
    CUdeviceptr p;
    size_t n;
};

// Writes a stamp derived from the block's address and size at both ends
// (once if they would overlap), so a block that overlapped another one reads
// back wrong.
uint64_t stamp(const Block &b) { return b.p * 0x9E3779B97F4A7C15ull ^ b.n; }

CUdeviceptr tail_of(const Block &b) { return b.n < 16 ? b.p : b.p + b.n - 8; }

bool write_stamp(const Block &b)
{
    uint64_t s = stamp(b);
    size_t len = b.n < sizeof s ? b.n : sizeof s;
    return cuMemcpyHtoD(b.p, &s, len) == CUDA_SUCCESS &&
           cuMemcpyHtoD(tail_of(b), &s, len) == CUDA_SUCCESS;
}

bool check_stamp(const Block &b)
{
    uint64_t s = stamp(b), head = 0, tail = 0;
    size_t len = b.n < sizeof s ? b.n : sizeof s;
    if (cuMemcpyDtoH(&head, b.p, len) != CUDA_SUCCESS ||
        cuMemcpyDtoH(&tail, tail_of(b), len) != CUDA_SUCCESS)
        return false;
    uint64_t want = 0;
    std::memcpy(&want, &s, len);
    return head == want && tail == want;
}

// Mostly small sizes (the sharded path) of every class, some just above
// kSmallMax (the locked path) so both run side by side.
size_t pick_size(uint64_t &rng)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    uint64_t r = rng >> 33;
    switch (r % 16) {
    case 0: return 1 + r % 16;
    case 1: return (size_t(1) << 20) + 1 + r % 4096;  // large
    case 2: return 65536 + r % (size_t(1) << 20);      // up to the largest small class
    default: return 1 + r % 8192;
    }
}

// Whether the last block is small and another small one lives in its slab.
bool sibling(const std::vector<Block> &v)
{
    const Block &x = v.back();
    if (x.n > kMiB)
        return false;
    for (size_t i = 0; i + 1 < v.size(); ++i)
        if (v[i].n <= kMiB && v[i].p / (2 * kMiB) == x.p / (2 * kMiB))
            return true;
    return false;
}

struct Mailbox {
    std::mutex m;
    std::vector<Block> blocks;
};

}  // namespace

TEST_CASE("8 threads: cross-thread frees, bad frees, queries, exact accounting", "[concurrency]")
{
    CUcontext ctx = sim_primary_context();
    size_t free0, total;
    REQUIRE(cuMemGetInfo(&free0, &total) == CUDA_SUCCESS);
    Mailbox boxes[kThreads];
    std::atomic<int> failures{0}, first_line{0};
    std::atomic<int> done{0};
    auto expect = [&](bool ok, int line) {
        if (!ok && failures.fetch_add(1) == 0)
            first_line = line;
    };
#define fail(ok) expect((ok), __LINE__)
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
        threads.emplace_back([&, t] {
            cuCtxSetCurrent(ctx);
            // Every block freed is checked for intact stamps first.
            auto free_all = [&](const std::vector<Block> &blocks) {
                for (const Block &b : blocks) {
                    fail(check_stamp(b));
                    fail(cuMemFree(b.p) == CUDA_SUCCESS);
                }
            };
            // Frees what other threads handed to this one.
            auto drain_box = [&] {
                std::vector<Block> got;
                {
                    std::lock_guard<std::mutex> lock(boxes[t].m);
                    got.swap(boxes[t].blocks);
                }
                free_all(got);
            };
            uint64_t rng = uint64_t(t) + 1;
            std::vector<Block> mine;
            for (int i = 0; i < 4000; ++i) {
                Block b{0, pick_size(rng)};
                if (cuMemAlloc(&b.p, b.n) != CUDA_SUCCESS) {
                    fail(false);
                    continue;
                }
                fail(b.p % 512 == 0);
                fail(write_stamp(b));
                CUdeviceptr base = 0;
                size_t size = 0;
                fail(cuMemGetAddressRange(&base, &size, b.p + b.n - 1) == CUDA_SUCCESS &&
                     base == b.p && size == b.n);
                CUcontext owner = nullptr;
                fail(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, b.p) ==
                         CUDA_SUCCESS && owner == ctx);
                if (b.n >= 1024)  // inside a live block: never a block start
                    fail(cuMemFree(b.p + 512) == CUDA_ERROR_INVALID_VALUE);
                mine.push_back(b);
                if (i % 3 == 0) {  // hand one to the next thread to free
                    Block give = mine[mine.size() / 2];
                    mine.erase(mine.begin() + long(mine.size() / 2));
                    std::lock_guard<std::mutex> lock(boxes[(t + 1) % kThreads].m);
                    boxes[(t + 1) % kThreads].blocks.push_back(give);
                } else if (i % 3 == 1 && mine.size() > 1 && sibling(mine)) {
                    // Double free. A live small block in the same 2 MiB slab
                    // keeps the slab, so the freed block can only be handed
                    // out again by this thread's shard, i.e. not in between.
                    Block x = mine.back();
                    mine.pop_back();
                    fail(check_stamp(x));
                    fail(cuMemFree(x.p) == CUDA_SUCCESS);
                    fail(cuMemFree(x.p) == CUDA_ERROR_INVALID_VALUE);
                }
                drain_box();
                if (mine.size() > 64) {
                    free_all(mine);
                    mine.clear();
                }
            }
            free_all(mine);
            done.fetch_add(1);
            // Drain until every thread stopped giving.
            for (;;) {
                bool last = done.load() == kThreads;
                drain_box();
                if (last)
                    break;
                std::this_thread::yield();
            }
        });
    }
#undef fail
    for (auto &th : threads)
        th.join();
    INFO("first failed check at line " << first_line.load());
    CHECK(failures.load() == 0);
    size_t free1;
    REQUIRE(cuMemGetInfo(&free1, &total) == CUDA_SUCCESS);
    CHECK(free1 == free0);
    CHECK(cuMemFree(0x1000) == CUDA_ERROR_INVALID_VALUE);  // not a device pointer
}

TEST_CASE("destroying a context while it and others allocate", "[concurrency]")
{
    CUcontext prim = sim_primary_context();
    size_t free0, total;
    REQUIRE(cuMemGetInfo(&free0, &total) == CUDA_SUCCESS);
    for (int round = 0; round < 20; ++round) {
        CUcontext doomed;
        REQUIRE(cuCtxCreate(&doomed, nullptr, 0, 0) == CUDA_SUCCESS);
        REQUIRE(cuCtxSetCurrent(prim) == CUDA_SUCCESS);
        std::atomic<bool> stop{false};
        std::atomic<int> failures{0};
        std::atomic<int> ready{0};
        std::vector<std::vector<CUdeviceptr>> in_doomed(4);
        std::vector<std::thread> threads;
        // Threads in the doomed context allocate until it is gone; none may
        // succeed after the destroy returns, and none may be left behind.
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&, t] {
                if (cuCtxSetCurrent(doomed) != CUDA_SUCCESS)
                    failures.fetch_add(1);
                ready.fetch_add(1);
                for (size_t i = 0;; ++i) {
                    CUdeviceptr p;
                    CUresult r = cuMemAlloc(&p, 1 + (i * 97 + size_t(t)) % 6000);
                    if (r == CUDA_SUCCESS) {
                        in_doomed[t].push_back(p);
                        continue;
                    }
                    if (r != CUDA_ERROR_CONTEXT_IS_DESTROYED)
                        failures.fetch_add(1);
                    break;
                }
            });
        }
        // Others keep allocating and freeing in the primary context.
        for (int t = 0; t < 3; ++t) {
            threads.emplace_back([&, t] {
                cuCtxSetCurrent(prim);
                while (!stop.load()) {
                    CUdeviceptr p;
                    if (cuMemAlloc(&p, 256 + size_t(t)) != CUDA_SUCCESS ||
                        cuMemFree(p) != CUDA_SUCCESS)
                        failures.fetch_add(1);
                }
            });
        }
        while (ready.load() < 4)
            std::this_thread::yield();
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        CHECK(cuCtxDestroy(doomed) == CUDA_SUCCESS);
        for (int t = 0; t < 4; ++t)
            threads[size_t(t)].join();
        stop = true;
        for (size_t t = 4; t < threads.size(); ++t)
            threads[t].join();
        CHECK(failures.load() == 0);
        for (auto &v : in_doomed) {
            for (CUdeviceptr p : v) {
                // Gone, or by now another context's block at that address.
                CUcontext owner = nullptr;
                if (cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, p) == CUDA_SUCCESS)
                    CHECK(owner != doomed);
            }
        }
        size_t free1;
        REQUIRE(cuMemGetInfo(&free1, &total) == CUDA_SUCCESS);
        CHECK(free1 == free0);
    }
}

TEST_CASE("8 threads fill the device exactly, then free it across threads",
          "[.concurrency-capacity]")
{
    CUcontext ctx = sim_primary_context();
    size_t free0, total;
    REQUIRE(cuMemGetInfo(&free0, &total) == CUDA_SUCCESS);
    REQUIRE(free0 == total);
    REQUIRE(total == 8 * kMiB);
    {
        // Threads that allocated and freed leave their shards holding
        // capacity they no longer use; it must still be all free, and all of
        // it available to one allocation.
        std::atomic<int> failures{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&] {
                CUdeviceptr p;
                if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS || cuMemAlloc(&p, 700) != CUDA_SUCCESS ||
                    cuMemFree(p) != CUDA_SUCCESS)
                    failures.fetch_add(1);
            });
        }
        for (auto &th : threads)
            th.join();
        CHECK(failures.load() == 0);
        size_t free_now;
        REQUIRE(cuMemGetInfo(&free_now, &total) == CUDA_SUCCESS);
        CHECK(free_now == total);
        CUdeviceptr all, one;
        REQUIRE(cuMemAlloc(&all, total) == CUDA_SUCCESS);
        CHECK(cuMemAlloc(&one, 1) == CUDA_ERROR_OUT_OF_MEMORY);
        REQUIRE(cuMemGetInfo(&free_now, &total) == CUDA_SUCCESS);
        CHECK(free_now == 0);
        REQUIRE(cuMemFree(all) == CUDA_SUCCESS);
        REQUIRE(cuMemAlloc(&one, 1) == CUDA_SUCCESS);
        REQUIRE(cuMemFree(one) == CUDA_SUCCESS);
    }
    for (int round = 0; round < 5; ++round) {
        std::vector<std::vector<Block>> held(kThreads);
        std::vector<size_t> charged(kThreads, 0);
        std::atomic<int> failures{0};
        std::atomic<int> filled{0};
        std::vector<std::thread> threads;
        for (int t = 0; t < kThreads; ++t) {
            threads.emplace_back([&, t] {
                if (cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
                    failures.fetch_add(1);
                uint64_t rng = uint64_t(t) * 7 + uint64_t(round) + 1;
                // Random sizes (small and large) until one fails, then the
                // smallest charge until even that fails: the device is full.
                for (;;) {
                    Block b{0, pick_size(rng)};
                    CUresult r = cuMemAlloc(&b.p, b.n);
                    if (r == CUDA_ERROR_OUT_OF_MEMORY)
                        break;
                    if (r != CUDA_SUCCESS) {
                        failures.fetch_add(1);
                        break;
                    }
                    held[t].push_back(b);
                    charged[t] += (b.n + 511) / 512 * 512;
                }
                for (;;) {
                    Block b{0, 1 + size_t(t)};
                    CUresult r = cuMemAlloc(&b.p, b.n);
                    if (r == CUDA_ERROR_OUT_OF_MEMORY)
                        break;
                    if (r != CUDA_SUCCESS) {
                        failures.fetch_add(1);
                        break;
                    }
                    held[t].push_back(b);
                    charged[t] += 512;
                }
                filled.fetch_add(1);
                while (filled.load() < kThreads)
                    std::this_thread::yield();
                // Everyone is full: the next thread's blocks are freed here.
                size_t free_now = 1, tot = 0;
                if (cuMemGetInfo(&free_now, &tot) != CUDA_SUCCESS || free_now != 0)
                    failures.fetch_add(1);
                filled.fetch_add(1);
                while (filled.load() < 2 * kThreads)
                    std::this_thread::yield();
                for (const Block &b : held[(t + 1) % kThreads]) {
                    if (cuMemFree(b.p) != CUDA_SUCCESS)
                        failures.fetch_add(1);
                    if (cuMemFree(b.p + 1) != CUDA_ERROR_INVALID_VALUE)
                        failures.fetch_add(1);
                }
            });
        }
        for (auto &th : threads)
            th.join();
        CHECK(failures.load() == 0);
        size_t sum = 0;
        for (size_t c : charged)
            sum += c;
        CHECK(sum == total);
        size_t free1;
        REQUIRE(cuMemGetInfo(&free1, &total) == CUDA_SUCCESS);
        CHECK(free1 == total);
    }
}
