// docs/report-format.md: holders, reachable against leaked, and their report keys.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "report/analysis/analysis.h"
#include "report/analysis/holders.h"
#include "report/compare/gate.h"
#include "report/render/html_report.h"
#include "report/render/report_json.h"
#include "report/render/report_text.h"

using namespace torchseal;

namespace {

struct Fixture {
  AnalysisInput in;
  Symbolizer sym{std::vector<Module>{}};

  Fixture() {
    in.stacks.native.push_back({});
    in.stacks.python.push_back({});
    in.process.pid = 7;
    in.process.python = "3.11.2";
    sym.preload(0x1000, {NativeFrame{"alloc_a", "/src/a.cpp", 1, "/app", 0x1000}});
    sym.preload(0x2000, {NativeFrame{"alloc_b", "/src/b.cpp", 2, "/app", 0x2000}});
    in.stacks.native.push_back({0x1000});  // stack 1
    in.stacks.native.push_back({0x2000});  // stack 2
  }
  void live(uint64_t addr, uint64_t size, StackId s, ApiId api = ApiId::cudaMallocAsync) {
    LiveAlloc a;
    a.addr = addr;
    a.size = size;
    a.stack = s;
    a.api = api;
    a.family = api_info(api).family;
    a.device = 0;
    in.live.push_back(a);
  }
  uint32_t chain(std::vector<std::string> steps) {
    in.holders.chains.push_back(std::move(steps));
    return static_cast<uint32_t>(in.holders.chains.size() - 1);
  }
  void held(uint64_t addr, uint64_t bytes, uint32_t chain) {
    in.holders.storages.push_back({addr, bytes, chain});
  }
};

}  // namespace

TEST_CASE("exit scan: held blocks are reachable, the rest leaked", "[holders]") {
  Fixture f;
  f.in.holders.done = f.in.holders.at_exit = true;
  f.live(0x10000, 4096, 1);
  f.live(0x20000, 4096, 1);
  f.live(0x30000, 1024, 2);  // nothing holds it
  uint32_t kept = f.chain({"global 'kept' (list) in t.py", "[0..1]", "Tensor float32 (1024,)"});
  f.held(0x10000, 4096, kept);
  f.held(0x20000, 4096, kept);
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.leaks.size() == 1);
  CHECK(r.leaks[0].bytes == 1024);
  CHECK(r.leaks[0].holders.empty());
  CHECK(r.summary.leaked_bytes == 1024);
  REQUIRE(r.reachable.size() == 1);
  CHECK(r.reachable[0].bytes == 8192);
  CHECK(r.reachable[0].allocations == 2);
  CHECK(r.summary.reachable_bytes == 8192);
  REQUIRE(r.reachable[0].holders.size() == 1);
  CHECK(r.reachable[0].holders[0].bytes == 8192);
  CHECK(r.reachable[0].holders[0].tensors == 2);
  CHECK(r.reachable[0].holders[0].chain[0] == "global 'kept' (list) in t.py");
}

TEST_CASE("a storage inside a segment is placed in that segment", "[holders]") {
  Fixture f;
  f.in.trigger = "api";
  f.in.holders.done = true;  // a dump's scan: everything live stays listed as before
  f.live(0x100000, 2 << 20, 1, ApiId::cudaMalloc);
  f.live(0x400000, 2 << 20, 2, ApiId::cudaMalloc);
  uint32_t a = f.chain({"f() local 'x' (Tensor) at t.py:3", "Tensor float32 (128,)"});
  uint32_t b = f.chain({"global 'm' (Model) in t.py", ".w (Parameter)", "Parameter float32 (64,)"});
  f.held(0x100000 + 512, 512, a);
  f.held(0x100000 + 4096, 256, b);
  f.held(0x400000 + (2 << 20) - 512, 512, a);  // the last bytes of the second segment
  f.held(0x800000, 512, a);                    // outside every live block: ignored
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.leaks.size() == 2);
  CHECK(r.reachable.empty());
  for (const LeakEntry &l : r.leaks) {
    if (l.frames[0].function == "alloc_a") {
      REQUIRE(l.holders.size() == 2);
      CHECK(l.holders[0].bytes == 512);  // largest first
      CHECK(l.holders[1].chain[1] == ".w (Parameter)");
    } else {
      REQUIRE(l.holders.size() == 1);
      CHECK(l.holders[0].tensors == 1);
    }
  }
}

TEST_CASE("without an exit scan the exit verdict is unchanged", "[holders]") {
  Fixture f;
  f.in.holders.done = true;  // an older step scan only (os._exit, a crash)
  f.live(0x10000, 4096, 1);
  f.held(0x10000, 4096, f.chain({"global 'k' (list) in t.py", "[0]", "Tensor float32 (1024,)"}));
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.leaks.size() == 1);
  CHECK(r.leaks[0].holders.empty());
  CHECK(r.reachable.empty());
  CHECK(r.summary.leaked_bytes == 4096);
}

TEST_CASE("growing sites get the holders of their live blocks", "[holders]") {
  Fixture f;
  f.in.trigger = "signal";
  f.in.holders.done = true;
  for (uint64_t step = 1; step <= 12; ++step) {
    StepSample s;
    s.step = step + 1;
    s.sites.push_back({1, 0, ApiId::cudaMallocAsync, Family::StreamOrdered, step * 4096, step});
    f.in.steps.push_back(s);
    f.live(0x10000 * step, 4096, 1);
  }
  uint32_t kept = f.chain({"global 'kept' (list) in t.py", "[0..11]", "Tensor float32 (1024,)"});
  for (uint64_t step = 1; step <= 12; ++step) f.held(0x10000 * step, 4096, kept);
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.growth.size() == 1);
  REQUIRE(r.growth[0].holders.size() == 1);
  CHECK(r.growth[0].holders[0].tensors == 12);
  CHECK(r.growth[0].holders[0].chain[1] == "[0..11]");
}

TEST_CASE("a grower gone by exit keeps the holders a step scan found", "[holders]") {
  // The step scan: what was live then, and what held it.
  Fixture step;
  for (uint64_t k = 1; k <= 8; ++k) step.live(0x10000 * k, 4096, 1);
  step.live(0x200000, 1024, 2);  // another site, held by something else
  uint32_t kept = step.chain({"train() local 'preds' (list) at t.py:9", "[0..7]", "Tensor float32 (1024,)"});
  uint32_t other = step.chain({"global 'm' (Model) in t.py", ".w (Parameter)", "Parameter float32 (256,)"});
  for (uint64_t k = 1; k <= 8; ++k) step.held(0x10000 * k, 4096, kept);
  step.held(0x200000, 1024, other);
  std::vector<SiteHolders> sites = holders_by_site(step.in);
  REQUIRE(sites.size() == 2);

  // Exit: the list was a local of a function that returned, its blocks are
  // freed, and the exit scan holds nothing of that site.
  Fixture f;
  f.in.holders.done = f.in.holders.at_exit = true;
  for (uint64_t k = 1; k <= 12; ++k) {
    StepSample s;
    s.step = k;
    s.sites.push_back({1, 0, ApiId::cudaMallocAsync, Family::StreamOrdered, k * 4096, k});
    f.in.steps.push_back(s);
  }
  f.in.site_holders = sites;
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.growth.size() == 1);
  REQUIRE(r.growth[0].holders.size() == 1);
  CHECK(r.growth[0].holders[0].chain[0] == "train() local 'preds' (list) at t.py:9");
  CHECK(r.growth[0].holders[0].tensors == 8);
  CHECK(r.growth[0].holders[0].bytes == 8 * 4096);
}

TEST_CASE("holders and reachable round-trip through JSON and show in text", "[holders]") {
  Fixture f;
  f.in.holders.done = f.in.holders.at_exit = true;
  f.live(0x10000, 4096, 1);
  f.held(0x10000, 4096, f.chain({"global 'k' (list) in t.py", "[0]", "Tensor float32 (1024,)"}));
  Report a = analyze(f.in, f.sym);
  auto j = nlohmann::json::parse(report_to_json(a));
  CHECK(j["summary"]["reachable_bytes"] == 4096);
  CHECK(j["reachable"][0]["holders"][0]["chain"][1] == "[0]");
  CHECK(j["reachable"][0]["holders"][0]["tensors"] == 1);
  Report b;
  std::string error;
  REQUIRE(report_from_json(report_to_json(a), b, error));
  REQUIRE(b.reachable.size() == 1);
  CHECK(b.reachable[0].holders[0].chain == a.reachable[0].holders[0].chain);
  CHECK(b.summary.reachable_bytes == 4096);
  std::string text = report_to_text(a);
  CHECK(text.find("Held by: global 'k' (list) in t.py -> [0] -> Tensor float32 (1024,) "
                  "(1 tensor(s), 4096 byte(s))") != std::string::npos);
  CHECK(text.find("SUMMARY: torchseal: 0 byte(s) leaked") != std::string::npos);
  HtmlReportInput hin;
  hin.report = &a;
  hin.no_timeline = "no history";
  std::string html = render_html_report(hin);
  CHECK(html.find("Reachable at exit (1)") != std::string::npos);
  CHECK(html.find("held by <span class=\"mono\">global &#39;k&#39; (list) in t.py &rarr; [0] "
                  "&rarr; Tensor float32 (1024,)</span>") != std::string::npos);
  CHECK(html.find("No leaks detected.") != std::string::npos);
}

TEST_CASE("reports of native programs carry no section 9 keys", "[holders]") {
  Fixture f;
  f.in.process.python.clear();
  f.live(0x10000, 4096, 1);
  auto j = nlohmann::json::parse(report_to_json(analyze(f.in, f.sym)));
  CHECK_FALSE(j.contains("reachable"));
  CHECK_FALSE(j["summary"].contains("reachable_bytes"));
  CHECK_FALSE(j["leaks"][0].contains("holders"));
}

TEST_CASE("expandable segments: a storage belongs to the VMM handle mapped where it lies",
          "[holders]") {
  Fixture f;
  f.in.trigger = "api";
  f.in.holders.done = true;
  // cuMemCreate records are keyed by handle (7, 9), never by address.
  f.live(7, 2 << 20, 1, ApiId::cuMemCreate);
  f.live(9, 2 << 20, 2, ApiId::cuMemCreate);
  const uint64_t va = 0x7f0000000000;
  f.in.vmm_maps = {{va, 2 << 20, 7}, {va + (2 << 20), 2 << 20, 9}, {va + (4 << 20), 2 << 20, 11}};
  uint32_t a = f.chain({"global 'kept' (list) in t.py", "[0..1]", "Tensor float32 (128,)"});
  uint32_t b = f.chain({"f() local 'x' (Tensor) at t.py:3", "Tensor float32 (64,)"});
  f.held(va + 512, 512, a);
  f.held(va + (2 << 20) - 512, 512, a);  // the last bytes of handle 7's mapping
  f.held(va + (2 << 20), 256, b);        // the first of handle 9's
  f.held(va + (4 << 20), 512, b);        // mapped to a handle no longer live: ignored
  f.held(7, 512, b);                     // a handle's value is no address
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.leaks.size() == 2);
  for (const LeakEntry &l : r.leaks) {
    CHECK(l.kind == "vmm");
    REQUIRE(l.holders.size() == 1);
    if (l.frames[0].function == "alloc_a") {
      CHECK(l.holders[0].chain[0] == "global 'kept' (list) in t.py");
      CHECK(l.holders[0].bytes == 1024);
      CHECK(l.holders[0].tensors == 2);
    } else {
      CHECK(l.holders[0].chain[0] == "f() local 'x' (Tensor) at t.py:3");
      CHECK(l.holders[0].bytes == 256);
    }
  }
}

TEST_CASE("expandable segments: a held handle is reachable at exit, an unmapped one leaked",
          "[holders]") {
  Fixture f;
  f.in.holders.done = f.in.holders.at_exit = true;
  f.live(7, 2 << 20, 1, ApiId::cuMemCreate);
  f.live(9, 2 << 20, 2, ApiId::cuMemCreate);  // created, never mapped
  f.in.vmm_maps = {{0x7f0000000000, 2 << 20, 7}};
  f.held(0x7f0000000000, 4096, f.chain({"global 'k' (list) in t.py", "[0]", "Tensor float32 (1024,)"}));
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.reachable.size() == 1);
  CHECK(r.reachable[0].bytes == (2 << 20));
  CHECK(r.reachable[0].holders[0].chain[0] == "global 'k' (list) in t.py");
  REQUIRE(r.leaks.size() == 1);
  CHECK(r.leaks[0].frames[0].function == "alloc_b");

  // PyTorch's expandable segments are its cache at exit, as segments are;
  // the tensor inside the mapped handle is listed as reachable, by its bytes.
  f.in.torch_caching_allocator = true;
  Report torch = analyze(f.in, f.sym);
  CHECK(torch.summary.cached_bytes == (4 << 20));
  CHECK(torch.summary.cached_in_tensors_bytes == 4096);
  REQUIRE(torch.reachable.size() == 1);
  CHECK(torch.reachable[0].bytes == 4096);
  CHECK(torch.leaks.empty());
}

TEST_CASE("segments mode: tensors inside a cached segment are reachable, the rest free cache",
          "[holders]") {
  Fixture f;
  f.in.torch_caching_allocator = true;
  f.in.holders.done = f.in.holders.at_exit = true;
  f.live(0x1000000, 20 << 20, 1, ApiId::cudaMalloc);  // one 20 MiB segment
  f.live(0x4000000, 2 << 20, 2, ApiId::cudaMalloc);   // a segment nothing holds
  uint32_t kept = f.chain({"global 'kept' (list) in k.py", "[0..1]", "Tensor float32 (512, 1024)"});
  f.held(0x1000000, 2 << 20, kept);
  f.held(0x1200000, 2 << 20, kept);
  Report r = analyze(f.in, f.sym);
  CHECK(r.leaks.empty());
  CHECK(r.summary.cached_bytes == (22u << 20));
  CHECK(r.summary.cached_in_tensors_bytes == (4u << 20));
  CHECK(r.summary.cached_free_bytes == (18u << 20));
  REQUIRE(r.reachable.size() == 1);
  CHECK(r.reachable[0].bytes == (4u << 20));
  CHECK(r.reachable[0].allocations == 2);
  CHECK(r.reachable[0].frames[0].function == "alloc_a");
  REQUIRE(r.reachable[0].holders.size() == 1);
  CHECK(r.reachable[0].holders[0].chain[0] == "global 'kept' (list) in k.py");
  Report back;
  std::string error;
  REQUIRE(report_from_json(report_to_json(r), back, error));
  CHECK(back.summary.cached_in_tensors_bytes == (4u << 20));
  CHECK(back.summary.cached_free_bytes == (18u << 20));
  CHECK(report_to_text(r).find("of which 4194304 byte(s) in tensors") != std::string::npos);
}

TEST_CASE("segments mode without a scan: all of the cache is free", "[holders]") {
  Fixture f;
  f.in.torch_caching_allocator = true;
  f.live(0x1000000, 20 << 20, 1, ApiId::cudaMalloc);
  Report r = analyze(f.in, f.sym);
  CHECK(r.reachable.empty());
  CHECK(r.summary.cached_in_tensors_bytes == 0);
  CHECK(r.summary.cached_free_bytes == (20u << 20));
}

namespace {
GraphSeries series(std::vector<std::pair<uint64_t, uint64_t>> step_nodes) {
  GraphSeries g;
  g.chain = {"global 'total_loss' (Tensor) in s.py", ".grad_fn (AddBackward0)"};
  g.stack = 1;
  for (auto [step, nodes] : step_nodes) g.samples.push_back({step, nodes, 4});
  return g;
}
}  // namespace

TEST_CASE("a graph that grows at every step scan is a growth entry of kind autograd-graph",
          "[holders]") {
  Fixture f;
  f.in.graph_series.push_back(series({{1, 8}, {2, 16}, {4, 32}, {8, 64}, {16, 128}}));
  // Sizes that follow the data: the last rising run has 3 scans only.
  f.in.graph_series.push_back(series({{1, 8}, {2, 16}, {4, 12}, {8, 20}, {16, 24}}));
  f.in.graph_series.back().chain[0] = "global 'loss' (Tensor) in s.py";
  // Constant: a correct loop's loss.
  f.in.graph_series.push_back(series({{1, 8}, {2, 8}, {4, 8}, {8, 8}, {16, 8}}));
  f.in.graph_series.back().chain[0] = "global 'out' (Tensor) in s.py";
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.growth.size() == 1);
  const GrowthEntry &g = r.growth[0];
  CHECK(g.kind == "autograd-graph");
  CHECK(g.graph_nodes == 128);
  CHECK(g.graph_nodes_per_step == Approx(8.0));
  CHECK(g.steps == 5);
  CHECK(g.growth_bytes == 0);
  CHECK(g.frames[0].function == "alloc_a");
  REQUIRE(g.holders.size() == 1);
  CHECK(g.holders[0].chain.front() == "global 'total_loss' (Tensor) in s.py");
  CHECK(g.holders[0].chain.back() == "autograd graph of 128 nodes");
  Report back;
  std::string error;
  REQUIRE(report_from_json(report_to_json(r), back, error));
  REQUIRE(back.growth.size() == 1);
  CHECK(back.growth[0].graph_nodes == 128);
  CHECK(back.growth[0].graph_nodes_per_step == Approx(8.0));
  CHECK(report_to_text(r).find("Growing autograd graph: 128 node(s)") != std::string::npos);
  GateVerdict v = evaluate_gate(r, {}, nullptr);
  CHECK_FALSE(v.pass);
  CHECK(v.graph_offenders.size() == 1);
}

TEST_CASE("a growing graph whose holder already holds a growing site is not listed again",
          "[holders]") {
  Fixture f;
  f.in.graph_series.push_back(series({{1, 8}, {2, 16}, {4, 32}, {8, 64}}));
  f.in.site_holders.push_back(
      {1, 0, ApiId::cudaMallocAsync, Family::StreamOrdered,
       {{{"global 'total_loss' (Tensor) in s.py", ".grad_fn (AddBackward0)", "Tensor"}, 1, 1}}});
  for (uint64_t step = 0; step < 12; ++step) {
    StepSample s;
    s.step = step + 1;
    s.sites.push_back({1, 0, ApiId::cudaMallocAsync, Family::StreamOrdered, (step + 1) << 20});
    f.in.steps.push_back(s);
  }
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.growth.size() == 1);
  CHECK(r.growth[0].kind == "stream-ordered");
}
