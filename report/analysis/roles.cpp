#include "report/analysis/roles.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "report/analysis/analysis.h"
#include "report/analysis/holders.h"
#include "report/analysis/library_held.h"

namespace torchseal {
namespace {

constexpr size_t kTopHolders = 8;
constexpr size_t kTopSites = 10;

RoleEntry &entry(RoleSplit &s, MemoryRole r) { return s.roles[static_cast<size_t>(r)]; }

bool framework_stack(const std::vector<NativeFrame> &frames) {
  return std::any_of(frames.begin(), frames.end(),
                     [](const NativeFrame &f) { return is_framework_module(f.module); });
}

}  // namespace

const char *role_name(MemoryRole r) {
  static constexpr const char *kNames[kRoles] = {
      "parameters", "buffers",       "gradients",  "optimizer_state", "saved_activations",
      "user_held",  "other_tensors", "free_cache", "library_held",    "outside_framework"};
  size_t i = static_cast<size_t>(r);
  return i < kRoles ? kNames[i] : "?";
}

RoleSnapshot role_snapshot(const AnalysisInput &now, const std::string &at, uint64_t step,
                           uint64_t time_ns, bool before_tracking) {
  RoleSnapshot s;
  s.taken = true;
  s.at = at;
  s.step = step;
  s.time_ns = time_ns;
  s.allocator_stats = now.holders.allocator_stats;
  s.torch_allocated = now.holders.torch_allocated;
  s.torch_reserved = now.holders.torch_reserved;
  const HolderScan &scan = now.holders;
  HeldMap held(now);
  std::map<std::tuple<StackId, PyStackId, ApiId, Family>, size_t> site_index;
  std::map<std::pair<MemoryRole, int32_t>, std::pair<uint64_t, uint64_t>> found;
  HolderTotals user;
  auto count = [&](const HeldStorage &h, uint64_t bytes) {
    auto &f = found[{h.role, h.module}];
    f.first += bytes;
    f.second += 1;
    if (h.role == MemoryRole::UserHeld) {
      auto &t = user[h.chain];
      t.first += bytes;
      t.second += 1;
    }
  };
  std::vector<bool> placed(before_tracking ? scan.storages.size() : 0);
  for (size_t i = 0; i < now.live.size(); ++i) {
    const LiveAlloc &a = now.live[i];
    if (a.detected_at != DetectedAt::Exit) {  // a teardown's leak: no longer live
      if (before_tracking)
        for (uint32_t k : held.storages_in(i)) placed[k] = true;  // nor from before tracking
      continue;
    }
    auto [it, fresh] =
        site_index.emplace(std::make_tuple(a.stack, a.pystack, a.api, a.family), s.sites.size());
    if (fresh) s.sites.push_back({a.stack, a.pystack, a.api, a.family, 0, 0, 0});
    RoleSite &site = s.sites[it->second];
    site.bytes += a.size;
    site.allocations += 1;
    s.live_bytes += a.size;
    uint64_t inside = 0;
    for (uint32_t k : held.storages_in(i)) {
      const HeldStorage &h = scan.storages[k];
      // Storages never overlap, so only a damaged scan could pass the block.
      uint64_t bytes = std::min<uint64_t>(h.bytes, a.size - inside);
      inside += bytes;
      count(h, bytes);
      if (before_tracking) placed[k] = true;
    }
    site.found_bytes += inside;
  }
  if (before_tracking) {
    RoleSite before;  // api Unknown: the site of no allocation (RoleSite)
    for (size_t k = 0; k < scan.storages.size(); ++k) {
      if (placed[k]) continue;
      count(scan.storages[k], scan.storages[k].bytes);
      before.bytes += scan.storages[k].bytes;
      before.allocations += 1;
    }
    before.found_bytes = before.bytes;
    s.live_bytes += before.bytes;
    s.sites.push_back(before);  // even empty: it marks a snapshot taken after tracking began
  }
  for (const auto &[key, t] : found) {
    const auto &[role, module] = key;
    std::string name = module >= 0 && static_cast<size_t>(module) < scan.modules.size()
                           ? scan.modules[static_cast<size_t>(module)]
                           : std::string();
    s.found.push_back({role, std::move(name), t.first, t.second});
  }
  s.user_holders = holders_from(user, scan, kTopHolders);
  return s;
}

RoleSplit split_roles(const RoleSnapshot &snap, const AnalysisInput &in, SiteIds &sites,
                      bool library_held, bool detail) {
  RoleSplit out;
  if (!snap.taken) return out;
  out.at = snap.at;
  out.step = snap.step;
  out.live_bytes = snap.live_bytes;
  out.allocator_stats = snap.allocator_stats;
  out.torch_allocated = snap.torch_allocated;
  out.torch_reserved = snap.torch_reserved;
  out.roles.resize(kRoles);
  for (size_t r = 0; r < kRoles; ++r) out.roles[r].role = role_name(static_cast<MemoryRole>(r));
  // What the scan found, by role and module.
  for (const RoleFound &f : snap.found) {
    RoleEntry &e = entry(out, f.role);
    e.bytes += f.bytes;
    e.count += f.tensors;
    if (!detail || f.role > MemoryRole::OptimizerState) continue;
    std::string name = f.module.empty() ? "(no module)" : f.module;
    auto it = std::find_if(e.modules.begin(), e.modules.end(),
                           [&](const RoleShare &m) { return m.name == name; });
    if (it == e.modules.end()) {
      e.modules.push_back(RoleShare{name, 0, 0});
      it = e.modules.end() - 1;
    }
    it->bytes += f.bytes;
    it->tensors += f.tensors;
  }
  if (detail) entry(out, MemoryRole::UserHeld).holders = snap.user_holders;
  // The rest of each site: what its stack and the allocator say it is.
  uint64_t cached_unfound = 0, cached_found = 0;
  std::unordered_map<uint32_t, size_t> outside_index;
  std::unordered_map<uint32_t, std::pair<LibraryHolding, bool>> site_kind;  // (library, framework)
  uint64_t found_before = 0;  // tensors from before tracking: PyTorch counts them allocated
  bool before_tracking = false;
  uint64_t cached_bytes = 0;  // the tracked segments of PyTorch's device cache
  for (const RoleSite &s : snap.sites) {
    if (s.api == ApiId::Unknown) {
      found_before += s.found_bytes;
      before_tracking = true;
      continue;
    }
    uint64_t rest = s.bytes - std::min(s.found_bytes, s.bytes);
    LiveAlloc a;
    a.api = s.api;
    a.family = s.family;
    const uint32_t id = sites.get(s.stack, s.pystack);
    auto [kind, fresh] = site_kind.try_emplace(id);
    if (fresh) {
      std::vector<NativeFrame> frames = sites.native_frames(s.stack);
      if (library_held) kind->second.first = library_holding(frames);
      kind->second.second = framework_stack(frames);
    }
    const LibraryHolding &lib = kind->second.first;
    if (!lib.library.empty() && lib.direct) {
      entry(out, MemoryRole::LibraryHeld).bytes += rest;
      entry(out, MemoryRole::LibraryHeld).count += s.allocations;
    } else if (counts_as_cached(in, a) && kind->second.second) {
      // The caching allocator's segment (its stack is the framework's: a
      // program's own cudaMalloc beside it is not). A framework workspace
      // carved from a segment is the cache's to count.
      cached_unfound += rest;
      if (s.family != Family::HostPinned) {
        cached_found += s.found_bytes;
        cached_bytes += s.bytes;
      }
    } else if (!lib.library.empty()) {
      entry(out, MemoryRole::LibraryHeld).bytes += rest;
      entry(out, MemoryRole::LibraryHeld).count += s.allocations;
    } else if (rest && kind->second.second) {
      entry(out, MemoryRole::OtherTensors).bytes += rest;  // tensors mode: a block of its own
    } else if (rest) {
      RoleEntry &e = entry(out, MemoryRole::OutsideFramework);
      e.bytes += rest;
      e.count += s.allocations;
      if (!detail) continue;
      auto [it, added] = outside_index.emplace(id, e.sites.size());
      if (added)
        e.sites.push_back({0, 0, sites.native_frames(s.stack), sites.python_frames(s.pystack)});
      e.sites[it->second].bytes += rest;
      e.sites[it->second].allocations += s.allocations;
    }
  }
  out.before_tracking = before_tracking;
  // After an attach or an interval's start the device cache also has
  // segments the shim never saw: PyTorch's reserved count less the tracked
  // ones. The tensors Python holds in them are counted already; the rest is
  // the cache's like the tracked segments' unfound bytes.
  if (before_tracking && in.torch_caching_allocator && snap.allocator_stats &&
      snap.torch_reserved > cached_bytes + found_before) {
    uint64_t older = snap.torch_reserved - cached_bytes - found_before;
    cached_unfound += older;
    out.live_bytes += older;
  }
  // The cache's unfound bytes: tensors PyTorch counts as allocated that no
  // Python object reached (temporaries in flight), the rest free.
  uint64_t other = 0;
  if (snap.allocator_stats && snap.torch_allocated > cached_found + found_before)
    other = std::min(snap.torch_allocated - cached_found - found_before, cached_unfound);
  entry(out, MemoryRole::OtherTensors).bytes += other;
  entry(out, MemoryRole::FreeCache).bytes += cached_unfound - other;
  RoleEntry &outside = entry(out, MemoryRole::OutsideFramework);
  std::stable_sort(outside.sites.begin(), outside.sites.end(),
                   [](const SiteTotal &a, const SiteTotal &b) { return a.bytes > b.bytes; });
  if (outside.sites.size() > kTopSites) outside.sites.resize(kTopSites);
  for (RoleEntry &e : out.roles)
    std::stable_sort(e.modules.begin(), e.modules.end(),
                     [](const RoleShare &a, const RoleShare &b) { return a.bytes > b.bytes; });
  return out;
}

void align_to_oom(RoleSplit &split, uint64_t oom_live_bytes, bool caching_allocator) {
  if (split.roles.empty() || oom_live_bytes <= split.live_bytes) return;
  entry(split, caching_allocator ? MemoryRole::FreeCache : MemoryRole::OtherTensors).bytes +=
      oom_live_bytes - split.live_bytes;
  split.live_bytes = oom_live_bytes;
}

std::pair<const char *, double> role_unit(uint64_t live_bytes) {
  if (live_bytes >= (1ull << 30)) return {"GiB", 1ull << 30};
  if (live_bytes >= (1ull << 20)) return {"MiB", 1ull << 20};
  return {"KiB", 1 << 10};
}

std::string role_line(const RoleSplit &split, double unit) {
  std::vector<const RoleEntry *> shown;
  for (const RoleEntry &e : split.roles)
    if (static_cast<double>(e.bytes) / unit >= 0.05) shown.push_back(&e);  // not "0.0"
  std::stable_sort(shown.begin(), shown.end(),
                   [](const RoleEntry *a, const RoleEntry *b) { return a->bytes > b->bytes; });
  std::string out;
  char buf[64];
  for (const RoleEntry *e : shown) {
    if (!out.empty()) out += ", ";
    std::string name = e->role;
    std::replace(name.begin(), name.end(), '_', ' ');
    if (e->role == "user_held" && !e->holders.empty() && !e->holders.front().chain.empty())
      name = "held by " + e->holders.front().chain.front();
    std::snprintf(buf, sizeof buf, " %.1f", static_cast<double>(e->bytes) / unit);
    out += name + buf;
  }
  return out;
}

}  // namespace torchseal
