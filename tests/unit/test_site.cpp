#include <catch2/catch.hpp>

#include "report/analysis/site.h"
#include "report/analysis/site_match.h"
#include "report/compare/baseline.h"
#include "report/compare/gate.h"
#include "report/compare/merge.h"

using namespace torchseal;

namespace {
// Each call is its own physical frame (distinct return address) unless an
// address is given: inlined levels of one frame share their address.
NativeFrame frame(std::string fn, std::string module, std::string file = "", int line = 0,
                  uint64_t addr = 0) {
  static uint64_t next = 0x1000;
  return NativeFrame{std::move(fn), std::move(file), line, std::move(module), addr ? addr : next += 16};
}
}  // namespace

TEST_CASE("trimming drops torchseal and CUDA library frames, then CUDA API frames", "[site]") {
  std::vector<NativeFrame> frames = {
      frame("torchseal::capture_stack()", "/opt/ts/lib/libtorchseal.so"),
      frame("cudaMalloc", "/opt/ts/lib/libtorchseal.so"),
      frame("cuMemAlloc_v2", "/usr/lib/x86_64-linux-gnu/libcuda.so.1"),
      frame("cudart::driverHelper::mallocPtr", "/usr/local/cuda/lib64/libcudart.so.13"),
      frame("cudaMalloc", "/usr/local/cuda/lib64/libcudart.so.13"),
      frame("libcupti_internal", "/usr/local/cuda/lib64/libcupti.so.13"),
      // Statically linked runtime: CUDA internals inside the user's binary.
      frame("cudart::cudaApiMalloc(void**, unsigned long)", "/home/u/app"),
      frame("__cudart1234", "/home/u/app"),
      frame("cudaMalloc", "/home/u/app"),
      frame("make_buffer(unsigned long)", "/home/u/app", "/home/u/app.cpp", 12),
      frame("main", "/home/u/app", "/home/u/app.cpp", 30),
  };
  auto t = trim_frames(frames);
  REQUIRE(t.size() == 2);
  CHECK(t[0].function == "make_buffer(unsigned long)");
  CHECK(t[1].function == "main");
}

TEST_CASE("trimming keeps user functions whose names merely resemble CUDA's", "[site]") {
  auto t = trim_frames({frame("cute_kernel_launch", "/app"), frame("main", "/app")});
  REQUIRE(t.size() == 2);
  CHECK(t[0].function == "cute_kernel_launch");
  // A library named like libcuda but not libcuda.* is the user's.
  t = trim_frames({frame("f", "/x/libcudamyproj.so"), frame("main", "/app")});
  CHECK(t.size() == 2);
}

TEST_CASE("a static runtime's inlined helpers go with their API frame", "[site]") {
  // cudaMalloc in the user's binary with a lambda inlined into it: both
  // levels share one return address; the lambda's name says nothing.
  auto t = trim_frames({frame("x", "/l/libtorchseal.so"),
                        frame("operator()", "/app", "runtime_memory.cpp", 33, 0x5000),
                        frame("cudaMalloc", "/app", "runtime_internal.h", 133, 0x5000),
                        frame("leak_device_buffer()", "/app", "planted.cpp", 42),
                        frame("main", "/app", "planted.cpp", 101)});
  REQUIRE(t.size() == 2);
  CHECK(t[0].function == "leak_device_buffer()");
  // A user function with something inlined into it stays whole.
  t = trim_frames({frame("helper()", "/app", "a.cpp", 5, 0x6000),
                   frame("user()", "/app", "a.cpp", 9, 0x6000), frame("main", "/app")});
  CHECK(t.size() == 3);
}

TEST_CASE("nameless frames are trimmed only when a CUDA API frame follows", "[site]") {
  auto t = trim_frames({frame("", "/app"), frame("cudaMalloc", "/app"), frame("user", "/app")});
  REQUIRE(t.size() == 1);
  CHECK(t[0].function == "user");
  t = trim_frames({frame("x", "/l/libtorchseal.so"), frame("", "/app"), frame("user", "/app")});
  REQUIRE(t.size() == 2);
  CHECK(t[0].function.empty());
}

TEST_CASE("trimming never empties a stack", "[site]") {
  auto only_internal = trim_frames({frame("cudaMalloc", "/l/libcudart.so.13")});
  CHECK(only_internal.size() == 1);
  auto only_api = trim_frames(
      {frame("x", "/l/libtorchseal.so"), frame("cudaMalloc", "/app"), frame("cuInit", "/app")});
  REQUIRE(only_api.size() == 2);
  CHECK(only_api[0].function == "cudaMalloc");
  CHECK(trim_frames({}).empty());
}

TEST_CASE("site keys compare source locations, not addresses", "[site]") {
  std::vector<NativeFrame> a = {frame("f()", "/app", "/s/a.cpp", 10, 0x1000),
                                frame("main", "/app", "/s/a.cpp", 20, 0x2000)};
  std::vector<NativeFrame> b = a;
  b[0].address = 0x1040;  // an unrolled copy of the same call line
  CHECK(site_key(a, {}) == site_key(b, {}));
  b[0].line = 11;
  CHECK(site_key(a, {}) != site_key(b, {}));

  std::vector<PythonFrame> py1 = {{"step", "train.py", 5}};
  std::vector<PythonFrame> py2 = {{"step", "train.py", 6}};
  CHECK(site_key(a, py1) != site_key(a, py2));
  CHECK(site_key(a, py1) == site_key(a, py1));

  // Without symbols, addresses are all there is.
  std::vector<NativeFrame> raw1 = {frame("", "/app", "", 0, 0x1000)};
  std::vector<NativeFrame> raw2 = {frame("", "/app", "", 0, 0x1004)};
  CHECK(site_key(raw1, {}) != site_key(raw2, {}));
}

TEST_CASE("diff matches a site across runs whose unsymbolized frame moved with ASLR", "[site]") {
  // Two runs of one program: the stripped library's frame has no symbols,
  // and its address differs from run to run.
  auto entry = [](uint64_t lib_addr) {
    LeakEntry e;
    e.kind = "device";
    e.api = "cudaMalloc";
    e.bytes = 4096;
    e.allocations = 1;
    e.frames = {frame("leak_site", "/bin/app", "app.cpp", 12),
                frame("", "/usr/lib/libstdc++.so.6", "", 0, lib_addr)};
    return e;
  };
  LeakEntry a = entry(0x7f1200001234), b = entry(0x7f5600001234);
  std::vector<SiteView> va{site_view(a)}, vb{site_view(b)};
  std::vector<long> m = match_sites(va, vb);
  REQUIRE(m.size() == 1);
  CHECK(m[0] == 0);
  CHECK(site_chain(va[0]) == site_chain(vb[0]));
}

TEST_CASE("a merge adds up a site across ranks, but two lines of one function stay two", "[site]") {
  auto entry = [](int line) {
    LeakEntry e;
    e.kind = "device";
    e.api = "cudaMalloc";
    e.bytes = 4096;
    e.allocations = 1;
    e.frames = {frame("train", "/bin/app", "train.cpp", line, 0x4000 + uint64_t(line))};
    return e;
  };
  Report r0, r1, r2;
  r0.leaks = {entry(10)};
  r1.leaks = {entry(40)};  // a new leak 30 lines below a known one
  r2.leaks = {entry(10)};
  MergedReport m = merge_reports({r0, r1, r2});
  REQUIRE(m.report.leaks.size() == 2);
  CHECK(m.report.leaks[0].bytes == 8192);
  CHECK(m.report.leaks[0].frames.at(0).line == 10);
  CHECK(m.report.leaks[1].frames.at(0).line == 40);
  // Across builds (diff, baseline) a line that moved is still the site.
  std::vector<SiteView> va{site_view(r0.leaks[0])}, vb{site_view(r1.leaks[0])};
  CHECK(match_sites(va, vb)[0] == 0);
  CHECK(match_sites(va, vb, 0)[0] == -1);
}

TEST_CASE("a merge keeps every input's degraded lines, naming inputs that had them alone",
          "[site]") {
  Report r0, r1, r2;
  r0.process.rank = 0;
  r1.process.rank = 1;
  r2.process.rank = 2;
  r1.process.degraded = {"no line numbers: libdw unavailable", "short native stacks"};
  r2.process.degraded = {"short native stacks"};
  MergedReport m = merge_reports({r0, r1, r2});
  CHECK(m.report.process.degraded ==
        std::vector<std::string>{"no line numbers: libdw unavailable (only in 1)",
                                 "short native stacks (only in 1, 2)"});
  r0.process.degraded = {"short native stacks"};
  m = merge_reports({r0, r1, r2});
  CHECK(m.report.process.degraded ==
        std::vector<std::string>{"short native stacks", "no line numbers: libdw unavailable (only in 1)"});
  GateLimits strict;
  strict.fail_on_degraded = true;
  CHECK_FALSE(evaluate_gate(merge_reports({r2, r0}).report, strict, nullptr).pass);
}

TEST_CASE("a known leak site over its baseline bytes is noted, and counts past the ratio",
          "[site]") {
  auto entry = [](uint64_t bytes) {
    LeakEntry e;
    e.kind = "device";
    e.api = "cudaMalloc";
    e.bytes = bytes;
    e.allocations = 1;
    e.frames = {frame("cache_batch", "/bin/app", "app.cpp", 30, 0x4030)};
    return e;
  };
  Report known;
  known.leaks = {entry(1 << 20)};
  Baseline b = baseline_from_reports({known});
  REQUIRE(b.sites.size() == 1);
  CHECK(b.sites[0].bytes == 1 << 20);

  Report same = known, grown = known;
  grown.leaks[0].bytes = 5 << 20;
  GateLimits none, ratio2, ratio8;
  ratio2.baseline_max_ratio = 2;
  ratio8.baseline_max_ratio = 8;

  GateVerdict v = evaluate_gate(same, none, &b);
  CHECK(v.pass);
  CHECK(v.known_grown.empty());
  CHECK(v.excused_leak_sites == 1);

  v = evaluate_gate(grown, none, &b);  // no ratio: passes, with the note
  CHECK(v.pass);
  REQUIRE(v.known_grown.size() == 1);
  CHECK(v.known_grown[0].leak == 0);
  CHECK(v.known_grown[0].baseline_bytes == 1 << 20);
  CHECK(v.excused_leak_sites == 1);

  v = evaluate_gate(grown, ratio8, &b);  // 5x is within 8x
  CHECK(v.pass);
  CHECK(v.known_grown.size() == 1);

  v = evaluate_gate(grown, ratio2, &b);  // 5x is over 2x
  CHECK_FALSE(v.pass);
  REQUIRE(v.baseline_exceeded.size() == 1);
  CHECK(v.known_grown.empty());
  CHECK(v.excused_leak_sites == 0);
  REQUIRE(v.reasons.size() == 1);
  CHECK(v.reasons[0] == "1 known site(s) leaked more than 2 times their baseline bytes");

  // A hand-written entry without bytes says nothing about size.
  b.sites[0].bytes = 0;
  CHECK(evaluate_gate(grown, ratio2, &b).pass);
}

TEST_CASE("a known site leaking on several devices is compared and named once", "[site]") {
  auto entry = [](uint64_t bytes, int device) {
    LeakEntry e;
    e.kind = "device";
    e.api = "cudaMalloc";
    e.device = device;
    e.bytes = bytes;
    e.allocations = 1;
    e.frames = {frame("cache_batch", "/bin/app", "app.cpp", 30, 0x4030)};
    return e;
  };
  // Growth sites first: the leak's index into b.sites is not its index
  // among the leak sites.
  Baseline b;
  BaselineSite g;
  g.type = "growth";
  g.kind = "device";
  g.api = "cudaMalloc";
  g.bytes = 1;
  g.frames = {frame("other", "/bin/app", "app.cpp", 90, 0x4090)};
  b.sites = {g, g};
  b.sites[1].frames = {frame("third", "/bin/app", "app.cpp", 99, 0x4099)};
  BaselineSite l;
  l.kind = "device";
  l.api = "cudaMalloc";
  l.bytes = 1 << 20;
  l.frames = {frame("cache_batch", "/bin/app", "app.cpp", 30, 0x4030)};
  b.sites.push_back(l);
  REQUIRE(baseline_matches(b, {entry(1, 0)}) == std::vector<long>{2});

  Report r;
  r.leaks = {entry(1 << 20, 0), entry(3 << 20, 1), entry(2 << 20, 2)};
  GateVerdict v = evaluate_gate(r, {}, &b);
  CHECK(v.pass);
  REQUIRE(v.known_grown.size() == 1);  // one site, named by its largest entry
  CHECK(v.known_grown[0].leak == 1);
  GateLimits ratio2;
  ratio2.baseline_max_ratio = 2;
  v = evaluate_gate(r, ratio2, &b);  // 3x on device 1: the whole site counts
  CHECK_FALSE(v.pass);
  REQUIRE(v.baseline_exceeded.size() == 1);
  CHECK(v.baseline_exceeded[0].leak == 1);
  CHECK(v.excused_leak_sites == 0);
}
