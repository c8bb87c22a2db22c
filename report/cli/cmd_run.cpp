// `torchseal run -- CMD...`: preload the shim and exec CMD. With
// --fail-on-leak, run CMD as a child instead and gate its reports (check).
#include <fcntl.h>
#include <glob.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>

#include "common/util/path_name.h"
#include "report/cli/commands.h"

namespace torchseal::cli {
namespace {

bool is_file(const std::string &p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  std::string exe(buf, static_cast<size_t>(n));
  size_t slash = exe.rfind('/');
  return slash == std::string::npos ? std::string(".") : exe.substr(0, slash);
}

}  // namespace

#include "install_layout.h"  // TORCHSEAL_SHIM_FROM_CLI (meson.build)

// The shim that belongs to this CLI: the build tree layout first, then the
// install layouts. TORCHSEAL_SHIM overrides (and must then exist).
bool find_shim(std::string &path, std::string &error) {
  if (const char *env = std::getenv("TORCHSEAL_SHIM"); env && *env) {
    if (!is_file(env)) {
      error = std::string("TORCHSEAL_SHIM=") + env + " is not a file";
      return false;
    }
    path = env;
    return true;
  }
  std::string dir = self_dir();
  if (dir.empty()) {
    error = "cannot locate the torchseal executable via /proc/self/exe; set TORCHSEAL_SHIM";
    return false;
  }
  for (const char *rel :
       {"/../shim/libtorchseal.so", "/" TORCHSEAL_SHIM_FROM_CLI "/libtorchseal.so",
        "/../lib/torchseal/libtorchseal.so", "/../lib/libtorchseal.so", "/libtorchseal.so"}) {
    std::string p = dir + rel;
    if (is_file(p)) {
      char real[PATH_MAX];
      path = realpath(p.c_str(), real) ? std::string(real) : p;
      return true;
    }
  }
  error = "cannot find libtorchseal.so next to " + dir +
          "; set TORCHSEAL_SHIM=/path/to/libtorchseal.so";
  return false;
}

// Directory holding the helper package (torchseal/__init__.py) that belongs
// to this shim and CLI: next to the installed shim
// (<libdir>/torchseal/python), else the build tree (build/python, a sibling
// of build/report). Empty when neither has it.
std::string find_python_helper(const std::string &shim) {
  std::vector<std::string> dirs;
  size_t slash = shim.rfind('/');
  if (slash != std::string::npos) dirs.push_back(shim.substr(0, slash) + "/python");
  if (std::string self = self_dir(); !self.empty()) {
    dirs.push_back(self + "/../python");
    dirs.push_back(self + "/../lib/torchseal/python");
  }
  for (const std::string &d : dirs) {
    if (!is_file(d + "/torchseal/__init__.py")) continue;
    char real[PATH_MAX];
    return realpath(d.c_str(), real) ? std::string(real) : d;
  }
  return {};
}

namespace {

bool set_env(const char *name, const std::string &value, std::string &error) {
  if (setenv(name, value.c_str(), 1) != 0) {
    error = std::string("cannot set ") + name + ": " + std::strerror(errno);
    return false;
  }
  return true;
}

// ---- the options made from the settings table ----

// Help as it reads in `torchseal run --help`: a Choice starts with its
// values; the variable, and a default that is not one of listed values, end it.
std::string option_help(const settings::Spec &s) {
  std::string help = s.help;
  std::string tail = std::string(" (") + s.var;
  if (s.kind == settings::Kind::Choice) {
    help = settings::choice_list(s) + (help.empty() ? "" : ": " + help);
  } else if (s.default_value) {
    tail += std::string(", default ") + s.default_value;
  }
  return help + tail + ")";
}

void add_setting_options(CLI::App &cmd, RunOptions &opts) {
  for (size_t i = 0; i < settings::kCount; ++i) {
    const settings::Spec &s = settings::kTable[i];
    if (!s.option) continue;
    std::string &value = opts.setting_values[i];
    CLI::Option *opt = nullptr;
    switch (s.kind) {
      case settings::Kind::Integer:
        // Parsed as CLI11 parses an int, then set in decimal.
        opt =
            cmd.add_option_function<int>(
                   s.option, [&value](const int &n) { value = std::to_string(n); }, option_help(s))
                ->check(CLI::Range(s.lo, s.hi));
        break;
      case settings::Kind::Choice:
        opt = cmd.add_option(s.option, value, option_help(s))
                  ->check(CLI::IsMember(settings::choice_names(s)));
        break;
      case settings::Kind::ReadableFile:
        opt = cmd.add_option(s.option, value, option_help(s))->check(CLI::ExistingFile);
        break;
      case settings::Kind::Bytes:
        opt = cmd.add_option(s.option, value, option_help(s))
                  ->check(CLI::Validator(
                      [&s](std::string &v) {
                        unsigned long long n;
                        return settings::parse_bytes(s, v.c_str(), n)
                                   ? std::string()
                                   : "expects " + settings::accepted(s) + ", not '" + v + "'";
                      },
                      "SIZE"));
        break;
      default:
        opt = cmd.add_option(s.option, value, option_help(s));
        break;
    }
    if (&s == &settings::spec(settings::Id::torch)) {
      cmd.add_flag_callback(
             "--tensors", [&value] { value = "tensors"; },
             "same as --torch tensors: one allocation per tensor "
             "(PyTorch's cudaMallocAsync backend)")
          ->excludes(opt);
    }
  }
}

// Sets the variable of every setting an option gave; `output` stands for
// the --output value (--fail-on-leak picks one when it is not given).
bool set_setting_variables(const RunOptions &opts, const std::string &output, std::string &error) {
  for (size_t i = 0; i < settings::kCount; ++i) {
    const std::string &value =
        i == static_cast<size_t>(settings::Id::output) ? output : opts.setting_values[i];
    if (!value.empty() && !set_env(settings::kTable[i].var, value, error)) return false;
  }
  return true;
}

// ---- the `torchseal` Python helper ----

// Prepends the helper to PYTHONPATH so `import torchseal` in CMD gets the
// helper matching this shim. Not finding it is not an error: CMD may not be
// Python at all, and the helper is only a convenience.
bool add_python_helper(const std::string &shim, std::string &error) {
  std::string dir = find_python_helper(shim);
  if (dir.empty()) return true;
  std::string path = dir;
  if (const char *old = std::getenv("PYTHONPATH"); old && *old) path += std::string(":") + old;
  return set_env("PYTHONPATH", path, error);
}

// ---- --fail-on-leak ----

// A fresh directory for this run's reports, so every process (children,
// ranks) writes its own file and nothing stale is picked up.
bool make_run_dir(std::string &dir, std::string &error) {
  std::string base = ".";
  if (access(".", W_OK) != 0) {
    const char *tmp = std::getenv("TMPDIR");
    base = tmp && *tmp ? tmp : "/tmp";
  }
  std::string tmpl = base + "/torchseal-run-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (!mkdtemp(buf.data())) {
    error = "cannot create a report directory under " + base + ": " + std::strerror(errno);
    return false;
  }
  // Absolute: every process resolves the prefix against its own working
  // directory, and one that changed it would write where no check looks.
  char *abs = realpath(buf.data(), nullptr);
  dir = abs ? abs : buf.data();
  std::free(abs);
  return true;
}


// TORCHSEAL_OUTPUT template -> glob of the P.json files it can produce.
std::string template_glob(const std::string &tmpl) {
  std::string g;
  for (size_t i = 0; i < tmpl.size(); ++i) {
    char c = tmpl[i];
    if (c == '%' && i + 1 < tmpl.size()) {
      char n = tmpl[++i];
      if (n == '%')
        g += '%';
      else
        g += '*';
      continue;
    }
    if (c == '*' || c == '?' || c == '[' || c == '\\') g += '\\';
    g += c;
  }
  return g + ".json";
}

// The exit reports this run produced. On-demand dumps (P.<n>.json) are
// snapshots of a process whose exit report is also there; they are checked
// only when that exit report is missing (the process died).
std::vector<std::string> collect_reports(const std::string &tmpl, time_t since) {
  glob_t g{};
  std::vector<std::string> found;
  if (glob(template_glob(tmpl).c_str(), 0, nullptr, &g) == 0) {
    for (size_t i = 0; i < g.gl_pathc; ++i) {
      struct stat st;
      if (stat(g.gl_pathv[i], &st) == 0 && S_ISREG(st.st_mode) && st.st_mtime >= since) {
        found.emplace_back(g.gl_pathv[i]);
      }
    }
  }
  globfree(&g);
  std::set<std::string> all(found.begin(), found.end());
  std::vector<std::string> out;
  for (const std::string &p : found) {
    std::string stem = p.substr(0, p.size() - 5);  // drop ".json"
    size_t dot = stem.rfind('.');
    bool dump = dot != std::string::npos && dot + 1 < stem.size() &&
                std::all_of(stem.begin() + long(dot) + 1, stem.end(), ::isdigit) &&
                all.count(stem.substr(0, dot) + ".json");
    if (!dump) out.push_back(p);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Processes that recorded (a history) but wrote no exit report: ended by
// _exit/os._exit or killed. Nothing of theirs can be checked; said loudly.
size_t warn_unreported(const std::string &tmpl, time_t since) {
  size_t n = 0;
  std::string g = template_glob(tmpl);
  g = g.substr(0, g.size() - 5) + ".tseal";  // ".json" -> ".tseal"
  glob_t found{};
  if (glob(g.c_str(), 0, nullptr, &found) == 0) {
    for (size_t i = 0; i < found.gl_pathc; ++i) {
      std::string history = found.gl_pathv[i];
      std::string report = history.substr(0, history.size() - 6) + ".json";
      struct stat st;
      if (stat(history.c_str(), &st) != 0 || st.st_mtime < since) continue;
      if (access(report.c_str(), F_OK) == 0) continue;
      std::fprintf(stderr,
                   "torchseal: warning: a process ended without its exit report (_exit, "
                   "os._exit or a signal); its leaks were not checked: %s\n",
                   history.c_str());
      ++n;
    }
  }
  globfree(&found);
  return n;
}

volatile sig_atomic_t g_child = 0;

void forward_signal(int sig) {
  if (g_child > 0) kill(pid_t(g_child), sig);
}

// fork + exec + wait. Returns the command's status as a shell would report
// it (128+N for signal N; 126/127 when it cannot be run).
int run_child(const std::vector<std::string> &command) {
  int pipefd[2];
  if (pipe2(pipefd, O_CLOEXEC) != 0) {
    print_error(std::string("pipe: ") + std::strerror(errno));
    return kExitUnusable;
  }
  std::vector<char *> argv;
  for (const std::string &a : command) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  // Like system(): the terminal's SIGINT/SIGQUIT reach the child directly;
  // SIGTERM/SIGHUP sent to us (a CI timeout) are passed on.
  struct sigaction ign {
  }, fwd{}, old_int{}, old_quit{}, old_term{}, old_hup{};
  ign.sa_handler = SIG_IGN;
  fwd.sa_handler = forward_signal;
  sigaction(SIGINT, &ign, &old_int);
  sigaction(SIGQUIT, &ign, &old_quit);
  sigaction(SIGTERM, &fwd, &old_term);
  sigaction(SIGHUP, &fwd, &old_hup);
  pid_t pid = fork();
  if (pid == 0) {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGQUIT, &old_quit, nullptr);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    close(pipefd[0]);
    execvp(argv[0], argv.data());
    int err = errno;
    ssize_t w = write(pipefd[1], &err, sizeof err);
    (void)w;
    _exit(127);
  }
  close(pipefd[1]);
  int status = 0, exec_errno = 0;
  if (pid < 0) {
    print_error(std::string("fork: ") + std::strerror(errno));
    close(pipefd[0]);
    return kExitUnusable;
  }
  g_child = pid;
  ssize_t n;
  while ((n = read(pipefd[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR) {}
  close(pipefd[0]);
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  g_child = 0;
  sigaction(SIGINT, &old_int, nullptr);
  sigaction(SIGQUIT, &old_quit, nullptr);
  sigaction(SIGTERM, &old_term, nullptr);
  sigaction(SIGHUP, &old_hup, nullptr);
  if (n == sizeof exec_errno) {
    print_error("cannot run " + command[0] + ": " + std::strerror(exec_errno));
    return exec_errno == ENOENT ? 127 : 126;
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

int run_and_check(const RunOptions &opts, const std::string &tmpl) {
  time_t started = time(nullptr);
  int status = run_child(opts.command);
  if (status != 0) {
    std::fprintf(stderr, "torchseal: %s exited with status %d; reports not checked\n",
                 opts.command[0].c_str(), status);
    return status;
  }
  std::vector<std::string> reports = collect_reports(tmpl, started);
  const size_t unreported = warn_unreported(tmpl, started);
  if (reports.empty()) {
    if (unreported) return kExitOk;  // said above
    // Nothing to gate: the shim stays inert (writes nothing) in processes
    // that never call CUDA. Say so loudly rather than pass silently.
    std::fprintf(stderr,
                 "torchseal: warning: no reports matching %s were written (no CUDA "
                 "activity?); nothing to check\n",
                 template_glob(tmpl).c_str());
    return kExitOk;
  }
  GateFlags flags = opts.gate;
  // Already applied in-process; idempotent.
  flags.suppressions = opts.setting(settings::Id::suppressions);
  return check_reports(reports, flags);
}

}  // namespace

CLI::App *add_run_command(CLI::App &app, RunOptions &opts) {
  CLI::App *cmd = app.add_subcommand("run", "Run CMD with the leak detector preloaded.");
  const std::string description =
      "DESCRIPTION\n"
      "  Sets the TORCHSEAL_* variables from the options, prepends libtorchseal.so to\n"
      "  LD_PRELOAD (keeping existing entries) and execs CMD, so the exit status and\n"
      "  signals are CMD's own. At exit the detector writes P.json and P.txt for the\n"
      "  output prefix P. Options left out keep the TORCHSEAL_* value already in the\n"
      "  environment, or the default.\n"
      "  With --fail-on-leak, CMD runs as a child instead; every process it starts\n"
      "  (children, MPI ranks) writes its own report: into a new directory\n"
      "  ./torchseal-run-XXXXXX (prefix torchseal-%h-%p) unless --output is given, and\n"
      "  then --output must contain %p. When CMD succeeds, all those reports go through\n"
      "  `torchseal check` with --max-leaked-bytes, --max-growth-bytes-per-step,\n"
      "  --fail-on-degraded, --baseline, --baseline-max-ratio, --junit and\n"
      "  --suppressions.\n\n";
  add_setting_options(*cmd, opts);
  cmd->add_flag("--fail-on-leak", opts.fail_on_leak,
                "run CMD as a child, then `check` every report it wrote (with the limit "
                "options below)");
  add_gate_flags(*cmd, opts.gate, false);
  cmd->add_option("command", opts.command, "the command to run, after --")->required();
  cmd->footer(
      description +
      "EXAMPLES\n  torchseal run --output /tmp/leaks-%p --exit-code 23 -- python train.py\n"
      "  torchseal run --fail-on-leak --baseline leaks-baseline.json -- pytest tests/gpu\n\n"
      "ENVIRONMENT\n  TORCHSEAL_SHIM  path of libtorchseal.so, overriding the lookup next to this\n"
      "                  executable\n\n"
      "EXIT STATUS\n  CMD's own; 2 if torchseal could not set up, 126/127 if CMD cannot be run.\n"
      "  With --fail-on-leak: CMD's own when it fails; otherwise 0 within limits, 1 over\n"
      "  a limit, 2 unusable reports (as `torchseal check`).\n");
  return cmd;
}

int run_command(const RunOptions &opts) {
  std::string shim, error;
  if (!find_shim(shim, error)) {
    print_error(error);
    return kExitUnusable;
  }
  // ld.so splits LD_PRELOAD on spaces and colons; such a path cannot be preloaded.
  if (shim.find_first_of(": ") != std::string::npos) {
    print_error("shim path " + shim + " contains a space or colon and cannot be preloaded");
    return kExitUnusable;
  }
  std::string preload = shim;
  if (const char *old = std::getenv("LD_PRELOAD"); old && *old) preload += std::string(":") + old;

  std::string output = opts.setting(settings::Id::output);
  if (opts.fail_on_leak) {
    if (output.empty()) {
      std::string dir;
      if (!make_run_dir(dir, error)) {
        print_error(error);
        return kExitUnusable;
      }
      output = dir + "/torchseal-%h-%p";
      std::fprintf(stderr, "torchseal: reports of this run go to %s/\n", dir.c_str());
    } else if (output.find("%p") == std::string::npos) {
      print_error("--fail-on-leak needs %p in --output (each process writes its own report)");
      return kExitUnusable;
    } else {
      output = absolute_path(output);  // as the run directory (make_run_dir)
    }
  }
  bool ok = set_env("LD_PRELOAD", preload, error) && set_setting_variables(opts, output, error) &&
            add_python_helper(shim, error);
  if (!ok) {
    print_error(error);
    return kExitUnusable;
  }

  if (opts.fail_on_leak) return run_and_check(opts, output);

  std::vector<char *> argv;
  for (const std::string &a : opts.command) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  int err = errno;
  print_error("cannot run " + opts.command[0] + ": " + std::strerror(err));
  return err == ENOENT ? 127 : 126;
}

}  // namespace torchseal::cli
