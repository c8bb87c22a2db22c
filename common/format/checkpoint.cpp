#include "common/format/checkpoint.h"

#include <utility>

#include "common/format/records.h"

namespace torchseal::tseal {

namespace {

// Ooms (4): version 1, an OOM with its live set in full; OomNoLiveSet (8):
// version 2, the live set by site in the main file (OomSnapshotRecord).
// VmmState (10, written only when there is some): the maps' cuMemMap stacks,
// in the Maps part's order, and the released handles mappings keep alive.
enum class Part : uint8_t {
  Live = 1,
  Maps = 2,
  Totals = 3,
  Ooms = 4,
  Steps = 5,
  Windows = 6,
  Freed = 7,
  OomNoLiveSet = 8,
  LiveCompact = 9,
  VmmState = 10,
};

// Items per part chunk: far below the 64 MiB chunk bound at their largest.
constexpr size_t kBatch = 100000;
constexpr uint64_t kMaxItems = 1u << 26;  // a count a damaged chunk cannot make absurd

// A family byte; false for a value no family has (a damaged part).
bool get_family(ByteReader &r, Family &f) {
  uint8_t v = r.u8();
  if (v > static_cast<uint8_t>(kLastFamily)) return false;
  f = static_cast<Family>(v);
  return true;
}

// A site's key (stack, Python stack, API, family), in the order every part
// that names a site writes it.
template <class Site>
void put_site(ByteWriter &w, const Site &x) {
  w.varint(x.stack);
  w.varint(x.pystack);
  w.varint(static_cast<uint16_t>(x.api));
  w.u8(static_cast<uint8_t>(x.family));
}

template <class Site>
bool get_site(ByteReader &r, Site &x) {
  x.stack = static_cast<StackId>(r.varint());
  x.pystack = static_cast<PyStackId>(r.varint());
  x.api = static_cast<ApiId>(r.varint());
  if (!get_family(r, x.family)) return false;
  return true;
}

// Version 1's live allocation (part kind 1).
bool get_event(ByteReader &r, Event &e) {
  e = Event{};
  e.op = Op::Alloc;
  e.time_ns = r.varint();
  e.addr = r.varint();
  e.size = r.varint();
  e.stream = r.varint();
  e.stack = static_cast<StackId>(r.varint());
  e.pystack = static_cast<PyStackId>(r.varint());
  e.tid = static_cast<uint32_t>(r.varint());
  e.api = static_cast<ApiId>(r.varint());
  if (!get_family(r, e.family)) return false;
  e.device = static_cast<int16_t>(r.svarint());
  e.context = static_cast<uint32_t>(r.varint());
  return r.ok();
}

// The live set of a version 2 checkpoint: each allocation as the change
// from the previous one in the part (time and address as signed
// differences; thread, API/family/device/context and stream only when they
// change), about 12 bytes an allocation where a full record takes 28.
class CompactLive {
 public:
  enum : uint8_t { kSameTid = 1, kSameKind = 2, kNoStream = 4 };
  void put(ByteWriter &w, const Event &e) {
    uint8_t flags = (e.tid == prev_.tid ? kSameTid : 0) | (e.stream ? 0 : kNoStream) |
                    (e.api == prev_.api && e.family == prev_.family && e.device == prev_.device &&
                             e.context == prev_.context
                         ? kSameKind
                         : 0);
    w.u8(flags);
    w.svarint(static_cast<int64_t>(e.time_ns - prev_.time_ns));
    w.svarint(static_cast<int64_t>(e.addr - prev_.addr));
    w.varint(e.size);
    w.varint(e.stack);
    w.varint(e.pystack);
    if (!(flags & kNoStream)) w.varint(e.stream);
    if (!(flags & kSameTid)) w.varint(e.tid);
    if (!(flags & kSameKind)) {
      w.varint(static_cast<uint16_t>(e.api));
      w.u8(static_cast<uint8_t>(e.family));
      w.svarint(e.device);
      w.varint(e.context);
    }
    prev_ = e;
  }
  bool get(ByteReader &r, Event &e) {
    uint8_t flags = r.u8();
    if (flags > 7) return false;
    e = prev_;
    e.op = Op::Alloc;
    e.time_ns = prev_.time_ns + static_cast<uint64_t>(r.svarint());
    e.addr = prev_.addr + static_cast<uint64_t>(r.svarint());
    e.size = r.varint();
    e.stack = static_cast<StackId>(r.varint());
    e.pystack = static_cast<PyStackId>(r.varint());
    e.stream = flags & kNoStream ? 0 : r.varint();
    if (!(flags & kSameTid)) e.tid = static_cast<uint32_t>(r.varint());
    if (!(flags & kSameKind)) {
      e.api = static_cast<ApiId>(r.varint());
      if (!get_family(r, e.family)) return false;
      e.device = static_cast<int16_t>(r.svarint());
      e.context = static_cast<uint32_t>(r.varint());
    }
    prev_ = e;
    return r.ok();
  }

 private:
  Event prev_{};
};

void put_alloc(ByteWriter &w, const LiveAlloc &a) {
  w.varint(a.addr);
  w.varint(a.size);
  put_site(w, a);
  w.svarint(a.device);
  w.u8(static_cast<uint8_t>(a.detected_at));
}

bool get_alloc(ByteReader &r, LiveAlloc &a) {
  a.addr = r.varint();
  a.size = r.varint();
  if (!get_site(r, a)) return false;
  a.device = static_cast<int16_t>(r.svarint());
  uint8_t at = r.u8();
  if (at > 1) return false;
  a.detected_at = static_cast<DetectedAt>(at);
  return r.ok();
}

void put_allocs(ByteWriter &w, const std::vector<LiveAlloc> &v) {
  w.varint(v.size());
  for (const LiveAlloc &a : v) put_alloc(w, a);
}

bool get_allocs(ByteReader &r, std::vector<LiveAlloc> &v) {
  uint64_t n = r.varint();
  if (n > kMaxItems || n > r.remaining()) return false;
  v.resize(n);
  for (LiveAlloc &a : v)
    if (!get_alloc(r, a)) return false;
  return r.ok();
}

// A site sample repeats from one step to the next: each is written as the
// change from the previous sample of the same list (sites added, changed,
// gone), which is what keeps a long run's thinned series small.
void put_samples(ByteWriter &w, const std::vector<StepSample> &v, size_t from, size_t to,
                 const StepSample *prev) {
  w.varint(to - from);
  for (size_t i = from; i < to; ++i) {
    const StepSample &s = v[i];
    w.varint(s.step);
    w.varint(s.time_ns);
    w.varint(s.sites.size());
    for (size_t k = 0; k < s.sites.size(); ++k) {
      const SiteSample &x = s.sites[k];
      const SiteSample *p = prev && k < prev->sites.size() ? &prev->sites[k] : nullptr;
      bool same_site = p && p->stack == x.stack && p->pystack == x.pystack && p->api == x.api &&
                       p->family == x.family;
      if (same_site && p->bytes == x.bytes && p->allocations == x.allocations) {
        w.u8(0);  // as in the previous sample
        continue;
      }
      if (same_site) {
        w.u8(1);  // same site, new figures
      } else {
        w.u8(2);
        put_site(w, x);
      }
      w.varint(x.bytes);
      w.varint(x.allocations);
    }
    prev = &s;
  }
}

bool get_samples(ByteReader &r, std::vector<StepSample> &v) {
  uint64_t n = r.varint();
  if (n > kMaxItems || n > r.remaining()) return false;
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    const StepSample *prev = v.empty() ? nullptr : &v.back();
    StepSample s;
    s.step = r.varint();
    s.time_ns = r.varint();
    uint64_t ns = r.varint();
    if (ns > kMaxItems || ns > r.remaining()) return false;
    s.sites.resize(ns);
    for (uint64_t k = 0; k < ns; ++k) {
      SiteSample &x = s.sites[k];
      uint8_t kind = r.u8();
      if (kind < 2) {
        if (!prev || k >= prev->sites.size()) return false;
        x = prev->sites[k];
        if (kind == 0) continue;
      } else if (kind == 2) {
        if (!get_site(r, x)) return false;
      } else {
        return false;
      }
      x.bytes = r.varint();
      x.allocations = r.varint();
    }
    v.push_back(std::move(s));
  }
  return r.ok();
}

template <typename Fn>
void part(std::vector<uint8_t> &out, Part kind, Fn &&body) {
  std::vector<uint8_t> payload;
  ByteWriter w(payload);
  w.u8(static_cast<uint8_t>(kind));
  body(w);
  append_chunk(out, Chunk::CheckpointPart, payload);
}

void put_samples_parts(std::vector<uint8_t> &out, Part kind, const std::vector<StepSample> &v) {
  // Batched by sites, not samples: one sample can name many sites.
  size_t from = 0;
  while (from < v.size()) {
    size_t to = from, sites = 0;
    while (to < v.size() && (to == from || sites + v[to].sites.size() <= kBatch))
      sites += v[to++].sites.size();
    part(out, kind,
         [&](ByteWriter &w) { put_samples(w, v, from, to, from ? &v[from - 1] : nullptr); });
    from = to;
  }
}

}  // namespace

void SegmentRecord::encode(ByteWriter &w) const {
  w.varint(seq);
  w.varint(first_ns);
  w.varint(last_ns);
  w.varint(step_at_start);
  w.varint(step_at_end);
  w.varint(events);
  w.varint(bytes);
  w.u8(pins);
  w.varint(limit_bytes);
  w.varint(segment_bytes);
  w.varint(base);
  w.varint(base_bytes);
  w.u8(over_cap);
}

bool SegmentRecord::decode(ByteReader &r) {
  seq = r.varint();
  first_ns = r.varint();
  last_ns = r.varint();
  step_at_start = r.varint();
  step_at_end = r.varint();
  events = r.varint();
  bytes = r.varint();
  pins = r.u8();
  limit_bytes = r.varint();
  segment_bytes = r.varint();
  if (r.remaining()) {  // version 2
    base = r.varint();
    base_bytes = r.varint();
    over_cap = r.u8();
  }
  return r.ok() && seq > 0;
}

void append_checkpoint(std::vector<uint8_t> &out, const CheckpointRecord &c) {
  {
    std::vector<uint8_t> payload;
    ByteWriter w(payload);
    w.varint(c.seq);
    w.varint(c.time_ns);
    w.varint(c.step);
    w.varint(c.base);
    w.varint(c.halvings[0]);
    w.varint(c.halvings[1]);
    append_chunk(out, Chunk::CheckpointBegin, payload);
  }
  for (size_t from = 0; from < c.freed.size(); from += kBatch) {
    size_t to = std::min(c.freed.size(), from + kBatch);
    part(out, Part::Freed, [&](ByteWriter &w) {
      w.varint(to - from);
      for (size_t i = from; i < to; ++i) {
        w.u8(c.freed[i].vmm);
        w.varint(c.freed[i].addr);
      }
    });
  }
  for (size_t from = 0; from < c.live.size(); from += kBatch) {
    size_t to = std::min(c.live.size(), from + kBatch);
    part(out, Part::LiveCompact, [&](ByteWriter &w) {
      w.varint(to - from);
      CompactLive enc;
      for (size_t i = from; i < to; ++i) enc.put(w, c.live[i]);
    });
  }
  part(out, Part::Maps, [&](ByteWriter &w) {
    w.varint(c.maps.size());
    for (const VmmMap &m : c.maps) {
      w.varint(m.va);
      w.varint(m.size);
      w.varint(m.handle);
    }
  });
  bool map_stacks = false;
  for (const VmmMap &m : c.maps) map_stacks = map_stacks || m.stack || m.pystack;
  if (map_stacks || !c.released.empty())
    part(out, Part::VmmState, [&](ByteWriter &w) {
      w.varint(map_stacks ? c.maps.size() : 0);
      if (map_stacks)
        for (const VmmMap &m : c.maps) {
          w.varint(m.stack);
          w.varint(m.pystack);
        }
      w.varint(c.released.size());
      for (uint64_t h : c.released) w.varint(h);
    });
  const RunSummary &s = c.summary;
  part(out, Part::Totals, [&](ByteWriter &w) {
    w.varint(s.events);
    w.varint(s.peak);
    w.varint(s.invalid_frees.size());
    for (const InvalidFree &f : s.invalid_frees) {
      w.varint(static_cast<uint16_t>(f.api));
      w.varint(f.addr);
      w.varint(f.stack);
      w.varint(f.pystack);
    }
    w.varint(s.marks.size());
    for (const Mark &m : s.marks) {
      w.f64(m.time);
      w.str(m.label);
      w.varint(m.thread);
    }
    put_allocs(w, s.teardown);
  });
  for (const OomRecord &o : s.ooms)
    part(out, Part::OomNoLiveSet, [&](ByteWriter &w) {
      w.varint(static_cast<uint16_t>(o.api));
      w.varint(o.requested);
      w.svarint(o.device);
      w.varint(o.live_bytes);
      w.varint(o.stack);
      w.varint(o.pystack);
      w.varint(o.time_ns);
      w.varint(o.tid);
    });
  put_samples_parts(out, Part::Steps, s.steps);
  put_samples_parts(out, Part::Windows, s.windows);
}

bool CheckpointReader::begin(ByteReader &r) {
  rec_ = CheckpointRecord{};
  rec_.seq = r.varint();
  rec_.time_ns = r.varint();
  rec_.step = r.varint();
  if (r.remaining()) {  // version 2
    rec_.base = r.varint();
    rec_.halvings[0] = r.varint();
    rec_.halvings[1] = r.varint();
  }
  active_ = r.ok();
  return active_;
}

bool CheckpointReader::part(ByteReader &r) {
  if (!active_) return false;
  RunSummary &s = rec_.summary;
  auto kind = static_cast<Part>(r.u8());
  switch (kind) {
    case Part::Live:
    case Part::LiveCompact: {
      uint64_t n = r.varint();
      if (n > kMaxItems || n > r.remaining()) return false;
      CompactLive dec;
      for (uint64_t i = 0; i < n; ++i) {
        Event e;
        if (!(kind == Part::Live ? get_event(r, e) : dec.get(r, e))) return false;
        rec_.live.push_back(e);
      }
      break;
    }
    case Part::Maps: {
      uint64_t n = r.varint();
      if (n > kMaxItems || n > r.remaining()) return false;
      for (uint64_t i = 0; i < n && r.ok(); ++i) {
        VmmMap m;
        m.va = r.varint();
        m.size = r.varint();
        m.handle = r.varint();
        rec_.maps.push_back(m);
      }
      break;
    }
    case Part::Totals: {
      s.events = r.varint();
      s.peak = r.varint();
      uint64_t n = r.varint();
      if (n > kMaxItems || n > r.remaining()) return false;
      for (uint64_t i = 0; i < n && r.ok(); ++i) {
        InvalidFree f;
        f.api = static_cast<ApiId>(r.varint());
        f.addr = r.varint();
        f.stack = static_cast<StackId>(r.varint());
        f.pystack = static_cast<PyStackId>(r.varint());
        s.invalid_frees.push_back(f);
      }
      n = r.varint();
      if (n > kMaxItems || n > r.remaining()) return false;
      for (uint64_t i = 0; i < n && r.ok(); ++i) {
        Mark m;
        m.time = r.f64();
        m.label = r.str();
        m.thread = static_cast<uint32_t>(r.varint());
        s.marks.push_back(std::move(m));
      }
      if (!get_allocs(r, s.teardown)) return false;
      break;
    }
    case Part::Freed: {
      uint64_t n = r.varint();
      if (n > kMaxItems || n > r.remaining()) return false;
      for (uint64_t i = 0; i < n && r.ok(); ++i) {
        uint8_t vmm = r.u8();
        if (vmm > 1) return false;
        rec_.freed.push_back({vmm == 1, r.varint()});
      }
      break;
    }
    case Part::Ooms:
    case Part::OomNoLiveSet: {
      bool old = kind == Part::Ooms;
      OomRecord &o = s.ooms.emplace_back();
      o.api = static_cast<ApiId>(r.varint());
      o.requested = r.varint();
      o.device = static_cast<int16_t>(r.svarint());
      o.live_bytes = r.varint();
      o.stack = static_cast<StackId>(r.varint());
      o.pystack = static_cast<PyStackId>(r.varint());
      o.time_ns = r.varint();
      o.tid = static_cast<uint32_t>(r.varint());
      if (old) {
        std::vector<LiveAlloc> live;
        if (!get_allocs(r, live)) return false;
        SiteTally tally;
        for (const LiveAlloc &a : live) tally.add(a.stack, a.pystack, a.api, a.family, a.size);
        o.sites_at_oom = tally.take();
      }
      break;
    }
    case Part::Steps:
      return get_samples(r, s.steps);
    case Part::Windows:
      return get_samples(r, s.windows);
    case Part::VmmState: {
      uint64_t n = r.varint();
      if (n && n != rec_.maps.size()) return false;  // written after its Maps part
      for (uint64_t i = 0; i < n && r.ok(); ++i) {
        rec_.maps[i].stack = static_cast<StackId>(r.varint());
        rec_.maps[i].pystack = static_cast<PyStackId>(r.varint());
      }
      n = r.varint();
      if (n > kMaxItems || n > r.remaining()) return false;
      for (uint64_t i = 0; i < n && r.ok(); ++i) rec_.released.push_back(r.varint());
      break;
    }
    default:
      return false;
  }
  return r.ok();
}

bool apply_to_base(CheckpointRecord &whole, CheckpointRecord &&d) {
  // The base's allocations, less those freed since, in their order, then
  // those made since.
  std::unordered_map<uint64_t, size_t> at[2];
  for (size_t i = 0; i < whole.live.size(); ++i)
    at[whole.live[i].family == Family::Vmm][whole.live[i].addr] = i;
  std::vector<bool> gone(whole.live.size());
  for (const FreedKey &k : d.freed) {
    auto it = at[k.vmm].find(k.addr);
    if (it == at[k.vmm].end() || gone[it->second]) return false;
    gone[it->second] = true;
  }
  size_t j = 0;
  for (size_t i = 0; i < whole.live.size(); ++i)
    if (!gone[i]) whole.live[j++] = whole.live[i];
  whole.live.resize(j);
  whole.live.insert(whole.live.end(), d.live.begin(), d.live.end());
  whole.maps = std::move(d.maps);  // both in full in every checkpoint
  whole.released = std::move(d.released);

  RunSummary &s = whole.summary;
  RunSummary &a = d.summary;
  s.events = a.events;
  s.peak = a.peak;
  auto append = [](auto &to, auto &from) {
    to.insert(to.end(), std::make_move_iterator(from.begin()), std::make_move_iterator(from.end()));
  };
  append(s.invalid_frees, a.invalid_frees);
  append(s.marks, a.marks);
  append(s.teardown, a.teardown);
  for (OomRecord &o : a.ooms) push_oom(s.ooms, std::move(o));
  std::vector<StepSample> *lists[2][2] = {{&s.steps, &a.steps}, {&s.windows, &a.windows}};
  for (int k = 0; k < 2; ++k) {
    std::vector<StepSample> &v = *lists[k][0];
    // push_step_sample keeps even indices: after h halvings, every 2^h-th.
    size_t stride = 1;
    for (uint64_t h = 0; h < d.halvings[k] && stride < v.size(); ++h) stride *= 2;
    // Index 0 stays: a vector moved onto itself would be emptied.
    if (stride > 1) {
      size_t n = v.empty() ? 0 : 1;
      for (size_t i = stride; i < v.size(); i += stride) v[n++] = std::move(v[i]);
      v.resize(n);
    }
    append(v, *lists[k][1]);
  }
  whole.seq = d.seq;
  whole.time_ns = d.time_ns;
  whole.step = d.step;
  whole.base = 0;
  whole.halvings[0] = whole.halvings[1] = 0;
  return true;
}

void OomSnapshotRecord::encode(ByteWriter &w) const {
  w.varint(time_ns);
  w.varint(tid);
  w.varint(sites.size());
  for (const SiteSample &x : sites) {
    put_site(w, x);
    w.varint(x.bytes);
    w.varint(x.allocations);
  }
}

bool OomSnapshotRecord::decode(ByteReader &r) {
  time_ns = r.varint();
  tid = static_cast<uint32_t>(r.varint());
  uint64_t n = r.varint();
  if (n > kMaxItems || n > r.remaining()) return false;
  sites.resize(n);
  for (SiteSample &x : sites) {
    if (!get_site(r, x)) return false;
    x.bytes = r.varint();
    x.allocations = r.varint();
  }
  return r.ok();
}

void attach_oom_snapshots(RunSummary &s,
                          const std::unordered_multimap<uint64_t, OomSnapshotRecord> &snapshots) {
  for (size_t i = 0; i < s.ooms.size(); ++i) {
    OomRecord &o = s.ooms[i];
    if (!o.sites_at_oom.empty() || !keeps_snapshot(i, s.ooms.size())) continue;
    auto [lo, hi] = snapshots.equal_range(oom_key(o.time_ns, o.tid));
    for (auto it = lo; it != hi; ++it)
      if (it->second.time_ns == o.time_ns && it->second.tid == o.tid) {
        o.sites_at_oom = it->second.sites;
        break;
      }
  }
}

CheckpointRecord CheckpointReader::take() {
  active_ = false;
  return std::move(rec_);
}

}  // namespace torchseal::tseal
