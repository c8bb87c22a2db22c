#include "report_text.h"

#include "hints.h"

#include <cinttypes>
#include <cstdio>

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

// Python frames go above native ones: for a Python program they are the
// part the user wrote, and the native stack below shows how it reached CUDA.
void append_frames(std::string &out, const std::vector<NativeFrame> &frames,
                   const std::vector<PythonFrame> &py, const char *indent) {
  for (size_t i = 0; i < py.size(); ++i) {
    const PythonFrame &f = py[i];
    out += format("%s#py%zu in %s %s:%d\n", indent, i,
                  f.function.empty() ? "??" : clean(f.function).c_str(),
                  f.file.empty() ? "??" : clean(f.file).c_str(), f.line);
  }
  for (size_t i = 0; i < frames.size(); ++i) {
    const NativeFrame &f = frames[i];
    out += format("%s#%zu 0x%" PRIx64 " in %s", indent, i, f.address,
                  f.function.empty() ? "??" : clean(f.function).c_str());
    if (!f.file.empty()) {
      out += ' ';
      out += clean(f.file);
      if (f.line > 0) out += ':' + std::to_string(f.line);
    }
    out += " (" + (f.module.empty() ? std::string("<unknown module>") : clean(f.module)) + ")\n";
  }
  if (py.empty() && frames.empty()) out += std::string(indent) + "<no stack recorded>\n";
}

// DESIGN.md section 9: the Python objects that keep a site's memory alive,
// one line per chain, the largest first.
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

std::string report_to_text(const Report &r) {
  std::string out;
  const std::string tag = "==" + std::to_string(r.process.pid) + "==torchseal: ";
  bool anything =
      !r.leaks.empty() || !r.growth.empty() || !r.ooms.empty() || !r.invalid_frees.empty();
  if (!r.leaks.empty()) {
    out += tag + "detected memory leaks\n";
  } else if (anything) {
    out += tag + "no leaks at exit; see growing sites and memory errors below\n";
  } else {
    out += tag + "no leaks detected\n";
  }

  for (const LeakEntry &l : r.leaks) {
    out += "\nDirect leak of " + u64(l.bytes) + " byte(s) in " + u64(l.allocations) +
           " allocation(s) (" + clean(l.kind) + ", " + clean(l.api) + ", device " + device_str(l.device) + ")";
    if (l.detected_at == "context-teardown") out += " still live at context teardown,";
    out += " allocated from:\n";
    append_frames(out, l.frames, l.python_frames, "    ");
    append_holders(out, l.holders, "    ");
  }

  for (const LeakEntry &l : r.reachable) {
    out += "\nReachable at exit (held by Python objects, not a leak): " + u64(l.bytes) +
           " byte(s) in " + u64(l.allocations) + " allocation(s) (" + clean(l.kind) + ", " +
           clean(l.api) + ", device " + device_str(l.device) + ") allocated from:\n";
    append_frames(out, l.frames, l.python_frames, "    ");
    append_holders(out, l.holders, "    ");
  }

  for (const GrowthEntry &g : r.growth) {
    out += format("\nGrowing site (%s, %s): %+" PRId64 " byte(s) over %" PRIu64
                  " step(s), %.1f byte(s)/step, r=%.3f, allocated from:\n",
                  clean(g.kind).c_str(), clean(g.api).c_str(), g.growth_bytes, g.steps,
                  g.bytes_per_step, g.r);
    append_frames(out, g.frames, g.python_frames, "    ");
    if (std::string hint = hint_for(g); !hint.empty()) out += "    hint: " + clean(hint) + "\n";
    append_holders(out, g.holders, "    ");
  }

  for (const OomEntry &o : r.ooms) {
    out += "\nOut of memory: " + clean(o.api) + " of " + u64(o.requested_bytes) + " byte(s) on device " +
           device_str(o.device) + " failed with " + u64(o.live_bytes) +
           " byte(s) live, requested from:\n";
    append_frames(out, o.frames, o.python_frames, "    ");
    if (!o.top_sites.empty()) {
      out += "  Largest live sites at the time:\n";
      for (const SiteTotal &t : o.top_sites) {
        out += "    " + u64(t.bytes) + " byte(s) in " + u64(t.allocations) +
               " allocation(s) allocated from:\n";
        append_frames(out, t.frames, t.python_frames, "      ");
      }
    }
    append_holders(out, o.holders, "  ");
  }

  for (const InvalidFreeEntry &f : r.invalid_frees) {
    out += format("\nInvalid free: %s of 0x%" PRIx64 ", which is not a live allocation, from:\n",
                  clean(f.api).c_str(), f.address);
    append_frames(out, f.frames, f.python_frames, "    ");
  }

  if (r.summary.cached_bytes > 0) {
    out += "\n" + tag + u64(r.summary.cached_bytes) +
           " byte(s) held by PyTorch's caching allocator at exit (cached, not counted as leaks)\n";
  }
  if (r.summary.reachable_bytes > 0) {
    out += (r.summary.cached_bytes > 0 ? "" : "\n") + tag + u64(r.summary.reachable_bytes) +
           " byte(s) still held by Python objects at exit (reachable, not counted as leaks)\n";
  }
  if (r.summary.suppressed_bytes > 0) {
    out += (r.summary.cached_bytes + r.summary.reachable_bytes > 0 ? "" : "\n") + tag + u64(r.summary.suppressed_bytes) +
           " byte(s) suppressed\n";
  }
  if (!r.suppressions_used.empty()) {
    // LSan's table: count (allocations), bytes, pattern.
    out += "\n-----------------------------------------------------\n"
           "Suppressions used:\n  count      bytes template\n";
    for (const SuppressionUse &u : r.suppressions_used) {
      out += format("%7" PRIu64 " %10" PRIu64 " %s\n", u.allocations, u.bytes,
                    clean(u.pattern).c_str());
    }
    out += "-----------------------------------------------------\n";
  }
  out += "\nSUMMARY: torchseal: " + u64(r.summary.leaked_bytes) + " byte(s) leaked in " +
         u64(r.summary.leaked_allocations) + " allocation(s).\n";
  return out;
}

}  // namespace torchseal
