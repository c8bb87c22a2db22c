#include "report/compare/diff.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "report/analysis/site_match.h"

namespace torchseal {
namespace {

using ojson = nlohmann::ordered_json;

std::string device_extra(int d) { return "device=" + std::to_string(d); }

int status_rank(DiffStatus s) {
  switch (s) {
    case DiffStatus::New: return 0;
    case DiffStatus::Grown: return 1;
    case DiffStatus::Shrunk: return 2;
    case DiffStatus::Gone: return 3;
    default: return 4;
  }
}

std::string signed_bytes(int64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%+" PRId64, v);
  return buf;
}

ojson frames_json(const std::vector<NativeFrame> &frames) {
  ojson a = ojson::array();
  for (const NativeFrame &f : frames) {
    a.push_back({{"function", f.function.empty() ? ojson(nullptr) : ojson(f.function)},
                 {"file", f.file.empty() ? ojson(nullptr) : ojson(f.file)},
                 {"line", f.line > 0 ? ojson(f.line) : ojson(nullptr)},
                 {"module", f.module.empty() ? ojson(nullptr) : ojson(f.module)}});
  }
  return a;
}

ojson python_json(const std::vector<PythonFrame> &frames) {
  ojson a = ojson::array();
  for (const PythonFrame &f : frames) {
    a.push_back({{"function", f.function}, {"file", f.file}, {"line", f.line}});
  }
  return a;
}

}  // namespace

const char *diff_status_name(DiffStatus s) {
  switch (s) {
    case DiffStatus::New: return "new";
    case DiffStatus::Gone: return "gone";
    case DiffStatus::Grown: return "grown";
    case DiffStatus::Shrunk: return "shrunk";
    case DiffStatus::Same: return "same";
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
  std::vector<SiteView> va, vb;
  for (const LeakEntry &e : a.leaks) va.push_back(site_view(e, device_extra(e.device)));
  for (const LeakEntry &e : b.leaks) vb.push_back(site_view(e, device_extra(e.device)));
  std::vector<long> m = match_sites(va, vb);
  std::vector<bool> a_matched(a.leaks.size(), false);
  for (size_t j = 0; j < b.leaks.size(); ++j) {
    const LeakEntry &eb = b.leaks[j];
    LeakDelta x{DiffStatus::New, eb.kind, eb.api, eb.device, 0, eb.bytes, 0, eb.allocations,
                eb.frames, eb.python_frames};
    if (m[j] >= 0) {
      const LeakEntry &ea = a.leaks[size_t(m[j])];
      a_matched[size_t(m[j])] = true;
      x.bytes_a = ea.bytes;
      x.allocations_a = ea.allocations;
      x.status = eb.bytes > ea.bytes   ? DiffStatus::Grown
                 : eb.bytes < ea.bytes ? DiffStatus::Shrunk
                                       : DiffStatus::Same;
    }
    if (x.status == DiffStatus::Same) {
      ++d.unchanged_leak_sites;
    } else {
      d.leaks.push_back(std::move(x));
    }
  }
  for (size_t i = 0; i < a.leaks.size(); ++i) {
    if (a_matched[i]) continue;
    const LeakEntry &ea = a.leaks[i];
    d.leaks.push_back({DiffStatus::Gone, ea.kind, ea.api, ea.device, ea.bytes, 0, ea.allocations, 0,
                       ea.frames, ea.python_frames});
  }
  std::stable_sort(d.leaks.begin(), d.leaks.end(), [](const LeakDelta &x, const LeakDelta &y) {
    if (status_rank(x.status) != status_rank(y.status)) {
      return status_rank(x.status) < status_rank(y.status);
    }
    return std::llabs(int64_t(x.bytes_b - x.bytes_a)) > std::llabs(int64_t(y.bytes_b - y.bytes_a));
  });

  // ---- growth: compare rates ----
  std::vector<SiteView> ga, gb;
  for (const GrowthEntry &e : a.growth) ga.push_back(site_view(e));
  for (const GrowthEntry &e : b.growth) gb.push_back(site_view(e));
  std::vector<long> gm = match_sites(ga, gb);
  std::vector<bool> ga_matched(a.growth.size(), false);
  for (size_t j = 0; j < b.growth.size(); ++j) {
    const GrowthEntry &eb = b.growth[j];
    GrowthDelta x{DiffStatus::New, eb.kind, eb.api, 0, eb.bytes_per_step, 0, eb.growth_bytes,
                  eb.frames, eb.python_frames};
    if (gm[j] >= 0) {
      const GrowthEntry &ea = a.growth[size_t(gm[j])];
      ga_matched[size_t(gm[j])] = true;
      x.bytes_per_step_a = ea.bytes_per_step;
      x.growth_bytes_a = ea.growth_bytes;
      x.status = eb.bytes_per_step > ea.bytes_per_step   ? DiffStatus::Grown
                 : eb.bytes_per_step < ea.bytes_per_step ? DiffStatus::Shrunk
                                                         : DiffStatus::Same;
    }
    if (x.status == DiffStatus::Same) {
      ++d.unchanged_growth_sites;
    } else {
      d.growth.push_back(std::move(x));
    }
  }
  for (size_t i = 0; i < a.growth.size(); ++i) {
    if (ga_matched[i]) continue;
    const GrowthEntry &ea = a.growth[i];
    d.growth.push_back({DiffStatus::Gone, ea.kind, ea.api, ea.bytes_per_step, 0, ea.growth_bytes, 0,
                        ea.frames, ea.python_frames});
  }
  std::stable_sort(d.growth.begin(), d.growth.end(), [](const GrowthDelta &x, const GrowthDelta &y) {
    return status_rank(x.status) < status_rank(y.status);
  });
  return d;
}

std::string diff_to_text(const ReportDiff &d) {
  std::string out = "torchseal diff: " + d.path_a + " -> " + d.path_b + "\n";
  out += "  leaked bytes: " + std::to_string(d.leaked_bytes_a) + " -> " +
         std::to_string(d.leaked_bytes_b) + " (" +
         signed_bytes(int64_t(d.leaked_bytes_b) - int64_t(d.leaked_bytes_a)) + "); leak sites: " +
         std::to_string(d.leak_sites_a) + " -> " + std::to_string(d.leak_sites_b) + "\n";
  if (d.leaks.empty() && d.growth.empty()) {
    out += "  no changed sites\n";
    return out;
  }
  char buf[256];
  for (const LeakDelta &x : d.leaks) {
    std::snprintf(buf, sizeof buf, "  %-6s leak   %+14" PRId64 " B  %6" PRIu64 " -> %-6" PRIu64
                  " alloc  %s %s: ",
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
  ojson leaks = ojson::array();
  for (const LeakDelta &x : d.leaks) {
    ojson e;
    e["status"] = diff_status_name(x.status);
    e["kind"] = x.kind;
    e["api"] = x.api;
    e["device"] = x.device < 0 ? ojson(nullptr) : ojson(x.device);
    e["bytes_a"] = x.bytes_a;
    e["bytes_b"] = x.bytes_b;
    e["bytes_delta"] = int64_t(x.bytes_b) - int64_t(x.bytes_a);
    e["allocations_a"] = x.allocations_a;
    e["allocations_b"] = x.allocations_b;
    e["frames"] = frames_json(x.frames);
    e["python_frames"] = python_json(x.python_frames);
    leaks.push_back(std::move(e));
  }
  j["leaks"] = std::move(leaks);
  ojson growth = ojson::array();
  for (const GrowthDelta &x : d.growth) {
    ojson e;
    e["status"] = diff_status_name(x.status);
    e["kind"] = x.kind;
    e["api"] = x.api;
    e["bytes_per_step_a"] = x.bytes_per_step_a;
    e["bytes_per_step_b"] = x.bytes_per_step_b;
    e["bytes_per_step_delta"] = x.bytes_per_step_b - x.bytes_per_step_a;
    e["growth_bytes_a"] = x.growth_bytes_a;
    e["growth_bytes_b"] = x.growth_bytes_b;
    e["frames"] = frames_json(x.frames);
    e["python_frames"] = python_json(x.python_frames);
    growth.push_back(std::move(e));
  }
  j["growth"] = std::move(growth);
  j["unchanged"] = {{"leak_sites", d.unchanged_leak_sites}, {"growth_sites", d.unchanged_growth_sites}};
  return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

}  // namespace torchseal
