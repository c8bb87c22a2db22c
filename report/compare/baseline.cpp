#include "report/compare/baseline.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "common/util/read_file.h"
#include "report/analysis/site_match.h"
#include "report/render/site_json.h"

namespace torchseal {
namespace {

using ojson = nlohmann::ordered_json;
using json = nlohmann::json;

constexpr size_t kMaxBaselineBytes = 64ull << 20;

// Identity of a site inside one list, for de-duplication: chain + lines.
std::string exact_key(const SiteView &v) {
  std::string k = site_chain(v);
  for (const NativeFrame &f : *v.frames) k += ";" + std::to_string(f.line);
  for (const PythonFrame &f : *v.python_frames) k += ";" + std::to_string(f.line);
  return k;
}

SiteView view_of(const BaselineSite &s) { return {s.kind, s.api, {}, &s.frames, &s.python_frames}; }

template <class Entry>
std::vector<long> matches(const Baseline &b, const std::string &type,
                          const std::vector<Entry> &entries) {
  std::vector<SiteView> base;
  std::vector<long> site_of;  // base[i] is b.sites[site_of[i]]
  for (size_t i = 0; i < b.sites.size(); ++i) {
    if (b.sites[i].type != type) continue;
    base.push_back(view_of(b.sites[i]));
    site_of.push_back(long(i));
  }
  // Collapse identical sites of the report first, so matching stays
  // one-to-one per *site*, not per entry.
  std::map<std::string, size_t> group_of;
  std::vector<SiteView> groups;
  std::vector<size_t> entry_group(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) {
    SiteView v = site_view(entries[i]);
    auto [it, fresh] = group_of.emplace(exact_key(v), groups.size());
    if (fresh) groups.push_back(v);
    entry_group[i] = it->second;
  }
  std::vector<long> m = match_sites(base, groups);
  std::vector<long> out(entries.size(), -1);
  for (size_t i = 0; i < entries.size(); ++i) {
    long g = m[entry_group[i]];
    if (g >= 0) out[i] = site_of[size_t(g)];
  }
  return out;
}

template <class Entry>
std::vector<bool> covers(const Baseline &b, const std::string &type,
                         const std::vector<Entry> &entries) {
  std::vector<long> m = matches(b, type, entries);
  std::vector<bool> out(m.size());
  for (size_t i = 0; i < m.size(); ++i) out[i] = m[i] >= 0;
  return out;
}

template <class Entry>
void add_sites(Baseline &b, std::map<std::string, size_t> &seen, const std::string &type,
               const std::vector<Entry> &entries, uint64_t (*bytes)(const Entry &),
               uint64_t (*allocs)(const Entry &)) {
  for (const Entry &e : entries) {
    auto [it, fresh] = seen.emplace(type + "\n" + exact_key(site_view(e)), b.sites.size());
    if (fresh) {
      BaselineSite s;
      s.type = type;
      s.kind = e.kind;
      s.api = e.api;
      s.frames = e.frames;
      s.python_frames = e.python_frames;
      b.sites.push_back(std::move(s));
    }
    BaselineSite &s = b.sites[it->second];
    s.bytes = std::max(s.bytes, bytes(e));
    s.allocations = std::max(s.allocations, allocs(e));
  }
}

struct Bad {
  std::string msg;
};

const json &need(const json &o, const std::string &path, const char *key) {
  if (!o.is_object()) throw Bad{path + ": expected an object"};
  auto it = o.find(key);
  if (it == o.end()) throw Bad{path + "." + key + ": missing"};
  return *it;
}
std::string str(const json &o, const std::string &path, const char *key, bool nullable = false) {
  const json &v = need(o, path, key);
  if (nullable && v.is_null()) return {};
  if (!v.is_string()) throw Bad{path + "." + key + ": expected a string"};
  return v.get<std::string>();
}
int64_t num(const json &o, const std::string &path, const char *key, bool nullable = false) {
  const json &v = need(o, path, key);
  if (nullable && v.is_null()) return 0;
  if (!v.is_number_integer() || v.get<int64_t>() < 0) {
    throw Bad{path + "." + key + ": expected a non-negative integer"};
  }
  return v.get<int64_t>();
}

// The array `a` found at `where`, each element read by `read(element, its path)`.
template <class T, class Read>
std::vector<T> list(const json &a, const std::string &where, Read read) {
  if (!a.is_array()) throw Bad{where + ": expected an array"};
  std::vector<T> out;
  for (size_t k = 0; k < a.size(); ++k)
    out.push_back(read(a[k], where + "[" + std::to_string(k) + "]"));
  return out;
}

// The keys native and Python frames share: function, file, line.
template <class Frame>
Frame read_frame(const json &o, const std::string &path) {
  Frame f;
  f.function = str(o, path, "function", true);
  f.file = str(o, path, "file", true);
  f.line = int(num(o, path, "line", true));
  return f;
}

NativeFrame read_native(const json &o, const std::string &path) {
  NativeFrame f = read_frame<NativeFrame>(o, path);
  f.module = str(o, path, "module", true);
  if (o.contains("address")) f.address = uint64_t(num(o, path, "address"));
  return f;
}

BaselineSite read_site(const json &e, const std::string &p) {
  BaselineSite s;
  s.type = str(e, p, "type");
  if (s.type != "leak" && s.type != "growth") throw Bad{p + ".type: expected leak or growth"};
  s.kind = str(e, p, "kind");
  s.api = str(e, p, "api");
  s.bytes = uint64_t(num(e, p, "bytes"));
  s.allocations = uint64_t(num(e, p, "allocations"));
  s.frames = list<NativeFrame>(need(e, p, "frames"), p + ".frames", read_native);
  s.python_frames =
      list<PythonFrame>(need(e, p, "python_frames"), p + ".python_frames", read_frame<PythonFrame>);
  return s;
}

}  // namespace

Baseline baseline_from_reports(const std::vector<Report> &reports) {
  Baseline b;
  std::map<std::string, size_t> seen;
  for (const Report &r : reports) {
    add_sites<LeakEntry>(
        b, seen, "leak", r.leaks, [](const LeakEntry &e) { return e.bytes; },
        [](const LeakEntry &e) { return e.allocations; });
    add_sites<GrowthEntry>(
        b, seen, "growth", r.growth,
        [](const GrowthEntry &e) { return uint64_t(e.growth_bytes > 0 ? e.growth_bytes : 0); },
        [](const GrowthEntry &) { return uint64_t(0); });
  }
  return b;
}

std::string baseline_to_json(const Baseline &b) {
  ojson j;
  j["format"] = kBaselineFormat;
  j["version"] = kBaselineVersion;
  j["sites"] = entries_json(b.sites, [](ojson &e, const BaselineSite &s) {
    e["type"] = s.type;
    e["kind"] = s.kind;
    e["api"] = s.api;
    e["bytes"] = s.bytes;
    e["allocations"] = s.allocations;
    // The address only where it is a frame's only identity.
    put_stacks(e, s, FrameAddress::WhenUnsymbolized);
  });
  return j.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
}

bool baseline_from_json(const std::string &text, Baseline &out, std::string &error) {
  json j = json::parse(text, nullptr, false);
  if (j.is_discarded()) {
    error = "not JSON";
    return false;
  }
  try {
    if (!j.is_object() || !j.contains("format") || j["format"] != kBaselineFormat) {
      throw Bad{"not a torchseal baseline (\"format\" is not \"torchseal-baseline\")"};
    }
    if (num(j, "baseline", "version") != kBaselineVersion) {
      throw Bad{"unsupported baseline version (this torchseal reads version 1)"};
    }
    Baseline b;
    b.sites = list<BaselineSite>(need(j, "baseline", "sites"), "sites", read_site);
    out = std::move(b);
    return true;
  } catch (const Bad &b) {
    error = b.msg;
  } catch (const std::exception &e) {
    error = e.what();
  }
  return false;
}

bool read_baseline_file(const std::string &path, Baseline &out, std::string &error) {
  std::string text;
  int err = 0;
  FileRead got = read_small_file(path, kMaxBaselineBytes, text, err);
  if (got == FileRead::CannotOpen) {
    error = "cannot open " + path + ": " + std::strerror(err);
    return false;
  }
  // After a read error, what was read fails to parse, with the place.
  if (got != FileRead::Ok && got != FileRead::ReadError) {
    error = path + ": not a regular file of at most 64 MiB";
    return false;
  }
  if (!baseline_from_json(text, out, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

std::vector<bool> baseline_covers(const Baseline &b, const std::vector<LeakEntry> &leaks) {
  return covers(b, "leak", leaks);
}
std::vector<long> baseline_matches(const Baseline &b, const std::vector<LeakEntry> &leaks) {
  return matches(b, "leak", leaks);
}
std::vector<bool> baseline_covers(const Baseline &b, const std::vector<GrowthEntry> &growth) {
  return covers(b, "growth", growth);
}

}  // namespace torchseal
