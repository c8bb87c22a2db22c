// Leak sites: which frames a user should see, and when two stacks are "the
// same place" in the source.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "report_model.h"

namespace torchseal {

// Module basename is torchseal's own or a CUDA library (libcudart, libcuda,
// libcupti): frames there are never the user's call site.
bool is_internal_module(std::string_view module_path);

// The function is a CUDA API entry point or a CUDA runtime internal (cuda*,
// __cuda*, cudart::*, cuXxx driver calls, libcudart_static helpers): when the
// runtime is linked statically these frames sit in the user's own module.
bool is_cuda_api_function(std::string_view function);

// Drops the leading torchseal/CUDA-library frames, then the leading CUDA API
// frames, so frames[0] is the user's call site. A stack that would become
// empty keeps what the first rule left (or is returned unchanged), so a
// report never loses the only information it has.
std::vector<NativeFrame> trim_frames(std::vector<NativeFrame> frames);

// Canonical identity of a site: (function, file, line) per native frame and
// (function, file, line) per Python frame. Frames without any symbol fall
// back to module + raw address. Two stacks with equal keys are one site.
std::string site_key(const std::vector<NativeFrame> &frames,
                     const std::vector<PythonFrame> &python_frames);

}  // namespace torchseal
