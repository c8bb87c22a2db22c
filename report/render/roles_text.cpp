#include "report/render/roles_text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include "report/analysis/roles.h"

namespace torchseal {
namespace {

constexpr size_t kShownModules = 3;
constexpr size_t kShownHolders = 3;

std::string sized(uint64_t bytes) {
  auto [unit, scale] = role_unit(bytes);
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f %s", static_cast<double>(bytes) / scale, unit);
  return buf;
}

// Names come from the program (module types, holder chains): no line breaks.
std::string clean(std::string s) {
  for (char &c : s)
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  return s;
}

}  // namespace

std::string oom_role_lead(const OomEntry &oom) {
  if (oom.roles.roles.empty()) return {};
  auto [unit, scale] = role_unit(oom.roles.live_bytes);
  // Counting older memory, the split's total passes the OOM's tracked one.
  return "Out of memory asking " + sized(oom.requested_bytes) + " with " +
         sized(oom.roles.live_bytes) + " live" +
         (oom.roles.before_tracking ? " (memory from before tracking included)" : "") + ": " +
         clean(role_line(oom.roles, scale)) + " (" + unit + ")\n";
}

bool roles_before_tracking(const Report &r, bool recovered_ooms) {
  auto late = [](const RoleSplit &s) { return !s.roles.empty() && s.before_tracking; };
  if (late(r.roles) || late(r.peak_roles)) return true;
  return std::any_of(r.ooms.begin(), r.ooms.end(), [&](const OomEntry &o) {
    return (recovered_ooms || !o.recovered) && late(o.roles);
  });
}

std::string role_table(const RoleSplit &split, const std::string &title) {
  if (split.roles.empty()) return {};
  std::string out = "\nMemory by role " + title;
  if (split.step) out += " (step " + std::to_string(split.step) + ")";
  out += ", " + sized(split.live_bytes) + " live:\n";
  const double total = split.live_bytes ? static_cast<double>(split.live_bytes) : 1.0;
  char buf[160];
  for (const RoleEntry &e : split.roles) {
    if (!e.bytes) continue;
    std::snprintf(buf, sizeof buf, "  %-18s %12s %5.1f%%", e.role.c_str(), sized(e.bytes).c_str(),
                  100.0 * static_cast<double>(e.bytes) / total);
    out += buf;
    if (e.count)
      out += "  " + std::to_string(e.count) +
             (e.role == "library_held" || e.role == "outside_framework" ? " allocation(s)"
                                                                        : " tensor(s)");
    out += "\n";
    for (size_t k = 0; k < e.modules.size() && k < kShownModules; ++k)
      out += "      " + sized(e.modules[k].bytes) + " in " + clean(e.modules[k].name) + "\n";
    for (size_t k = 0; k < e.holders.size() && k < kShownHolders; ++k) {
      std::string chain;
      for (const std::string &step : e.holders[k].chain)
        chain += (chain.empty() ? "" : " -> ") + step;
      out += "      " + sized(e.holders[k].bytes) + " held by " + clean(chain) + "\n";
    }
  }
  return out;
}

}  // namespace torchseal
