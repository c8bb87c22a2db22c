// `torchseal attach PID`: track a running Python process that was started
// without torchseal (docs/attach.md). The shim gets in through
// sys.remote_exec on CPython 3.14+, or ptrace before (attach_ptrace.h); it
// starts late (torchseal_start), ends after the requested time or steps,
// writes its report and history, and detaches (shim/runtime/attach.cpp).
// This side follows it through a status file in a private directory.
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dirent.h>
#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "common/util/py_literal.h"
#include "report/analysis/growth.h"
#include "common/util/path_name.h"
#include "report/cli/attach_ptrace.h"
#include "report/cli/attach_target.h"
#include "report/cli/commands.h"

namespace torchseal::cli {
namespace {

// How long the process may take to reach a Python safe point and start,
// and to finish its detach once the report is written.
constexpr double kStartTimeout = 30;
constexpr double kDetachTimeout = 30;

volatile sig_atomic_t g_interrupted = 0;
void on_interrupt(int) { g_interrupted = 1; }

void refuse(const std::string &why) {
  std::fprintf(stderr, "torchseal: attach: %s\n", why.c_str());
}

double unix_now() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<double>(ts.tv_sec) + ts.tv_nsec / 1e9;
}

void sleep_s(double s) {
  timespec ts{static_cast<time_t>(s), static_cast<long>((s - std::floor(s)) * 1e9)};
  nanosleep(&ts, nullptr);
}

// "60s", "2m", "1h", "90" (seconds); -1 when malformed.
double parse_duration(const std::string &text) {
  if (text.empty()) return -1;
  char *end = nullptr;
  double v = std::strtod(text.c_str(), &end);
  std::string unit = end ? end : "";
  double scale = unit.empty() || unit == "s" ? 1 : unit == "m" ? 60 : unit == "h" ? 3600 : -1;
  if (scale < 0 || !(v > 0) || !std::isfinite(v)) return -1;
  return v * scale;
}

std::string version_text(unsigned hex) {
  if (!hex) return "unknown";
  return std::to_string(hex >> 24) + "." + std::to_string((hex >> 16) & 0xff);
}

// sys.remote_exec(pid, script), run by the target's own interpreter binary
// (the same version, as remote_exec needs). The script is the Python
// helper's _remote_attach.py after one line with its arguments: it only
// loads the shim and queues the request, like the ptrace path.
bool inject_with_remote_exec(const attach::Target &t, const std::string &shim,
                             const std::string &request, const std::string &dir,
                             const std::string &helper, std::string &error) {
  std::string script = dir + "/attach.py";
  std::string status = dir + "/status";
  std::ifstream in(helper);
  std::string body((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (body.empty()) {
    error = "cannot read " + helper;
    return false;
  }
  {
    std::ofstream f(script);
    f << "_TORCHSEAL_ATTACH = (" << python_bytes_literal(shim)
      << ".decode('utf-8', 'surrogateescape'), " << python_bytes_literal(request) << ", "
      << python_bytes_literal(status) << ".decode('utf-8', 'surrogateescape'))\n"
      << body;
    if (!f) {
      error = "cannot write " + script;
      return false;
    }
  }
  chmod(script.c_str(), 0644);
  std::string code = "import sys; sys.remote_exec(" + std::to_string(t.pid) + ", " +
                     python_bytes_literal(script) + ".decode('utf-8', 'surrogateescape'))";
  int pipefd[2];
  if (pipe(pipefd) != 0) {
    error = std::string("pipe: ") + std::strerror(errno);
    return false;
  }
  pid_t child = fork();
  if (child == 0) {
    dup2(pipefd[1], 2);
    close(pipefd[0]);
    close(pipefd[1]);
    execl(t.exe.c_str(), t.exe.c_str(), "-I", "-c", code.c_str(), static_cast<char *>(nullptr));
    std::fprintf(stderr, "cannot run %s: %s\n", t.exe.c_str(), std::strerror(errno));
    _exit(127);
  }
  close(pipefd[1]);
  std::string err;
  char buf[512];
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof buf)) > 0 || (n < 0 && errno == EINTR))
    if (n > 0) err.append(buf, static_cast<size_t>(n));
  close(pipefd[0]);
  int st = 0;
  while (waitpid(child, &st, 0) < 0 && errno == EINTR) {}
  if (child > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0) return true;
  // The last line of the traceback says why (permissions, remote debugging off).
  std::string last;
  std::istringstream lines(err);
  for (std::string l; std::getline(lines, l);)
    if (!l.empty()) last = l;
  error = "sys.remote_exec failed: " + (last.empty() ? std::string("no message") : last);
  return false;
}

// The shim's status lines so far.
std::vector<std::string> status_lines(const std::string &dir) {
  std::vector<std::string> out;
  std::ifstream f(dir + "/status");
  for (std::string l; std::getline(f, l);) out.push_back(l);
  return out;
}

// The shim's log lines written since `at`, to our stderr.
void forward_log(const std::string &dir, std::streamoff &at) {
  std::ifstream f(dir + "/log");
  if (!f || !f.seekg(at)) return;
  for (std::string l; std::getline(f, l) && !f.eof();) {
    std::fprintf(stderr, "%s\n", l.c_str());
    at = f.tellg();
  }
}

bool alive(pid_t pid) { return kill(pid, 0) == 0 || errno == EPERM; }

// Threads of `pid` named torchseal-*.
std::vector<std::string> torchseal_threads(pid_t pid) {
  std::vector<std::string> out;
  std::string dir = "/proc/" + std::to_string(pid) + "/task";
  DIR *d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent *e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::ifstream f(dir + "/" + e->d_name + "/comm");
    std::string name;
    if (std::getline(f, name) && name.rfind("torchseal", 0) == 0) out.push_back(name);
  }
  closedir(d);
  return out;
}

void remove_dir(const std::string &dir) {
  for (const char *f : {"/status", "/stop", "/attach.py", "/log"}) unlink((dir + f).c_str());
  rmdir(dir.c_str());
}

int attach_process(const AttachOptions &opts) {
  if (opts.pid <= 0) {
    refuse("PID must be a positive process id");
    return kExitUnusable;
  }
  const pid_t pid = opts.pid;
  const int modes = !opts.for_time.empty() + (opts.steps > 0) + opts.snapshot;
  if (modes > 1) {
    refuse("give one of --for, --steps and --snapshot");
    return kExitUnusable;
  }
  double seconds = 60;
  if (!opts.for_time.empty() && (seconds = parse_duration(opts.for_time)) < 0) {
    refuse("--for " + opts.for_time + ": expected a duration such as 60s, 5m or 1h");
    return kExitUnusable;
  }
  if (pid == getpid()) {
    refuse("torchseal cannot attach to itself");
    return kExitUnusable;
  }
  attach::Target t;
  std::string error;
  if (!attach::inspect(pid, t, error)) {
    refuse(error);
    return kExitUnusable;
  }
  if (t.tracked) {
    refuse("pid " + std::to_string(pid) + " is already tracked (" + t.shim_mapped +
           " is loaded in it; one attach per process)");
    return kExitUnusable;
  }
  if (t.python.empty()) {
    refuse("pid " + std::to_string(pid) + " (" + t.exe +
           ") is not a Python process: no interpreter exporting Py_AddPendingCall is mapped");
    return kExitUnusable;
  }
  std::string shim;
  if (!find_shim(shim, error)) {
    refuse(error);
    return kExitUnusable;
  }
  // sys.remote_exec runs the helper's script: 3.14+, and the helper found.
  const std::string helper_dir = find_python_helper(shim);
  const std::string helper =
      helper_dir.empty() ? std::string() : helper_dir + "/torchseal/_remote_attach.py";
  const bool remote_exec_ok = t.py_version >= 0x030e0000;
  const bool have_helper = !helper.empty() && access(helper.c_str(), R_OK) == 0;
  std::string via = opts.via;
  if (via == "auto") via = remote_exec_ok && have_helper ? "remote-exec" : "ptrace";
  if (via == "remote-exec" && !remote_exec_ok) {
    refuse("--via remote-exec needs Python 3.14+; pid " + std::to_string(pid) + " runs " +
           version_text(t.py_version));
    return kExitUnusable;
  }
  if (via == "remote-exec" && !have_helper) {
    refuse(
        "--via remote-exec needs the torchseal Python helper (torchseal/_remote_attach.py) "
        "next to the shim; not found");
    return kExitUnusable;
  }
  const std::string prefix =
      absolute_path(opts.output.empty() ? "torchseal-attach-" + std::to_string(pid) : opts.output);

  // The private directory the shim reports through, owned by the target's
  // user (a root attach to another user's process). /tmp, not our $TMPDIR:
  // the target must reach the same path, and it does not share our
  // environment. mkdtemp fills in the Xs.
  char tmpl[] = "/tmp/torchseal-attach-XXXXXX";
  if (!mkdtemp(tmpl)) {
    refuse(std::string("cannot create a directory in /tmp: ") + std::strerror(errno));
    return kExitUnusable;
  }
  const std::string dir = tmpl;
  struct stat proc_st;
  if (stat(("/proc/" + std::to_string(pid)).c_str(), &proc_st) == 0 && getuid() == 0 &&
      proc_st.st_uid != 0) {
    if (chown(dir.c_str(), proc_st.st_uid, proc_st.st_gid) != 0) {}
  }
  std::ostringstream req;
  req << "mode="
      << (opts.snapshot    ? "snapshot"
          : opts.steps > 0 ? "steps"
                           : "for")
      << "\n"
      << "seconds=" << seconds << "\n"
      << "steps=" << opts.steps << "\n"
      << "prefix=" << prefix << "\n"
      << "control=" << dir << "\n"
      << "deadline=" << static_cast<long long>(unix_now() + kStartTimeout) << "\n";
  bool injected = via == "remote-exec"
                      ? inject_with_remote_exec(t, shim, req.str(), dir, helper, error)
                      : attach::inject_with_ptrace(t, shim, req.str(), error);
  if (!injected) {
    refuse(error);
    remove_dir(dir);
    return kExitUnusable;
  }

  // Ctrl-C ends the tracking early; the report is still written.
  struct sigaction sa {
  }, old_int{}, old_term{};
  sa.sa_handler = on_interrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  auto finish = [&](int code) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    remove_dir(dir);
    return code;
  };

  bool attached = false, reported = false, detached = false, stop_sent = false;
  long long leaks = -1;
  unsigned long long tracked = 0;
  std::string tracked_kind;  // "steps" or "windows"; empty from an older shim
  size_t restored = 0;
  const double started = unix_now();
  double reported_at = 0;
  size_t seen = 0;
  std::streamoff log_at = 0;
  for (;;) {
    forward_log(dir, log_at);
    std::vector<std::string> lines = status_lines(dir);
    for (; seen < lines.size(); ++seen) {
      const std::string &l = lines[seen];
      if (l.rfind("error ", 0) == 0) {
        refuse(l.substr(6) + " (pid " + std::to_string(pid) + ")");
        if (!attached) return finish(kExitUnusable);
      } else if (l.rfind("attached ", 0) == 0) {
        attached = true;
        std::string what = opts.snapshot ? std::string("a snapshot")
                           : opts.steps > 0
                               ? std::to_string(opts.steps) + " step(s)"
                               : std::to_string(static_cast<long long>(seconds)) + " s";
        std::fprintf(stderr,
                     "torchseal: attached to pid %d (Python %s, via %s, backend %s); tracking "
                     "%s, Ctrl-C ends early\n",
                     pid, version_text(t.py_version).c_str(), via.c_str(), l.substr(9).c_str(),
                     what.c_str());
      } else if (l.rfind("report ", 0) == 0) {
        reported = true;
        reported_at = unix_now();
        // "report LEAKS [TRACKED steps|windows]"
        std::istringstream in(l.substr(7));
        in >> leaks >> tracked >> tracked_kind;
      } else if (l.rfind("detaching ", 0) == 0) {
        restored = std::strtoull(l.c_str() + 10, nullptr, 10);
      } else if (l == "detached") {
        detached = true;
      }
    }
    if (detached) break;
    if (!alive(pid)) {
      refuse("pid " + std::to_string(pid) + " exited " +
             (reported ? "before its detach finished" : "before the report was written"));
      return finish(kExitUnusable);
    }
    if (!attached && unix_now() - started > kStartTimeout + 2) {
      refuse("pid " + std::to_string(pid) +
             " reached no Python safe point in time (blocked in native code?); the shim "
             "stays loaded there, inert");
      return finish(kExitUnusable);
    }
    if (reported_at && unix_now() - reported_at > kDetachTimeout) {
      refuse("pid " + std::to_string(pid) +
             " did not finish the Python side of its detach (no safe point reached); recording "
             "has stopped and the GOT is restored");
      break;
    }
    if (g_interrupted && attached && !stop_sent) {
      std::ofstream(dir + "/stop") << "stop\n";
      stop_sent = true;
      std::fprintf(stderr, "torchseal: ending early; writing the report\n");
    }
    sleep_s(0.05);
  }
  forward_log(dir, log_at);
  // The controller thread ends right after it hands over; the main thread
  // joined it before writing "detached".
  std::vector<std::string> left;
  for (int i = 0; i < 60 && !(left = torchseal_threads(pid)).empty(); ++i) sleep_s(0.05);
  if (!left.empty())
    refuse("torchseal threads still running in pid " + std::to_string(pid) + ": " + left[0]);
  std::ifstream text(prefix + ".txt");
  if (text) std::fputs(std::string(std::istreambuf_iterator<char>(text), {}).c_str(), stdout);
  std::fflush(stdout);
  const size_t growth_needs = min_samples_for_growth(GrowthOptions{});
  if (!opts.snapshot && !tracked_kind.empty() && tracked < growth_needs)
    std::fprintf(stderr,
                 "torchseal: %llu %s tracked, too few for a growth verdict (it needs %zu; track "
                 "--steps 15 or --for 15s): what the time allocated and still holds is listed, "
                 "but nothing can be called growth (docs/attach.md)\n",
                 tracked,
                 tracked == 1 ? tracked_kind.substr(0, tracked_kind.size() - 1).c_str()
                              : tracked_kind.c_str(),
                 growth_needs);
  std::fprintf(stderr,
               "torchseal: wrote %s.json, %s.txt and %s.tseal (%lld leak(s)); detached from pid "
               "%d (%zu GOT entries restored)\n",
               prefix.c_str(), prefix.c_str(), prefix.c_str(), leaks, pid, restored);
  return finish(leaks < 0 ? kExitUnusable : kExitOk);
}

}  // namespace

CLI::App *add_attach_command(CLI::App &app, AttachOptions &opts) {
  CLI::App *cmd = app.add_subcommand(
      "attach", "Track a running Python process started without torchseal, then detach.");
  cmd->add_option("pid", opts.pid, "the process id")->required();
  cmd->add_option("--for", opts.for_time,
                  "track for this long, then report and detach: 60s, 5m, 1h (default 60s)");
  cmd->add_option("--steps", opts.steps,
                  "track N steps (torchseal.step() calls, else time windows of "
                  "TORCHSEAL_STEP_SECONDS), then report and detach")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--snapshot", opts.snapshot,
                "report at once what Python holds now (a holder scan), then detach");
  cmd->add_option("-o,--output", opts.output,
                  "report prefix P: P.json, P.txt, P.tseal (default ./torchseal-attach-PID)");
  cmd->add_option("--via", opts.via,
                  "how the shim gets in: auto (remote-exec on Python 3.14+, else ptrace), "
                  "remote-exec, ptrace")
      ->check(CLI::IsMember({"auto", "remote-exec", "ptrace"}));
  cmd->footer(help_footer(
      "  Loads libtorchseal.so into the running Python process PID, which did not\n"
      "  preload it, and starts recording there: memory allocated before is\n"
      "  pre-existing (never a leak), and what the process allocates from then on is\n"
      "  judged as usual. At the end (--for, --steps, --snapshot or Ctrl-C) the\n"
      "  process writes P.json, P.txt and P.tseal, then detaches: its GOT entries get\n"
      "  their values back, CUPTI is released and no torchseal thread is left; the\n"
      "  process runs on. The text report is printed.\n"
      "  On CPython 3.14+ the shim gets in through sys.remote_exec; before 3.14\n"
      "  through ptrace (x86_64): the main thread calls dlopen and queues the start\n"
      "  for its next Python safe point. Both need the right to ptrace PID (same\n"
      "  user, kernel.yama.ptrace_scope 0, or CAP_SYS_PTRACE). One attach per process.\n"
      "  See docs/attach.md.\n",
      "0 the report was written and the process detached; 2 refused (not Python,\n"
      "  not found, already tracked, not permitted) or the process went away.",
      {"torchseal attach 4242 --for 2m -o /tmp/job", "torchseal attach 4242 --steps 20",
       "torchseal attach 4242 --snapshot"}));
  return cmd;
}

int attach_command(const AttachOptions &opts) { return attach_process(opts); }

}  // namespace torchseal::cli
