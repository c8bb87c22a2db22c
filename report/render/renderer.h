// An output format, and the one registry the CLI picks outputs from
// (registry.cpp). Adding a format means a renderer in report/render/ and one
// row in the registry: `torchseal report --format NAME` then offers every
// report renderer and `torchseal export --NAME OUT` every history renderer,
// with no change to the CLI (docs/contributing.md, "Adding an output format").
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "report/model/report_model.h"

namespace torchseal {

// What a renderer reads.
enum class RenderInput {
  Report,   // one analysed report (from a P.json, or a P.tseal replayed)
  History,  // a P.tseal, streamed through the replay (report/replay/)
};

struct RenderRequest {
  std::string source;              // the FILE argument: a P.json or a P.tseal
  const Report *report = nullptr;  // Report renderers
  std::string out_path;            // History renderers write here
  // History renderers' selection; each takes the fields that apply to it.
  int device = -1;                // -1 = all devices
  double since = -1, until = -1;  // -1 = unset; seconds from start, or unix seconds
  uint64_t max_entries = 0;       // 0 = all
  uint64_t min_slice_bytes = 1u << 20;
  std::function<void(uint64_t, uint64_t)> progress;  // done/total bytes read; may be empty
  HistoryWindow window;  // --from/--to/--steps: the part of a history to read
};

struct Renderer {
  std::string_view name;  // as the CLI spells it
  std::string_view help;  // one line for --help
  RenderInput input;
  // Report renderers: the whole output.
  std::string (*render_report)(const RenderRequest &req) = nullptr;
  // History renderers: writes req.out_path; on success `summary` is the
  // one line the CLI prints. False with a one-line `error` otherwise.
  bool (*render_history)(const RenderRequest &req, std::string &summary, std::string &error,
                         std::vector<std::string> &warnings) = nullptr;
};

std::span<const Renderer> renderers();
// Null when no renderer of that input has that name.
const Renderer *find_renderer(std::string_view name, RenderInput input);

}  // namespace torchseal
