// graph_memory_nodes: a correct program shaped like NVIDIA's graphMemoryNodes
// sample. CUDA graph memory nodes reserve an address when they are added;
// the memory behind it is allocated when the graph launches and freed by a
// free node (of the same graph or another one), by cudaFreeAsync or
// cudaFree outside any graph. Stream capture of cudaMallocAsync and
// cudaFreeAsync makes the same nodes. Everything is freed: no leak, and no
// free of graph memory is an invalid free.
//
// EXPECT: leaks 0
// EXPECT: ooms 0
// EXPECT: invalid_frees 0
// EXPECT: exit 0

#include "common.h"

namespace {

constexpr size_t kBytes = 8u << 20;

cudaMemAllocNodeParams alloc_params(size_t bytes) {
  cudaMemAllocNodeParams p = {};
  p.poolProps.allocType = cudaMemAllocationTypePinned;
  p.poolProps.location.type = cudaMemLocationTypeDevice;
  p.poolProps.location.id = 0;
  p.bytesize = bytes;
  return p;
}

// Allocation and free nodes in one graph: every launch allocates and frees.
__attribute__((noinline)) void alloc_and_free_in_one_graph(cudaStream_t stream) {
  cudaGraph_t graph;
  CHECK_OTHER(cudaGraphCreate(&graph, 0));
  cudaMemAllocNodeParams params = alloc_params(kBytes);
  cudaGraphNode_t alloc_node, free_node;
  CHECK_OTHER(cudaGraphAddMemAllocNode(&alloc_node, graph, nullptr, 0, &params));
  CHECK_OTHER(cudaGraphAddMemFreeNode(&free_node, graph, &alloc_node, 1, params.dptr));
  cudaGraphExec_t exec;
  CHECK_OTHER(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CHECK_OTHER(cudaGraphLaunch(exec, stream));
  CHECK_OTHER(cudaStreamSynchronize(stream));
  CHECK_OTHER(cudaGraphExecDestroy(exec));
  CHECK_OTHER(cudaGraphDestroy(graph));
}

// The graph allocates; the program frees outside it, with cudaFreeAsync
// after each launch and with cudaFree after the last one.
__attribute__((noinline)) void alloc_in_graph_free_outside(cudaStream_t stream) {
  cudaGraph_t graph;
  CHECK_OTHER(cudaGraphCreate(&graph, 0));
  cudaMemAllocNodeParams params = alloc_params(kBytes);
  cudaGraphNode_t alloc_node;
  CHECK_OTHER(cudaGraphAddMemAllocNode(&alloc_node, graph, nullptr, 0, &params));
  cudaGraphExec_t exec;
  CHECK_OTHER(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 2; ++i) {
    CHECK_OTHER(cudaGraphLaunch(exec, stream));
    CHECK(cudaFreeAsync(params.dptr, stream));
  }
  CHECK_OTHER(cudaGraphLaunch(exec, stream));
  CHECK_OTHER(cudaStreamSynchronize(stream));
  CHECK(cudaFree(params.dptr));
  CHECK_OTHER(cudaGraphExecDestroy(exec));
  CHECK_OTHER(cudaGraphDestroy(graph));
}

// One graph allocates, another one frees it.
__attribute__((noinline)) void alloc_in_one_graph_free_in_another(cudaStream_t stream) {
  cudaGraph_t alloc_graph, free_graph;
  CHECK_OTHER(cudaGraphCreate(&alloc_graph, 0));
  CHECK_OTHER(cudaGraphCreate(&free_graph, 0));
  cudaMemAllocNodeParams params = alloc_params(kBytes);
  cudaGraphNode_t alloc_node, free_node;
  CHECK_OTHER(cudaGraphAddMemAllocNode(&alloc_node, alloc_graph, nullptr, 0, &params));
  CHECK_OTHER(cudaGraphAddMemFreeNode(&free_node, free_graph, nullptr, 0, params.dptr));
  cudaGraphExec_t alloc_exec, free_exec;
  CHECK_OTHER(cudaGraphInstantiate(&alloc_exec, alloc_graph, 0));
  CHECK_OTHER(cudaGraphInstantiate(&free_exec, free_graph, 0));
  for (int i = 0; i < 2; ++i) {
    CHECK_OTHER(cudaGraphLaunch(alloc_exec, stream));
    CHECK_OTHER(cudaGraphLaunch(free_exec, stream));
  }
  CHECK_OTHER(cudaStreamSynchronize(stream));
  CHECK_OTHER(cudaGraphExecDestroy(alloc_exec));
  CHECK_OTHER(cudaGraphExecDestroy(free_exec));
  CHECK_OTHER(cudaGraphDestroy(alloc_graph));
  CHECK_OTHER(cudaGraphDestroy(free_graph));
}

// Stream capture: cudaMallocAsync and cudaFreeAsync become the graph's
// allocation and free nodes; nothing is allocated until it launches.
__attribute__((noinline)) void captured_alloc_and_free(cudaStream_t stream) {
  CHECK_OTHER(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  void *scratch = nullptr;
  CHECK(cudaMallocAsync(&scratch, kBytes, stream));
  CHECK(cudaFreeAsync(scratch, stream));
  cudaGraph_t graph;
  CHECK_OTHER(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  CHECK_OTHER(cudaGraphInstantiate(&exec, graph, 0));
  for (int i = 0; i < 3; ++i) CHECK_OTHER(cudaGraphLaunch(exec, stream));
  CHECK_OTHER(cudaStreamSynchronize(stream));
  CHECK_OTHER(cudaGraphExecDestroy(exec));
  CHECK_OTHER(cudaGraphDestroy(graph));
}

}  // namespace

int main() {
  cudaStream_t stream;
  CHECK_OTHER(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  alloc_and_free_in_one_graph(stream);
  alloc_in_graph_free_outside(stream);
  alloc_in_one_graph_free_in_another(stream);
  captured_alloc_and_free(stream);
  CHECK_OTHER(cudaDeviceGraphMemTrim(0));
  unsigned long long used = 1;
  CHECK_OTHER(cudaDeviceGetGraphMemAttribute(0, cudaGraphMemAttrUsedMemCurrent, &used));
  CHECK_OTHER(cudaStreamDestroy(stream));
  std::printf("graph_memory_nodes: done, graph memory in use %llu\n", used);
  return used == 0 ? 0 : 1;
}
