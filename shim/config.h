// TORCHSEAL_* settings (DESIGN.md section 3). Every value is validated; the
// first bad one makes parse_config() fail with a one-line message naming the
// variable and the accepted values, and the shim then stays inert.
#pragma once

#include <csignal>
#include <string>

#include "log.h"

namespace torchseal {

enum class Backend { Auto, Cupti, Hooks };
enum class TorchMode { Segments, Tensors };
// How native stacks are walked (shim/unwind/unwinder.h).
enum class UnwindMode { Fast, Libunwind, Check };

struct Config {
  std::string output = "torchseal-%p";  // prefix template
  bool output_from_env = false;
  Backend backend = Backend::Auto;
  int exit_code = -1;                   // -1: leave the exit status alone
  int stack_depth = 64;
  bool python = true;
  bool holders = true;                  // TORCHSEAL_HOLDERS: the Python holder scan
  UnwindMode unwind = UnwindMode::Fast;
  TorchMode torch = TorchMode::Segments;
  std::string step_range;               // regex; empty = unset
  double step_seconds = 0;              // time-window steps; 0 = off
  int dump_signal = SIGUSR1;            // 0 = none
  std::string suppressions;             // path; empty = unset
  log::Level log_level = log::Level::Warn;
  std::string cupti_path;
};

// Reads the environment (secure_getenv: ignored in setuid/setgid processes).
// Returns false and fills `error` (one line) on the first invalid value.
bool parse_config(Config &out, std::string &error);

// Exposed for tests: parse one value the way parse_config() does.
bool parse_int_in_range(const char *text, long lo, long hi, long &out);
bool parse_signal(const char *text, int &out);

}  // namespace torchseal
