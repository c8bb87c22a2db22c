// report/render/html_bands.h: the HTML page's level of detail (the largest
// allocations as bands, the rest aggregated), its exact peak and moments,
// and the step axis.
#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "report/render/html_bands.h"

using namespace torchseal;
using nlohmann::json;

namespace {

BandAlloc alloc(uint64_t t0, uint64_t t1, uint64_t size, StackId stack) {
  BandAlloc a;
  a.t0 = t0;
  a.t1 = t1;
  a.size = size;
  a.stack = stack;
  a.api = ApiId::cudaMalloc;
  a.device = 0;
  return a;
}

struct Fixture {
  BandHistory h;
  Report report;
  Fixture() {
    h.t0 = 1000;
    h.t_end = 2000;
    h.symbols[0x10] = {NativeFrame{"big_site", "/src/a.cpp", 3, "/app", 0x10}};
    // A name that would end the page's <script> element if not escaped.
    h.symbols[0x20] = {NativeFrame{"small_site</script><b>&", "/src/b.cpp", 4, "/app", 0x20}};
    h.stacks[1] = {0x10};
    h.stacks[2] = {0x20};
    h.allocs = {alloc(1100, 1500, 4096, 1), alloc(1200, 0, 8192, 1), alloc(1300, 1400, 100, 2),
                alloc(1350, 1450, 200, 2)};
    h.steps = {{1250, 1}, {1600, 2}, {1900, 3}};
    h.windows = {{1500, 7}};
    h.moments.push_back({1320, "OOM: 1 GiB requested", 'o'});
  }
  json run(size_t bands) {
    BandLimits lim;
    lim.bands = bands;
    lim.buckets = 10;
    std::string s = bands_json(h, report, lim);
    CHECK(s.find_first_of("<>&") == std::string::npos);
    return json::parse(s);
  }
};

}  // namespace

TEST_CASE("the largest allocations are bands, the rest one aggregate", "[html]") {
  Fixture f;
  json d = f.run(2);
  REQUIRE(d["bands"].size() == 2);
  // Time order, relative to the first event; -1 = live at the end.
  CHECK(d["bands"][0][0] == 100);
  CHECK(d["bands"][0][1] == 500);
  CHECK(d["bands"][0][2] == 4096);
  CHECK(d["bands"][1][1] == -1);
  CHECK(d["bands"][1][2] == 8192);
  CHECK(d["allocs"] == 4);
  uint64_t rest_max = 0;
  for (auto &v : d["rest"]) rest_max = std::max<uint64_t>(rest_max, v.get<uint64_t>());
  CHECK(rest_max == 300);  // the two small ones overlap in [1350, 1400)
  // The band's stack: symbolized, the user's frame first.
  const json &st = d["stacks"][d["bands"][0][3].get<size_t>()];
  CHECK(st["l"][0].get<std::string>().find("big_site") == 0);
  CHECK(st["u"] == 0);
  bool escaped_name_kept = false;
  for (auto &e : d["stacks"]) {
    escaped_name_kept |= e["l"][0].get<std::string>().find("small_site</script><b>&") == 0;
  }
  CHECK(escaped_name_kept);
}

TEST_CASE("the peak and the OOM moment are exact, per site", "[html]") {
  Fixture f;
  json d = f.run(1500);
  CHECK(d["bands"].size() == 4);
  CHECK(d["rest"].size() == 11);
  // Live at 1350..1400: 4096 + 8192 + 100 + 200.
  CHECK(d["peak"][0] == 350);
  CHECK(d["peak"][1] == 12588);
  // Snapshots: peak, end, then each OOM; per site series index.
  REQUIRE(d["snapshots"].size() == 3);
  uint64_t at_oom = 0;
  for (auto &p : d["snapshots"][2]["v"]) at_oom += p[1].get<uint64_t>();
  CHECK(d["snapshots"][2]["t"] == 320);
  CHECK(at_oom == 4096 + 8192 + 100);
  uint64_t at_end = 0;
  for (auto &p : d["snapshots"][1]["v"]) at_end += p[1].get<uint64_t>();
  CHECK(at_end == 8192);
}

TEST_CASE("the x axis uses step marks when there are any, else time windows", "[html]") {
  Fixture f;
  json d = f.run(10);
  CHECK(d["stepKind"] == "step");
  CHECK(d["steps"].size() == 3);
  CHECK(d["steps"][0] == json::array({250, 1}));
  f.h.steps.clear();
  d = f.run(10);
  CHECK(d["stepKind"] == "window");
  CHECK(d["steps"] == json::array({json::array({500, 7})}));
}
