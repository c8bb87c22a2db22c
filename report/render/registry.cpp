// The output formats, one row each. Each row adapts a renderer's own entry
// point to the Renderer interface; the formats themselves live beside this
// file.
#include <cinttypes>
#include <cstdio>

#include "report/input/history_reader.h"
#include "report/render/export_memory_viz.h"
#include "report/render/export_perfetto.h"
#include "report/render/html_report.h"
#include "report/render/renderer.h"
#include "report/render/report_json.h"
#include "report/render/report_text.h"

namespace torchseal {
namespace {

std::string human(uint64_t n) {
  char buf[32];
  if (n >= (1u << 20)) {
    std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(n) / (1 << 20));
  } else if (n >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(n) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%" PRIu64 " B", n);
  }
  return buf;
}

std::string render_text(const RenderRequest &req) { return report_to_text(*req.report); }
std::string render_json(const RenderRequest &req) { return report_to_json(*req.report); }

// The page, plus a live-bytes timeline streamed from the history when the
// source is one (a P.json has no timeline).
std::string render_html(const RenderRequest &req) {
  HtmlReportInput in;
  in.report = req.report;
  in.source = req.source;
  Timeline timeline;
  if (looks_like_history(req.source)) {
    std::string error;
    std::vector<std::string> warnings;
    if (build_timeline(req.source, timeline, error, warnings, 2000, &req.window)) {
      in.timeline = &timeline;
      in.data_json = bands_json(timeline.history, *req.report);
    } else {
      in.no_timeline = "No timeline: " + error;
    }
  } else {
    in.no_timeline = "No timeline: FILE is a report (P.json), not a history (P.tseal).";
  }
  return render_html_report(in);
}

bool memory_viz(const RenderRequest &req, std::string &summary, std::string &error,
                std::vector<std::string> &warnings) {
  MemoryVizOptions mv;
  mv.device = req.device;
  if (req.since >= 0) mv.since = {true, req.since};
  if (req.until >= 0) mv.until = {true, req.until};
  mv.max_entries = req.max_entries;
  mv.window = req.window;
  mv.progress = req.progress;
  ExportStats st;
  if (!export_memory_viz(req.source, req.out_path, mv, st, error, warnings)) return false;
  char line[512];
  std::snprintf(line, sizeof line,
                "wrote %s: %" PRIu64 " trace entries on %d device(s), %" PRIu64
                " live segment(s), %s",
                req.out_path.c_str(), st.entries, st.devices, st.segments, human(st.bytes).c_str());
  summary = line;
  return true;
}

bool perfetto(const RenderRequest &req, std::string &summary, std::string &error,
              std::vector<std::string> &warnings) {
  PerfettoOptions po;
  po.min_slice_bytes = req.min_slice_bytes;
  po.window = req.window;
  po.progress = req.progress;
  ExportStats st;
  if (!export_perfetto(req.source, req.out_path, po, st, error, warnings)) return false;
  char line[512];
  std::snprintf(line, sizeof line, "wrote %s: %" PRIu64 " trace events, %s", req.out_path.c_str(),
                st.entries, human(st.bytes).c_str());
  summary = line;
  return true;
}

constexpr Renderer kRenderers[] = {
    {"text", "LeakSanitizer-style text (P.txt)", RenderInput::Report, render_text, nullptr},
    {"json", "the P.json report (docs/report-format.md)", RenderInput::Report, render_json,
     nullptr},
    {"html", "one self-contained HTML page", RenderInput::Report, render_html, nullptr},
    {"memory-viz", "write a PyTorch memory snapshot (pickle) for pytorch.org/memory_viz",
     RenderInput::History, nullptr, memory_viz},
    {"perfetto", "write a Chrome/Perfetto JSON trace for ui.perfetto.dev", RenderInput::History,
     nullptr, perfetto},
};

}  // namespace

std::span<const Renderer> renderers() { return kRenderers; }

const Renderer *find_renderer(std::string_view name, RenderInput input) {
  for (const Renderer &r : kRenderers) {
    if (r.name == name && r.input == input) return &r;
  }
  return nullptr;
}

}  // namespace torchseal
