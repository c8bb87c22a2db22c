// rank_leaks: one process of a multi-rank job (run it under `mpirun -np N`;
// it needs no MPI library, it reads its rank from the launcher's
// environment: OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID or RANK).
//
// Every rank leaks the same 1 MiB at leak_on_every_rank(); rank 2 also
// leaks 512 KiB at leak_on_rank_two_only(). `torchseal merge` must give the
// first site all ranks (uniform) and the second rank 2 only.
//
// EXPECT: exit 0

#include "common.h"

#include <cstdlib>

namespace {
constexpr size_t kEveryRank = 1 << 20;
constexpr size_t kRankTwo = 512 << 10;

int rank_from_env() {
  for (const char *name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"}) {
    if (const char *v = std::getenv(name); v && *v) return std::atoi(v);
  }
  return 0;
}
}  // namespace

__attribute__((noinline)) void *leak_on_every_rank() {
  void *p = nullptr;
  CHECK(cudaMalloc(&p, kEveryRank));  // LEAK-SITE: every
  return p;
}

__attribute__((noinline)) void *leak_on_rank_two_only() {
  void *p = nullptr;
  CHECK(cudaMalloc(&p, kRankTwo));  // LEAK-SITE: rank2
  return p;
}

int main() {
  int rank = rank_from_env();
  leak_on_every_rank();
  if (rank == 2) leak_on_rank_two_only();
  std::printf("rank_leaks: rank %d done\n", rank);
  return 0;
}
