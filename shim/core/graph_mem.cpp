#include "shim/core/graph_mem.h"

#include <new>

namespace torchseal {

void GraphMemTable::add_node(uint64_t graph, GraphMemNode &&n) {
  Guard g(lock_);
  graphs_[graph].push_back(std::move(n));
}

void GraphMemTable::instantiate(uint64_t exec, uint64_t graph) {
  Guard g(lock_);
  auto it = graphs_.find(graph);
  if (it != graphs_.end())
    execs_[exec] = it->second;
  else
    execs_.erase(exec);  // no memory nodes (an exec handle may be reused)
}

bool GraphMemTable::launch_nodes(uint64_t exec, std::vector<GraphMemNode> &out) {
  Guard g(lock_);
  auto it = execs_.find(exec);
  if (it == execs_.end()) return false;
  out = it->second;
  return true;
}

void GraphMemTable::destroy_graph(uint64_t graph) {
  Guard g(lock_);
  graphs_.erase(graph);
}

void GraphMemTable::destroy_exec(uint64_t exec) {
  Guard g(lock_);
  execs_.erase(exec);
}

void GraphMemTable::capture_ended() {
  int n = captures_.load(std::memory_order_relaxed);
  while (n > 0 && !captures_.compare_exchange_weak(n, n - 1, std::memory_order_relaxed)) {}
}

void GraphMemTable::reset_after_fork() {
  // Abandoned, never freed: another thread may have been inside them.
  new (&lock_) ShardLock();
  new (&graphs_) std::unordered_map<uint64_t, std::vector<GraphMemNode>>();
  new (&execs_) std::unordered_map<uint64_t, std::vector<GraphMemNode>>();
  captures_.store(0, std::memory_order_relaxed);
}

}  // namespace torchseal
