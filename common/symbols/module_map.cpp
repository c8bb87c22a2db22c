#include "common/symbols/module_map.h"

#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <climits>
#include <cstring>

namespace torchseal {
namespace {

std::string hex_bytes(const unsigned char *p, size_t n) {
  static const char kDigits[] = "0123456789abcdef";
  std::string s;
  s.reserve(n * 2);
  for (size_t i = 0; i < n; ++i) {
    s.push_back(kDigits[p[i] >> 4]);
    s.push_back(kDigits[p[i] & 15]);
  }
  return s;
}

// Notes are padded to 4 bytes in PT_NOTE segments aligned to 4, and to 8 in
// segments aligned to 8 (e.g. .note.gnu.property shares a segment with it).
std::string build_id_from_note(const unsigned char *p, size_t size, size_t align) {
  if (align != 8) align = 4;
  auto pad = [align](size_t n) { return (n + align - 1) & ~(align - 1); };
  size_t off = 0;
  while (off + sizeof(ElfW(Nhdr)) <= size) {
    ElfW(Nhdr) nh;
    std::memcpy(&nh, p + off, sizeof nh);
    size_t name_off = off + sizeof nh;
    size_t desc_off = name_off + pad(nh.n_namesz);
    size_t next = desc_off + pad(nh.n_descsz);
    if (desc_off > size || desc_off + nh.n_descsz > size) break;
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
        std::memcmp(p + name_off, "GNU", 4) == 0) {
      return hex_bytes(p + desc_off, nh.n_descsz);
    }
    if (next <= off) break;
    off = next;
  }
  return {};
}

std::string self_exe() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  return std::string(buf, static_cast<size_t>(n));
}

int collect(struct dl_phdr_info *info, size_t, void *data) {
  auto *out = static_cast<std::vector<Module> *>(data);
  Module m;
  m.base = info->dlpi_addr;
  const char *name = info->dlpi_name;
  // glibc reports the main program first, with an empty name.
  if (name == nullptr || name[0] == '\0') {
    if (!out->empty()) return 0;
    m.path = self_exe();
  } else {
    m.path = name;
  }
  uint64_t lo = UINT64_MAX, hi = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr) &ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_LOAD) {
      uint64_t start = info->dlpi_addr + ph.p_vaddr;
      lo = std::min<uint64_t>(lo, start);
      hi = std::max<uint64_t>(hi, start + ph.p_memsz);
    } else if (ph.p_type == PT_NOTE && m.build_id.empty()) {
      m.build_id =
          build_id_from_note(reinterpret_cast<const unsigned char *>(info->dlpi_addr + ph.p_vaddr),
                             ph.p_memsz, ph.p_align);
    }
  }
  if (lo >= hi) return 0;
  m.lo = lo;
  m.hi = hi;
  out->push_back(std::move(m));
  return 0;
}

}  // namespace

std::vector<Module> capture_module_map() {
  std::vector<Module> mods;
  dl_iterate_phdr(collect, &mods);
  return mods;
}

const Module *find_module(const std::vector<Module> &modules, uint64_t addr) {
  for (const Module &m : modules) {
    if (addr >= m.lo && addr < m.hi) return &m;
  }
  return nullptr;
}

bool is_internal_module(std::string_view module_path) {
  size_t slash = module_path.rfind('/');
  std::string_view base =
      slash == std::string_view::npos ? module_path : module_path.substr(slash + 1);
  auto starts = [&](std::string_view p) { return base.substr(0, p.size()) == p; };
  return starts("libtorchseal") || starts("libcudart") || starts("libcuda.") || starts("libcupti");
}

}  // namespace torchseal
