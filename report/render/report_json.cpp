#include "report/render/report_json.h"

#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "report/input/read_file.h"
#include "report/render/site_json.h"

namespace torchseal {
namespace {

using ojson = nlohmann::ordered_json;

// JSON has no NaN or infinity; a damaged timer must not make the report unreadable.
double finite(double v) { return std::isfinite(v) ? v : 0.0; }

ojson str_or_null(const std::string &s) { return s.empty() ? ojson(nullptr) : ojson(s); }
ojson device_json(int d) { return d < 0 ? ojson(nullptr) : ojson(d); }

// A report entry's stacks, raw addresses kept for symbolizing later.
template <class Entry>
void put_stacks(ojson &e, const Entry &x) {
  put_stacks(e, x, FrameAddress::Hex);
}

// The summary's counters, in report key order; read and written alike.
constexpr std::pair<const char *, uint64_t Summary::*> kSummaryCounts[] = {
    {"leaked_bytes", &Summary::leaked_bytes},
    {"leaked_allocations", &Summary::leaked_allocations},
    {"leak_sites", &Summary::leak_sites},
    {"peak_bytes", &Summary::peak_bytes},
    {"events", &Summary::events},
    {"suppressed_bytes", &Summary::suppressed_bytes},
    {"cached_bytes", &Summary::cached_bytes},
};

// ---- reading ----

// One-line, path-qualified validation error.
struct BadReport {
  std::string msg;
};

using json = nlohmann::json;

[[noreturn]] void fail(const std::string &path, const std::string &what) {
  throw BadReport{(path.empty() ? std::string("report") : path) + ": " + what};
}

const json &member(const json &obj, const std::string &path, const char *key) {
  if (!obj.is_object()) fail(path, "expected an object");
  auto it = obj.find(key);
  if (it == obj.end()) fail(path.empty() ? key : path + "." + key, "missing");
  return *it;
}

std::string join(const std::string &path, const char *key) {
  return path.empty() ? key : path + "." + key;
}

uint64_t get_u64(const json &obj, const std::string &path, const char *key) {
  const json &v = member(obj, path, key);
  if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
    fail(join(path, key), "expected an unsigned integer");
  }
  return v.get<uint64_t>();
}

int64_t get_i64(const json &obj, const std::string &path, const char *key) {
  const json &v = member(obj, path, key);
  if (!v.is_number_integer()) fail(join(path, key), "expected an integer");
  if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(INT64_MAX)) {
    fail(join(path, key), "integer out of range");
  }
  return v.get<int64_t>();
}

double get_num(const json &obj, const std::string &path, const char *key) {
  const json &v = member(obj, path, key);
  if (!v.is_number()) fail(join(path, key), "expected a number");
  return v.get<double>();
}

std::string get_str(const json &obj, const std::string &path, const char *key) {
  const json &v = member(obj, path, key);
  if (!v.is_string()) fail(join(path, key), "expected a string");
  return v.get<std::string>();
}

std::string get_str_or_null(const json &obj, const std::string &path, const char *key) {
  const json &v = member(obj, path, key);
  if (v.is_null()) return {};
  if (!v.is_string()) fail(join(path, key), "expected a string or null");
  return v.get<std::string>();
}

// Optional integer: JSON null reads as `null_value`.
int64_t get_int_or_null(const json &obj, const std::string &path, const char *key,
                        int64_t null_value) {
  const json &v = member(obj, path, key);
  if (v.is_null()) return null_value;
  return get_i64(obj, path, key);
}

int get_int32_or_null(const json &obj, const std::string &path, const char *key, int null_value) {
  int64_t v = get_int_or_null(obj, path, key, null_value);
  if (v < INT32_MIN || v > INT32_MAX) fail(join(path, key), "integer out of range");
  return static_cast<int>(v);
}

const json &get_array(const json &obj, const std::string &path, const char *key) {
  const json &v = member(obj, path, key);
  if (!v.is_array()) fail(join(path, key), "expected an array");
  return v;
}

std::string elem(const std::string &path, const char *key, size_t i) {
  return join(path, key) + "[" + std::to_string(i) + "]";
}

uint64_t parse_hex(const std::string &s, const std::string &path) {
  if (s.size() < 3 || s.size() > 18 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) {
    fail(path, "expected a hex address like \"0x1234\"");
  }
  uint64_t v = 0;
  for (size_t i = 2; i < s.size(); ++i) {
    char c = s[i];
    int d = (c >= '0' && c <= '9') ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (d < 0) fail(path, "expected a hex address like \"0x1234\"");
    v = (v << 4) | uint64_t(d);
  }
  return v;
}

// The array `key` of `obj`, each element read by `read(element, its path)`.
template <class Entry, class Read>
std::vector<Entry> read_entries(const json &obj, const std::string &path, const char *key, Read read) {
  const json &a = get_array(obj, path, key);
  std::vector<Entry> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) out.push_back(read(a[i], elem(path, key, i)));
  return out;
}

// The keys native and Python frames share: function, file, line.
template <class Frame>
Frame read_frame(const json &e, const std::string &p) {
  Frame f;
  f.function = get_str_or_null(e, p, "function");
  f.file = get_str_or_null(e, p, "file");
  f.line = get_int32_or_null(e, p, "line", 0);
  return f;
}

std::vector<NativeFrame> read_native(const json &obj, const std::string &path, const char *key) {
  return read_entries<NativeFrame>(obj, path, key, [](const json &e, const std::string &p) {
    NativeFrame f = read_frame<NativeFrame>(e, p);
    f.module = get_str_or_null(e, p, "module");
    f.address = parse_hex(get_str(e, p, "address"), join(p, "address"));
    return f;
  });
}

std::vector<PythonFrame> read_python(const json &obj, const std::string &path, const char *key) {
  return read_entries<PythonFrame>(obj, path, key, read_frame<PythonFrame>);
}

// A site entry's two stacks (the keys put_stacks() writes).
template <class Entry>
void read_stacks(const json &e, const std::string &path, Entry &x) {
  x.frames = read_native(e, path, "frames");
  x.python_frames = read_python(e, path, "python_frames");
}

void check_one_of(const std::string &v, const std::string &path,
                  std::initializer_list<const char *> allowed) {
  for (const char *a : allowed) {
    if (v == a) return;
  }
  std::string list;
  for (const char *a : allowed) list += (list.empty() ? "" : ", ") + std::string(a);
  fail(path, "unknown value \"" + v + "\" (expected one of " + list + ")");
}

// The parser is not recursive, but rejecting absurd nesting up front keeps
// every later step (and any future recursive consumer) bounded.
bool nesting_ok(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') {
      if (++depth > max_depth) return false;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return true;
}

std::string one_line(std::string s) {
  for (char &c : s) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return s;
}

void read_report(const json &j, Report &r) {
  if (!j.is_object()) throw BadReport{"not a torchseal report (top level is not a JSON object)"};
  auto fmt = j.find("format");
  if (fmt == j.end() || !fmt->is_string() || fmt->get<std::string>() != kReportFormat) {
    throw BadReport{"not a torchseal report (\"format\" is not \"torchseal-report\")"};
  }
  auto ver = j.find("version");
  if (ver == j.end() || !ver->is_number_integer()) {
    throw BadReport{"report has no integer \"version\""};
  }
  if (ver->get<int64_t>() != kReportVersion) {
    throw BadReport{"unsupported report version " + ver->dump() + " (this torchseal reads version " +
                    std::to_string(kReportVersion) + ")"};
  }
  r.version = kReportVersion;
  r.trigger = get_str(j, "", "trigger");
  check_one_of(r.trigger, "trigger", {"exit", "signal", "oom", "api"});

  const json &p = member(j, "", "process");
  r.process.pid = get_i64(p, "process", "pid");
  r.process.argv = read_entries<std::string>(p, "process", "argv", [](const json &a, const std::string &pth) {
    if (!a.is_string()) fail(pth, "expected a string");
    return a.get<std::string>();
  });
  r.process.rank = get_int_or_null(p, "process", "rank", -1);
  r.process.hostname = get_str_or_null(p, "process", "hostname");
  r.process.start_time = get_num(p, "process", "start_time");
  r.process.end_time = get_num(p, "process", "end_time");
  r.process.backend = get_str_or_null(p, "process", "backend");
  r.process.python = get_str_or_null(p, "process", "python");

  const json &s = member(j, "", "summary");
  Summary &m = r.summary;
  for (const auto &[key, field] : kSummaryCounts) m.*field = get_u64(s, "summary", key);
  const json &o = member(s, "summary", "overhead");
  m.overhead.events = get_u64(o, "summary.overhead", "events");
  m.overhead.seconds_in_torchseal = get_num(o, "summary.overhead", "seconds_in_torchseal");

  r.leaks = read_entries<LeakEntry>(j, "", "leaks", [](const json &e, const std::string &pth) {
    LeakEntry l;
    l.kind = get_str(e, pth, "kind");
    check_one_of(l.kind, join(pth, "kind"),
                 {"device", "stream-ordered", "managed", "host-pinned", "vmm"});
    l.api = get_str(e, pth, "api");
    l.device = get_int32_or_null(e, pth, "device", -1);
    l.bytes = get_u64(e, pth, "bytes");
    l.allocations = get_u64(e, pth, "allocations");
    l.detected_at = get_str(e, pth, "detected_at");
    check_one_of(l.detected_at, join(pth, "detected_at"), {"exit", "context-teardown"});
    read_stacks(e, pth, l);
    return l;
  });

  r.growth = read_entries<GrowthEntry>(j, "", "growth", [](const json &e, const std::string &pth) {
    GrowthEntry g;
    g.bytes_per_step = get_num(e, pth, "bytes_per_step");
    g.growth_bytes = get_i64(e, pth, "growth_bytes");
    g.steps = get_u64(e, pth, "steps");
    g.r = get_num(e, pth, "r");
    g.kind = get_str(e, pth, "kind");
    g.api = get_str(e, pth, "api");
    read_stacks(e, pth, g);
    return g;
  });

  r.ooms = read_entries<OomEntry>(j, "", "ooms", [](const json &e, const std::string &pth) {
    OomEntry x;
    x.api = get_str(e, pth, "api");
    x.requested_bytes = get_u64(e, pth, "requested_bytes");
    x.device = get_int32_or_null(e, pth, "device", -1);
    x.live_bytes = get_u64(e, pth, "live_bytes");
    read_stacks(e, pth, x);
    x.top_sites = read_entries<SiteTotal>(e, pth, "top_sites", [](const json &te, const std::string &tp) {
      SiteTotal t;
      t.bytes = get_u64(te, tp, "bytes");
      t.allocations = get_u64(te, tp, "allocations");
      read_stacks(te, tp, t);
      return t;
    });
    return x;
  });

  // Extra key (not in the base schema of docs/report-format.md): optional on input.
  if (j.contains("suppressions_used")) {
    r.suppressions_used = read_entries<SuppressionUse>(
        j, "", "suppressions_used", [](const json &e, const std::string &pth) {
          SuppressionUse u;
          u.pattern = get_str(e, pth, "pattern");
          u.allocations = get_u64(e, pth, "allocations");
          u.bytes = get_u64(e, pth, "bytes");
          return u;
        });
  }

  r.invalid_frees = read_entries<InvalidFreeEntry>(
      j, "", "invalid_frees", [](const json &e, const std::string &pth) {
        InvalidFreeEntry f;
        f.api = get_str(e, pth, "api");
        f.address = parse_hex(get_str(e, pth, "address"), join(pth, "address"));
        read_stacks(e, pth, f);
        return f;
      });
}

}  // namespace

std::string report_to_json(const Report &r) {
  ojson j;
  j["format"] = kReportFormat;
  j["version"] = kReportVersion;
  j["trigger"] = r.trigger;

  ojson p;
  p["pid"] = r.process.pid;
  p["argv"] = r.process.argv;
  p["rank"] = r.process.rank < 0 ? ojson(nullptr) : ojson(r.process.rank);
  p["hostname"] = r.process.hostname;
  p["start_time"] = finite(r.process.start_time);
  p["end_time"] = finite(r.process.end_time);
  p["backend"] = r.process.backend;
  p["python"] = str_or_null(r.process.python);
  j["process"] = std::move(p);

  const Summary &m = r.summary;
  ojson s;
  for (const auto &[key, field] : kSummaryCounts) s[key] = m.*field;
  s["overhead"] = {{"events", m.overhead.events},
                   {"seconds_in_torchseal", finite(m.overhead.seconds_in_torchseal)}};
  j["summary"] = std::move(s);

  j["leaks"] = entries_json(r.leaks, [](ojson &e, const LeakEntry &l) {
    e["kind"] = l.kind;
    e["api"] = l.api;
    e["device"] = device_json(l.device);
    e["bytes"] = l.bytes;
    e["allocations"] = l.allocations;
    e["detected_at"] = l.detected_at;
    put_stacks(e, l);
  });

  j["growth"] = entries_json(r.growth, [](ojson &e, const GrowthEntry &g) {
    e["bytes_per_step"] = finite(g.bytes_per_step);
    e["growth_bytes"] = g.growth_bytes;
    e["steps"] = g.steps;
    e["r"] = finite(g.r);
    e["kind"] = g.kind;
    e["api"] = g.api;
    put_stacks(e, g);
  });

  j["ooms"] = entries_json(r.ooms, [](ojson &e, const OomEntry &o) {
    e["api"] = o.api;
    e["requested_bytes"] = o.requested_bytes;
    e["device"] = device_json(o.device);
    e["live_bytes"] = o.live_bytes;
    put_stacks(e, o);
    e["top_sites"] = entries_json(o.top_sites, [](ojson &te, const SiteTotal &t) {
      te["bytes"] = t.bytes;
      te["allocations"] = t.allocations;
      put_stacks(te, t);
    });
  });

  j["invalid_frees"] = entries_json(r.invalid_frees, [](ojson &e, const InvalidFreeEntry &f) {
    e["api"] = f.api;
    e["address"] = hex_address(f.address);
    put_stacks(e, f);
  });

  // Extra key, only when a suppression matched: reports without
  // suppressions stay byte-identical to the base schema.
  if (!r.suppressions_used.empty()) {
    j["suppressions_used"] = entries_json(r.suppressions_used, [](ojson &e, const SuppressionUse &u) {
      e = {{"pattern", u.pattern}, {"allocations", u.allocations}, {"bytes", u.bytes}};
    });
  }

  try {
    return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
  } catch (...) {
    // Only allocation failure can get here; an empty string makes the
    // writer report an error instead of unwinding into the host process.
    return {};
  }
}

bool report_from_json(std::string_view text, Report &out, std::string &error) {
  if (text.size() > kMaxReportBytes) {
    error = "report is larger than " + std::to_string(kMaxReportBytes >> 20) + " MiB";
    return false;
  }
  if (!nesting_ok(text, 64)) {
    error = "not a torchseal report (JSON nested too deeply)";
    return false;
  }
  try {
    json j = json::parse(text.begin(), text.end());
    Report r;
    read_report(j, r);
    out = std::move(r);
    return true;
  } catch (const BadReport &e) {
    error = one_line(e.msg);
  } catch (const json::parse_error &e) {
    // e.what() is "[json.exception.parse_error.101] parse error at line 3, ..."
    std::string what = e.what();
    size_t pos = what.find("] ");
    error = "malformed JSON: " + one_line(pos == std::string::npos ? what : what.substr(pos + 2));
  } catch (const std::exception &e) {
    error = "malformed report: " + one_line(e.what());
  }
  return false;
}

bool read_report_file(const std::string &path, Report &out, std::string &error) {
  std::string text;
  int err = 0;
  switch (read_small_file(path, kMaxReportBytes, text, err)) {
    case FileRead::CannotOpen:
      error = "cannot open " + path + ": " + std::strerror(err);
      return false;
    case FileRead::NotRegular:
      error = path + ": not a regular file";
      return false;
    case FileRead::TooLarge:
      error = path + ": larger than " + std::to_string(kMaxReportBytes >> 20) + " MiB, not a report";
      return false;
    case FileRead::NoMemory:
      error = path + ": out of memory reading the file";
      return false;
    case FileRead::ReadError:  // what was read fails to parse, with the place
    case FileRead::Ok:
      break;
  }
  if (!report_from_json(text, out, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

}  // namespace torchseal
