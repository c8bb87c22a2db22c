// Memory by role in the text report (docs/roles.md): the OOM's lead line and
// the table of a split.
#pragma once

#include <string>

#include "report/model/report_model.h"

namespace torchseal {

// "Out of memory asking 2.0 GiB with 78.1 GiB live: parameters 12.4, ...,
// free cache 0.6 (GiB)\n"; empty without a split.
std::string oom_role_lead(const OomEntry &oom);

// "\nMemory by role <title> (N GiB live):\n" and a line per role with
// bytes, share and count, then its largest modules or holders; empty
// without a split.
std::string role_table(const RoleSplit &split, const std::string &title);

// What a split taken after an attach or an interval's start counts of the
// memory from before tracking, said under the splits in text and HTML when
// one they show was (roles_before_tracking): the shim knows the tracked
// time's allocations only; the scan finds the tensors Python objects hold in
// the older ones, and PyTorch's reserved count the rest of its cache.
// Broken into lines for the text report.
inline constexpr const char *kRolesSinceStart =
    "Memory from before tracking started (torchseal.start() or the attach) is in\n"
    "the split as the tensors Python objects hold and, with PyTorch's caching\n"
    "allocator, the rest of its cache; other older memory is not.";

// Whether a split the report shows (its scan's, the peak's, an OOM's; a
// recovered OOM's only with recovered_ooms: the text shows them, the HTML
// does not) was taken after tracking began late.
bool roles_before_tracking(const Report &r, bool recovered_ooms);

}  // namespace torchseal
