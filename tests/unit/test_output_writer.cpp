#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>

#include "report/render/output_writer.h"
#include "report/render/report_json.h"

using namespace torchseal;

namespace {

struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/torchseal-unit-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() { std::system(("rm -rf '" + path + "'").c_str()); }
};

std::string slurp(const std::string &p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

mode_t mode_of(const std::string &p) {
  struct stat st;
  REQUIRE(lstat(p.c_str(), &st) == 0);
  return st.st_mode;
}

}  // namespace

TEST_CASE("writes P.json and P.txt with mode 0600", "[output]") {
  TempDir dir;
  Report r;
  r.process.pid = 9;
  std::string error;
  std::string prefix = dir.path + "/torchseal-9";
  REQUIRE(write_report_files(prefix, r, error));
  CHECK(error.empty());
  CHECK(S_ISREG(mode_of(prefix + ".json")));
  CHECK((mode_of(prefix + ".json") & 0777) == 0600);
  CHECK((mode_of(prefix + ".txt") & 0777) == 0600);
  Report back;
  CHECK(read_report_file(prefix + ".json", back, error));
  CHECK(slurp(prefix + ".txt").rfind("==9==torchseal: ", 0) == 0);
  // A second report under the same prefix replaces the first.
  r.process.pid = 10;
  REQUIRE(write_report_files(prefix, r, error));
  CHECK(slurp(prefix + ".txt").rfind("==10==torchseal: ", 0) == 0);
  // No temp files left behind.
  std::string listing = dir.path + "/*.tmp.*";
  CHECK(std::system(("ls " + listing + " >/dev/null 2>&1").c_str()) != 0);
}

TEST_CASE("refuses to follow a symlink planted at P.json", "[output]") {
  TempDir dir;
  std::string target = dir.path + "/victim";
  {
    std::ofstream(target) << "precious\n";
  }
  std::string prefix = dir.path + "/out";
  REQUIRE(symlink(target.c_str(), (prefix + ".json").c_str()) == 0);
  std::string error;
  CHECK_FALSE(write_report_files(prefix, Report{}, error));
  CHECK(error.find("symbolic link") != std::string::npos);
  CHECK(error.find('\n') == std::string::npos);
  CHECK(slurp(target) == "precious\n");
  CHECK(S_ISLNK(mode_of(prefix + ".json")));
}

TEST_CASE("an unwritable directory is a one-line error, not an exception", "[output]") {
  std::string error;
  CHECK_FALSE(write_report_files("/nonexistent-dir/torchseal-1", Report{}, error));
  CHECK(error.find("/nonexistent-dir/torchseal-1.json") != std::string::npos);
  CHECK(error.find("No such file or directory") != std::string::npos);
}
