#include <catch2/catch.hpp>
#include <cstdlib>

#include "shim/runtime/config.h"

using namespace torchseal;

namespace {
struct EnvVar {
  const char *name;
  EnvVar(const char *n, const char *v) : name(n) { setenv(n, v, 1); }
  ~EnvVar() { unsetenv(name); }
};
}  // namespace

TEST_CASE("defaults with an empty environment") {
  Config c;
  std::string err;
  REQUIRE(parse_config(c, err));
  CHECK(c.output == "torchseal-%p");
  CHECK(c.exit_code == -1);
  CHECK(c.stack_depth == 64);
  CHECK(c.backend == Backend::Auto);
  CHECK(c.dump_signal == SIGUSR1);
}

TEST_CASE("valid values are taken") {
  EnvVar a("TORCHSEAL_EXIT_CODE", "23"), b("TORCHSEAL_STACK_DEPTH", "8"),
      d("TORCHSEAL_BACKEND", "hooks"), e("TORCHSEAL_SIGNAL", "none"), f("TORCHSEAL_LOG", "debug");
  Config c;
  std::string err;
  REQUIRE(parse_config(c, err));
  CHECK(c.exit_code == 23);
  CHECK(c.stack_depth == 8);
  CHECK(c.backend == Backend::Hooks);
  CHECK(c.dump_signal == 0);
  CHECK(c.log_level == log::Level::Debug);
}

TEST_CASE("every invalid value is one line naming the variable and the accepted values") {
  const char *cases[][2] = {
      {"TORCHSEAL_EXIT_CODE", "abc"},     {"TORCHSEAL_EXIT_CODE", "256"},
      {"TORCHSEAL_STACK_DEPTH", "banana"}, {"TORCHSEAL_STACK_DEPTH", "0"},
      {"TORCHSEAL_BACKEND", "gpu"},       {"TORCHSEAL_PYTHON", "yes"},
      {"TORCHSEAL_TORCH", "all"},         {"TORCHSEAL_SIGNAL", "SIGKILL"},
      {"TORCHSEAL_LOG", "loud"},          {"TORCHSEAL_OUTPUT", "x-%q"},
      {"TORCHSEAL_STEP_SECONDS", "-1"},   {"TORCHSEAL_STACK_DEPTH", "12\nx"},
      {"TORCHSEAL_UNWIND", "dwarf"},
  };
  for (auto &kv : cases) {
    EnvVar v(kv[0], kv[1]);
    Config c;
    std::string err;
    INFO(kv[0] << "=" << kv[1]);
    REQUIRE_FALSE(parse_config(c, err));
    CHECK(err.find(kv[0]) != std::string::npos);
    CHECK(err.find("accepted") != std::string::npos);
    CHECK(err.find('\n') == std::string::npos);
  }
}

TEST_CASE("signal names and numbers") {
  int s = -1;
  CHECK(parse_signal("SIGUSR2", s));
  CHECK(s == SIGUSR2);
  CHECK(parse_signal("10", s));
  CHECK(s == 10);
  CHECK_FALSE(parse_signal("9", s));
  CHECK_FALSE(parse_signal("SIGSEGV", s));
}

#include "shim/runtime/torch_mode.h"

TEST_CASE("tensors mode merges the async backend into the allocator config") {
  CHECK(with_async_backend("") == "backend:cudaMallocAsync");
  CHECK(with_async_backend("expandable_segments:True") ==
        "expandable_segments:True,backend:cudaMallocAsync");
  CHECK(with_async_backend("backend:native,max_split_size_mb:128") ==
        "max_split_size_mb:128,backend:cudaMallocAsync");
}
