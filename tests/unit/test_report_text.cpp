#include <catch2/catch.hpp>

#include <unistd.h>

#include <sstream>

#include "report/render/report_text.h"

using namespace torchseal;

namespace {

std::vector<std::string> lines(const std::string &s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

}  // namespace

TEST_CASE("text report: LeakSanitizer first and last lines", "[text]") {
  Report r;
  r.process.pid = 777;
  LeakEntry l;
  l.kind = "device";
  l.api = "cudaMalloc";
  l.device = 0;
  l.bytes = 4096;
  l.allocations = 2;
  l.frames = {NativeFrame{"leaky(int)", "/src/leak.cpp", 14, "/bin/leak", 0x401a2b},
              NativeFrame{"", "", 0, "/lib/libx.so", 0x7f0000001000}};
  l.python_frames = {{"train", "/w/train.py", 33}};
  r.leaks.push_back(l);
  l.detected_at = "context-teardown";
  l.bytes = 16;
  l.allocations = 1;
  l.python_frames.clear();
  r.leaks.push_back(l);
  r.summary.leaked_bytes = 4112;
  r.summary.leaked_allocations = 3;
  r.invalid_frees.push_back({"cudaFree", 0x1234, {}, {}});

  std::string text = report_to_text(r);
  auto ls = lines(text);
  REQUIRE(ls.size() > 4);
  CHECK(ls.front() == "==777==torchseal: detected memory leaks");
  CHECK(ls.back() == "SUMMARY: torchseal: 4112 byte(s) leaked in 3 allocation(s).");
  CHECK(text.back() == '\n');
  CHECK(text.find("Direct leak of 4096 byte(s) in 2 allocation(s) (device, cudaMalloc, device 0) "
                  "allocated from:\n"
                  "    #py0 in train /w/train.py:33\n"
                  "    #0 0x401a2b in leaky(int) /src/leak.cpp:14 (/bin/leak)\n"
                  "    #1 0x7f0000001000 in ?? (/lib/libx.so)\n") != std::string::npos);
  CHECK(text.find("Direct leak of 16 byte(s) in 1 allocation(s) (device, cudaMalloc, device 0) "
                  "still live at context teardown, allocated from:") != std::string::npos);
  CHECK(text.find("Invalid free: cudaFree of 0x1234") != std::string::npos);
}

TEST_CASE("text report: source files under the working directory are shown relative to it",
          "[text]") {
  char buf[4096];
  REQUIRE(getcwd(buf, sizeof buf) != nullptr);
  const std::string cwd = buf;
  Report r;
  r.process.pid = 9;
  LeakEntry l;
  l.kind = "device";
  l.api = "cudaMalloc";
  l.bytes = 8;
  l.allocations = 1;
  l.frames = {NativeFrame{"f()", cwd + "/examples/x.cpp", 7, "/bin/x", 0x10},
              NativeFrame{"g()", "/elsewhere/y.cpp", 3, "/bin/x", 0x20},
              NativeFrame{"h()", cwd + "-sibling/z.cpp", 5, "/bin/x", 0x30}};
  r.leaks.push_back(l);
  std::string text = report_to_text(r);
  CHECK(text.find(" in f() examples/x.cpp:7 (") != std::string::npos);
  CHECK(text.find(" in g() /elsewhere/y.cpp:3 (") != std::string::npos);
  CHECK(text.find(" in h() " + cwd + "-sibling/z.cpp:5 (") != std::string::npos);
}

TEST_CASE("text report without leaks", "[text]") {
  Report r;
  r.process.pid = 5;
  r.summary.cached_bytes = 1 << 20;
  auto ls = lines(report_to_text(r));
  CHECK(ls.front() == "==5==torchseal: no leaks detected");
  CHECK(ls.back() == "SUMMARY: torchseal: 0 byte(s) leaked in 0 allocation(s).");
  bool cached_line = false;
  for (const auto &l : ls) cached_line |= l.find("1048576 byte(s) held by PyTorch") != std::string::npos;
  CHECK(cached_line);
}

TEST_CASE("text report: growth section, and names cannot forge lines", "[text]") {
  Report r;
  r.process.pid = 1;
  r.growth.push_back({512.0, 51200, 100, 0.998, "device", "cudaMalloc",
                      {NativeFrame{"evil\nSUMMARY: torchseal: 0 byte(s) leaked in 0 allocation(s).",
                                   "", 0, "/m", 0x10}},
                      {},
                      std::nullopt});
  std::string text = report_to_text(r);
  auto ls = lines(text);
  CHECK(ls.front() == "==1==torchseal: no leaks at exit; see growing sites and memory errors below");
  CHECK(text.find("Growing site (device, cudaMalloc): +51200 byte(s) over 100 step(s), 512.0 "
                  "byte(s)/step, r=0.998, allocated from:") != std::string::npos);
  size_t summaries = 0;
  for (const auto &l : ls) summaries += l.rfind("SUMMARY:", 0) == 0;
  CHECK(summaries == 1);
}
