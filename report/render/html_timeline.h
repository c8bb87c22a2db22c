// Live-bytes timeline for the HTML report: one streaming pass over a .tseal
// history, live bytes tracked per (device, kind), down-sampled to at most
// `max_points` time buckets per series (the bucket width doubles whenever
// the trace outgrows them; each bucket keeps the max and the last value).
// Steps, OOMs, marks, dumps and teardowns become markers, bucketed the same way.
// The SVG's memory is bounded by the live allocations plus O(max_points) per
// series; `history` keeps every allocation's lifetime (40 bytes each).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/model/event.h"
#include "common/model/history_window.h"
#include "report/render/html_bands.h"

namespace torchseal {

struct TimelinePoint {
  uint64_t bucket = 0;
  uint64_t max = 0;   // highest live bytes seen in the bucket
  uint64_t last = 0;  // live bytes at the end of the bucket
};

struct TimelineSeries {
  int device = -1;
  std::string kind;  // family_name()
  uint64_t peak = 0;
  std::vector<TimelinePoint> points;  // bucket ascending
};

struct TimelineMarker {
  uint64_t bucket = 0;
  Op op = Op::Step;    // Step, OomFail, Mark, Dump or Teardown
  uint64_t count = 0;  // events of this op merged into the bucket
  uint64_t value = 0;  // last step number / mark label id / OOM request size
  std::string label;   // Mark, Dump: the labels / triggers merged into the bucket
};

struct Timeline {
  uint64_t t0 = 0, t_end = 0;  // CLOCK_MONOTONIC ns of the first and last event
  uint64_t bucket_ns = 1024;
  uint64_t events = 0;
  std::vector<TimelineSeries> series;   // by (device, kind)
  std::vector<TimelineMarker> markers;  // by op, then bucket
  BandHistory history;                  // every allocation's lifetime, for the page's script
  uint64_t buckets() const { return t_end >= t0 ? (t_end - t0) / bucket_ns + 1 : 1; }
};

// `window`: only that part of the run (--from/--to/--steps).
bool build_timeline(const std::string &history_path, Timeline &out, std::string &error,
                    std::vector<std::string> &warnings, size_t max_points = 2000,
                    const HistoryWindow *window = nullptr);

// Inline SVG (plus legend) for the page.
std::string timeline_html(const Timeline &t);

}  // namespace torchseal
