#include "report/render/output_writer.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "report/render/report_json.h"
#include "report/render/report_text.h"

namespace torchseal {
namespace {

bool write_all(int fd, const std::string &s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string errno_line(const std::string &what, const std::string &path, int err) {
  return what + " " + path + ": " + std::strerror(err);
}

}  // namespace

bool write_file_safely(const std::string &path, const std::string &content,
                       std::string &error) noexcept {
  try {
    struct stat st;
    if (lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      error = "refusing to write " + path + ": it is a symbolic link";
      return false;
    }
    // Unique per process and attempt; O_EXCL makes a collision (or a planted
    // file or symlink with this name) an error rather than a redirect.
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(ts.tv_nsec);
    int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
      error = errno_line("cannot create", tmp, errno);
      return false;
    }
    if (!write_all(fd, content)) {
      int err = errno ? errno : EIO;
      close(fd);
      unlink(tmp.c_str());
      error = errno_line("cannot write", tmp, err);
      return false;
    }
    if (close(fd) != 0) {
      int err = errno;
      unlink(tmp.c_str());
      error = errno_line("cannot write", tmp, err);
      return false;
    }
    // rename replaces a symlink that appeared since the lstat; it never
    // writes through it.
    if (rename(tmp.c_str(), path.c_str()) != 0) {
      int err = errno;
      unlink(tmp.c_str());
      error = errno_line("cannot rename to", path, err);
      return false;
    }
    return true;
  } catch (...) {
    error = "cannot write " + path + ": out of memory";
    return false;
  }
}

bool write_report_files(const std::string &prefix, const Report &report,
                        std::string &error) noexcept {
  try {
    std::string json = report_to_json(report);
    if (json.empty()) {
      error = "cannot write " + prefix + ".json: out of memory";
      return false;
    }
    if (!write_file_safely(prefix + ".json", json, error)) return false;
    return write_file_safely(prefix + ".txt", report_to_text(report), error);
  } catch (...) {
    error = "cannot write " + prefix + ".txt: out of memory";
    return false;
  }
}

}  // namespace torchseal
