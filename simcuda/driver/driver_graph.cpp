// CUDA graphs with memory nodes, as NVIDIA documents them (CUDA Programming
// Guide, "Graph Memory Nodes"; cuGraphAddMemAllocNode, cuGraphLaunch):
//   * an allocation node reserves its virtual address when it is added; the
//     address is fixed for the node's lifetime;
//   * launching the graph allocates the memory behind each allocation node
//     and frees what its free nodes name, in node order;
//   * graph memory is freed by a free node (of any graph), by cuMemFreeAsync
//     or cuMemFree outside graphs, or by the next launch when the graph was
//     instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
//     launching again while an allocation is unfreed fails otherwise;
//   * destroying a graph or its executable frees nothing;
//   * freed graph memory stays reserved for graphs until
//     cuDeviceGraphMemTrim (or context teardown) gives it back;
//   * a graph with memory nodes has at most one executable at a time;
//   * cuMemAllocAsync / cuMemFreeAsync on a capturing stream add an
//     allocation / free node to the capture's graph.
// Kernel and other nodes are not simulated (kernels never run here).
#include <algorithm>

#include "driver_internal.h"

struct CUgraphNode_st {
    CUgraph_st *graph;
    bool alloc;  // false: a free node
    uintptr_t va;
    size_t size;
    int device;
};

struct CUgraph_st {
    CUctx_st *ctx;
    std::vector<CUgraphNode_st *> nodes;  // memory nodes, in creation order
    int execs = 0;                        // live executables
};

struct CUgraphExec_st {
    CUgraph_st *graph;
    CUctx_st *ctx;
    std::vector<CUgraphNode_st> nodes;  // copies, taken at instantiation
    unsigned long long flags;
};

namespace simcuda {
namespace {

// Every graph virtual address: reserved at node creation, released once no
// graph or executable holds its node and no allocation lives there.
struct GraphVa {
    size_t span;
    int device;
    int holders;  // graphs and executables with the allocation node
    bool live;
};
Immortal<std::map<uintptr_t, GraphVa>> g_vas;
Immortal<std::set<CUgraph_st *>> g_graphs;
Immortal<std::set<CUgraphExec_st *>> g_execs;
// Nodes and graphs are never freed (stale handles must not alias newer ones).
Immortal<std::vector<CUgraphNode_st *>> g_nodes;

// Per device: graph memory in use and reserved (cuDeviceGetGraphMemAttribute).
struct GraphPool {
    uint64_t used = 0, used_high = 0, reserved = 0, reserved_high = 0;
};
GraphPool g_pool[kMaxDevices];
cuuint64_t g_capture_ids = 0;

void release_va_if_unused_locked(uintptr_t va)
{
    auto it = g_vas->find(va);
    if (it == g_vas->end() || it->second.holders > 0 || it->second.live)
        return;
    va_release(va, it->second.span);
    g_vas->erase(it);
}

CUresult add_node_locked(CUgraph_st *g, bool alloc, uintptr_t va, size_t size, int dev,
                         CUgraphNode_st **out)
{
    auto *n = new CUgraphNode_st{g, alloc, va, size, dev};
    g_nodes->push_back(n);
    g->nodes.push_back(n);
    if (out)
        *out = n;
    return CUDA_SUCCESS;
}

CUresult alloc_node_locked(CUgraph_st *g, size_t n, int dev, uintptr_t *out, CUgraphNode_st **node)
{
    if (n == 0 || !device_valid(dev))
        return CUDA_ERROR_INVALID_VALUE;
    if (n > config().capacity)
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t span = round_up(n, kGranularity);
    uintptr_t va;
    if (!va_carve(span, kGranularity, 0, &va))
        return CUDA_ERROR_OUT_OF_MEMORY;
    (*g_vas)[va] = GraphVa{span, dev, 1, false};
    *out = va;
    return add_node_locked(g, true, va, n, dev, node);
}

// A free node may free an allocation of this graph or of another one.
CUresult free_node_locked(CUgraph_st *g, uintptr_t p, CUgraphNode_st **node)
{
    if (!g_vas->count(p))
        return CUDA_ERROR_INVALID_VALUE;
    for (CUgraphNode_st *n : g->nodes)
        if (!n->alloc && n->va == p)
            return CUDA_ERROR_INVALID_VALUE;  // freed twice in one graph
    return add_node_locked(g, false, p, 0, g_vas->at(p).device, node);
}

bool graph_live_locked(CUgraph_st *g) { return g && g_graphs->count(g); }

CUresult instantiate(CUgraphExec *out, CUgraph g, unsigned long long flags)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    if (flags & ~static_cast<unsigned long long>(CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH |
                                                 CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD |
                                                 CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY))
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    if (!graph_live_locked(g))
        return CUDA_ERROR_INVALID_VALUE;
    if (!g->nodes.empty() && g->execs > 0)
        return CUDA_ERROR_INVALID_VALUE;  // one executable at a time with memory nodes
    auto *e = new CUgraphExec_st{g, g->ctx, {}, flags};
    for (CUgraphNode_st *n : g->nodes) {
        e->nodes.push_back(*n);
        if (n->alloc)
            ++g_vas->at(n->va).holders;
    }
    ++g->execs;
    g_execs->insert(e);
    *out = e;
    return CUDA_SUCCESS;
}

CUresult instantiate_with_params(CUgraphExec *out, CUgraph g, CUDA_GRAPH_INSTANTIATE_PARAMS *params)
{
    if (!params)
        return CUDA_ERROR_INVALID_VALUE;
    CUresult r = instantiate(out, g, params->flags);
    params->hErrNode_out = nullptr;
    params->result_out =
        r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
}

CUresult graph_alloc_locked(const CUgraphNode_st &n, CUctx_st *ctx)
{
    GraphVa &va = g_vas->at(n.va);
    GraphPool &pool = g_pool[n.device];
    // Freed graph memory is reused before the device is asked for more.
    if (pool.reserved - pool.used < va.span) {
        if (!charge(n.device, va.span))
            return CUDA_ERROR_OUT_OF_MEMORY;
        pool.reserved += va.span;
        pool.reserved_high = std::max(pool.reserved_high, pool.reserved);
    }
    pool.used += va.span;
    pool.used_high = std::max(pool.used_high, pool.used);
    va.live = true;
    allocs_locked()[n.va] = Alloc{n.size, 0, va.span, n.device, ctx, Kind::Graph, nullptr};
    return CUDA_SUCCESS;
}

CUresult launch(CUgraphExec e, CUstream s)
{
    Lock lock(driver_mutex());
    if (!e || !g_execs->count(e))
        return CUDA_ERROR_INVALID_VALUE;
    if (!stream_valid_locked(s))
        return CUDA_ERROR_INVALID_HANDLE;
    if (capture_graph_locked(s))
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // child graphs are not simulated
    if (!e->ctx->alive.load(std::memory_order_acquire))
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    const bool auto_free = e->flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
    // Checked before anything changes: a refused launch does nothing.
    std::map<uintptr_t, bool> live;
    for (const CUgraphNode_st &n : e->nodes)
        live.emplace(n.va, g_vas->count(n.va) && g_vas->at(n.va).live);
    for (const CUgraphNode_st &n : e->nodes) {
        bool &l = live[n.va];
        if (n.alloc && l && !auto_free)
            return CUDA_ERROR_INVALID_VALUE;  // the last launch's allocation is unfreed
        if (!n.alloc && !l)
            return CUDA_ERROR_INVALID_VALUE;  // frees memory that is not allocated
        l = n.alloc;
    }
    for (const CUgraphNode_st &n : e->nodes) {
        bool is_live = g_vas->at(n.va).live;
        if (is_live)
            release_alloc_locked(n.va);  // a free node, or the auto-free of a relaunch
        if (n.alloc)
            if (CUresult r = graph_alloc_locked(n, e->ctx))
                return r;
    }
    return CUDA_SUCCESS;
}

CUresult begin_capture(CUstream s, CUstreamCaptureMode mode)
{
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    if (!stream_valid_locked(s))
        return CUDA_ERROR_INVALID_HANDLE;
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (s->capture)
        return CUDA_ERROR_ILLEGAL_STATE;
    auto *g = new CUgraph_st{s->ctx, {}};
    g_graphs->insert(g);
    s->capture = g;
    s->capture_id = ++g_capture_ids;
    return CUDA_SUCCESS;
}

CUresult end_capture(CUstream s, CUgraph *out)
{
    if (!out)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    if (!stream_valid_locked(s))
        return CUDA_ERROR_INVALID_HANDLE;
    CUgraph_st *g = capture_graph_locked(s);
    if (!g)
        return CUDA_ERROR_ILLEGAL_STATE;
    s->capture = nullptr;
    *out = g;
    return CUDA_SUCCESS;
}

CUresult capture_info(CUstream s, CUstreamCaptureStatus *status, cuuint64_t *id, CUgraph *graph,
                      const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps)
{
    if (!status)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    if (!stream_valid_locked(s))
        return CUDA_ERROR_INVALID_HANDLE;
    CUgraph_st *g = capture_graph_locked(s);
    *status = g ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    if (id)
        *id = g ? s->capture_id : 0;
    if (graph)
        *graph = g;
    // Dependencies are not tracked: every captured node is a root.
    if (deps)
        *deps = nullptr;
    if (edges)
        *edges = nullptr;
    if (ndeps)
        *ndeps = 0;
    return CUDA_SUCCESS;
}

}  // namespace

CUgraph_st *capture_graph_locked(CUstream s)
{
    if (!s || s == CU_STREAM_LEGACY || s == CU_STREAM_PER_THREAD || !stream_valid_locked(s))
        return nullptr;
    return s->capture;
}

CUresult capture_alloc_locked(CUgraph_st *g, CUctx_st *, size_t n, int dev, uintptr_t *out)
{
    return alloc_node_locked(g, n, dev, out, nullptr);
}

CUresult capture_free_locked(CUgraph_st *g, uintptr_t p) { return free_node_locked(g, p, nullptr); }

void graph_release_locked(uintptr_t p, const Alloc &a)
{
    shadow_discard(p, a.span);
    g_pool[a.device].used -= a.span;
    auto it = g_vas->find(p);
    if (it != g_vas->end())
        it->second.live = false;
    release_va_if_unused_locked(p);
}

void drop_context_graphs_locked(CUctx_st *c)
{
    // The context's graph memory goes back to the device with it.
    for (auto it = g_execs->begin(); it != g_execs->end();) {
        if ((*it)->ctx != c) {
            ++it;
            continue;
        }
        for (const CUgraphNode_st &n : (*it)->nodes)
            if (n.alloc) {
                --g_vas->at(n.va).holders;
                release_va_if_unused_locked(n.va);
            }
        it = g_execs->erase(it);
    }
    GraphPool &pool = g_pool[c->device];
    if (pool.reserved > pool.used) {
        uncharge(c->device, pool.reserved - pool.used);
        pool.reserved = pool.used;
    }
}

}  // namespace simcuda

using namespace simcuda;

extern "C" {

CUresult CUDAAPI cuGraphCreate(CUgraph *phGraph, unsigned int flags)
{
    SIM_REQUIRE_INIT();
    if (!phGraph || flags)
        return CUDA_ERROR_INVALID_VALUE;
    CUctx_st *c;
    if (CUresult r = current_live(&c))
        return r;
    Lock lock(driver_mutex());
    auto *g = new CUgraph_st{c, {}};
    g_graphs->insert(g);
    *phGraph = g;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                        const CUgraphNode *dependencies, size_t numDependencies,
                                        CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuGraphAddMemAllocNode, phGraphNode, hGraph, dependencies, numDependencies,
               nodeParams) {
        if (!phGraphNode || !nodeParams || (numDependencies && !dependencies))
            return CUDA_ERROR_INVALID_VALUE;
        const CUmemPoolProps &pp = nodeParams->poolProps;
        if (pp.allocType != CU_MEM_ALLOCATION_TYPE_PINNED ||
            pp.location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        Lock lock(driver_mutex());
        if (!graph_live_locked(hGraph))
            return CUDA_ERROR_INVALID_VALUE;
        uintptr_t va;
        CUgraphNode_st *n;
        if (CUresult r = alloc_node_locked(hGraph, nodeParams->bytesize, pp.location.id, &va, &n))
            return r;
        nodeParams->dptr = va;
        *phGraphNode = n;
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies, size_t numDependencies,
                                       CUdeviceptr dptr)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuGraphAddMemFreeNode, phGraphNode, hGraph, dependencies, numDependencies, dptr) {
        if (!phGraphNode || (numDependencies && !dependencies))
            return CUDA_ERROR_INVALID_VALUE;
        Lock lock(driver_mutex());
        if (!graph_live_locked(hGraph))
            return CUDA_ERROR_INVALID_VALUE;
        CUgraphNode_st *n;
        if (CUresult r = free_node_locked(hGraph, dptr, &n))
            return r;
        *phGraphNode = n;
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                             unsigned long long flags)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuGraphInstantiateWithFlags, phGraphExec, hGraph, flags) {
        return instantiate(phGraphExec, hGraph, flags);
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                              CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuGraphInstantiateWithParams, phGraphExec, hGraph, instantiateParams) {
        return instantiate_with_params(phGraphExec, hGraph, instantiateParams);
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams);
CUresult CUDAAPI cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                   CUDA_GRAPH_INSTANTIATE_PARAMS *instantiateParams)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuGraphInstantiateWithParams_ptsz, phGraphExec, hGraph, instantiateParams) {
        return instantiate_with_params(phGraphExec, hGraph, instantiateParams);
    } SIM_TRACED_END;
}
SIM_SAME_TYPE(cuGraphInstantiateWithParams_ptsz, cuGraphInstantiateWithParams);

CUresult CUDAAPI cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuGraphLaunch, hGraphExec, hStream) {
        return launch(hGraphExec, hStream);
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuGraphLaunch_ptsz, hGraphExec, hStream) {
        return launch(hGraphExec, hStream);
    } SIM_TRACED_END;
}
SIM_SAME_TYPE(cuGraphLaunch_ptsz, cuGraphLaunch);

CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec hGraphExec)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuGraphExecDestroy, hGraphExec) {
        Lock lock(driver_mutex());
        if (!hGraphExec || !g_execs->erase(hGraphExec))
            return CUDA_ERROR_INVALID_VALUE;
        for (const CUgraphNode_st &n : hGraphExec->nodes)
            if (n.alloc) {
                --g_vas->at(n.va).holders;
                release_va_if_unused_locked(n.va);
            }
        if (graph_live_locked(hGraphExec->graph))
            --hGraphExec->graph->execs;
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph hGraph)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuGraphDestroy, hGraph) {
        Lock lock(driver_mutex());
        if (!graph_live_locked(hGraph))
            return CUDA_ERROR_INVALID_VALUE;
        g_graphs->erase(hGraph);
        // Live allocations stay (they are freed later, by a graph or
        // cuMemFree); their addresses stay reserved until then.
        for (CUgraphNode_st *n : hGraph->nodes)
            if (n->alloc) {
                --g_vas->at(n->va).holders;
                release_va_if_unused_locked(n->va);
            }
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

// The graph's memory nodes (the only nodes simcuda keeps).
CUresult CUDAAPI cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes)
{
    SIM_REQUIRE_INIT();
    if (!numNodes)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    if (!graph_live_locked(hGraph))
        return CUDA_ERROR_INVALID_VALUE;
    if (nodes)
        for (size_t i = 0; i < *numNodes && i < hGraph->nodes.size(); ++i)
            nodes[i] = hGraph->nodes[i];
    *numNodes = nodes ? std::min(*numNodes, hGraph->nodes.size()) : hGraph->nodes.size();
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGraphMemTrim(CUdevice device)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuDeviceGraphMemTrim, device) {
        if (!device_valid(device))
            return CUDA_ERROR_INVALID_DEVICE;
        Lock lock(driver_mutex());
        // Only memory no graph allocation holds goes back to the device.
        GraphPool &pool = g_pool[device];
        uncharge(device, pool.reserved - pool.used);
        pool.reserved = pool.used;
        return CUDA_SUCCESS;
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuDeviceGetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                              void *value)
{
    SIM_REQUIRE_INIT();
    if (!device_valid(device))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!value)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    const GraphPool &pool = g_pool[device];
    cuuint64_t v;
    switch (attr) {
    case CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT: v = pool.used; break;
    case CU_GRAPH_MEM_ATTR_USED_MEM_HIGH: v = pool.used_high; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT: v = pool.reserved; break;
    case CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH: v = pool.reserved_high; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    *static_cast<cuuint64_t *>(value) = v;
    return CUDA_SUCCESS;
}

// Only the high marks can be set, and only to 0 (a reset to the current value).
CUresult CUDAAPI cuDeviceSetGraphMemAttribute(CUdevice device, CUgraphMem_attribute attr,
                                              void *value)
{
    SIM_REQUIRE_INIT();
    if (!device_valid(device))
        return CUDA_ERROR_INVALID_DEVICE;
    if (!value || *static_cast<cuuint64_t *>(value) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    Lock lock(driver_mutex());
    GraphPool &pool = g_pool[device];
    if (attr == CU_GRAPH_MEM_ATTR_USED_MEM_HIGH)
        pool.used_high = pool.used;
    else if (attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH)
        pool.reserved_high = pool.reserved;
    else
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuStreamBeginCapture_v2, hStream, mode) {
        return begin_capture(hStream, mode);
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuStreamBeginCapture_v2_ptsz, hStream, mode) {
        return begin_capture(hStream, mode);
    } SIM_TRACED_END;
}
SIM_SAME_TYPE(cuStreamBeginCapture_v2_ptsz, cuStreamBeginCapture_v2);

CUresult CUDAAPI cuStreamEndCapture(CUstream hStream, CUgraph *phGraph)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuStreamEndCapture, hStream, phGraph) {
        return end_capture(hStream, phGraph);
    } SIM_TRACED_END;
}

CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph)
{
    SIM_REQUIRE_INIT();
    SIM_TRACED(cuStreamEndCapture_ptsz, hStream, phGraph) {
        return end_capture(hStream, phGraph);
    } SIM_TRACED_END;
}
SIM_SAME_TYPE(cuStreamEndCapture_ptsz, cuStreamEndCapture);

CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                           cuuint64_t *id_out, CUgraph *graph_out,
                                           const CUgraphNode **dependencies_out,
                                           const CUgraphEdgeData **edgeData_out,
                                           size_t *numDependencies_out)
{
    SIM_REQUIRE_INIT();
    return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out,
                        edgeData_out, numDependencies_out);
}

CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream hStream, CUstreamCaptureStatus *captureStatus_out,
                                           cuuint64_t *id_out, CUgraph *graph_out,
                                           const CUgraphNode **dependencies_out,
                                           size_t *numDependencies_out)
{
    SIM_REQUIRE_INIT();
    return capture_info(hStream, captureStatus_out, id_out, graph_out, dependencies_out, nullptr,
                        numDependencies_out);
}

SIM_PT_TWIN(CUresult, cuStreamGetCaptureInfo_v3_ptsz, cuStreamGetCaptureInfo_v3,
            (CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
             const CUgraphNode **d, const CUgraphEdgeData **e, size_t *n),
            (s, st, id, g, d, e, n))
SIM_PT_TWIN(CUresult, cuStreamGetCaptureInfo_v2_ptsz, cuStreamGetCaptureInfo_v2,
            (CUstream s, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
             const CUgraphNode **d, size_t *n),
            (s, st, id, g, d, n))

}  // extern "C"
