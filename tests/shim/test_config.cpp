#include <catch2/catch.hpp>
#include <cstdlib>

#include "common/settings/config.h"
#include "shim/runtime/output_path.h"

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
  CHECK_FALSE(c.set_by_environment(settings::Id::output));
  CHECK(c.exit_code == -1);
  CHECK(c.stack_depth == 64);
  CHECK(c.backend == Backend::Auto);
  CHECK(c.python == PythonMode::Auto);
  CHECK(c.unwind == UnwindMode::Fast);
  CHECK(c.torch == TorchMode::Segments);
  CHECK(c.log_level == log::Level::Warn);
  CHECK(c.step_range.empty());
  CHECK(c.step_seconds == 1.0);
  CHECK(c.dump_signal == SIGUSR1);
  CHECK(c.suppressions.empty());
  CHECK(c.cupti_path.empty());
}

TEST_CASE("the default output prefix is the one the report files use without a rank") {
  CHECK(std::string(settings::spec(settings::Id::output).default_value) ==
        default_output_template(-1));
}

TEST_CASE("every default in the table is a valid value") {
  for (const settings::Spec &s : settings::kTable) {
    if (!s.default_value) continue;
    EnvVar v(s.var, s.default_value);
    Config c;
    std::string err;
    INFO(s.var << "=" << s.default_value);
    CHECK(parse_config(c, err));
  }
}

TEST_CASE("valid values are taken") {
  EnvVar a("TORCHSEAL_EXIT_CODE", "23"), b("TORCHSEAL_STACK_DEPTH", "8"),
      d("TORCHSEAL_BACKEND", "hooks"), e("TORCHSEAL_SIGNAL", "none"), f("TORCHSEAL_LOG", "debug"),
      g("TORCHSEAL_OUTPUT", "out-%p"), h("TORCHSEAL_PYTHON", "OFF"), i("TORCHSEAL_TORCH", "Tensors"),
      j("TORCHSEAL_UNWIND", "check"), k("TORCHSEAL_STEP_RANGE", "train_step"),
      l("TORCHSEAL_STEP_SECONDS", "0.5");
  Config c;
  std::string err;
  REQUIRE(parse_config(c, err));
  CHECK(c.exit_code == 23);
  CHECK(c.stack_depth == 8);
  CHECK(c.backend == Backend::Hooks);
  CHECK(c.dump_signal == 0);
  CHECK(c.log_level == log::Level::Debug);
  CHECK(c.output == "out-%p");
  CHECK(c.set_by_environment(settings::Id::output));
  CHECK_FALSE(c.set_by_environment(settings::Id::cupti_path));
  CHECK(c.python == PythonMode::Off);
  CHECK(c.torch == TorchMode::Tensors);
  CHECK(c.unwind == UnwindMode::Check);
  CHECK(c.step_range == "train_step");
  CHECK(c.step_seconds == 0.5);
}

TEST_CASE("an alias that is not advertised is accepted") {
  EnvVar v("TORCHSEAL_LOG", "WARNING");
  Config c;
  std::string err;
  REQUIRE(parse_config(c, err));
  CHECK(c.log_level == log::Level::Warn);
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

TEST_CASE("the messages for bad values, word for word") {
  struct Case {
    const char *var, *value, *accepted;
  };
  const std::string long_output(3000, 'a');
  const Case cases[] = {
      {"TORCHSEAL_LOG", "loud", "off, error, warn, info, debug"},
      {"TORCHSEAL_OUTPUT", "x-%q", "a path prefix with %p %r %h %t %% placeholders"},
      {"TORCHSEAL_OUTPUT", "x-%", "a path prefix with %p %r %h %t %% placeholders"},
      {"TORCHSEAL_OUTPUT", long_output.c_str(), "a path prefix shorter than 3000 bytes"},
      {"TORCHSEAL_BACKEND", "gpu", "auto, cupti, hooks"},
      {"TORCHSEAL_EXIT_CODE", "256", "an integer 0..255"},
      {"TORCHSEAL_STACK_DEPTH", "257", "an integer 1..256"},
      {"TORCHSEAL_PYTHON", "yes", "auto, off"},
      {"TORCHSEAL_UNWIND", "dwarf", "fast, libunwind, check"},
      {"TORCHSEAL_TORCH", "all", "segments, tensors"},
      {"TORCHSEAL_STEP_RANGE", "([unclosed", "an ECMAScript regular expression"},
      {"TORCHSEAL_STEP_SECONDS", "86401", "a number of seconds in (0, 86400]"},
      {"TORCHSEAL_SIGNAL", "65", "none, SIGUSR1, SIGUSR2, SIGHUP, ... or a signal number"},
      {"TORCHSEAL_SUPPRESSIONS", "/nonexistent/x.supp", "a readable suppressions file"},
      {"TORCHSEAL_CUPTI_PATH", "/nonexistent/libcupti.so.13", "a readable libcupti shared object"},
  };
  for (const Case &one : cases) {
    EnvVar v(one.var, one.value);
    Config c;
    std::string err;
    INFO(one.var << "=" << one.value);
    REQUIRE_FALSE(parse_config(c, err));
    CHECK(err == std::string("invalid ") + one.var + "='" + std::string(one.value).substr(0, 64) +
                     "' (accepted: " + one.accepted + "); torchseal is disabled for this process");
  }
}

TEST_CASE("the first bad value stops the parse; TORCHSEAL_LOG is read first") {
  EnvVar a("TORCHSEAL_LOG", "error"), b("TORCHSEAL_STACK_DEPTH", "8"),
      d("TORCHSEAL_BACKEND", "x"), e("TORCHSEAL_SIGNAL", "USR2");
  Config c;
  std::string err;
  REQUIRE_FALSE(parse_config(c, err));
  CHECK(err.find("TORCHSEAL_BACKEND") != std::string::npos);
  CHECK(c.log_level == log::Level::Error);
  // Read after the bad one: still their defaults.
  CHECK(c.stack_depth == 64);
  CHECK(c.dump_signal == SIGUSR1);
}

TEST_CASE("signal names and numbers") {
  int s = -1;
  CHECK(settings::parse_signal("SIGUSR2", s));
  CHECK(s == SIGUSR2);
  CHECK(settings::parse_signal("usr1", s));
  CHECK(s == SIGUSR1);
  CHECK(settings::parse_signal("10", s));
  CHECK(s == 10);
  CHECK_FALSE(settings::parse_signal("9", s));
  CHECK_FALSE(settings::parse_signal("SIGSEGV", s));
}

#include "shim/runtime/torch_mode.h"

TEST_CASE("tensors mode merges the async backend into the allocator config") {
  CHECK(with_async_backend("") == "backend:cudaMallocAsync");
  CHECK(with_async_backend("expandable_segments:True") ==
        "expandable_segments:True,backend:cudaMallocAsync");
  CHECK(with_async_backend("backend:native,max_split_size_mb:128") ==
        "max_split_size_mb:128,backend:cudaMallocAsync");
}
