// The core every backend feeds (heaptrack's "one core, thin interposers"):
// it knows nothing about how a call was intercepted. Hooks call it after a
// successful allocation and *before* forwarding a free, so an address can
// never be reused by another thread between the real free and our removal.
#pragma once

#include <atomic>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/model/analysis_input.h"
#include "common/model/vmm_maps.h"
#include "shim/core/graph_mem.h"
#include "shim/core/live_table.h"
#include "shim/core/stack_table.h"

namespace torchseal {

struct FreeToken {
  bool known = false;
  bool deferred = false;  // a VMM release that mappings keep alive: nothing was removed
  bool balanced = false;  // a VMM release of a retained reference (rec.addr: the handle)
  LiveRecord rec{};
};

class Recorder {
 public:
  void on_alloc(ApiId api, Family family, uint64_t addr, uint64_t size, int device, uint64_t stream,
                uint32_t context);
  FreeToken on_free(ApiId api, Family family, uint64_t addr, uint64_t stream);
  // The real free failed: the allocation is still live after all.
  void undo_free(const FreeToken &t);
  // A failed allocation. Whether the program saw it is decided later
  // (settle_oom_retry, settle_ooms): until then it is pending, with the
  // snapshot taken now. Only an unrecovered one asks for an OOM dump.
  void on_oom(ApiId api, Family family, uint64_t size, int device);
  // Pending OOMs that waited too long for a retry (all of them with `all`,
  // at exit) become unrecovered, with their OOM dump. From the writer
  // thread and at exit, never inside an intercepted call.
  void settle_ooms(bool all);
  // Everything live on `device` (or in `context`, when non-zero) is freed by
  // the driver now: it becomes a leak detected at context teardown.
  void on_teardown(ApiId api, int device, uint32_t context);
  // A training step ended (torchseal_step, an NVTX range): sample live bytes
  // per site. `window` marks a time-window boundary, used only when the
  // program never marks steps itself.
  void on_step(bool window = false);
  // A user mark (torchseal_mark): a labelled point on the history timeline.
  void on_mark(const char *label);
  // A dump report is being written now: a point on the history timeline.
  // From any thread, the service thread too (history::append records
  // whatever thread calls it; only the hooks skip internal threads).
  void on_dump(DumpTrigger trigger);
  bool explicit_steps() const { return steps_.load(std::memory_order_relaxed) != 0; }
  // Steps so far: the program's own, or time windows (`window`).
  uint64_t steps_seen(bool window) const {
    return (window ? windows_ : steps_).load(std::memory_order_relaxed);
  }
  // VMM address-space operations: they own no memory; maps and unmaps also
  // keep the current mappings, which place tensors in their handles.
  void on_vmm_range(Op op, uint64_t addr, uint64_t size, uint64_t handle);
  // cuMemRetainAllocationHandle returned `handle`: one more reference to
  // it, which a cuMemRelease balances without ending the handle (NCCL frees
  // its buffers by retain, release, unmap, release). A handle the program
  // had released while mapped is the program's again.
  void on_vmm_retain(uint64_t handle);

  // CUDA graphs (graph_mem.h). A memory node added to `graph`: an
  // allocation node reserves [va, va + size), a free node frees va when
  // the graph launches. From the hooks after the call succeeded.
  void on_graph_node(ApiId api, uint64_t graph, bool alloc, uint64_t va, uint64_t size, int device,
                     uint32_t context);
  void on_graph_instantiate(uint64_t exec, uint64_t graph) { graphs_.instantiate(exec, graph); }
  // `exec` was launched: its allocation nodes allocate (at the node's
  // creation site, called from here), its free nodes free.
  void on_graph_launch(ApiId api, uint64_t exec, uint64_t stream);
  void on_graph_destroy(uint64_t graph) { graphs_.destroy_graph(graph); }
  void on_graph_exec_destroy(uint64_t exec) { graphs_.destroy_exec(exec); }
  GraphMemTable &graphs() { return graphs_; }

  // An interval (torchseal_start .. torchseal_stop): what is live at its
  // start is pre-existing. It moves aside, so the interval's report lists
  // only what was allocated inside it; its frees are counted, not invalid.
  // end_interval() puts it back for the exit report. Live bytes and the peak
  // stay the process's.
  void begin_interval();
  void end_interval();
  // The shim was attached to a process that had already allocated
  // (torchseal.start() without LD_PRELOAD): a free of an address never seen
  // is pre-existing memory going away, not an invalid free.
  void set_attached_late() { attached_late_.store(true, std::memory_order_relaxed); }
  bool attached_late() const { return attached_late_.load(std::memory_order_relaxed); }
  bool in_interval() const { return interval_.load(std::memory_order_relaxed); }

  // Builds the analysis input from the current state (exit, signal, API dump).
  void snapshot(AnalysisInput &in);
  // The OOMs a report lists: the decided ones, then the pending ones as the
  // program would see them if nothing retried.
  void ooms(std::vector<OomRecord> &out);
  // The live allocations and VMM mappings now, without exporting stacks (a
  // holder scan's view).
  void live_now(AnalysisInput &in);
  uint64_t events() const;
  // OOMs seen so far (including those past the kept snapshots).
  uint64_t ooms_seen();
  uint64_t live_bytes() const;
  // Forget everything inherited from the parent (child side of fork).
  void reset_after_fork();

  int stack_depth = 64;
  StackTable &stacks() { return stacks_; }

 private:
  StackId capture();
  // A free of a known live record: accounting and history.
  void freed(ApiId api, Family family, uint64_t addr, uint64_t size, uint64_t t);
  // An OOM whose verdict waits for its thread's next allocation: the failed
  // attempts of one request (a retry that fails again joins the chain).
  struct OomChain {
    uint32_t tid = 0;
    uint64_t requested = 0;
    PyStackId pystack = 0;
    std::vector<uint64_t> ips;  // the first failed attempt's native stack
    uint64_t since_ns = 0;
    std::vector<OomRecord> records;  // snapshots kept, at most kMaxOomSnapshots
  };
  // The calling thread's next allocation after its OOM (counters' watch).
  static bool on_oom_watch(int64_t delta);
  void settle_oom_retry(uint64_t size);
  void resolve_locked(OomChain &c, bool recovered, bool &dump);
  static void request_oom_dump(uint64_t t);
  StepSample sample_sites(uint64_t step, uint64_t t);
  LiveTable &table_for(Family f) { return f == Family::Vmm ? vmm_ : live_; }
  // A handle value the driver hands out again starts with no extra refs.
  void forget_extra_refs(uint64_t handle);
  // A free that missed the live tables: pre-existing memory (counted), or
  // false for an invalid free.
  bool free_preexisting(ApiId api, Family family, uint64_t addr, uint64_t t0);

  StackTable stacks_;
  LiveTable live_;
  LiveTable vmm_;        // cuMemCreate handles: their own namespace, not addresses
  ShardLock misc_lock_;  // guards the rare-event lists below
  std::vector<LiveAlloc> teardown_leaks_;
  std::vector<OomRecord> ooms_;         // decided ones
  std::vector<OomChain> pending_ooms_;  // one per thread at most; under misc_lock_
  size_t recovered_kept_ = 0;
  std::vector<InvalidFree> invalid_frees_;
  VmmMapTable vmm_maps_;  // under misc_lock_
  // VMM handles' references beyond the one the live table (or, for a handle
  // from before tracking, its unseen creator) holds; under misc_lock_.
  std::unordered_map<uint64_t, uint32_t> vmm_extra_refs_;
  GraphMemTable graphs_;
  std::atomic<uint64_t> steps_{0};
  std::atomic<uint64_t> windows_{0};
  std::vector<StepSample> step_samples_, window_samples_;  // under misc_lock_
  uint64_t ooms_total_ = 0;
  uint64_t invalid_frees_total_ = 0;
  // Pre-existing allocations during an interval (begin_interval).
  LiveTable pre_live_;
  LiveTable pre_vmm_;
  std::atomic<bool> interval_{false};
  std::atomic<bool> attached_late_{false};
  uint64_t preexisting_frees_ = 0;        // under misc_lock_
  uint64_t preexisting_freed_bytes_ = 0;  // known only for memory seen before
};

namespace recorder_detail {
extern std::atomic<Recorder *> g_recorder;  // set by the first recorder_slow()
Recorder &recorder_slow();
}  // namespace recorder_detail
// The process's recorder, built on first use and never destroyed.
inline Recorder &recorder() {
  Recorder *r = recorder_detail::g_recorder.load(std::memory_order_acquire);
  return r ? *r : recorder_detail::recorder_slow();
}

}  // namespace torchseal
