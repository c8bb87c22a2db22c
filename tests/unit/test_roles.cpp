// docs/roles.md: memory by role, from the shim's snapshot to the report.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include <numeric>

#include "common/format/records.h"
#include "report/analysis/analysis.h"
#include "report/analysis/roles.h"
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
    in.torch_process = in.torch_caching_allocator = true;
    // Stack 1: the caching allocator's segment; 2: a raw cudaMalloc of the
    // program's; 3: cuBLAS's own allocation for PyTorch's handle.
    sym.preload(0x1000, {NativeFrame{"c10::cuda::CUDACachingAllocator::malloc", "/src/c.cpp", 1,
                                     "/lib/libc10_cuda.so", 0x1000}});
    sym.preload(0x2000, {NativeFrame{"main", "/src/app.cpp", 2, "/app", 0x2000}});
    sym.preload(0x3000, {NativeFrame{"cublasCreate_v2", "", 0, "/lib/libcublas.so.13", 0x3000}});
    sym.preload(0x3100, {NativeFrame{"at::cuda::getCurrentCUDABlasHandle", "", 0,
                                     "/lib/libtorch_cuda.so", 0x3100}});
    in.stacks.native.push_back({0x1000});
    in.stacks.native.push_back({0x2000});
    in.stacks.native.push_back({0x3000, 0x3100});
  }
  void live(uint64_t addr, uint64_t size, StackId s) {
    LiveAlloc a;
    a.addr = addr;
    a.size = size;
    a.stack = s;
    a.api = ApiId::cudaMalloc;
    a.family = Family::Device;
    a.device = 0;
    in.live.push_back(a);
  }
  void held(uint64_t addr, uint64_t bytes, MemoryRole role, int32_t module = -1) {
    uint32_t chain = static_cast<uint32_t>(in.holders.chains.size());
    in.holders.chains.push_back({"global 'x' (list) in t.py", "[0]", "Tensor"});
    in.holders.storages.push_back({addr, bytes, chain, role, module});
  }
};

uint64_t bytes_of(const RoleSplit &s, const char *role) {
  for (const RoleEntry &e : s.roles)
    if (e.role == role) return e.bytes;
  FAIL("no role " << role);
  return 0;
}

uint64_t sum(const RoleSplit &s) {
  return std::accumulate(s.roles.begin(), s.roles.end(), uint64_t{0},
                         [](uint64_t t, const RoleEntry &e) { return t + e.bytes; });
}

}  // namespace

TEST_CASE("a snapshot splits the live set by role and adds up", "[roles]") {
  Fixture f;
  f.in.trigger = "api";
  f.in.holders.done = true;
  f.in.holders.modules = {"GPT"};
  f.live(0x100000, 4 << 20, 1);  // a segment: parameters, a gradient, free cache
  f.live(0x900000, 3 << 20, 2);  // the program's own cudaMalloc
  f.live(0xd00000, 1 << 20, 3);  // cuBLAS's
  f.held(0x100000, 1 << 20, MemoryRole::Parameters, 0);
  f.held(0x200000, 1 << 20, MemoryRole::Gradients, 0);
  f.held(0x300000, 512 << 10, MemoryRole::UserHeld);
  f.in.holders.allocator_stats = true;
  f.in.holders.torch_allocated = (2 << 20) + (512 << 10) + (256 << 10);  // + a temporary
  f.in.roles_now = role_snapshot(f.in, "dump", 3, 0);
  CHECK(f.in.roles_now.live_bytes == 8u << 20);

  Report r = analyze(f.in, f.sym);
  const RoleSplit &s = r.roles;
  REQUIRE(s.roles.size() == kRoles);
  CHECK(s.at == "dump");
  CHECK(s.step == 3);
  CHECK(bytes_of(s, "parameters") == 1u << 20);
  CHECK(bytes_of(s, "gradients") == 1u << 20);
  CHECK(bytes_of(s, "user_held") == 512u << 10);
  CHECK(bytes_of(s, "other_tensors") == 256u << 10);
  CHECK(bytes_of(s, "free_cache") == (4u << 20) - (2u << 20) - (512u << 10) - (256u << 10));
  CHECK(bytes_of(s, "outside_framework") == 3u << 20);
  CHECK(bytes_of(s, "library_held") == 1u << 20);
  CHECK(sum(s) == s.live_bytes);
  REQUIRE(s.roles[0].modules.size() == 1);
  CHECK(s.roles[0].modules[0].name == "GPT");
  REQUIRE(s.roles[9].sites.size() == 1);
  CHECK(s.roles[9].sites[0].frames.at(0).function == "main");
  CHECK(s.roles[5].holders.at(0).chain.at(0) == "global 'x' (list) in t.py");

  SECTION("P.json carries it and reads it back") {
    std::string text = report_to_json(r);
    auto j = nlohmann::json::parse(text);
    // DESIGN's spelling: `roles` holds role entries only, each with bytes and
    // tensors, so a reader adds its values up to the scan's live total.
    const auto &roles = j["roles"];
    CHECK(roles["parameters"]["bytes"] == 1u << 20);
    CHECK(roles["parameters"]["tensors"] == 1);
    CHECK(roles["outside_framework"]["allocations"] == 1);
    CHECK(roles["outside_framework"]["tensors"] == 0);
    CHECK(roles["library_held"]["bytes"] == 1u << 20);
    uint64_t total = 0;
    for (const auto &[name, role] : roles.items()) {
      CHECK(role.contains("tensors"));
      total += role["bytes"].get<uint64_t>();
    }
    CHECK(total == j["roles_scan"]["live_bytes"]);
    CHECK(j["roles_scan"]["at"] == "dump");
    CHECK(j["roles_scan"]["step"] == 3);
    CHECK(j["roles_scan"]["before_tracking"] == false);
    CHECK(j["roles_scan"].contains("torch_reserved_bytes") == s.allocator_stats);
    Report back;
    std::string error;
    REQUIRE(report_from_json(text, back, error));
    CHECK(back.roles.live_bytes == s.live_bytes);
    CHECK(bytes_of(back.roles, "free_cache") == bytes_of(s, "free_cache"));
    CHECK(back.roles.roles[0].modules.at(0).name == "GPT");
  }
  SECTION("the peak's split is summary.peak_roles, and reads back") {
    r.peak_roles = r.roles;
    r.peak_roles.at = "step";
    std::string text = report_to_json(r);
    auto j = nlohmann::json::parse(text);
    CHECK(j["summary"]["peak_roles"]["parameters"]["bytes"] == 1u << 20);
    CHECK(j["summary"]["peak_roles_scan"]["at"] == "step");
    Report back;
    std::string error;
    REQUIRE(report_from_json(text, back, error));
    CHECK(back.peak_roles.live_bytes == s.live_bytes);
    CHECK(bytes_of(back.peak_roles, "user_held") == 512u << 10);
  }
  SECTION("the HTML page draws the split, and a bar per step scan") {
    r.role_steps = {r.roles, r.roles};
    HtmlReportInput hin;
    hin.report = &r;
    hin.no_timeline = "no history";
    std::string html = render_html_report(hin);
    CHECK(html.find("<h2>Memory by role</h2>") != std::string::npos);
    CHECK(html.find("At this report&#39;s scan (dump): 8.00 MiB live") != std::string::npos);
    CHECK(html.find("<title>step 3: parameters 1.00 MiB</title>") != std::string::npos);
    // A report without a split draws none, and carries none of its style.
    Report plain;
    hin.report = &plain;
    std::string none = render_html_report(hin);
    CHECK(none.find("Memory by role") == std::string::npos);
    CHECK(none.find("svg.roles") == std::string::npos);
  }
  SECTION("P.txt has its table") {
    std::string text = report_to_text(r);
    CHECK(text.find("Memory by role at the report's scan (step 3), 8.0 MiB live:") !=
          std::string::npos);
    CHECK(text.find("Memory from before tracking started") == std::string::npos);
  }
  SECTION("a split taken after tracking began late says what it counts of the older memory") {
    // The split's own flag decides, not the trigger: an interval's stop
    // report whose split is from before the start says nothing...
    r.trigger = "stop";
    CHECK(report_to_text(r).find("Memory from before tracking started") == std::string::npos);
    // ...and an open interval reported at exit, or an attach's snapshot, do.
    r.trigger = "exit";
    r.roles.before_tracking = true;
    std::string text = report_to_text(r);
    CHECK(text.find("\n  Memory from before tracking started (torchseal.start() or the attach) is "
                    "in\n  the split as the tensors Python objects hold and, with PyTorch's "
                    "caching\n  allocator, the rest of its cache; other older memory is not.\n") !=
          std::string::npos);
    HtmlReportInput hin;
    hin.report = &r;
    hin.no_timeline = "no history";
    std::string html = render_html_report(hin);
    CHECK(html.find("<p>Memory from before tracking started") != std::string::npos);
    CHECK(html.find("other older memory is not.</p>") != std::string::npos);
    // P.json says which split it is, and reads it back.
    auto j = nlohmann::json::parse(report_to_json(r));
    CHECK(j["roles_scan"]["before_tracking"] == true);
    Report back;
    std::string error;
    REQUIRE(report_from_json(report_to_json(r), back, error));
    CHECK(back.roles.before_tracking);
    CHECK(report_to_text(back).find("Memory from before tracking started") != std::string::npos);
    // Only a split the page shows counts: a recovered OOM's is in the text
    // (its lead line) but not in the HTML.
    r.roles.before_tracking = false;
    OomEntry oom;
    oom.recovered = true;
    oom.roles = r.roles;
    oom.roles.before_tracking = true;
    r.ooms.push_back(oom);
    CHECK(report_to_text(r).find("Memory from before tracking started") != std::string::npos);
    CHECK(render_html_report(hin).find("<p>Memory from before tracking started") ==
          std::string::npos);
    r.ooms.clear();
    r.roles = RoleSplit{};
    r.peak_roles = RoleSplit{};
    CHECK(report_to_text(r).find("Memory from before tracking started") == std::string::npos);
  }
}

TEST_CASE("after an attach the split counts the older tensors Python holds, once each", "[roles]") {
  Fixture f;
  f.in.trigger = "stop";
  f.in.holders.done = true;
  f.in.holders.modules = {"Net"};
  f.live(0x100000, 4 << 20, 1);  // a segment allocated since the attach
  f.held(0x100000, 1 << 20, MemoryRole::UserHeld);
  // In segments from before the attach, which the shim never saw:
  f.held(0x7000000, 2 << 20, MemoryRole::Parameters, 0);
  f.held(0x7200000, 2 << 20, MemoryRole::OptimizerState, 0);
  f.held(0x7400000, 1 << 20, MemoryRole::UserHeld);
  f.in.holders.allocator_stats = true;
  // PyTorch counts every tensor: the older ones, and the new segment's one.
  f.in.holders.torch_allocated = (6u << 20);

  RoleSnapshot without = role_snapshot(f.in, "dump", 0, 0);
  CHECK(without.live_bytes == 4u << 20);
  f.in.roles_now = role_snapshot(f.in, "dump", 0, 0, true);
  CHECK(f.in.roles_now.live_bytes == 9u << 20);

  Report r = analyze(f.in, f.sym);
  const RoleSplit &s = r.roles;
  CHECK(bytes_of(s, "parameters") == 2u << 20);
  CHECK(bytes_of(s, "optimizer_state") == 2u << 20);
  CHECK(bytes_of(s, "user_held") == 2u << 20);
  // The new segment's unfound 3 MiB are free: the older tensors are not
  // taken for temporaries in it.
  CHECK(bytes_of(s, "other_tensors") == 0);
  CHECK(bytes_of(s, "free_cache") == 3u << 20);
  CHECK(bytes_of(s, "outside_framework") == 0);
  CHECK(sum(s) == s.live_bytes);
  CHECK(s.live_bytes == 9u << 20);
  CHECK(s.before_tracking);
  std::string text = report_to_text(r);
  CHECK(text.find("Memory by role at the report's scan, 9.0 MiB live:") != std::string::npos);

  SECTION("PyTorch's reserved count gives the older segments' rest: free cache, temporaries") {
    // Reserved: the tracked segment, the older tensors' 5 MiB and 2 MiB
    // more in older segments, of which a 512 KiB temporary.
    AnalysisInput in = f.in;
    in.holders.torch_reserved = 11u << 20;
    in.holders.torch_allocated = (6u << 20) + (512u << 10);
    in.roles_now = role_snapshot(in, "dump", 0, 0, true);
    Report older = analyze(in, f.sym);
    const RoleSplit &o = older.roles;
    CHECK(o.live_bytes == 11u << 20);
    CHECK(sum(o) == o.live_bytes);
    CHECK(bytes_of(o, "other_tensors") == 512u << 10);
    CHECK(bytes_of(o, "free_cache") == (5u << 20) - (512u << 10));
    CHECK(bytes_of(o, "user_held") == 2u << 20);
    // P.json gives PyTorch's counts beside the total, for a reader to check
    // the split against: here the whole cache.
    auto j = nlohmann::json::parse(report_to_json(older));
    CHECK(j["roles_scan"]["torch_reserved_bytes"] == 11u << 20);
    CHECK(j["roles_scan"]["torch_allocated_bytes"] == (6u << 20) + (512u << 10));
    CHECK(j["roles_scan"]["live_bytes"] == 11u << 20);
    // The peak is ranked by what the split will count: a full older cache
    // (9 MiB live set, 11 MiB reserved) outranks a later snapshot with more
    // live but less reserved.
    RoleSnapshot full = in.roles_now, later = in.roles_now;
    later.live_bytes = 10u << 20;
    later.torch_reserved = 10u << 20;
    CHECK(role_peak_measure(full) == 11u << 20);
    CHECK(role_peak_measure(later) < role_peak_measure(full));
    later.allocator_stats = false;
    CHECK(role_peak_measure(later) == 10u << 20);
    // A snapshot that did not start after tracking began counts no older cache.
    in.roles_now = role_snapshot(in, "dump", 0, 0, false);
    CHECK(analyze(in, f.sym).roles.live_bytes == 4u << 20);
    // Older segments that hold no tensor Python reaches are counted too.
    in.holders.storages.resize(1);  // the tracked segment's tensor only
    in.holders.torch_reserved = 6u << 20;
    in.holders.torch_allocated = 1u << 20;
    in.roles_now = role_snapshot(in, "dump", 0, 0, true);
    Report bare = analyze(in, f.sym);
    CHECK(bare.roles.live_bytes == 6u << 20);
    CHECK(bytes_of(bare.roles, "free_cache") == 5u << 20);
  }
  // The history's Verdict keeps the older tensors' site as it is.
  tseal::VerdictRecord v;
  v.roles_now = f.in.roles_now;
  std::vector<uint8_t> bytes;
  tseal::ByteWriter w(bytes);
  v.encode(w);
  tseal::ByteReader rd(bytes.data(), bytes.size());
  tseal::VerdictRecord back;
  REQUIRE(back.decode(rd));
  REQUIRE(back.roles_now.sites.size() == 2);
  CHECK(back.roles_now.sites[1].api == ApiId::Unknown);
  CHECK(back.roles_now.sites[1].found_bytes == 5u << 20);
  CHECK(back.roles_now.live_bytes == 9u << 20);
}

TEST_CASE("an OOM's split adds up to the OOM's live total and leads its entry", "[roles]") {
  Fixture f;
  f.in.holders.done = true;
  f.live(0x100000, 4 << 20, 1);
  f.held(0x100000, 3 << 20, MemoryRole::UserHeld);
  OomRecord o;
  o.api = ApiId::cudaMalloc;
  o.requested = 8 << 20;
  o.live_bytes = 6 << 20;  // the allocator released 2 MiB of free segments in its retry
  o.roles = role_snapshot(f.in, "oom", 0, 0);
  f.in.ooms.push_back(o);
  Report r = analyze(f.in, f.sym);
  REQUIRE(r.ooms.size() == 1);
  const RoleSplit &s = r.ooms[0].roles;
  CHECK(s.live_bytes == 6u << 20);
  CHECK(sum(s) == 6u << 20);
  CHECK(bytes_of(s, "free_cache") == 3u << 20);
  auto j = nlohmann::json::parse(report_to_json(r));
  const auto &oom = j["ooms"][0];
  uint64_t total = 0;
  for (const auto &[name, role] : oom["roles"].items()) total += role["bytes"].get<uint64_t>();
  CHECK(total == oom["live_bytes"]);
  CHECK(oom["roles_scan"]["live_bytes"] == oom["live_bytes"]);
  CHECK(oom["roles"]["user_held"]["holders"][0]["chain"][0] == "global 'x' (list) in t.py");
  std::string text = report_to_text(r);
  CHECK(text.find("Out of memory asking 8.0 MiB with 6.0 MiB live: held by global 'x' (list) in "
                  "t.py 3.0, free cache 3.0 (MiB)\nOut of memory: cudaMalloc") != std::string::npos);
  CHECK(text.find("Memory from before tracking started") == std::string::npos);

  SECTION("after an attach: the split also counts older memory, and its lead says so") {
    // A 2 MiB tensor from before the attach: the split's total passes the
    // OOM's tracked live total, which the entry keeps.
    f.held(0x9000000, 2 << 20, MemoryRole::Parameters);
    f.in.ooms[0].roles = role_snapshot(f.in, "oom", 0, 0, true);
    Report late = analyze(f.in, f.sym);
    const RoleSplit &l = late.ooms.at(0).roles;
    CHECK(l.before_tracking);
    CHECK(l.live_bytes == 6u << 20);  // 4 tracked + 2 older: no alignment needed
    CHECK(sum(l) == l.live_bytes);
    auto lj = nlohmann::json::parse(report_to_json(late));
    CHECK(lj["ooms"][0]["roles_scan"]["before_tracking"] == true);
    std::string lt = report_to_text(late);
    CHECK(lt.find("Out of memory asking 8.0 MiB with 6.0 MiB live (memory from before tracking "
                  "included): ") != std::string::npos);
    CHECK(lt.find("Memory from before tracking started") != std::string::npos);
  }
}
