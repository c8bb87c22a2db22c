// torchseal_attach(): the shim's half of `torchseal attach PID`
// (docs/attach.md). The CLI has loaded the shim into a running Python
// process (sys.remote_exec, or ptrace calling dlopen) and calls this with
// the request. Nothing happens where that call lands: it only queues a
// pending call, which the main thread runs at its next bytecode boundary
// with the GIL held. There the late start runs (torchseal_start), the
// process's `torchseal` module is pointed at the shim, and a controller
// thread waits for the end of the request (time, steps, or the CLI's stop
// file), writes the report, detaches (lifecycle.h) and hands the Python
// side of the detach back to the main thread, which joins it.
//
// The CLI and the shim talk through a directory the CLI made: the shim
// appends one line per stage to `status`; the CLI creates `stop` to end
// early (Ctrl-C).
#include "torchseal.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>

#include "common/util/log.h"
#include "common/util/py_literal.h"
#include "shim/core/recorder.h"
#include "shim/runtime/holder_scan/cpython_api.h"
#include "shim/runtime/holder_scan/safe_points.h"
#include "shim/runtime/lifecycle.h"

namespace torchseal {
namespace {

enum class Mode { For, Steps, Snapshot };

struct Request {
  Mode mode = Mode::For;
  double seconds = 0;  // Mode::For
  uint64_t steps = 0;  // Mode::Steps
  std::string prefix, control;
  double deadline = 0;  // unix seconds: a pending call run later than this does nothing
};

// Set once by torchseal_attach; never freed (read by the controller and
// the pending calls).
Request *g_req = nullptr;
std::atomic<bool> g_requested{false};
py::CApi g_api;
pthread_t g_controller{};

double unix_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

// One line of the status file the CLI follows ("attached ...", "error ...").
void status(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void status(const char *fmt, ...) {
  std::string path = g_req->control + "/status";
  FILE *f = std::fopen(path.c_str(), "ae");
  if (!f) return;
  va_list ap;
  va_start(ap, fmt);
  std::vfprintf(f, fmt, ap);
  va_end(ap);
  std::fputc('\n', f);
  std::fclose(f);
}

// "key=value" lines; false on a malformed request.
bool parse(const char *text, Request &r) {
  std::string s(text);
  size_t pos = 0;
  bool have_mode = false;
  while (pos < s.size()) {
    size_t end = s.find('\n', pos);
    if (end == std::string::npos) end = s.size();
    std::string line = s.substr(pos, end - pos);
    pos = end + 1;
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    std::string key = line.substr(0, eq), value = line.substr(eq + 1);
    if (key == "mode") {
      have_mode = true;
      if (value == "for")
        r.mode = Mode::For;
      else if (value == "steps")
        r.mode = Mode::Steps;
      else if (value == "snapshot")
        r.mode = Mode::Snapshot;
      else
        return false;
    } else if (key == "seconds") {
      r.seconds = std::strtod(value.c_str(), nullptr);
    } else if (key == "steps") {
      r.steps = std::strtoull(value.c_str(), nullptr, 10);
    } else if (key == "prefix") {
      r.prefix = value;
    } else if (key == "control") {
      r.control = value;
    } else if (key == "deadline") {
      r.deadline = std::strtod(value.c_str(), nullptr);
    }
  }
  return have_mode && !r.prefix.empty() && !r.control.empty();
}

// A Python string literal of `text` that survives any byte in it.
std::string py_literal(const std::string &text) {
  return python_bytes_literal(text) + ".decode('utf-8', 'surrogateescape')";
}

// GIL held. Runs `code` in a fresh namespace; false (cleared) if it raised.
bool run_python(const std::string &code) {
  py::Obj *ns = g_api.dict_new();
  if (!ns) return false;
  py::Obj *r = nullptr;
  if (g_api.dict_set_item_string(ns, "__builtins__", g_api.eval_get_builtins()) == 0)
    r = g_api.run_string(code.c_str(), py::kFileInput, ns, ns, nullptr);
  bool ok = r != nullptr;
  if (r) g_api.dec_ref(r);
  g_api.err_clear();
  g_api.dec_ref(ns);
  return ok;
}

std::string self_path() {
  Dl_info info;
  if (!dladdr(reinterpret_cast<void *>(&self_path), &info) || !info.dli_fname) return {};
  return info.dli_fname;
}

// The program's `torchseal` module (imported before the attach, it found
// no shim) calls this one from now on, so its torchseal.step() counts; at
// detach it goes back to what it found then.
void rebind_module(bool to_shim) {
  std::string code =
      "import sys\n"
      "m = sys.modules.get('torchseal')\n"
      "if m is not None and hasattr(m, '_rebind'):\n";
  if (to_shim)
    code +=
        "    import ctypes, os\n"
        "    m._rebind(ctypes.CDLL(" +
        py_literal(self_path()) + ", mode=os.RTLD_NOW | os.RTLD_LOCAL))\n";
  else
    code += "    m._rebind(m._process_symbols())\n";
  if (!run_python(code)) log::warn("cannot rebind the program's torchseal module");
}

bool stop_asked() {
  struct stat st;
  return stat((g_req->control + "/stop").c_str(), &st) == 0;
}

int on_detached(void *);

// The final scan's handshake (on_final_scan).
constexpr auto kFinalScanWait = std::chrono::seconds(5);
std::mutex g_final_mutex;
std::condition_variable g_final_cv;
bool g_final_done = false;
bool g_final_abandoned = false;  // the controller stopped waiting

// Main thread, GIL held: the holder scan the report uses, and from its end
// on nothing is recorded, so the report's live allocations are the ones the
// scan saw (a tensor allocated after it would read as a leak). Inside a
// step's scan (its Python reaches pending calls) it asks to run again.
int on_final_scan(void *) {
  std::unique_lock<std::mutex> lock(g_final_mutex);
  if (g_final_done || g_final_abandoned) return 0;
  lock.unlock();
  if (!holders::scan_for_report()) {
    if (g_api.add_pending_call(on_final_scan, nullptr) == 0) return 0;
  }
  pause_recording();
  log::debug("final holder scan done; recording paused for the report");
  lock.lock();
  g_final_done = true;
  lock.unlock();
  g_final_cv.notify_all();
  return 0;
}

// The request's end: its report, then the detach.
void *controller(void *) {
  mark_thread_internal();
  const Request &r = *g_req;
  const uint64_t own0 = recorder().steps_seen(false), windows0 = recorder().steps_seen(true);
  const double t0 = unix_now();
  while (r.mode != Mode::Snapshot && !stop_asked()) {
    if (r.mode == Mode::For && unix_now() - t0 >= r.seconds) break;
    if (r.mode == Mode::Steps) {
      // The program's own steps once it marks one; time windows until then.
      uint64_t own = recorder().steps_seen(false) - own0;
      uint64_t windows = recorder().steps_seen(true) - windows0;
      if (own ? own >= r.steps : windows >= r.steps) break;
    }
    usleep(20 * 1000);
  }
  // The holder scan, then the freeze, on the main thread; the report is
  // written here from that moment's state. A main thread blocked in native
  // code past the wait: frozen from here, with the latest scan.
  bool scanned = false;
  if (g_api.add_pending_call(on_final_scan, nullptr) == 0) {
    std::unique_lock<std::mutex> lock(g_final_mutex);
    scanned = g_final_cv.wait_for(lock, kFinalScanWait, [] { return g_final_done; });
  }
  if (!scanned) {
    std::lock_guard<std::mutex> lock(g_final_mutex);
    g_final_abandoned = true;
  }
  if (!scanned) {
    log::warn(
        "the main thread reached no safe point for the final holder scan in %lld s; "
        "the report uses the latest scan",
        static_cast<long long>(kFinalScanWait.count()));
    pause_recording();
  }
  const uint64_t own = recorder().steps_seen(false) - own0;
  const uint64_t windows = recorder().steps_seen(true) - windows0;
  long long leaks =
      end_interval_report(r.mode == Mode::Snapshot ? "snapshot" : "stop", /*fresh_scan=*/false);
  if (leaks < 0)
    status("error no report was written to %s.json (the reason is on the process's stderr)",
           r.prefix.c_str());
  else  // and what it tracked, for the CLI to say when that is too little for growth
    status("report %lld %llu %s", leaks, static_cast<unsigned long long>(own ? own : windows),
           own ? "steps" : "windows");
  size_t restored = detach();
  status("detaching %zu", restored);
  // The Python side and the join, on the main thread; if it never runs
  // again (exiting), there is nothing left to undo there.
  if (g_api.add_pending_call(on_detached, nullptr) != 0) status("detached");
  return nullptr;
}

// Main thread, GIL held: the Python half of the detach.
int on_detached(void *) {
  pthread_join(g_controller, nullptr);  // it returned right after queuing this call
  holders::detach();
  rebind_module(false);
  // Every thread that logged is gone or paused: the descriptor can close.
  int log_fd = log::set_fd(STDERR_FILENO);
  if (log_fd != STDERR_FILENO) close(log_fd);
  status("detached");
  return 0;
}

// Main thread, GIL held, at a bytecode boundary: the late start.
int on_attach(void *) {
  const Request &r = *g_req;
  if (r.deadline > 0 && unix_now() > r.deadline) {
    status("error the process reached no Python safe point in time; nothing was started");
    return 0;
  }
  if (is_active()) {
    status("error torchseal is already recording in this process");
    return 0;
  }
  note_loaded_by_attach();
  // The shim's lines go to the CLI (it forwards them), not into the
  // process's own stderr.
  int log_fd = open((r.control + "/log").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd >= 0) log::set_fd(log_fd);
  if (torchseal_start(r.prefix.c_str()) != 0) {
    status("error the late start failed (the reason is on the process's stderr)");
    return 0;
  }
  rebind_module(true);
  // The controller never runs the host's signal handlers.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&g_controller, nullptr, controller, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc == 0) pthread_setname_np(g_controller, "torchseal-at");  // before "attached" is said
  if (rc != 0) {
    torchseal_stop();
    detach();
    status("error cannot start the attach thread");
    return 0;
  }
  status("attached %s", backend_name());
  return 0;
}

}  // namespace
}  // namespace torchseal

extern "C" {

// `torchseal attach` calls this where it lands (any thread, any state: the
// GIL may be held by another thread or by this one); it only queues the
// late start for the main thread's next safe point. Returns 0 when queued.
TORCHSEAL_API int torchseal_attach(const char *request) {
  using namespace torchseal;
  if (!request || g_requested.exchange(true)) return -1;
  g_req = new Request();
  if (!parse(request, *g_req)) return -1;
  if (!py::load(g_api) || !g_api.alive()) {
    status("error the process runs no Python interpreter this shim can use");
    return -1;
  }
  if (g_api.add_pending_call(on_attach, nullptr) != 0) {
    status("error Python refused the pending call");
    return -1;
  }
  return 0;
}

}  // extern "C"
