/* Private interface between simcuda's libcuda.so.1, libcudart.so.13 and
 * libcupti.so.13. Not part of any NVIDIA API; the symbols carry a `simcuda`
 * prefix so nothing real can collide with them. Consumers look them up with
 * dlsym on their libcuda.so.1 handle and treat absence as "no callbacks". */
#ifndef SIMCUDA_HOOKS_H
#define SIMCUDA_HOOKS_H

#include <stdint.h>
#include <cuda.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SIMCUDA_HOOKS_VERSION 1

/* One API enter or exit. domain/cbid use CUPTI's numbering
 * (CUpti_CallbackDomain, CUpti_driver_api_trace_cbid / runtime cbid). */
typedef struct simcudaApiRecord {
    int domain;               /* 1 = driver API, 2 = runtime API */
    int site;                 /* 0 = enter, 1 = exit */
    uint32_t cbid;
    const char *name;
    const void *params;       /* the generated *_params struct */
    const void *returnValue;  /* CUresult* / cudaError_t*; meaningful on exit */
    CUcontext context;
    uint32_t contextUid;
    uint32_t correlationId;
    uint64_t *correlationData; /* same address on enter and exit */
} simcudaApiRecord;

typedef struct simcudaCallbackSink {
    int version;              /* SIMCUDA_HOOKS_VERSION */
    void *user;
    void (*api)(void *user, const simcudaApiRecord *rec);
    /* cbid is a CUpti_CallbackIdResource (CONTEXT_CREATED, ...). */
    void (*resource)(void *user, uint32_t cbid, CUcontext ctx, uint32_t ctxUid);
} simcudaCallbackSink;

/* Installs (or with NULL removes) the single sink. Returns 0 on success. */
typedef int (*simcudaRegisterCallbackSink_t)(const simcudaCallbackSink *sink);
/* Nonzero when a sink is installed: lets callers skip building params. */
typedef int (*simcudaCallbacksActive_t)(void);
/* Delivers a runtime-API record; the driver fills context, contextUid and,
 * on enter, correlationId. */
typedef void (*simcudaEmitApi_t)(simcudaApiRecord *rec);

int simcudaInternalRegisterCallbackSink(const simcudaCallbackSink *sink);
int simcudaInternalCallbacksActive(void);
void simcudaInternalEmitApi(simcudaApiRecord *rec);

#ifdef __cplusplus
}
#endif
#endif
