// Reading a small input file (report, baseline, suppressions) whole. Only a
// regular file within a size bound is read, so a path to a directory, a FIFO
// or a huge file fails at once instead of hanging or exhausting memory.
#pragma once

#include <cstddef>
#include <string>

namespace torchseal {

enum class FileRead { Ok, CannotOpen, NotRegular, TooLarge, NoMemory, ReadError };

// Reads `path` into `text` up to end of file. `err` is the errno of
// CannotOpen and ReadError; after a ReadError `text` holds what was read
// before it. Each caller words its own messages.
FileRead read_small_file(const std::string &path, size_t max_bytes, std::string &text, int &err);

}  // namespace torchseal
