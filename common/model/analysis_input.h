// What the analysis needs, independent of where it came from: the shim's live
// state at exit/dump time, or a replay of a .tseal history file. Both paths
// build this struct and call analyze(), so they produce the same leak set.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/model/event.h"
#include "common/model/holder.h"

namespace torchseal {

// A loaded object, so raw IPs can be symbolized (in-process or offline).
struct Module {
  std::string path;
  uint64_t base = 0;        // load bias (dlpi_addr)
  uint64_t lo = 0, hi = 0;  // absolute [lo, hi) of its PT_LOAD segments
  std::string build_id;     // hex, may be empty
};

struct PyFrame {
  std::string function;  // co_qualname (3.11+) or co_name
  std::string file;
  int line = 0;
};

// Interned stacks, indexed by StackId / PyStackId (id 0 = empty stack).
struct StackStore {
  std::vector<std::vector<uint64_t>> native;  // raw return addresses, innermost first
  std::vector<std::vector<PyFrame>> python;   // innermost first
};

// One allocation that is still live (or was live at a teardown).
struct LiveAlloc {
  uint64_t addr = 0;
  uint64_t size = 0;
  StackId stack = 0;
  PyStackId pystack = 0;
  ApiId api = ApiId::Unknown;
  Family family = Family::Device;
  int16_t device = -1;
  DetectedAt detected_at = DetectedAt::Exit;
  // VMM: the cuMemMap that still maps this handle (0: none, or not recorded).
  StackId map_stack = 0;
  PyStackId map_pystack = 0;
};

// A live allocation from any record that names the same fields (the shim's
// live-table record, a replayed event): one copy for the shim and the replay.
template <class Record>
LiveAlloc live_alloc_of(const Record &r, DetectedAt at = DetectedAt::Exit) {
  LiveAlloc a;
  a.addr = r.addr;
  a.size = r.size;
  a.stack = r.stack;
  a.pystack = r.pystack;
  a.api = r.api;
  a.family = r.family;
  a.device = r.device;
  a.detected_at = at;
  return a;
}

// A VMM mapping in force: [va, va + size) is backed by the cuMemCreate
// handle `handle` (the addr of its Family::Vmm LiveAlloc).
struct VmmMap {
  uint64_t va = 0;
  uint64_t size = 0;
  uint64_t handle = 0;
  StackId stack = 0;  // the cuMemMap call's stacks (0: not recorded)
  PyStackId pystack = 0;
};

// Memory by role (docs/roles.md). The first six are what the holder scan
// tells of a storage; the rest are what the live set tells of the memory no
// Python object reaches. The order is the report's.
enum class MemoryRole : uint8_t {
  Parameters,
  Buffers,
  Gradients,
  OptimizerState,
  SavedActivations,
  UserHeld,
  OtherTensors,      // allocated by PyTorch, reached by no Python object (temporaries)
  FreeCache,         // the caching allocator's segments, no tensor in them
  LibraryHeld,       // library_held: cuBLAS/cuDNN/NCCL workspaces and handles
  OutsideFramework,  // raw cudaMalloc, extensions, NCCL buffers: by site
};
inline constexpr size_t kRoles = 10;
inline constexpr size_t kScanRoles = 6;  // roles a scanned storage can have

// One CUDA storage the holder scan reached, and the chain that reached it.
struct HeldStorage {
  uint64_t addr = 0;   // untyped_storage().data_ptr()
  uint64_t bytes = 0;  // its nbytes
  uint32_t chain = 0;  // index into HolderScan::chains
  MemoryRole role = MemoryRole::UserHeld;
  int32_t module = -1;  // index into HolderScan::modules (-1: none)
};

// An autograd graph the scan found, owned by the tensor whose grad_fn
// reached it first (docs/holders.md, "Growing autograd graphs").
struct GraphOwner {
  // Root first, down to the owner and its `.grad_fn (X)` step.
  std::vector<std::string> chain;
  uint64_t nodes = 0;  // graph nodes reached first through it
  uint64_t bytes = 0;  // CUDA bytes of the storages its nodes keep
  uint64_t addr = 0;   // the owner tensor's own storage (0: not on the GPU)
};

// The holder scan at the latest safe point of a Python process (empty
// elsewhere, and in a replayed history without a Verdict chunk).
struct HolderScan {
  bool done = false;     // a scan ran
  bool at_exit = false;  // ... while the interpreter was exiting: it decides reachable vs leaked
  bool partial = false;  // stopped at its time budget
  std::vector<std::vector<std::string>> chains;
  std::vector<HeldStorage> storages;
  std::vector<GraphOwner> graphs;    // the largest autograd graphs, largest first
  std::vector<std::string> modules;  // top-level nn.Modules, by type name
  // PyTorch's caching allocator at the scan, all devices (torch.cuda
  // memory_allocated / memory_reserved); absent without it.
  bool allocator_stats = false;
  uint64_t torch_allocated = 0, torch_reserved = 0;
};

// Memory by role at one safe point (docs/roles.md), kept raw: the live set
// by site with what the scan found inside each site's allocations, and the
// scan's storages by role and module. The analysis decides what each site's
// unfound bytes are (free cache, a CUDA library, outside the framework),
// which needs its stack symbolized: the shim keeps the numbers only.
// A site whose api is Unknown is no allocation site: the
// storages Python objects hold in memory allocated before tracking started
// (an interval's start, an attach), each counted once, all found.
struct RoleSite {
  StackId stack = 0;
  PyStackId pystack = 0;
  ApiId api = ApiId::Unknown;
  Family family = Family::Device;
  uint64_t bytes = 0, allocations = 0;
  uint64_t found_bytes = 0;  // storages the scan placed inside them
};
struct RoleFound {
  MemoryRole role = MemoryRole::UserHeld;
  std::string module;  // empty: no module
  uint64_t bytes = 0, tensors = 0;
};
struct RoleSnapshot {
  bool taken = false;
  std::string at;     // step | dump | oom | exit
  uint64_t step = 0;  // the step of the scan (0: none yet)
  uint64_t time_ns = 0;
  uint64_t live_bytes = 0;  // the live set's total, what the roles add up to
  std::vector<RoleSite> sites;
  std::vector<RoleFound> found;
  std::vector<Holder> user_holders;  // the UserHeld storages' top holders
  bool allocator_stats = false;
  uint64_t torch_allocated = 0, torch_reserved = 0;
};

// What a snapshot is ranked by for "the highest live total scanned": its
// live set, or PyTorch's reserved count when that is larger. After an attach
// or an interval's start the live set lacks the older cache, which the
// report's split adds from the reserved count (split_roles), so the live
// set alone could rank a full cache below a later, emptier one.
inline uint64_t role_peak_measure(const RoleSnapshot &s) {
  return s.allocator_stats && s.torch_reserved > s.live_bytes ? s.torch_reserved : s.live_bytes;
}

// One graph owner across the step scans: a loss summed with its graph adds
// nodes step after step while its GPU bytes hardly move.
struct GraphSample {
  uint64_t step = 0, nodes = 0, bytes = 0;
};
struct GraphSeries {
  std::vector<std::string> chain;    // GraphOwner::chain, the same at every scan
  StackId stack = 0;                 // the allocation holding the owner tensor,
  PyStackId pystack = 0;             // where known (0 = none)
  std::vector<GraphSample> samples;  // by step
};

// What held one allocation site's memory at the latest scan before exit
// that found any (a step or a dump). Growth entries take their holders from
// here when the exit scan finds none: by exit a grower is often gone (a
// loop's local, a function's return value), and in tensors mode its blocks
// are freed, so only a scan taken while the program ran can name it.
struct SiteHolders {
  StackId stack = 0;
  PyStackId pystack = 0;
  ApiId api = ApiId::Unknown;
  Family family = Family::None;
  std::vector<Holder> holders;
};

struct SiteSample {
  StackId stack = 0;
  PyStackId pystack = 0;
  ApiId api = ApiId::Unknown;
  Family family = Family::Device;
  uint64_t bytes = 0;
  uint64_t allocations = 0;
};

// Live bytes and allocations per site (stack, Python stack), in the order
// the sites are first seen: what an OOM's snapshot keeps of the live set (all
// a report shows of it is its top sites, and first-seen order breaks their
// ties), so it costs the sites, not the allocations.
class SiteTally {
 public:
  void add(StackId stack, PyStackId pystack, ApiId api, Family family, uint64_t size) {
    auto [it, fresh] = index_.emplace(static_cast<uint64_t>(stack) << 32 | pystack, sites_.size());
    if (fresh) sites_.push_back({stack, pystack, api, family, 0, 0});
    sites_[it->second].bytes += size;
    sites_[it->second].allocations += 1;
  }
  std::vector<SiteSample> take() { return std::move(sites_); }

 private:
  std::unordered_map<uint64_t, size_t> index_;
  std::vector<SiteSample> sites_;
};

struct OomRecord {
  ApiId api = ApiId::Unknown;
  uint64_t requested = 0;
  int16_t device = -1;
  uint64_t live_bytes = 0;  // live bytes at the moment of the OOM
  StackId stack = 0;
  PyStackId pystack = 0;
  std::vector<SiteSample> sites_at_oom;  // the live set at the OOM, by site (SiteTally)
  // The same thread's retry of the request succeeded (the caching allocator
  // freed its cache and tried again): the program never saw this OOM.
  bool recovered = false;
  std::vector<Holder> holders;  // from the first safe point after it
  RoleSnapshot roles;           // ... and memory by role there
  uint64_t time_ns = 0;         // its OomFail event's time (CLOCK_MONOTONIC ns)
  uint32_t tid = 0;             // ... and thread: how a replay finds its verdict
};

struct InvalidFree {
  ApiId api = ApiId::Unknown;
  uint64_t addr = 0;
  StackId stack = 0;
  PyStackId pystack = 0;
};

// Live bytes per allocation site at one step boundary (docs/pytorch.md).
// A site here is the raw (stack, pystack, api) triple; the analysis merges
// triples that symbolize to the same source site.
struct StepSample {
  uint64_t step = 0;              // 1-based step number
  uint64_t time_ns = 0;           // CLOCK_MONOTONIC at the boundary
  std::vector<SiteSample> sites;  // only sites with live bytes > 0
};

struct ProcessInfo {
  int64_t pid = 0;
  std::vector<std::string> argv;
  int64_t rank = -1;  // -1 = no rank
  std::string hostname;
  double start_time = 0;  // unix seconds
  double end_time = 0;
  std::string backend = "hooks";
  std::string python;  // e.g. "3.12.1", empty when no Python
  // What the recording process ran without, and what it cost ("no line
  // numbers: libdw unavailable"); empty when torchseal ran whole.
  std::vector<std::string> degraded;
  // How native stacks were walked ("learned rules + libunwind", "frame
  // pointers only"); empty in reports that predate it.
  std::string unwinder;
};

// A user mark (torchseal_mark), read from a history file.
struct Mark {
  double time = 0;  // unix seconds
  std::string label;
  uint32_t thread = 0;  // kernel thread id
};

struct AnalysisInput {
  std::string trigger = "exit";  // exit | signal | oom | api | stop
  ProcessInfo process;
  std::vector<Module> modules;
  StackStore stacks;
  std::vector<LiveAlloc> live;  // live at exit (+ teardown leaks, flagged)
  std::vector<OomRecord> ooms;
  std::vector<InvalidFree> invalid_frees;
  // Frees of memory allocated before torchseal_start() (or before the shim
  // was attached); bytes only for memory the shim had seen.
  uint64_t preexisting_frees = 0;
  uint64_t preexisting_freed_bytes = 0;
  uint64_t peak_bytes = 0;
  uint64_t events = 0;  // alloc + free events incl. OOMs and invalid frees
  double seconds_in_torchseal = 0;
  bool torch_caching_allocator = false;   // live memory at exit is cached, not leaked
  bool torch_process = false;             // PyTorch's CUDA library is loaded (any mode)
  std::vector<StepSample> steps;          // one per step boundary, oldest first
  std::vector<Mark> marks;                // oldest first (history files only)
  HolderScan holders;                     // Python processes: who holds the live memory
  std::vector<SiteHolders> site_holders;  // ... per site, at the scans before exit
  std::vector<GraphSeries> graph_series;  // ... autograd graphs, at the step scans
  std::vector<VmmMap> vmm_maps;           // ascending by va: places storages in VMM handles
  // Memory by role (docs/roles.md): at this report's scan, at the scan with
  // the highest live total, and at the step scans (oldest first, thinned).
  RoleSnapshot roles_now, roles_peak;
  std::vector<RoleSnapshot> role_steps;
};

}  // namespace torchseal
