// Guarded reads (shim/core/python/raw_read.h): another thread's frames and
// thread state can be freed while the shim reads them; a read of memory that
// is gone must fail, never fault, and a guarded walk must stop there.
#include <catch2/catch.hpp>

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

#include "shim/core/python/raw_read.h"

using namespace torchseal::py;

namespace {
struct Page {
  size_t size = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  uintptr_t addr() const { return reinterpret_cast<uintptr_t>(p); }
};
}  // namespace

TEST_CASE("a guarded read copies mapped memory and refuses unmapped memory") {
  Page page;
  REQUIRE(page.p != MAP_FAILED);
  const uint64_t value = 0x1122334455667788ULL;
  std::memcpy(page.p, &value, sizeof value);
  uint64_t got = 0;
  REQUIRE(read_guarded(&got, page.addr(), sizeof got));
  CHECK(got == value);

  munmap(page.p, page.size);  // what a thread's exit does to its frames' chunk
  got = 0;
  CHECK_FALSE(read_guarded(&got, page.addr(), sizeof got));
  CHECK_FALSE(read_guarded(&got, 8, sizeof got));  // a small tag, not a pointer
}

TEST_CASE("GuardedRead gives 0 after the first failed read, and says so") {
  Page page;
  REQUIRE(page.p != MAP_FAILED);
  const uintptr_t next = page.addr();
  std::memcpy(page.p, &next, sizeof next);  // a list that points at itself
  GuardedRead read;
  CHECK(read.ptr(page.addr()) == next);
  CHECK_FALSE(read.failed());
  munmap(page.p, page.size);
  CHECK(read.ptr(page.addr()) == 0);
  CHECK(read.failed());
  CHECK(read.get<uint32_t>(reinterpret_cast<uintptr_t>(&next)) == 0);  // sticky
}

TEST_CASE("DirectRead is a plain load") {
  const uint32_t v = 7;
  DirectRead read;
  CHECK(read.get<uint32_t>(reinterpret_cast<uintptr_t>(&v)) == 7);
  CHECK_FALSE(read.failed());
}
