#include "shim/runtime/lifecycle.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <new>
#include <string>
#include <vector>

#include "shim/core/counters.h"
#include "shim/core/loader_walk.h"
#include "shim/core/python/autograd_node.h"
#include "shim/core/python/python_frames.h"
#include "shim/intercept/dlsym_hook.h"
#include "shim/intercept/got_patch.h"
#include "shim/runtime/crash_flush.h"
#include "shim/runtime/service_thread.h"
#include "shim/runtime/signals.h"
#ifdef TORCHSEAL_HAVE_CUPTI_BACKEND
#include "cupti_backend/call_owner.h"
#include "cupti_backend/cupti_backend.h"
#endif
#include "common/symbols/runtime_libs.h"
#include "common/symbols/symbolizer.h"
#include "common/util/log.h"
#include "shim/core/fast_clock.h"
#include "shim/core/recorder.h"
#include "shim/core/unwind/unwinder.h"
#include "shim/runtime/holder_scan/safe_points.h"
#include "shim/runtime/report_files.h"

namespace torchseal {

namespace hook_detail {
__thread int t_depth = 0;
__thread void *t_hook_frame = nullptr;
std::atomic<bool> g_record_fast{false};
}  // namespace hook_detail
using hook_detail::g_record_fast;
using hook_detail::t_depth;

namespace {

std::atomic<int> g_state{static_cast<int>(ShimState::Uninit)};
std::mutex g_init_mutex;
const Config *g_config = nullptr;
const char *g_backend = "hooks";
const char *g_unwinder = "";

// Set by the constructor when the CUDA libraries were loaded before the
// shim: dlopen'ed by torchseal.start(), or by the driver at cuInit
// (CUDA_INJECTION64_PATH), not preloaded.
bool g_loaded_late = false;
// torchseal_start() woke a late shim: the process allocated before it.
// (An injected shim wakes inside cuInit, before any allocation.)
std::atomic<bool> g_attach_requested{false};
// `torchseal attach` froze the recording for its final report (pause_recording).
std::atomic<bool> g_paused{false};
// An interval (torchseal_start) is open; its report prefix.
std::atomic<bool> g_interval_open{false};

// Whether this process (not its parent, after fork) recorded anything: a
// child that never calls CUDA writes no files.
std::atomic<bool> g_recorded_here{false};
std::mutex g_first_record_mutex;  // reset in a forked child (see after_fork_child)

void after_fork_child() {
  new (&g_first_record_mutex) std::mutex();
  clock_detail::after_fork_child();
  unwinder_after_fork();
  recorder().reset_after_fork();
  py::reset_after_fork();
  holders::reset_after_fork();
  history::reset_after_fork();
  g_record_fast.store(false, std::memory_order_relaxed);
  g_recorded_here.store(false, std::memory_order_relaxed);
  report_files_after_fork();
}

// The settings, parsed once per process: at the first CUDA call, or before
// it when an NVTX range needs the step pattern (nvtx_steps.cpp). Never
// destroyed: the exit report runs from the shim's ELF destructor.
struct Parsed {
  Config config;
  std::string error;
  bool ok = false;
};
std::once_flag g_parse_once;
alignas(Parsed) unsigned char g_parsed_storage[sizeof(Parsed)];

const Parsed &parsed_settings() {
  std::call_once(g_parse_once, [] {
    Parsed *p = new (g_parsed_storage) Parsed();
    p->ok = parse_config(p->config, p->error);
  });
  return *std::launder(reinterpret_cast<Parsed *>(g_parsed_storage));
}

// The history file and its writer thread, for this process (parent at first
// CUDA call; a forked child at its own first CUDA call).
void start_history() {
  std::string prefix = output_prefix();
  history::start(prefix.empty() ? std::string() : prefix + ".tseal");
}

// `auto`: the hooks when the shim is preloaded, CUPTI otherwise
// (CUDA_INJECTION64_PATH alone, where nothing is interposed). Preloaded, the
// hooks see every allocation call (runtime symbols, dlsym, cuGetProcAddress)
// at about half CUPTI's cost per call (bench/RESULTS.md), and CUPTI's slot
// stays free for the host's profiler. `cupti` subscribes, and falls back to
// the hooks in one line when the slot is taken (torch.profiler, Nsight,
// compute-sanitizer) or hands the slot over later (subscribe_hook.cpp).
void choose_backend(const Config &cfg) {
  g_backend = "hooks";
  if (cfg.backend == Backend::Hooks) return;
  if (cfg.backend == Backend::Auto && shim_interposed()) return;
#ifdef TORCHSEAL_HAVE_CUPTI_BACKEND
  std::string why;
  if (cupti::start(cfg, why)) {
    g_backend = "cupti";
    return;
  }
  log::warn("CUPTI backend unavailable (%s); using hooks", why.c_str());
#else
  log::warn("CUPTI backend not built into this shim; using hooks");
#endif
}

// The hooks record unless the CUPTI backend does.
bool hooks_record() {
#ifdef TORCHSEAL_HAVE_CUPTI_BACKEND
  return !cupti::running();
#else
  return true;
#endif
}

struct LoadOrder {
  uintptr_t self = 0;
  bool cuda_before_self = false;
};

// Link-map order is load order: a CUDA library listed before the shim was
// bound to its callers before the shim could interpose on it.
int cuda_before_self(dl_phdr_info *info, size_t, void *data) {
  auto *order = static_cast<LoadOrder *>(data);
  if (info->dlpi_addr == order->self) return 1;  // stop at ourselves
  const char *name = info->dlpi_name ? strrchr(info->dlpi_name, '/') : nullptr;
  name = name ? name + 1 : info->dlpi_name;
  if (name && (strncmp(name, "libcudart.so", 12) == 0 || strncmp(name, "libcuda.so", 10) == 0))
    order->cuda_before_self = true;
  return 0;
}

// A fork while another thread is inside initialise() (dlopen of libunwind
// and libdw, the writer's start) would leave the child g_init_mutex locked
// by a thread it does not have, and its first CUDA call would wait forever:
// a fork waits for the initialisation to end instead. Registered at load,
// because the fork can come before the first initialise().
void init_lock_prepare() { g_init_mutex.lock(); }
void init_lock_parent() { g_init_mutex.unlock(); }
void init_lock_child() { new (&g_init_mutex) std::mutex(); }
__attribute__((constructor)) void guard_init_across_fork() {
  pthread_atfork(init_lock_prepare, init_lock_parent, init_lock_child);
}

// Preloaded, the shim comes before any CUDA library (simgpu's preloaded
// simcuda comes after it); loaded by dlopen, it comes after them.
__attribute__((constructor)) void note_load_order() {
  Dl_info self;
  if (!dladdr(reinterpret_cast<void *>(&note_load_order), &self)) return;
  LoadOrder order;
  order.self = reinterpret_cast<uintptr_t>(self.dli_fbase);
  LoaderWalkGuard walking;  // a late shim's load can race another thread's fork
  dl_iterate_phdr(cuda_before_self, &order);
  g_loaded_late = order.cuda_before_self;
}

// What the process allocated before is not ours to judge: frees of it are
// counted as pre-existing. The callers' GOT entries point at the hooks
// whichever backend records, as when preloaded: without CUPTI the hooks
// record, and with it they take over when a profiler asks for the slot
// (the host's cuptiSubscribe entries are patched too).
void attach_late() {
  recorder().set_attached_late();
  size_t n = got::patch_loaded_objects();
  log::info("attached late: %zu CUDA and CUPTI entries of the loaded libraries now reach the hooks",
            n);
}

// One line, at the warn level the default log shows, for everything the
// process runs without; the report repeats it (process.degraded).
void say_degraded(const std::string &unwind_why, const std::string &libdw_why) {
  std::vector<std::string> what = runtime_libs::degraded();
  if (what.empty()) return;
  std::string line;
  for (const std::string &w : what) {
    if (!line.empty()) line += "; ";
    line += w;
    const std::string &why = w.find("libunwind") != std::string::npos ? unwind_why : libdw_why;
    if (!why.empty()) line += " (" + why + ")";
  }
  log::warn("degraded: %s", line.c_str());
}

void initialise() {
  std::lock_guard<std::mutex> lock(g_init_mutex);
  if (g_state.load(std::memory_order_acquire) != static_cast<int>(ShimState::Uninit)) return;
  const Parsed &parsed = parsed_settings();
  const Config *cfg = &parsed.config;
  if (!parsed.ok) {
    log::set_level(cfg->log_level == log::Level::Off ? log::Level::Error : cfg->log_level);
    log::error("%s", parsed.error.c_str());
    g_state.store(static_cast<int>(ShimState::Disabled), std::memory_order_release);
    return;
  }
  log::set_level(cfg->log_level);
  g_config = cfg;
  py::init(cfg->python == PythonMode::Auto);
  py::set_borrow_label(autograd_node_name);
  holders::init(cfg->holders == HoldersMode::Auto);
  recorder().stack_depth = cfg->stack_depth;
  std::string unwind_why, libdw_why;
  const char *unwinder = unwinder_init(cfg->unwind, &unwind_why);
  g_unwinder = unwinder;
  // Probed now, not at exit, so a missing one is said before the run
  // rather than after it.
  bool lines = libdw_available(&libdw_why);
  say_degraded(unwind_why, lines ? std::string() : libdw_why);
  report_files_init(*cfg);
  choose_backend(*cfg);
  if (g_loaded_late && g_attach_requested.load()) attach_late();
  pthread_atfork(nullptr, nullptr, after_fork_child);
  install_dump_signal(cfg->dump_signal);
  // Without torchseal_step() or NVTX steps, growth is judged per time window.
  history::set_window_seconds(cfg->step_seconds);
  history::set_limit(cfg->history_limit);
  start_history();
  install_crash_flush();
  g_recorded_here.store(true, std::memory_order_relaxed);
  log::info("active in pid %d (backend %s, unwinder %s)", static_cast<int>(getpid()), g_backend,
            unwinder);
  g_state.store(static_cast<int>(ShimState::Active), std::memory_order_release);
  g_record_fast.store(hooks_record(), std::memory_order_release);
}

}  // namespace

bool ensure_active() {
  int s = g_state.load(std::memory_order_acquire);
  if (s == static_cast<int>(ShimState::Active)) return true;
  if (s != static_cast<int>(ShimState::Uninit)) return false;
  initialise();
  return g_state.load(std::memory_order_acquire) == static_cast<int>(ShimState::Active);
}

bool is_active() {
  return g_state.load(std::memory_order_acquire) == static_cast<int>(ShimState::Active);
}

const Config &config() { return *g_config; }
const Config *parsed_config() {
  const Parsed &parsed = parsed_settings();
  return parsed.ok ? &parsed.config : nullptr;
}
const char *backend_name() { return g_backend; }
const char *unwinder_name() { return g_unwinder; }

// First recorded call in a forked child: it gets its own history file.
void note_first_record() {
  std::lock_guard<std::mutex> lock(g_first_record_mutex);
  if (g_recorded_here.load()) return;
  start_history();
  g_recorded_here.store(true);
  if (is_active() && hooks_record() && !g_paused.load())
    g_record_fast.store(true, std::memory_order_release);
}

bool hook_detail::record_slow() {
  if (!ensure_active() || g_paused.load(std::memory_order_relaxed)) return false;
#ifdef TORCHSEAL_HAVE_CUPTI_BACKEND
  if (cupti::claim_for_cupti()) return false;  // CUPTI records this call
#endif
  if (!g_recorded_here.load(std::memory_order_relaxed)) note_first_record();
  return true;
}

void hooks_take_over() {
  if (is_active() && g_recorded_here.load() && !g_paused.load())
    g_record_fast.store(true, std::memory_order_release);
}

void note_cuda_initialised() {
  if (t_depth != 0) return;
  ++t_depth;  // what activating calls into is not the program's
  if (ensure_active() && !g_recorded_here.load(std::memory_order_relaxed)) note_first_record();
  --t_depth;
}

void mark_thread_internal() { t_depth = 1 << 20; }

bool loaded_late() { return g_loaded_late; }
void note_loaded_by_attach() { g_loaded_late = true; }

void pause_recording() {
  g_paused.store(true);
  g_record_fast.store(false);
#ifdef TORCHSEAL_HAVE_CUPTI_BACKEND
  cupti::stop();
#endif
}

size_t detach() {
  g_record_fast.store(false);
  int expected = static_cast<int>(ShimState::Active);
  if (!g_state.compare_exchange_strong(expected, static_cast<int>(ShimState::Finished))) return 0;
  ++t_depth;  // nothing below is a user allocation
  // The callers' entries first: from here on their calls go straight to
  // CUDA and no hook is entered anew.
  size_t restored = got::restore_all();
#ifdef TORCHSEAL_HAVE_CUPTI_BACKEND
  cupti::stop();
#endif
  recorder().settle_ooms(true);
  history::finish(true);  // joins the writer thread
  uninstall_dump_signal();
  uninstall_crash_flush();
  --t_depth;
  log::info("detached from pid %d: %zu GOT entries restored", static_cast<int>(getpid()), restored);
  return restored;
}

void request_late_attach() { g_attach_requested.store(true); }
void set_interval_open(bool open) { g_interval_open.store(open); }

namespace {

// Runs from the shim's ELF destructor: after the program's own static
// destructors and atexit handlers (which may still free memory), and after
// main has returned. Any thread still allocating now is no longer recorded.
__attribute__((destructor)) void at_exit() {
  g_record_fast.store(false);
  int expected = static_cast<int>(ShimState::Active);
  if (!g_state.compare_exchange_strong(expected, static_cast<int>(ShimState::Finished))) return;
  if (!g_recorded_here.load()) return;
  ++t_depth;  // nothing below is a user allocation
#ifdef TORCHSEAL_HAVE_CUPTI_BACKEND
  cupti::stop();
#endif
  // An OOM still waiting for its retry was the program's: its dump is
  // asked for now, so finish() still writes it.
  recorder().settle_ooms(true);
  history::finish(true);
  unwinder_log_summary();
  // Attached by torchseal.start(), the closed intervals have reported;
  // only one still open at exit gets the exit report (under its prefix).
  const bool attached = g_loaded_late && g_attach_requested.load();
  if (attached && !g_interval_open.load()) return;
  // Otherwise the exit report covers the whole run, before the interval too.
  if (!attached) recorder().end_interval();
  int64_t leaks = write_report("exit");
  int code = g_config ? g_config->exit_code : -1;
  if (leaks > 0 && code > 0) {
    // Like LeakSanitizer's exitcode: the process fails because it leaked.
    fflush(nullptr);
    _exit(code);
  }
}

}  // namespace

}  // namespace torchseal
