#include "report/render/report_text.h"

#include "report/analysis/shown_frames.h"
#include "report/analysis/site_match.h"
#include "report/render/roles_text.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string_view>

#include <unistd.h>

namespace torchseal {
namespace {

std::string format(const char *fmt, auto... args) {
  int n = std::snprintf(nullptr, 0, fmt, args...);
  if (n <= 0) return {};
  std::string s(static_cast<size_t>(n) + 1, '\0');
  std::snprintf(s.data(), s.size(), fmt, args...);
  s.resize(static_cast<size_t>(n));
  return s;
}

// Names come from binaries and from report files we did not write; a
// newline in one must not forge report lines (or the SUMMARY line).
std::string clean(const std::string &s) {
  std::string out = s;
  for (char &c : out) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return out;
}

std::string u64(uint64_t v) { return std::to_string(v); }

std::string device_str(int d) { return d < 0 ? std::string("?") : std::to_string(d); }

void append_python_frame(std::string &out, const std::vector<PythonFrame> &py, size_t i,
                         const char *indent) {
  const PythonFrame &f = py[i];
  out += format("%s#py%zu in %s %s:%d\n", indent, i,
                f.function.empty() ? "??" : clean(f.function).c_str(),
                f.file.empty() ? "??" : clean(f.file).c_str(), f.line);
}

// A source file under the working directory is shown relative to it, as a
// compiler's diagnostics are; P.json keeps the absolute path.
std::string shown_path(const std::string &file, const std::string &cwd) {
  if (cwd.empty() || file.size() <= cwd.size() + 1 || file.compare(0, cwd.size(), cwd) != 0)
    return file;
  if (cwd.back() == '/') return file.substr(cwd.size());
  return file[cwd.size()] == '/' ? file.substr(cwd.size() + 1) : file;
}

std::string working_dir() {
  char buf[4096];
  return getcwd(buf, sizeof buf) ? std::string(buf) : std::string();
}

void append_native_frame(std::string &out, const std::vector<NativeFrame> &frames, size_t i,
                         const char *indent, const std::string &cwd) {
  const NativeFrame &f = frames[i];
  out += format("%s#%zu 0x%" PRIx64 " in %s", indent, i, f.address,
                f.function.empty() ? "??" : clean(f.function).c_str());
  if (!f.file.empty()) {
    out += ' ';
    out += clean(shown_path(f.file, cwd));
    if (f.line > 0) out += ':' + std::to_string(f.line);
  }
  out += " (" + (f.module.empty() ? std::string("<unknown module>") : clean(f.module)) + ")\n";
}

// Python frames go above native ones: for a Python program they are the
// part the user wrote, and the native stack below shows how it reached CUDA.
// In a Python process the user's own frame leads and the interpreter's and
// frameworks' native frames are folded (shown_frames.h); frame numbers stay
// those of P.json.
void append_frames(std::string &out, const std::vector<NativeFrame> &frames,
                   const std::vector<PythonFrame> &py, bool python_process, const char *indent,
                   const std::string &cwd) {
  if (py.empty() && frames.empty()) {
    out += std::string(indent) + "<no stack recorded>\n";
    return;
  }
  if (!python_process) {
    for (size_t i = 0; i < py.size(); ++i) append_python_frame(out, py, i, indent);
    for (size_t i = 0; i < frames.size(); ++i) append_native_frame(out, frames, i, indent, cwd);
    return;
  }
  const ShownStack s = shown_stack(frames, py);
  for (size_t i : s.python) append_python_frame(out, py, i, indent);
  for (const NativeRow &row : s.native) {
    if (!row.folded) {
      append_native_frame(out, frames, row.first, indent, cwd);
      continue;
    }
    out += format("%s... %s (#%zu-#%zu)\n", indent, folded_label(row.count).c_str(), row.first,
                  row.first + row.count - 1);
  }
}

// "function (file:line)" of the frame a person looks at for a site.
std::string site_where(const std::vector<NativeFrame> &frames, const std::vector<PythonFrame> &py) {
  UserFrame u = user_frame(frames, py);
  if (u.function.empty() && u.file.empty()) return "an unknown location";
  std::string s = u.function.empty() ? "??" : clean(u.function);
  if (!u.file.empty()) {
    const size_t slash = u.file.rfind('/');
    s += " (" + clean(slash == std::string::npos ? u.file : u.file.substr(slash + 1));
    if (u.line > 0) s += ":" + std::to_string(u.line);
    s += ")";
  }
  return s;
}

// Each cause once (several growing sites and OOMs often share one), with the
// sites it explains.
std::string hints_section(const Report &r) {
  // Per cause: its sites in report order, each with how often it occurs
  // (repeated OOMs at one line are one site).
  using Sites = std::vector<std::pair<std::string, size_t>>;
  std::vector<std::pair<const Hint *, Sites>> causes;
  auto add = [&](const std::optional<Hint> &h, std::string site) {
    if (!h) return;
    auto cause =
        std::find_if(causes.begin(), causes.end(), [&](const auto &c) { return *c.first == *h; });
    if (cause == causes.end()) cause = causes.insert(causes.end(), {&*h, {}});
    Sites &sites = cause->second;
    auto same =
        std::find_if(sites.begin(), sites.end(), [&](const auto &s) { return s.first == site; });
    if (same == sites.end()) {
      sites.emplace_back(std::move(site), 1);
    } else {
      ++same->second;
    }
  };
  for (const GrowthEntry &g : r.growth) {
    add(g.hint, "growing site at " + site_where(g.frames, g.python_frames));
  }
  for (const OomEntry &o : r.ooms) add(o.hint, "OOM at " + site_where(o.frames, o.python_frames));
  if (causes.empty()) return {};
  std::string out = "\nLikely cause" + std::string(causes.size() == 1 ? "" : "s") + ":\n";
  for (const auto &[hint, sites] : causes) {
    out += "  hint: " + clean(hint->message) + "\n    for ";
    for (size_t i = 0; i < sites.size(); ++i) {
      out += (i ? ", " : "") + sites[i].first;
      if (sites[i].second > 1) out += " (" + std::to_string(sites[i].second) + " times)";
    }
    out += "\n";
  }
  return out;
}

// The Python objects that keep a site's memory alive (docs/report-format.md,
// "holders"): one line per chain, the largest first.
void append_holders(std::string &out, const std::vector<Holder> &holders, const char *indent) {
  constexpr size_t kShown = 3;
  for (size_t i = 0; i < holders.size() && i < kShown; ++i) {
    const Holder &h = holders[i];
    std::string chain;
    for (const std::string &step : h.chain) chain += (chain.empty() ? "" : " -> ") + clean(step);
    out += format("%sHeld by: %s (%" PRIu64 " tensor(s), %" PRIu64 " byte(s))\n", indent,
                  chain.c_str(), h.tensors, h.bytes);
  }
  if (holders.size() > kShown)
    out += format("%s... and %zu more holder(s)\n", indent, holders.size() - kShown);
}

}  // namespace

// A window's report says which part of the run it covers and what it read.
std::string window_line(const HistoryReadInfo &h) {
  auto secs = [](double s) { return s < 0 ? std::string("end") : format("%.3f", s); };
  std::string line = "window: " + secs(h.from_s) + " s to " + secs(h.to_s) + " s since start";
  if (h.from_step || h.to_step)
    line += " (steps " + (h.from_step ? u64(h.from_step) : std::string("1")) + ".." +
            (h.to_step ? u64(h.to_step) : std::string("")) + ")";
  if (h.segments)
    line +=
        "; read " + u64(h.segments_read) + " of " + u64(h.segments_on_disk) + " segments on disk";
  return line + "; leaks are allocations made in it and live at its end\n";
}

std::string report_to_text(const Report &r) {
  std::string out;
  const std::string tag = "==" + std::to_string(r.process.pid) + "==torchseal: ";
  // An interval report (torchseal_start .. torchseal_stop) ends at the stop.
  const std::string at_end = r.history.windowed        ? "at the window's end"
                             : r.trigger == "stop"     ? "at stop"
                             : r.trigger == "snapshot" ? "at the snapshot"
                                                       : "at exit";
  const std::string cwd = working_dir();
  bool anything =
      !r.leaks.empty() || !r.growth.empty() || !r.ooms.empty() || !r.invalid_frees.empty();
  if (!r.leaks.empty()) {
    out += tag + "detected memory leaks\n";
  } else if (anything) {
    out += tag + "no leaks " + at_end + "; see growing sites and memory errors below\n";
  } else {
    out += tag + "no leaks detected\n";
  }
  if (r.history.windowed) out += window_line(r.history);
  // Said up front: a report without lines or with short stacks must not
  // be read as a whole one.
  for (const std::string &d : r.process.degraded) out += tag + "degraded: " + clean(d) + "\n";

  for (const LeakEntry &l : r.leaks) {
    out += "\nDirect leak of " + u64(l.bytes) + " byte(s) in " + u64(l.allocations) +
           " allocation(s) (" + clean(l.kind) + ", " + clean(l.api) + ", device " +
           device_str(l.device) + ")";
    if (l.detected_at == "context-teardown") out += " still live at context teardown,";
    out += " allocated from:\n";
    append_frames(out, l.frames, l.python_frames, is_python_site(r, l.python_frames), "    ", cwd);
    if (!l.map_frames.empty() || !l.map_python_frames.empty()) {
      out += "  still mapped by cuMemMap from:\n";
      append_frames(out, l.map_frames, l.map_python_frames, is_python_site(r, l.map_python_frames),
                    "    ", cwd);
    }
    append_holders(out, l.holders, "    ");
  }

  for (const LeakEntry &l : r.reachable) {
    out += "\nReachable " + at_end + " (held by Python objects, not a leak): " + u64(l.bytes) +
           " byte(s) in " + u64(l.allocations) + " allocation(s) (" + clean(l.kind) + ", " +
           clean(l.api) + ", device " + device_str(l.device) + ") allocated from:\n";
    append_frames(out, l.frames, l.python_frames, is_python_site(r, l.python_frames), "    ", cwd);
    append_holders(out, l.holders, "    ");
  }

  for (const LeakEntry &l : r.library_held) {
    out += "\nHeld by " + clean(l.library) + " for the framework's handles " + at_end +
           " (library-held, not a leak): " + u64(l.bytes) + " byte(s) in " + u64(l.allocations) +
           " allocation(s) (" + clean(l.kind) + ", " + clean(l.api) + ", device " +
           device_str(l.device) + ") allocated from:\n";
    append_frames(out, l.frames, l.python_frames, is_python_site(r, l.python_frames), "    ", cwd);
  }

  for (const GrowthEntry &g : r.growth) {
    if (g.kind == kGraphGrowthKind) {
      // Nodes, not bytes: its GPU memory may hardly move (docs/holders.md).
      out += format("\nGrowing autograd graph: %" PRIu64 " node(s), %.1f node(s)/step over %" PRIu64
                    " step scan(s), r=%.3f, GPU %+" PRId64
                    " byte(s); the tensor holding it was "
                    "allocated from:\n",
                    g.graph_nodes, g.graph_nodes_per_step, g.steps, g.r, g.growth_bytes);
      append_frames(out, g.frames, g.python_frames, is_python_site(r, g.python_frames), "    ",
                    cwd);
      append_holders(out, g.holders, "    ");
      continue;
    }
    out += format("\nGrowing site (%s, %s): %+" PRId64 " byte(s) over %" PRIu64
                  " step(s), %.1f byte(s)/step, r=%.3f, allocated from:\n",
                  clean(g.kind).c_str(), clean(g.api).c_str(), g.growth_bytes, g.steps,
                  g.bytes_per_step, g.r);
    append_frames(out, g.frames, g.python_frames, is_python_site(r, g.python_frames), "    ", cwd);
    append_holders(out, g.holders, "    ");
  }

  for (const OomEntry &o : r.ooms) {
    // A recovered one never reached the program: the allocator's retry worked.
    // The split by role leads (docs/roles.md).
    out += "\n" + oom_role_lead(o);
    out += std::string(o.recovered ? "Out of memory, recovered by a retry: " : "Out of memory: ") +
           clean(o.api) + " of " + u64(o.requested_bytes) + " byte(s) on device " +
           device_str(o.device) + " failed with " + u64(o.live_bytes) +
           " byte(s) live, requested from:\n";
    append_frames(out, o.frames, o.python_frames, is_python_site(r, o.python_frames), "    ", cwd);
    if (!o.top_sites.empty()) {
      out += "  Largest live sites at the time:\n";
      for (const SiteTotal &t : o.top_sites) {
        out += "    " + u64(t.bytes) + " byte(s) in " + u64(t.allocations) +
               " allocation(s) allocated from:\n";
        append_frames(out, t.frames, t.python_frames, is_python_site(r, t.python_frames), "      ",
                      cwd);
      }
    }
    append_holders(out, o.holders, "  ");
  }

  if (r.held_now.present) {
    out +=
        "\nHeld now by Python objects (a snapshot: memory allocated before the attach\n"
        "included): " +
        u64(r.held_now.bytes) + " byte(s) in " + u64(r.held_now.tensors) + " tensor storage(s)\n";
    append_holders(out, r.held_now.holders, "  ");
  }

  out += hints_section(r);
  out += role_table(r.roles, r.trigger == "exit" ? "at the exit scan" : "at the report's scan");
  out += role_table(r.peak_roles, "at the highest live total scanned");
  if (roles_before_tracking(r, true))
    for (std::string_view rest = kRolesSinceStart; !rest.empty();) {
      size_t end = std::min(rest.find('\n'), rest.size());
      out += "  " + std::string(rest.substr(0, end)) + "\n";
      rest.remove_prefix(std::min(end + 1, rest.size()));
    }

  for (const InvalidFreeEntry &f : r.invalid_frees) {
    out += format("\nInvalid free: %s of 0x%" PRIx64 ", which is not a live allocation, from:\n",
                  clean(f.api).c_str(), f.address);
    append_frames(out, f.frames, f.python_frames, is_python_site(r, f.python_frames), "    ", cwd);
  }

  if (r.summary.cached_bytes > 0) {
    out += "\n" + tag + u64(r.summary.cached_bytes) +
           " byte(s) held by PyTorch's caching allocator " + at_end +
           " (cached, not counted as leaks)\n";
    if (r.summary.cached_in_tensors_bytes > 0)
      out += tag + "  of which " + u64(r.summary.cached_in_tensors_bytes) +
             " byte(s) in tensors Python still holds (listed as reachable), " +
             u64(r.summary.cached_free_bytes) + " free\n";
  }
  if (r.summary.reachable_bytes > 0) {
    out += (r.summary.cached_bytes > 0 ? "" : "\n") + tag + u64(r.summary.reachable_bytes) +
           " byte(s) still held by Python objects " + at_end +
           " (reachable, not counted as leaks)\n";
  }
  if (r.summary.library_held_bytes > 0) {
    out += (r.summary.cached_bytes + r.summary.reachable_bytes > 0 ? "" : "\n") + tag +
           u64(r.summary.library_held_bytes) +
           " byte(s) held by CUDA libraries for the framework's handles " + at_end +
           " (library-held, not counted as leaks)\n";
  }
  if (r.summary.preexisting_frees > 0) {
    out += tag + u64(r.summary.preexisting_frees) +
           " free(s) of memory allocated before tracking started (pre-existing, not a leak)\n";
  }
  if (r.summary.suppressed_bytes > 0) {
    out += (r.summary.cached_bytes + r.summary.reachable_bytes + r.summary.library_held_bytes > 0
                ? ""
                : "\n") +
           tag + u64(r.summary.suppressed_bytes) + " byte(s) suppressed\n";
  }
  if (!r.suppressions_used.empty()) {
    // LSan's table: count (allocations), bytes, pattern.
    out +=
        "\n-----------------------------------------------------\n"
        "Suppressions used:\n  count      bytes template\n";
    for (const SuppressionUse &u : r.suppressions_used) {
      out += format("%7" PRIu64 " %10" PRIu64 " %s\n", u.allocations, u.bytes,
                    clean(u.pattern).c_str());
    }
    out += "-----------------------------------------------------\n";
  }
  if (!r.marks.empty()) {
    // Seconds since the process started, as a timeline reads them.
    out += "\nMarks:\n";
    for (const Mark &m : r.marks)
      out += format("  %10.6f s  %s (thread %u)\n", m.time - r.process.start_time,
                    clean(m.label).c_str(), m.thread);
  }
  out += "\nSUMMARY: torchseal: " + u64(r.summary.leaked_bytes) + " byte(s) leaked in " +
         u64(r.summary.leaked_allocations) + " allocation(s).\n";
  return out;
}

}  // namespace torchseal
