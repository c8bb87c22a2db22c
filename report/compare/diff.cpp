#include "report/compare/diff.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "report/analysis/site_match.h"
#include "report/render/site_json.h"

namespace torchseal {
namespace {

using ojson = nlohmann::ordered_json;

std::string device_extra(int d) { return "device=" + std::to_string(d); }

int status_rank(DiffStatus s) {
  switch (s) {
    case DiffStatus::New:
      return 0;
    case DiffStatus::Grown:
      return 1;
    case DiffStatus::Shrunk:
      return 2;
    case DiffStatus::Gone:
      return 3;
    default:
      return 4;
  }
}

std::string signed_bytes(int64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+" PRId64, v);
  return buf;
}

// Matches the sites of A and B (by `view`) and returns the changed ones:
// B's in order, new or grown/shrunk by `size`, then A's unmatched ones
// (gone). `make(status, a_entry, b_entry)` builds a delta from the entries
// present (a null pointer for the side without the site); the unchanged
// sites are only counted.
template <class Delta, class Entry, class View, class Size, class Make>
std::vector<Delta> changed_sites(const std::vector<Entry> &a, const std::vector<Entry> &b,
                                 View view, Size size, Make make, size_t &unchanged) {
  std::vector<SiteView> va, vb;
  for (const Entry &e : a) va.push_back(view(e));
  for (const Entry &e : b) vb.push_back(view(e));
  std::vector<long> m = match_sites(va, vb);
  std::vector<bool> a_matched(a.size(), false);
  std::vector<Delta> out;
  for (size_t j = 0; j < b.size(); ++j) {
    const Entry *ea = m[j] >= 0 ? &a[size_t(m[j])] : nullptr;
    DiffStatus status = DiffStatus::New;
    if (ea) {
      a_matched[size_t(m[j])] = true;
      status = size(b[j]) > size(*ea)   ? DiffStatus::Grown
               : size(b[j]) < size(*ea) ? DiffStatus::Shrunk
                                        : DiffStatus::Same;
    }
    if (status == DiffStatus::Same) {
      ++unchanged;
    } else {
      out.push_back(make(status, ea, &b[j]));
    }
  }
  for (size_t i = 0; i < a.size(); ++i) {
    if (!a_matched[i]) out.push_back(make(DiffStatus::Gone, &a[i], nullptr));
  }
  return out;
}

// The keys every delta starts with.
template <class Delta>
void put_head(ojson &e, const Delta &x) {
  e["status"] = diff_status_name(x.status);
  e["kind"] = x.kind;
  e["api"] = x.api;
}

}  // namespace

const char *diff_status_name(DiffStatus s) {
  switch (s) {
    case DiffStatus::New:
      return "new";
    case DiffStatus::Gone:
      return "gone";
    case DiffStatus::Grown:
      return "grown";
    case DiffStatus::Shrunk:
      return "shrunk";
    case DiffStatus::Same:
      return "same";
  }
  return "same";
}

ReportDiff diff_reports(const Report &a, const Report &b) {
  ReportDiff d;
  d.leaked_bytes_a = a.summary.leaked_bytes;
  d.leaked_bytes_b = b.summary.leaked_bytes;
  d.leak_sites_a = a.leaks.size();
  d.leak_sites_b = b.leaks.size();

  // ---- leaks ----
  d.leaks = changed_sites<LeakDelta>(
      a.leaks, b.leaks, [](const LeakEntry &e) { return site_view(e, device_extra(e.device)); },
      [](const LeakEntry &e) { return e.bytes; },
      [](DiffStatus status, const LeakEntry *ea, const LeakEntry *eb) {
        const LeakEntry &e = eb ? *eb : *ea;  // B's site when it has one
        return LeakDelta{status,
                         e.kind,
                         e.api,
                         e.device,
                         ea ? ea->bytes : 0,
                         eb ? eb->bytes : 0,
                         ea ? ea->allocations : 0,
                         eb ? eb->allocations : 0,
                         e.frames,
                         e.python_frames};
      },
      d.unchanged_leak_sites);
  std::stable_sort(d.leaks.begin(), d.leaks.end(), [](const LeakDelta &x, const LeakDelta &y) {
    if (status_rank(x.status) != status_rank(y.status)) {
      return status_rank(x.status) < status_rank(y.status);
    }
    return std::llabs(int64_t(x.bytes_b - x.bytes_a)) > std::llabs(int64_t(y.bytes_b - y.bytes_a));
  });

  // ---- growth: compare rates ----
  d.growth = changed_sites<GrowthDelta>(
      a.growth, b.growth, [](const GrowthEntry &e) { return site_view(e); },
      [](const GrowthEntry &e) { return e.bytes_per_step; },
      [](DiffStatus status, const GrowthEntry *ea, const GrowthEntry *eb) {
        const GrowthEntry &e = eb ? *eb : *ea;
        return GrowthDelta{status,
                           e.kind,
                           e.api,
                           ea ? ea->bytes_per_step : 0,
                           eb ? eb->bytes_per_step : 0,
                           ea ? ea->growth_bytes : 0,
                           eb ? eb->growth_bytes : 0,
                           e.frames,
                           e.python_frames};
      },
      d.unchanged_growth_sites);
  std::stable_sort(d.growth.begin(), d.growth.end(),
                   [](const GrowthDelta &x, const GrowthDelta &y) {
                     return status_rank(x.status) < status_rank(y.status);
                   });
  return d;
}

std::string diff_to_text(const ReportDiff &d) {
  std::string out = "torchseal diff: " + d.path_a + " -> " + d.path_b + "\n";
  out += "  leaked bytes: " + std::to_string(d.leaked_bytes_a) + " -> " +
         std::to_string(d.leaked_bytes_b) + " (" +
         signed_bytes(int64_t(d.leaked_bytes_b) - int64_t(d.leaked_bytes_a)) +
         "); leak sites: " + std::to_string(d.leak_sites_a) + " -> " +
         std::to_string(d.leak_sites_b) + "\n";
  if (d.leaks.empty() && d.growth.empty()) {
    out += "  no changed sites\n";
    return out;
  }
  char buf[256];
  for (const LeakDelta &x : d.leaks) {
    std::snprintf(buf, sizeof buf,
                  "  %-6s leak   %+14" PRId64 " B  %6" PRIu64 " -> %-6" PRIu64 " alloc  %s %s: ",
                  diff_status_name(x.status), int64_t(x.bytes_b) - int64_t(x.bytes_a),
                  x.allocations_a, x.allocations_b, x.kind.c_str(), x.api.c_str());
    out += buf + site_label(x.frames, x.python_frames) + "\n";
  }
  for (const GrowthDelta &x : d.growth) {
    std::snprintf(buf, sizeof buf, "  %-6s growth %+12.1f B/step (%.1f -> %.1f)  %s %s: ",
                  diff_status_name(x.status), x.bytes_per_step_b - x.bytes_per_step_a,
                  x.bytes_per_step_a, x.bytes_per_step_b, x.kind.c_str(), x.api.c_str());
    out += buf + site_label(x.frames, x.python_frames) + "\n";
  }
  out += "  unchanged: " + std::to_string(d.unchanged_leak_sites) + " leak site(s), " +
         std::to_string(d.unchanged_growth_sites) + " growth site(s)\n";
  return out;
}

std::string diff_to_json(const ReportDiff &d) {
  ojson j;
  j["format"] = "torchseal-diff";
  j["version"] = 1;
  j["a"] = {{"path", d.path_a}, {"leaked_bytes", d.leaked_bytes_a}, {"leak_sites", d.leak_sites_a}};
  j["b"] = {{"path", d.path_b}, {"leaked_bytes", d.leaked_bytes_b}, {"leak_sites", d.leak_sites_b}};
  j["leaks"] = entries_json(d.leaks, [](ojson &e, const LeakDelta &x) {
    put_head(e, x);
    e["device"] = x.device < 0 ? ojson(nullptr) : ojson(x.device);
    e["bytes_a"] = x.bytes_a;
    e["bytes_b"] = x.bytes_b;
    e["bytes_delta"] = int64_t(x.bytes_b) - int64_t(x.bytes_a);
    e["allocations_a"] = x.allocations_a;
    e["allocations_b"] = x.allocations_b;
    put_stacks(e, x, FrameAddress::None);
  });
  j["growth"] = entries_json(d.growth, [](ojson &e, const GrowthDelta &x) {
    put_head(e, x);
    e["bytes_per_step_a"] = x.bytes_per_step_a;
    e["bytes_per_step_b"] = x.bytes_per_step_b;
    e["bytes_per_step_delta"] = x.bytes_per_step_b - x.bytes_per_step_a;
    e["growth_bytes_a"] = x.growth_bytes_a;
    e["growth_bytes_b"] = x.growth_bytes_b;
    put_stacks(e, x, FrameAddress::None);
  });
  j["unchanged"] = {{"leak_sites", d.unchanged_leak_sites},
                    {"growth_sites", d.unchanged_growth_sites}};
  return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

}  // namespace torchseal
