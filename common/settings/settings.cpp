#include "common/settings/settings.h"

#include <strings.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <utility>

namespace torchseal::settings {
namespace {

// Calls f(name, length, index, advertised) for every name of a Choice:
// "a, b|c" gives (a, 0, true), (b, 1, true), (c, 1, false). Stops when f
// returns true.
template <typename F>
bool for_each_name(const char *values, F f) {
  int index = 0;
  const char *p = values;
  while (*p) {
    bool advertised = true;
    for (;;) {
      size_t n = strcspn(p, ",|");
      if (f(p, n, index, advertised)) return true;
      p += n;
      if (*p != '|') break;
      ++p;
      advertised = false;
    }
    if (*p == ',') ++p;
    while (*p == ' ') ++p;
    ++index;
  }
  return false;
}

}  // namespace

const char *from_environment(const Spec &s) {
  const char *v = secure_getenv(s.var);
  return (v && *v) ? v : nullptr;
}

int choice_index(const Spec &s, const char *text) {
  int found = -1;
  for_each_name(s.values, [&](const char *name, size_t n, int index, bool) {
    if (strncasecmp(text, name, n) != 0 || text[n] != '\0') return false;
    found = index;
    return true;
  });
  return found;
}

bool parse_int_in_range(const char *text, long lo, long hi, long &out) {
  if (!text || !*text) return false;
  errno = 0;
  char *end = nullptr;
  long v = strtol(text, &end, 10);
  if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi) return false;
  out = v;
  return true;
}

bool parse_seconds(const Spec &s, const char *text, double &out) {
  char *end = nullptr;
  errno = 0;
  double d = strtod(text, &end);
  if (errno || end == text || *end || !(d > s.lo) || d > s.hi) return false;
  out = d;
  return true;
}

bool parse_signal(const char *text, int &out) {
  static const std::pair<const char *, int> kSignals[] = {
      {"none", 0},          {"SIGUSR1", SIGUSR1},   {"SIGUSR2", SIGUSR2},
      {"SIGHUP", SIGHUP},   {"SIGWINCH", SIGWINCH}, {"SIGURG", SIGURG},
      {"SIGPROF", SIGPROF}, {"SIGTTIN", SIGTTIN},   {"SIGTTOU", SIGTTOU},
      {"USR1", SIGUSR1},    {"USR2", SIGUSR2},      {"HUP", SIGHUP},
  };
  for (const auto &sig : kSignals)
    if (strcasecmp(text, sig.first) == 0) {
      out = sig.second;
      return true;
    }
  long n;
  // Numeric signals are accepted too, but never ones we must not catch.
  if (parse_int_in_range(text, 1, 64, n) && n != SIGKILL && n != SIGSTOP && n != SIGSEGV &&
      n != SIGBUS && n != SIGFPE && n != SIGILL && n != SIGABRT) {
    out = static_cast<int>(n);
    return true;
  }
  return false;
}

bool valid_output_template(const Spec &s, const char *text) {
  // The template expander (output_path.h) checks the rest when it expands;
  // this rejects what can never work.
  if (strlen(text) >= static_cast<size_t>(s.hi)) return false;
  for (const char *p = text; *p; ++p)
    if (*p == '%') {
      ++p;
      if (!*p || !strchr("prht%", *p)) return false;
    }
  return true;
}

bool valid_regex(const char *text) {
  try {
    std::regex probe(text, std::regex::ECMAScript);
  } catch (const std::regex_error &) {
    return false;
  }
  return true;
}

bool readable_file(const char *text) { return access(text, R_OK) == 0; }

bool parse_bytes(const Spec &s, const char *text, unsigned long long &out) {
  if (!text || *text < '0' || *text > '9') return false;
  errno = 0;
  char *end = nullptr;
  unsigned long long n = strtoull(text, &end, 10);
  if (errno) return false;
  static const std::pair<const char *, int> kSuffixes[] = {
      {"", 0},     {"b", 0},  {"k", 10},  {"kb", 10},  {"kib", 10}, {"m", 20},  {"mb", 20},
      {"mib", 20}, {"g", 30}, {"gb", 30}, {"gib", 30}, {"t", 40},   {"tb", 40}, {"tib", 40},
  };
  for (const auto &suf : kSuffixes)
    if (strcasecmp(end, suf.first) == 0) {
      if (suf.second && n > (~0ull >> suf.second)) return false;
      n <<= suf.second;
      if (n < static_cast<unsigned long long>(s.lo) || n > static_cast<unsigned long long>(s.hi))
        return false;
      out = n;
      return true;
    }
  return false;
}

std::vector<std::string> choice_names(const Spec &s) {
  std::vector<std::string> names;
  for_each_name(s.values, [&](const char *name, size_t n, int, bool advertised) {
    if (advertised) names.emplace_back(name, n);
    return false;
  });
  return names;
}

std::string choice_list(const Spec &s) {
  std::vector<std::string> names = choice_names(s);
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += i + 1 == names.size() ? " or " : ", ";
    out += names[i];
  }
  return out;
}

std::string accepted(const Spec &s, const char *value) {
  switch (s.kind) {
    case Kind::Choice: {
      std::string out;
      for (const std::string &name : choice_names(s)) out += (out.empty() ? "" : ", ") + name;
      return out;
    }
    case Kind::Integer:
      return "an integer " + std::to_string(s.lo) + ".." + std::to_string(s.hi);
    case Kind::Seconds:
      return "a number of seconds in (" + std::to_string(s.lo) + ", " + std::to_string(s.hi) + "]";
    case Kind::OutputTemplate:
      if (value && strlen(value) >= static_cast<size_t>(s.hi))
        return "a path prefix shorter than " + std::to_string(s.hi) + " bytes";
      return s.values;
    case Kind::Signal:
    case Kind::Regex:
    case Kind::ReadableFile:
    case Kind::Bytes:
      return s.values;
  }
  return s.values;
}

}  // namespace torchseal::settings
