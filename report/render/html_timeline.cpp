#include "report/render/html_timeline.h"

#include <algorithm>
#include <map>
#include <utility>

#include "report/render/html_escape.h"
#include "report/replay/replay.h"

namespace torchseal {
namespace {

using SeriesKey = std::pair<int16_t, Family>;

class TimelineObserver : public ReplayObserver {
 public:
  TimelineObserver(Timeline &t, size_t max_points) : t_(t), max_(std::max<size_t>(max_points, 2)) {}

  void on_process(const ProcessInfo &p, double) override { h_.python = !p.python.empty(); }
  void on_modules(const std::vector<Module> &m) override { h_.modules = m; }
  void on_stack(StackId id, std::vector<uint64_t> &&ips) override {
    h_.stacks[id] = std::move(ips);
  }
  void on_pystack(PyStackId id, std::vector<PyFrame> &&f) override {
    h_.pystacks[id] = std::move(f);
  }
  void on_symbol(uint64_t ip, std::vector<NativeFrame> &&f) override {
    h_.symbols[ip] = std::move(f);
  }

  void on_event(const Event &e) override {
    ++t_.events;
    moment(e);
    if (!started_) {
      t_.t0 = e.time_ns;
      started_ = true;
    }
    t_.t_end = std::max(t_.t_end, e.time_ns);
    switch (e.op) {
      case Op::Teardown:
        marker(e, e.device < 0 ? 0 : static_cast<uint64_t>(e.device));
        break;
      case Op::Step:
        marker(e, e.size & ~kWindowStepBit);
        break;
      case Op::OomFail:
        marker(e, e.size);
        break;
      case Op::Mark:
        marker(e, e.size, replay_->label(e.size));
        break;
      case Op::Dump:
        marker(e, e.size, std::string(dump_trigger_name(e.size)));
        break;
      default:
        break;  // allocations below; VMM map/unmap/reserve: address space, not memory
    }
  }

  uint64_t on_alloc(const Event &e) override {
    BandAlloc b;
    static_cast<LiveAlloc &>(b) = live_alloc_of(e);
    b.t0 = e.time_ns;
    h_.allocs.push_back(b);
    uint64_t &v = live_[{e.device, e.family}];
    v += e.size;
    record(e.device, e.family, v, e.time_ns);
    return h_.allocs.size() - 1;
  }

  void on_release(const Event &e, const ReplayRecord &r) override {
    const Event &a = r.alloc;
    if (r.tag < h_.allocs.size()) h_.allocs[r.tag].t1 = std::max<uint64_t>(e.time_ns, 1);
    uint64_t &v = live_[{a.device, a.family}];
    v = v >= a.size ? v - a.size : 0;
    record(a.device, a.family, v, e.time_ns);
  }

  void finish() {
    h_.t0 = t_.t0;
    h_.t_end = t_.t_end;
    for (auto &[key, s] : series_) {
      TimelineSeries out = std::move(s);
      out.device = key.first;
      out.kind = std::string(family_name(key.second));
      t_.series.push_back(std::move(out));
    }
    for (auto &[op, v] : markers_) t_.markers.insert(t_.markers.end(), v.begin(), v.end());
  }

 private:
  // Bucket of time `ns`, coarsening first if it would be out of range.
  uint64_t bucket(uint64_t ns) {
    uint64_t rel = ns >= t_.t0 ? ns - t_.t0 : 0;
    while (rel / t_.bucket_ns >= max_) coarsen();
    return rel / t_.bucket_ns;
  }

  void coarsen() {
    t_.bucket_ns *= 2;
    for (auto &kv : series_) {
      auto &pts = kv.second.points;
      size_t w = 0;
      for (size_t i = 0; i < pts.size(); ++i) {
        TimelinePoint p = pts[i];
        p.bucket /= 2;
        if (w > 0 && pts[w - 1].bucket == p.bucket) {
          pts[w - 1].max = std::max(pts[w - 1].max, p.max);
          pts[w - 1].last = p.last;
        } else {
          pts[w++] = p;
        }
      }
      pts.resize(w);
    }
    for (auto &kv : markers_) {
      auto &ms = kv.second;
      size_t w = 0;
      for (size_t i = 0; i < ms.size(); ++i) {
        TimelineMarker m = ms[i];
        m.bucket /= 2;
        if (w > 0 && ms[w - 1].bucket == m.bucket) {
          ms[w - 1].count += m.count;
          ms[w - 1].value = m.value;
          merge_label(ms[w - 1].label, m.label);
        } else {
          ms[w++] = m;
        }
      }
      ms.resize(w);
    }
  }

  void record(int16_t device, Family f, uint64_t value, uint64_t ns) {
    uint64_t b = bucket(ns);
    TimelineSeries &s = series_[{device, f}];
    s.peak = std::max(s.peak, value);
    if (s.points.empty() || s.points.back().bucket != b) {
      s.points.push_back({b, value, value});
    } else {
      s.points.back().max = std::max(s.points.back().max, value);
      s.points.back().last = value;
    }
  }

  // Marks merged into one bucket keep every label, up to a readable length.
  static void merge_label(std::string &into, const std::string &more) {
    if (!more.empty() && into.size() < 200) into += ", " + more;
  }

  void marker(const Event &e, uint64_t value, std::string label = {}) {
    uint64_t b = bucket(e.time_ns);
    auto &ms = markers_[e.op];
    if (!ms.empty() && ms.back().bucket == b) {
      ++ms.back().count;
      ms.back().value = value;
      merge_label(ms.back().label, label);
    } else {
      ms.push_back({b, e.op, 1, value, std::move(label)});
    }
  }

  // Exact times for the page's axis (the SVG's markers are bucketed).
  void moment(const Event &e) {
    switch (e.op) {
      case Op::Step:
        ((e.size & kWindowStepBit) ? h_.windows : h_.steps)
            .emplace_back(e.time_ns, e.size & ~kWindowStepBit);
        break;
      case Op::OomFail:
        h_.moments.push_back({e.time_ns, "OOM: " + html_bytes(e.size) + " requested", 'o'});
        break;
      case Op::Mark:
        h_.moments.push_back({e.time_ns, "mark " + replay_->label(e.size), 'm'});
        break;
      case Op::Teardown:
        h_.moments.push_back({e.time_ns, "context teardown", 't'});
        break;
      case Op::Dump:
        h_.moments.push_back(
            {e.time_ns, "dump (" + std::string(dump_trigger_name(e.size)) + ")", 'd'});
        break;
      default:
        break;
    }
  }

  Timeline &t_;
  BandHistory &h_ = t_.history;
  size_t max_;
  bool started_ = false;
  std::map<SeriesKey, uint64_t> live_;
  std::map<SeriesKey, TimelineSeries> series_;
  std::map<Op, std::vector<TimelineMarker>> markers_;
};

constexpr double kW = 1100, kH = 260, kLeft = 80, kTop = 10, kBottom = 30;
const char *const kColors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e",
                               "#8c564b", "#e377c2", "#17becf", "#bcbd22", "#7f7f7f"};

std::string device_label(int d) { return d < 0 ? "host" : "cuda:" + std::to_string(d); }

std::string seconds(double s) {
  if (s == 0) return "0 s";
  if (s < 1e-3) return html_format("%.1f us", s * 1e6);
  if (s < 1) return html_format("%.2f ms", s * 1e3);
  return html_format(s < 10 ? "%.3f s" : "%.1f s", s);
}

}  // namespace

bool build_timeline(const std::string &history_path, Timeline &out, std::string &error,
                    std::vector<std::string> &warnings, size_t max_points,
                    const HistoryWindow *window) {
  out = Timeline{};
  TimelineObserver timeline(out, max_points);
  Replay replay(timeline);
  if (!replay_file(history_path, replay, window, error, warnings)) return false;
  timeline.finish();
  return true;
}

std::string timeline_html(const Timeline &t) {
  std::string h;
  if (t.series.empty()) {
    return "<p class=\"note\">The history records no allocations: no timeline to draw.</p>\n";
  }
  const double nb = static_cast<double>(t.buckets());
  const double span_s = static_cast<double>(t.t_end - t.t0) / 1e9;
  const double plot_w = kW - kLeft - 10, plot_h = kH - kTop - kBottom;
  uint64_t peak = 1;
  for (const auto &s : t.series) peak = std::max(peak, s.peak);
  auto x_of = [&](double bucket) { return kLeft + bucket / nb * plot_w; };
  auto y_of = [&](uint64_t v) {
    return kTop + plot_h - static_cast<double>(v) / static_cast<double>(peak) * plot_h;
  };

  h += html_format(
      "<svg class=\"timeline\" viewBox=\"0 0 %.0f %.0f\" role=\"img\" "
      "aria-label=\"live bytes over time\">\n",
      kW, kH);
  // Axes and grid: 4 horizontal lines, 5 time ticks.
  for (int i = 0; i <= 4; ++i) {
    uint64_t v = peak / 4 * static_cast<uint64_t>(i);
    double y = y_of(v);
    h += html_format(
        "<line class=\"grid\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\"/>"
        "<text class=\"axis\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%s</text>\n",
        kLeft, y, kLeft + plot_w, y, kLeft - 4, y + 4, html_bytes(v).c_str());
  }
  for (int i = 0; i <= 5; ++i) {
    double x = kLeft + plot_w * i / 5;
    h +=
        html_format("<text class=\"axis\" x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%s</text>\n",
                    x, kH - 10, seconds(span_s * i / 5).c_str());
  }
  // Markers under the lines.
  for (const TimelineMarker &m : t.markers) {
    double x = x_of(static_cast<double>(m.bucket) + 0.5);
    const char *cls = "step";
    std::string title;
    std::string n = m.count > 1 ? html_format(" (%llu in this interval)",
                                              static_cast<unsigned long long>(m.count))
                                : std::string();
    switch (m.op) {
      case Op::Step:
        title = "step " + std::to_string(m.value) + n;
        break;
      case Op::OomFail:
        cls = "oom";
        title = "OOM: " + html_bytes(m.value) + " requested" + n;
        break;
      case Op::Mark:
        cls = "mark";
        title = "mark " + m.label + n;
        break;
      case Op::Dump:
        cls = "dump";
        title = "dump (" + m.label + ")" + n;
        break;
      default:
        cls = "teardown";
        title = "context teardown, device " + std::to_string(m.value) + n;
        break;
    }
    h += html_format(
        "<line class=\"m-%s\" x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\">"
        "<title>%s at %s</title></line>\n",
        cls, x, kTop, x, kTop + plot_h, html_escape(title).c_str(),
        seconds(static_cast<double>(m.bucket) * static_cast<double>(t.bucket_ns) / 1e9).c_str());
  }
  // One step line per series: rise to the bucket's max, end at its last value.
  std::string legend;
  for (size_t i = 0; i < t.series.size(); ++i) {
    const TimelineSeries &s = t.series[i];
    const char *color = kColors[i % (sizeof kColors / sizeof kColors[0])];
    std::string name = device_label(s.device) + " " + s.kind;
    std::string pts = html_format("%.1f,%.1f", kLeft, y_of(0));
    uint64_t prev = 0;
    for (const TimelinePoint &p : s.points) {
      double x0 = x_of(static_cast<double>(p.bucket)), x1 = x_of(static_cast<double>(p.bucket) + 1);
      pts += html_format(" %.1f,%.1f %.1f,%.1f %.1f,%.1f", x0, y_of(prev), x0, y_of(p.max), x1,
                         y_of(p.last));
      prev = p.last;
    }
    pts += html_format(" %.1f,%.1f", kLeft + plot_w, y_of(prev));
    h += html_format(
        "<polyline class=\"series\" stroke=\"%s\" points=\"%s\">"
        "<title>%s: peak %s</title></polyline>\n",
        color, pts.c_str(), html_escape(name).c_str(), html_bytes(s.peak).c_str());
    legend +=
        html_format("<span class=\"key\"><i style=\"background:%s\"></i>%s (peak %s)</span>\n",
                    color, html_escape(name).c_str(), html_bytes(s.peak).c_str());
  }
  h += "</svg>\n<div class=\"legend\">" + legend +
       "<span class=\"key\"><i class=\"k-step\"></i>step</span>"
       "<span class=\"key\"><i class=\"k-oom\"></i>OOM</span>"
       "<span class=\"key\"><i class=\"k-mark\"></i>mark</span>"
       "<span class=\"key\"><i class=\"k-dump\"></i>dump</span>"
       "<span class=\"key\"><i class=\"k-teardown\"></i>teardown</span></div>\n";
  h += html_format(
      "<p class=\"note\">%llu events over %s, %.0f buckets of %s each (max per "
      "bucket shown).</p>\n",
      static_cast<unsigned long long>(t.events), seconds(span_s).c_str(), nb,
      t.bucket_ns >= 1000000 ? html_format("%.3g ms", t.bucket_ns / 1e6).c_str()
                             : html_format("%.3g us", t.bucket_ns / 1e3).c_str());
  return h;
}

}  // namespace torchseal
