#include "report/analysis/holders.h"

#include <algorithm>
#include <tuple>
#include <unordered_map>

namespace torchseal {

HeldMap::HeldMap(const AnalysisInput &in) : scan_(in.holders) {
  if (scan_.storages.empty()) return;
  struct Range {
    uint64_t lo, hi;
    size_t live;
  };
  std::vector<Range> ranges;
  ranges.reserve(in.live.size() + in.vmm_maps.size());
  // A VMM record's addr is its handle, not an address: its memory is
  // wherever the handle is mapped (expandable segments). A handle freed by a
  // context teardown backs no tensor any more.
  std::unordered_map<uint64_t, size_t> vmm_handles;
  for (size_t i = 0; i < in.live.size(); ++i) {
    const LiveAlloc &a = in.live[i];
    if (a.family != Family::Vmm) {
      if (a.size) ranges.push_back({a.addr, a.addr + a.size, i});
    } else if (a.detected_at == DetectedAt::Exit) {
      vmm_handles.emplace(a.addr, i);
    }
  }
  for (const VmmMap &m : in.vmm_maps) {
    auto it = vmm_handles.find(m.handle);
    if (it != vmm_handles.end() && m.size) ranges.push_back({m.va, m.va + m.size, it->second});
  }
  std::sort(ranges.begin(), ranges.end(),
            [](const Range &a, const Range &b) { return a.lo < b.lo; });
  per_live_.resize(in.live.size());
  for (uint32_t s = 0; s < scan_.storages.size(); ++s) {
    uint64_t addr = scan_.storages[s].addr;
    auto it = std::upper_bound(ranges.begin(), ranges.end(), addr,
                               [](uint64_t v, const Range &r) { return v < r.lo; });
    if (it == ranges.begin()) continue;
    --it;
    if (addr < it->hi) per_live_[it->live].push_back(s);
  }
}

void HeldMap::add(size_t live_index, HolderTotals &totals) const {
  if (!held(live_index)) return;
  for (uint32_t s : per_live_[live_index]) {
    const HeldStorage &h = scan_.storages[s];
    auto &t = totals[h.chain];
    t.first += h.bytes;
    t.second += 1;
  }
}

std::pair<uint64_t, uint64_t> HeldMap::held_bytes(size_t live_index) const {
  std::pair<uint64_t, uint64_t> out{0, 0};
  if (!held(live_index)) return out;
  for (uint32_t s : per_live_[live_index]) {
    out.first += scan_.storages[s].bytes;
    out.second += 1;
  }
  return out;
}

std::vector<Holder> holders_from(const HolderTotals &totals, const HolderScan &scan, size_t limit) {
  std::vector<Holder> out;
  for (const auto &[chain, t] : totals) {
    if (chain >= scan.chains.size()) continue;
    out.push_back({scan.chains[chain], t.first, t.second});
  }
  // Stable: equal holders keep the scan's (breadth-first) order.
  std::stable_sort(out.begin(), out.end(),
                   [](const Holder &a, const Holder &b) { return a.bytes > b.bytes; });
  if (out.size() > limit) out.resize(limit);
  return out;
}

std::vector<SiteHolders> holders_by_site(const AnalysisInput &in, size_t limit) {
  std::vector<SiteHolders> out;
  if (in.holders.storages.empty()) return out;
  HeldMap held(in);
  std::map<std::tuple<StackId, PyStackId, ApiId, Family>, HolderTotals> by_site;
  for (size_t i = 0; i < in.live.size(); ++i) {
    if (!held.held(i)) continue;
    const LiveAlloc &a = in.live[i];
    held.add(i, by_site[{a.stack, a.pystack, a.api, a.family}]);
  }
  out.reserve(by_site.size());
  for (const auto &[key, totals] : by_site) {
    auto [stack, pystack, api, family] = key;
    out.push_back({stack, pystack, api, family, holders_from(totals, in.holders, limit)});
  }
  return out;
}

std::vector<Holder> all_holders(const HolderScan &scan, size_t limit) {
  HolderTotals totals;
  for (const HeldStorage &h : scan.storages) {
    auto &t = totals[h.chain];
    t.first += h.bytes;
    t.second += 1;
  }
  return holders_from(totals, scan, limit);
}

}  // namespace torchseal
