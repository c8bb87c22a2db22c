// Symbolizes call sites in this very binary (built with -g -O0), using the
// module map captured the way the shim captures it at exit.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <climits>
#include <cstdint>

#include "report/analysis/analysis.h"
#include "common/symbols/module_map.h"
#include "common/symbols/symbolizer.h"

namespace symtest {

__attribute__((noinline)) uint64_t return_address() {
  return reinterpret_cast<uint64_t>(__builtin_return_address(0));
}

__attribute__((noinline)) uint64_t known_caller(int *line) {
  *line = __LINE__ + 1;
  uint64_t ip = return_address();
  return ip;
}

// Two calls on one source line: two return addresses, one site.
__attribute__((noinline)) void same_line_twice(uint64_t &a, uint64_t &b, int *line) {
  *line = __LINE__ + 1;
  a = return_address(); b = return_address();
}

__attribute__((always_inline)) inline uint64_t inlined_helper(int *line) {
  *line = __LINE__ + 1;
  return return_address();
}

__attribute__((always_inline)) inline uint64_t inlined_outer(int *helper_line, int *mid_line) {
  *mid_line = __LINE__ + 1;
  return inlined_helper(helper_line);
}

__attribute__((noinline)) uint64_t calls_nested(int *helper_line, int *mid_line, int *call_line) {
  *call_line = __LINE__ + 1;
  uint64_t ip = inlined_outer(helper_line, mid_line);
  return ip;
}

__attribute__((noinline)) uint64_t calls_inlined(int *helper_line, int *call_line) {
  *call_line = __LINE__ + 1;
  uint64_t ip = inlined_helper(helper_line);
  return ip;
}

// A lambda's body is its own subprogram, nested in the enclosing
// function's DIE with a range of its own.
__attribute__((noinline)) uint64_t from_lambda(int *line) {
  auto body = [line]() __attribute__((noinline)) {
    *line = __LINE__ + 1;
    uint64_t ip = return_address();
    return ip;
  };
  return body();
}

}  // namespace symtest

using namespace torchseal;

namespace {

bool ends_with(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, size_t(n)) : std::string();
}

}  // namespace

TEST_CASE("module map of this process", "[symbolizer]") {
  auto mods = capture_module_map();
  REQUIRE(!mods.empty());
  CHECK(mods[0].path == self_exe());
  const Module *m = find_module(mods, reinterpret_cast<uint64_t>(&symtest::known_caller));
  REQUIRE(m != nullptr);
  CHECK(m->path == self_exe());
  CHECK(m->lo < m->hi);
  // Debian's toolchain links with --build-id; a SHA1 id is 40 hex digits.
  CHECK(m->build_id.size() == 40);
  CHECK(find_module(mods, 16) == nullptr);
}

TEST_CASE("a return address resolves to the calling function and the call's line", "[symbolizer]") {
  int line = 0;
  uint64_t ip = symtest::known_caller(&line);
  Symbolizer sym(capture_module_map());
  REQUIRE(sym.has_libdw());
  const auto &frames = sym.symbolize(ip);
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].function == "symtest::known_caller(int*)");
  CHECK(ends_with(frames[0].file, "test_symbolizer.cpp"));
  CHECK(frames[0].line == line);
  CHECK(frames[0].module == self_exe());
  CHECK(frames[0].address == ip);
  // Joined with the compilation directory: absolute and normalised, though
  // the compiler was given a path relative to the build directory.
  CHECK(frames[0].file.front() == '/');
  CHECK(frames[0].file.find("/../") == std::string::npos);
  CHECK(ends_with(frames[0].file, "/tests/unit/test_symbolizer.cpp"));
  // Cached: the same object comes back.
  CHECK(&sym.symbolize(ip) == &frames);
}

TEST_CASE("a call inside a lambda has its file and line", "[symbolizer]") {
  int line = 0;
  uint64_t ip = symtest::from_lambda(&line);
  Symbolizer sym(capture_module_map());
  REQUIRE(sym.has_libdw());
  const auto &frames = sym.symbolize(ip);
  REQUIRE(!frames.empty());
  CHECK(frames[0].function.find("from_lambda") != std::string::npos);
  CHECK(ends_with(frames[0].file, "/tests/unit/test_symbolizer.cpp"));
  CHECK(frames[0].line == line);
}

TEST_CASE("inlined calls expand into source-level frames", "[symbolizer]") {
  int helper_line = 0, call_line = 0;
  uint64_t ip = symtest::calls_inlined(&helper_line, &call_line);
  Symbolizer sym(capture_module_map());
  const auto &frames = sym.symbolize(ip);
  REQUIRE(frames.size() == 2);
  CHECK(frames[0].function == "symtest::inlined_helper(int*)");
  CHECK(frames[0].line == helper_line);
  CHECK(frames[1].function == "symtest::calls_inlined(int*, int*)");
  CHECK(frames[1].line == call_line);
  CHECK(ends_with(frames[1].file, "test_symbolizer.cpp"));
}

TEST_CASE("nested inlining follows the physical call chain, not the abstract origin",
          "[symbolizer]") {
  int helper_line = 0, mid_line = 0, call_line = 0;
  uint64_t ip = symtest::calls_nested(&helper_line, &mid_line, &call_line);
  Symbolizer sym(capture_module_map());
  const auto &frames = sym.symbolize(ip);
  REQUIRE(frames.size() == 3);
  CHECK(frames[0].function == "symtest::inlined_helper(int*)");
  CHECK(frames[0].line == helper_line);
  CHECK(frames[1].function == "symtest::inlined_outer(int*, int*)");
  CHECK(frames[1].line == mid_line);
  CHECK(frames[2].function == "symtest::calls_nested(int*, int*, int*)");
  CHECK(frames[2].line == call_line);

  SymbolizerOptions flat;
  flat.expand_inlined = false;
  Symbolizer flat_sym(capture_module_map(), flat);
  const auto &one = flat_sym.symbolize(ip);
  REQUIRE(one.size() == 1);
  CHECK(one[0].function == "symtest::inlined_helper(int*)");
  CHECK(one[0].line == helper_line);
}

TEST_CASE("two calls on one line are one leak site", "[symbolizer][analysis]") {
  uint64_t a = 0, b = 0;
  int line = 0;
  symtest::same_line_twice(a, b, &line);
  REQUIRE(a != b);
  AnalysisInput in;
  in.modules = capture_module_map();
  in.stacks.native = {{}, {a}, {b}};
  for (StackId s : {1u, 2u}) {
    LiveAlloc l;
    l.size = 256;
    l.stack = s;
    l.api = ApiId::cudaMalloc;
    in.live.push_back(l);
  }
  Symbolizer sym(in.modules);
  Report r = analyze(in, sym);
  REQUIRE(r.leaks.size() == 1);
  CHECK(r.leaks[0].allocations == 2);
  CHECK(r.leaks[0].frames[0].line == line);
}

TEST_CASE("without libdw, names come from the ELF symbol table", "[symbolizer]") {
  int line = 0;
  uint64_t ip = symtest::known_caller(&line);
  SymbolizerOptions opts;
  opts.use_libdw = false;
  Symbolizer sym(capture_module_map(), opts);
  CHECK_FALSE(sym.has_libdw());
  const auto &frames = sym.symbolize(ip);
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].function == "symtest::known_caller(int*)");
  CHECK(frames[0].file.empty());
  CHECK(frames[0].line == 0);
  CHECK(frames[0].module == self_exe());
}

TEST_CASE("addresses outside every module keep only the address", "[symbolizer]") {
  Symbolizer sym(capture_module_map());
  const auto &frames = sym.symbolize(0x10);
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].function.empty());
  CHECK(frames[0].module.empty());
  CHECK(frames[0].address == 0x10);
}

TEST_CASE("offline: a module map of files that are gone degrades to addresses", "[symbolizer]") {
  Module m;
  m.path = "/nonexistent/libgone.so";
  m.base = 0x7f0000000000;
  m.lo = m.base;
  m.hi = m.base + 0x10000;
  Symbolizer sym({m});
  const auto &frames = sym.symbolize(m.base + 0x1234);
  REQUIRE(frames.size() == 1);
  CHECK(frames[0].function.empty());
  CHECK(frames[0].module == m.path);
}

TEST_CASE("demangle", "[symbolizer]") {
  CHECK(demangle("_ZN7symtest12known_callerEPi") == "symtest::known_caller(int*)");
  CHECK(demangle("main") == "main");
  CHECK(demangle("__libc_start_main@@GLIBC_2.34") == "__libc_start_main");
  CHECK(demangle("_ZN7symtest12known_callerEPi@VERS_1") == "symtest::known_caller(int*)");
  CHECK(demangle("_Znot_valid") == "_Znot_valid");
}

TEST_CASE("a file whose build-id differs from the recorded one is not trusted", "[symbolizer]") {
  int line = 0;
  uint64_t ip = symtest::known_caller(&line);
  auto mods = capture_module_map();
  for (Module &m : mods) {
    if (ip - 1 >= m.lo && ip - 1 < m.hi) m.build_id = std::string(40, '0');
  }
  for (bool use_libdw : {true, false}) {
    INFO("use_libdw=" << use_libdw);
    SymbolizerOptions opts;
    opts.use_libdw = use_libdw;
    Symbolizer sym(mods, opts);
    const auto &frames = sym.symbolize(ip);
    REQUIRE(frames.size() == 1);
    CHECK(frames[0].function.empty());
    CHECK(frames[0].line == 0);
    CHECK(frames[0].module == self_exe());
  }
}
