#include "report/analysis/analysis.h"

#include <algorithm>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>

#include "report/analysis/graph_growth.h"
#include "report/analysis/hints.h"
#include "report/analysis/holders.h"
#include "report/analysis/library_held.h"
#include "report/analysis/roles.h"
#include "report/analysis/site.h"
#include "report/analysis/suppressions.h"

namespace torchseal {
namespace {

std::string detected_at_name(DetectedAt d) {
  return d == DetectedAt::ContextTeardown ? "context-teardown" : "exit";
}

std::string api_string(ApiId id) { return std::string(api_name(id)); }

// What makes two live allocations one leak entry.
struct LeakKey {
  uint32_t site;
  uint16_t api;
  int16_t device;
  uint8_t family, detected_at;
  bool operator==(const LeakKey &) const = default;
};
struct LeakKeyHash {
  size_t operator()(const LeakKey &k) const {
    uint64_t v = (uint64_t(k.site) << 32) ^ (uint64_t(k.api) << 16) ^ uint16_t(k.device) ^
                 (uint64_t(k.family) << 56) ^ (uint64_t(k.detected_at) << 60);
    return std::hash<uint64_t>()(v);
  }
};

template <class T>
void sort_by_bytes_desc(std::vector<T> &v) {
  // Stable, so equal-sized entries keep first-seen order and reports are
  // reproducible run to run.
  std::stable_sort(v.begin(), v.end(), [](const T &a, const T &b) { return a.bytes > b.bytes; });
}

std::vector<SiteTotal> top_sites(const std::vector<SiteSample> &live, SiteIds &sites,
                                 size_t limit) {
  std::vector<SiteTotal> out;
  std::unordered_map<uint32_t, size_t> index;
  for (const SiteSample &a : live) {
    auto [it, fresh] = index.emplace(sites.get(a.stack, a.pystack), out.size());
    if (fresh) out.push_back({0, 0, sites.native_frames(a.stack), sites.python_frames(a.pystack)});
    out[it->second].bytes += a.bytes;
    out[it->second].allocations += a.allocations;
  }
  sort_by_bytes_desc(out);
  if (out.size() > limit) out.resize(limit);
  return out;
}

bool same_frames(const std::vector<NativeFrame> &a, const std::vector<NativeFrame> &b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(),
                    [](const NativeFrame &x, const NativeFrame &y) {
                      return x.function == y.function && x.file == y.file && x.line == y.line &&
                             x.module == y.module;
                    });
}

bool same_frames(const std::vector<PythonFrame> &a, const std::vector<PythonFrame> &b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const PyFrame &x, const PyFrame &y) {
    return x.function == y.function && x.file == y.file && x.line == y.line;
  });
}

// A growing site's holders: the chains to the storages inside the live
// allocations made at that site (growth merges raw stacks that symbolize to
// the same source site, so the match is on symbolized frames).
void attach_growth_holders(const AnalysisInput &in, const HeldMap &held, SiteIds &sites,
                           std::vector<GrowthEntry> &growth) {
  if (growth.empty() || (in.holders.storages.empty() && in.site_holders.empty())) return;
  struct HeldSite {
    const LiveAlloc *first;
    HolderTotals totals;
  };
  std::unordered_map<LeakKey, HeldSite, LeakKeyHash> by_site;
  for (size_t i = 0; i < in.live.size(); ++i) {
    if (!held.held(i)) continue;
    const LiveAlloc &a = in.live[i];
    LeakKey key{sites.get(a.stack, a.pystack), static_cast<uint16_t>(a.api), 0,
                static_cast<uint8_t>(a.family), 0};
    auto it = by_site.try_emplace(key, HeldSite{&a, {}}).first;
    held.add(i, it->second.totals);
  }
  for (GrowthEntry &g : growth) {
    // What held it while it grew, first: by exit a grower's memory may be
    // gone, or (a segment or handle kept as cache) hold something else.
    for (const SiteHolders &s : in.site_holders) {
      if (api_string(s.api) == g.api && family_name(s.family) == g.kind &&
          same_frames(sites.python_frames(s.pystack), g.python_frames) &&
          same_frames(sites.native_frames(s.stack), g.frames)) {
        g.holders = s.holders;
        break;
      }
    }
    if (!g.holders.empty()) continue;
    HolderTotals totals;
    for (auto &[key, site] : by_site) {
      const LiveAlloc &a = *site.first;
      if (api_string(a.api) != g.api || family_name(a.family) != g.kind ||
          !same_frames(sites.python_frames(a.pystack), g.python_frames) ||
          !same_frames(sites.native_frames(a.stack), g.frames))
        continue;
      for (auto &[chain, t] : site.totals) {
        totals[chain].first += t.first;
        totals[chain].second += t.second;
      }
    }
    g.holders = holders_from(totals, in.holders);
  }
}

// The recorded peak, raised to every total the report itself shows as live
// at one moment: the shim's striped counters can miss another allocating
// thread's unfolded share (docs/architecture.md), and a report whose peak
// is below its own leaks contradicts itself.
uint64_t consistent_peak(const AnalysisInput &in) {
  uint64_t peak = in.peak_bytes, live = 0;
  for (const LiveAlloc &a : in.live) live += a.size;
  peak = std::max(peak, live);
  for (const OomRecord &o : in.ooms) peak = std::max(peak, o.live_bytes);
  for (const StepSample &s : in.steps) {
    uint64_t step = 0;
    for (const SiteSample &site : s.sites) step += site.bytes;
    peak = std::max(peak, step);
  }
  return peak;
}

}  // namespace

bool counts_as_cached(const AnalysisInput &in, const LiveAlloc &a) {
  if (a.detected_at != DetectedAt::Exit) return false;
  // PyTorch keeps a pinned-host cache (cudaHostAlloc, e.g. behind .item())
  // in every allocator mode, tensors mode included.
  if ((in.torch_process || in.torch_caching_allocator) && a.api == ApiId::cudaHostAlloc)
    return true;
  if (!in.torch_caching_allocator) return false;
  // Device: its cudaMalloc segments (seen as cuMemAlloc_v2 when cudart is
  // linked statically). Vmm: expandable_segments maps cuMemCreate handles.
  // cudaHostAlloc: its pinned-host cache. Managed and stream-ordered memory
  // are not the caching allocator's in segments mode.
  return a.family == Family::Device || a.family == Family::Vmm || a.api == ApiId::cudaHostAlloc;
}

Report analyze(const AnalysisInput &in, Symbolizer &symbolizer, const AnalysisOptions &opts) {
  Report r;
  r.trigger = in.trigger;
  r.process = in.process;
  r.summary.preexisting_frees = in.preexisting_frees;
  r.summary.preexisting_freed_bytes = in.preexisting_freed_bytes;
  SiteIds sites(in.stacks, symbolizer);

  // ---- leaks: one entry per (site, family, api, device, detected_at) ----
  // In a Python process scanned at exit, what a Python object still holds
  // is `reachable`, grouped the same way, and only the rest is leaked.
  HeldMap held(in);
  const bool split_reachable = in.holders.done && in.holders.at_exit;
  // An exit report without an exit scan (os._exit, a crash) has only an
  // older scan, whose chains may no longer hold these blocks.
  const bool leak_holders = in.holders.at_exit || in.trigger != "exit";
  struct Grouping {
    std::unordered_map<LeakKey, size_t, LeakKeyHash> index;
    std::vector<LeakEntry> entries;
    std::vector<HolderTotals> totals;
  } leaked, reachable, library;
  // Per site: which library holds what was allocated there (library_held.h).
  std::unordered_map<uint32_t, LibraryHolding> holding;
  auto holding_of = [&](uint32_t site, StackId stack) -> const LibraryHolding & {
    auto [it, fresh] = holding.try_emplace(site);
    if (fresh && opts.library_held) it->second = library_holding(sites.native_frames(stack));
    return it->second;
  };
  for (size_t i = 0; i < in.live.size(); ++i) {
    const LiveAlloc &a = in.live[i];
    const uint32_t site = sites.get(a.stack, a.pystack);
    // Only exit-time liveness is the framework's to excuse, as for cache.
    const LibraryHolding *lib =
        a.detected_at == DetectedAt::Exit ? &holding_of(site, a.stack) : nullptr;
    const bool lib_direct = lib && !lib->library.empty() && lib->direct;
    // The tensors inside a cached segment or handle, as a scan taken now
    // found them (segments mode: what Python holds is shown at exit, at a
    // stop and in a dump); the rest of the cache is free.
    uint64_t in_tensors = 0, tensors = 0;
    const bool cached = !lib_direct && counts_as_cached(in, a);
    if (cached) {
      r.summary.cached_bytes += a.size;
      if (leak_holders) std::tie(in_tensors, tensors) = held.held_bytes(i);
      in_tensors = std::min<uint64_t>(in_tensors, a.size);
      r.summary.cached_in_tensors_bytes += in_tensors;
      r.summary.cached_free_bytes += a.size - in_tensors;
      if (!in_tensors) continue;
    }
    Grouping &g = cached                            ? reachable
                  : lib && !lib->library.empty()    ? library
                  : split_reachable && held.held(i) ? reachable
                                                    : leaked;
    LeakKey key{site, static_cast<uint16_t>(a.api), a.device, static_cast<uint8_t>(a.family),
                static_cast<uint8_t>(a.detected_at)};
    auto [it, fresh] = g.index.emplace(key, g.entries.size());
    if (fresh) {
      LeakEntry e;
      if (&g == &library) e.library = lib->library;
      e.kind = std::string(family_name(a.family));
      e.api = api_string(a.api);
      e.device = a.device;
      e.detected_at = detected_at_name(a.detected_at);
      e.frames = sites.native_frames(a.stack);
      e.python_frames = sites.python_frames(a.pystack);
      if (a.map_stack || a.map_pystack) {
        e.map_frames = sites.native_frames(a.map_stack);
        e.map_python_frames = sites.python_frames(a.map_pystack);
      }
      g.entries.push_back(std::move(e));
      g.totals.emplace_back();
    }
    // A cached block counts what its tensors hold, and each tensor's storage.
    g.entries[it->second].bytes += cached ? in_tensors : a.size;
    g.entries[it->second].allocations += cached ? tensors : 1;
    if (&g == &reachable || leak_holders) held.add(i, g.totals[it->second]);
  }
  for (Grouping *g : {&leaked, &reachable, &library})
    for (size_t k = 0; k < g->entries.size(); ++k)
      g->entries[k].holders = holders_from(g->totals[k], in.holders);
  for (LeakEntry &e : reachable.entries) {
    r.summary.reachable_bytes += e.bytes;
    r.reachable.push_back(std::move(e));
  }
  sort_by_bytes_desc(r.reachable);
  for (LeakEntry &e : library.entries) {
    r.summary.library_held_bytes += e.bytes;
    r.library_held.push_back(std::move(e));
  }
  sort_by_bytes_desc(r.library_held);
  std::vector<LeakEntry> &entries = leaked.entries;
  for (LeakEntry &e : entries) {
    if (opts.match_suppression) {
      if (const std::string *pattern = opts.match_suppression(e.frames, e.python_frames)) {
        r.summary.suppressed_bytes += e.bytes;
        record_suppression_use(r, *pattern, e.bytes, e.allocations);
        continue;
      }
    } else if (opts.is_suppressed && opts.is_suppressed(e.frames, e.python_frames)) {
      r.summary.suppressed_bytes += e.bytes;
      continue;
    }
    r.summary.leaked_bytes += e.bytes;
    r.summary.leaked_allocations += e.allocations;
    r.leaks.push_back(std::move(e));
  }
  sort_by_bytes_desc(r.leaks);
  r.summary.leak_sites = r.leaks.size();
  r.summary.peak_bytes = consistent_peak(in);
  r.summary.events = in.events;
  r.summary.overhead.events = in.events;
  r.summary.overhead.seconds_in_torchseal = in.seconds_in_torchseal;

  // ---- OOMs ----
  for (const OomRecord &o : in.ooms) {
    OomEntry e;
    e.api = api_string(o.api);
    e.requested_bytes = o.requested;
    e.device = o.device;
    e.live_bytes = o.live_bytes;
    e.frames = sites.native_frames(o.stack);
    e.python_frames = sites.python_frames(o.pystack);
    e.top_sites = top_sites(o.sites_at_oom, sites, opts.oom_top_sites);
    // From the failed request's own stack only: a rule matched on whatever
    // happened to fill the device (a dataset built once) would blame it.
    e.holders = o.holders;
    e.hint = find_hint(e.python_frames, e.holders);
    e.recovered = o.recovered;
    e.roles = split_roles(o.roles, in, sites, opts.library_held);
    align_to_oom(e.roles, o.live_bytes, in.torch_caching_allocator);
    r.ooms.push_back(std::move(e));
  }

  // ---- invalid frees: one entry per distinct (api, address, site) ----
  std::set<std::tuple<uint32_t, uint16_t, uint64_t>> seen;
  for (const InvalidFree &f : in.invalid_frees) {
    if (!seen.emplace(sites.get(f.stack, f.pystack), static_cast<uint16_t>(f.api), f.addr).second)
      continue;
    r.invalid_frees.push_back(
        {api_string(f.api), f.addr, sites.native_frames(f.stack), sites.python_frames(f.pystack)});
  }
  r.marks = in.marks;
  // ---- memory by role (docs/roles.md) ----
  r.roles = split_roles(in.roles_now, in, sites, opts.library_held);
  r.peak_roles = split_roles(in.roles_peak, in, sites, opts.library_held);
  for (const RoleSnapshot &snap : in.role_steps)
    r.role_steps.push_back(split_roles(snap, in, sites, opts.library_held, false));
  // ---- a snapshot: everything the scan found, before the attach too ----
  if (in.trigger == "snapshot" && in.holders.done) {
    r.held_now.present = true;
    for (const HeldStorage &h : in.holders.storages) {
      r.held_now.bytes += h.bytes;
      ++r.held_now.tensors;
    }
    constexpr size_t kSnapshotHolders = 20;  // a snapshot is read for its largest holders
    r.held_now.holders = all_holders(in.holders, kSnapshotHolders);
  }
  // ---- growth across training steps (docs/pytorch.md, "Growth") ----
  r.growth = detect_growth(in, symbolizer, opts.growth);
  if (opts.is_suppressed) {
    std::erase_if(r.growth, [&](const GrowthEntry &g) {
      return opts.is_suppressed(g.frames, g.python_frames);
    });
  }
  attach_growth_holders(in, held, sites, r.growth);
  // A growing graph whose holder already explains a growing site is that
  // site's finding (backward once at the end: its saved tensors grow too).
  for (GrowthEntry &graph : graph_growth(in, sites)) {
    const std::string &root = graph.holders.front().chain.front();
    bool known = std::any_of(r.growth.begin(), r.growth.end(), [&](const GrowthEntry &g) {
      return std::any_of(g.holders.begin(), g.holders.end(), [&](const Holder &h) {
        return !h.chain.empty() && h.chain.front() == root;
      });
    });
    if (!known && !(opts.is_suppressed && opts.is_suppressed(graph.frames, graph.python_frames)))
      r.growth.push_back(std::move(graph));
  }
  for (GrowthEntry &g : r.growth) g.hint = find_hint(g.python_frames, g.holders);
  return r;
}

}  // namespace torchseal
