// The parsed TORCHSEAL_* settings (docs/configuration.md). The settings
// themselves (variables, accepted values, defaults) are listed once, in
// runtime/settings.def; this is what the shim makes of them. Every value is
// validated: the first bad one makes parse_config() fail with a one-line
// message naming the variable and the accepted values, and the shim then
// stays inert.
#pragma once

#include <csignal>
#include <cstdint>
#include <string>

#include "common/settings/settings.h"
#include "common/util/log.h"

namespace torchseal {

// Each enum lists its values in the order of its setting's names in
// settings.def (the parser maps a name's position to the enumerator).
enum class Backend { Auto, Cupti, Hooks };
enum class PythonMode { Auto, Off };
enum class HoldersMode { Auto, Off };
enum class LibraryHeldMode { On, Off };
enum class TorchMode { Segments, Tensors };
// How native stacks are walked (shim/core/unwind/unwinder.h).
enum class UnwindMode { Fast, Libunwind, Check };

// One member per setting, named by its FIELD in settings.def. parse_config()
// first gives every member its default from the table; the initialisers
// here only say what a setting without a default holds while unset.
struct Config {
  log::Level log_level{};
  std::string output;  // prefix template
  Backend backend{};
  int exit_code = -1;  // unset: leave the exit status alone
  int stack_depth = 0;
  PythonMode python{};
  HoldersMode holders{};
  LibraryHeldMode library_held{};
  UnwindMode unwind{};
  TorchMode torch{};
  std::string step_range;                // regex; unset: no NVTX steps
  double step_seconds = 0;               // growth time window
  int dump_signal = 0;                   // 0 = none
  unsigned long long history_limit = 0;  // bytes of history on disk; 0: no cap
  std::string suppressions;              // path; unset: none
  std::string cupti_path;                // path; unset: search for libcupti

  uint32_t from_env = 0;  // bit i: setting i was taken from the environment
  bool set_by_environment(settings::Id id) const {
    return from_env >> static_cast<unsigned>(id) & 1;
  }
};
static_assert(settings::kCount <= 32, "Config::from_env has one bit per setting");

// Reads the environment (secure_getenv: ignored in setuid/setgid processes).
// Returns false and fills `error` (one line) on the first invalid value; the
// settings before it then hold their values, the rest their defaults.
bool parse_config(Config &out, std::string &error);

}  // namespace torchseal
