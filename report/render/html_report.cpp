#include "report/render/html_report.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>

#include "report/analysis/shown_frames.h"
#include "report/analysis/site_match.h"
#include "report/render/html_escape.h"
#include "report/render/html_flame.h"
#include "report/render/html_roles.h"
#include "report/render/html_script.h"

namespace torchseal {
namespace {

const char kStyle[] = R"css(
body{font:14px/1.4 system-ui,sans-serif;margin:20px;color:#222;max-width:1200px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:17px;margin:24px 0 8px;border-bottom:1px solid #ddd}
code,.mono{font-family:ui-monospace,monospace;font-size:12px}
table{border-collapse:collapse;width:100%}th,td{border-bottom:1px solid #eee;padding:3px 6px;
text-align:left;vertical-align:top}th{background:#f6f6f6}td.num{text-align:right;white-space:nowrap}
.summary{width:auto}.summary td{border:none;padding:1px 12px 1px 0}.note{color:#666;font-style:italic}
details summary{cursor:pointer;color:#0645ad}ol.stack{margin:4px 0;padding-left:28px}
ol.stack li{font-family:ui-monospace,monospace;font-size:12px}.py{color:#2a6f2a}
.user{font-weight:bold}li.fold{color:#666}.hint{margin-top:4px;color:#8a4b00}.holders{margin-top:4px;color:#234}tr.recovered{color:#777}
svg.timeline,svg.flame{width:100%;height:auto;display:block}
svg.timeline .series{fill:none;stroke-width:1.5}svg .grid{stroke:#eee}
svg .axis{font-size:11px;fill:#555}
svg .m-step{stroke:#bbb;stroke-dasharray:2 3}svg .m-oom{stroke:#d00;stroke-width:2}
svg .m-mark{stroke:#36c}svg .m-dump{stroke:#909;stroke-width:2}svg .m-teardown{stroke:#f80;stroke-width:2}
svg.flame text{font-size:11px;font-family:ui-monospace,monospace;pointer-events:none}
svg.flame rect{stroke:#fff;stroke-width:.5}svg.flame g:hover rect{stroke:#000}
.verdict{font-size:15px;margin:4px 0 8px}table.sites{width:auto}table.sites td{border:none;padding:1px 8px 1px 0}
.legend .key{margin-right:14px;font-size:12px;white-space:nowrap}
.legend i{display:inline-block;width:14px;height:4px;margin-right:4px;vertical-align:middle}
.k-step{background:#bbb}.k-oom{background:#d00}.k-mark{background:#36c}.k-dump{background:#909}.k-teardown{background:#f80}
svg.spark{width:120px;height:28px;vertical-align:middle}svg.spark polyline{fill:none;stroke:#d62728;stroke-width:1.5}
)css";

std::string esc(const std::string &s) { return html_escape(s); }
std::string u64(uint64_t v) { return std::to_string(v); }
std::string device_str(int d) { return d < 0 ? std::string("?") : std::to_string(d); }

std::string user_frame_cell(const std::vector<NativeFrame> &frames,
                            const std::vector<PythonFrame> &py) {
  UserFrame u = user_frame(frames, py);
  if (u.function.empty() && u.file.empty()) {
    if (!frames.empty()) return html_format("<code>0x%" PRIx64 "</code>", frames[0].address);
    return "<span class=\"note\">no stack</span>";
  }
  std::string s = "<code>" + esc(u.function.empty() ? "??" : u.function) + "</code>";
  if (!u.file.empty()) {
    s += " <span class=\"mono\">" + esc(u.file) + (u.line > 0 ? ":" + std::to_string(u.line) : "") +
         "</span>";
  }
  return s;
}

std::string python_li(const PythonFrame &f, const char *cls, const std::string &value) {
  return std::string("<li class=\"") + cls + "\"" + value + ">" +
         esc(f.function.empty() ? "??" : f.function) + " " + esc(f.file.empty() ? "??" : f.file) +
         ":" + std::to_string(f.line) + " [py]</li>";
}

std::string native_li(const NativeFrame &f, const std::string &value) {
  std::string s = "<li" + value + html_format(">0x%" PRIx64 " ", f.address) +
                  esc(f.function.empty() ? "??" : f.function);
  if (!f.file.empty()) s += " " + esc(f.file) + (f.line > 0 ? ":" + std::to_string(f.line) : "");
  return s + " (" + esc(f.module.empty() ? "<unknown module>" : f.module) + ")</li>";
}

std::string value_attr(size_t n) { return " value=\"" + std::to_string(n) + "\""; }

// Python frames first (the user's code), then the native stack. In a
// Python process the user's frame leads and interpreter/framework frames
// fold into an expandable row (shown_frames.h); items keep their numbers.
std::string stack_details(const std::vector<NativeFrame> &frames,
                          const std::vector<PythonFrame> &py, bool python_process) {
  if (frames.empty() && py.empty()) return "<span class=\"note\">no stack recorded</span>";
  std::string s =
      html_format("<details><summary>%zu frame(s)</summary><ol class=\"stack\" start=\"0\">",
                  frames.size() + py.size());
  if (!python_process) {
    for (const PythonFrame &f : py) s += python_li(f, "py", "");
    for (const NativeFrame &f : frames) s += native_li(f, "");
    return s + "</ol></details>";
  }
  const ShownStack shown = shown_stack(frames, py);
  for (size_t i : shown.python) {
    s += python_li(py[i], long(i) == shown.user ? "py user" : "py", value_attr(i));
  }
  for (const NativeRow &row : shown.native) {
    if (!row.folded) {
      s += native_li(frames[row.first], value_attr(py.size() + row.first));
      continue;
    }
    s += "<li class=\"fold\"" + value_attr(py.size() + row.first) + "><details><summary>" +
         esc(folded_label(row.count)) + "</summary><ol class=\"stack\"" +
         html_format(" start=\"%zu\">", py.size() + row.first);
    for (size_t i = row.first; i < row.first + row.count; ++i) s += native_li(frames[i], "");
    s += "</ol></details></li>";
  }
  return s + "</ol></details>";
}

std::string hint_html(const std::optional<Hint> &h) {
  if (!h) return {};
  std::string s = "<div class=\"hint\">hint: " + esc(h->message);
  if (!h->file.empty()) {
    s += " <span class=\"mono\">(" + esc(h->file) +
         (h->line > 0 ? ":" + std::to_string(h->line) : "") + ")</span>";
  }
  return s + "</div>";
}

// Who keeps the block alive (Python processes): one line per holder, root
// first, the largest first; the rest behind a disclosure.
std::string holders_html(const std::vector<Holder> &holders) {
  if (holders.empty()) return {};
  std::string s = "<div class=\"holders\">";
  for (size_t i = 0; i < holders.size(); ++i) {
    const Holder &h = holders[i];
    if (i == 3) s += "<details><summary>" + u64(holders.size() - 3) + " more</summary>";
    std::string chain;
    for (const std::string &step : h.chain) chain += (chain.empty() ? "" : " &rarr; ") + esc(step);
    s += "<div>held by <span class=\"mono\">" + chain + "</span> (" + html_bytes(h.bytes) + ", " +
         u64(h.tensors) + " tensor" + (h.tensors == 1 ? "" : "s") + ")</div>";
  }
  if (holders.size() > 3) s += "</details>";
  return s + "</div>";
}

// Each verdict table shows its first kShownRows rows; the rest wait in a
// <template> at the end of the page until "show all" puts them in. The
// timeline's script comes after the tables, so it runs once the browser has
// parsed a few dozen rows, not all of them (the 1M-event fixture's 1054
// leak rows are 1 MB of HTML).
constexpr size_t kShownRows = 50;

struct LazyRows {
  std::string templates;  // for the end of the page
  size_t tables = 0;
};

// `open` is the table's start tag and header row; each of `rows` is one
// entry's <tr> (or several). What follows the table is the button.
std::string capped_table(const std::string &open, const std::vector<std::string> &rows,
                         LazyRows &lazy) {
  const size_t shown = std::min(rows.size(), kShownRows);
  std::string h = open;
  for (size_t i = 0; i < shown; ++i) h += rows[i];
  h += "</table>\n";
  if (shown == rows.size()) return h;
  const std::string id = "ts-more-" + u64(lazy.tables++);
  h += html_format(
      "<p class=\"more\"><button type=\"button\" data-more=\"%s\">show all %zu</button> "
      "<span class=\"note\">(the first %zu shown)</span></p>\n",
      id.c_str(), rows.size(), shown);
  lazy.templates += "<template id=\"" + id + "\">";
  for (size_t i = shown; i < rows.size(); ++i) lazy.templates += rows[i];
  lazy.templates += "</template>\n";
  return h;
}

std::string header(const HtmlReportInput &in) {
  const Report &r = *in.report;
  const ProcessInfo &p = r.process;
  const Summary &s = r.summary;
  std::string h = "<table class=\"summary\">\n";
  auto row = [&h](const char *k, const std::string &v) {
    h += std::string("<tr><td>") + k + "</td><td>" + v + "</td></tr>\n";
  };
  row("source", "<code>" + esc(in.source) + "</code>");
  row("pid", u64(static_cast<uint64_t>(p.pid)) +
                 (p.hostname.empty() ? "" : " on " + esc(p.hostname)) +
                 (p.rank >= 0 ? ", rank " + std::to_string(p.rank) : ""));
  row("backend", esc(p.backend) + (p.python.empty() ? "" : ", Python " + esc(p.python)));
  row("trigger", esc(r.trigger));
  row("leaked", "<b>" + html_bytes(s.leaked_bytes) + "</b> (" + u64(s.leaked_bytes) +
                    " bytes) in " + u64(s.leaked_allocations) + " allocation(s) at " +
                    u64(s.leak_sites) + " site(s)");
  row("peak live", html_bytes(s.peak_bytes));
  row("events", u64(s.events));
  if (s.suppressed_bytes) row("suppressed", html_bytes(s.suppressed_bytes));
  if (s.cached_bytes) row("cached (not leaked)", html_bytes(s.cached_bytes));
  if (s.reachable_bytes)
    row("reachable (held by Python objects at exit, not leaked)", html_bytes(s.reachable_bytes));
  if (s.library_held_bytes)
    row("library-held (CUDA libraries, for the framework's handles; not leaked)",
        html_bytes(s.library_held_bytes));
  row("growth sites / OOMs / invalid frees",
      u64(r.growth.size()) + " / " + u64(r.ooms.size()) + " / " + u64(r.invalid_frees.size()));
  return h + "</table>\n";
}

// Leaks, or the reachable entries (shaped like leaks).
std::string leaks_table(const Report &r, const std::vector<LeakEntry> &entries, const char *none,
                        LazyRows &lazy) {
  if (entries.empty()) return std::string("<p class=\"note\">") + none + "</p>\n";
  std::vector<const LeakEntry *> v;
  for (const LeakEntry &l : entries) v.push_back(&l);
  std::stable_sort(v.begin(), v.end(),
                   [](const LeakEntry *a, const LeakEntry *b) { return a->bytes > b->bytes; });
  std::vector<std::string> rows;
  for (const LeakEntry *l : v) {
    rows.push_back("<tr><td>" + esc(l->kind) + "</td><td><code>" + esc(l->api) +
                   "</code></td><td>" + device_str(l->device) + "</td><td class=\"num\" title=\"" +
                   u64(l->bytes) + " bytes\">" + html_bytes(l->bytes) + "</td><td class=\"num\">" +
                   u64(l->allocations) + "</td><td>" + esc(l->detected_at) + "</td><td>" +
                   user_frame_cell(l->frames, l->python_frames) + holders_html(l->holders) +
                   "</td><td>" +
                   stack_details(l->frames, l->python_frames, is_python_site(r, l->python_frames)) +
                   "</td></tr>\n");
  }
  return capped_table(
      "<table class=\"leaks\"><tr><th>kind</th><th>api</th><th>device</th><th>bytes</th>"
      "<th>allocations</th><th>detected at</th><th>user frame</th><th>stack</th></tr>\n",
      rows, lazy);
}

// The growth entry holds only the fit: draw bytes_per_step * step.
std::string sparkline(const GrowthEntry &g) {
  const double w = 120, h = 28;
  double steps = std::max<double>(1, static_cast<double>(g.steps));
  double end = g.bytes_per_step * steps;
  double top = std::max(std::fabs(end), 1.0);
  auto y = [&](double v) { return h - 2 - (v / top) * (h - 4) * (end >= 0 ? 1 : -1); };
  double y0 = end >= 0 ? y(0) : 2, y1 = end >= 0 ? y(end) : h - 2;
  return html_format(
      "<svg class=\"spark\" viewBox=\"0 0 %.0f %.0f\"><title>fitted: %.0f "
      "bytes/step over %.0f steps</title><polyline points=\"0,%.1f %.0f,%.1f\"/>"
      "</svg>",
      w, h, g.bytes_per_step, steps, y0, w, y1);
}

std::string growth_table(const Report &r, LazyRows &lazy) {
  if (r.growth.empty()) return "<p class=\"note\">No growing sites.</p>\n";
  std::vector<std::string> rows;
  for (const GrowthEntry &g : r.growth) {
    rows.push_back("<tr><td>" + sparkline(g) + "</td><td class=\"num\">" +
                   html_format("%.0f", g.bytes_per_step) + "</td><td class=\"num\">" +
                   (g.growth_bytes < 0 ? "-" + html_bytes(static_cast<uint64_t>(-g.growth_bytes))
                                       : html_bytes(static_cast<uint64_t>(g.growth_bytes))) +
                   "</td><td class=\"num\">" + u64(g.steps) + "</td><td class=\"num\">" +
                   html_format("%.3f", g.r) + "</td><td>" + esc(g.kind) + "</td><td><code>" +
                   esc(g.api) + "</code></td><td>" + user_frame_cell(g.frames, g.python_frames) +
                   hint_html(g.hint) + holders_html(g.holders) + "</td><td>" +
                   stack_details(g.frames, g.python_frames, is_python_site(r, g.python_frames)) +
                   "</td></tr>\n");
  }
  return capped_table(
             "<table class=\"growth\"><tr><th>trend (fitted)</th><th>bytes/step</th>"
             "<th>growth</th><th>steps</th><th>r</th><th>kind</th><th>api</th><th>user frame</th>"
             "<th>stack</th></tr>\n",
             rows, lazy) +
         "<p class=\"note\">Sparklines draw the fitted line "
         "(bytes/step &times; step), not measured samples.</p>\n";
}

std::string oom_row(const Report &r, const OomEntry &o) {
  std::string h =
      std::string("<tr") + (o.recovered ? " class=\"recovered\"" : "") + "><td><code>" +
      esc(o.api) + "</code>" +
      (o.recovered ? "<br><span class=\"note\">recovered: the retry succeeded; the "
                     "program saw no error</span>"
                   : "") +
      "</td><td>" + device_str(o.device) + "</td><td class=\"num\">" +
      html_bytes(o.requested_bytes) + "</td><td class=\"num\">" + html_bytes(o.live_bytes) +
      "</td><td>" + user_frame_cell(o.frames, o.python_frames) + hint_html(o.hint) +
      holders_html(o.holders) + "</td><td>" +
      stack_details(o.frames, o.python_frames, is_python_site(r, o.python_frames)) + "</td></tr>\n";
  if (o.recovered || o.top_sites.empty()) return h;
  // What filled the device: the largest live sites at the failure.
  h += "<tr class=\"top-sites\"><td></td><td colspan=\"5\"><b>largest live sites at the "
       "failure</b><table class=\"sites\">";
  for (size_t i = 0; i < o.top_sites.size() && i < 5; ++i) {
    const SiteTotal &t = o.top_sites[i];
    h += "<tr><td class=\"num\">" + html_bytes(t.bytes) + "</td><td class=\"num\">" +
         u64(t.allocations) + " alloc.</td><td>" + user_frame_cell(t.frames, t.python_frames) +
         "</td><td>" +
         stack_details(t.frames, t.python_frames, is_python_site(r, t.python_frames)) +
         "</td></tr>";
  }
  return h + "</table></td></tr>\n";
}

// Unrecovered OOMs first: they are what crashed the program.
std::string ooms_table(const Report &r, LazyRows &lazy) {
  std::vector<std::string> rows;
  for (bool recovered : {false, true}) {
    for (const OomEntry &o : r.ooms) {
      if (o.recovered == recovered) rows.push_back(oom_row(r, o));
    }
  }
  return "<h2>Out-of-memory failures (" + u64(r.ooms.size()) + ")</h2>\n" +
         capped_table(
             "<table class=\"ooms\"><tr><th>api</th><th>device</th><th>requested</th>"
             "<th>live</th><th>where</th><th>stack</th></tr>\n",
             rows, lazy);
}

std::string invalid_frees_table(const Report &r) {
  std::string h =
      "<h2>Invalid frees</h2>\n<table><tr><th>api</th><th>address</th><th>where</th>"
      "<th>stack</th></tr>\n";
  for (const InvalidFreeEntry &f : r.invalid_frees) {
    h += "<tr><td><code>" + esc(f.api) + "</code></td><td><code>" +
         html_format("0x%" PRIx64, f.address) + "</code></td><td>" +
         user_frame_cell(f.frames, f.python_frames) + "</td><td>" +
         stack_details(f.frames, f.python_frames, is_python_site(r, f.python_frames)) +
         "</td></tr>\n";
  }
  return h + "</table>\n";
}

// One line under the title: the whole verdict before any detail.
std::string verdict_line(const Report &r) {
  size_t unrecovered = 0;
  for (const OomEntry &o : r.ooms) unrecovered += o.recovered ? 0 : 1;
  const Summary &s = r.summary;
  return "<p class=\"verdict\">" + u64(r.growth.size()) + " growing site(s), " + u64(unrecovered) +
         " unrecovered OOM(s), <b>" + html_bytes(s.leaked_bytes) + "</b> leaked in " +
         u64(s.leaked_allocations) + " allocation(s) at " + u64(s.leak_sites) + " site(s), " +
         html_bytes(s.reachable_bytes) + " reachable at exit; peak " + html_bytes(s.peak_bytes) +
         ".</p>\n";
}

}  // namespace

std::string render_html_report(const HtmlReportInput &in) {
  const Report &r = *in.report;
  const bool script = in.timeline && !in.data_json.empty();
  LazyRows lazy;
  std::string h;
  std::string argv;
  for (const std::string &a : r.process.argv) argv += (argv.empty() ? "" : " ") + a;
  h += "<h1>torchseal report: " + esc(argv.empty() ? "(unknown program)" : argv) + "</h1>\n";
  // The verdict first (issue 19): growth, then unrecovered OOMs, then leaks,
  // then what Python still held; the timeline and the details after it.
  h += verdict_line(r);
  h += "<h2>Growing sites (" + u64(r.growth.size()) + ")</h2>\n" + growth_table(r, lazy);
  if (!r.ooms.empty()) h += ooms_table(r, lazy);
  h += "<h2>Leaks (" + u64(r.leaks.size()) + ")</h2>\n" +
       leaks_table(r, r.leaks, "No leaks detected.", lazy);
  if (!r.reachable.empty()) {
    h += "<h2>Reachable at exit (" + u64(r.reachable.size()) +
         "): held by Python objects, not leaks</h2>\n" + leaks_table(r, r.reachable, "", lazy);
  }
  if (!r.library_held.empty()) {
    h += "<h2>Held by CUDA libraries (" + u64(r.library_held.size()) +
         "): for the framework's handles, not leaks</h2>\n" +
         leaks_table(r, r.library_held, "", lazy);
  }
  const std::string roles = roles_html(r);
  h += roles;
  h += "<h2>Memory over the run</h2>\n";
  if (in.timeline) {
    if (script) {
      h += "<div id=\"ts-timeline\"></div>\n<h2>Live memory at a moment (by stack, root on "
           "top)</h2>\n<div id=\"ts-live\"></div>\n";
      if (!r.growth.empty()) {
        h += "<h2>Growth per site over steps (dots: live bytes at each step; line: the fitted "
             "slope)</h2>\n<div id=\"ts-growth-chart\"></div>\n";
      }
      // Here, not at the end: the script then draws before the browser has
      // parsed the long static parts below.
      h += "<script type=\"application/json\" id=\"ts-data\">" + in.data_json +
           "</script>\n<script>" + kHtmlScript + "</script>\n";
    }
    h += "<details" + std::string(script ? "" : " open") +
         "><summary>Live bytes per device and kind</summary>\n" + timeline_html(*in.timeline) +
         "</details>\n";
  } else {
    h += "<p class=\"note\" id=\"no-timeline\">" + esc(in.no_timeline) + "</p>\n";
  }
  h += "<h2>Leaked bytes by stack (flame graph, root on top)</h2>\n" +
       flame_html(r.leaks, !r.process.python.empty());
  if (!r.invalid_frees.empty()) h += invalid_frees_table(r);
  h += "<h2>Run</h2>\n" + header(in);
  if (lazy.tables) h += lazy.templates + "<script>" + kHtmlRowsScript + "</script>\n";
  const bool any_script = script || lazy.tables;
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
         "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
         "style-src 'unsafe-inline'" +
         std::string(any_script ? "; script-src 'unsafe-inline'" : "") +
         "\">\n<title>torchseal report, pid " + u64(static_cast<uint64_t>(r.process.pid)) +
         "</title>\n<style>" + kStyle + kHtmlScriptStyle + (roles.empty() ? "" : kRolesStyle) +
         "</style></head><body>\n" + h + "</body></html>\n";
}

}  // namespace torchseal
