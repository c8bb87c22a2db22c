#include "common/symbols/elf_symtab.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace torchseal {
namespace {

// Largest file we map: symbol tables of real libraries are far smaller, and
// this bounds the work on a hostile path.
constexpr uint64_t kMaxElfBytes = 4ull << 30;

struct Mapping {
  const unsigned char *p = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (p) munmap(const_cast<unsigned char *>(p), size);
  }
};

bool in_bounds(size_t size, uint64_t off, uint64_t len) { return off <= size && len <= size - off; }

std::string note_build_id(const unsigned char *p, size_t size, uint64_t align) {
  static const char kDigits[] = "0123456789abcdef";
  align = align == 8 ? 8 : 4;
  auto pad = [align](uint64_t n) { return (n + align - 1) & ~(align - 1); };
  uint64_t off = 0;
  while (off + sizeof(Elf64_Nhdr) <= size) {
    Elf64_Nhdr nh;
    std::memcpy(&nh, p + off, sizeof nh);
    uint64_t name_off = off + sizeof nh;
    uint64_t desc_off = name_off + pad(nh.n_namesz);
    if (desc_off > size || nh.n_descsz > size - desc_off) break;
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
        std::memcmp(p + name_off, "GNU", 4) == 0) {
      std::string hex;
      for (uint32_t i = 0; i < nh.n_descsz; ++i) {
        hex.push_back(kDigits[p[desc_off + i] >> 4]);
        hex.push_back(kDigits[p[desc_off + i] & 15]);
      }
      return hex;
    }
    off = desc_off + pad(nh.n_descsz);
  }
  return {};
}

}  // namespace

ElfSymtab ElfSymtab::load(const std::string &path) {
  ElfSymtab t;
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return t;
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr) ||
      (uint64_t)st.st_size > kMaxElfBytes) {
    close(fd);
    return t;
  }
  Mapping m;
  m.size = static_cast<size_t>(st.st_size);
  void *p = mmap(nullptr, m.size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return t;
  m.p = static_cast<const unsigned char *>(p);

  Elf64_Ehdr eh;
  std::memcpy(&eh, m.p, sizeof eh);
  if (std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(Elf64_Shdr) ||
      !in_bounds(m.size, eh.e_shoff, uint64_t(eh.e_shnum) * sizeof(Elf64_Shdr))) {
    return t;
  }
  auto shdr = [&](size_t i) {
    Elf64_Shdr sh;
    std::memcpy(&sh, m.p + eh.e_shoff + i * sizeof(Elf64_Shdr), sizeof sh);
    return sh;
  };
  for (size_t i = 0; i < eh.e_shnum && t.build_id_.empty(); ++i) {
    Elf64_Shdr sh = shdr(i);
    if (sh.sh_type == SHT_NOTE && in_bounds(m.size, sh.sh_offset, sh.sh_size)) {
      t.build_id_ = note_build_id(m.p + sh.sh_offset, sh.sh_size, sh.sh_addralign);
    }
  }
  // Prefer the full .symtab; .dynsym only has exported functions.
  int chosen = -1;
  for (size_t i = 0; i < eh.e_shnum; ++i) {
    Elf64_Shdr sh = shdr(i);
    if (sh.sh_type == SHT_SYMTAB) {
      chosen = (int)i;
      break;
    }
    if (sh.sh_type == SHT_DYNSYM && chosen < 0) chosen = (int)i;
  }
  if (chosen < 0) return t;
  Elf64_Shdr symsh = shdr(chosen);
  if (symsh.sh_link >= eh.e_shnum) return t;
  Elf64_Shdr strsh = shdr(symsh.sh_link);
  if (!in_bounds(m.size, symsh.sh_offset, symsh.sh_size) ||
      !in_bounds(m.size, strsh.sh_offset, strsh.sh_size) || symsh.sh_entsize != sizeof(Elf64_Sym)) {
    return t;
  }
  const char *strtab = reinterpret_cast<const char *>(m.p + strsh.sh_offset);
  size_t nsyms = symsh.sh_size / sizeof(Elf64_Sym);
  for (size_t i = 0; i < nsyms; ++i) {
    Elf64_Sym s;
    std::memcpy(&s, m.p + symsh.sh_offset + i * sizeof s, sizeof s);
    int type = ELF64_ST_TYPE(s.st_info);
    if ((type != STT_FUNC && type != STT_GNU_IFUNC) || s.st_shndx == SHN_UNDEF || s.st_value == 0 ||
        s.st_name >= strsh.sh_size) {
      continue;
    }
    const char *name = strtab + s.st_name;
    size_t len = strnlen(name, strsh.sh_size - s.st_name);
    if (len == 0 || t.names_.size() + len + 1 > UINT32_MAX) continue;
    t.syms_.push_back({s.st_value, s.st_size, static_cast<uint32_t>(t.names_.size())});
    t.names_.append(name, len);
    t.names_.push_back('\0');
  }
  std::sort(t.syms_.begin(), t.syms_.end(),
            [](const Sym &a, const Sym &b) { return a.addr < b.addr; });
  return t;
}

std::string ElfSymtab::lookup(uint64_t vaddr) const {
  auto it = std::upper_bound(syms_.begin(), syms_.end(), vaddr,
                             [](uint64_t v, const Sym &s) { return v < s.addr; });
  if (it == syms_.begin()) return {};
  --it;
  // Aliases share a start address; any of them that covers vaddr will do.
  // Size-0 symbols (hand-written assembly) are taken to extend to the next one.
  const uint64_t start = it->addr;
  for (;;) {
    if (it->size == 0 || vaddr - it->addr < it->size) return std::string(names_.c_str() + it->name);
    if (it == syms_.begin()) break;
    --it;
    if (it->addr != start) break;
  }
  return {};
}

}  // namespace torchseal
