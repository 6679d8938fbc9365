/* classify.c: decides whether one copy at or above the threshold is split: device-to-host (or
 * default) kind, stream not capturing, source inside one managed allocation, host destination. */
#include <stdint.h>

#include "uvmc.h"

/* Stream 0 means the legacy stream, or the per-thread stream for the _ptds/_ptsz entry points
 * (BRIEF §7); the driver calls below get the explicit handle so no build flag changes it. */
static CUstream uvmc_explicit_stream(const struct uvmc_copy *c)
{
    if (c->stream)
        return c->stream;
    return c->per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

/* [src, src+count) lies in one managed allocation. One driver query gives all three attributes. */
static bool uvmc_source_managed(const struct uvmc_copy *c)
{
    unsigned int is_managed = 0; /* an unsigned int, never a bool (BRIEF §2) */
    CUdeviceptr start = 0;
    size_t size = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void *data[] = {&is_managed, &start, &size};
    CUdeviceptr src = (CUdeviceptr)(uintptr_t)c->src;
    if (uvmc_drv.cuPointerGetAttributes(3, attrs, data, src) != CUDA_SUCCESS || !is_managed)
        return false;
    /* src >= start holds for a pointer inside the range; written to avoid overflow. */
    return src >= start && src - start <= size && c->count <= size - (src - start);
}

/* Pinned or pageable host memory; not device, not managed. Sets c->dst_pinned. */
static bool uvmc_destination_host(struct uvmc_copy *c)
{
    unsigned int is_managed = 0;
    CUmemorytype type = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
    void *data[] = {&is_managed, &type};
    /* cuPointerGetAttributes succeeds with zeroed attributes for memory CUDA does not know. */
    if (uvmc_drv.cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)(uintptr_t)c->dst) != CUDA_SUCCESS ||
        is_managed)
        return false;
    if (type == CU_MEMORYTYPE_HOST) {
        c->dst_pinned = true;
        return true;
    }
    c->dst_pinned = false;
    return type == 0;
}

/* FBGEMM advises its tables to prefer the CPU (BRIEF §1); mixed advice reads as "no". */
static bool uvmc_source_prefers_cpu(const struct uvmc_copy *c)
{
    int where = CU_DEVICE_INVALID;
    return uvmc_drv.cuMemRangeGetAttribute &&
           uvmc_drv.cuMemRangeGetAttribute(&where, sizeof where, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                           (CUdeviceptr)(uintptr_t)c->src, c->count) == CUDA_SUCCESS &&
           where == CU_DEVICE_CPU;
}

/* engine = auto: host memcpy when the destination is pageable (the copy engine would stage it
 * through the driver) or the source lives on the host by preference (no PCIe crossing at all). */
static bool uvmc_use_host_engine(const struct uvmc_copy *c)
{
    if (uvmc_cfg.engine == UVMC_ENGINE_COPY || !c->api->ready(true))
        return false;
    return uvmc_cfg.engine == UVMC_ENGINE_HOST || !c->dst_pinned || uvmc_source_prefers_cpu(c);
}

bool uvmc_thread_context(bool runtime)
{
    CUcontext ctx = NULL;
    if (uvmc_driver_ready() && uvmc_drv.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx)
        return true;
    int dev = 0;
    /* A failure here (a forked child, no device) is the real call's to report: pass through. */
    if (!runtime || !uvmc_real.cudaGetDevice || !uvmc_real.cudaSetDevice ||
        uvmc_real.cudaGetDevice(&dev) != cudaSuccess || uvmc_real.cudaSetDevice(dev) != cudaSuccess)
        return false;
    return uvmc_driver_ready() && uvmc_drv.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx;
}

bool uvmc_classify(struct uvmc_copy *c)
{
    if (c->kind != cudaMemcpyDeviceToHost && c->kind != cudaMemcpyDefault)
        return false;
    if (!c->dst || !c->src || !uvmc_thread_context(c->api->runtime) || !c->api->ready(false))
        return false;
    c->hstream = uvmc_explicit_stream(c);
    /* A capturing stream must see exactly the caller's call: anything we add could invalidate it
     * (BRIEF §3). An error here (906 on the legacy stream, say) is the real call's to report. */
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    if (uvmc_drv.cuStreamIsCapturing(c->hstream, &capture) != CUDA_SUCCESS ||
        capture != CU_STREAM_CAPTURE_STATUS_NONE)
        return false;
    if (!uvmc_source_managed(c) || !uvmc_destination_host(c))
        return false;
    if (uvmc_drv.cuCtxGetDevice(&c->device) != CUDA_SUCCESS)
        c->device = 0;
    c->host_engine = uvmc_use_host_engine(c);
    return true;
}
