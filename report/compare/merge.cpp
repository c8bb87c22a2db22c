#include "report/compare/merge.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <numeric>

#include "report/analysis/site_match.h"
#include "report/render/report_json.h"

namespace torchseal {
namespace {

using ojson = nlohmann::ordered_json;

std::vector<std::string> rank_labels(const std::vector<Report> &in) {
  std::map<int64_t, size_t> per_rank;
  for (const Report &r : in) {
    if (r.process.rank >= 0) ++per_rank[r.process.rank];
  }
  std::vector<std::string> out;
  for (const Report &r : in) {
    std::string pid = "pid:" + std::to_string(r.process.pid);
    if (r.process.rank < 0) {
      out.push_back(pid);
    } else if (per_rank[r.process.rank] > 1) {
      out.push_back(std::to_string(r.process.rank) + "/" + pid);
    } else {
      out.push_back(std::to_string(r.process.rank));
    }
  }
  return out;
}

std::string leak_extra(const LeakEntry &e) {
  return "device=" + std::to_string(e.device) + ";at=" + e.detected_at;
}

// Uniform: present on every input with the same numbers.
bool uniform(const std::map<std::string, RankShare> &ranks, size_t inputs) {
  if (ranks.size() != inputs) return false;
  const RankShare &first = ranks.begin()->second;
  return std::all_of(ranks.begin(), ranks.end(), [&](const auto &kv) {
    return kv.second.bytes == first.bytes && kv.second.allocations == first.allocations &&
           kv.second.bytes_per_step == first.bytes_per_step;
  });
}

template <class T>
void permute(std::vector<T> &v, const std::vector<size_t> &order) {
  std::vector<T> out;
  out.reserve(v.size());
  for (size_t i : order) out.push_back(std::move(v[i]));
  v = std::move(out);
}

std::string join_keys(const std::map<std::string, RankShare> &m) {
  std::string s;
  for (const auto &kv : m) s += (s.empty() ? "" : ",") + kv.first;
  return s;
}

// Adds "ranks" ({label: share(s)}) and "uniform" to each of `entries`.
template <class Share>
void add_ranks(ojson &entries, const std::vector<std::map<std::string, RankShare>> &ranks,
               const std::vector<bool> &uniform, Share share) {
  for (size_t i = 0; i < ranks.size(); ++i) {
    ojson by_label = ojson::object();
    for (const auto &[label, s] : ranks[i]) by_label[label] = share(s);
    entries[i]["ranks"] = std::move(by_label);
    entries[i]["uniform"] = bool(uniform[i]);
  }
}

}  // namespace

MergedReport merge_reports(const std::vector<Report> &inputs) {
  MergedReport m;
  m.labels = rank_labels(inputs);
  Report &out = m.report;
  if (inputs.empty()) return m;
  out.trigger = inputs[0].trigger;
  out.process = inputs[0].process;
  out.process.rank = -1;  // a merged report belongs to no single rank
  out.process.start_time = inputs[0].process.start_time;
  out.process.end_time = inputs[0].process.end_time;
  // What any process ran without: a rank that had no line numbers must not
  // vanish behind a first input that had them (`check --fail-on-degraded`).
  out.process.degraded.clear();
  std::vector<std::pair<std::string, std::vector<size_t>>> degraded;  // line, inputs

  for (size_t k = 0; k < inputs.size(); ++k) {
    const Report &r = inputs[k];
    const std::string &label = m.labels[k];
    out.process.start_time = std::min(out.process.start_time, r.process.start_time);
    out.process.end_time = std::max(out.process.end_time, r.process.end_time);
    if (r.trigger != out.trigger) out.trigger = r.trigger == "exit" ? out.trigger : r.trigger;
    for (const std::string &d : r.process.degraded) {
      auto it = std::find_if(degraded.begin(), degraded.end(),
                             [&](const auto &e) { return e.first == d; });
      if (it == degraded.end()) it = degraded.insert(degraded.end(), {d, {}});
      if (it->second.empty() || it->second.back() != k) it->second.push_back(k);
    }
    Summary &s = out.summary;
    s.leaked_bytes += r.summary.leaked_bytes;
    s.leaked_allocations += r.summary.leaked_allocations;
    // Processes peak at different times (and usually on different GPUs):
    // the largest single peak is the one number that is not made up.
    s.peak_bytes = std::max(s.peak_bytes, r.summary.peak_bytes);
    s.events += r.summary.events;
    s.suppressed_bytes += r.summary.suppressed_bytes;
    s.cached_bytes += r.summary.cached_bytes;
    s.overhead.events += r.summary.overhead.events;
    s.overhead.seconds_in_torchseal += r.summary.overhead.seconds_in_torchseal;

    // Leaks. Views point into out.leaks, so they are rebuilt per input and
    // new entries are appended only after matching.
    {
      std::vector<SiteView> have, mine;
      for (const LeakEntry &e : out.leaks) have.push_back(site_view(e, leak_extra(e)));
      for (const LeakEntry &e : r.leaks) mine.push_back(site_view(e, leak_extra(e)));
      std::vector<long> match = match_sites(have, mine, 0);  // one build: equal lines
      for (size_t j = 0; j < r.leaks.size(); ++j) {
        size_t idx;
        if (match[j] >= 0) {
          idx = size_t(match[j]);
          out.leaks[idx].bytes += r.leaks[j].bytes;
          out.leaks[idx].allocations += r.leaks[j].allocations;
        } else {
          idx = out.leaks.size();
          out.leaks.push_back(r.leaks[j]);
          m.leak_ranks.emplace_back();
        }
        RankShare &share = m.leak_ranks[idx][label];
        share.bytes += r.leaks[j].bytes;
        share.allocations += r.leaks[j].allocations;
      }
    }
    {
      std::vector<SiteView> have, mine;
      for (const GrowthEntry &e : out.growth) have.push_back(site_view(e));
      for (const GrowthEntry &e : r.growth) mine.push_back(site_view(e));
      std::vector<long> match = match_sites(have, mine, 0);  // one build: equal lines
      for (size_t j = 0; j < r.growth.size(); ++j) {
        const GrowthEntry &g = r.growth[j];
        size_t idx;
        if (match[j] >= 0) {
          idx = size_t(match[j]);
          GrowthEntry &t = out.growth[idx];
          // Rates and totals add up across processes; the fit quality of
          // the merged entry is the weakest one's.
          t.bytes_per_step += g.bytes_per_step;
          t.growth_bytes += g.growth_bytes;
          t.steps = std::max(t.steps, g.steps);
          t.r = std::min(t.r, g.r);
        } else {
          idx = out.growth.size();
          out.growth.push_back(g);
          m.growth_ranks.emplace_back();
        }
        RankShare &share = m.growth_ranks[idx][label];
        share.bytes += uint64_t(std::max<int64_t>(0, g.growth_bytes));
        share.bytes_per_step += g.bytes_per_step;
      }
    }
    out.ooms.insert(out.ooms.end(), r.ooms.begin(), r.ooms.end());
    out.invalid_frees.insert(out.invalid_frees.end(), r.invalid_frees.begin(),
                             r.invalid_frees.end());
    for (const SuppressionUse &u : r.suppressions_used) {
      auto it = std::find_if(out.suppressions_used.begin(), out.suppressions_used.end(),
                             [&](const SuppressionUse &x) { return x.pattern == u.pattern; });
      if (it == out.suppressions_used.end()) {
        out.suppressions_used.push_back(u);
      } else {
        it->bytes += u.bytes;
        it->allocations += u.allocations;
      }
    }
  }

  for (const auto &[line, which] : degraded) {
    if (which.size() == inputs.size()) {
      out.process.degraded.push_back(line);
      continue;
    }
    std::string in;
    for (size_t k : which) in += (in.empty() ? "" : ", ") + m.labels[k];
    out.process.degraded.push_back(line + " (only in " + in + ")");
  }

  // Contract: leaks bytes descending (stable: first-seen order on ties).
  std::vector<size_t> order(out.leaks.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return out.leaks[a].bytes > out.leaks[b].bytes; });
  permute(out.leaks, order);
  permute(m.leak_ranks, order);
  out.summary.leak_sites = out.leaks.size();
  for (const auto &ranks : m.leak_ranks) m.leak_uniform.push_back(uniform(ranks, inputs.size()));
  for (const auto &ranks : m.growth_ranks)
    m.growth_uniform.push_back(uniform(ranks, inputs.size()));
  return m;
}

std::string merged_to_json(const MergedReport &m) {
  ojson j = ojson::parse(report_to_json(m.report));
  add_ranks(j["leaks"], m.leak_ranks, m.leak_uniform, [](const RankShare &s) {
    return ojson{{"bytes", s.bytes}, {"allocations", s.allocations}};
  });
  add_ranks(j["growth"], m.growth_ranks, m.growth_uniform, [](const RankShare &s) {
    return ojson{{"bytes", s.bytes}, {"bytes_per_step", s.bytes_per_step}};
  });
  ojson from = ojson::array();
  for (size_t k = 0; k < m.labels.size(); ++k) from.push_back(m.labels[k]);
  j["merged_from"] = std::move(from);
  return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

std::string merged_notes(const MergedReport &m) {
  std::string out = "torchseal merge: " + std::to_string(m.labels.size()) + " report(s) (";
  for (size_t k = 0; k < m.labels.size(); ++k) out += (k ? ", " : "") + m.labels[k];
  out += "): " + std::to_string(m.report.leaks.size()) + " leak site(s), " +
         std::to_string(m.report.summary.leaked_bytes) + " byte(s) leaked, " +
         std::to_string(m.report.growth.size()) + " growth site(s)\n";
  for (size_t i = 0; i < m.report.leaks.size(); ++i) {
    if (m.leak_uniform[i]) continue;
    const LeakEntry &e = m.report.leaks[i];
    out += "  note: not uniform across ranks: leak " + std::to_string(e.bytes) + " byte(s) at " +
           site_label(e.frames, e.python_frames) + " on " + join_keys(m.leak_ranks[i]) + "\n";
  }
  for (size_t i = 0; i < m.report.growth.size(); ++i) {
    if (m.growth_uniform[i]) continue;
    const GrowthEntry &e = m.report.growth[i];
    out += "  note: not uniform across ranks: growth at " + site_label(e.frames, e.python_frames) +
           " on " + join_keys(m.growth_ranks[i]) + "\n";
  }
  return out;
}

}  // namespace torchseal
