// nvtx_steps: a training loop whose steps are NVTX ranges, leaking one
// 64 KiB device buffer per step.
//
// Steps come from the application's own instrumentation (the nvtx3 headers,
// as PyTorch, NCCL and most CUDA frameworks use), not from torchseal_step():
// with TORCHSEAL_STEP_RANGE=train_step the shim names itself as the NVTX tool
// (NVTX_INJECTION64_PATH) and every `train_step` range that ends is one
// step. The growth verdict must then flag exactly the leaking line, the same
// way it does for steps marked through the C API; the balanced workspace in
// the same step must not be flagged.
//
//   TORCHSEAL_STEP_RANGE=train_step torchseal run -- ./nvtx_steps [steps]
//
// EXPECT: leaks 1
// EXPECT: leak site=step-leak kind=device api=cudaMalloc bytes=1966080 allocations=30 function=train_step
// EXPECT-GROWTH: 1 site=step-leak
// EXPECT: exit 0
// ENV: TORCHSEAL_STEP_RANGE=train_step

#include <nvtx3/nvToolsExt.h>

#include <cstdlib>
#include <vector>

#include "common.h"

constexpr size_t kLeakBytes = 64 << 10;
constexpr size_t kWorkspaceBytes = 1 << 20;

// One "training step": a workspace that is freed, and a buffer that is not.
__attribute__((noinline)) static void train_step(std::vector<void *> &forgotten) {
  void *workspace = nullptr;
  CHECK(cudaMalloc(&workspace, kWorkspaceBytes));
  void *activations = nullptr;
  CHECK(cudaMalloc(&activations, kLeakBytes));  // LEAK-SITE: step-leak
  CHECK_OTHER(cudaMemset(activations, 0, kLeakBytes));
  CHECK(cudaFree(workspace));
  // Remembered only so a debugger can find them; never freed.
  forgotten.push_back(activations);
}

int main(int argc, char **argv) {
  const int steps = argc > 1 ? std::atoi(argv[1]) : 30;
  std::vector<void *> forgotten;
  for (int i = 0; i < steps; ++i) {
    nvtxRangePushA("train_step");
    train_step(forgotten);
    nvtxRangePop();
  }
  // A range that is not a step: its allocations must not count as steps.
  nvtxRangePushA("validation");
  void *val = nullptr;
  CHECK(cudaMalloc(&val, 4096));
  CHECK(cudaFree(val));
  nvtxRangePop();
  example::print_calls();
  return 0;
}
