// The core entry points every backend calls with a filled CallArgs: which
// calls are events is decided here, once. Inline, so the hooks' hot path
// passes the fields in registers as before.
#pragma once

#include "shim/core/call_args.h"
#include "shim/core/recorder.h"

namespace torchseal {

// An allocation call returned. A successful call that returned no memory
// (a zero-byte request) and failures other than out-of-memory are no events.
inline bool records_alloc(const CallArgs &c) {
  return c.result == CallResult::Ok ? c.addr != 0 : c.result == CallResult::OutOfMemory;
}

// Call after records_alloc() said yes (a backend may have work to do in
// between, such as asking for the device).
inline void record_alloc(const CallArgs &c) {
  if (c.result != CallResult::Ok) {
    recorder().on_oom(c.api, c.family, c.size, c.device);
    return;
  }
  // Into a capturing stream: a graph's allocation node, allocated at launch.
  if (c.family == Family::StreamOrdered && recorder().graphs().capturing())
    if (uint64_t graph = capture_graph_of(c.stream)) {
      recorder().on_graph_node(c.api, graph, true, c.addr, c.size, c.device, c.context);
      return;
    }
  recorder().on_alloc(c.api, c.family, c.addr, c.size, c.device, c.stream, c.context);
}

// A free of NULL is a documented no-op, not an event.
inline bool records_free(const CallArgs &c) { return c.addr != 0; }

// Called *before* the free is forwarded, so the address cannot be handed out
// again by the driver in between; the token undoes it if the free fails.
inline FreeToken record_free(const CallArgs &c) {
  if (!records_free(c)) return {};
  // Into a capturing stream: a free node, which frees at the graph's launch.
  if (c.family == Family::StreamOrdered && recorder().graphs().capturing())
    if (uint64_t graph = capture_graph_of(c.stream)) {
      recorder().on_graph_node(c.api, graph, false, c.addr, 0, c.device, c.context);
      return {};
    }
  return recorder().on_free(c.api, c.family, c.addr, c.stream);
}

inline void free_returned(const FreeToken &t, CallResult r) {
  if (r != CallResult::Ok) recorder().undo_free(t);
}

// cuMemRetainAllocationHandle returned handle `c.addr` (only when it
// succeeded): one more reference, balanced by a release.
inline void record_vmm_retain(const CallArgs &c) {
  if (c.result == CallResult::Ok && c.addr) recorder().on_vmm_retain(c.addr);
}

// VMM address-space calls (map, unmap, reserve, unreserve), only when they
// succeeded: the timeline, and the mappings in force (Recorder::on_vmm_range).
inline void record_vmm_range(const CallArgs &c) {
  if (c.result != CallResult::Ok) return;
  Op op;
  switch (api_info(c.api).role) {
    case Role::Map:
      op = Op::Map;
      break;
    case Role::Unmap:
      op = Op::Unmap;
      break;
    case Role::Reserve:
      op = Op::Reserve;
      break;
    case Role::Unreserve:
      op = Op::Unreserve;
      break;
    default:
      return;
  }
  recorder().on_vmm_range(op, c.addr, c.size, c.handle);
}

// A graph call (Role::Graph) that returned `c.result`.
inline void record_graph_call(const CallArgs &c) {
  Recorder &r = recorder();
  switch (c.api) {
    case ApiId::cuStreamBeginCapture_v2:
    case ApiId::cuStreamBeginCapture_v2_ptsz:
      if (c.result == CallResult::Ok) r.graphs().capture_began();
      return;
    case ApiId::cuStreamEndCapture:
    case ApiId::cuStreamEndCapture_ptsz:
      // An invalidated capture ends with an error too.
      r.graphs().capture_ended();
      return;
    default:
      break;
  }
  if (c.result != CallResult::Ok) return;
  switch (c.api) {
    case ApiId::cuGraphAddMemAllocNode:
      r.on_graph_node(c.api, c.graph, true, c.addr, c.size, c.device, c.context);
      return;
    case ApiId::cuGraphAddMemFreeNode:
      r.on_graph_node(c.api, c.graph, false, c.addr, 0, c.device, c.context);
      return;
    case ApiId::cuGraphInstantiateWithFlags:
    case ApiId::cuGraphInstantiateWithParams:
    case ApiId::cuGraphInstantiateWithParams_ptsz:
      r.on_graph_instantiate(c.exec, c.graph);
      return;
    case ApiId::cuGraphLaunch:
    case ApiId::cuGraphLaunch_ptsz:
      r.on_graph_launch(c.api, c.exec, c.stream);
      return;
    case ApiId::cuGraphExecDestroy:
      r.on_graph_exec_destroy(c.exec);
      return;
    case ApiId::cuGraphDestroy:
      r.on_graph_destroy(c.graph);
      return;
    default:
      return;
  }
}

// Call after tears_down() said yes.
inline void record_teardown(const CallArgs &c) {
  recorder().on_teardown(c.api, c.device, c.context);
}

}  // namespace torchseal
