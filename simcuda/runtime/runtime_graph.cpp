// Graphs with memory nodes and stream capture: each call forwards to the
// driver (driver/driver_graph.cpp), as NVIDIA's runtime does. The runtime's
// parameter structs have the driver's layout, which the asserts check.
#include <cstddef>

#include "runtime_internal.h"

using namespace simcudart;

static_assert(sizeof(cudaMemAllocNodeParams) == sizeof(CUDA_MEM_ALLOC_NODE_PARAMS));
static_assert(offsetof(cudaMemAllocNodeParams, bytesize) ==
              offsetof(CUDA_MEM_ALLOC_NODE_PARAMS, bytesize));
static_assert(offsetof(cudaMemAllocNodeParams, dptr) == offsetof(CUDA_MEM_ALLOC_NODE_PARAMS, dptr));
static_assert(sizeof(cudaGraphInstantiateParams) == sizeof(CUDA_GRAPH_INSTANTIATE_PARAMS));
static_assert(offsetof(cudaGraphInstantiateParams, result_out) ==
              offsetof(CUDA_GRAPH_INSTANTIATE_PARAMS, result_out));

extern "C" {

cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamBeginCapture(stream, static_cast<CUstreamCaptureMode>(mode)));
}

cudaError_t CUDARTAPI cudaStreamBeginCapture_ptsz(cudaStream_t stream, cudaStreamCaptureMode mode)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamBeginCapture_ptsz(stream, static_cast<CUstreamCaptureMode>(mode)));
}

cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamEndCapture(stream, pGraph));
}

cudaError_t CUDARTAPI cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph)
{
    SIM_RT_INIT();
    return ret(drv().cuStreamEndCapture_ptsz(stream, pGraph));
}

cudaError_t CUDARTAPI cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags)
{
    SIM_RT_INIT();
    return ret(drv().cuGraphCreate(pGraph, flags));
}

cudaError_t CUDARTAPI cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes,
                                        size_t *numNodes)
{
    SIM_RT_INIT();
    return ret(drv().cuGraphGetNodes(graph, nodes, numNodes));
}

cudaError_t CUDARTAPI cudaGraphAddMemAllocNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                               const cudaGraphNode_t *pDependencies,
                                               size_t numDependencies,
                                               struct cudaMemAllocNodeParams *nodeParams)
{
    SIM_RT_INIT();
    return ret(drv().cuGraphAddMemAllocNode(pGraphNode, graph, pDependencies, numDependencies,
                                            reinterpret_cast<CUDA_MEM_ALLOC_NODE_PARAMS *>(nodeParams)));
}

cudaError_t CUDARTAPI cudaGraphAddMemFreeNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                              const cudaGraphNode_t *pDependencies,
                                              size_t numDependencies, void *dptr)
{
    SIM_RT_INIT();
    return ret(drv().cuGraphAddMemFreeNode(pGraphNode, graph, pDependencies, numDependencies,
                                           reinterpret_cast<CUdeviceptr>(dptr)));
}

cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                           unsigned long long flags)
{
    SIM_RT_INIT();
    return ret(drv().cuGraphInstantiateWithFlags(pGraphExec, graph, flags));
}

cudaError_t CUDARTAPI cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                    unsigned long long flags)
{
    SIM_RT_INIT();
    return ret(drv().cuGraphInstantiateWithFlags(pGraphExec, graph, flags));
}

cudaError_t CUDARTAPI cudaGraphInstantiateWithParams(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                                     cudaGraphInstantiateParams *params)
{
    SIM_RT_INIT();
    return ret(drv().cuGraphInstantiateWithParams(
        pGraphExec, graph, reinterpret_cast<CUDA_GRAPH_INSTANTIATE_PARAMS *>(params)));
}

cudaError_t CUDARTAPI cudaGraphInstantiateWithParams_ptsz(cudaGraphExec_t *pGraphExec,
                                                          cudaGraph_t graph,
                                                          cudaGraphInstantiateParams *params)
{
    SIM_RT_INIT();
    return ret(drv().cuGraphInstantiateWithParams_ptsz(
        pGraphExec, graph, reinterpret_cast<CUDA_GRAPH_INSTANTIATE_PARAMS *>(params)));
}

cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(drv().cuGraphLaunch(graphExec, stream));
}

cudaError_t CUDARTAPI cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream)
{
    SIM_RT_INIT();
    return ret(drv().cuGraphLaunch_ptsz(graphExec, stream));
}

cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t graphExec)
{
    SIM_RT_INIT();
    return ret(drv().cuGraphExecDestroy(graphExec));
}

cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t graph)
{
    SIM_RT_INIT();
    return ret(drv().cuGraphDestroy(graph));
}

cudaError_t CUDARTAPI cudaDeviceGraphMemTrim(int device)
{
    SIM_RT_INIT();
    return ret(drv().cuDeviceGraphMemTrim(device));
}

cudaError_t CUDARTAPI cudaDeviceGetGraphMemAttribute(int device, cudaGraphMemAttributeType attr,
                                                     void *value)
{
    SIM_RT_INIT();
    return ret(drv().cuDeviceGetGraphMemAttribute(device, static_cast<CUgraphMem_attribute>(attr),
                                                  value));
}

cudaError_t CUDARTAPI cudaDeviceSetGraphMemAttribute(int device, cudaGraphMemAttributeType attr,
                                                     void *value)
{
    SIM_RT_INIT();
    return ret(drv().cuDeviceSetGraphMemAttribute(device, static_cast<CUgraphMem_attribute>(attr),
                                                  value));
}

}  // extern "C"
