#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "report/analysis/growth.h"

using namespace torchseal;

namespace {

constexpr double KiB = 1024, MiB = 1024 * 1024;

std::vector<double> series(size_t n, const std::function<double(size_t)> &f) {
  std::vector<double> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = f(i);
  return v;
}

GrowthFit fit(const std::vector<double> &y) { return fit_series(y, GrowthOptions{}); }

}  // namespace

TEST_CASE("warm-up exclusion scales with the run", "[growth]") {
  GrowthOptions o;
  CHECK(growth_warmup_steps(0, o) == 2);
  CHECK(growth_warmup_steps(10, o) == 2);
  CHECK(growth_warmup_steps(30, o) == 6);
  CHECK(growth_warmup_steps(101, o) == 21);
  o.warmup_min_steps = 0;
  o.warmup_fraction = 0;
  CHECK(growth_warmup_steps(30, o) == 0);
  o.warmup_fraction = 7;  // nonsense is clamped, not trusted
  CHECK(growth_warmup_steps(30, o) == 30);
}

TEST_CASE("a monotone leak is flagged with its rate", "[growth]") {
  auto y = series(30, [](size_t i) { return 64 * MiB + double(i + 1) * MiB; });
  GrowthFit f = fit(y);
  CHECK(f.verdict == GrowthVerdict::Flagged);
  CHECK(f.flagged);
  CHECK(f.first == 6);
  CHECK(f.steps == 24);
  CHECK(f.slope == Approx(MiB));
  CHECK(f.r == Approx(1.0));
  CHECK(f.growth_bytes == Approx(23 * MiB));
}

TEST_CASE("a slow leak, one allocation every 3 steps, is flagged over 30 steps", "[growth]") {
  for (double size : {512.0, 2 * MiB}) {
    for (size_t phase = 0; phase < 3; ++phase) {
      auto y = series(30, [&](size_t i) { return size * double((i + phase) / 3); });
      GrowthFit f = fit(y);
      INFO("size " << size << " phase " << phase << " verdict " << growth_verdict_name(f.verdict)
                   << " r " << f.r << " tail " << f.tail_slope);
      CHECK(f.flagged);
      CHECK(f.slope == Approx(size / 3).epsilon(0.05));
      CHECK(f.r > 0.98);
    }
  }
}

TEST_CASE("noisy allocation sizes with steady growth are flagged", "[growth]") {
  // Each step keeps one tensor of a random size, and a random amount of
  // transient memory happens to be live at each boundary.
  for (unsigned seed = 1; seed <= 25; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<double> kept(256 * KiB, 1 * MiB), transient(0, 2 * MiB);
    double held = 0;
    auto y = series(40, [&](size_t) {
      held += kept(rng);
      return held + transient(rng);
    });
    GrowthFit f = fit(y);
    INFO("seed " << seed << " verdict " << growth_verdict_name(f.verdict) << " r " << f.r);
    CHECK(f.flagged);
    CHECK(f.slope == Approx(640 * KiB).epsilon(0.2));
  }
}

TEST_CASE("a cache that warms for 5 steps then plateaus is not flagged", "[growth]") {
  auto y = series(30, [](size_t i) { return double(std::min<size_t>(i + 1, 5)) * 20 * MiB; });
  GrowthFit f = fit(y);
  CHECK_FALSE(f.flagged);
  CHECK(f.verdict == GrowthVerdict::NotGrowing);
}

TEST_CASE("a warm-up longer than the exclusion, then a plateau, is not flagged", "[growth]") {
  SECTION("10 of 30 steps") {
    auto y = series(30, [](size_t i) { return double(std::min<size_t>(i + 1, 10)) * 2 * MiB; });
    GrowthFit f = fit(y);
    CHECK_FALSE(f.flagged);
    CHECK(f.slope > 0);  // the line through it does rise...
  }
  SECTION("20 of 30 steps: the line fits well, only the flat tail gives it away") {
    auto y = series(30, [](size_t i) { return double(std::min<size_t>(i + 1, 20)) * 2 * MiB; });
    GrowthFit f = fit(y);
    CHECK(f.r > 0.875);  // a Ray-style fit alone would flag this
    CHECK(f.verdict == GrowthVerdict::Plateaued);
    CHECK_FALSE(f.flagged);
  }
  SECTION("a cache approaching its size exponentially") {
    auto y = series(40, [](size_t i) { return 512 * MiB * (1 - std::exp(-double(i + 1) / 4)); });
    CHECK_FALSE(fit(y).flagged);
  }
  SECTION("a plateau with noise at the boundaries") {
    for (unsigned seed = 1; seed <= 25; ++seed) {
      std::mt19937 rng(seed);
      std::uniform_real_distribution<double> transient(0, 4 * MiB);
      auto y = series(30, [&](size_t i) {
        return double(std::min<size_t>(i + 1, 12)) * 8 * MiB + transient(rng);
      });
      INFO("seed " << seed);
      CHECK_FALSE(fit(y).flagged);
    }
  }
}

TEST_CASE("a sawtooth freed within each step is not flagged", "[growth]") {
  SECTION("the same bytes live at every boundary") {
    auto y = series(30, [](size_t) { return 256 * MiB; });
    GrowthFit f = fit(y);
    CHECK(f.verdict == GrowthVerdict::NotGrowing);
    CHECK(f.r == 0);
  }
  SECTION("a boundary that sometimes falls mid-step") {
    auto y = series(30, [](size_t i) { return i % 2 ? 256 * MiB : 0.0; });
    CHECK_FALSE(fit(y).flagged);
  }
}

TEST_CASE("a site freed late in the run is not flagged", "[growth]") {
  SECTION("freed at step 24 of 30") {
    auto y = series(30, [](size_t i) { return i < 24 ? double(i + 1) * MiB : 0.0; });
    CHECK_FALSE(fit(y).flagged);
  }
  SECTION("freed at the last step") {
    auto y = series(30, [](size_t i) { return i < 29 ? double(i + 1) * MiB : 0.0; });
    GrowthFit f = fit(y);
    CHECK_FALSE(f.flagged);
  }
}

TEST_CASE("too few steps after warm-up are never flagged", "[growth]") {
  auto leak = [](size_t i) { return double(i + 1) * MiB; };
  CHECK(fit(series(0, leak)).verdict == GrowthVerdict::TooFewSteps);
  CHECK(fit(series(1, leak)).verdict == GrowthVerdict::TooFewSteps);
  GrowthFit short_run = fit(series(9, leak));
  CHECK(short_run.verdict == GrowthVerdict::TooFewSteps);
  CHECK(short_run.steps == 7);
  CHECK(fit(series(10, leak)).flagged);  // the shortest run the defaults judge
  // What `torchseal attach` compares a short window's steps with.
  GrowthOptions o;
  CHECK(min_samples_for_growth(o) == 10);
  for (size_t n : {size_t{9}, min_samples_for_growth(o)})
    CHECK((fit(series(n, leak)).verdict != GrowthVerdict::TooFewSteps) ==
          (n >= min_samples_for_growth(o)));
  o.warmup_fraction = 0.5;
  CHECK(min_samples_for_growth(o) == 16);
  o.warmup_fraction = 1;  // nothing is ever left: bounded, not a hang
  CHECK(min_samples_for_growth(o) >= (1u << 20));
}

TEST_CASE("growth under the floor is not flagged; the floor is an option", "[growth]") {
  auto y = series(30, [](size_t i) { return 4 * MiB + double(i) * 40; });  // 920 B fitted growth
  GrowthFit f = fit(y);
  CHECK(f.verdict == GrowthVerdict::BelowFloor);
  CHECK(f.growth_bytes == Approx(920));
  GrowthOptions o;
  o.min_growth_bytes = 512;
  CHECK(fit_series(y, o).flagged);
}

TEST_CASE("the slope/r tiers decide steadiness and are options", "[growth]") {
  // Growth with r around 0.9: passes the 60 B/step tier, fails a strict one.
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0, 3 * KiB);
  auto y = series(60, [&](size_t i) { return double(i) * 1 * KiB + noise(rng); });
  GrowthFit f = fit(y);
  INFO("r " << f.r);
  REQUIRE(f.r > 0.875);
  REQUIRE(f.r < 0.99);
  CHECK(f.flagged);
  GrowthOptions strict;
  strict.tiers = {{60, 0.99}};
  CHECK(fit_series(y, strict).verdict == GrowthVerdict::NotSteady);
  GrowthOptions none;
  none.tiers.clear();
  CHECK(fit_series(y, none).verdict == GrowthVerdict::NotSteady);
}

TEST_CASE("explicit step numbers give bytes per step for thinned samples", "[growth]") {
  std::vector<double> x, y;
  for (size_t i = 0; i < 20; ++i) {
    x.push_back(double(10 * i + 1));  // every 10th step sampled
    y.push_back(double(10 * i) * 100 * KiB);
  }
  GrowthFit f = fit_series(x, y, GrowthOptions{});
  CHECK(f.flagged);
  CHECK(f.slope == Approx(100 * KiB));
  CHECK(f.steps == 16);
  // Unusable step numbers fall back to sample order rather than dividing by 0.
  std::vector<double> same(20, 5.0);
  GrowthFit g = fit_series(same, y, GrowthOptions{});
  CHECK(g.flagged);
  CHECK(g.slope == Approx(1000 * KiB));
  GrowthFit h = fit_series(std::vector<double>{1, 2}, y, GrowthOptions{});
  CHECK(h.slope == Approx(1000 * KiB));
}

TEST_CASE("large live totals do not swamp a small steady leak", "[growth]") {
  auto y = series(50, [](size_t i) { return 40.0 * 1024 * MiB + double(i) * 512; });
  GrowthFit f = fit(y);
  CHECK(f.flagged);
  CHECK(f.slope == Approx(512));
  CHECK(f.r == Approx(1.0));
}

// ---- detect_growth end to end ----------------------------------------------

namespace {

struct Fixture {
  AnalysisInput in;
  Symbolizer sym{std::vector<Module>{}};

  Fixture() {
    in.stacks.native.push_back({});  // id 0 = no stack
    in.stacks.python.push_back({});
    // The CUDA runtime's own frame, trimmed away from every site.
    sym.preload(0x10, {NativeFrame{"cudaMalloc", "", 0, "/usr/lib/libcudart.so.13", 0x10}});
  }
  void symbol(uint64_t ip, std::string fn, std::string file, int line) {
    sym.preload(ip, {NativeFrame{std::move(fn), std::move(file), line, "/app", ip}});
  }
  StackId stack(std::vector<uint64_t> ips) {
    in.stacks.native.push_back(std::move(ips));
    return static_cast<StackId>(in.stacks.native.size() - 1);
  }
  PyStackId pystack(std::vector<PyFrame> frames) {
    in.stacks.python.push_back(std::move(frames));
    return static_cast<PyStackId>(in.stacks.python.size() - 1);
  }
  // One step boundary per call to steps(); `sample` gives a site's bytes.
  struct Raw {
    StackId stack;
    PyStackId py;
    ApiId api;
    std::function<uint64_t(size_t)> bytes;
  };
  void steps(size_t n, const std::vector<Raw> &raws) {
    for (size_t i = 0; i < n; ++i) {
      StepSample s;
      s.step = i + 1;
      s.time_ns = 1000 * (i + 1);
      for (const Raw &r : raws) {
        uint64_t b = r.bytes(i);
        if (b == 0) continue;  // as recorded: only sites with live bytes
        s.sites.push_back({r.stack, r.py, r.api, api_info(r.api).family, b, 1});
      }
      in.steps.push_back(std::move(s));
    }
  }
};

}  // namespace

TEST_CASE("detect_growth merges raw stacks of one source site and ranks by rate", "[growth]") {
  Fixture f;
  const uint64_t S = 1 << 20;
  // Two copies of one call line (an unrolled loop): each copy alone grows as
  // a staircase; together they leak S per step.
  f.symbol(0x1010, "alloc_loop()", "/src/a.cpp", 7);
  f.symbol(0x1050, "alloc_loop()", "/src/a.cpp", 7);
  f.symbol(0x2000, "main", "/src/a.cpp", 20);
  StackId a = f.stack({0x10, 0x1010, 0x2000});
  StackId b = f.stack({0x10, 0x1050, 0x2000});
  // A cache that warms up then plateaus.
  f.symbol(0x3000, "workspace()", "/src/w.cpp", 3);
  StackId cache = f.stack({0x10, 0x3000, 0x2000});
  // One native site reached from two Python lines: two sites.
  f.symbol(0x4000, "torch_op()", "/src/op.cpp", 9);
  StackId op = f.stack({0x10, 0x4000});
  PyStackId py_train = f.pystack({{"train", "/src/train.py", 11}, {"<module>", "/src/train.py", 40}});
  PyStackId py_eval = f.pystack({{"evaluate", "/src/train.py", 30}, {"<module>", "/src/train.py", 41}});
  // A site only freed within each step: never present at a boundary.
  f.steps(30, {
      {a, 0, ApiId::cudaMalloc, [&](size_t i) { return S * (i / 2 + 1); }},
      {b, 0, ApiId::cudaMalloc, [&](size_t i) { return S * ((i + 1) / 2); }},
      {cache, 0, ApiId::cudaMalloc, [&](size_t i) { return S * std::min<uint64_t>(i + 1, 12); }},
      {op, py_train, ApiId::cudaMalloc, [&](size_t i) { return (S / 4) * (i + 1); }},
      {op, py_eval, ApiId::cudaMallocHost, [&](size_t i) { return (S / 2) * (i + 1); }},
  });

  std::vector<GrowthEntry> g = detect_growth(f.in, f.sym, GrowthOptions{});
  REQUIRE(g.size() == 3);

  CHECK(g[0].bytes_per_step == Approx(double(S)));
  CHECK(g[0].r == Approx(1.0));
  CHECK(g[0].steps == 24);
  CHECK(g[0].growth_bytes == int64_t(23 * S));
  CHECK(g[0].kind == "device");
  CHECK(g[0].api == "cudaMalloc");
  REQUIRE(g[0].frames.size() == 2);
  CHECK(g[0].frames[0].function == "alloc_loop()");  // runtime frame trimmed
  CHECK(g[0].frames[0].line == 7);
  CHECK(g[0].python_frames.empty());

  CHECK(g[1].bytes_per_step == Approx(double(S / 2)));
  CHECK(g[1].kind == "host-pinned");
  CHECK(g[1].api == "cudaMallocHost");
  REQUIRE(g[1].python_frames.size() == 2);
  CHECK(g[1].python_frames[0].function == "evaluate");

  CHECK(g[2].bytes_per_step == Approx(double(S / 4)));
  CHECK(g[2].kind == "device");
  REQUIRE(g[2].python_frames.size() == 2);
  CHECK(g[2].python_frames[0].line == 11);
  CHECK(g[2].frames[0].function == "torch_op()");
}

TEST_CASE("detect_growth: short runs, empty input and damaged stack ids", "[growth]") {
  SECTION("no steps") {
    Fixture f;
    CHECK(detect_growth(f.in, f.sym).empty());
  }
  SECTION("too few steps") {
    Fixture f;
    f.symbol(0x1000, "leak()", "/s.cpp", 1);
    StackId s = f.stack({0x1000});
    f.steps(9, {{s, 0, ApiId::cudaMalloc, [](size_t i) { return uint64_t(i + 1) << 20; }}});
    CHECK(detect_growth(f.in, f.sym).empty());
  }
  SECTION("ids outside the store are empty stacks, not trusted") {
    Fixture f;
    f.steps(20, {{12345, 777, ApiId::cudaMalloc, [](size_t i) { return uint64_t(i + 1) << 20; }}});
    auto g = detect_growth(f.in, f.sym);
    REQUIRE(g.size() == 1);
    CHECK(g[0].frames.empty());
    CHECK(g[0].python_frames.empty());
  }
  SECTION("a site that appears only after warm-up and keeps growing") {
    Fixture f;
    f.symbol(0x1000, "late()", "/s.cpp", 1);
    StackId s = f.stack({0x1000});
    f.steps(40, {{s, 0, ApiId::cudaMallocAsync,
                  [](size_t i) { return i < 15 ? uint64_t(0) : uint64_t(i - 14) << 20; }}});
    auto g = detect_growth(f.in, f.sym);
    REQUIRE(g.size() == 1);
    CHECK(g[0].kind == "stream-ordered");
    CHECK(g[0].steps == 32);
  }
}

TEST_CASE("a slow leak behind a long cache warm-up shows once the run is long enough", "[growth]") {
  // 15 steps of cache growth (64 MiB each), then a 1 MiB/step leak. At 60
  // steps the warm-up exclusion (12) ends inside the ramp, the line is a
  // poor fit and nothing is flagged; at 100 steps (exclusion 20) it is.
  auto y = [](size_t n) {
    return series(n, [](size_t i) { return double(std::min<size_t>(i + 1, 15)) * 64 * MiB + double(i) * MiB; });
  };
  CHECK_FALSE(fit(y(60)).flagged);
  GrowthFit f = fit(y(100));
  CHECK(f.flagged);
  CHECK(f.slope == Approx(MiB));
  // Or sooner, with a warm-up option the user knows fits the workload.
  GrowthOptions o;
  o.warmup_min_steps = 16;
  CHECK(fit_series(y(60), o).flagged);
}
