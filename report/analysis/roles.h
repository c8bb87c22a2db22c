// Memory by role (docs/roles.md): what the live memory of a PyTorch process
// is for — parameters, buffers, gradients, optimizer state, activations saved
// for backward, tensors the program's own objects hold, the caching
// allocator's free cache, CUDA libraries' memory, and memory outside the
// framework.
//
// Two halves, so the shim keeps numbers and the report does the naming:
// role_snapshot() runs in the shim at each holder scan (no symbolization:
// a step scan must stay cheap), and split_roles() turns a snapshot into the
// report's split, deciding from each site's symbolized stack what the bytes
// no Python object reaches are.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "common/model/analysis_input.h"
#include "report/analysis/site.h"
#include "report/model/report_model.h"

namespace torchseal {

const char *role_name(MemoryRole r);  // "parameters", ..., "outside_framework"

// The live set (now.live, now.vmm_maps) and the scan that just ran
// (now.holders), as a snapshot taken `at` (step | dump | oom | exit).
// before_tracking: the live set starts at an interval's start or an attach,
// so storages in none of its allocations are memory from before it, counted
// by role in a site of their own (RoleSite's api Unknown).
RoleSnapshot role_snapshot(const AnalysisInput &now, const std::string &at, uint64_t step,
                           uint64_t time_ns, bool before_tracking = false);

// The report's split of a snapshot: every role in Role order, adding up to
// its live total. `detail` false gives the totals only (the per-step bars).
// in: the process facts (torch_process, torch_caching_allocator).
RoleSplit split_roles(const RoleSnapshot &snap, const AnalysisInput &in, SiteIds &sites,
                      bool library_held, bool detail = true);

// An OOM's split is taken at the first safe point after it, and PyTorch's
// allocator has released its free segments in between (its retry empties
// the cache): the bytes live at the OOM and gone by the scan were free
// cache (tensors mode: temporaries the unwinding freed, other_tensors).
// The split then adds up to the OOM's live total.
void align_to_oom(RoleSplit &split, uint64_t oom_live_bytes, bool caching_allocator);

// The unit a split is told in: GiB from 1 GiB of live memory, else MiB,
// else KiB ("GiB", 2^30).
std::pair<const char *, double> role_unit(uint64_t live_bytes);

// The split in one line: "parameters 12.4, gradients 12.4, ..., held by
// `cache` in train.py:88 1.9, free cache 0.6", in `unit` bytes, largest
// roles first, roles under 0.05 units left out.
std::string role_line(const RoleSplit &split, double unit);

}  // namespace torchseal
