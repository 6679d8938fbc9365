/* sim_device.c: the simulated device and its primary context: cuInit, device queries and attributes,
 * primary-context retain/release, the current context per thread, cuCtxSynchronize, error strings. */
#include <stdio.h>

#include "sim_internal.h"

static int g_primary_refs;

/* ------------------------------------------------------------------ device */

CUresult CUDAAPI cuInit(unsigned int flags) { ENTER("cuInit"); return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int *v) { ENTER("cuDriverGetVersion"); if (!v) return CUDA_ERROR_INVALID_VALUE; *v = SIM_DRIVER_VERSION; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ord) { ENTER("cuDeviceGet"); if (!d) return CUDA_ERROR_INVALID_VALUE; if (ord != 0) return CUDA_ERROR_INVALID_DEVICE; *d = 0; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetCount(int *n) { ENTER("cuDeviceGetCount"); if (!n) return CUDA_ERROR_INVALID_VALUE; *n = 1; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice d) {
    ENTER("cuDeviceGetName");
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", "uvmchunk simulated GPU");
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *b, CUdevice d) {
    ENTER("cuDeviceTotalMem_v2");
    if (!b) return CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    *b = (size_t)16 << 30;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute a, CUdevice d) {
    ENTER("cuDeviceGetAttribute");
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    int v = 0;
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: v = sim_sw.cma; break;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY:
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
        v = 1; break;
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS: case CU_DEVICE_ATTRIBUTE_INTEGRATED:
    case CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES:
    case CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST:
        v = 0; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: v = 9; break;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: v = 0; break;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: v = 132; break;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: v = 2; break;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: v = 32; break;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: v = 1024; break;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: v = 5120; break;
    case CU_DEVICE_ATTRIBUTE_PCI_BUS_ID: v = 1; break;
    default: v = 0; break;
    }
    *pi = v;
    return CUDA_SUCCESS;
}
/* ------------------------------------------------------------------ context */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pc, CUdevice d) {
    ENTER("cuDevicePrimaryCtxRetain");
    if (!pc) return CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_mu);
    g_primary_refs++;
    pthread_mutex_unlock(&sim_mu);
    *pc = (CUcontext)&sim_primary;
    return CUDA_SUCCESS;
}
static CUresult primary_release(CUdevice d) {
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_mu);
    if (g_primary_refs > 0) g_primary_refs--;
    pthread_mutex_unlock(&sim_mu);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice d) { ENTER("cuDevicePrimaryCtxRelease_v2"); return primary_release(d); }
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d) { ENTER("cuDevicePrimaryCtxRelease"); return primary_release(d); }
static CUresult primary_reset(CUdevice d) {
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    sim_memory_reset();
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice d) { ENTER("cuDevicePrimaryCtxReset_v2"); return primary_reset(d); }
CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice d) { ENTER("cuDevicePrimaryCtxReset"); return primary_reset(d); }
CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active) {
    ENTER("cuDevicePrimaryCtxGetState");
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_mu);
    *active = g_primary_refs > 0;
    pthread_mutex_unlock(&sim_mu);
    *flags = 0;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pc) { ENTER("cuCtxGetCurrent"); if (!pc) return CUDA_ERROR_INVALID_VALUE; *pc = sim_tl_ctx; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext c) {
    ENTER("cuCtxSetCurrent");
    if (c && c != (CUcontext)&sim_primary) return CUDA_ERROR_INVALID_CONTEXT;
    sim_tl_ctx = c;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetDevice(CUdevice *d) { ENTER("cuCtxGetDevice"); NEED_CTX(); if (!d) return CUDA_ERROR_INVALID_VALUE; *d = 0; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSynchronize(void) {
    ENTER("cuCtxSynchronize");
    NEED_CTX();
    pthread_mutex_lock(&sim_mu);
    if (sim_any_capture_locked()) {
        for (struct stream *t = sim_streams_all; t; t = t->all_next)
            if (t->cap_status != CAP_NONE) sim_invalidate_capture_locked(t->cap_id);
        pthread_mutex_unlock(&sim_mu);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    for (struct stream *t = sim_streams_all; t; t = t->all_next) sim_wait_stream_locked(t, t->enq_seq);
    pthread_mutex_unlock(&sim_mu);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ error strings */

static const struct { CUresult code; const char *name, *str; } g_errs[] = {
    { CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
    { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
    { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
    { CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
    { CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
    { CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
    { CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
    { CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state" },
    { CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped" },
    { CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region" },
    { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
    { CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing" },
    { CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture" },
    { CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream" },
    { CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream" },
    { CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread" },
    { CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};
static int err_index(CUresult e) {
    for (size_t i = 0; i < sizeof g_errs / sizeof g_errs[0]; i++)
        if (g_errs[i].code == e) return (int)i;
    return -1;
}
CUresult CUDAAPI cuGetErrorString(CUresult e, const char **s) {
    ENTER("cuGetErrorString");
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    int i = err_index(e);
    *s = i < 0 ? NULL : g_errs[i].str;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult e, const char **s) {
    ENTER("cuGetErrorName");
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    int i = err_index(e);
    *s = i < 0 ? NULL : g_errs[i].name;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
