// What `torchseal attach` learns about the target process from /proc and
// from the ELF files it mapped, before touching it: its mappings, where a
// dynamic symbol lies in its address space, its Python version.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

namespace torchseal::cli::attach {

struct Mapping {
  uint64_t start = 0, end = 0, offset = 0;
  std::string perms, path;
};

struct Target {
  pid_t pid = 0;
  std::vector<Mapping> maps;
  std::string exe;          // /proc/PID/exe
  std::string python;       // the mapped file exporting Py_AddPendingCall ("" when none)
  unsigned py_version = 0;  // PY_VERSION_HEX (0 when unknown)
  bool tracked = false;     // libtorchseal.so is mapped
  std::string shim_mapped;  // its path then
};

// Reads the target; false with `error` (one line) when it cannot be read.
bool inspect(pid_t pid, Target &t, std::string &error);

// The run-time address of the dynamic symbol `name` of the mapped file
// `path` in the target, or 0.
uint64_t symbol_address(const Target &t, const std::string &path, const char *name);

// The first mapped file whose name (after the last '/') starts with one of
// `prefixes`, or "".
std::string mapped_file(const Target &t, std::initializer_list<const char *> prefixes);

// Reads `size` bytes at `addr` of the target (process_vm_readv).
bool read_memory(pid_t pid, uint64_t addr, void *out, size_t size);
bool write_memory(pid_t pid, uint64_t addr, const void *data, size_t size);

// /proc/sys/kernel/yama/ptrace_scope, or -1 without Yama.
int ptrace_scope();

}  // namespace torchseal::cli::attach
