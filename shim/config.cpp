#include "config.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <strings.h>
#include <unistd.h>

#include <regex>

namespace torchseal {
namespace {

const char *env(const char *name) {
  const char *v = secure_getenv(name);
  return (v && *v) ? v : nullptr;
}

std::string bad(const char *var, const char *value, const char *accepted) {
  std::string msg = "invalid ";
  msg += var;
  msg += "='";
  // Keep the message one short line even for hostile values.
  std::string shown(value, strnlen(value, 64));
  for (char &c : shown)
    if (c < 0x20 || c == 0x7f) c = '?';
  msg += shown;
  msg += "' (accepted: ";
  msg += accepted;
  msg += "); torchseal is disabled for this process";
  return msg;
}

template <typename T, size_t N>
bool pick(const char *value, const std::pair<const char *, T> (&choices)[N], T &out) {
  for (const auto &c : choices)
    if (strcasecmp(value, c.first) == 0) {
      out = c.second;
      return true;
    }
  return false;
}

}  // namespace

bool parse_int_in_range(const char *text, long lo, long hi, long &out) {
  if (!text || !*text) return false;
  errno = 0;
  char *end = nullptr;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

bool parse_signal(const char *text, int &out) {
  static const std::pair<const char *, int> kSignals[] = {
      {"none", 0},       {"SIGUSR1", SIGUSR1}, {"SIGUSR2", SIGUSR2}, {"SIGHUP", SIGHUP},
      {"SIGWINCH", SIGWINCH}, {"SIGURG", SIGURG}, {"SIGPROF", SIGPROF}, {"SIGTTIN", SIGTTIN},
      {"SIGTTOU", SIGTTOU}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},
  };
  if (pick(text, kSignals, out)) return true;
  long n;
  // Numeric signals are accepted too, but never ones we must not catch.
  if (parse_int_in_range(text, 1, 64, n) && n != SIGKILL && n != SIGSTOP && n != SIGSEGV &&
      n != SIGBUS && n != SIGFPE && n != SIGILL && n != SIGABRT) {
    out = static_cast<int>(n);
    return true;
  }
  return false;
}

bool parse_config(Config &c, std::string &error) {
  // TORCHSEAL_LOG first, so the other errors honour it.
  if (const char *v = env("TORCHSEAL_LOG")) {
    static const std::pair<const char *, log::Level> kLevels[] = {
        {"off", log::Level::Off},   {"error", log::Level::Error}, {"warn", log::Level::Warn},
        {"warning", log::Level::Warn}, {"info", log::Level::Info}, {"debug", log::Level::Debug}};
    if (!pick(v, kLevels, c.log_level)) {
      error = bad("TORCHSEAL_LOG", v, "off, error, warn, info, debug");
      return false;
    }
  }
  if (const char *v = env("TORCHSEAL_OUTPUT")) {
    // Validated fully by the template expander; reject what can never work.
    if (strlen(v) >= 3000) {
      error = bad("TORCHSEAL_OUTPUT", v, "a path prefix shorter than 3000 bytes");
      return false;
    }
    const char *p = v;
    for (; *p; ++p)
      if (*p == '%') {
        ++p;
        if (!*p || !strchr("prht%", *p)) {
          error = bad("TORCHSEAL_OUTPUT", v, "a path prefix with %p %r %h %t %% placeholders");
          return false;
        }
      }
    c.output = v;
    c.output_from_env = true;
  }
  if (const char *v = env("TORCHSEAL_BACKEND")) {
    static const std::pair<const char *, Backend> kBackends[] = {
        {"auto", Backend::Auto}, {"cupti", Backend::Cupti}, {"hooks", Backend::Hooks}};
    if (!pick(v, kBackends, c.backend)) {
      error = bad("TORCHSEAL_BACKEND", v, "auto, cupti, hooks");
      return false;
    }
  }
  if (const char *v = env("TORCHSEAL_EXIT_CODE")) {
    long n;
    if (!parse_int_in_range(v, 0, 255, n)) {
      error = bad("TORCHSEAL_EXIT_CODE", v, "an integer 0..255");
      return false;
    }
    c.exit_code = static_cast<int>(n);
  }
  if (const char *v = env("TORCHSEAL_STACK_DEPTH")) {
    long n;
    if (!parse_int_in_range(v, 1, 256, n)) {
      error = bad("TORCHSEAL_STACK_DEPTH", v, "an integer 1..256");
      return false;
    }
    c.stack_depth = static_cast<int>(n);
  }
  if (const char *v = env("TORCHSEAL_PYTHON")) {
    static const std::pair<const char *, bool> kPy[] = {{"auto", true}, {"off", false}};
    if (!pick(v, kPy, c.python)) {
      error = bad("TORCHSEAL_PYTHON", v, "auto, off");
      return false;
    }
  }
  if (const char *v = env("TORCHSEAL_HOLDERS")) {
    static const std::pair<const char *, bool> kHolders[] = {{"auto", true}, {"off", false}};
    if (!pick(v, kHolders, c.holders)) {
      error = bad("TORCHSEAL_HOLDERS", v, "auto, off");
      return false;
    }
  }
  if (const char *v = env("TORCHSEAL_UNWIND")) {
    static const std::pair<const char *, UnwindMode> kUnwind[] = {
        {"fast", UnwindMode::Fast}, {"libunwind", UnwindMode::Libunwind},
        {"check", UnwindMode::Check}};
    if (!pick(v, kUnwind, c.unwind)) {
      error = bad("TORCHSEAL_UNWIND", v, "fast, libunwind, check");
      return false;
    }
  }
  if (const char *v = env("TORCHSEAL_TORCH")) {
    static const std::pair<const char *, TorchMode> kTorch[] = {
        {"segments", TorchMode::Segments}, {"tensors", TorchMode::Tensors}};
    if (!pick(v, kTorch, c.torch)) {
      error = bad("TORCHSEAL_TORCH", v, "segments, tensors");
      return false;
    }
  }
  if (const char *v = env("TORCHSEAL_STEP_RANGE")) {
    try {
      std::regex probe(v, std::regex::ECMAScript);
    } catch (const std::regex_error &) {
      error = bad("TORCHSEAL_STEP_RANGE", v, "an ECMAScript regular expression");
      return false;
    }
    c.step_range = v;
  }
  if (const char *v = env("TORCHSEAL_STEP_SECONDS")) {
    char *end = nullptr;
    errno = 0;
    double d = strtod(v, &end);
    if (errno || end == v || *end || !(d > 0) || d > 86400) {
      error = bad("TORCHSEAL_STEP_SECONDS", v, "a number of seconds in (0, 86400]");
      return false;
    }
    c.step_seconds = d;
  }
  if (const char *v = env("TORCHSEAL_SIGNAL")) {
    if (!parse_signal(v, c.dump_signal)) {
      error = bad("TORCHSEAL_SIGNAL", v, "none, SIGUSR1, SIGUSR2, SIGHUP, ... or a signal number");
      return false;
    }
  }
  if (const char *v = env("TORCHSEAL_SUPPRESSIONS")) {
    if (access(v, R_OK) != 0) {
      error = bad("TORCHSEAL_SUPPRESSIONS", v, "a readable suppressions file");
      return false;
    }
    c.suppressions = v;
  }
  if (const char *v = env("TORCHSEAL_CUPTI_PATH")) {
    if (access(v, R_OK) != 0) {
      error = bad("TORCHSEAL_CUPTI_PATH", v, "a readable libcupti shared object");
      return false;
    }
    c.cupti_path = v;
  }
  return true;
}

}  // namespace torchseal
