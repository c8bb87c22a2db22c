// Subcommands of the `torchseal` CLI. Each registers its options on the
// given CLI11 app and returns the callback-run state it fills in.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace torchseal::cli {

// Exit statuses of the CLI itself (a command run by `torchseal run` keeps
// its own: that path execs).
inline constexpr int kExitOk = 0;
inline constexpr int kExitUnusable = 2;  // bad usage or unusable input

// Prints "torchseal: error: MSG" on stderr (one line).
void print_error(const std::string &msg);

struct RunOptions {
  std::string output, backend, log, python, torch, suppressions;
  int exit_code = -1;
  int stack_depth = -1;
  std::vector<std::string> command;
};
CLI::App *add_run_command(CLI::App &app, RunOptions &opts);
int run_command(const RunOptions &opts);  // returns only on failure

struct ReportOptions {
  std::string file;
  std::string format = "text";
};
CLI::App *add_report_command(CLI::App &app, ReportOptions &opts);
int report_command(const ReportOptions &opts);

}  // namespace torchseal::cli
