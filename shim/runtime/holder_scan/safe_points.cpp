#include "shim/runtime/holder_scan/safe_points.h"

#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "common/util/fork_safe.h"
#include "common/util/log.h"
#include "holder_scan_source.h"
#include "report/analysis/holders.h"  // report/lib: all_holders
#include "report/analysis/roles.h"    // report/lib: role_snapshot
#include "shim/core/activation.h"
#include "shim/core/python/python_frames.h"
#include "shim/core/recorder.h"
#include "shim/runtime/holder_scan/cpython_api.h"

namespace torchseal::holders {
namespace {

// Time budgets of one scan (seconds). A step scan is also rate-limited to
// kStepShare of the time between scans; the exit scan decides reachable
// against leaked, so it gets the most room.
constexpr double kStepBudget = 0.5;
constexpr double kDumpBudget = 2.0;
constexpr double kExitBudget = 10.0;
constexpr double kStepShare = 0.05;
// Sites remembered for growth holders: a program has far fewer growing sites.
constexpr size_t kMaxSiteHolders = 4096;
// Autograd graphs followed across step scans, and the samples kept per graph
// (the newest: a growing graph is judged on the last ones).
constexpr size_t kMaxGraphSeries = 64;
constexpr size_t kMaxGraphSamples = 64;
// Step scans' role snapshots kept for the per-step bars: past this, every
// other one is dropped (an even thinning over the whole run).
constexpr size_t kMaxRoleSteps = 128;
// How long a dump waits for the main thread to reach its pending call.
constexpr auto kDumpWait = std::chrono::milliseconds(1000 + static_cast<int>(kDumpBudget * 1000));

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

struct State {
  std::mutex mu;  // guards everything below
  std::condition_variable done_cv;
  HolderScan latest;
  // Per site, the newest scan before exit that found it held (growth
  // holders: see SiteHolders).
  std::vector<SiteHolders> site_holders;
  // The autograd graphs each step scan found, by owner chain.
  std::vector<GraphSeries> graph_series;
  // The reason of the last failed scan: a new reason is a warning, the same
  // one again only a debug line.
  std::string last_failure;
  // (OOMs seen when it ran, what held the memory): OOM k gets the first
  // scan that saw more than k OOMs.
  std::vector<std::pair<uint64_t, std::vector<Holder>>> oom_scans;
  // Memory by role (docs/roles.md): at the latest scan, at the scan with
  // the highest live total, at the step scans, and per OOM as oom_scans.
  RoleSnapshot roles_latest, roles_peak;
  std::vector<RoleSnapshot> role_steps;
  std::vector<std::pair<uint64_t, RoleSnapshot>> oom_roles;
  uint64_t ooms_scanned = 0;
  bool pending_queued = false;
  // Dumps asked for, and the last one a pending call has scanned for.
  uint64_t dumps_asked = 0, dumps_served = 0;
  double last_end = 0, last_cost = 0;
  // Steps seen by at_step, and the step of the latest step scan.
  uint64_t steps = 0, scanned_step = 0;
};
// Never destroyed: the exit report runs from the shim's ELF destructor.
State &S() {
  static constinit Lazy<State> s;
  return s.get();
}

std::atomic<bool> g_on{false};
py::CApi g_api;
// Touched only with the GIL held.
py::Obj *g_ns = nullptr;  // the scan's private namespace
bool g_exit_hook = false;
// Atomic: a free-threaded interpreter has no GIL to make the check and the
// claim one step.
std::atomic<bool> g_scanning{false};

// A safe point on this thread: Python knows it and no hooked call is on
// its stack (torchseal's own threads count as inside one).
bool safe_thread() {
  return hook_detail::t_depth == 0 && g_api.alive() && g_api.this_thread_state() != nullptr;
}

py::Obj *on_exit_hook(py::Obj *, py::Obj *);
py::MethodDef g_exit_def = {"_torchseal_exit_scan", on_exit_hook, py::kMethNoArgs, nullptr};

bool run(const char *code, int mode) {
  py::Obj *r = g_api.run_string(code, mode, g_ns, g_ns, nullptr);
  if (!r) {
    g_api.err_clear();
    return false;
  }
  g_api.dec_ref(r);
  return true;
}

// The exception pending after a failed call, as one line (its repr names
// the type and the message); cleared.
std::string take_exception() {
  py::Obj *type, *value, *tb;
  g_api.err_fetch(&type, &value, &tb);
  std::string text = "an exception that could not be read";
  if (py::Obj *o = value ? value : type) {
    if (py::Obj *r = g_api.object_repr(o)) {
      if (const char *s = g_api.unicode_as_utf8(r)) text = s;
      g_api.dec_ref(r);
    }
  }
  g_api.err_clear();
  for (py::Obj *o : {type, value, tb})
    if (o) g_api.dec_ref(o);
  return text;
}

// GIL held. The namespace with the scan's code, and the atexit hook.
bool prepare() {
  if (!g_ns) {
    g_ns = g_api.dict_new();
    py::Obj *r = nullptr;
    if (g_ns && g_api.dict_set_item_string(g_ns, "__builtins__", g_api.eval_get_builtins()) == 0)
      r = g_api.run_string(py::kHolderScanSource, py::kFileInput, g_ns, g_ns, nullptr);
    if (!r) {
      log::warn("the holder scan could not start (%s); reports name no Python holders",
                take_exception().c_str());
      g_on.store(false);
      return false;
    }
    g_api.dec_ref(r);
  }
  if (!g_exit_hook) {
    g_exit_hook = true;
    py::Obj *fn = g_api.cfunction_new(&g_exit_def, nullptr, nullptr);
    bool ok = fn && g_api.dict_set_item_string(g_ns, "_exit_scan", fn) == 0 &&
              run("import atexit\natexit.register(_exit_scan)\n", py::kFileInput);
    if (fn) g_api.dec_ref(fn);
    if (!ok) log::warn("cannot register the exit-time holder scan");
  }
  return true;
}

std::vector<std::string> split(const char *p, const char *end, char sep) {
  std::vector<std::string> out;
  const char *start = p;
  for (; p <= end; ++p)
    if (p == end || *p == sep) {
      out.emplace_back(start, p);
      start = p + 1;
    }
  return out;
}

// Newer holders replace a site's older ones; sites this scan did not find
// keep theirs (a step scan between a grower's append and its next use may
// miss a tensor that is only in a register-like temporary).
void merge_site_holders(std::vector<SiteHolders> &into, std::vector<SiteHolders> &&fresh) {
  auto same = [](const SiteHolders &a, const SiteHolders &b) {
    return a.stack == b.stack && a.pystack == b.pystack && a.api == b.api && a.family == b.family;
  };
  for (SiteHolders &f : fresh) {
    auto it =
        std::find_if(into.begin(), into.end(), [&](const SiteHolders &o) { return same(o, f); });
    if (it != into.end())
      *it = std::move(f);
    else if (into.size() < kMaxSiteHolders)
      into.push_back(std::move(f));
  }
}

// A step scan's graphs, each placed in the live allocation holding its owner
// tensor (its stack names the file the hint reads), added to their series.
void add_graph_samples(std::vector<GraphSeries> &series, uint64_t step,
                       const std::vector<GraphOwner> &graphs, const AnalysisInput &now) {
  // One owner whatever its newest node: `total_loss += loss` turns the
  // first step's AddBackward1 into AddBackward0 at the second.
  auto same_owner = [](const std::vector<std::string> &a, const std::vector<std::string> &b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end() - 1, b.begin());
  };
  for (const GraphOwner &g : graphs) {
    if (g.chain.empty()) continue;
    auto it = std::find_if(series.begin(), series.end(),
                           [&](const GraphSeries &s) { return same_owner(s.chain, g.chain); });
    if (it == series.end()) {
      if (series.size() >= kMaxGraphSeries) continue;
      series.push_back({g.chain, 0, 0, {}});
      it = series.end() - 1;
    }
    it->chain = g.chain;
    for (const LiveAlloc &a : now.live)
      if (g.addr && a.family != Family::Vmm && g.addr >= a.addr && g.addr < a.addr + a.size) {
        it->stack = a.stack;
        it->pystack = a.pystack;
        break;
      }
    if (!it->samples.empty() && it->samples.back().step == step) it->samples.pop_back();
    it->samples.push_back({step, g.nodes, g.bytes});
    if (it->samples.size() > kMaxGraphSamples) it->samples.erase(it->samples.begin());
  }
}

void report_failure(const std::string &why) {
  State &s = S();
  bool fresh;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    fresh = s.last_failure != why;
    s.last_failure = why;
  }
  if (fresh)
    log::warn("holder scan failed: %s; this report names no Python holders", why.c_str());
  else
    log::debug("holder scan failed again: %s", why.c_str());
}

// The scan's output (_holder_scan.py's header) into a HolderScan; `failure`
// gets an E record's one line (empty when the scan succeeded).
void parse(const char *data, size_t size, HolderScan &out, double &ms, double &roles_ms,
           uint64_t &skipped, std::string &failure, std::vector<int> &signals) {
  std::vector<uint32_t> chain_index;  // group id -> index in out.chains
  for (const std::string &line : split(data, data + size, '\n')) {
    std::vector<std::string> f = split(line.data(), line.data() + line.size(), '\x1f');
    if (f.size() >= 2 && f[0] == "G") {
      unsigned long id = std::strtoul(f[1].c_str(), nullptr, 10);
      if (id >= chain_index.size()) chain_index.resize(id + 1, UINT32_MAX);
      chain_index[id] = static_cast<uint32_t>(out.chains.size());
      out.chains.emplace_back(f.begin() + 2, f.end());
    } else if ((f.size() == 4 || f.size() == 6) && f[0] == "S") {
      HeldStorage s;
      s.addr = std::strtoull(f[1].c_str(), nullptr, 16);
      s.bytes = std::strtoull(f[2].c_str(), nullptr, 10);
      s.chain = static_cast<uint32_t>(std::strtoul(f[3].c_str(), nullptr, 10));
      if (f.size() == 6) {
        unsigned long role = std::strtoul(f[4].c_str(), nullptr, 10);
        s.role = role < kScanRoles ? static_cast<MemoryRole>(role) : MemoryRole::UserHeld;
        s.module = static_cast<int32_t>(std::strtol(f[5].c_str(), nullptr, 10));
      }
      out.storages.push_back(s);
    } else if (f.size() == 3 && f[0] == "D") {
      unsigned long id = std::strtoul(f[1].c_str(), nullptr, 10);
      if (id < (1u << 20)) {
        if (id >= out.modules.size()) out.modules.resize(id + 1);
        out.modules[id] = f[2];
      }
    } else if (f.size() == 3 && f[0] == "A") {
      out.allocator_stats = true;
      out.torch_allocated = std::strtoull(f[1].c_str(), nullptr, 10);
      out.torch_reserved = std::strtoull(f[2].c_str(), nullptr, 10);
    } else if (f.size() >= 5 && f[0] == "N") {
      GraphOwner g;
      g.nodes = std::strtoull(f[1].c_str(), nullptr, 10);
      g.bytes = std::strtoull(f[2].c_str(), nullptr, 10);
      g.addr = std::strtoull(f[3].c_str(), nullptr, 16);
      g.chain.assign(f.begin() + 4, f.end());
      out.graphs.push_back(std::move(g));
    } else if (f.size() == 4 && f[0] == "E") {
      failure = f[1] + ": " + f[2] + " at " + f[3];
    } else if (f.size() == 3 && f[0] == "M") {
      if (f[1] == "partial") out.partial = f[2] == "1";
      if (f[1] == "ms") ms = std::strtod(f[2].c_str(), nullptr);
      if (f[1] == "roles_ms") roles_ms = std::strtod(f[2].c_str(), nullptr);
      if (f[1] == "skipped") skipped = std::strtoull(f[2].c_str(), nullptr, 10);
      if (f[1] == "signals")
        for (const std::string &n : split(f[2].data(), f[2].data() + f[2].size(), ','))
          if (int sig = std::atoi(n.c_str()); sig > 0 && sig < NSIG) signals.push_back(sig);
    }
  }
  // Storages name groups; groups come after them in the output.
  for (HeldStorage &s : out.storages)
    s.chain = s.chain < chain_index.size() ? chain_index[s.chain] : UINT32_MAX;
  std::erase_if(out.storages, [](const HeldStorage &s) { return s.chain == UINT32_MAX; });
}

uint64_t now_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

// A step scan's snapshot into the kept series (thinned evenly when full).
void add_role_step(std::vector<RoleSnapshot> &steps, RoleSnapshot snap) {
  if (steps.size() >= kMaxRoleSteps) {
    size_t kept = 0;
    for (size_t i = 0; i < steps.size(); i += 2) steps[kept++] = std::move(steps[i]);
    steps.resize(kept);
  }
  steps.push_back(std::move(snap));
}

// GIL held, at a safe point. Runs one scan and publishes it.
// Where a scan runs decides its budget and its reach: a step scan walks the
// program's roots only (see _holder_scan.py), dumps and exit everything.
enum class ScanAt { Step, Dump, Exit };

void scan(ScanAt where) {
  const bool at_exit = where == ScanAt::Exit;
  const double budget = where == ScanAt::Step ? kStepBudget : at_exit ? kExitBudget : kDumpBudget;
  if (!g_on.load() || g_scanning.exchange(true)) return;
  py::Obj *et, *ev, *tb;
  g_api.err_fetch(&et, &ev, &tb);  // leave the caller's exception state as it was
  std::vector<int> signals;  // arrived during the scan, for the program's handlers
  double t0 = now_s();
  if (prepare()) {
    char call[48];
    std::snprintf(call, sizeof call, "scan(%.3f, %s)", budget,
                  where == ScanAt::Step ? "False" : "True");
    py::Obj *r = g_api.run_string(call, py::kEvalInput, g_ns, g_ns, nullptr);
    char *data = nullptr;
    ssize_t size = 0;
    HolderScan result;
    double ms = 0, roles_ms = 0;
    uint64_t skipped = 0;
    std::string failure;
    bool ok = r && g_api.bytes_as_string_and_size(r, &data, &size) == 0;
    if (ok)
      parse(data, static_cast<size_t>(size), result, ms, roles_ms, skipped, failure, signals);
    if (!ok) failure = "the scan raised " + take_exception();
    if (r) g_api.dec_ref(r);
    g_api.err_clear();
    if (!failure.empty()) {
      report_failure(failure);
    } else {
      result.done = true;
      result.at_exit = at_exit;
      double t1 = now_s();
      // A step scan cut short only thins growth holders; the next one may finish.
      if (result.partial && budget > kStepBudget)
        log::warn("the holder scan stopped at its %.1f s budget; holders may be missing", budget);
      log::debug("holder scan: %zu storage(s), %zu chain(s), %.1f ms, %llu object(s) skipped",
                 result.storages.size(), result.chains.size(), (t1 - t0) * 1e3,
                 static_cast<unsigned long long>(skipped));
      // Placed now, against what is live now: by exit a grower's blocks may
      // be freed (tensors mode) or its holders gone.
      std::vector<SiteHolders> sites;
      AnalysisInput now;
      const bool graphs = where == ScanAt::Step && !result.graphs.empty();
      uint64_t ooms = recorder().ooms_seen();
      // Memory by role needs the live set whenever torch is loaded (the
      // scan found storages, or PyTorch's allocator answered).
      const bool roles = !result.storages.empty() || result.allocator_stats;
      RoleSnapshot snap;
      // The first scan after an OOM: its snapshot is that OOM's. The exit
      // scan too: an OOM the program never caught (the OutOfMemoryError ends
      // it) has no other safe point after it, and the traceback keeps what
      // the failing frames held.
      bool oom_scan = false;
      if (roles || (!at_exit && graphs)) {
        recorder().live_now(now);
        now.holders = std::move(result);
        if (!at_exit) sites = holders_by_site(now);
        if (roles) {
          uint64_t step;
          {
            std::lock_guard<std::mutex> lock(S().mu);
            step = S().steps;
            oom_scan = ooms > S().ooms_scanned;
          }
          static constexpr const char *kAt[] = {"step", "dump", "exit"};
          double r0 = now_s();
          // The live set starts at an attach or an interval's start: what
          // the scan finds outside it is memory from before (docs/roles.md).
          bool before = recorder().attached_late() || recorder().in_interval();
          snap = role_snapshot(now, oom_scan && !at_exit ? "oom" : kAt[static_cast<int>(where)],
                               step, now_ns(), before);
          // Memory by role's own cost, beside the scan's (docs/roles.md, "Cost").
          log::debug(
              "role snapshot: %zu live allocation(s), %zu site(s), %.3f ms (in the scan: %.3f ms)",
              now.live.size(), snap.sites.size(), (now_s() - r0) * 1e3, roles_ms);
        }
        result = std::move(now.holders);
      }
      State &s = S();
      std::lock_guard<std::mutex> lock(s.mu);
      if (snap.taken) {
        if (!s.roles_peak.taken || role_peak_measure(snap) > role_peak_measure(s.roles_peak))
          s.roles_peak = snap;
        if (oom_scan) s.oom_roles.emplace_back(ooms, snap);
        if (where == ScanAt::Step) add_role_step(s.role_steps, snap);
        s.roles_latest = std::move(snap);
      }
      merge_site_holders(s.site_holders, std::move(sites));
      if (graphs) add_graph_samples(s.graph_series, s.steps, result.graphs, now);
      s.last_failure.clear();
      if (ooms > s.ooms_scanned) {
        s.oom_scans.emplace_back(ooms, all_holders(result));
        s.ooms_scanned = ooms;
      }
      s.latest = std::move(result);
      s.last_end = t1;
      s.last_cost = t1 - t0;
    }
  }
  g_api.err_restore(et, ev, tb);
  g_scanning.store(false);
  // Their Python handlers run at the program's next bytecode boundary, in
  // its code: what they raise (SystemExit, a timeout) is the program's.
  for (int sig : signals) raise(sig);
}

// Runs on the main thread at its next bytecode boundary, GIL held.
int on_pending_call(void *) {
  State &s = S();
  uint64_t serving;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    s.pending_queued = false;
    serving = s.dumps_asked;
  }
  if (hook_detail::t_depth == 0 && g_on.load()) {
    py::Obj *et, *ev, *tb;
    g_api.err_fetch(&et, &ev, &tb);
    prepare();
    g_api.err_restore(et, ev, tb);
    if (serving > s.dumps_served) scan(ScanAt::Dump);
  }
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (serving > s.dumps_served) s.dumps_served = serving;
  }
  s.done_cv.notify_all();
  return 0;
}

// Any thread, no GIL needed (Py_AddPendingCall's contract). Caller holds s.mu.
void queue_pending_call(State &s) {
  if (s.pending_queued) return;
  s.pending_queued = g_api.add_pending_call(on_pending_call, nullptr) == 0;
}

py::Obj *on_exit_hook(py::Obj *, py::Obj *) {
  py::note_exit_begun();
  if (hook_detail::t_depth == 0) scan(ScanAt::Exit);
  g_api.inc_ref(g_api.none);
  return g_api.none;
}

// Takes the GIL on a safe thread and scans.
void scan_here(ScanAt where) {
  int gil = g_api.gil_ensure();
  scan(where);
  g_api.gil_release(gil);
}

}  // namespace

void init(bool enabled) {
  if (!enabled || !py::load(g_api) || !g_api.alive()) return;
  g_on.store(true);
  State &s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  queue_pending_call(s);  // installs the exit hook at the first safe point
}

void at_step() {
  if (!g_on.load() || !safe_thread()) return;
  State &s = S();
  {
    std::lock_guard<std::mutex> lock(s.mu);
    bool after_oom = recorder().ooms_seen() > s.ooms_scanned;
    const uint64_t step = ++s.steps;
    // Within the time share; and at steps 1, 2, 4, 8, ... whatever the
    // share, so a short run whose steps are faster than one scan still has
    // a scan late in it (log2(steps) scans in all).
    bool due = s.last_end == 0 || now_s() - s.last_end >= s.last_cost / kStepShare ||
               step >= 2 * s.scanned_step;
    if (!after_oom && !due) return;
    s.scanned_step = step;
  }
  if (recorder().live_bytes() == 0) return;  // nothing to hold
  scan_here(ScanAt::Step);
}

void before_dump() {
  // Not from the exit report's own flush: Python is gone or going.
  if (!g_on.load() || !is_active() || !g_api.alive()) return;
  if (safe_thread()) {
    scan_here(ScanAt::Dump);
    return;
  }
  State &s = S();
  std::unique_lock<std::mutex> lock(s.mu);
  uint64_t mine = ++s.dumps_asked;
  queue_pending_call(s);
  if (!s.pending_queued) return;
  // Without a safe point in time (the main thread blocked in C code), the
  // dump goes out with the previous scan.
  s.done_cv.wait_for(lock, kDumpWait, [&] { return s.dumps_served >= mine; });
}

bool scan_for_report() {
  if (!g_on.load() || !g_api.alive()) return true;  // nothing to scan
  // Not inside a running scan: its Python code reaches pending calls too.
  if (g_scanning.load() || !safe_thread()) return false;
  scan_here(ScanAt::Dump);
  return true;
}

void fill(AnalysisInput &in) {
  if (!g_on.load()) return;
  State &s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  in.holders = s.latest;
  in.site_holders = s.site_holders;
  in.graph_series = s.graph_series;
  in.roles_now = s.roles_latest;
  in.roles_peak = s.roles_peak;
  in.role_steps = s.role_steps;
  for (size_t k = 0; k < in.ooms.size(); ++k) {
    for (const auto &[seen, holders] : s.oom_scans)
      if (seen > k) {
        in.ooms[k].holders = holders;
        break;
      }
    for (const auto &[seen, snap] : s.oom_roles)
      if (seen > k) {
        in.ooms[k].roles = snap;
        break;
      }
  }
}

void begin_interval() {
  State &s = S();
  std::lock_guard<std::mutex> lock(s.mu);
  s.roles_latest = RoleSnapshot{};
  s.roles_peak = RoleSnapshot{};
  s.role_steps.clear();
}

void detach() {
  g_on.store(false);
  if (!g_exit_hook || !g_ns || !g_api.alive()) return;
  py::Obj *et, *ev, *tb;
  g_api.err_fetch(&et, &ev, &tb);
  if (!run("import atexit\natexit.unregister(_exit_scan)\n", py::kFileInput))
    log::warn("cannot unregister the exit-time holder scan");
  g_exit_hook = false;
  g_api.err_restore(et, ev, tb);
}

void reset_after_fork() {
  // Only this thread survives; the interpreter's own fork handling keeps
  // the namespace and the atexit hook valid in the child.
  // The parent's state is abandoned, not destroyed: its lock may be held.
  new (&S()) State();
  g_scanning.store(false);
  // No scans in the child: its parent has initialised CUDA, which a forked
  // child cannot use, so it records nothing and writes no report; an exit
  // scan there (a child leaving through sys.exit) would walk the whole
  // inherited heap, touching every page of it, for nothing.
  g_on.store(false);
}

}  // namespace torchseal::holders
