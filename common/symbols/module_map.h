// The current process's module map, in the form the symbolizer and the
// history file need (path, load bias, address range, build-id).
#pragma once

#include <string_view>
#include <vector>

#include "common/model/analysis_input.h"

namespace torchseal {

// Walks dl_iterate_phdr. The main executable is named by /proc/self/exe;
// the vDSO is kept (so its addresses get a module name) although it has no
// file. Safe to call at exit; not async-signal-safe (it allocates).
std::vector<Module> capture_module_map();

// The module containing `addr`, or nullptr.
const Module *find_module(const std::vector<Module> &modules, uint64_t addr);

// Module basename is torchseal's own or a CUDA library (libcudart, libcuda,
// libcupti): frames there are never the user's call site, and the recorder
// skips them when it names a site.
bool is_internal_module(std::string_view module_path);

}  // namespace torchseal
