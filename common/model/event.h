// The one event model shared by the shim (producer), the history file and the
// analysis library (consumers). Kept plain and fixed-size so the hot path can
// copy it into a thread-local buffer without allocating.
#pragma once

#include <cstdint>
#include <string_view>

namespace torchseal {

enum class Layer : uint8_t { Runtime, Driver };
// Values are stored in history files (verdict records): append only.
enum class Family : uint8_t {
  Device,
  StreamOrdered,
  Managed,
  HostPinned,
  Vmm,
  None,
  HostRegistered,
  Graph  // CUDA graph memory nodes: allocated at graph launch (report kind "graph")
};
inline constexpr Family kLastFamily = Family::Graph;
// Graph: a call that builds, instantiates, launches or destroys a CUDA graph,
// or begins or ends a stream capture (shim/core/graph_mem.h).
// Retain: cuMemRetainAllocationHandle, one more reference to a VMM handle.
enum class Role : uint8_t {
  Alloc,
  Free,
  Teardown,
  Map,
  Unmap,
  Reserve,
  Unreserve,
  Release,
  Graph,
  Retain
};

enum class ApiId : uint16_t {
#define TS_API(id, name, layer, family, role) id,
#include "common/model/api_table.def"
#undef TS_API
  Count,
  Unknown = 0xffff,
};

struct ApiInfo {
  std::string_view name;
  Layer layer;
  Family family;
  Role role;
};

inline constexpr ApiInfo kApiTable[] = {
#define TS_API(id, name, layer, family, role) {name, Layer::layer, Family::family, Role::role},
#include "common/model/api_table.def"
#undef TS_API
};

// id must be below ApiId::Count: Unknown has no row.
constexpr const ApiInfo &api_info(ApiId id) { return kApiTable[static_cast<uint16_t>(id)]; }
constexpr std::string_view api_name(ApiId id) {
  return id < ApiId::Count ? kApiTable[static_cast<uint16_t>(id)].name
                           : std::string_view("unknown");
}
ApiId api_from_name(std::string_view name);  // ApiId::Unknown if not in the table

// Report spelling of a family ("device", "stream-ordered", ...), docs/report-format.md.
std::string_view family_name(Family f);
bool family_from_name(std::string_view s, Family &out);

// What happened. Values are stored in history files: append only.
enum class Op : uint8_t {
  Alloc = 0,        // successful allocation (addr, size)
  Free = 1,         // successful free of a known address
  OomFail = 2,      // allocation failed with out-of-memory (size requested)
  InvalidFree = 3,  // free of an address not in the live table (forwarded unchanged)
  Teardown = 4,     // context/device teardown: everything live on `device` becomes a leak
  Map = 5,          // VMM map of [addr, addr+size) (timeline only)
  Unmap = 6,        // VMM unmap
  Reserve = 7,      // VMM address reservation
  Unreserve = 8,    // VMM address free
  Step = 9,         // one training step ended
  Mark = 10,        // user label (string id in `size`)
  Dump = 11,        // a report written while the program runs (DumpTrigger in `size`)
};
inline constexpr Op kLastOp = Op::Dump;

// What made a dump (Dump events' `size`). Stored in history files: append only.
enum class DumpTrigger : uint8_t { Signal = 1, Api = 2, Oom = 3, Stop = 4 };
// The report's spelling ("signal", "api", "oom", "stop"; "unknown" for a
// code this build does not know), as in P.<n>.json's `trigger`.
std::string_view dump_trigger_name(uint64_t code);
// false for "exit" (not a dump) and any other name.
bool dump_trigger_from_name(std::string_view name, DumpTrigger &out);

// Step events carry the step number in `size`; time-window boundaries (used
// when the program marks no steps) set this bit.
inline constexpr uint64_t kWindowStepBit = 1ull << 63;

using StackId = uint32_t;    // interned native stack; 0 = none
using PyStackId = uint32_t;  // interned Python stack; 0 = none

// One allocator event. 48 bytes; the history file encodes it far more compactly.
struct Event {
  uint64_t time_ns;  // CLOCK_MONOTONIC
  uint64_t addr;     // device/host pointer, or VMM handle for cuMemCreate/Release
  uint64_t size;     // bytes (requested bytes for OomFail)
  uint64_t stream;   // CUstream/cudaStream_t value, 0 for legacy default
  StackId stack;
  PyStackId pystack;
  uint32_t tid;  // kernel thread id
  ApiId api;     // user-facing API (runtime name if a runtime call was hooked)
  Op op;
  Family family;
  int16_t device;  // -1 if unknown
  uint16_t pad = 0;
  uint32_t context = 0;  // small context id (0 = unknown / primary)
};
static_assert(sizeof(Event) == 56, "keep Event compact");

// Where a leak was found (docs/report-format.md, leaks[].detected_at).
enum class DetectedAt : uint8_t { Exit, ContextTeardown };

}  // namespace torchseal
