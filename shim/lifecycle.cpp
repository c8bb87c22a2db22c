#include "lifecycle.h"

#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <mutex>
#include <new>

#include "counters.h"
#include "crash_flush.h"
#include "history_writer.h"
#include "python_frames.h"
#include "signals.h"
#ifdef TORCHSEAL_HAVE_CUPTI_BACKEND
#include "cupti_backend.h"
#endif
#include "log.h"
#include "recorder.h"
#include "report_files.h"
#include "safe_points.h"
#include "unwind/unwinder.h"

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
alignas(Config) unsigned char g_config_storage[sizeof(Config)];
Config *g_config = nullptr;
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
  Config *cfg = new (g_config_storage) Config();
  std::string error;
  if (!parse_config(*cfg, error)) {
    log::set_level(cfg->log_level == log::Level::Off ? log::Level::Error : cfg->log_level);
    log::error("%s", error.c_str());
    g_state.store(static_cast<int>(ShimState::Disabled), std::memory_order_release);
    return;
  }
  log::set_level(cfg->log_level);
  g_config = cfg;
  py::init(cfg->python);
  holders::init(cfg->holders);
  recorder().stack_depth = cfg->stack_depth;
  const char *unwinder = unwinder_init(cfg->unwind);
  report_files_init(*cfg);
  choose_backend(*cfg);
  pthread_atfork(nullptr, nullptr, after_fork_child);
  install_dump_signal(cfg->dump_signal);
  // Without torchseal_step() or NVTX steps, growth is judged per time window.
  history::set_window_seconds(cfg->step_seconds > 0 ? cfg->step_seconds : 1.0);
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
