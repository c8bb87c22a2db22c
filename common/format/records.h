// The payload of every .tseal chunk type, one struct each, with its one
// encoder and its one decoder: the shim's writer, the report's reader and the
// test fixtures all go through these, so the format is written down once
// (docs/tseal-format.md describes the bytes). Event payloads keep their
// hot-path codec (event_codec.h); only their chunk header is here.
//
// decode() returns false on a payload that is short, over-long in a count, or
// otherwise malformed; it never reads outside the payload.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "common/format/tseal_format.h"
#include "common/model/analysis_input.h"
#include "common/model/frames.h"

namespace torchseal::tseal {

// Bounds a decoder enforces, so a damaged count cannot make it allocate
// without limit before the payload runs out.
inline constexpr uint64_t kMaxFrames = 4096;            // per native or Python stack
inline constexpr uint64_t kMaxSymbolFrames = 256;       // inlined levels per IP
inline constexpr uint64_t kMaxStringId = 1u << 24;      // interned Python strings / labels
inline constexpr uint64_t kMaxScanItems = 1u << 22;     // holder-scan chains, storages
inline constexpr uint64_t kMaxChainSteps = 1024;        // steps of one holder chain
inline constexpr uint64_t kMaxHolders = 4096;           // holders of one site or OOM
inline constexpr uint64_t kMaxVerdictSites = 1u << 16;  // site holders, OOM verdicts

struct ProcessRecord {
  ProcessInfo info;       // end_time is not stored here (see EndRecord)
  double clock_base = 0;  // unix seconds at CLOCK_MONOTONIC zero

  void encode(ByteWriter &w) const;
  bool decode(ByteReader &r);
};

struct ModulesRecord {
  std::vector<Module> modules;  // the whole map, replacing the previous one

  void encode(ByteWriter &w) const;
  bool decode(ByteReader &r);
};

// Newly interned native stacks: raw IPs, innermost first.
struct StacksRecord {
  std::vector<std::pair<StackId, std::vector<uint64_t>>> stacks;

  void encode(ByteWriter &w) const;
  bool decode(ByteReader &r);
};

// Newly interned Python stacks. Strings (function names, file paths) are
// interned once per file: a chunk defines only its new strings, and frames
// refer to strings by id, possibly ones an earlier chunk defined.
struct PyStacksRecord {
  struct Frame {
    uint32_t function = 0, file = 0;  // string ids (1-based)
    uint32_t line = 0;
  };
  std::vector<std::pair<uint32_t, std::string>> strings;
  std::vector<std::pair<PyStackId, std::vector<Frame>>> stacks;

  void encode(ByteWriter &w) const;
  bool decode(ByteReader &r);
};

// The header of an Events chunk; the encoded events follow it to the end of
// the payload (event_codec.h), their delta state reset to base_time.
struct EventsHeader {
  uint32_t tid = 0;
  uint64_t base_time = 0;
  uint64_t count = 0;

  void encode(ByteWriter &w) const;
  bool decode(ByteReader &r);
};

// A whole Events chunk for `events` of one thread (times not decreasing),
// for writers that hold the events themselves (tests, fixtures); the shim
// encodes as it records and frames its bytes with EventsHeader.
void append_events_chunk(std::vector<uint8_t> &out, uint32_t tid, const std::vector<Event> &events);
// ... and for events already encoded (event_codec.h) from h.base_time on.
void append_events_chunk(std::vector<uint8_t> &out, const EventsHeader &h, const uint8_t *encoded,
                         size_t n);
// The chunk header and the EventsHeader of an Events chunk whose encoded
// events stay where they are (the writer hands both to writev), into `dst`
// with room for kEventsChunkHeadMax bytes. Returns the bytes written; the
// chunk is those bytes followed by the n encoded ones.
inline constexpr size_t kEventsChunkHeadMax = kChunkHeaderSize + 4 + 8 + 10;
size_t put_events_chunk_head(uint8_t *dst, const EventsHeader &h, const uint8_t *encoded, size_t n);

struct PassRecord {
  uint64_t time_ns = 0;  // CLOCK_MONOTONIC when the writer cut the pass

  void encode(ByteWriter &w) const;
  bool decode(ByteReader &r);
};

// Symbols for every IP seen (written at a clean exit).
struct SymbolsRecord {
  std::vector<std::pair<uint64_t, std::vector<NativeFrame>>> ips;

  void encode(ByteWriter &w) const;
  bool decode(ByteReader &r);  // sets NativeFrame::address to the IP
};

// Interned mark labels (torchseal_mark), defined before the Events chunks
// whose Mark events refer to them by id.
struct LabelsRecord {
  std::vector<std::pair<uint32_t, std::string>> labels;

  void encode(ByteWriter &w) const;
  bool decode(ByteReader &r);
};

// End bits: exit-time facts that change the verdict.
inline constexpr uint8_t kEndTorchCachingAllocator = 1;  // live memory at exit is cache
inline constexpr uint8_t kEndTorchProcess = 2;           // PyTorch's CUDA library loaded

struct EndRecord {
  double end_time = 0;  // unix seconds
  uint64_t events = 0;  // events written to the file
  bool clean = false;   // false: the process crashed and this was written on the way down
  uint8_t flags = 0;    // kEnd* bits

  // The largest encoding: f64, a 10-byte varint, two bytes.
  static constexpr size_t kMaxBytes = 8 + 10 + 2;
  // Into raw memory with room for kMaxBytes (no allocation: the crash path).
  size_t encode(uint8_t *dst) const;
  void encode(ByteWriter &w) const;
  // Also accepts the flag-less End that crash paths wrote before the shape
  // was unified (flags read as 0).
  bool decode(ByteReader &r);
};

// What the exit report decided that the events cannot show, written once at
// a clean exit after the Stacks and PyStacks chunks its ids refer to: the
// holder scan (memory a Python object still holds is reachable, not leaked),
// the holders each site had at the scans while the program ran (growth
// entries), and each OOM's verdict. A replay that has it agrees with P.json.
struct VerdictRecord {
  // An OOM of the exit report, matched to its OomFail event by time and thread.
  struct Oom {
    uint64_t time_ns = 0;  // the OomFail event's time (CLOCK_MONOTONIC ns)
    uint32_t tid = 0;      // ... and its thread
    bool recovered = false;
    std::vector<Holder> holders;
    RoleSnapshot roles;  // memory by role at the first scan after it
  };
  HolderScan scan;
  std::vector<SiteHolders> site_holders;
  std::vector<Oom> ooms;
  // Trailing fields (docs/tseal-format.md, "Verdict"): memory by role at the
  // exit report's scan, at the highest live total, and at the step scans.
  // Absent from older files, which read without them.
  RoleSnapshot roles_now, roles_peak;
  std::vector<RoleSnapshot> role_steps;

  void encode(ByteWriter &w) const;
  bool decode(ByteReader &r);
};

// Encodes `rec` and appends it as one chunk of `type` to `out`.
template <typename Record>
void append_record(std::vector<uint8_t> &out, Chunk type, const Record &rec) {
  std::vector<uint8_t> payload;
  ByteWriter w(payload);
  rec.encode(w);
  append_chunk(out, type, payload);
}

}  // namespace torchseal::tseal
