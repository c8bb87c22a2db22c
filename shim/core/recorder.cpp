#include "shim/core/recorder.h"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <new>

#include "common/live/live_rules.h"
#include "common/model/run_summary.h"
#include "common/symbols/module_map.h"  // is_internal_module
#include "common/util/fork_safe.h"
#include "common/util/log.h"
#include "shim/core/activation.h"
#include "shim/core/counters.h"
#include "shim/core/mark_labels.h"
#include "shim/core/python/python_frames.h"
#include "shim/core/thread_buffers.h"
#include "shim/core/unwind/unwinder.h"

namespace torchseal {

namespace {
// Full live-set snapshots are kept for the first OOMs only: an allocator that
// retries after OOM (PyTorch frees its cache and tries again) may fail often.
constexpr size_t kMaxOomSnapshots = 8;
constexpr size_t kMaxInvalidFrees = 1000;
// OOM dumps: the first OOM writes P.<n>.json with trigger "oom"; an allocator
// that retries in a loop gets at most one automatic dump per interval.
constexpr uint64_t kOomDumpIntervalNs = 30ull * 1000 * 1000 * 1000;
std::atomic<uint64_t> g_last_oom_dump{0};

Event make_event(Op op, ApiId api, Family family, uint64_t t, uint64_t addr, uint64_t size) {
  Event e{};
  e.time_ns = t;
  e.op = op;
  e.api = api;
  e.family = family;
  e.addr = addr;
  e.size = size;
  e.device = -1;
  return e;
}

}  // namespace

StackId Recorder::capture() {
  // Interned straight from the unwinder's buffer: no copy (bench/RESULTS.md).
  uint64_t buf[kCaptureBufFrames];
  int n;
  uint64_t hash;
  const uint64_t *ips = capture_stack_inplace(buf, std::min(stack_depth, 256), &n, &hash);
  return stacks_.intern(ips, n, hash);
}

void Recorder::on_alloc(ApiId api, Family family, uint64_t addr, uint64_t size, int device,
                        uint64_t stream, uint32_t context) {
  uint64_t t0 = now_ns();
  LiveRecord r{};
  r.addr = addr;
  r.size = size;
  r.stack = capture();
  r.pystack = py::capture();
  r.api = api;
  r.family = family;
  r.device = static_cast<int8_t>(device);
  r.context = context;
  LiveRecord old{};
  if (!table_for(family).insert(r, &old)) counters().add_live(-static_cast<int64_t>(old.size));
  counters().add_live(static_cast<int64_t>(size));
  if (family == Family::Vmm) forget_extra_refs(addr);
  if (history::enabled()) {
    Event e = make_event(Op::Alloc, api, family, t0, addr, size);
    e.stack = r.stack;
    e.pystack = r.pystack;
    e.stream = stream;
    e.device = static_cast<int16_t>(device);
    e.context = context;
    history::append(e);
  }
  counters().end_event(t0);
}

FreeToken Recorder::on_free(ApiId api, Family family, uint64_t addr, uint64_t) {
  uint64_t t0 = now_ns();
  FreeToken t;
  if (family == Family::Vmm) {
    // A retained reference's release: the handle lives on, nothing happened.
    Guard g(misc_lock_);
    auto it = vmm_extra_refs_.find(addr);
    if (it != vmm_extra_refs_.end()) {
      if (--it->second == 0) vmm_extra_refs_.erase(it);
      t.known = t.balanced = true;
      t.rec.addr = addr;
      return t;
    }
  }
  if (family == Family::Vmm && vmm_.find(addr, &t.rec)) {
    bool now;
    {
      Guard g(misc_lock_);
      now = vmm_maps_.release(addr);
    }
    if (!now) {
      // Mapped: the memory goes at its last unmap (on_vmm_range). The
      // history says released; its replay applies the same rule.
      t.known = t.deferred = true;
      if (history::enabled()) history::append(make_event(Op::Free, api, family, t0, addr, 0));
      counters().end_event(t0);
      return t;
    }
  }
  t.known = table_for(family).remove(addr, &t.rec);
  if (t.known) {
    counters().add_live(-static_cast<int64_t>(t.rec.size));
    if (history::enabled()) history::append(make_event(Op::Free, api, family, t0, addr, 0));
  } else if (free_preexisting(api, family, addr, t0)) {
    // counted there
  } else {
    InvalidFree f;
    f.api = api;
    f.addr = addr;
    f.stack = capture();
    f.pystack = py::capture();
    if (history::enabled()) {
      Event e = make_event(Op::InvalidFree, api, family, t0, addr, 0);
      e.stack = f.stack;
      e.pystack = f.pystack;
      history::append(e);
    }
    Guard g(misc_lock_);
    ++invalid_frees_total_;
    if (invalid_frees_.size() < kMaxInvalidFrees) invalid_frees_.push_back(f);
  }
  counters().end_event(t0);
  return t;
}

bool Recorder::free_preexisting(ApiId api, Family family, uint64_t addr, uint64_t t0) {
  LiveRecord rec{};
  bool known = interval_.load(std::memory_order_relaxed) &&
               (family == Family::Vmm ? pre_vmm_ : pre_live_).remove(addr, &rec);
  if (!known && !attached_late_.load(std::memory_order_relaxed)) return false;
  if (known) {
    counters().add_live(-static_cast<int64_t>(rec.size));
    // The history saw it allocated: it sees it freed.
    if (history::enabled()) history::append(make_event(Op::Free, api, family, t0, addr, 0));
  }
  Guard g(misc_lock_);
  ++preexisting_frees_;
  preexisting_freed_bytes_ += rec.size;
  return true;
}

void Recorder::begin_interval() {
  // A free racing with the move finds the record in one table or the other:
  // `take` runs under the source shard's lock.
  for (auto [from, to] : {std::pair{&live_, &pre_live_}, std::pair{&vmm_, &pre_vmm_}})
    from->remove_if([](const LiveRecord &) { return true; },
                    [to = to](const LiveRecord &r) { to->insert(r, nullptr); });
  {
    Guard g(misc_lock_);
    preexisting_frees_ = preexisting_freed_bytes_ = 0;
  }
  interval_.store(true, std::memory_order_release);
}

void Recorder::end_interval() {
  if (!interval_.exchange(false, std::memory_order_acq_rel)) return;
  for (auto [from, to] : {std::pair{&pre_live_, &live_}, std::pair{&pre_vmm_, &vmm_}})
    from->remove_if([](const LiveRecord &) { return true; },
                    [to = to](const LiveRecord &r) {
                      LiveRecord old{};
                      // An address reused inside the interval was freed
                      // first: the newer record is the live one.
                      if (!to->find(r.addr, &old))
                        to->insert(r, nullptr);
                      else
                        counters().add_live(-static_cast<int64_t>(r.size));
                    });
}

namespace {
// The history's record that `r`, logged freed (or released), is live again.
void append_live_again(const LiveRecord &r) {
  Event e = make_event(Op::Alloc, r.api, r.family, now_ns(), r.addr, r.size);
  e.stack = r.stack;
  e.pystack = r.pystack;
  e.device = r.device;
  e.context = r.context;
  history::append(e);
}
}  // namespace

void Recorder::undo_free(const FreeToken &t) {
  if (!t.known) return;
  if (t.balanced) {
    Guard g(misc_lock_);
    ++vmm_extra_refs_[t.rec.addr];
    return;
  }
  if (history::enabled()) {
    // The free was already logged; the failed real free means it is live
    // again (for a VMM handle: unreleased again, in the replay too).
    append_live_again(t.rec);
  }
  if (t.deferred) {
    // Nothing was removed: only the release is undone.
    Guard g(misc_lock_);
    vmm_maps_.unrelease(t.rec.addr);
    return;
  }
  LiveRecord old{};
  if (!table_for(t.rec.family).insert(t.rec, &old))
    counters().add_live(-static_cast<int64_t>(old.size));
  counters().add_live(static_cast<int64_t>(t.rec.size));
}

namespace {
// A retry is the same request when it asks for the same bytes from the same
// Python stack and, past the CUDA libraries' own frames, its native stack
// has the failed attempt's depth and differs only in the innermost frames:
// the allocator's retry call sites (PyTorch: DeviceCachingAllocator::malloc
// calls alloc_block again after freeing its cache). A program that handles
// the error and allocates again from its own code comes back through a
// different outer stack.
constexpr int kRetryFrames = 3;
constexpr int kChainDepth = 64;
// A pending OOM not retried within this long was the program's to see.
constexpr uint64_t kOomSettleNs = 2ull * 1000 * 1000 * 1000;

uint32_t this_tid() { return static_cast<uint32_t>(syscall(SYS_gettid)); }

// Frames inside the CUDA libraries, CUPTI or torchseal differ between a
// failing and a succeeding call: a request's identity starts past them.
int first_caller_frame(const uint64_t *ips, int n) {
  int i = 0;
  for (; i < n; ++i) {
    Dl_info info;
    if (!dladdr(reinterpret_cast<void *>(ips[i] - 1), &info) || !info.dli_fname ||
        !is_internal_module(info.dli_fname))
      break;
  }
  return i;
}

bool same_request(const std::vector<uint64_t> &failed, const uint64_t *ips, int n) {
  int fn = static_cast<int>(failed.size());
  int fs = first_caller_frame(failed.data(), fn), s = first_caller_frame(ips, n);
  if (fn - fs != n - s) return false;
  for (int i = kRetryFrames; i < n - s; ++i)
    if (failed[static_cast<size_t>(fs + i)] != ips[s + i]) return false;
  return true;
}
}  // namespace

void Recorder::request_oom_dump(uint64_t t) {
  uint64_t last = g_last_oom_dump.load(std::memory_order_relaxed);
  if ((last == 0 || t - last >= kOomDumpIntervalNs) &&
      g_last_oom_dump.compare_exchange_strong(last, t | 1))
    history::request_dump("oom");
}

// Under misc_lock_. Moves the chain's records to ooms_; `dump` tells the
// caller to ask for the OOM dump once the lock is released.
void Recorder::resolve_locked(OomChain &c, bool recovered, bool &dump) {
  for (OomRecord &o : c.records) {
    o.recovered = recovered;
    // Recovered retries are routine in a long PyTorch run: they keep their
    // own few slots so they never crowd out the OOM the program saw.
    if (recovered && recovered_kept_ >= kMaxOomSnapshots) continue;
    recovered_kept_ += recovered;
    ooms_.push_back(std::move(o));
  }
  dump = dump || !recovered;
}

void Recorder::on_oom(ApiId api, Family family, uint64_t size, int device) {
  uint64_t t0 = now_ns();
  OomRecord o;
  o.api = api;
  o.requested = size;
  o.device = static_cast<int16_t>(device);
  o.stack = capture();
  o.pystack = py::capture();
  o.live_bytes = counters().live_bytes();
  o.time_ns = t0;
  o.tid = this_tid();
  if (history::enabled()) {
    Event e = make_event(Op::OomFail, api, family, t0, 0, size);
    e.stack = o.stack;
    e.pystack = o.pystack;
    e.device = static_cast<int16_t>(device);
    history::append(e);
  }
  uint64_t ips[kChainDepth];
  int n = capture_stack(ips, kChainDepth);
  const uint32_t tid = o.tid;
  bool keep;
  {
    Guard g(misc_lock_);
    size_t unsettled = ooms_.size() - recovered_kept_;
    for (const OomChain &c : pending_ooms_) unsettled += c.records.size();
    keep = unsettled < kMaxOomSnapshots;
    ++ooms_total_;
  }
  // The snapshot is taken now, at the failure, whatever is decided later.
  if (keep) {
    SiteTally tally;
    for (LiveTable *t : {&live_, &vmm_})
      t->for_each([&](const LiveRecord &r) {
        LiveAlloc a = live_alloc_of(r, DetectedAt::Exit);
        tally.add(a.stack, a.pystack, a.api, a.family, a.size);
      });
    o.sites_at_oom = tally.take();
  }
  bool dump = false;
  {
    Guard g(misc_lock_);
    auto it = std::find_if(pending_ooms_.begin(), pending_ooms_.end(),
                           [&](const OomChain &c) { return c.tid == tid; });
    if (it != pending_ooms_.end() &&
        !(it->requested == size && it->pystack == o.pystack && same_request(it->ips, ips, n))) {
      // A different request failed: the earlier one was final.
      resolve_locked(*it, false, dump);
      pending_ooms_.erase(it);
      it = pending_ooms_.end();
    }
    if (it == pending_ooms_.end()) {
      OomChain c;
      c.tid = tid;
      c.requested = size;
      c.pystack = o.pystack;
      c.ips.assign(ips, ips + n);
      c.since_ns = t0;
      pending_ooms_.push_back(std::move(c));
      it = pending_ooms_.end() - 1;
    }
    if (keep) it->records.push_back(std::move(o));
  }
  if (dump) request_oom_dump(t0);
  counters().end_event(t0);
  // The verdict comes with this thread's next allocation (on_oom_watch).
  counters().watch_thread(&Recorder::on_oom_watch);
}

bool Recorder::on_oom_watch(int64_t delta) {
  // Frees (the allocator releasing its cache) and the OOM's own count come
  // first; the first allocation decides.
  if (delta <= 0) return false;
  recorder().settle_oom_retry(static_cast<uint64_t>(delta));
  return true;
}

void Recorder::settle_oom_retry(uint64_t size) {
  // Inside the retry's on_alloc: the same stacks that call recorded.
  uint64_t ips[kChainDepth];
  int n = capture_stack(ips, kChainDepth);
  PyStackId pystack = py::capture();
  uint32_t tid = this_tid();
  bool dump = false;
  {
    Guard g(misc_lock_);
    auto it = std::find_if(pending_ooms_.begin(), pending_ooms_.end(),
                           [&](const OomChain &c) { return c.tid == tid; });
    if (it == pending_ooms_.end()) return;  // settled by the writer's timeout
    bool same = it->requested == size && it->pystack == pystack && same_request(it->ips, ips, n);
    log::debug("OOM of %llu bytes %s by this thread's next allocation (%llu bytes)",
               static_cast<unsigned long long>(it->requested), same ? "recovered" : "not recovered",
               static_cast<unsigned long long>(size));
    resolve_locked(*it, same, dump);
    pending_ooms_.erase(it);
  }
  if (dump) request_oom_dump(now_ns());
}

void Recorder::settle_ooms(bool all) {
  uint64_t t = now_ns();
  bool dump = false;
  {
    Guard g(misc_lock_);
    std::erase_if(pending_ooms_, [&](OomChain &c) {
      if (!all && t - c.since_ns < kOomSettleNs) return false;
      resolve_locked(c, false, dump);
      return true;
    });
  }
  if (dump) request_oom_dump(t);
}

void Recorder::on_teardown(ApiId api, int device, uint32_t context) {
  if (history::enabled()) {
    Event e = make_event(Op::Teardown, api, Family::None, now_ns(), 0, 0);
    e.device = static_cast<int16_t>(device);
    e.context = context;
    history::append(e);
  }
  std::vector<LiveAlloc> dead;
  auto dies = [&](const LiveRecord &r) {
    return live::ends_at_teardown(context, device, r.context, r.device);
  };
  std::vector<uint64_t> dead_handles;
  for (LiveTable *t : {&live_, &vmm_})
    t->remove_if(dies, [&](const LiveRecord &r) {
      dead.push_back(live_alloc_of(r, DetectedAt::ContextTeardown));
      if (r.family == Family::Vmm) dead_handles.push_back(r.addr);
      counters().add_live(-static_cast<int64_t>(r.size));
    });
  if (!dead_handles.empty()) {
    Guard g(misc_lock_);
    for (uint64_t h : dead_handles) vmm_maps_.forget(h);
  }
  // Pre-existing memory dies with its context too; it is not the interval's.
  for (LiveTable *t : {&pre_live_, &pre_vmm_})
    t->remove_if(dies,
                 [&](const LiveRecord &r) { counters().add_live(-static_cast<int64_t>(r.size)); });
  if (dead.empty()) return;
  Guard g(misc_lock_);
  teardown_leaks_.insert(teardown_leaks_.end(), dead.begin(), dead.end());
}

StepSample Recorder::sample_sites(uint64_t step, uint64_t t) {
  StepSample s;
  s.step = step;
  s.time_ns = t;
  live::StepSites sites;
  for (LiveTable *tab : {&live_, &vmm_})
    tab->for_each(
        [&](const LiveRecord &r) { sites.add(r.stack, r.pystack, r.api, r.family, r.size); });
  s.sites = sites.take();
  return s;
}

namespace {
// An append the shim makes outside any hook (a step, a mark, a dump): a CUDA
// call that a signal handler makes meanwhile counts as nested, as inside a
// hook, so it never appends into this thread's half-written event.
void append_outside_hook(const Event &e) {
  ++hook_detail::t_depth;
  history::append(e);
  --hook_detail::t_depth;
}
}  // namespace

void Recorder::on_step(bool window) {
  // A time window that ends while Python tears down would sample what the
  // teardown freed (the series ending in 0 hid steady growth), not what
  // the program kept.
  if (window && py::interpreter_exiting()) return;
  uint64_t t = now_ns();
  uint64_t n = (window ? windows_ : steps_).fetch_add(1, std::memory_order_relaxed) + 1;
  if (history::enabled())
    append_outside_hook(make_event(Op::Step, ApiId::Unknown, Family::None, t, 0,
                                   window ? (n | kWindowStepBit) : n));
  StepSample s = sample_sites(n, t);
  Guard g(misc_lock_);
  // Bounded series: past the cap, every other sample is dropped, so a long
  // run keeps an evenly thinned history (the rule a history's replay follows).
  push_step_sample(window ? window_samples_ : step_samples_, std::move(s));
}

void Recorder::on_mark(const char *label) {
  // Marks live in the history only: without one there is nowhere to show them.
  if (!history::enabled()) return;
  uint64_t t = now_ns();
  if (uint32_t id = history::intern_label(label))
    append_outside_hook(make_event(Op::Mark, ApiId::Unknown, Family::None, t, 0, id));
}

void Recorder::on_dump(DumpTrigger trigger) {
  if (!history::enabled()) return;
  append_outside_hook(make_event(Op::Dump, ApiId::Unknown, Family::None, now_ns(), 0,
                                 static_cast<uint64_t>(trigger)));
}

void Recorder::forget_extra_refs(uint64_t handle) {
  Guard g(misc_lock_);
  vmm_extra_refs_.erase(handle);
}

void Recorder::on_vmm_retain(uint64_t handle) {
  LiveRecord rec{};
  const bool tracked = vmm_.find(handle, &rec);
  bool revived = false;
  {
    Guard g(misc_lock_);
    if (tracked && vmm_maps_.is_released(handle)) {
      vmm_maps_.unrelease(handle);
      revived = true;
    } else {
      ++vmm_extra_refs_[handle];
    }
  }
  // As a failed release (undo_free): live again, unreleased in the replay.
  if (revived && history::enabled()) append_live_again(rec);
}

void Recorder::on_vmm_range(Op op, uint64_t addr, uint64_t size, uint64_t handle) {
  uint64_t t0 = now_ns();
  // A mapping names its site: memory released while mapped leaks there.
  StackId stack = op == Op::Map ? capture() : 0;
  PyStackId pystack = op == Op::Map ? py::capture() : 0;
  std::vector<uint64_t> gone;
  if (op == Op::Map || op == Op::Unmap) {
    Guard g(misc_lock_);
    vmm_maps_.apply(op, addr, size, handle, &gone, stack, pystack);
  }
  // Released handles this unmap took the last mapping of: freed now.
  for (uint64_t h : gone) {
    LiveRecord rec{};
    if (vmm_.remove(h, &rec)) counters().add_live(-static_cast<int64_t>(rec.size));
  }
  if (!history::enabled()) return;
  ApiId api = op == Op::Map       ? ApiId::cuMemMap
              : op == Op::Unmap   ? ApiId::cuMemUnmap
              : op == Op::Reserve ? ApiId::cuMemAddressReserve
                                  : ApiId::cuMemAddressFree;
  Event e = make_event(op, api, Family::Vmm, t0, addr, size);
  e.stream = handle;
  e.stack = stack;
  e.pystack = pystack;
  history::append(e);
}

void Recorder::on_graph_node(ApiId api, uint64_t graph, bool alloc, uint64_t va, uint64_t size,
                             int device, uint32_t context) {
  GraphMemNode n;
  n.alloc = alloc;
  n.va = va;
  n.size = size;
  n.device = device;
  n.context = context;
  if (alloc) {
    uint64_t ips[256];
    int k = capture_stack(ips, std::min(stack_depth, 256));
    n.ips.assign(ips, ips + k);
    n.pystack = py::capture();
    if (history::enabled()) {
      // The reserved address, on the timeline (it owns no memory yet).
      Event e = make_event(Op::Reserve, api, Family::Graph, now_ns(), va, size);
      e.stream = graph;
      history::append(e);
    }
  }
  graphs_.add_node(graph, std::move(n));
}

void Recorder::freed(ApiId api, Family family, uint64_t addr, uint64_t size, uint64_t t) {
  counters().add_live(-static_cast<int64_t>(size));
  if (history::enabled()) history::append(make_event(Op::Free, api, family, t, addr, 0));
  counters().end_event(t);
}

void Recorder::on_graph_launch(ApiId api, uint64_t exec, uint64_t stream) {
  std::vector<GraphMemNode> nodes;
  if (!graphs_.launch_nodes(exec, nodes)) return;
  // The stack of each allocation: the node's creation site (the allocating
  // line), then the launch's own frames.
  uint64_t launch[256];
  int nl = capture_stack(launch, std::min(stack_depth, 256));
  for (const GraphMemNode &n : nodes) {
    uint64_t t = now_ns();
    LiveRecord old{};
    if (!n.alloc) {
      // A free node of a graph allocation that is not live frees nothing
      // we saw: never an invalid free.
      if (live_.remove(n.va, &old)) freed(api, old.family, n.va, old.size, t);
      continue;
    }
    // Still live at a relaunch: freed by it (AutoFreeOnLaunch; without the
    // flag the driver refuses the launch, which is then not recorded).
    if (live_.remove(n.va, &old)) freed(api, Family::Graph, n.va, old.size, t);
    uint64_t ips[512];
    int k = 0;
    for (uint64_t ip : n.ips) ips[k++] = ip;
    for (int i = 0; i < nl && k < 512; ++i) ips[k++] = launch[i];
    LiveRecord r{};
    r.addr = n.va;
    r.size = n.size;
    r.stack = stacks_.intern(ips, k);
    r.pystack = n.pystack;
    r.api = api;
    r.family = Family::Graph;
    r.device = static_cast<int8_t>(n.device);
    r.context = n.context;
    live_.insert(r, nullptr);
    counters().add_live(static_cast<int64_t>(n.size));
    if (history::enabled()) {
      Event e = make_event(Op::Alloc, api, Family::Graph, t, n.va, n.size);
      e.stack = r.stack;
      e.pystack = r.pystack;
      e.stream = stream;
      e.device = static_cast<int16_t>(n.device);
      e.context = n.context;
      history::append(e);
    }
    counters().end_event(t);
  }
}

void Recorder::snapshot(AnalysisInput &in) {
  stacks_.export_all(in.stacks.native);
  py::export_all(in.stacks.python);
  live_now(in);
  ooms(in.ooms);
  {
    Guard g(misc_lock_);
    in.live.insert(in.live.end(), teardown_leaks_.begin(), teardown_leaks_.end());
    // Explicit steps win; time windows stand in only when there are none.
    in.steps = step_samples_.empty() ? window_samples_ : step_samples_;
    in.invalid_frees = invalid_frees_;
    in.preexisting_frees = preexisting_frees_;
    in.preexisting_freed_bytes = preexisting_freed_bytes_;
  }
  in.peak_bytes = counters().peak_bytes();
  in.events = counters().events();
  in.seconds_in_torchseal = counters().self_seconds();
}

void Recorder::ooms(std::vector<OomRecord> &out) {
  Guard g(misc_lock_);
  out = ooms_;
  // Not decided yet (a dump while a retry is under way).
  for (const OomChain &c : pending_ooms_) out.insert(out.end(), c.records.begin(), c.records.end());
}

void Recorder::live_now(AnalysisInput &in) {
  in.live.clear();
  for (LiveTable *t : {&live_, &vmm_})
    t->for_each(
        [&](const LiveRecord &r) { in.live.push_back(live_alloc_of(r, DetectedAt::Exit)); });
  Guard g(misc_lock_);
  in.vmm_maps = vmm_maps_.list();
  note_map_sites(vmm_maps_, in.live);
}

uint64_t Recorder::events() const { return counters().events(); }
uint64_t Recorder::live_bytes() const { return counters().live_bytes(); }

uint64_t Recorder::ooms_seen() {
  Guard g(misc_lock_);
  return ooms_total_;
}

void Recorder::reset_after_fork() {
  // Only the forking thread survives. Any other thread may have been inside
  // one of these containers (a vector mid-reallocation, a shard mid-grow),
  // so their memory is abandoned, never freed: freeing a half-updated
  // vector is a double free. The child starts from empty tables; what the
  // parent allocated is not the child's to free or leak (CUDA state does not
  // survive fork either).
  new (&stacks_) StackTable();
  new (&live_) LiveTable();
  new (&vmm_) LiveTable();
  new (&pre_live_) LiveTable();
  new (&pre_vmm_) LiveTable();
  interval_.store(false);
  preexisting_frees_ = preexisting_freed_bytes_ = 0;
  new (&misc_lock_) ShardLock();
  new (&teardown_leaks_) std::vector<LiveAlloc>();
  new (&ooms_) std::vector<OomRecord>();
  new (&pending_ooms_) std::vector<OomChain>();
  recovered_kept_ = 0;
  new (&invalid_frees_) std::vector<InvalidFree>();
  new (&vmm_maps_) VmmMapTable();
  new (&vmm_extra_refs_) std::unordered_map<uint64_t, uint32_t>();
  graphs_.reset_after_fork();
  new (&step_samples_) std::vector<StepSample>();
  new (&window_samples_) std::vector<StepSample>();
  ooms_total_ = invalid_frees_total_ = 0;
  steps_.store(0);
  windows_.store(0);
  counters().reset();
}

std::atomic<Recorder *> recorder_detail::g_recorder{nullptr};

Recorder &recorder_detail::recorder_slow() {
  // Never destroyed: threads may still allocate while the process exits, and
  // the exit report itself runs from a destructor.
  static constinit Lazy<Recorder> r_lazy;
  Recorder *r = &r_lazy.get();
  g_recorder.store(r, std::memory_order_release);
  return *r;
}

}  // namespace torchseal
