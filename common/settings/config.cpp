#include "common/settings/config.h"

#include <cstring>
#include <type_traits>

namespace torchseal {
namespace {

using settings::Id;
using settings::Spec;

std::string bad(const char *var, const char *value, const std::string &accepted) {
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

// One parser per settings::Kind, picked by the KIND column at compile time,
// so a Config member whose type does not fit its kind does not compile.
template <typename E>
bool parse_Choice(const Spec &s, const char *text, E &out) {
  static_assert(std::is_enum_v<E>, "a Choice setting is held in an enum");
  int i = settings::choice_index(s, text);
  if (i < 0) return false;
  out = static_cast<E>(i);
  return true;
}

bool parse_Integer(const Spec &s, const char *text, int &out) {
  long n;
  if (!settings::parse_int_in_range(text, s.lo, s.hi, n)) return false;
  out = static_cast<int>(n);
  return true;
}

bool parse_Seconds(const Spec &s, const char *text, double &out) {
  return settings::parse_seconds(s, text, out);
}

bool parse_Bytes(const Spec &s, const char *text, unsigned long long &out) {
  return settings::parse_bytes(s, text, out);
}

bool parse_Signal(const Spec &, const char *text, int &out) {
  return settings::parse_signal(text, out);
}

bool take_if(bool ok, const char *text, std::string &out) {
  if (ok) out = text;
  return ok;
}
bool parse_OutputTemplate(const Spec &s, const char *text, std::string &out) {
  return take_if(settings::valid_output_template(s, text), text, out);
}
bool parse_Regex(const Spec &, const char *text, std::string &out) {
  return take_if(settings::valid_regex(text), text, out);
}
bool parse_ReadableFile(const Spec &, const char *text, std::string &out) {
  return take_if(settings::readable_file(text), text, out);
}

template <typename T>
using Parser = bool (*)(const Spec &, const char *, T &);

// The table's defaults are valid (tests/shim/test_config.cpp parses them).
template <typename T>
void take_default(Id id, Parser<T> parse, T &field) {
  const Spec &s = settings::spec(id);
  if (s.default_value) parse(s, s.default_value, field);
}

template <typename T>
bool take_environment(Id id, Parser<T> parse, T &field, Config &c, std::string &error) {
  const Spec &s = settings::spec(id);
  const char *v = settings::from_environment(s);
  if (!v) return true;
  if (!parse(s, v, field)) {
    error = bad(s.var, v, settings::accepted(s, v));
    return false;
  }
  c.from_env |= 1u << static_cast<unsigned>(id);
  return true;
}

}  // namespace

bool parse_config(Config &c, std::string &error) {
  c.from_env = 0;
#define TORCHSEAL_SETTING(FIELD, VAR, KIND, ...) take_default(Id::FIELD, parse_##KIND, c.FIELD);
#include "common/settings/settings.def"
  // TORCHSEAL_LOG first, so the messages about the others honour it.
  if (!take_environment(Id::log_level, parse_Choice<log::Level>, c.log_level, c, error))
    return false;
#define TORCHSEAL_SETTING(FIELD, VAR, KIND, ...)                                                   \
  if (Id::FIELD != Id::log_level && !take_environment(Id::FIELD, parse_##KIND, c.FIELD, c, error)) \
    return false;
#include "common/settings/settings.def"
  return true;
}

}  // namespace torchseal
