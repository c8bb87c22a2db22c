#include "report/render/html_bands.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "common/symbols/symbolizer.h"
#include "common/util/fork_safe.h"
#include "report/analysis/shown_frames.h"
#include "report/analysis/site.h"
#include "report/render/html_escape.h"
#include "report/render/html_flame.h"

namespace torchseal {
namespace {

using json = nlohmann::json;

std::string frame_where(const std::string &file, int line) {
  return file.empty() ? std::string() : " " + file + (line > 0 ? ":" + std::to_string(line) : "");
}

std::string python_line(const PythonFrame &f) {
  return (f.function.empty() ? "??" : f.function) + frame_where(f.file, f.line) + " [py]";
}

std::string native_line(const NativeFrame &f) {
  std::string s =
      f.function.empty() ? html_format("0x%llx", (unsigned long long)f.address) : f.function;
  s += frame_where(f.file, f.line);
  if (f.file.empty() && !f.module.empty()) s += " (" + f.module + ")";
  return s;
}

// What the page knows of a report site: why it is listed, its holder, hint.
struct SiteNote {
  std::string verdict, holder, hint;
  int growth = -1;  // index in report.growth
};

std::string holder_text(const std::vector<Holder> &hs) {
  if (hs.empty()) return {};
  std::string s;
  for (const std::string &step : hs[0].chain) s += (s.empty() ? "" : " -> ") + step;
  return s + " (" + html_bytes(hs[0].bytes) + ")";
}

template <class Entry>
void note_sites(std::map<std::string, SiteNote> &out, const std::vector<Entry> &v,
                const char *verdict) {
  for (const Entry &e : v) {
    SiteNote &n = out[site_key(e.frames, e.python_frames)];
    if (n.verdict.empty()) n.verdict = verdict;
    if (n.holder.empty()) n.holder = holder_text(e.holders);
    if constexpr (requires { e.hint; }) {
      if (n.hint.empty() && e.hint) n.hint = e.hint->message;
    }
  }
}

// A site of the page: the allocating (stack, Python stack, API).
uint64_t site_of(const BandAlloc &a) {
  return (uint64_t(a.stack) << 32 | a.pystack) ^ (uint64_t(a.api) << 56);
}

// Interns (stack, pystack, api) triples as the page's stack table.
class StackTable {
 public:
  StackTable(BandHistory &h, const Report &r) : h_(h), sym_(h.modules) {
    for (auto &[ip, frames] : h.symbols) sym_.preload(ip, std::move(frames));
    h.symbols.clear();
    note_sites(notes_, r.growth, "growing");
    for (size_t i = 0; i < r.growth.size(); ++i) {
      notes_[site_key(r.growth[i].frames, r.growth[i].python_frames)].growth = int(i);
    }
    note_sites(notes_, r.leaks, "leaked");
    note_sites(notes_, r.reachable, "reachable at exit");
    python_ = h.python || !r.process.python.empty();
  }

  uint32_t get(const BandAlloc &a) {
    auto [it, fresh] = index_.emplace(site_of(a), uint32_t(table_.size()));
    if (fresh) table_.push_back(entry(a));
    return it->second;
  }

  json take() { return std::move(table_); }

 private:
  json entry(const BandAlloc &a) {
    std::vector<NativeFrame> nf;
    if (auto it = h_.stacks.find(a.stack); a.stack && it != h_.stacks.end()) {
      nf = trim_frames(sym_.symbolize_stack(it->second));
    }
    static constinit Lazy<const std::vector<PythonFrame>> none;
    auto pit = h_.pystacks.find(a.pystack);
    const std::vector<PythonFrame> &py =
        a.pystack && pit != h_.pystacks.end() ? pit->second : none.get();
    const std::string api(api_name(a.api));
    json lines = json::array();
    long user = -1;
    if (python_ || !py.empty()) {
      const ShownStack shown = shown_stack(nf, py);
      for (size_t i : shown.python) {
        if (long(i) == shown.user) user = long(lines.size());
        lines.push_back(python_line(py[i]));
      }
      for (const NativeRow &row : shown.native) {
        lines.push_back(row.folded ? folded_label(row.count) : native_line(nf[row.first]));
      }
    } else {
      for (const NativeFrame &f : nf) lines.push_back(native_line(f));
      if (!nf.empty()) user = 0;
    }
    json path = json::array();
    for (auto &[label, where] : flame_path(nf, py, api, python_)) path.push_back(label);
    json e = {{"api", api}, {"l", std::move(lines)}, {"u", user}, {"p", std::move(path)}};
    if (auto n = notes_.find(site_key(nf, py)); n != notes_.end()) {
      e["v"] = n->second.verdict;
      if (!n->second.holder.empty()) e["h"] = n->second.holder;
      if (!n->second.hint.empty()) e["hint"] = n->second.hint;
      if (n->second.growth >= 0) e["g"] = n->second.growth;
    }
    return e;
  }

  BandHistory &h_;
  Symbolizer sym_;
  std::map<std::string, SiteNote> notes_;
  bool python_ = false;
  std::unordered_map<uint64_t, uint32_t> index_;
  json table_ = json::array();
};

// Keeps at most `n` of `v`, evenly spread, the last one always.
template <class T>
std::vector<T> thin(const std::vector<T> &v, size_t n) {
  if (v.size() <= n || n < 2) return v;
  std::vector<T> out;
  for (size_t i = 0; i < n; ++i) out.push_back(v[i * (v.size() - 1) / (n - 1)]);
  return out;
}

// Live bytes per bucket of a set of allocations: the running total after
// the bucket's allocations and before its frees (so a short-lived spike
// inside one bucket still shows).
class Buckets {
 public:
  Buckets(uint64_t t0, uint64_t span, size_t n)
      : t0_(t0), width_(std::max<uint64_t>(1, span / n + 1)), plus_(n + 1), minus_(n + 1) {}
  size_t of(uint64_t t) const { return std::min(plus_.size() - 1, size_t((t - t0_) / width_)); }
  void add(const BandAlloc &a, uint64_t t_end) {
    plus_[of(a.t0)] += a.size;
    minus_[of(a.t1 ? a.t1 : t_end)] += a.t1 ? a.size : 0;
  }
  // `peak`: the bucket's running total before its frees (the aggregate
  // drawn on the timeline); else at its end (per-site series: their sum is
  // then the total live at that time, which maxima would overstate).
  std::vector<uint64_t> values(bool peak) const {
    std::vector<uint64_t> v(plus_.size());
    uint64_t run = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      const uint64_t hi = run + plus_[i];
      run = hi - std::min(hi, minus_[i]);
      v[i] = peak ? hi : run;
    }
    return v;
  }
  uint64_t width() const { return width_; }

 private:
  uint64_t t0_, width_;
  std::vector<uint64_t> plus_, minus_;
};

}  // namespace

std::string bands_json(BandHistory &h, const Report &report, const BandLimits &lim) {
  const uint64_t t0 = h.t0, t_end = std::max(h.t_end, h.t0);
  auto rel = [&](uint64_t t) { return t >= t0 ? t - t0 : 0; };
  json d;
  d["span"] = t_end - t0;
  // The axis: step marks (and NVTX steps) when the program has any, else
  // the recorder's time windows (the growth analysis's rule).
  const bool real = !h.steps.empty();
  d["stepKind"] = real ? "step" : h.windows.empty() ? "none" : "window";
  json steps = json::array();
  for (auto &[t, n] : thin(real ? h.steps : h.windows, lim.steps)) steps.push_back({rel(t), n});
  d["steps"] = std::move(steps);

  // Exact peak of the total: sort the 2N lifetime edges.
  std::vector<std::pair<uint64_t, int64_t>> edges;
  edges.reserve(h.allocs.size() * 2);
  for (const BandAlloc &a : h.allocs) {
    edges.emplace_back(a.t0, int64_t(a.size));
    if (a.t1) edges.emplace_back(a.t1, -int64_t(a.size));
  }
  std::sort(edges.begin(), edges.end(), [](const auto &x, const auto &y) {
    return x.first != y.first ? x.first < y.first : x.second < y.second;  // frees first
  });
  int64_t live = 0, peak = 0;
  uint64_t peak_t = t0;
  for (auto &[t, delta] : edges) {
    live += delta;
    if (live > peak) peak = live, peak_t = t;
  }
  edges = {};
  d["peak"] = {rel(peak_t), peak};

  // Bands: the largest allocations (the longer-lived first among equals).
  std::vector<uint32_t> order(h.allocs.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  auto life = [&](const BandAlloc &a) { return (a.t1 ? a.t1 : t_end) - a.t0; };
  auto larger = [&](uint32_t x, uint32_t y) {
    const BandAlloc &a = h.allocs[x], &b = h.allocs[y];
    return a.size != b.size ? a.size > b.size : life(a) != life(b) ? life(a) > life(b) : x < y;
  };
  const size_t nb = std::min(lim.bands, order.size());
  std::partial_sort(order.begin(), order.begin() + nb, order.end(), larger);
  std::vector<bool> is_band(h.allocs.size());
  StackTable stacks(h, report);
  json bands = json::array(), kinds = json::array();
  std::map<Family, int> kind_index;
  std::sort(order.begin(), order.begin() + nb);  // time order
  for (size_t i = 0; i < nb; ++i) {
    const BandAlloc &a = h.allocs[order[i]];
    is_band[order[i]] = true;
    auto [k, fresh] = kind_index.emplace(a.family, int(kinds.size()));
    if (fresh) kinds.push_back(std::string(family_name(a.family)));
    bands.push_back(
        {rel(a.t0), a.t1 ? int64_t(rel(a.t1)) : -1, a.size, stacks.get(a), k->second, a.device});
  }
  d["bands"] = std::move(bands);
  d["kinds"] = std::move(kinds);
  d["allocs"] = h.allocs.size();

  // The rest as one aggregate.
  Buckets rest(t0, t_end - t0, lim.buckets);
  for (size_t i = 0; i < h.allocs.size(); ++i) {
    if (!is_band[i]) rest.add(h.allocs[i], t_end);
  }
  d["bucket"] = rest.width();
  d["rest"] = rest.values(true);

  // Sites by byte-time (how much memory for how long), the top ones with
  // their own series.
  std::unordered_map<uint64_t, std::pair<double, std::vector<uint32_t>>> sites;
  for (uint32_t i = 0; i < h.allocs.size(); ++i) {
    const BandAlloc &a = h.allocs[i];
    auto &s = sites[site_of(a)];
    s.first += double(a.size) * double(life(a) + 1);
    s.second.push_back(i);
  }
  std::vector<std::pair<double, std::vector<uint32_t>> *> ranked;
  for (auto &kv : sites) ranked.push_back(&kv.second);
  std::sort(ranked.begin(), ranked.end(), [&](auto *x, auto *y) {
    return x->first != y->first ? x->first > y->first : x->second[0] < y->second[0];
  });
  json site_series = json::array();
  Buckets others(t0, t_end - t0, lim.buckets);
  std::vector<uint32_t> series_of(h.allocs.size());
  const uint32_t other_series = uint32_t(std::min(ranked.size(), lim.sites));
  for (size_t r = 0; r < ranked.size(); ++r) {
    for (uint32_t i : ranked[r]->second) series_of[i] = uint32_t(std::min(r, size_t(other_series)));
    if (r >= lim.sites) {
      for (uint32_t i : ranked[r]->second) others.add(h.allocs[i], t_end);
      continue;
    }
    Buckets b(t0, t_end - t0, lim.buckets);
    for (uint32_t i : ranked[r]->second) b.add(h.allocs[i], t_end);
    json pts = json::array();  // [bucket, live] where it changes
    uint64_t prev = ~0ull;
    std::vector<uint64_t> v = b.values(false);
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i] != prev) pts.push_back({i, v[i]});
      prev = v[i];
    }
    site_series.push_back({{"s", stacks.get(h.allocs[ranked[r]->second[0]])}, {"v", pts}});
  }
  if (ranked.size() > lim.sites) {
    json pts = json::array();
    std::vector<uint64_t> v = others.values(false);
    for (size_t i = 0; i < v.size(); ++i) pts.push_back({i, v[i]});
    site_series.push_back({{"s", -1}, {"v", pts}});
  }
  d["sites"] = std::move(site_series);

  // Exact live bytes per series at the moments offered as buttons: the
  // peak, each OOM and each dump (the first 50 of each) and the end.
  auto snapshot = [&](uint64_t t) {
    std::map<uint32_t, uint64_t> by;
    for (size_t i = 0; i < h.allocs.size(); ++i) {
      const BandAlloc &a = h.allocs[i];
      if (a.t0 <= t && (!a.t1 || a.t1 > t)) by[series_of[i]] += a.size;
    }
    json v = json::array();
    for (auto &[series, bytes] : by) v.push_back({series, bytes});
    return json{{"t", rel(t)}, {"v", std::move(v)}};
  };
  json snaps = json::array({snapshot(peak_t), snapshot(t_end)});
  size_t ooms = 0, dumps = 0;
  for (const BandMoment &m : h.moments) {
    if ((m.kind == 'o' && ooms++ < 50) || (m.kind == 'd' && dumps++ < 50))
      snaps.push_back(snapshot(m.time_ns));
  }
  d["snapshots"] = std::move(snaps);
  d["stacks"] = stacks.take();

  json moments = json::array();
  for (const BandMoment &m : h.moments)
    moments.push_back({rel(m.time_ns), std::string(1, m.kind), m.what});
  d["moments"] = std::move(moments);

  json growth = json::array();
  for (const GrowthEntry &g : report.growth) {
    growth.push_back({{"slope", g.bytes_per_step}, {"steps", g.steps}, {"r", g.r}});
  }
  d["growth"] = std::move(growth);

  std::string out = d.dump(-1, ' ', false, json::error_handler_t::replace);
  std::string safe;
  safe.reserve(out.size());
  for (char c : out) {
    if (c == '<')
      safe += "\\u003c";
    else if (c == '>')
      safe += "\\u003e";
    else if (c == '&')
      safe += "\\u0026";
    else
      safe += c;
  }
  return safe;
}

}  // namespace torchseal
