#include "report/cli/attach_target.h"

#include <elf.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "common/util/path_name.h"
#include "common/util/read_file.h"

namespace torchseal::cli::attach {
namespace {

// The target's view of a path: /proc/PID/root resolves it in the target's
// mount namespace (a container) as well as in ours.
std::string in_target(pid_t pid, const std::string &path) {
  return "/proc/" + std::to_string(pid) + "/root" + path;
}

// st_value of `name` in the file's .dynsym, and the file's first PT_LOAD
// vaddr (page-aligned) and type.
bool dynsym(const std::string &file, const char *name, uint64_t &value, uint64_t &first_load,
            bool &is_exec) {
  std::string data;
  int err = 0;
  if (read_small_file(file, size_t(1) << 30, data, err) != FileRead::Ok ||
      data.size() < sizeof(Elf64_Ehdr))
    return false;
  const char *base = data.data();
  auto *eh = reinterpret_cast<const Elf64_Ehdr *>(base);
  if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
    return false;
  is_exec = eh->e_type == ET_EXEC;
  auto in_file = [&](uint64_t off, uint64_t len) {
    return off <= data.size() && len <= data.size() - off;
  };
  first_load = UINT64_MAX;
  if (!in_file(eh->e_phoff, uint64_t(eh->e_phnum) * sizeof(Elf64_Phdr))) return false;
  for (int i = 0; i < eh->e_phnum; ++i) {
    auto *ph = reinterpret_cast<const Elf64_Phdr *>(base + eh->e_phoff) + i;
    if (ph->p_type == PT_LOAD && ph->p_vaddr < first_load) first_load = ph->p_vaddr & ~0xfffULL;
  }
  if (!in_file(eh->e_shoff, uint64_t(eh->e_shnum) * sizeof(Elf64_Shdr))) return false;
  auto *sh = reinterpret_cast<const Elf64_Shdr *>(base + eh->e_shoff);
  for (int i = 0; i < eh->e_shnum; ++i) {
    if (sh[i].sh_type != SHT_DYNSYM || sh[i].sh_link >= eh->e_shnum) continue;
    const Elf64_Shdr &strs = sh[sh[i].sh_link];
    if (!in_file(sh[i].sh_offset, sh[i].sh_size) || !in_file(strs.sh_offset, strs.sh_size))
      return false;
    auto *syms = reinterpret_cast<const Elf64_Sym *>(base + sh[i].sh_offset);
    size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
    for (size_t k = 0; k < n; ++k) {
      if (syms[k].st_name >= strs.sh_size || syms[k].st_shndx == SHN_UNDEF) continue;
      const char *s = base + strs.sh_offset + syms[k].st_name;
      if (std::strncmp(s, name, strs.sh_size - syms[k].st_name) == 0) {
        value = syms[k].st_value;
        return true;
      }
    }
  }
  return false;
}

}  // namespace

bool read_memory(pid_t pid, uint64_t addr, void *out, size_t size) {
  iovec local{out, size}, remote{reinterpret_cast<void *>(addr), size};
  return process_vm_readv(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

bool write_memory(pid_t pid, uint64_t addr, const void *data, size_t size) {
  iovec local{const_cast<void *>(data), size}, remote{reinterpret_cast<void *>(addr), size};
  return process_vm_writev(pid, &local, 1, &remote, 1, 0) == static_cast<ssize_t>(size);
}

int ptrace_scope() {
  std::ifstream f("/proc/sys/kernel/yama/ptrace_scope");
  int v = -1;
  if (!(f >> v)) return -1;
  return v;
}

uint64_t symbol_address(const Target &t, const std::string &path, const char *name) {
  uint64_t value = 0, first_load = 0;
  bool is_exec = false;
  if (!dynsym(in_target(t.pid, path), name, value, first_load, is_exec)) return 0;
  if (is_exec) return value;
  for (const Mapping &m : t.maps)
    if (m.path == path && m.offset == 0) return m.start - first_load + value;
  return 0;
}

std::string mapped_file(const Target &t, std::initializer_list<const char *> prefixes) {
  for (const Mapping &m : t.maps) {
    if (m.path.empty() || m.path[0] != '/') continue;
    std::string b(basename_of(m.path));
    for (const char *p : prefixes)
      if (b.compare(0, std::strlen(p), p) == 0) return m.path;
  }
  return {};
}

bool inspect(pid_t pid, Target &t, std::string &error) {
  t = Target{};
  t.pid = pid;
  std::string proc = "/proc/" + std::to_string(pid);
  if (access(proc.c_str(), F_OK) != 0) {
    error = "no process with pid " + std::to_string(pid);
    return false;
  }
  FILE *f = std::fopen((proc + "/maps").c_str(), "re");
  std::string text;
  if (f) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
  }
  if (text.empty()) {
    int err = f ? EACCES : errno;  // an empty maps file: the kernel hid it from us
    error = "cannot read " + proc + "/maps (" +
            (err == EACCES || err == EPERM
                 ? std::string("permission denied: attach as the process's user or with "
                               "CAP_SYS_PTRACE")
                 : std::string(std::strerror(err))) +
            ")";
    return false;
  }
  std::istringstream maps(text);
  std::string line;
  while (std::getline(maps, line)) {
    Mapping m;
    std::istringstream in(line);
    std::string range, dev, inode;
    in >> range >> m.perms >> std::hex >> m.offset >> dev >> inode;
    std::getline(in >> std::ws, m.path);
    size_t dash = range.find('-');
    if (dash == std::string::npos) continue;
    m.start = std::stoull(range.substr(0, dash), nullptr, 16);
    m.end = std::stoull(range.substr(dash + 1), nullptr, 16);
    t.maps.push_back(std::move(m));
  }
  char buf[PATH_MAX];
  ssize_t n = readlink((proc + "/exe").c_str(), buf, sizeof buf - 1);
  if (n > 0) t.exe.assign(buf, static_cast<size_t>(n));
  t.shim_mapped = mapped_file(t, {"libtorchseal"});
  t.tracked = !t.shim_mapped.empty();
  // The interpreter: the executable itself (python3.X links libpython
  // statically in most distributions) or a libpython3.X.so.
  for (const std::string &cand : {t.exe, mapped_file(t, {"libpython3"})}) {
    if (cand.empty() || !symbol_address(t, cand, "Py_AddPendingCall")) continue;
    t.python = cand;
    uint64_t at = symbol_address(t, cand, "Py_Version");  // 3.11+
    uint32_t v = 0;
    if (at && read_memory(pid, at, &v, sizeof v)) t.py_version = v;
    break;
  }
  return true;
}

}  // namespace torchseal::cli::attach
