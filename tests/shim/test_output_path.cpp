#include <catch2/catch.hpp>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

#include "shim/runtime/output_path.h"

using namespace torchseal;

TEST_CASE("template placeholders expand") {
  TemplateVars v;
  v.pid = 42;
  v.rank = 3;
  v.host = "node/1";
  v.start_time = 1700000000;
  std::string out, err;
  REQUIRE(expand_output_template("/tmp/ts-%p-%r-%h-%t-%%", v, out, err));
  CHECK(out == "/tmp/ts-42-3-node_1-1700000000-%");
}

TEST_CASE("malformed templates are rejected with one line") {
  TemplateVars v;
  std::string out, err;
  CHECK_FALSE(expand_output_template("ts-%", v, out, err));
  CHECK_FALSE(expand_output_template("ts-%z", v, out, err));
  CHECK(err.find("%z") != std::string::npos);
  CHECK_FALSE(expand_output_template("dir/", v, out, err));
}

TEST_CASE("no rank expands %r to 0 and the default omits it") {
  TemplateVars v;
  v.pid = 7;
  std::string out, err;
  REQUIRE(expand_output_template("a-%r", v, out, err));
  CHECK(out == "a-0");
  CHECK(default_output_template(-1) == "torchseal-%p");
  CHECK(default_output_template(2).find("%r") != std::string::npos);
}

TEST_CASE("rank comes from the launcher's variables") {
  unsetenv("RANK");
  setenv("SLURM_PROCID", "5", 1);
  CHECK(rank_from_environment() == 5);
  setenv("RANK", "2", 1);
  CHECK(rank_from_environment() == 2);
  unsetenv("RANK");
  unsetenv("SLURM_PROCID");
  CHECK(rank_from_environment() == -1);
}

TEST_CASE("unwritable directories fall back to TMPDIR") {
  if (geteuid() == 0) {
    // root can write anywhere; use a path whose directory does not exist.
    std::string out, note;
    setenv("TMPDIR", "/tmp", 1);
    REQUIRE(choose_writable_prefix("/nonexistent-dir-xyz/p", out, note));
    CHECK(out == "/tmp/p");
    CHECK(note.find("not writable") != std::string::npos);
  } else {
    char dir[] = "/tmp/tsro-XXXXXX";
    REQUIRE(mkdtemp(dir));
    chmod(dir, 0500);
    std::string out, note;
    setenv("TMPDIR", "/tmp", 1);
    REQUIRE(choose_writable_prefix(std::string(dir) + "/p", out, note));
    CHECK(out == "/tmp/p");
    rmdir(dir);
  }
}
