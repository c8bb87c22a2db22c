// `torchseal export --perfetto`: a .tseal history as a Chrome/Perfetto JSON
// trace (ui.perfetto.dev, chrome://tracing).
//
//   {"traceEvents": [...], "displayTimeUnit": "ns"}
//
//   * Counters ("ph":"C"): live bytes, one track per (device, kind), named
//     "live bytes cuda:D KIND" ("host" for host-pinned memory recorded without
//     a device), updated at every allocation and free of that kind.
//   * Instants ("ph":"i", "s":"g"): OOMs, steps, marks, invalid frees and
//     context teardowns.
//   * Async slices ("ph":"b"/"e", "cat":"allocation", unique "id"): the
//     lifetime of every allocation of at least `min_slice_bytes`; one still
//     live at the end closes at the last event's timestamp.
//
// `ts` is microseconds (float, ns precision) since the first event, so every
// track is monotone: events arrive in time order and end-of-trace closings
// use the last timestamp. One read pass; memory is bounded by the live
// allocations, the output is streamed.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "report/render/export_memory_viz.h"

namespace torchseal {

struct PerfettoOptions {
  uint64_t min_slice_bytes = 1u << 20;
  HistoryWindow window;  // only this part of the run
  std::function<void(uint64_t, uint64_t)> progress;
};

bool export_perfetto(const std::string &history_path, const std::string &out_path,
                     const PerfettoOptions &opts, ExportStats &stats, std::string &error,
                     std::vector<std::string> &warnings);

}  // namespace torchseal
