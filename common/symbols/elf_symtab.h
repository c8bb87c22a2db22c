// Function symbols of one ELF file, read straight from .symtab (or .dynsym
// when stripped). This is the symbolizer's fallback when libdw is not
// installed: function names without file/line, like dladdr but working
// offline and on static functions too.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace torchseal {

class ElfSymtab {
 public:
  // Never throws; an unreadable or non-ELF file yields an empty table.
  static ElfSymtab load(const std::string &path);

  // Raw (mangled) name of the function containing the link-time address
  // `vaddr` (= runtime address - load bias), or empty.
  std::string lookup(uint64_t vaddr) const;
  bool empty() const { return syms_.empty(); }
  // Hex NT_GNU_BUILD_ID of the file, empty if it has none.
  const std::string &build_id() const { return build_id_; }

 private:
  struct Sym {
    uint64_t addr, size;
    uint32_t name;  // offset into names_
  };
  std::vector<Sym> syms_;  // sorted by addr
  std::string names_;
  std::string build_id_;
};

}  // namespace torchseal
