// Raw return addresses -> source frames, for this process or, offline, for
// another process's addresses given its recorded module map.
//
// libdw is opened with dlopen, the copy bundled beside torchseal first
// (runtime_libs.h), so nothing links elfutils and processes that never use
// CUDA never load it. Without libdw, frames get function names from the ELF
// symbol tables (no file/line), and the process notes itself degraded;
// without a readable file, only the module and address.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/model/analysis_input.h"
#include "common/model/frames.h"

namespace torchseal {

struct SymbolizerOptions {
  bool use_libdw = true;  // false: force the ELF symbol-table fallback (tests, --no-debuginfo)
  // true: one frame per inlined call level, innermost first. false: only the
  // innermost level (function and line of the inlined callee).
  bool expand_inlined = true;
};

class Symbolizer {
 public:
  explicit Symbolizer(std::vector<Module> modules, SymbolizerOptions opts = {});
  ~Symbolizer();
  Symbolizer(const Symbolizer &) = delete;
  Symbolizer &operator=(const Symbolizer &) = delete;

  // Frames for one recorded return address, innermost first: more than one
  // when the call was inlined. The lookup uses ip - 1 so the line is the
  // call's line; the frames carry `ip` itself as their address. Cached per
  // ip. Never empty. Not thread-safe.
  const std::vector<NativeFrame> &symbolize(uint64_t ip);

  // A whole recorded stack (innermost first), inlined levels expanded.
  std::vector<NativeFrame> symbolize_stack(const std::vector<uint64_t> &ips);

  // Supplies the frames for `ip` instead of resolving it: for history files
  // that carry their own symbol table (read on a machine without the
  // binaries), and for tests. Replaces any cached result.
  void preload(uint64_t ip, std::vector<NativeFrame> frames);

  // True once libdw has been loaded (for diagnostics and tests).
  bool has_libdw();

  const std::vector<Module> &modules() const { return modules_; }

 private:
  struct Dwarf;    // libdw state, loaded on first use
  struct Symtabs;  // fallback ELF symbol tables per module

  std::vector<NativeFrame> resolve(uint64_t ip);
  Dwarf *dwarf();

  std::vector<Module> modules_;
  SymbolizerOptions opts_;
  std::unordered_map<uint64_t, std::vector<NativeFrame>> cache_;
  std::unique_ptr<Dwarf> dwarf_;
  bool dwarf_tried_ = false;
  std::unique_ptr<Symtabs> symtabs_;
};

// Opens libdw once for the process (the shim probes it at start, so a
// missing one is said at once, not at exit). False, with the places tried
// in `why`, when native frames will have no file:line.
bool libdw_available(std::string *why = nullptr);

// abi::__cxa_demangle, or the input unchanged when it is not a C++ name.
std::string demangle(const std::string &name);

}  // namespace torchseal
