// The settings table (settings.def) as constant data, and the value checks
// its three users share: the shim's environment parser (common/settings/config.cpp),
// `torchseal run`'s options (report/cli/cmd_run.cpp) and the
// docs/configuration.md generator (settings_doc.cpp). The table is constexpr
// (no static initialisation), so the preloaded shim can read it before main.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace torchseal::settings {

// How a value is parsed and checked; settings.def describes each.
enum class Kind { Choice, Integer, Seconds, Signal, OutputTemplate, Regex, ReadableFile, Bytes };

struct Spec {
  const char *var;
  Kind kind;
  const char *values;
  long lo, hi;
  const char *default_value;  // nullptr: unset
  const char *option;         // nullptr: `torchseal run` has no option for it
  const char *help;
  const char *doc;
};

enum class Id : unsigned {
#define TORCHSEAL_SETTING(FIELD, ...) FIELD,
#include "common/settings/settings.def"
};

inline constexpr Spec kTable[] = {
#define TORCHSEAL_SETTING(FIELD, VAR, KIND, VALUES, LO, HI, DEFAULT, OPTION, HELP, DOC) \
  {VAR, Kind::KIND, VALUES, LO, HI, DEFAULT, OPTION, HELP, DOC},
#include "common/settings/settings.def"
};
inline constexpr size_t kCount = sizeof(kTable) / sizeof(kTable[0]);

constexpr const Spec &spec(Id id) { return kTable[static_cast<size_t>(id)]; }

// The variable's value; nullptr when it is unset or empty. secure_getenv:
// ignored in setuid and setgid processes.
const char *from_environment(const Spec &s);

// ---- the checks, one per kind (none allocates unless it says so) ----

// Choice: the position of `text` among the names (an alias counts as its
// name), case-insensitive; -1 when it is none of them.
int choice_index(const Spec &s, const char *text);
// A decimal integer in lo..hi, nothing after it.
bool parse_int_in_range(const char *text, long lo, long hi, long &out);
// Seconds: a number in (s.lo, s.hi].
bool parse_seconds(const Spec &s, const char *text, double &out);
// A signal name (none = 0) or a number, never one torchseal must not catch.
bool parse_signal(const char *text, int &out);
// OutputTemplate: shorter than s.hi bytes, only the known placeholders.
bool valid_output_template(const Spec &s, const char *text);
// Compiles the regex (allocates).
bool valid_regex(const char *text);
bool readable_file(const char *text);
// Bytes: a whole number with an optional binary suffix (KiB, MiB, GiB, TiB;
// case-insensitive, "K"/"KB" too), in s.lo..s.hi bytes.
bool parse_bytes(const Spec &s, const char *text, unsigned long long &out);

// ---- what the table says, as text (these allocate) ----

// Choice: the advertised names (aliases left out), in order.
std::vector<std::string> choice_names(const Spec &s);
// "a, b or c": the names as the option help lists them.
std::string choice_list(const Spec &s);
// What is accepted, as the error message for `value` and the docs say it.
// `value` matters only for an OutputTemplate that is too long; nullptr
// gives the general text.
std::string accepted(const Spec &s, const char *value = nullptr);

}  // namespace torchseal::settings
