// The libraries torchseal opens at run time rather than links (libunwind,
// libdw): the copies bundled beside the shim first (shim/bundled), then the
// host's. Both are opened RTLD_LOCAL, and the bundled ones carry their own
// SONAMEs, so neither ever stands in for a library of the host's.
#pragma once

#include <string>
#include <vector>

namespace torchseal::runtime_libs {

struct Opened {
  void *handle = nullptr;
  std::string path;   // what was opened: a bundled file's path, or the soname
  std::string error;  // why not, when handle is null: each place tried
};

// Opens `soname` ("libunwind.so.8"): its bundled copy, else the host's.
// `flags` are dlopen's; RTLD_LOCAL is always added.
Opened open(const char *soname, int flags);

// The folder searched for bundled copies ("" when none was found); the
// tests and `torchseal run --version`-style diagnostics print it.
std::string bundled_dir();

// What this process lacks and what it costs, one entry per component
// ("no line numbers: libdw unavailable"): noted once by whoever finds out,
// read by the report writer (process.degraded).
void note_degraded(const std::string &what);
std::vector<std::string> degraded();

}  // namespace torchseal::runtime_libs
