// A native frame as the symbolizer resolves it: the unit shared by the
// symbolizer (common/symbols), the history's symbol table and the report.
#pragma once

#include <cstdint>
#include <string>

namespace torchseal {

struct NativeFrame {
  std::string function;  // demangled; empty = unknown (JSON null)
  std::string file;      // empty = no debug info (JSON null)
  int line = 0;          // 0 = no debug info (JSON null)
  std::string module;    // path of the loaded object; empty = unknown
  uint64_t address = 0;  // raw return address as recorded
};

}  // namespace torchseal
