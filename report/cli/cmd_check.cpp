// `torchseal check REPORT...`: the CI leak gate. Exit 0 within limits, 1 when
// a report breaks one (with the offending stacks), 2 on unusable input.
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "report/analysis/site_match.h"
#include "report/cli/commands.h"
#include "report/compare/baseline.h"
#include "report/compare/gate.h"
#include "report/compare/junit.h"

namespace torchseal::cli {
namespace {

constexpr size_t kTopSites = 5;      // offending sites printed per report
constexpr size_t kNativeFrames = 4;  // frames printed per site
constexpr size_t kPythonFrames = 4;

std::string fmt(const char *f, auto... args) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, args...);
  return buf;
}

// Control characters in names from binaries must not forge output lines
// (or GitHub workflow commands).
std::string clean(std::string s) {
  for (char &c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return s;
}

std::string stack_lines(const std::vector<NativeFrame> &frames,
                        const std::vector<PythonFrame> &py) {
  std::string out;
  for (size_t i = 0; i < py.size() && i < kPythonFrames; ++i) {
    out += fmt("      #py%zu %s %s:%d\n", i, clean(py[i].function).c_str(),
               clean(py[i].file).c_str(), py[i].line);
  }
  for (size_t i = 0; i < frames.size() && i < kNativeFrames; ++i) {
    const NativeFrame &f = frames[i];
    std::string where = f.file.empty()
                            ? "(" + clean(f.module) + ")"
                            : clean(f.file) + (f.line > 0 ? ":" + std::to_string(f.line) : "");
    out += fmt("      #%zu %s %s\n", i, f.function.empty() ? "??" : clean(f.function).c_str(),
               where.c_str());
  }
  if (frames.size() > kNativeFrames)
    out += fmt("      ... %zu more frame(s)\n", frames.size() - kNativeFrames);
  if (frames.empty() && py.empty()) out += "      <no stack recorded>\n";
  return out;
}

std::string describe(const Report &r, const std::string &path) {
  std::string who = "pid " + std::to_string(r.process.pid);
  if (r.process.rank >= 0) who += ", rank " + std::to_string(r.process.rank);
  return path + " (" + who + ")";
}

// GitHub workflow command escaping (actions/toolkit: escapeData/escapeProperty).
std::string gh_data(const std::string &s) {
  std::string out;
  for (char c : s) {
    if (c == '%')
      out += "%25";
    else if (c == '\r')
      out += "%0D";
    else if (c == '\n')
      out += "%0A";
    else
      out += c;
  }
  return out;
}
std::string gh_property(const std::string &s) {
  std::string out;
  for (char c : gh_data(s)) {
    if (c == ':')
      out += "%3A";
    else if (c == ',')
      out += "%2C";
    else
      out += c;
  }
  return out;
}

// Annotations point into the checkout: GitHub wants workspace-relative paths.
std::string workspace_relative(const std::string &file) {
  const char *ws = std::getenv("GITHUB_WORKSPACE");
  if (!ws || !*ws) return file;
  std::string root = ws;
  if (root.back() != '/') root += '/';
  return file.compare(0, root.size(), root) == 0 ? file.substr(root.size()) : file;
}

std::string annotate(const std::vector<NativeFrame> &frames, const std::vector<PythonFrame> &py,
                     const std::string &message, const char *level = "error") {
  UserFrame u = user_frame(frames, py);
  std::string props;
  if (!u.file.empty()) {
    props = " file=" + gh_property(workspace_relative(u.file));
    if (u.line > 0) props += ",line=" + std::to_string(u.line);
    props += ",title=" + gh_property("torchseal");
  } else {
    props = " title=torchseal";
  }
  return std::string("::") + level + props + "::" + gh_data(clean(message)) + "\n";
}

struct Checked {
  std::string summary_line;  // pass/fail line
  std::string details;       // offending stacks
  std::string annotations;   // GitHub workflow commands, when enabled
  GateVerdict verdict;
};

Checked check_one(const Report &r, const std::string &path, const GateLimits &limits,
                  const Baseline *baseline, bool github) {
  Checked c;
  c.verdict = evaluate_gate(r, limits, baseline);
  const GateVerdict &v = c.verdict;
  std::string extra;
  if (v.excused_leak_sites + v.excused_growth_sites > 0) {
    extra += fmt("; %zu known site(s) excused by the baseline",
                 v.excused_leak_sites + v.excused_growth_sites);
  }
  if (!v.known_grown.empty()) {
    extra += fmt(limits.baseline_max_ratio
                     ? "; %zu known site(s) leaked more than their baseline bytes (within "
                       "--baseline-max-ratio)"
                     : "; %zu known site(s) leaked more than their baseline bytes (noted only: "
                       "see --baseline-max-ratio)",
                 v.known_grown.size());
  }
  if (r.summary.suppressed_bytes > 0) {
    extra += "; " + std::to_string(r.summary.suppressed_bytes) + " byte(s) suppressed";
  }
  if (r.history.present && r.history.truncated) {
    extra += "; from a truncated history (the process crashed or was killed): all that was "
             "live at its last event counts, caches included";
  }
  // Known sites over their baseline bytes: notes under a pass or a fail.
  std::string notes;
  for (size_t k = 0; k < v.known_grown.size() && k < kTopSites; ++k) {
    const KnownGrown &g = v.known_grown[k];
    const LeakEntry &e = r.leaks[g.leak];
    notes += fmt("  note: known site leaked %" PRIu64 " byte(s), baseline %" PRIu64
                 " (%.1fx) (%s, %s):\n",
                 e.bytes, g.baseline_bytes, double(e.bytes) / double(g.baseline_bytes),
                 clean(e.kind).c_str(), clean(e.api).c_str());
    notes += stack_lines(e.frames, e.python_frames);
    if (github) {
      c.annotations += annotate(
          e.frames, e.python_frames,
          fmt("known leak site leaked %" PRIu64 " byte(s), its baseline %" PRIu64 " at ", e.bytes,
              g.baseline_bytes) +
              site_label(e.frames, e.python_frames, 1) + " [" + path + "]",
          "warning");
    }
  }
  if (v.known_grown.size() > kTopSites) {
    notes += fmt("  ... and %zu more known site(s) over their baseline bytes\n",
                 v.known_grown.size() - kTopSites);
  }
  if (v.pass) {
    c.summary_line = "torchseal check: ok " + describe(r, path) + ": " +
                     std::to_string(v.counted_leaked_bytes) + " byte(s) leaked" + extra + "\n";
    c.details = notes;
    return c;
  }
  std::string reasons;
  for (const std::string &why : v.reasons) reasons += (reasons.empty() ? "" : "; ") + why;
  c.summary_line = "torchseal check: FAIL " + describe(r, path) + ": " + reasons + extra + "\n";

  for (size_t k = 0; k < v.leak_offenders.size() && k < kTopSites; ++k) {
    const LeakEntry &e = r.leaks[v.leak_offenders[k]];
    c.details += fmt("  %" PRIu64 " byte(s) in %" PRIu64 " allocation(s) (%s, %s) leaked from:\n",
                     e.bytes, e.allocations, clean(e.kind).c_str(), clean(e.api).c_str());
    c.details += stack_lines(e.frames, e.python_frames);
    if (github) {
      c.annotations +=
          annotate(e.frames, e.python_frames,
                   fmt("%" PRIu64 " byte(s) leaked in %" PRIu64 " allocation(s) (%s, %s) at ",
                       e.bytes, e.allocations, e.kind.c_str(), e.api.c_str()) +
                       site_label(e.frames, e.python_frames, 1) + " [" + path + "]");
    }
  }
  if (v.leak_offenders.size() > kTopSites) {
    c.details += fmt("  ... and %zu more leak site(s)\n", v.leak_offenders.size() - kTopSites);
  }
  for (size_t k = 0; k < v.growth_offenders.size() && k < kTopSites; ++k) {
    const GrowthEntry &g = r.growth[v.growth_offenders[k]];
    c.details += fmt("  growing %.1f byte(s)/step over %" PRIu64 " step(s) (%s, %s) at:\n",
                     g.bytes_per_step, g.steps, clean(g.kind).c_str(), clean(g.api).c_str());
    c.details += stack_lines(g.frames, g.python_frames);
    if (github) {
      c.annotations += annotate(g.frames, g.python_frames,
                                fmt("memory grows %.1f byte(s)/step (%s, %s) at ", g.bytes_per_step,
                                    g.kind.c_str(), g.api.c_str()) +
                                    site_label(g.frames, g.python_frames, 1) + " [" + path + "]");
    }
  }
  if (v.growth_offenders.size() > kTopSites) {
    c.details += fmt("  ... and %zu more growth site(s)\n", v.growth_offenders.size() - kTopSites);
  }
  for (size_t k = 0; k < v.baseline_exceeded.size() && k < kTopSites; ++k) {
    const KnownGrown &g = v.baseline_exceeded[k];
    const LeakEntry &e = r.leaks[g.leak];
    c.details += fmt("  %" PRIu64 " byte(s) (%.1fx the baseline's %" PRIu64
                     ") leaked at a known site (%s, %s):\n",
                     e.bytes, double(e.bytes) / double(g.baseline_bytes), g.baseline_bytes,
                     clean(e.kind).c_str(), clean(e.api).c_str());
    c.details += stack_lines(e.frames, e.python_frames);
    if (github) {
      c.annotations += annotate(
          e.frames, e.python_frames,
          fmt("%" PRIu64 " byte(s) leaked, %.1fx the baseline's %" PRIu64 " at ", e.bytes,
              double(e.bytes) / double(g.baseline_bytes), g.baseline_bytes) +
              site_label(e.frames, e.python_frames, 1) + " [" + path + "]");
    }
  }
  if (v.baseline_exceeded.size() > kTopSites) {
    c.details += fmt("  ... and %zu more known site(s) over the ratio\n",
                     v.baseline_exceeded.size() - kTopSites);
  }
  for (size_t k = 0; k < v.graph_offenders.size() && k < kTopSites; ++k) {
    const GrowthEntry &g = r.growth[v.graph_offenders[k]];
    std::string holder = g.holders.empty() || g.holders[0].chain.empty()
                             ? std::string("?")
                             : clean(g.holders[0].chain.front());
    c.details += fmt("  autograd graph growing %.1f node(s)/step (%" PRIu64 " nodes) held by %s\n",
                     g.graph_nodes_per_step, g.graph_nodes, holder.c_str());
    c.details += stack_lines(g.frames, g.python_frames);
    if (github) {
      c.annotations += annotate(g.frames, g.python_frames,
                                fmt("autograd graph grows %.1f node(s)/step, held by %s, at ",
                                    g.graph_nodes_per_step, holder.c_str()) +
                                    site_label(g.frames, g.python_frames, 1) + " [" + path + "]");
    }
  }
  c.details += notes;
  return c;
}

}  // namespace

void add_gate_flags(CLI::App &cmd, GateFlags &flags, bool with_suppressions) {
  cmd.add_option("--max-leaked-bytes", flags.max_leaked_bytes,
                 "fail when more than N bytes leak (per report, after suppressions and "
                 "baseline; default 0)")
      ->check(CLI::NonNegativeNumber);
  cmd.add_option("--max-growth-bytes-per-step", flags.max_growth_bytes_per_step,
                 "fail when flagged growth sites together grow more than N bytes/step "
                 "(default 0)")
      ->check(CLI::NonNegativeNumber);
  if (with_suppressions) {
    cmd.add_option("--suppressions", flags.suppressions,
                   "file of leak:PATTERN lines; matching sites do not count");
  }
  cmd.add_flag("--fail-on-degraded", flags.fail_on_degraded,
               "also fail a report whose process ran degraded (process.degraded: no line "
               "numbers, short native stacks)");
  CLI::Option *baseline = cmd.add_option(
      "--baseline", flags.baseline, "baseline from `torchseal baseline`: only sites not in it count");
  cmd.add_option("--baseline-max-ratio", flags.baseline_max_ratio,
                 "with --baseline: fail a report where a known leak site leaks more than R "
                 "times the bytes the baseline recorded, whatever --max-leaked-bytes says "
                 "(default: never; noted instead)")
      ->check(CLI::Range(1.0, 1e15))
      ->needs(baseline);
  cmd.add_option("--junit", flags.junit, "also write a JUnit XML file (one testcase per report)");
}

int check_reports(const std::vector<std::string> &paths, const GateFlags &flags) {
  std::string error;
  Baseline baseline;
  if (!flags.baseline.empty() && !read_baseline_file(flags.baseline, baseline, error)) {
    print_error(error);
    return kExitUnusable;
  }
  std::vector<Report> reports;
  if (!load_inputs(paths, flags.suppressions, reports)) return kExitUnusable;
  GateLimits limits;
  if (flags.max_leaked_bytes >= 0) limits.max_leaked_bytes = uint64_t(flags.max_leaked_bytes);
  if (flags.max_growth_bytes_per_step >= 0)
    limits.max_growth_bytes_per_step = flags.max_growth_bytes_per_step;
  limits.fail_on_degraded = flags.fail_on_degraded;
  if (flags.baseline_max_ratio >= 0) limits.baseline_max_ratio = flags.baseline_max_ratio;
  const char *gha = std::getenv("GITHUB_ACTIONS");
  bool github = gha && std::string(gha) == "true";

  bool failed = false;
  std::vector<JUnitCase> cases;
  for (size_t i = 0; i < reports.size(); ++i) {
    Checked c = check_one(reports[i], paths[i], limits,
                          flags.baseline.empty() ? nullptr : &baseline, github);
    std::fputs(c.summary_line.c_str(), stdout);
    std::fputs(c.details.c_str(), stdout);
    std::fputs(c.annotations.c_str(), stdout);
    failed |= !c.verdict.pass;
    JUnitCase jc;
    jc.name = paths[i];
    jc.classname = "torchseal.check";
    jc.failed = !c.verdict.pass;
    for (const std::string &why : c.verdict.reasons)
      jc.message += (jc.message.empty() ? "" : "; ") + why;
    jc.details = c.summary_line + c.details;
    if (!jc.failed) jc.output = c.summary_line + c.details;  // a pass's notes
    cases.push_back(std::move(jc));
  }
  std::fflush(stdout);
  if (!flags.junit.empty() && !write_output(flags.junit, junit_xml("torchseal", cases))) {
    return kExitUnusable;
  }
  return failed ? kExitLimitExceeded : kExitOk;
}

CLI::App *add_check_command(CLI::App &app, CheckOptions &opts) {
  CLI::App *cmd = app.add_subcommand(
      "check", "CI gate: exit 1 when a report leaks more than allowed, with the offending stacks.");
  cmd->add_option("REPORT", opts.reports, "leak reports (P.json) or histories (P.tseal)")
      ->required();
  add_gate_flags(*cmd, opts.gate, true);
  cmd->footer(
      "DESCRIPTION\n"
      "  Checks each REPORT against the limits. Leaks count after suppressions\n"
      "  (--suppressions, LSan syntax `leak:PATTERN`, on top of those applied in the\n"
      "  process) and, with --baseline, only at sites the baseline does not list. A\n"
      "  site matches a baseline site when kind, api and every frame's function and\n"
      "  file name (basename) agree and each frame's line moved by at most 50 lines;\n"
      "  exact lines win, matching is one to one. Addresses and directories are\n"
      "  ignored, so a baseline survives rebuilds and other checkouts. A known site\n"
      "  that leaks more bytes than its baseline recorded is noted (a `note:` line,\n"
      "  a `::warning` annotation); with --baseline-max-ratio R the report fails\n"
      "  once such a site leaks more than R times those bytes.\n"
      "  A failing report prints a FAIL line with the reason and the largest offending\n"
      "  sites (user frame first, Python frames above native ones). With\n"
      "  GITHUB_ACTIONS=true each offending site is also printed as a GitHub\n"
      "  `::error file=F,line=L::` annotation at the user's frame (the innermost\n"
      "  Python frame outside site-packages, else frames[0]).\n\n"
      "OPTIONS\n"
      "  Limits are per report and default to 0 (any leak, any flagged growth fails).\n\n"
      "EXIT STATUS\n"
      "  0 every report within limits; 1 some report over a limit; 2 bad usage or\n"
      "  unusable input (missing or damaged report, bad baseline or suppressions).\n\n"
      "EXAMPLES\n"
      "  torchseal check torchseal-1234.json\n"
      "  torchseal check --baseline leaks-baseline.json --junit leaks.xml out/*.json\n"
      "  torchseal check --max-leaked-bytes 1048576 --suppressions ci.supp run.tseal\n");
  return cmd;
}

int check_command(const CheckOptions &opts) { return check_reports(opts.reports, opts.gate); }

}  // namespace torchseal::cli
