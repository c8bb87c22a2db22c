// Subcommands of the `torchseal` CLI. Each registers its options on the
// given CLI11 app and returns the callback-run state it fills in.
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/settings/settings.h"
#include "report/model/report_model.h"

namespace torchseal::cli {

// Exit statuses of the CLI itself (a command run by `torchseal run` keeps
// its own: that path execs).
inline constexpr int kExitOk = 0;
inline constexpr int kExitLimitExceeded = 1;  // `check`: a report broke a limit
inline constexpr int kExitUnusable = 2;       // bad usage or unusable input

// The DESCRIPTION / EXIT STATUS / EXAMPLES footer of a subcommand's --help.
std::string help_footer(std::string_view description, std::string_view exit_status,
                        std::initializer_list<std::string_view> examples);

// Prints "torchseal: error: MSG" on stderr (one line).
void print_error(const std::string &msg);

// The CI gate's policy flags, shared by `check` and `run --fail-on-leak`.
struct GateFlags {
  int64_t max_leaked_bytes = -1;          // -1: unset (0)
  double max_growth_bytes_per_step = -1;  // -1: unset (0)
  bool fail_on_degraded = false;
  double baseline_max_ratio = -1;         // -1: unset (known sites never count)
  std::string suppressions, baseline, junit;
};
void add_gate_flags(CLI::App &cmd, GateFlags &flags, bool with_suppressions);

struct RunOptions {
  // The options made from the settings table (common/settings/settings.def):
  // the value each sets its TORCHSEAL_* variable to; empty when not given.
  std::array<std::string, settings::kCount> setting_values;
  bool fail_on_leak = false;
  GateFlags gate;
  std::vector<std::string> command;
  const std::string &setting(settings::Id id) const {
    return setting_values[static_cast<size_t>(id)];
  }
};
// The shim that belongs to this CLI (TORCHSEAL_SHIM overrides); false with
// `error` when there is none.
bool find_shim(std::string &path, std::string &error);
// The directory holding the `torchseal` Python package that belongs to
// `shim` and this CLI, or "" (cmd_run.cpp).
std::string find_python_helper(const std::string &shim);

CLI::App *add_run_command(CLI::App &app, RunOptions &opts);
int run_command(const RunOptions &opts);  // without --fail-on-leak: returns only on failure

// --from/--to/--steps (docs/long-runs.md): one window of a history.
struct WindowArgs {
  double from_s = -1, to_s = -1;  // -1: unset
  std::string steps;              // "A..B"
};
void add_window_options(CLI::App *cmd, WindowArgs &args);
// False (the error printed) on a bad range.
bool resolve_window(const WindowArgs &args, HistoryWindow &w);

struct ReportOptions {
  std::string file;
  WindowArgs window;
  std::string format = "text";
  std::string suppressions;
  std::string html;  // --html PATH: write a self-contained HTML page instead of printing
};
CLI::App *add_report_command(CLI::App &app, ReportOptions &opts);
int report_command(const ReportOptions &opts);

struct ExportOptions {
  std::string file;
  WindowArgs window;
  std::map<std::string, std::string> outputs;  // history renderer name -> OUT ("" = not asked)
  int device = -1;                             // -1 = all devices
  double since = -1, until = -1;               // -1 = unset; seconds from start, or unix seconds
  uint64_t max_entries = 0;                    // 0 = all
  uint64_t min_slice_bytes = 1u << 20;
};
CLI::App *add_export_command(CLI::App &app, ExportOptions &opts);
int export_command(const ExportOptions &opts);

struct CheckOptions {
  std::vector<std::string> reports;
  GateFlags gate;
};
CLI::App *add_check_command(CLI::App &app, CheckOptions &opts);
int check_command(const CheckOptions &opts);
// The gate itself, for `check` and `run --fail-on-leak`: 0, 1 or 2.
int check_reports(const std::vector<std::string> &paths, const GateFlags &flags);

struct BaselineOptions {
  std::vector<std::string> reports;
  std::string output, suppressions;
};
CLI::App *add_baseline_command(CLI::App &app, BaselineOptions &opts);
int baseline_command(const BaselineOptions &opts);

struct DiffOptions {
  std::string a, b, suppressions;
  std::string format = "text";
};
CLI::App *add_diff_command(CLI::App &app, DiffOptions &opts);
int diff_command(const DiffOptions &opts);

struct MergeOptions {
  std::vector<std::string> reports;
  std::string output, suppressions;
};
CLI::App *add_merge_command(CLI::App &app, MergeOptions &opts);
int merge_command(const MergeOptions &opts);

struct AttachOptions {
  int pid = 0;
  std::string for_time;  // --for: "60s", "2m", "90"
  int64_t steps = 0;     // --steps N
  bool snapshot = false;
  std::string output;        // -o PREFIX
  std::string via = "auto";  // --via auto | remote-exec | ptrace
};
CLI::App *add_attach_command(CLI::App &app, AttachOptions &opts);
int attach_command(const AttachOptions &opts);

// Loads each path (P.json, or P.tseal replayed) with the suppressions file
// (may be empty) applied; prints warnings, and on failure the one-line
// error: the caller then exits with kExitUnusable.
bool load_inputs(const std::vector<std::string> &paths, const std::string &suppressions,
                 std::vector<Report> &out, const HistoryWindow *window = nullptr);

// Writes `text` to `path` ("-" = stdout) atomically enough for CI: a
// temporary file renamed into place. Prints the one-line error on failure.
bool write_output(const std::string &path, const std::string &text);

}  // namespace torchseal::cli
