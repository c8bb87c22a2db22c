#include "common/util/read_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace torchseal {

FileRead read_small_file(const std::string &path, size_t max_bytes, std::string &text, int &err) {
  text.clear();
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    err = errno;
    return FileRead::CannotOpen;
  }
  struct stat st;
  FileRead result = FileRead::Ok;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    result = FileRead::NotRegular;
  } else if (static_cast<uint64_t>(st.st_size) > max_bytes) {
    result = FileRead::TooLarge;
  }
  try {
    if (result == FileRead::Ok) text.reserve(static_cast<size_t>(st.st_size));
    char buf[65536];
    while (result == FileRead::Ok) {
      ssize_t n = read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        err = errno;
        result = FileRead::ReadError;
      } else if (n == 0) {
        break;
      } else if (text.size() + size_t(n) > max_bytes) {
        result = FileRead::TooLarge;  // grew while being read
      } else {
        text.append(buf, size_t(n));
      }
    }
  } catch (...) {
    result = FileRead::NoMemory;
  }
  close(fd);
  return result;
}

}  // namespace torchseal
