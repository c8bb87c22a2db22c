#include "report/compare/baseline.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <nlohmann/json.hpp>

#include "report/analysis/site_match.h"

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
std::vector<bool> covers(const Baseline &b, const std::string &type, const std::vector<Entry> &entries) {
  std::vector<SiteView> base;
  for (const BaselineSite &s : b.sites) {
    if (s.type == type) base.push_back(view_of(s));
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
  std::vector<bool> out(entries.size());
  for (size_t i = 0; i < entries.size(); ++i) out[i] = m[entry_group[i]] >= 0;
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

}  // namespace

Baseline baseline_from_reports(const std::vector<Report> &reports) {
  Baseline b;
  std::map<std::string, size_t> seen;
  for (const Report &r : reports) {
    add_sites<LeakEntry>(b, seen, "leak", r.leaks, [](const LeakEntry &e) { return e.bytes; },
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
  ojson sites = ojson::array();
  for (const BaselineSite &s : b.sites) {
    ojson e;
    e["type"] = s.type;
    e["kind"] = s.kind;
    e["api"] = s.api;
    e["bytes"] = s.bytes;
    e["allocations"] = s.allocations;
    ojson frames = ojson::array();
    for (const NativeFrame &f : s.frames) {
      ojson fj;
      fj["function"] = f.function.empty() ? ojson(nullptr) : ojson(f.function);
      fj["file"] = f.file.empty() ? ojson(nullptr) : ojson(f.file);
      fj["line"] = f.line > 0 ? ojson(f.line) : ojson(nullptr);
      fj["module"] = f.module.empty() ? ojson(nullptr) : ojson(f.module);
      // Only meaningful for frames without symbols (their only identity).
      if (f.function.empty() && f.file.empty()) fj["address"] = f.address;
      frames.push_back(std::move(fj));
    }
    e["frames"] = std::move(frames);
    ojson py = ojson::array();
    for (const PythonFrame &f : s.python_frames) {
      py.push_back({{"function", f.function}, {"file", f.file}, {"line", f.line}});
    }
    e["python_frames"] = std::move(py);
    sites.push_back(std::move(e));
  }
  j["sites"] = std::move(sites);
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
    const json &sites = need(j, "baseline", "sites");
    if (!sites.is_array()) throw Bad{"sites: expected an array"};
    Baseline b;
    for (size_t i = 0; i < sites.size(); ++i) {
      std::string p = "sites[" + std::to_string(i) + "]";
      const json &e = sites[i];
      BaselineSite s;
      s.type = str(e, p, "type");
      if (s.type != "leak" && s.type != "growth") throw Bad{p + ".type: expected leak or growth"};
      s.kind = str(e, p, "kind");
      s.api = str(e, p, "api");
      s.bytes = uint64_t(num(e, p, "bytes"));
      s.allocations = uint64_t(num(e, p, "allocations"));
      const json &frames = need(e, p, "frames");
      if (!frames.is_array()) throw Bad{p + ".frames: expected an array"};
      for (size_t k = 0; k < frames.size(); ++k) {
        std::string fp = p + ".frames[" + std::to_string(k) + "]";
        NativeFrame f;
        f.function = str(frames[k], fp, "function", true);
        f.file = str(frames[k], fp, "file", true);
        f.line = int(num(frames[k], fp, "line", true));
        f.module = str(frames[k], fp, "module", true);
        if (frames[k].contains("address")) f.address = uint64_t(num(frames[k], fp, "address"));
        s.frames.push_back(std::move(f));
      }
      const json &py = need(e, p, "python_frames");
      if (!py.is_array()) throw Bad{p + ".python_frames: expected an array"};
      for (size_t k = 0; k < py.size(); ++k) {
        std::string fp = p + ".python_frames[" + std::to_string(k) + "]";
        PythonFrame f;
        f.function = str(py[k], fp, "function", true);
        f.file = str(py[k], fp, "file", true);
        f.line = int(num(py[k], fp, "line", true));
        s.python_frames.push_back(std::move(f));
      }
      b.sites.push_back(std::move(s));
    }
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
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    error = "cannot open " + path + ": " + std::strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || size_t(st.st_size) > kMaxBaselineBytes) {
    close(fd);
    error = path + ": not a regular file of at most 64 MiB";
    return false;
  }
  std::string text;
  char buf[65536];
  ssize_t n;
  while ((n = read(fd, buf, sizeof buf)) > 0) text.append(buf, size_t(n));
  close(fd);
  if (!baseline_from_json(text, out, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

std::vector<bool> baseline_covers(const Baseline &b, const std::vector<LeakEntry> &leaks) {
  return covers(b, "leak", leaks);
}
std::vector<bool> baseline_covers(const Baseline &b, const std::vector<GrowthEntry> &growth) {
  return covers(b, "growth", growth);
}

}  // namespace torchseal
