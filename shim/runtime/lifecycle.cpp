#include "shim/runtime/lifecycle.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <new>

#include "shim/core/counters.h"
#include "shim/core/python/autograd_node.h"
#include "shim/core/python/python_frames.h"
#include "shim/runtime/crash_flush.h"
#include "shim/runtime/service_thread.h"
#include "shim/runtime/signals.h"
#ifdef TORCHSEAL_HAVE_CUPTI_BACKEND
#include "shim/intercept/cupti/cupti_backend.h"
#endif
#include "shim/core/python/safe_points.h"
#include "shim/core/recorder.h"
#include "shim/core/unwind/unwinder.h"
#include "shim/runtime/log.h"
#include "shim/runtime/report_files.h"

namespace torchseal {

namespace hook_detail {
__thread int t_depth = 0;
std::atomic<bool> g_record_fast{false};
}  // namespace hook_detail
using hook_detail::g_record_fast;
using hook_detail::t_depth;

namespace {

std::atomic<int> g_state{static_cast<int>(ShimState::Uninit)};
std::mutex g_init_mutex;
const Config *g_config = nullptr;
const char *g_backend = "hooks";

// Whether this process (not its parent, after fork) recorded anything: a
// child that never calls CUDA writes no files.
std::atomic<bool> g_recorded_here{false};
std::mutex g_first_record_mutex;  // reset in a forked child (see after_fork_child)

void after_fork_child() {
  new (&g_first_record_mutex) std::mutex();
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

// CUPTI when it subscribes (auto or cupti), else the hooks, which are always
// installed. Falling back is normal (torch.profiler, Nsight and
// compute-sanitizer hold the one CUPTI slot), so it is said in one line.
void choose_backend(const Config &cfg) {
  g_backend = "hooks";
  if (cfg.backend == Backend::Hooks) return;
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
  const char *unwinder = unwinder_init(cfg->unwind);
  report_files_init(*cfg);
  choose_backend(*cfg);
  pthread_atfork(nullptr, nullptr, after_fork_child);
  install_dump_signal(cfg->dump_signal);
  // Without torchseal_step() or NVTX steps, growth is judged per time window.
  history::set_window_seconds(cfg->step_seconds);
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

// First recorded call in a forked child: it gets its own history file.
void note_first_record() {
  std::lock_guard<std::mutex> lock(g_first_record_mutex);
  if (g_recorded_here.load()) return;
  start_history();
  g_recorded_here.store(true);
  if (is_active() && hooks_record()) g_record_fast.store(true, std::memory_order_release);
}

bool hook_detail::record_slow() {
  if (!ensure_active() || !hooks_record()) return false;
  if (!g_recorded_here.load(std::memory_order_relaxed)) note_first_record();
  return true;
}

void note_cuda_initialised() {
  if (t_depth != 0) return;
  ++t_depth;  // what activating calls into is not the program's
  if (ensure_active() && !g_recorded_here.load(std::memory_order_relaxed)) note_first_record();
  --t_depth;
}

void mark_thread_internal() { t_depth = 1 << 20; }

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
