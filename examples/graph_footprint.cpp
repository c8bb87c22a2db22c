// graph_footprint: shaped like NVIDIA's graphMemoryFootprint sample, with
// graph allocations left live at exit (what compute-sanitizer lists under
// cuGraphLaunch). A graph instantiated with AutoFreeOnLaunch frees its last
// launch's allocation at the next launch, so relaunching leaks only the last
// one; a graph without free nodes, launched once and never freed, leaks each
// of its allocations. cudaDeviceGraphMemTrim gives back only memory no
// allocation holds: it frees none of them. Each leak is reported at its
// allocation node's creation line, under the launch.
//
// EXPECT: leaks 2
// EXPECT: leak site=autofree kind=graph api=cuGraphLaunch bytes=67108864 allocations=1 function=relaunch_with_auto_free
// EXPECT: leak site=unfreed kind=graph api=cuGraphLaunch bytes=8388608 allocations=4 function=launch_and_keep
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0

#include "common.h"

namespace {

cudaMemAllocNodeParams alloc_params(size_t bytes) {
  cudaMemAllocNodeParams p = {};
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = 0;
  p.bytesize = bytes;
  return p;
}

unsigned long long graph_mem(cudaGraphMemAttributeType attr) {
  unsigned long long v = 0;
  CHECK_OTHER(cudaDeviceGetGraphMemAttribute(0, attr, &v));
  return v;
}

__attribute__((noinline)) void relaunch_with_auto_free(cudaStream_t stream) {
  cudaGraph_t graph;
  CHECK_OTHER(cudaGraphCreate(&graph, 0));
  cudaMemAllocNodeParams params = alloc_params(64u << 20);
  cudaGraphNode_t node;
  CHECK_OTHER(cudaGraphAddMemAllocNode(&node, graph, nullptr, 0, &params));  // LEAK-SITE: autofree
  cudaGraphExec_t exec;
  CHECK_OTHER(cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch));
  for (int i = 0; i < 4; ++i) CHECK_OTHER(cudaGraphLaunch(exec, stream));
  CHECK_OTHER(cudaStreamSynchronize(stream));
  // Destroying the graph frees nothing: the last launch's memory stays.
  CHECK_OTHER(cudaGraphExecDestroy(exec));
  CHECK_OTHER(cudaGraphDestroy(graph));
}

__attribute__((noinline)) void launch_and_keep(cudaStream_t stream) {
  cudaGraph_t graph;
  CHECK_OTHER(cudaGraphCreate(&graph, 0));
  for (int i = 0; i < 4; ++i) {
    cudaMemAllocNodeParams params = alloc_params(2u << 20);
    cudaGraphNode_t node;
    CHECK_OTHER(cudaGraphAddMemAllocNode(&node, graph, nullptr, 0, &params));  // LEAK-SITE: unfreed
  }
  cudaGraphExec_t exec;
  CHECK_OTHER(cudaGraphInstantiate(&exec, graph, 0));
  CHECK_OTHER(cudaGraphLaunch(exec, stream));
  CHECK_OTHER(cudaStreamSynchronize(stream));
  CHECK_OTHER(cudaGraphExecDestroy(exec));
  CHECK_OTHER(cudaGraphDestroy(graph));
}

}  // namespace

int main() {
  cudaStream_t stream;
  CHECK_OTHER(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  relaunch_with_auto_free(stream);
  launch_and_keep(stream);
  CHECK_OTHER(cudaDeviceGraphMemTrim(0));
  std::printf("graph_footprint: used %llu reserved %llu after trim\n",
              graph_mem(cudaGraphMemAttrUsedMemCurrent),
              graph_mem(cudaGraphMemAttrReservedMemCurrent));
  CHECK_OTHER(cudaStreamDestroy(stream));
  return 0;
}
