// `torchseal run -- CMD...`: preload the shim and exec CMD.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "commands.h"

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
  for (const char *rel : {"/../shim/libtorchseal.so", "/../lib/torchseal/libtorchseal.so",
                          "/../lib/libtorchseal.so", "/libtorchseal.so"}) {
    std::string p = dir + rel;
    if (is_file(p)) {
      char real[PATH_MAX];
      path = realpath(p.c_str(), real) ? std::string(real) : p;
      return true;
    }
  }
  error = "cannot find libtorchseal.so next to " + dir + "; set TORCHSEAL_SHIM=/path/to/libtorchseal.so";
  return false;
}

bool set_env(const char *name, const std::string &value, std::string &error) {
  if (setenv(name, value.c_str(), 1) != 0) {
    error = std::string("cannot set ") + name + ": " + std::strerror(errno);
    return false;
  }
  return true;
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
      "  environment, or the default.\n\n";
  cmd->add_option("--output,-o", opts.output,
                  "output prefix P; %p pid, %r rank, %h host, %t start time, %% literal "
                  "(TORCHSEAL_OUTPUT, default torchseal-%p)");
  cmd->add_option("--exit-code", opts.exit_code,
                  "exit with N when leaks remain, like LSan's exitcode (TORCHSEAL_EXIT_CODE)")
      ->check(CLI::Range(0, 255));
  cmd->add_option("--backend", opts.backend, "auto, cupti or hooks (TORCHSEAL_BACKEND)")
      ->check(CLI::IsMember({"auto", "cupti", "hooks"}));
  cmd->add_option("--stack-depth", opts.stack_depth,
                  "native frames kept per allocation (TORCHSEAL_STACK_DEPTH, default 64)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--log", opts.log, "off, error, warn, info or debug (TORCHSEAL_LOG)")
      ->check(CLI::IsMember({"off", "error", "warn", "info", "debug"}));
  cmd->add_option("--python", opts.python, "auto or off: record Python frames (TORCHSEAL_PYTHON)")
      ->check(CLI::IsMember({"auto", "off"}));
  cmd->add_option("--torch", opts.torch, "segments or tensors (TORCHSEAL_TORCH)")
      ->check(CLI::IsMember({"segments", "tensors"}));
  cmd->add_option("--suppressions", opts.suppressions,
                  "file of leak:PATTERN lines (TORCHSEAL_SUPPRESSIONS)")
      ->check(CLI::ExistingFile);
  cmd->add_option("command", opts.command, "the command to run, after --")->required();
  cmd->footer(
      description +
      "EXAMPLE\n  torchseal run --output /tmp/leaks-%p --exit-code 23 -- python train.py\n\n"
      "ENVIRONMENT\n  TORCHSEAL_SHIM  path of libtorchseal.so, overriding the lookup next to this\n"
      "                  executable\n\n"
      "EXIT STATUS\n  CMD's own; 2 if torchseal could not set up, 126/127 if CMD cannot be run.\n");
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

  bool ok = set_env("LD_PRELOAD", preload, error) &&
            (opts.output.empty() || set_env("TORCHSEAL_OUTPUT", opts.output, error)) &&
            (opts.exit_code < 0 || set_env("TORCHSEAL_EXIT_CODE", std::to_string(opts.exit_code), error)) &&
            (opts.backend.empty() || set_env("TORCHSEAL_BACKEND", opts.backend, error)) &&
            (opts.stack_depth < 0 || set_env("TORCHSEAL_STACK_DEPTH", std::to_string(opts.stack_depth), error)) &&
            (opts.log.empty() || set_env("TORCHSEAL_LOG", opts.log, error)) &&
            (opts.python.empty() || set_env("TORCHSEAL_PYTHON", opts.python, error)) &&
            (opts.torch.empty() || set_env("TORCHSEAL_TORCH", opts.torch, error)) &&
            (opts.suppressions.empty() || set_env("TORCHSEAL_SUPPRESSIONS", opts.suppressions, error));
  if (!ok) {
    print_error(error);
    return kExitUnusable;
  }

  std::vector<char *> argv;
  for (const std::string &a : opts.command) argv.push_back(const_cast<char *>(a.c_str()));
  argv.push_back(nullptr);
  execvp(argv[0], argv.data());
  int err = errno;
  print_error("cannot run " + opts.command[0] + ": " + std::strerror(err));
  return err == ENOENT ? 127 : 126;
}

}  // namespace torchseal::cli
