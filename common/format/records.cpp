#include "common/format/records.h"

#include "common/format/crc32.h"
#include "common/format/event_codec.h"

namespace torchseal::tseal {

void ProcessRecord::encode(ByteWriter &w) const {
  w.u64(static_cast<uint64_t>(info.pid));
  w.svarint(info.rank);
  w.str(info.hostname);
  w.f64(info.start_time);
  w.str(info.backend);
  w.str(info.python);
  w.varint(info.argv.size());
  for (const auto &a : info.argv) w.str(a);
  w.f64(clock_base);
  // Appended (format version 1 readers stop before it).
  w.varint(info.degraded.size());
  for (const auto &d : info.degraded) w.str(d);
  w.str(info.unwinder);
}

bool ProcessRecord::decode(ByteReader &r) {
  info = ProcessInfo{};
  info.pid = static_cast<int64_t>(r.u64());
  info.rank = r.svarint();
  info.hostname = r.str();
  info.start_time = r.f64();
  info.backend = r.str();
  info.python = r.str();
  uint64_t argc = r.varint();
  for (uint64_t i = 0; i < argc && r.ok(); ++i) info.argv.push_back(r.str());
  clock_base = r.f64();
  if (r.ok() && !r.done()) {
    uint64_t n = r.varint();
    for (uint64_t i = 0; i < n && r.ok(); ++i) info.degraded.push_back(r.str());
    info.unwinder = r.str();
  }
  return r.ok();
}

void ModulesRecord::encode(ByteWriter &w) const {
  w.varint(modules.size());
  for (const Module &m : modules) {
    w.str(m.path);
    w.u64(m.base);
    w.u64(m.lo);
    w.u64(m.hi);
    w.str(m.build_id);
  }
}

bool ModulesRecord::decode(ByteReader &r) {
  modules.clear();
  uint64_t n = r.varint();
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    Module m;
    m.path = r.str();
    m.base = r.u64();
    m.lo = r.u64();
    m.hi = r.u64();
    m.build_id = r.str();
    modules.push_back(std::move(m));
  }
  return r.ok();
}

void StacksRecord::encode(ByteWriter &w) const {
  w.varint(stacks.size());
  for (const auto &[id, ips] : stacks) {
    w.varint(id);
    w.varint(ips.size());
    uint64_t prev = 0;
    for (uint64_t ip : ips) {
      w.svarint(static_cast<int64_t>(ip - prev));
      prev = ip;
    }
  }
}

bool StacksRecord::decode(ByteReader &r) {
  stacks.clear();
  uint64_t n = r.varint();
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    auto id = static_cast<StackId>(r.varint());
    uint64_t len = r.varint();
    if (len > kMaxFrames) return false;
    std::vector<uint64_t> ips;
    ips.reserve(len);
    uint64_t prev = 0;
    for (uint64_t k = 0; k < len && r.ok(); ++k) {
      prev += static_cast<uint64_t>(r.svarint());
      ips.push_back(prev);
    }
    stacks.emplace_back(id, std::move(ips));
  }
  return r.ok();
}

void PyStacksRecord::encode(ByteWriter &w) const {
  w.varint(strings.size());
  for (const auto &[id, s] : strings) {
    w.varint(id);
    w.str(s);
  }
  w.varint(stacks.size());
  for (const auto &[id, frames] : stacks) {
    w.varint(id);
    w.varint(frames.size());
    for (const Frame &f : frames) {
      w.varint(f.function);
      w.varint(f.file);
      w.varint(f.line);
    }
  }
}

bool PyStacksRecord::decode(ByteReader &r) {
  strings.clear();
  stacks.clear();
  uint64_t ns = r.varint();
  for (uint64_t i = 0; i < ns && r.ok(); ++i) {
    uint64_t id = r.varint();
    std::string s = r.str();
    if (!r.ok() || id == 0 || id > kMaxStringId) return false;
    strings.emplace_back(static_cast<uint32_t>(id), std::move(s));
  }
  uint64_t nk = r.varint();
  for (uint64_t i = 0; i < nk && r.ok(); ++i) {
    auto id = static_cast<PyStackId>(r.varint());
    uint64_t n = r.varint();
    if (n > kMaxFrames) return false;
    std::vector<Frame> frames;
    for (uint64_t k = 0; k < n && r.ok(); ++k) {
      uint64_t fn = r.varint(), file = r.varint(), line = r.varint();
      if (fn > kMaxStringId || file > kMaxStringId) return false;
      frames.push_back(
          {static_cast<uint32_t>(fn), static_cast<uint32_t>(file), static_cast<uint32_t>(line)});
    }
    stacks.emplace_back(id, std::move(frames));
  }
  return r.ok();
}

void EventsHeader::encode(ByteWriter &w) const {
  w.u32(tid);
  w.u64(base_time);
  w.varint(count);
}

bool EventsHeader::decode(ByteReader &r) {
  tid = r.u32();
  base_time = r.u64();
  count = r.varint();
  return r.ok();
}

void append_events_chunk(std::vector<uint8_t> &out, uint32_t tid,
                         const std::vector<Event> &events) {
  if (events.empty()) return;
  std::vector<uint8_t> payload;
  ByteWriter w(payload);
  EventsHeader{tid, events.front().time_ns, events.size()}.encode(w);
  CodecState st;
  st.reset(events.front().time_ns);
  for (const Event &e : events) encode_event(w, st, e);
  append_chunk(out, Chunk::Events, payload);
}

// Framed in place: the writer thread's one copy of every event byte (a
// payload built apart and then appended was two copies and a zero fill).
void append_events_chunk(std::vector<uint8_t> &out, const EventsHeader &h, const uint8_t *encoded,
                         size_t n) {
  const size_t at = out.size();
  out.resize(at + kChunkHeaderSize);
  ByteWriter w(out);
  h.encode(w);
  out.insert(out.end(), encoded, encoded + n);
  put_chunk_header(out.data() + at, Chunk::Events, out.data() + at + kChunkHeaderSize,
                   out.size() - at - kChunkHeaderSize);
}

size_t put_events_chunk_head(uint8_t *dst, const EventsHeader &h, const uint8_t *encoded,
                             size_t n) {
  RawWriter w(dst + kChunkHeaderSize);
  w.u32(h.tid);  // as EventsHeader::encode
  w.u64(h.base_time);
  w.varint(h.count);
  const uint8_t *head = dst + kChunkHeaderSize;
  const size_t head_n = static_cast<size_t>(w.end() - head);
  RawWriter c(dst);
  c.u8(static_cast<uint8_t>(Chunk::Events));
  c.u8(0);
  c.u8(0);
  c.u8(0);
  c.u32(static_cast<uint32_t>(head_n + n));
  c.u32(crc32_extend(crc32(head, head_n), encoded, n));
  return kChunkHeaderSize + head_n;
}

void PassRecord::encode(ByteWriter &w) const { w.u64(time_ns); }

bool PassRecord::decode(ByteReader &r) {
  time_ns = r.u64();
  return r.ok();
}

void SymbolsRecord::encode(ByteWriter &w) const {
  w.varint(ips.size());
  for (const auto &[ip, frames] : ips) {
    w.varint(ip);
    w.varint(frames.size());
    for (const NativeFrame &f : frames) {
      w.str(f.function);
      w.str(f.file);
      w.varint(static_cast<uint64_t>(f.line < 0 ? 0 : f.line));
      w.str(f.module);
    }
  }
}

bool SymbolsRecord::decode(ByteReader &r) {
  ips.clear();
  uint64_t n = r.varint();
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    uint64_t ip = r.varint();
    uint64_t nf = r.varint();
    if (nf > kMaxSymbolFrames) return false;
    std::vector<NativeFrame> frames;
    for (uint64_t k = 0; k < nf && r.ok(); ++k) {
      NativeFrame f;
      f.function = r.str();
      f.file = r.str();
      f.line = static_cast<int>(r.varint());
      f.module = r.str();
      f.address = ip;
      frames.push_back(std::move(f));
    }
    ips.emplace_back(ip, std::move(frames));
  }
  return r.ok();
}

void LabelsRecord::encode(ByteWriter &w) const {
  w.varint(labels.size());
  for (const auto &[id, s] : labels) {
    w.varint(id);
    w.str(s);
  }
}

bool LabelsRecord::decode(ByteReader &r) {
  labels.clear();
  uint64_t n = r.varint();
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    uint64_t id = r.varint();
    std::string s = r.str();
    if (!r.ok() || id == 0 || id > kMaxStringId) return false;
    labels.emplace_back(static_cast<uint32_t>(id), std::move(s));
  }
  return r.ok();
}

namespace {

constexpr uint8_t kScanDone = 1, kScanAtExit = 2, kScanPartial = 4;

void encode_chain(ByteWriter &w, const std::vector<std::string> &chain) {
  w.varint(chain.size());
  for (const std::string &step : chain) w.str(step);
}

bool decode_chain(ByteReader &r, std::vector<std::string> &chain) {
  uint64_t n = r.varint();
  if (n > kMaxChainSteps) return false;
  chain.clear();
  for (uint64_t i = 0; i < n && r.ok(); ++i) chain.push_back(r.str());
  return r.ok();
}

void encode_holders(ByteWriter &w, const std::vector<Holder> &holders) {
  w.varint(holders.size());
  for (const Holder &h : holders) {
    encode_chain(w, h.chain);
    w.varint(h.bytes);
    w.varint(h.tensors);
  }
}

bool decode_holders(ByteReader &r, std::vector<Holder> &holders) {
  uint64_t n = r.varint();
  if (n > kMaxHolders) return false;
  holders.clear();
  for (uint64_t i = 0; i < n && r.ok(); ++i) {
    Holder h;
    if (!decode_chain(r, h.chain)) return false;
    h.bytes = r.varint();
    h.tensors = r.varint();
    holders.push_back(std::move(h));
  }
  return r.ok();
}

}  // namespace

namespace {

// Memory by role (docs/roles.md): a snapshot's tag in the Verdict chunk.
constexpr uint64_t kRolesNow = 0, kRolesPeak = 1, kRolesStep = 2, kRolesOom = 3;  // + OOM index
constexpr uint64_t kMaxRoleSnapshots = 4096;

void encode_roles(ByteWriter &w, const RoleSnapshot &s) {
  w.str(s.at);
  w.varint(s.step);
  w.varint(s.time_ns);
  w.varint(s.live_bytes);
  w.u8(s.allocator_stats ? 1 : 0);
  w.varint(s.torch_allocated);
  w.varint(s.torch_reserved);
  w.varint(s.sites.size());
  for (const RoleSite &site : s.sites) {
    w.varint(site.stack);
    w.varint(site.pystack);
    w.varint(static_cast<uint16_t>(site.api));
    w.u8(static_cast<uint8_t>(site.family));
    w.varint(site.bytes);
    w.varint(site.allocations);
    w.varint(site.found_bytes);
  }
  w.varint(s.found.size());
  for (const RoleFound &f : s.found) {
    w.u8(static_cast<uint8_t>(f.role));
    w.str(f.module);
    w.varint(f.bytes);
    w.varint(f.tensors);
  }
  encode_holders(w, s.user_holders);
}

bool decode_roles(ByteReader &r, RoleSnapshot &s) {
  s.taken = true;
  s.at = r.str(64);
  s.step = r.varint();
  s.time_ns = r.varint();
  s.live_bytes = r.varint();
  s.allocator_stats = r.u8() != 0;
  s.torch_allocated = r.varint();
  s.torch_reserved = r.varint();
  uint64_t nsites = r.varint();
  if (nsites > kMaxVerdictSites) return false;
  for (uint64_t i = 0; i < nsites && r.ok(); ++i) {
    RoleSite site;
    uint64_t stack = r.varint(), pystack = r.varint(), api = r.varint();
    uint8_t family = r.u8();
    if (stack > UINT32_MAX || pystack > UINT32_MAX || api > UINT16_MAX ||
        family > static_cast<uint8_t>(kLastFamily))
      return false;
    site.stack = static_cast<StackId>(stack);
    site.pystack = static_cast<PyStackId>(pystack);
    site.api = static_cast<ApiId>(api);
    site.family = static_cast<Family>(family);
    site.bytes = r.varint();
    site.allocations = r.varint();
    site.found_bytes = r.varint();
    s.sites.push_back(site);
  }
  uint64_t nfound = r.varint();
  if (nfound > kMaxScanItems) return false;
  for (uint64_t i = 0; i < nfound && r.ok(); ++i) {
    RoleFound f;
    uint8_t role = r.u8();
    if (role >= kScanRoles) return false;
    f.role = static_cast<MemoryRole>(role);
    f.module = r.str(4096);
    f.bytes = r.varint();
    f.tensors = r.varint();
    s.found.push_back(std::move(f));
  }
  return decode_holders(r, s.user_holders) && r.ok();
}

}  // namespace

void VerdictRecord::encode(ByteWriter &w) const {
  w.u8((scan.done ? kScanDone : 0) | (scan.at_exit ? kScanAtExit : 0) |
       (scan.partial ? kScanPartial : 0));
  w.varint(scan.chains.size());
  for (const auto &chain : scan.chains) encode_chain(w, chain);
  w.varint(scan.storages.size());
  for (const HeldStorage &s : scan.storages) {
    w.varint(s.addr);
    w.varint(s.bytes);
    w.varint(s.chain);
  }
  w.varint(site_holders.size());
  for (const SiteHolders &s : site_holders) {
    w.varint(s.stack);
    w.varint(s.pystack);
    w.varint(static_cast<uint16_t>(s.api));
    w.u8(static_cast<uint8_t>(s.family));
    encode_holders(w, s.holders);
  }
  w.varint(ooms.size());
  for (const Oom &o : ooms) {
    w.varint(o.time_ns);
    w.u32(o.tid);
    w.u8(o.recovered ? 1 : 0);
    encode_holders(w, o.holders);
  }
  // Memory by role: tagged snapshots, so each part is optional.
  std::vector<std::pair<uint64_t, const RoleSnapshot *>> snaps;  // (tag, snapshot)
  if (roles_now.taken) snaps.emplace_back(kRolesNow, &roles_now);
  if (roles_peak.taken) snaps.emplace_back(kRolesPeak, &roles_peak);
  for (const RoleSnapshot &st : role_steps) snaps.emplace_back(kRolesStep, &st);
  for (size_t k = 0; k < ooms.size(); ++k)
    if (ooms[k].roles.taken) snaps.emplace_back(kRolesOom + k, &ooms[k].roles);
  w.varint(snaps.size());
  for (const auto &[tag, snap] : snaps) {
    w.varint(tag);
    encode_roles(w, *snap);
  }
}

bool VerdictRecord::decode(ByteReader &r) {
  *this = VerdictRecord{};
  uint8_t flags = r.u8();
  scan.done = flags & kScanDone;
  scan.at_exit = flags & kScanAtExit;
  scan.partial = flags & kScanPartial;
  uint64_t nchains = r.varint();
  if (nchains > kMaxScanItems) return false;
  for (uint64_t i = 0; i < nchains && r.ok(); ++i)
    if (!decode_chain(r, scan.chains.emplace_back())) return false;
  uint64_t nstorages = r.varint();
  if (nstorages > kMaxScanItems) return false;
  for (uint64_t i = 0; i < nstorages && r.ok(); ++i) {
    HeldStorage s;
    s.addr = r.varint();
    s.bytes = r.varint();
    uint64_t chain = r.varint();
    // The analysis indexes chains by it.
    if (chain >= scan.chains.size()) return false;
    s.chain = static_cast<uint32_t>(chain);
    scan.storages.push_back(s);
  }
  uint64_t nsites = r.varint();
  if (nsites > kMaxVerdictSites) return false;
  for (uint64_t i = 0; i < nsites && r.ok(); ++i) {
    SiteHolders s;
    uint64_t stack = r.varint(), pystack = r.varint(), api = r.varint();
    uint8_t family = r.u8();
    if (stack > UINT32_MAX || pystack > UINT32_MAX || api > UINT16_MAX ||
        family > static_cast<uint8_t>(kLastFamily))
      return false;
    s.stack = static_cast<StackId>(stack);
    s.pystack = static_cast<PyStackId>(pystack);
    s.api = static_cast<ApiId>(api);
    s.family = static_cast<Family>(family);
    if (!decode_holders(r, s.holders)) return false;
    site_holders.push_back(std::move(s));
  }
  uint64_t nooms = r.varint();
  if (nooms > kMaxVerdictSites) return false;
  for (uint64_t i = 0; i < nooms && r.ok(); ++i) {
    Oom o;
    o.time_ns = r.varint();
    o.tid = r.u32();
    o.recovered = r.u8() != 0;
    if (!decode_holders(r, o.holders)) return false;
    ooms.push_back(std::move(o));
  }
  if (!r.ok() || r.done()) return r.ok();  // written before memory by role
  uint64_t nsnaps = r.varint();
  if (nsnaps > kMaxRoleSnapshots + ooms.size() + 2) return false;
  for (uint64_t i = 0; i < nsnaps && r.ok(); ++i) {
    uint64_t tag = r.varint();
    RoleSnapshot snap;
    if (!decode_roles(r, snap)) return false;
    if (tag == kRolesNow) {
      roles_now = std::move(snap);
    } else if (tag == kRolesPeak) {
      roles_peak = std::move(snap);
    } else if (tag == kRolesStep) {
      role_steps.push_back(std::move(snap));
    } else if (tag >= kRolesOom && tag - kRolesOom < ooms.size()) {
      ooms[tag - kRolesOom].roles = std::move(snap);
    } else {
      return false;
    }
  }
  return r.ok();
}

size_t EndRecord::encode(uint8_t *dst) const {
  RawWriter w(dst);
  w.f64(end_time);
  w.varint(events);
  w.u8(clean ? 1 : 0);
  w.u8(flags);
  return static_cast<size_t>(w.end() - dst);
}

void EndRecord::encode(ByteWriter &w) const {
  uint8_t buf[kMaxBytes];
  w.bytes(buf, encode(buf));
}

bool EndRecord::decode(ByteReader &r) {
  end_time = r.f64();
  events = r.varint();
  clean = r.u8() != 0;
  if (!r.ok()) return false;
  flags = r.done() ? 0 : r.u8();
  return r.ok();
}

}  // namespace torchseal::tseal
