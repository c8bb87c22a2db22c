#include "shim/runtime/report_files.h"

#include "common/symbols/runtime_libs.h"
#include "common/util/fork_safe.h"
#include "shim/core/loader_walk.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <exception>
#include <mutex>
#include <new>
#include <string>

#include "common/symbols/module_map.h"
#include "common/util/log.h"
#include "report/analysis/suppressions.h"
#include "report/render/produce_report.h"
#include "shim/core/python/python_frames.h"
#include "shim/core/recorder.h"
#include "shim/runtime/holder_scan/safe_points.h"
#include "shim/runtime/lifecycle.h"
#include "shim/runtime/output_path.h"
#include "shim/runtime/torch_mode.h"

namespace torchseal {
namespace {

// Never destroyed: the exit report runs from the shim's ELF destructor, and
// when the shim is dlopen'ed (CUDA_INJECTION64_PATH) static objects of this
// library are torn down before it.
struct Globals {
  std::mutex write_mutex;
  std::string tmpl;
  ProcessInfo process;
  std::atomic<int> dump_seq{0};
  std::string prefix;  // resolved once per process, so dumps and exit agree
  std::atomic<bool> output_disabled{false};
  // TORCHSEAL_SUPPRESSIONS, read at the first report (under write_mutex) so
  // a process that never reports never opens it; a bad file is reported
  // once and the process runs without suppressions.
  std::string suppressions_path;
  Suppressions suppressions;
  bool suppressions_loaded = false;
  bool library_held = true;  // TORCHSEAL_LIBRARY_HELD
};
Globals &G() {
  static constinit Lazy<Globals> g;
  return g.get();
}
#define g_write_mutex G().write_mutex
#define g_template G().tmpl
#define g_process G().process
#define g_dump_seq G().dump_seq
#define g_prefix G().prefix
#define g_output_disabled G().output_disabled

std::vector<std::string> read_cmdline() {
  std::vector<std::string> argv;
  int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return argv;
  std::string buf;
  char chunk[4096];
  ssize_t n;
  while ((n = read(fd, chunk, sizeof chunk)) > 0 && buf.size() < (1u << 20)) buf.append(chunk, n);
  close(fd);
  size_t start = 0;
  for (size_t i = 0; i < buf.size(); ++i)
    if (buf[i] == '\0') {
      argv.emplace_back(buf, start, i - start);
      start = i + 1;
    }
  if (start < buf.size()) argv.emplace_back(buf, start);
  return argv;
}

double unix_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

// Caller holds write_mutex.
AnalysisOptions analysis_options() {
  Globals &g = G();
  if (!g.suppressions_loaded) {
    g.suppressions_loaded = true;
    std::string error;
    if (!g.suppressions_path.empty() && !g.suppressions.load(g.suppressions_path, error)) {
      log::error("TORCHSEAL_SUPPRESSIONS: %s; reporting without suppressions", error.c_str());
      g.suppressions = Suppressions();
    }
  }
  AnalysisOptions opts;
  install_suppressions(opts, g.suppressions);
  opts.library_held = g.library_held;
  return opts;
}

}  // namespace

void report_files_init(const Config &cfg) {
  g_process.rank = rank_from_environment();
  g_template = cfg.set_by_environment(settings::Id::output)
                   ? cfg.output
                   : default_output_template(g_process.rank);
  G().suppressions_path = cfg.suppressions;
  G().library_held = cfg.library_held == LibraryHeldMode::On;
  char host[256] = {0};
  if (gethostname(host, sizeof host - 1) == 0) g_process.hostname = host;
  g_process.start_time = unix_now();
  g_process.argv = read_cmdline();
}

void report_files_after_fork() {
  // The parent's writer thread may have been writing a dump at the fork: its
  // lock would stay held forever in the child.
  new (&g_write_mutex) std::mutex();
  g_dump_seq.store(0);
  g_prefix.clear();
  g_process.start_time = unix_now();
  g_process.argv = read_cmdline();
}

void fill_process_info(ProcessInfo &p) {
  p = g_process;
  p.python = py::version();
  p.pid = getpid();
  p.end_time = unix_now();
  p.backend = backend_name();
  p.degraded = runtime_libs::degraded();
  p.unwinder = unwinder_name();
}

std::string output_prefix() {
  if (!g_prefix.empty()) return g_prefix;
  TemplateVars vars;
  vars.pid = getpid();
  vars.rank = g_process.rank;
  vars.host = g_process.hostname;
  vars.start_time = static_cast<int64_t>(g_process.start_time);
  std::string expanded, error, prefix, note;
  if (!expand_output_template(g_template, vars, expanded, error)) {
    log::error("%s; no report written", error.c_str());
    return {};
  }
  if (!choose_writable_prefix(expanded, prefix, note)) {
    log::error("%s; no report written", note.c_str());
    return {};
  }
  if (!note.empty()) log::warn("%s", note.c_str());
  g_prefix = prefix;
  return prefix;
}

bool disable_report_output() { return !g_output_disabled.exchange(true); }

void set_output_prefix(const std::string &prefix) { g_prefix = prefix; }

int64_t write_report(const char *trigger, const std::string &given_prefix, bool fresh_scan) {
  // Outside the write lock: it may wait for the main thread's safe point.
  if (fresh_scan && strcmp(trigger, "exit") != 0) holders::before_dump();
  std::lock_guard<std::mutex> lock(g_write_mutex);
  if (g_output_disabled.load()) return -1;
  try {
    // On the history's timeline at the moment the dump is taken; the exit
    // report is not a dump (the End chunk dates it).
    DumpTrigger dump;
    if (dump_trigger_from_name(trigger, dump)) recorder().on_dump(dump);
    AnalysisInput in;
    in.trigger = trigger;
    recorder().snapshot(in);
    holders::fill(in);
    fill_process_info(in.process);
    in.torch_caching_allocator = torch_caching_allocator_in_use();
    in.torch_process = torch_cuda_loaded();
    {
      LoaderWalkGuard walking;
      in.modules = capture_module_map();
    }
    std::string prefix = given_prefix.empty() ? output_prefix() : given_prefix, error;
    if (prefix.empty()) return -1;
    // A snapshot (`torchseal attach --snapshot`) ends an interval too.
    const bool interval = strcmp(trigger, "stop") == 0 || strcmp(trigger, "snapshot") == 0;
    if (strcmp(trigger, "exit") != 0 && !interval) prefix += "." + std::to_string(++g_dump_seq);
    // The scan just taken at this safe point decides what Python still
    // holds, as the exit scan does at exit.
    if (interval) in.holders.at_exit = in.holders.done;

    Report report;
    if (!produce_report(in, prefix, analysis_options(), &report, error)) {
      int err = errno;
      bool fatal = err == ENOSPC || err == EDQUOT || err == EROFS;
      // The history writer may have latched the same full disk and said so.
      if (fatal && !disable_report_output()) return -1;
      log::error("%s", error.c_str());
      return -1;
    }
    const Summary &s = report.summary;
    if (s.leaked_allocations && strcmp(trigger, "exit") == 0)
      log::warn("%llu byte(s) leaked in %llu allocation(s); see %s.txt",
                static_cast<unsigned long long>(s.leaked_bytes),
                static_cast<unsigned long long>(s.leaked_allocations), prefix.c_str());
    else
      log::info("no leaks; report in %s.json", prefix.c_str());
    return static_cast<int64_t>(s.leaked_allocations);
  } catch (const std::exception &e) {
    log::error("could not write the %s report: %s", trigger, e.what());
  } catch (...) {
    log::error("could not write the %s report: unknown error", trigger);
  }
  return -1;
}

}  // namespace torchseal
