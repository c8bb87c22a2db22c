// Shared input/output plumbing of the report-consuming subcommands.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "common/settings/settings.h"
#include "report/analysis/suppressions.h"
#include "report/cli/commands.h"
#include "report/cli/load_report.h"
#include "report/input/history_reader.h"

namespace torchseal::cli {

namespace {

bool load_all(const std::vector<std::string> &paths, const std::string &suppressions,
              std::vector<Report> &out, std::string &error, const HistoryWindow *window) {
  Suppressions supp;
  if (!suppressions.empty() && !supp.load(suppressions, error)) return false;
  AnalysisOptions opts;
  install_suppressions(opts, supp);
  // TORCHSEAL_LIBRARY_HELD applies to a history analyzed here as it did in
  // the process (a P.json keeps the process's verdict).
  const settings::Spec &lib = settings::spec(settings::Id::library_held);
  if (const char *v = settings::from_environment(lib)) {
    int i = settings::choice_index(lib, v);
    if (i < 0) {
      error = "invalid " + std::string(lib.var) + "='" + std::string(v, strnlen(v, 64)) +
              "' (accepted: " + settings::accepted(lib, v) + ")";
      for (char &c : error)
        if (c < 0x20 || c == 0x7f) c = '?';
      return false;
    }
    opts.library_held = i == 0;
  }
  for (const std::string &path : paths) {
    Report r;
    std::vector<std::string> warnings;
    bool ok = load_report(path, r, error, warnings, opts, window);
    for (const std::string &w : warnings)
      std::fprintf(stderr, "torchseal: warning: %s\n", w.c_str());
    if (!ok) return false;
    // A P.json was analyzed in its process, with that process's
    // suppressions; ours apply on top. (For a P.tseal this is a no-op: the
    // analysis above already suppressed.)
    apply_suppressions(r, supp);
    out.push_back(std::move(r));
  }
  return true;
}

bool write_all(const std::string &path, const std::string &text, std::string &error) {
  if (path == "-") {
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() ||
        std::fflush(stdout) != 0) {
      error = "cannot write to standard output";
      return false;
    }
    return true;
  }
  // Readers (CI artifact upload, a concurrent check) never see half a file.
  std::string tmp = path + ".tmp." + std::to_string(getpid());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error = "cannot write " + path + ": " + std::strerror(errno);
    return false;
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = "cannot write " + path + ": " + std::strerror(errno);
      close(fd);
      unlink(tmp.c_str());
      return false;
    }
    done += size_t(n);
  }
  if (close(fd) != 0 || rename(tmp.c_str(), path.c_str()) != 0) {
    error = "cannot write " + path + ": " + std::strerror(errno);
    unlink(tmp.c_str());
    return false;
  }
  return true;
}

}  // namespace

bool load_inputs(const std::vector<std::string> &paths, const std::string &suppressions,
                 std::vector<Report> &out, const HistoryWindow *window) {
  std::string error;
  if (load_all(paths, suppressions, out, error, window)) return true;
  print_error(error);
  return false;
}

bool write_output(const std::string &path, const std::string &text) {
  std::string error;
  if (write_all(path, text, error)) return true;
  print_error(error);
  return false;
}

void add_window_options(CLI::App *cmd, WindowArgs &args) {
  // -1 means unset: a negative, infinite or NaN time from the user would
  // pass for one (or close the window before it opens).
  CLI::Validator seconds(
      [](std::string &text) -> std::string {
        char *end = nullptr;
        double v = std::strtod(text.c_str(), &end);
        if (end == text.c_str() || *end || !std::isfinite(v) || v < 0)
          return "expects seconds since the process started (0 or more), not '" + text + "'";
        return "";
      },
      "SECONDS");
  cmd->add_option("--from", args.from_s, "read the history from SECONDS after the process started")
      ->check(seconds);
  cmd->add_option("--to", args.to_s, "... up to SECONDS after the process started")->check(seconds);
  cmd->add_option("--steps", args.steps,
                  "read the history's steps A..B (both included; A.. or ..B leave an end open)")
      ->excludes("--from")
      ->excludes("--to");
}

bool resolve_window(const WindowArgs &args, HistoryWindow &w) {
  w = HistoryWindow{};
  std::string error;
  if (!args.steps.empty()) {
    if (parse_step_range(args.steps, w, error)) return true;
    print_error(error);
    return false;
  }
  if (args.from_s < 0 && args.to_s < 0) return true;
  if ((args.from_s >= 0 && args.to_s >= 0 && args.from_s > args.to_s)) {
    print_error("--from " + std::to_string(args.from_s) + " is after --to " +
                std::to_string(args.to_s));
    return false;
  }
  w.by_time = true;
  w.from_s = args.from_s < 0 ? 0 : args.from_s;
  w.to_s = args.to_s;
  return true;
}

}  // namespace torchseal::cli
