#include "shim/core/python/autograd_node.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <unordered_map>

#include "common/util/fork_safe.h"
#include "shim/core/shard_lock.h"
#include "shim/core/unwind/unwinder.h"

namespace torchseal {
namespace {

// Deep enough for dispatcher, allocator and kernel frames between the node
// and cudaMalloc.
constexpr int kMaxDepth = 96;
// Bounds the cache in a program that keeps loading code.
constexpr size_t kMaxCached = 1 << 16;

struct Cache {
  ShardLock lock;
  std::unordered_map<uint64_t, std::string> by_ip;  // "" = not a node's apply
};
Cache &cache() {
  static constinit Lazy<Cache> c;  // never destroyed: engine threads outlive statics
  return c.get();
}

// One <length><identifier> of a nested name; false at anything else
// (template arguments, substitutions), which no Node::apply here needs.
bool take_component(std::string_view &s, std::string_view &out) {
  size_t len = 0, i = 0;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') len = len * 10 + size_t(s[i++] - '0');
  if (i == 0 || len == 0 || i + len > s.size()) return false;
  out = s.substr(i, len);
  s.remove_prefix(i + len);
  return true;
}

std::string lookup(uint64_t ip) {
  Dl_info info;
  // ip is a return address: ip - 1 is inside the calling function.
  if (!dladdr(reinterpret_cast<void *>(ip - 1), &info) || !info.dli_sname) return {};
  return std::string(node_of_mangled(info.dli_sname));
}

}  // namespace

std::string_view node_of_mangled(std::string_view s) {
  constexpr std::string_view kPrefix = "_ZN5torch8autograd";
  constexpr std::string_view kApplyArgs = "5applyEOSt6vectorIN2at6TensorE";
  if (s.substr(0, kPrefix.size()) != kPrefix) return {};
  s.remove_prefix(kPrefix.size());
  std::string_view last, part;
  while (!s.empty() && s[0] != 'E') {
    if (s.substr(0, kApplyArgs.size()) == kApplyArgs) return last;
    if (!take_component(s, part)) return {};
    last = part;
  }
  return {};
}

bool autograd_node_name(char *out, size_t cap) {
  uint64_t ips[kMaxDepth];
  int n = capture_stack(ips, kMaxDepth);
  Cache &c = cache();
  for (int i = 0; i < n; ++i) {
    std::string name;
    bool known;
    {
      Guard g(c.lock);
      auto it = c.by_ip.find(ips[i]);
      known = it != c.by_ip.end();
      if (known) name = it->second;
    }
    if (!known) {
      // dladdr outside our lock: it takes the loader's lock.
      name = lookup(ips[i]);
      Guard g(c.lock);
      if (c.by_ip.size() >= kMaxCached) c.by_ip.clear();
      c.by_ip.emplace(ips[i], name);
    }
    if (!name.empty() && name.size() < cap) {
      std::memcpy(out, name.data(), name.size());
      out[name.size()] = '\0';
      return true;
    }
  }
  return false;
}

}  // namespace torchseal
