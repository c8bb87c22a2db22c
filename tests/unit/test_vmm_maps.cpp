// common/model/vmm_maps.h: the VMM mappings in force, as map and unmap leave them.
#include <catch2/catch.hpp>

#include "common/model/vmm_maps.h"

using namespace torchseal;

namespace {
std::vector<std::vector<uint64_t>> rows(const VmmMapTable &t) {
  std::vector<std::vector<uint64_t>> out;
  for (const VmmMap &m : t.list()) out.push_back({m.va, m.size, m.handle});
  return out;
}
}  // namespace

TEST_CASE("maps are listed by address; unmaps remove them", "[vmm_maps]") {
  VmmMapTable t;
  t.apply(Op::Map, 0x400000, 0x200000, 9);
  t.apply(Op::Map, 0x200000, 0x200000, 7);
  t.apply(Op::Reserve, 0x200000, 0x1000000, 0);  // reservations map nothing
  CHECK(rows(t) == std::vector<std::vector<uint64_t>>{{0x200000, 0x200000, 7},
                                                       {0x400000, 0x200000, 9}});
  t.apply(Op::Unmap, 0x200000, 0x200000, 0);
  CHECK(rows(t) == std::vector<std::vector<uint64_t>>{{0x400000, 0x200000, 9}});
  t.apply(Op::Unmap, 0x400000, 0x200000, 0);
  CHECK(t.list().empty());
}

TEST_CASE("an unmap of part of a mapping keeps the rest", "[vmm_maps]") {
  VmmMapTable t;
  t.apply(Op::Map, 0x100000, 0x300000, 5);
  t.apply(Op::Unmap, 0x200000, 0x100000, 0);  // the middle
  CHECK(rows(t) == std::vector<std::vector<uint64_t>>{{0x100000, 0x100000, 5},
                                                       {0x300000, 0x100000, 5}});
  t.apply(Op::Unmap, 0x80000, 0x100000, 0);  // the head, from below it
  CHECK(rows(t) == std::vector<std::vector<uint64_t>>{{0x180000, 0x80000, 5},
                                                       {0x300000, 0x100000, 5}});
}

TEST_CASE("a map over a mapping whose unmap was missed replaces it", "[vmm_maps]") {
  VmmMapTable t;
  t.apply(Op::Map, 0x200000, 0x200000, 7);
  t.apply(Op::Map, 0x300000, 0x200000, 8);
  CHECK(rows(t) == std::vector<std::vector<uint64_t>>{{0x200000, 0x100000, 7},
                                                       {0x300000, 0x200000, 8}});
  t.apply(Op::Map, 0x300000, 0, 9);  // an empty range changes nothing
  CHECK(t.list().size() == 2);
}
