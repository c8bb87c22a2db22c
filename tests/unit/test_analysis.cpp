#include <catch2/catch.hpp>

#include "report/analysis/analysis.h"

using namespace torchseal;

namespace {

// A symbolizer that knows a few synthetic IPs, so tests control what each
// address "is" in the source.
struct Fixture {
  AnalysisInput in;
  Symbolizer sym{std::vector<Module>{}};

  Fixture() {
    in.stacks.native.push_back({});  // id 0 = no stack
    in.stacks.python.push_back({});
    in.process.pid = 42;
  }
  void symbol(uint64_t ip, std::string fn, std::string file, int line, std::string module = "/app") {
    sym.preload(ip, {NativeFrame{std::move(fn), std::move(file), line, std::move(module), ip}});
  }
  StackId stack(std::vector<uint64_t> ips) {
    in.stacks.native.push_back(std::move(ips));
    return static_cast<StackId>(in.stacks.native.size() - 1);
  }
  PyStackId pystack(std::vector<PyFrame> frames) {
    in.stacks.python.push_back(std::move(frames));
    return static_cast<PyStackId>(in.stacks.python.size() - 1);
  }
  void live(uint64_t size, StackId s, ApiId api = ApiId::cudaMalloc, int16_t device = 0,
            DetectedAt at = DetectedAt::Exit, PyStackId py = 0) {
    LiveAlloc a;
    a.addr = 0x7000000 + in.live.size() * 0x1000;
    a.size = size;
    a.stack = s;
    a.pystack = py;
    a.api = api;
    a.family = api_info(api).family;
    a.device = device;
    a.detected_at = at;
    in.live.push_back(a);
  }
};

}  // namespace

TEST_CASE("allocations at one symbolized site merge, even from different addresses", "[analysis]") {
  Fixture f;
  // Two copies of one call line (an unrolled loop) and the caller.
  f.symbol(0x1010, "alloc_loop()", "/src/a.cpp", 7);
  f.symbol(0x1050, "alloc_loop()", "/src/a.cpp", 7);
  f.symbol(0x2000, "main", "/src/a.cpp", 20);
  f.live(100, f.stack({0x1010, 0x2000}));
  f.live(300, f.stack({0x1050, 0x2000}));
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.leaks.size() == 1);
  CHECK(r.leaks[0].bytes == 400);
  CHECK(r.leaks[0].allocations == 2);
  CHECK(r.leaks[0].kind == "device");
  CHECK(r.leaks[0].api == "cudaMalloc");
  CHECK(r.leaks[0].detected_at == "exit");
  REQUIRE(r.leaks[0].frames.size() == 2);
  CHECK(r.leaks[0].frames[0].function == "alloc_loop()");
  CHECK(r.summary.leaked_bytes == 400);
  CHECK(r.summary.leaked_allocations == 2);
  CHECK(r.summary.leak_sites == 1);
}

TEST_CASE("different sites, APIs, devices and detection points stay separate, bytes descending",
          "[analysis]") {
  Fixture f;
  f.symbol(0x1000, "small()", "/src/a.cpp", 5);
  f.symbol(0x1100, "big()", "/src/a.cpp", 9);
  f.symbol(0x1200, "big()", "/src/a.cpp", 10);
  StackId small = f.stack({0x1000});
  StackId big9 = f.stack({0x1100});
  StackId big10 = f.stack({0x1200});
  f.live(10, small);
  f.live(1000, big9);
  f.live(500, big10);
  f.live(700, big9, ApiId::cudaMallocManaged);
  f.live(600, big9, ApiId::cudaMalloc, 1);
  f.live(800, big9, ApiId::cudaMalloc, 0, DetectedAt::ContextTeardown);
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.leaks.size() == 6);
  for (size_t i = 1; i < r.leaks.size(); ++i) CHECK(r.leaks[i - 1].bytes >= r.leaks[i].bytes);
  CHECK(r.leaks[0].bytes == 1000);
  CHECK(r.leaks[1].detected_at == "context-teardown");
  CHECK(r.leaks[2].kind == "managed");
  CHECK(r.leaks[3].device == 1);
  CHECK(r.leaks.back().bytes == 10);
  CHECK(r.summary.leaked_bytes == 3610);
  CHECK(r.summary.leak_sites == 6);
}

TEST_CASE("Python frames are part of the site", "[analysis]") {
  Fixture f;
  f.symbol(0x1000, "THCudaMalloc", "", 0, "/lib/libtorch.so");
  StackId s = f.stack({0x1000});
  f.live(64, s, ApiId::cudaMalloc, 0, DetectedAt::Exit, f.pystack({{"step", "train.py", 3}}));
  f.live(64, s, ApiId::cudaMalloc, 0, DetectedAt::Exit, f.pystack({{"step", "train.py", 4}}));
  f.live(64, s, ApiId::cudaMalloc, 0, DetectedAt::Exit, f.pystack({{"step", "train.py", 4}}));
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.leaks.size() == 2);
  CHECK(r.leaks[0].allocations == 2);
  REQUIRE(r.leaks[0].python_frames.size() == 1);
  CHECK(r.leaks[0].python_frames[0].line == 4);
}

TEST_CASE("leading CUDA and torchseal frames are trimmed before grouping", "[analysis]") {
  Fixture f;
  f.symbol(0x9000, "torchseal::record()", "", 0, "/x/libtorchseal.so");
  f.symbol(0x9100, "cudaMalloc", "", 0, "/x/libtorchseal.so");
  f.symbol(0x9200, "cudart::mallocImpl()", "", 0, "/cuda/libcudart.so.13");
  f.symbol(0x9300, "cudart::mallocImpl()", "", 0, "/cuda/libcudart.so.13");
  f.symbol(0x1000, "user()", "/src/u.cpp", 3);
  // Different internal paths to the same user line are one site.
  f.live(1, f.stack({0x9000, 0x9100, 0x9200, 0x1000}));
  f.live(1, f.stack({0x9000, 0x9300, 0x1000}));
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.leaks.size() == 1);
  REQUIRE(r.leaks[0].frames.size() == 1);
  CHECK(r.leaks[0].frames[0].function == "user()");
}

TEST_CASE("torch caching allocator: memory live at exit is cached, not leaked", "[analysis]") {
  Fixture f;
  f.in.torch_caching_allocator = true;
  f.symbol(0x1000, "c10::cuda::CUDACachingAllocator::malloc", "", 0, "/lib/libc10_cuda.so");
  StackId s = f.stack({0x1000});
  f.live(2 << 20, s, ApiId::cudaMalloc);
  f.live(4096, s, ApiId::cudaHostAlloc);
  f.live(8192, s, ApiId::cuMemCreate);                          // expandable_segments
  f.live(512, s, ApiId::cudaMallocManaged);                     // not the caching allocator's
  f.live(1024, s, ApiId::cudaMalloc, 0, DetectedAt::ContextTeardown);  // lost for real
  Report r = analyze(f.in, f.sym);
  CHECK(r.summary.cached_bytes == (2 << 20) + 4096 + 8192);
  CHECK(r.summary.leaked_bytes == 512 + 1024);
  REQUIRE(r.leaks.size() == 2);
  CHECK(r.leaks[0].detected_at == "context-teardown");
  CHECK(r.leaks[1].kind == "managed");

  f.in.torch_caching_allocator = false;
  Report plain = analyze(f.in, f.sym);
  CHECK(plain.summary.cached_bytes == 0);
  CHECK(plain.summary.leaked_bytes == (2 << 20) + 4096 + 8192 + 512 + 1024);
}

TEST_CASE("suppressed sites move to suppressed_bytes", "[analysis]") {
  Fixture f;
  f.symbol(0x1000, "third_party_init()", "/src/t.cpp", 1);
  f.symbol(0x2000, "mine()", "/src/m.cpp", 1);
  f.live(100, f.stack({0x1000}));
  f.live(7, f.stack({0x2000}));
  AnalysisOptions opts;
  opts.is_suppressed = [](const std::vector<NativeFrame> &fr, const std::vector<PythonFrame> &) {
    return !fr.empty() && fr[0].function.find("third_party") != std::string::npos;
  };
  Report r = analyze(f.in, f.sym, opts);
  REQUIRE(r.leaks.size() == 1);
  CHECK(r.leaks[0].bytes == 7);
  CHECK(r.summary.suppressed_bytes == 100);
  CHECK(r.summary.leaked_bytes == 7);
}

// A 4-thread OpenMP program reported peak 32768 beside 131072 bytes leaked:
// each thread's unfolded share was missing from the others' peak checks.
TEST_CASE("the peak is never below what the report shows live at once", "[analysis]") {
  Fixture f;
  f.in.peak_bytes = 32768;
  f.symbol(0x1000, "main._omp_fn.0", "/omp.cpp", 9);
  StackId a = f.stack({0x1000});
  for (int t = 0; t < 4; ++t) f.live(32768, a);
  CHECK(analyze(f.in, f.sym).summary.peak_bytes == 131072);
  OomRecord o;
  o.live_bytes = 500000;
  f.in.ooms.push_back(o);
  CHECK(analyze(f.in, f.sym).summary.peak_bytes == 500000);
  StepSample s;
  s.step = 1;
  s.sites.push_back({a, 0, ApiId::cudaMalloc, Family::Device, 700000, 3});
  f.in.steps.push_back(s);
  CHECK(analyze(f.in, f.sym).summary.peak_bytes == 700000);
}

TEST_CASE("summary, OOM top sites and invalid frees", "[analysis]") {
  Fixture f;
  f.in.peak_bytes = 12345;
  f.in.events = 99;
  f.in.seconds_in_torchseal = 0.25;
  f.in.trigger = "oom";
  f.symbol(0x1000, "a()", "/s.cpp", 1);
  f.symbol(0x2000, "b()", "/s.cpp", 2);
  f.symbol(0x3000, "c()", "/s.cpp", 3);
  StackId a = f.stack({0x1000}), b = f.stack({0x2000}), c = f.stack({0x3000});
  OomRecord o;
  o.api = ApiId::cudaMalloc;
  o.requested = 1 << 30;
  o.device = 0;
  o.live_bytes = 600;
  o.stack = c;
  SiteTally tally;
  for (auto [size, st] : {std::pair<uint64_t, StackId>{100, a}, {300, b}, {200, a}})
    tally.add(st, 0, ApiId::cudaMalloc, Family::Device, size);
  o.sites_at_oom = tally.take();
  f.in.ooms.push_back(o);
  f.in.invalid_frees.push_back({ApiId::cudaFree, 0xdead, b, 0});
  f.in.invalid_frees.push_back({ApiId::cudaFree, 0xdead, b, 0});  // same call again
  f.in.invalid_frees.push_back({ApiId::cudaFree, 0xbeef, b, 0});
  Report r = analyze(f.in, f.sym);
  CHECK(r.trigger == "oom");
  CHECK(r.summary.peak_bytes == 12345);
  CHECK(r.summary.events == 99);
  CHECK(r.summary.overhead.events == 99);
  CHECK(r.summary.overhead.seconds_in_torchseal == Approx(0.25));
  REQUIRE(r.ooms.size() == 1);
  CHECK(r.ooms[0].requested_bytes == (1u << 30));
  CHECK(r.ooms[0].frames[0].function == "c()");
  REQUIRE(r.ooms[0].top_sites.size() == 2);
  CHECK(r.ooms[0].top_sites[0].bytes == 300);
  CHECK(r.ooms[0].top_sites[0].frames[0].function == "a()");
  CHECK(r.ooms[0].top_sites[0].allocations == 2);
  CHECK(r.ooms[0].top_sites[1].bytes == 300);
  REQUIRE(r.invalid_frees.size() == 2);
  CHECK(r.invalid_frees[0].address == 0xdead);
  CHECK(r.growth.empty());
}

TEST_CASE("stack ids outside the store are treated as empty, not trusted", "[analysis]") {
  Fixture f;
  f.live(5, 12345);
  LiveAlloc py;
  py.size = 6;
  py.pystack = 777;
  py.api = ApiId::cudaMalloc;
  py.device = 0;
  f.in.live.push_back(py);
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.leaks.size() == 1);
  CHECK(r.leaks[0].frames.empty());
  CHECK(r.leaks[0].bytes == 11);
}
