// The shim's exit path end to end, in-process: real stacks from this binary,
// symbolize + analyze + write, then read P.json back.
#include <catch2/catch.hpp>

#include <execinfo.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "common/symbols/module_map.h"
#include "report/render/produce_report.h"
#include "report/render/report_json.h"
#include "report/render/report_text.h"

namespace e2e {

__attribute__((noinline)) std::vector<uint64_t> capture() {
  void *buf[64];
  int n = backtrace(buf, 64);
  // Start at our caller, as the shim starts past its own frames. Where that
  // is in the buffer depends on the unwinder (sanitizers intercept
  // backtrace), so find it rather than assume an index.
  void *caller = __builtin_return_address(0);
  int first = 0;
  while (first < n && buf[first] != caller) ++first;
  if (first == n) first = 0;
  std::vector<uint64_t> out;
  for (int i = first; i < n; ++i) out.push_back(reinterpret_cast<uint64_t>(buf[i]));
  return out;
}

__attribute__((noinline)) std::vector<uint64_t> leaky_site(int *line) {
  *line = __LINE__ + 1;
  std::vector<uint64_t> s = capture();
  return s;
}

}  // namespace e2e

using namespace torchseal;

TEST_CASE("produce_report writes a report that reads back with the same leak set", "[e2e]") {
  char tmpl[] = "/tmp/torchseal-e2e-XXXXXX";
  REQUIRE(mkdtemp(tmpl) != nullptr);
  std::string dir = tmpl;

  int line = 0;
  AnalysisInput in;
  in.process.pid = getpid();
  in.process.argv = {"report_unit_tests"};
  in.modules = capture_module_map();
  in.stacks.native = {{}, e2e::leaky_site(&line)};
  in.stacks.python = {{}, {{"<module>", "train.py", 9}}};
  for (int i = 0; i < 3; ++i) {
    LiveAlloc a;
    a.addr = 0x1000 * (i + 1);
    a.size = 1000;
    a.stack = 1;
    a.pystack = 1;
    a.api = ApiId::cudaMallocAsync;
    a.family = Family::StreamOrdered;
    a.device = 0;
    in.live.push_back(a);
  }
  in.events = 3;
  in.peak_bytes = 3000;

  Report written;
  std::string error;
  std::string prefix = dir + "/torchseal-e2e";
  REQUIRE(produce_report(in, prefix, AnalysisOptions{}, &written, error));
  REQUIRE(written.leaks.size() == 1);
  CHECK(written.leaks[0].frames[0].function == "e2e::leaky_site(int*)");
  CHECK(written.leaks[0].frames[0].line == line);

  Report back;
  REQUIRE(read_report_file(prefix + ".json", back, error));
  REQUIRE(back.leaks.size() == 1);
  CHECK(back.leaks[0].kind == "stream-ordered");
  CHECK(back.leaks[0].bytes == 3000);
  CHECK(back.leaks[0].allocations == 3);
  CHECK(back.leaks[0].frames[0].function == "e2e::leaky_site(int*)");
  CHECK(back.summary.leaked_bytes == 3000);

  std::ifstream txt(prefix + ".txt");
  std::stringstream ss;
  ss << txt.rdbuf();
  // The CLI prints a stored report with the same code that wrote P.txt.
  CHECK(ss.str() == report_to_text(back));
  std::system(("rm -rf '" + dir + "'").c_str());
}

TEST_CASE("produce_report reports an unwritable prefix as an error", "[e2e]") {
  AnalysisInput in;
  std::string error;
  Report r;
  CHECK_FALSE(produce_report(in, "/nonexistent-dir/p", AnalysisOptions{}, &r, error));
  CHECK(error.find("/nonexistent-dir/p.json") != std::string::npos);
}
