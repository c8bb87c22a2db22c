// The PyTorch autograd node the calling thread is running, read from its
// native stack: the innermost torch::autograd::...::NAME::apply(
// std::vector<at::Tensor>&&) frame (Node::apply, e.g. PowBackward0,
// AccumulateGrad). Labels the Python stack an engine thread borrows
// (python_frames.h: set_borrow_label).
#pragma once

#include <cstddef>
#include <string_view>

namespace torchseal {

// Writes the node's class name into `out`; false when no such frame is
// found. Each return address is looked up with dladdr once, then cached.
bool autograd_node_name(char *out, size_t cap);

// The node name in a mangled symbol, or "" when it is not a Node::apply
// override: _ZN5torch8autograd9generated12PowBackward05applyEOSt6vectorIN2at6TensorE...
std::string_view node_of_mangled(std::string_view sym);

}  // namespace torchseal
