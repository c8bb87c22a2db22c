#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "report/render/report_json.h"

using namespace torchseal;

namespace {

Report sample_report() {
  Report r;
  r.trigger = "signal";
  r.process.pid = 4242;
  r.process.argv = {"./train", "--epochs", "3"};
  r.process.rank = 1;
  r.process.hostname = "node7";
  r.process.start_time = 1700000000.5;
  r.process.end_time = 1700000100.25;
  r.process.backend = "cupti";
  r.process.python = "3.12.1";
  r.summary = {1024, 2, 1, 4096, 10, 8, 512, {10, 0.125}};
  LeakEntry l;
  l.kind = "stream-ordered";
  l.api = "cudaMallocAsync";
  l.device = 0;
  l.bytes = 1024;
  l.allocations = 2;
  l.detected_at = "context-teardown";
  l.frames = {NativeFrame{"ns::make(int)", "/src/a.cpp", 12, "/app", 0x401234},
              NativeFrame{"", "", 0, "", 0xffffffff81000000ull}};
  l.python_frames = {{"step", "train.py", 7}};
  r.leaks.push_back(l);
  r.growth.push_back({64.5, 6400, 100, 0.99, "device", "cudaMalloc", l.frames, {}, std::nullopt});
  OomEntry o;
  o.api = "cudaMalloc";
  o.requested_bytes = 1ull << 40;
  o.device = -1;
  o.live_bytes = 99;
  o.frames = l.frames;
  o.top_sites.push_back({99, 3, l.frames, l.python_frames});
  r.ooms.push_back(o);
  r.invalid_frees.push_back({"cudaFree", 0xdeadbeef, l.frames, {}});
  return r;
}

void check_frames_equal(const std::vector<NativeFrame> &a, const std::vector<NativeFrame> &b) {
  REQUIRE(a.size() == b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    CHECK(a[i].function == b[i].function);
    CHECK(a[i].file == b[i].file);
    CHECK(a[i].line == b[i].line);
    CHECK(a[i].module == b[i].module);
    CHECK(a[i].address == b[i].address);
  }
}

std::string read_error(const std::string &text) {
  Report r;
  std::string error;
  CHECK_FALSE(report_from_json(text, r, error));
  CHECK(error.find('\n') == std::string::npos);
  CHECK_FALSE(error.empty());
  return error;
}

}  // namespace

TEST_CASE("JSON uses the contract keys and spellings", "[json]") {
  auto j = nlohmann::json::parse(report_to_json(sample_report()));
  CHECK(j["format"] == "torchseal-report");
  CHECK(j["version"] == 1);
  for (const char *k : {"trigger", "process", "summary", "leaks", "growth", "ooms", "invalid_frees"})
    CHECK(j.contains(k));
  for (const char *k : {"pid", "argv", "rank", "hostname", "start_time", "end_time", "backend", "python"})
    CHECK(j["process"].contains(k));
  for (const char *k : {"leaked_bytes", "leaked_allocations", "leak_sites", "peak_bytes", "events",
                        "suppressed_bytes", "cached_bytes", "overhead"})
    CHECK(j["summary"].contains(k));
  CHECK(j["summary"]["overhead"].contains("seconds_in_torchseal"));
  const auto &frame = j["leaks"][0]["frames"][0];
  CHECK(frame["function"] == "ns::make(int)");
  CHECK(frame["address"] == "0x401234");
  const auto &bare = j["leaks"][0]["frames"][1];
  CHECK(bare["file"].is_null());
  CHECK(bare["line"].is_null());
  CHECK(j["leaks"][0]["python_frames"][0] == nlohmann::json({{"function", "step"}, {"file", "train.py"}, {"line", 7}}));
  CHECK(j["ooms"][0]["device"].is_null());
  CHECK(j["ooms"][0]["top_sites"][0].contains("allocations"));
  CHECK(j["invalid_frees"][0]["address"] == "0xdeadbeef");
}

TEST_CASE("JSON write then read round-trips", "[json]") {
  Report a = sample_report();
  Report b;
  std::string error;
  REQUIRE(report_from_json(report_to_json(a), b, error));
  CHECK(error.empty());
  CHECK(b.trigger == a.trigger);
  CHECK(b.process.pid == a.process.pid);
  CHECK(b.process.argv == a.process.argv);
  CHECK(b.process.rank == a.process.rank);
  CHECK(b.process.hostname == a.process.hostname);
  CHECK(b.process.start_time == a.process.start_time);
  CHECK(b.process.python == a.process.python);
  CHECK(b.summary.leaked_bytes == a.summary.leaked_bytes);
  CHECK(b.summary.suppressed_bytes == 8);
  CHECK(b.summary.cached_bytes == 512);
  CHECK(b.summary.overhead.seconds_in_torchseal == a.summary.overhead.seconds_in_torchseal);
  REQUIRE(b.leaks.size() == 1);
  CHECK(b.leaks[0].kind == "stream-ordered");
  CHECK(b.leaks[0].detected_at == "context-teardown");
  check_frames_equal(b.leaks[0].frames, a.leaks[0].frames);
  REQUIRE(b.leaks[0].python_frames.size() == 1);
  CHECK(b.leaks[0].python_frames[0].file == "train.py");
  REQUIRE(b.growth.size() == 1);
  CHECK(b.growth[0].bytes_per_step == 64.5);
  REQUIRE(b.ooms.size() == 1);
  CHECK(b.ooms[0].device == -1);
  CHECK(b.ooms[0].requested_bytes == (1ull << 40));
  REQUIRE(b.ooms[0].top_sites.size() == 1);
  CHECK(b.ooms[0].top_sites[0].allocations == 3);
  REQUIRE(b.invalid_frees.size() == 1);
  CHECK(b.invalid_frees[0].address == 0xdeadbeef);
  // And the text is stable through a second trip.
  CHECK(report_to_json(b) == report_to_json(a));
}

TEST_CASE("the reader rejects what is not a version-1 report, in one line", "[json]") {
  CHECK(read_error("{\"hello\": 1}").find("not a torchseal report") != std::string::npos);
  CHECK(read_error("[1,2,3]").find("not a torchseal report") != std::string::npos);
  CHECK(read_error("").find("malformed JSON") != std::string::npos);

  auto j = nlohmann::json::parse(report_to_json(sample_report()));
  j["version"] = 2;
  CHECK(read_error(j.dump()).find("unsupported report version 2") != std::string::npos);

  std::string full = report_to_json(sample_report());
  CHECK(read_error(full.substr(0, full.size() / 2)).find("malformed JSON") != std::string::npos);

  j = nlohmann::json::parse(full);
  j["leaks"][0]["bytes"] = "lots";
  CHECK(read_error(j.dump()) == "leaks[0].bytes: expected an unsigned integer");
  j = nlohmann::json::parse(full);
  j["leaks"][0]["frames"][0].erase("address");
  CHECK(read_error(j.dump()) == "leaks[0].frames[0].address: missing");
  j = nlohmann::json::parse(full);
  j["leaks"][0]["kind"] = "gpu";
  CHECK(read_error(j.dump()).find("leaks[0].kind: unknown value") == 0);
  j = nlohmann::json::parse(full);
  j["invalid_frees"][0]["address"] = "0xZZ";
  CHECK(read_error(j.dump()).find("invalid_frees[0].address") == 0);
  j = nlohmann::json::parse(full);
  j["summary"].erase("overhead");
  CHECK(read_error(j.dump()) == "summary.overhead: missing");

  CHECK(read_error(std::string(100000, '[')).find("nested too deeply") != std::string::npos);
}

TEST_CASE("read_report_file names the file in its errors", "[json]") {
  Report r;
  std::string error;
  CHECK_FALSE(read_report_file("/nonexistent/x.json", r, error));
  CHECK(error.find("/nonexistent/x.json") != std::string::npos);
  CHECK_FALSE(read_report_file("/", r, error));
  CHECK(error == "/: not a regular file");
}

TEST_CASE("damaged reports never crash the reader", "[json]") {
  const std::string full = report_to_json(sample_report());
  Report r;
  std::string error;
  // Every truncation point, and a deterministic spray of byte edits.
  for (size_t n = 0; n + 1 < full.size(); ++n) {  // the last byte is the trailing newline
    error.clear();
    CHECK_FALSE(report_from_json(std::string_view(full).substr(0, n), r, error));
    CHECK_FALSE(error.empty());
  }
  uint32_t seed = 12345;
  auto next = [&seed] { return seed = seed * 1103515245u + 12345u; };
  const char edits[] = {'"', '{', '}', '[', ']', ',', ':', '-', '0', 'x', '\\', '\0', '9', 'n'};
  size_t accepted = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string s = full;
    for (int k = 0; k < 3; ++k) s[next() % s.size()] = edits[next() % sizeof edits];
    error.clear();
    if (report_from_json(s, r, error)) {
      ++accepted;  // an edit inside a string value can leave a valid report
    } else {
      CHECK(error.find('\n') == std::string::npos);
    }
  }
  CHECK(accepted < 3000);
}

TEST_CASE("hint: null or {kind, message, file, line} on growth and OOM entries", "[json]") {
  Report a = sample_report();
  a.growth[0].hint = Hint{"tensor-append", "`out.append(y)` (t.py:9) keeps ...", "/w/t.py", 9};
  auto j = nlohmann::json::parse(report_to_json(a));
  CHECK(j["growth"][0]["hint"] == nlohmann::json({{"kind", "tensor-append"},
                                                  {"message", "`out.append(y)` (t.py:9) keeps ..."},
                                                  {"file", "/w/t.py"},
                                                  {"line", 9}}));
  CHECK(j["ooms"][0].contains("hint"));
  CHECK(j["ooms"][0]["hint"].is_null());
  Report b;
  std::string error;
  REQUIRE(report_from_json(report_to_json(a), b, error));
  CHECK(b.growth[0].hint == a.growth[0].hint);
  CHECK_FALSE(b.ooms[0].hint);
  // Reports written before the key existed read as "no hint".
  j["growth"][0].erase("hint");
  REQUIRE(report_from_json(j.dump(), b, error));
  CHECK_FALSE(b.growth[0].hint);
  j["growth"][0]["hint"] = {{"kind", "x"}};
  CHECK(read_error(j.dump()).find("growth[0].hint.message") != std::string::npos);
}
