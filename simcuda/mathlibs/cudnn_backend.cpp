// Simulated cuDNN graph (backend) API. Descriptors keep every attribute set
// on them; heuristics answer with one engine that needs no workspace, and
// executing a plan computes nothing, as simcuda's kernels do.
#include <cudnn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <vector>

namespace {

struct Backend;

struct Value {
    cudnnBackendAttributeType_t type{};
    std::vector<unsigned char> bytes;                // plain elements
    std::vector<std::shared_ptr<Backend>> children;  // CUDNN_TYPE_BACKEND_DESCRIPTOR
};

struct Backend {
    cudnnBackendDescriptorType_t type{};
    bool finalized = false;
    std::map<int, Value> attrs;
};

// Element sizes of the attribute types, from cudnn_graph.h.
size_t element_size(cudnnBackendAttributeType_t t)
{
    switch (t) {
    case CUDNN_TYPE_HANDLE:
    case CUDNN_TYPE_VOID_PTR:
    case CUDNN_TYPE_BACKEND_DESCRIPTOR: return sizeof(void *);
    case CUDNN_TYPE_BOOLEAN: return sizeof(bool);
    case CUDNN_TYPE_INT64:
    case CUDNN_TYPE_DOUBLE: return 8;
    case CUDNN_TYPE_CHAR: return 1;
    case CUDNN_TYPE_FRACTION: return sizeof(cudnnFraction_t);
    default: return 4;  // float, int32 and the enums
    }
}

Backend *as_backend(cudnnBackendDescriptor_t d) { return static_cast<Backend *>(d); }

std::shared_ptr<Backend> clone(const Backend &b)
{
    auto c = std::make_shared<Backend>();
    c->type = b.type;
    c->finalized = b.finalized;
    for (const auto &[name, v] : b.attrs) {
        Value &cv = c->attrs[name];
        cv.type = v.type;
        cv.bytes = v.bytes;
        for (const auto &child : v.children)
            cv.children.push_back(clone(*child));
    }
    return c;
}

// Copies `from` into the caller's descriptor `to` (a get of a descriptor).
void assign(Backend *to, const Backend &from)
{
    std::shared_ptr<Backend> c = clone(from);
    to->type = c->type;
    to->finalized = c->finalized;
    to->attrs = std::move(c->attrs);
}

void set_int64(Backend &b, int name, int64_t v)
{
    Value &val = b.attrs[name];
    val.type = CUDNN_TYPE_INT64;
    val.bytes.resize(sizeof v);
    std::memcpy(val.bytes.data(), &v, sizeof v);
}

// The one engine of the simulation, for an operation graph.
std::shared_ptr<Backend> engine_for(const Value *graph)
{
    auto engine = std::make_shared<Backend>();
    engine->type = CUDNN_BACKEND_ENGINE_DESCRIPTOR;
    engine->finalized = true;
    if (graph)
        engine->attrs[CUDNN_ATTR_ENGINE_OPERATION_GRAPH] = *graph;
    set_int64(*engine, CUDNN_ATTR_ENGINE_GLOBAL_INDEX, 0);
    return engine;
}

const Value *find(const Backend &b, int name)
{
    auto it = b.attrs.find(name);
    return it == b.attrs.end() ? nullptr : &it->second;
}

cudnnStatus_t get_heuristic_results(const Backend &heur, int64_t requested, int64_t *count,
                                     void *out)
{
    *count = 1;
    if (requested < 1)
        return CUDNN_STATUS_SUCCESS;
    auto **cfgs = static_cast<cudnnBackendDescriptor_t *>(out);
    Backend *cfg = as_backend(cfgs[0]);
    if (!cfg)
        return CUDNN_STATUS_BAD_PARAM;
    Backend made;
    made.type = CUDNN_BACKEND_ENGINECFG_DESCRIPTOR;
    made.finalized = true;
    Value &e = made.attrs[CUDNN_ATTR_ENGINECFG_ENGINE];
    e.type = CUDNN_TYPE_BACKEND_DESCRIPTOR;
    e.children.push_back(engine_for(find(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH)));
    assign(cfg, made);
    return CUDNN_STATUS_SUCCESS;
}

}  // namespace

extern "C" {

cudnnStatus_t CUDNNWINAPI cudnnBackendCreateDescriptor(cudnnBackendDescriptorType_t descriptorType,
                                                       cudnnBackendDescriptor_t *descriptor)
{
    if (!descriptor)
        return CUDNN_STATUS_BAD_PARAM;
    auto *b = new (std::nothrow) Backend;
    if (!b)
        return CUDNN_STATUS_ALLOC_FAILED;
    b->type = descriptorType;
    *descriptor = b;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendDestroyDescriptor(cudnnBackendDescriptor_t descriptor)
{
    delete as_backend(descriptor);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendInitialize(cudnnBackendDescriptor_t descriptor)
{
    return descriptor ? CUDNN_STATUS_SUCCESS : CUDNN_STATUS_BAD_PARAM;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendFinalize(cudnnBackendDescriptor_t descriptor)
{
    Backend *b = as_backend(descriptor);
    if (!b)
        return CUDNN_STATUS_BAD_PARAM;
    if (b->type == CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR)
        set_int64(*b, CUDNN_ATTR_OPERATIONGRAPH_ENGINE_GLOBAL_COUNT, 1);
    if (b->type == CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR) {
        set_int64(*b, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, 0);
        static const char kJson[] = "{\"engine\":\"simcuda\"}";
        Value &json = b->attrs[CUDNN_ATTR_EXECUTION_PLAN_JSON_REPRESENTATION];
        json.type = CUDNN_TYPE_CHAR;
        json.bytes.assign(kJson, kJson + sizeof kJson);
    }
    if (b->type == CUDNN_BACKEND_ENGINECFG_DESCRIPTOR)
        set_int64(*b, CUDNN_ATTR_ENGINECFG_WORKSPACE_SIZE, 0);
    b->finalized = true;
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendSetAttribute(cudnnBackendDescriptor_t descriptor,
                                                   cudnnBackendAttributeName_t attributeName,
                                                   cudnnBackendAttributeType_t attributeType,
                                                   int64_t elementCount,
                                                   const void *arrayOfElements)
{
    Backend *b = as_backend(descriptor);
    if (!b || elementCount < 0 || (elementCount && !arrayOfElements))
        return CUDNN_STATUS_BAD_PARAM;
    if (b->finalized)
        return CUDNN_STATUS_NOT_SUPPORTED;  // as documented: finalized is read-only
    Value v;
    v.type = attributeType;
    if (attributeType == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        auto *const *ds = static_cast<const cudnnBackendDescriptor_t *>(arrayOfElements);
        for (int64_t i = 0; i < elementCount; ++i) {
            if (!ds[i])
                return CUDNN_STATUS_BAD_PARAM;
            v.children.push_back(clone(*as_backend(ds[i])));
        }
    } else {
        auto *p = static_cast<const unsigned char *>(arrayOfElements);
        v.bytes.assign(p, p + elementCount * element_size(attributeType));
    }
    b->attrs[attributeName] = std::move(v);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendGetAttribute(cudnnBackendDescriptor_t const descriptor,
                                                   cudnnBackendAttributeName_t attributeName,
                                                   cudnnBackendAttributeType_t attributeType,
                                                   int64_t requestedElementCount,
                                                   int64_t *elementCount, void *arrayOfElements)
{
    const Backend *b = as_backend(descriptor);
    if (!b || requestedElementCount < 0)
        return CUDNN_STATUS_BAD_PARAM;
    // A null array asks for the count only (cudnn_frontend's two-call idiom
    // passes the full requested count with a null array first).
    if (!arrayOfElements)
        requestedElementCount = 0;
    int64_t ignored = 0;
    if (!elementCount)
        elementCount = &ignored;
    if (attributeName == CUDNN_ATTR_ENGINEHEUR_RESULTS)
        return get_heuristic_results(*b, requestedElementCount, elementCount, arrayOfElements);
    const Value *v = find(*b, attributeName);
    if (!v) {
        // Unset: a list attribute with no elements (notes, knobs, intermediates).
        *elementCount = 0;
        return CUDNN_STATUS_SUCCESS;
    }
    if (attributeType == CUDNN_TYPE_BACKEND_DESCRIPTOR) {
        auto have = static_cast<int64_t>(v->children.size());
        *elementCount = have;
        auto **out = static_cast<cudnnBackendDescriptor_t *>(arrayOfElements);
        for (int64_t i = 0; i < std::min(have, requestedElementCount); ++i) {
            if (!out[i])
                return CUDNN_STATUS_BAD_PARAM;
            assign(as_backend(out[i]), *v->children[i]);
        }
        return CUDNN_STATUS_SUCCESS;
    }
    size_t size = element_size(attributeType);
    auto have = static_cast<int64_t>(v->bytes.size() / size);
    *elementCount = have;
    if (requestedElementCount > 0)
        std::memcpy(arrayOfElements, v->bytes.data(),
                    static_cast<size_t>(std::min(have, requestedElementCount)) * size);
    return CUDNN_STATUS_SUCCESS;
}

cudnnStatus_t CUDNNWINAPI cudnnBackendExecute(cudnnHandle_t handle,
                                              cudnnBackendDescriptor_t executionPlan,
                                              cudnnBackendDescriptor_t variantPack)
{
    const Backend *plan = as_backend(executionPlan);
    if (!handle || !plan || !variantPack || !plan->finalized)
        return CUDNN_STATUS_BAD_PARAM;
    return CUDNN_STATUS_SUCCESS;
}

}  // extern "C"
