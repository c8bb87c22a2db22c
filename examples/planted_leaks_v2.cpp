// planted_leaks_v2: planted_leaks "after a code change" that adds one leak
// site; the CI-gate tests (tests/gate) check that a baseline taken from
// planted_leaks flags exactly this new site, and that `torchseal diff`
// between the two builds shows only it.
//
// The original program is included unchanged, so its three sites keep their
// file, lines and callers, as they would in a real rebuild. The new leak runs
// from a constructor (before main), which leaves main's stacks untouched.
//
// EXPECT: leaks 4
// EXPECT: leak site=workspace kind=device api=cudaMalloc bytes=2097152 allocations=1 function=leak_new_workspace
// EXPECT: exit 0

#include "planted_leaks.cpp"

namespace {
constexpr size_t kWorkspaceLeak = 2 << 20;  // 2 MiB
}  // namespace

__attribute__((noinline)) void *leak_new_workspace() {
  void *p = nullptr;
  CHECK(cudaMalloc(&p, kWorkspaceLeak));  // LEAK-SITE: workspace
  return p;
}

__attribute__((constructor, noinline)) static void plant_new_leak() { leak_new_workspace(); }
