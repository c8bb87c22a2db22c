// CUDA graph memory nodes, as CUDA defines them: an allocation node
// (cuGraphAddMemAllocNode, or cudaMallocAsync on a capturing stream)
// reserves its address when it is added; the memory behind it is allocated
// each time the graph launches and freed by a free node (of this graph or
// another), by cudaFreeAsync / cuMemFreeAsync / cudaFree outside any graph,
// or, with cudaGraphInstantiateFlagAutoFreeOnLaunch, by the next launch.
// Destroying a graph frees nothing; cudaDeviceGraphMemTrim releases only
// memory no allocation holds. This table keeps what the graphs contain; the
// recorder turns a launch into the allocations and frees it makes.
#pragma once

#include <atomic>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "common/model/event.h"
#include "shim/core/shard_lock.h"

namespace torchseal {

// A memory node: its address, size and creation site (raw IPs, interned
// at launch together with the launch's own frames).
struct GraphMemNode {
  bool alloc = true;  // false: a free node of `va`
  uint64_t va = 0;
  uint64_t size = 0;
  int device = -1;
  uint32_t context = 0;
  PyStackId pystack = 0;
  std::vector<uint64_t> ips;
};

class GraphMemTable {
 public:
  // A memory node added to `graph` (explicitly or by a captured call).
  void add_node(uint64_t graph, GraphMemNode &&n);
  // `exec` instantiates `graph`: it launches the nodes the graph has now.
  void instantiate(uint64_t exec, uint64_t graph);
  // The memory nodes `exec` runs at each launch, in creation order (which
  // is a topological order: a node's dependencies exist before it).
  bool launch_nodes(uint64_t exec, std::vector<GraphMemNode> &out);
  void destroy_graph(uint64_t graph);
  void destroy_exec(uint64_t exec);

  // Stream captures in progress: only while there is one is a stream-ordered
  // call asked whether its stream captures.
  void capture_began() { captures_.fetch_add(1, std::memory_order_relaxed); }
  void capture_ended();
  bool capturing() const { return captures_.load(std::memory_order_relaxed) > 0; }

  void reset_after_fork();

 private:
  ShardLock lock_;
  std::unordered_map<uint64_t, std::vector<GraphMemNode>> graphs_;
  std::unordered_map<uint64_t, std::vector<GraphMemNode>> execs_;
  std::atomic<int> captures_{0};
};

// The graph `stream` is capturing into, or 0. Defined by the interception
// layer, which alone calls the driver; asked only while a capture is in
// progress (GraphMemTable::capturing).
uint64_t capture_graph_of(uint64_t stream);

}  // namespace torchseal
