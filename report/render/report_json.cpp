#include "report/render/report_json.h"
#include "report/analysis/roles.h"
#include "report/render/roles_json.h"
#include "report/render/site_json.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

namespace torchseal {
namespace {

using ojson = nlohmann::ordered_json;

// JSON has no NaN or infinity; a damaged timer must not make the report unreadable.
double finite(double v) { return std::isfinite(v) ? v : 0.0; }

ojson str_or_null(const std::string &s) { return s.empty() ? ojson(nullptr) : ojson(s); }
ojson device_json(int d) { return d < 0 ? ojson(nullptr) : ojson(d); }

ojson native_json(const std::vector<NativeFrame> &frames) {
  return native_frames_json(frames, FrameAddress::Hex);
}

ojson hint_json(const std::optional<Hint> &h) {
  if (!h) return nullptr;
  ojson o;
  o["kind"] = h->kind;
  o["message"] = h->message;
  o["file"] = str_or_null(h->file);
  o["line"] = h->line > 0 ? ojson(h->line) : ojson(nullptr);
  return o;
}

ojson python_json(const std::vector<PythonFrame> &frames) { return python_frames_json(frames); }

ojson holders_json(const std::vector<Holder> &holders) {
  ojson a = ojson::array();
  for (const Holder &h : holders)
    a.push_back({{"chain", h.chain}, {"bytes", h.bytes}, {"tensors", h.tensors}});
  return a;
}

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
    int d = (c >= '0' && c <= '9')   ? c - '0'
            : (c >= 'a' && c <= 'f') ? c - 'a' + 10
            : (c >= 'A' && c <= 'F') ? c - 'A' + 10
                                     : -1;
    if (d < 0) fail(path, "expected a hex address like \"0x1234\"");
    v = (v << 4) | uint64_t(d);
  }
  return v;
}

std::vector<NativeFrame> read_native(const json &obj, const std::string &path, const char *key) {
  const json &a = get_array(obj, path, key);
  std::vector<NativeFrame> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    std::string p = elem(path, key, i);
    NativeFrame f;
    f.function = get_str_or_null(a[i], p, "function");
    f.file = get_str_or_null(a[i], p, "file");
    f.line = get_int32_or_null(a[i], p, "line", 0);
    f.module = get_str_or_null(a[i], p, "module");
    f.address = parse_hex(get_str(a[i], p, "address"), join(p, "address"));
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<PythonFrame> read_python(const json &obj, const std::string &path, const char *key) {
  const json &a = get_array(obj, path, key);
  std::vector<PythonFrame> out;
  out.reserve(a.size());
  for (size_t i = 0; i < a.size(); ++i) {
    std::string p = elem(path, key, i);
    PythonFrame f;
    f.function = get_str_or_null(a[i], p, "function");
    f.file = get_str_or_null(a[i], p, "file");
    f.line = get_int32_or_null(a[i], p, "line", 0);
    out.push_back(std::move(f));
  }
  return out;
}

// `hint` (docs/report-format.md): null or {kind, message, file, line}. Optional, so
// reports written before it read as "no hint".
std::optional<Hint> read_hint(const json &obj, const std::string &path) {
  auto it = obj.find("hint");
  if (it == obj.end() || it->is_null()) return std::nullopt;
  const std::string p = join(path, "hint");
  Hint h;
  h.kind = get_str(*it, p, "kind");
  h.message = get_str(*it, p, "message");
  h.file = get_str_or_null(*it, p, "file");
  h.line = get_int32_or_null(*it, p, "line", 0);
  return h;
}

// `holders` (docs/report-format.md): optional on input: optional on input (reports of native
// programs and reports written before them have none).
std::vector<Holder> read_holders(const json &obj, const std::string &path) {
  std::vector<Holder> out;
  if (!obj.is_object() || !obj.contains("holders")) return out;
  const json &a = get_array(obj, path, "holders");
  for (size_t i = 0; i < a.size(); ++i) {
    std::string pth = elem(path, "holders", i);
    Holder h;
    for (size_t k = 0; const json &step : get_array(a[i], pth, "chain")) {
      if (!step.is_string()) fail(elem(pth, "chain", k), "expected a string");
      h.chain.push_back(step.get<std::string>());
      ++k;
    }
    h.bytes = get_u64(a[i], pth, "bytes");
    h.tensors = get_u64(a[i], pth, "tensors");
    out.push_back(std::move(h));
  }
  return out;
}

void read_roles(const json &obj, const std::string &path, const char *key, RoleSplit &out) {
  std::string error;
  if (!get_role_split(obj, key, out, error)) fail(join(path, key), error);
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
      if (escaped)
        escaped = false;
      else if (c == '\\')
        escaped = true;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"')
      in_string = true;
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
    throw BadReport{"unsupported report version " + ver->dump() +
                    " (this torchseal reads version " + std::to_string(kReportVersion) + ")"};
  }
  r.version = kReportVersion;
  r.trigger = get_str(j, "", "trigger");
  check_one_of(r.trigger, "trigger", {"exit", "signal", "oom", "api", "stop", "snapshot"});

  const json &p = member(j, "", "process");
  r.process.pid = get_i64(p, "process", "pid");
  for (size_t i = 0; const json &a : get_array(p, "process", "argv")) {
    if (!a.is_string()) fail(elem("process", "argv", i), "expected a string");
    r.process.argv.push_back(a.get<std::string>());
    ++i;
  }
  r.process.rank = get_int_or_null(p, "process", "rank", -1);
  r.process.hostname = get_str_or_null(p, "process", "hostname");
  r.process.start_time = get_num(p, "process", "start_time");
  r.process.end_time = get_num(p, "process", "end_time");
  r.process.backend = get_str_or_null(p, "process", "backend");
  r.process.python = get_str_or_null(p, "process", "python");
  r.process.unwinder = p.contains("unwinder") ? get_str_or_null(p, "process", "unwinder") : "";
  // Reports written before the key existed ran whole as far as we know.
  if (p.contains("degraded")) {
    for (size_t i = 0; const json &d : get_array(p, "process", "degraded")) {
      if (!d.is_string()) fail(elem("process", "degraded", i), "expected a string");
      r.process.degraded.push_back(d.get<std::string>());
      ++i;
    }
  }

  const json &s = member(j, "", "summary");
  Summary &m = r.summary;
  m.leaked_bytes = get_u64(s, "summary", "leaked_bytes");
  m.leaked_allocations = get_u64(s, "summary", "leaked_allocations");
  m.leak_sites = get_u64(s, "summary", "leak_sites");
  m.peak_bytes = get_u64(s, "summary", "peak_bytes");
  m.events = get_u64(s, "summary", "events");
  m.suppressed_bytes = get_u64(s, "summary", "suppressed_bytes");
  m.cached_bytes = get_u64(s, "summary", "cached_bytes");
  const json &o = member(s, "summary", "overhead");
  m.overhead.events = get_u64(o, "summary.overhead", "events");
  m.overhead.seconds_in_torchseal = get_num(o, "summary.overhead", "seconds_in_torchseal");

  if (s.contains("reachable_bytes")) m.reachable_bytes = get_u64(s, "summary", "reachable_bytes");
  if (s.contains("cached_in_tensors_bytes")) {
    m.cached_in_tensors_bytes = get_u64(s, "summary", "cached_in_tensors_bytes");
    m.cached_free_bytes = get_u64(s, "summary", "cached_free_bytes");
  }
  if (s.contains("preexisting_frees")) {
    m.preexisting_frees = get_u64(s, "summary", "preexisting_frees");
    m.preexisting_freed_bytes = get_u64(s, "summary", "preexisting_freed_bytes");
  }

  auto read_leaks = [&](const char *list, std::vector<LeakEntry> &out) {
    const json &leaks = get_array(j, "", list);
    for (size_t i = 0; i < leaks.size(); ++i) {
      std::string pth = elem("", list, i);
      const json &e = leaks[i];
      LeakEntry l;
      l.kind = get_str(e, pth, "kind");
      check_one_of(l.kind, join(pth, "kind"),
                   {"device", "stream-ordered", "managed", "host-pinned", "vmm", "host-registered",
                    "graph"});
      l.api = get_str(e, pth, "api");
      l.device = get_int32_or_null(e, pth, "device", -1);
      l.bytes = get_u64(e, pth, "bytes");
      l.allocations = get_u64(e, pth, "allocations");
      l.detected_at = get_str(e, pth, "detected_at");
      check_one_of(l.detected_at, join(pth, "detected_at"), {"exit", "context-teardown"});
      l.frames = read_native(e, pth, "frames");
      l.python_frames = read_python(e, pth, "python_frames");
      l.holders = read_holders(e, pth);
      if (e.contains("library")) l.library = get_str(e, pth, "library");
      if (e.is_object() && e.contains("mapped_at")) {
        const json &m = member(e, pth, "mapped_at");
        std::string mp = join(pth, "mapped_at");
        if (!m.is_object()) fail(mp, "expected an object");
        l.map_frames = read_native(m, mp, "frames");
        l.map_python_frames = read_python(m, mp, "python_frames");
      }
      out.push_back(std::move(l));
    }
  };
  read_leaks("leaks", r.leaks);
  if (j.contains("reachable")) read_leaks("reachable", r.reachable);
  if (j.contains("library_held")) read_leaks("library_held", r.library_held);
  if (s.contains("library_held_bytes"))
    m.library_held_bytes = get_u64(s, "summary", "library_held_bytes");

  const json &growth = get_array(j, "", "growth");
  for (size_t i = 0; i < growth.size(); ++i) {
    std::string pth = elem("", "growth", i);
    const json &e = growth[i];
    GrowthEntry g;
    g.bytes_per_step = get_num(e, pth, "bytes_per_step");
    g.growth_bytes = get_i64(e, pth, "growth_bytes");
    g.steps = get_u64(e, pth, "steps");
    g.r = get_num(e, pth, "r");
    g.kind = get_str(e, pth, "kind");
    g.api = get_str(e, pth, "api");
    g.frames = read_native(e, pth, "frames");
    g.python_frames = read_python(e, pth, "python_frames");
    g.hint = read_hint(e, pth);
    g.holders = read_holders(e, pth);
    if (g.kind == kGraphGrowthKind) {
      g.graph_nodes = get_u64(e, pth, "graph_nodes");
      g.graph_nodes_per_step = get_num(e, pth, "graph_nodes_per_step");
    }
    r.growth.push_back(std::move(g));
  }

  const json &ooms = get_array(j, "", "ooms");
  for (size_t i = 0; i < ooms.size(); ++i) {
    std::string pth = elem("", "ooms", i);
    const json &e = ooms[i];
    OomEntry x;
    x.api = get_str(e, pth, "api");
    x.requested_bytes = get_u64(e, pth, "requested_bytes");
    x.device = get_int32_or_null(e, pth, "device", -1);
    x.live_bytes = get_u64(e, pth, "live_bytes");
    // Added in version 1 (docs/report-format.md): reports written before it have none.
    if (auto rec = e.find("recovered"); rec != e.end()) {
      if (!rec->is_boolean()) fail(pth + ".recovered", "expected true or false");
      x.recovered = rec->get<bool>();
    }
    x.frames = read_native(e, pth, "frames");
    x.python_frames = read_python(e, pth, "python_frames");
    const json &tops = get_array(e, pth, "top_sites");
    for (size_t k = 0; k < tops.size(); ++k) {
      std::string tp = elem(pth, "top_sites", k);
      SiteTotal t;
      t.bytes = get_u64(tops[k], tp, "bytes");
      t.allocations = get_u64(tops[k], tp, "allocations");
      t.frames = read_native(tops[k], tp, "frames");
      t.python_frames = read_python(tops[k], tp, "python_frames");
      x.top_sites.push_back(std::move(t));
    }
    x.hint = read_hint(e, pth);
    x.holders = read_holders(e, pth);
    read_roles(e, pth, "roles", x.roles);
    r.ooms.push_back(std::move(x));
  }
  // Extra keys (docs/roles.md): optional on input.
  read_roles(j, "", "roles", r.roles);
  if (auto su = j.find("summary"); su != j.end() && su->is_object())
    read_roles(*su, "summary", "peak_roles", r.peak_roles);
  if (auto st = j.find("roles_steps"); st != j.end()) {
    if (!st->is_array()) fail("roles_steps", "expected an array");
    for (size_t i = 0; i < st->size(); ++i) {
      const json &e = (*st)[i];
      std::string pth = elem("", "roles_steps", i);
      RoleSplit s;
      s.at = get_str(e, pth, "at");
      s.step = static_cast<uint64_t>(get_int_or_null(e, pth, "step", 0));
      s.live_bytes = get_u64(e, pth, "live_bytes");
      const json &bytes = member(e, pth, "bytes");
      for (size_t k = 0; k < kRoles; ++k) {
        RoleEntry x;
        x.role = role_name(static_cast<MemoryRole>(k));
        if (bytes.contains(x.role)) x.bytes = get_u64(bytes, join(pth, "bytes"), x.role.c_str());
        s.roles.push_back(std::move(x));
      }
      r.role_steps.push_back(std::move(s));
    }
  }

  // Extra key (not in the base schema of docs/report-format.md): optional on input.
  if (auto su = j.find("suppressions_used"); su != j.end()) {
    if (!su->is_array()) fail("suppressions_used", "expected an array");
    for (size_t i = 0; i < su->size(); ++i) {
      std::string pth = elem("", "suppressions_used", i);
      SuppressionUse u;
      u.pattern = get_str((*su)[i], pth, "pattern");
      u.allocations = get_u64((*su)[i], pth, "allocations");
      u.bytes = get_u64((*su)[i], pth, "bytes");
      r.suppressions_used.push_back(std::move(u));
    }
  }

  if (auto hn = j.find("held_now"); hn != j.end()) {
    if (!hn->is_object()) fail("held_now", "expected an object");
    r.held_now.present = true;
    r.held_now.bytes = get_u64(*hn, "held_now", "bytes");
    r.held_now.tensors = get_u64(*hn, "held_now", "tensors");
    r.held_now.holders = read_holders(*hn, "held_now");
  }

  if (auto mk = j.find("marks"); mk != j.end()) {
    if (!mk->is_array()) fail("marks", "expected an array");
    for (size_t i = 0; i < mk->size(); ++i) {
      std::string pth = elem("", "marks", i);
      Mark m;
      m.time = get_num((*mk)[i], pth, "t");
      m.label = get_str((*mk)[i], pth, "label");
      m.thread = static_cast<uint32_t>(get_u64((*mk)[i], pth, "thread"));
      r.marks.push_back(std::move(m));
    }
  }

  const json &frees = get_array(j, "", "invalid_frees");
  for (size_t i = 0; i < frees.size(); ++i) {
    std::string pth = elem("", "invalid_frees", i);
    const json &e = frees[i];
    InvalidFreeEntry f;
    f.api = get_str(e, pth, "api");
    f.address = parse_hex(get_str(e, pth, "address"), join(pth, "address"));
    f.frames = read_native(e, pth, "frames");
    f.python_frames = read_python(e, pth, "python_frames");
    r.invalid_frees.push_back(std::move(f));
  }
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
  p["degraded"] = r.process.degraded;
  p["unwinder"] = str_or_null(r.process.unwinder);
  j["process"] = std::move(p);

  const Summary &m = r.summary;
  ojson s;
  s["leaked_bytes"] = m.leaked_bytes;
  s["leaked_allocations"] = m.leaked_allocations;
  s["leak_sites"] = m.leak_sites;
  s["peak_bytes"] = m.peak_bytes;
  s["events"] = m.events;
  s["suppressed_bytes"] = m.suppressed_bytes;
  s["cached_bytes"] = m.cached_bytes;
  // Section 9 keys appear in reports of Python processes only, so a native
  // program's report stays byte-identical to the section 5 contract.
  const bool python = !r.process.python.empty() || !r.reachable.empty();
  if (python) {
    s["reachable_bytes"] = m.reachable_bytes;
    s["cached_in_tensors_bytes"] = m.cached_in_tensors_bytes;
    s["cached_free_bytes"] = m.cached_free_bytes;
  }
  // Only where an interval or a late attachment made pre-existing memory, so
  // other reports keep their keys.
  if (r.trigger == "stop" || m.preexisting_frees) {
    s["preexisting_frees"] = m.preexisting_frees;
    s["preexisting_freed_bytes"] = m.preexisting_freed_bytes;
  }
  // Only where a library holds memory for the framework, so other reports
  // keep their keys.
  const bool library_held = !r.library_held.empty();
  if (library_held) s["library_held_bytes"] = m.library_held_bytes;
  s["overhead"] = {{"events", m.overhead.events},
                   {"seconds_in_torchseal", finite(m.overhead.seconds_in_torchseal)}};
  j["summary"] = std::move(s);

  auto leak_list = [&](const std::vector<LeakEntry> &list) {
    ojson leaks = ojson::array();
    for (const LeakEntry &l : list) {
      ojson e;
      e["kind"] = l.kind;
      e["api"] = l.api;
      e["device"] = device_json(l.device);
      e["bytes"] = l.bytes;
      e["allocations"] = l.allocations;
      e["detected_at"] = l.detected_at;
      e["frames"] = native_json(l.frames);
      e["python_frames"] = python_json(l.python_frames);
      if (python) e["holders"] = holders_json(l.holders);
      if (!l.library.empty()) e["library"] = l.library;
      if (!l.map_frames.empty() || !l.map_python_frames.empty())
        e["mapped_at"] = {{"frames", native_json(l.map_frames)},
                          {"python_frames", python_json(l.map_python_frames)}};
      leaks.push_back(std::move(e));
    }
    return leaks;
  };
  j["leaks"] = leak_list(r.leaks);
  if (python) j["reachable"] = leak_list(r.reachable);
  if (library_held) j["library_held"] = leak_list(r.library_held);

  ojson growth = ojson::array();
  for (const GrowthEntry &g : r.growth) {
    ojson e;
    e["bytes_per_step"] = finite(g.bytes_per_step);
    e["growth_bytes"] = g.growth_bytes;
    e["steps"] = g.steps;
    e["r"] = finite(g.r);
    e["kind"] = g.kind;
    e["api"] = g.api;
    e["frames"] = native_json(g.frames);
    e["python_frames"] = python_json(g.python_frames);
    e["hint"] = hint_json(g.hint);
    if (python) e["holders"] = holders_json(g.holders);
    if (g.kind == kGraphGrowthKind) {
      e["graph_nodes"] = g.graph_nodes;
      e["graph_nodes_per_step"] = finite(g.graph_nodes_per_step);
    }
    growth.push_back(std::move(e));
  }
  j["growth"] = std::move(growth);

  ojson ooms = ojson::array();
  for (const OomEntry &o : r.ooms) {
    ojson e;
    e["api"] = o.api;
    e["requested_bytes"] = o.requested_bytes;
    e["device"] = device_json(o.device);
    e["live_bytes"] = o.live_bytes;
    e["frames"] = native_json(o.frames);
    e["python_frames"] = python_json(o.python_frames);
    ojson tops = ojson::array();
    for (const SiteTotal &t : o.top_sites) {
      ojson te;
      te["bytes"] = t.bytes;
      te["allocations"] = t.allocations;
      te["frames"] = native_json(t.frames);
      te["python_frames"] = python_json(t.python_frames);
      tops.push_back(std::move(te));
    }
    e["top_sites"] = std::move(tops);
    e["hint"] = hint_json(o.hint);
    e["recovered"] = o.recovered;
    if (python) e["holders"] = holders_json(o.holders);
    if (!o.roles.roles.empty()) put_role_split(e, "roles", o.roles);
    ooms.push_back(std::move(e));
  }
  j["ooms"] = std::move(ooms);

  ojson frees = ojson::array();
  for (const InvalidFreeEntry &f : r.invalid_frees) {
    ojson e;
    e["api"] = f.api;
    e["address"] = hex_address(f.address);
    e["frames"] = native_json(f.frames);
    e["python_frames"] = python_json(f.python_frames);
    frees.push_back(std::move(e));
  }
  j["invalid_frees"] = std::move(frees);

  // Extra key, only when a suppression matched: reports without
  // suppressions stay byte-identical to the base schema.
  if (!r.suppressions_used.empty()) {
    ojson used = ojson::array();
    for (const SuppressionUse &u : r.suppressions_used) {
      used.push_back({{"pattern", u.pattern}, {"allocations", u.allocations}, {"bytes", u.bytes}});
    }
    j["suppressions_used"] = std::move(used);
  }
  // Extra keys, only where a holder scan ran (docs/roles.md).
  if (!r.roles.roles.empty()) put_role_split(j, "roles", r.roles);
  if (!r.peak_roles.roles.empty()) put_role_split(j["summary"], "peak_roles", r.peak_roles);
  if (!r.role_steps.empty()) j["roles_steps"] = role_steps_json(r.role_steps);
  // Extra key, only in a snapshot (`torchseal attach --snapshot`).
  if (r.held_now.present) {
    j["held_now"] = {{"bytes", r.held_now.bytes},
                     {"tensors", r.held_now.tensors},
                     {"holders", holders_json(r.held_now.holders)}};
  }
  // Extra key, only for a history with marks (torchseal_mark).
  if (!r.marks.empty()) {
    ojson marks = ojson::array();
    for (const Mark &m : r.marks)
      marks.push_back({{"t", finite(m.time)}, {"label", m.label}, {"thread", m.thread}});
    j["marks"] = std::move(marks);
  }
  // Extra keys of a report read from a history (docs/long-runs.md): what was
  // read, and the window when one was asked for.
  if (r.history.present) {
    const HistoryReadInfo &h = r.history;
    ojson hist = {{"segments", h.segments},
                  {"segments_on_disk", h.segments_on_disk},
                  {"segments_read", h.segments_read},
                  {"bytes_read", h.bytes_read},
                  {"segment_bytes", h.segment_bytes}};
    hist["limit_bytes"] = h.limit_bytes ? ojson(h.limit_bytes) : ojson(nullptr);
    hist["checkpoint_bytes"] = h.checkpoint_bytes;
    hist["over_cap"] = h.over_cap;
    if (h.truncated) hist["truncated"] = true;  // absent: a clean end
    j["history"] = std::move(hist);
    if (h.windowed) {
      ojson w = {{"from", h.from_s >= 0 ? ojson(finite(h.from_s)) : ojson(nullptr)},
                 {"to", h.to_s >= 0 ? ojson(finite(h.to_s)) : ojson(nullptr)}};
      if (h.from_step || h.to_step)
        w["steps"] = {h.from_step ? ojson(h.from_step) : ojson(nullptr),
                      h.to_step ? ojson(h.to_step) : ojson(nullptr)};
      j["window"] = std::move(w);
    }
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
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    error = path + ": not a regular file";
    return false;
  }
  if (static_cast<uint64_t>(st.st_size) > kMaxReportBytes) {
    close(fd);
    error = path + ": larger than " + std::to_string(kMaxReportBytes >> 20) + " MiB, not a report";
    return false;
  }
  std::string text;
  try {
    text.resize(static_cast<size_t>(st.st_size));
  } catch (...) {
    close(fd);
    error = path + ": out of memory reading the file";
    return false;
  }
  size_t got = 0;
  while (got < text.size()) {
    ssize_t n = read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  text.resize(got);
  if (!report_from_json(text, out, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

}  // namespace torchseal
