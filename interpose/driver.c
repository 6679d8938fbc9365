/* driver.c: the exported driver API copy entry points (cuMemcpyDtoH*, unified cuMemcpy*), routed
 * through the same classification and engine as the runtime's, with CUresult codes throughout. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "uvmc.h"

/* DtoH family first, then the unified-address family (kind Default: either direction). */
enum uvmc_driver_entry {
    UVMC_DRV_DTOH,            /* cuMemcpyDtoH (legacy 32-bit ABI) */
    UVMC_DRV_DTOH_V2,
    UVMC_DRV_DTOH_V2_PTDS,
    UVMC_DRV_DTOH_ASYNC,      /* cuMemcpyDtoHAsync (legacy 32-bit ABI) */
    UVMC_DRV_DTOH_ASYNC_V2,
    UVMC_DRV_DTOH_ASYNC_V2_PTSZ,
    UVMC_DRV_MEMCPY,
    UVMC_DRV_MEMCPY_PTDS,
    UVMC_DRV_MEMCPY_ASYNC,
    UVMC_DRV_MEMCPY_ASYNC_PTSZ,
};

#define P(x) ((CUdeviceptr)(uintptr_t)(x))

static bool uvmc_drv_ready(const struct uvmc_copy *c)
{
    (void)c;
    return uvmc_real.cuMemcpyDtoHAsync_v2 && uvmc_real.cuMemcpyDtoHAsync_v2_ptsz && uvmc_real.cuMemcpyAsync &&
           uvmc_real.cuMemcpyAsync_ptsz && uvmc_drv.cuEventSynchronize && uvmc_drv.cuStreamSynchronize;
}

/* Blocks use the current asynchronous ABI of the caller's family (a legacy 32-bit entry's blocks
 * fit it as well); stream 0 keeps its meaning through the _ptsz form for per-thread entries. */
static int uvmc_drv_block(const struct uvmc_copy *c, void *dst, const void *src, size_t len)
{
    if (c->entry <= UVMC_DRV_DTOH_ASYNC_V2_PTSZ)
        return (c->per_thread ? uvmc_real.cuMemcpyDtoHAsync_v2_ptsz : uvmc_real.cuMemcpyDtoHAsync_v2)(dst, P(src), len,
                                                                                                   c->stream);
    return (c->per_thread ? uvmc_real.cuMemcpyAsync_ptsz : uvmc_real.cuMemcpyAsync)(P(dst), P(src), len, c->stream);
}

static int uvmc_drv_event_sync(const struct uvmc_copy *c, CUevent ev)
{
    (void)c;
    return uvmc_drv.cuEventSynchronize(ev);
}

static int uvmc_drv_stream_sync(const struct uvmc_copy *c, CUstream s)
{
    (void)c;
    return uvmc_drv.cuStreamSynchronize(s);
}

static int uvmc_drv_passthrough(const struct uvmc_copy *c)
{
    switch ((enum uvmc_driver_entry)c->entry) {
    case UVMC_DRV_DTOH:
        return uvmc_real.cuMemcpyDtoH(c->dst, (CUdeviceptr_v1)P(c->src), (unsigned int)c->count);
    case UVMC_DRV_DTOH_V2:
        return uvmc_real.cuMemcpyDtoH_v2(c->dst, P(c->src), c->count);
    case UVMC_DRV_DTOH_V2_PTDS:
        return uvmc_real.cuMemcpyDtoH_v2_ptds(c->dst, P(c->src), c->count);
    case UVMC_DRV_DTOH_ASYNC:
        return uvmc_real.cuMemcpyDtoHAsync(c->dst, (CUdeviceptr_v1)P(c->src), (unsigned int)c->count, c->stream);
    case UVMC_DRV_DTOH_ASYNC_V2:
        return uvmc_real.cuMemcpyDtoHAsync_v2(c->dst, P(c->src), c->count, c->stream);
    case UVMC_DRV_DTOH_ASYNC_V2_PTSZ:
        return uvmc_real.cuMemcpyDtoHAsync_v2_ptsz(c->dst, P(c->src), c->count, c->stream);
    case UVMC_DRV_MEMCPY:
        return uvmc_real.cuMemcpy(P(c->dst), P(c->src), c->count);
    case UVMC_DRV_MEMCPY_PTDS:
        return uvmc_real.cuMemcpy_ptds(P(c->dst), P(c->src), c->count);
    case UVMC_DRV_MEMCPY_ASYNC:
        return uvmc_real.cuMemcpyAsync(P(c->dst), P(c->src), c->count, c->stream);
    case UVMC_DRV_MEMCPY_ASYNC_PTSZ:
        return uvmc_real.cuMemcpyAsync_ptsz(P(c->dst), P(c->src), c->count, c->stream);
    }
    return CUDA_ERROR_INVALID_VALUE; /* unreachable: every entry is handled above */
}

static const struct uvmc_api uvmc_driver_api = {
    .ready = uvmc_drv_ready,
    .block = uvmc_drv_block,
    .event_sync = uvmc_drv_event_sync,
    .stream_sync = uvmc_drv_stream_sync,
    .passthrough = uvmc_drv_passthrough,
};

/* Everything but the hot path, out of line: the real function found (else the call fails as a
 * missing library would), then the rest (engine.c). */
static __attribute__((noinline)) int uvmc_drv_copy(struct uvmc_copy *c, size_t field, const char *name)
{
    uvmc_init();
    void *fn;
    memcpy(&fn, (const char *)&uvmc_real + field, sizeof fn);
    if (!fn && !uvmc_resolve_real())
        memcpy(&fn, (const char *)&uvmc_real + field, sizeof fn);
    if (!fn) {
        uvmc_report_missing(name);
        return CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND;
    }
    return uvmc_copy_rest(c);
}

/* Same shape as the runtime's: the hot path (uvmc.h), then classify → engine. The re-entrancy
 * guard also keeps a copy the runtime path is already splitting from being split again when a
 * runtime underneath calls these names. */
#define UVMC_DRV_BODY(name, entry_, kind_, sync_, ptd_, dst_, src_, stream_, ...)                       \
    if (UVMC_HOT_COPY(uvmc_real.name, (const void *)(uintptr_t)(dst_), (const void *)(uintptr_t)(src_)))  \
        return uvmc_real.name(__VA_ARGS__);                                                             \
    struct uvmc_copy c = {.api = &uvmc_driver_api, .entry = entry_, .sync = sync_, .per_thread = ptd_,  \
                          .dst = (void *)(uintptr_t)(dst_), .src = (const void *)(uintptr_t)(src_),      \
                          .count = count, .kind = kind_, .stream = stream_};                            \
    return (CUresult)uvmc_drv_copy(&c, offsetof(struct uvmc_real, name), #name);

#define DTOH cudaMemcpyDeviceToHost
#define UNIFIED cudaMemcpyDefault

CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount)
{
    size_t count = ByteCount;
    UVMC_DRV_BODY(cuMemcpyDtoH, UVMC_DRV_DTOH, DTOH, true, false, dstHost, srcDevice, 0, dstHost, srcDevice, ByteCount)
}

CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t count)
{
    UVMC_DRV_BODY(cuMemcpyDtoH_v2, UVMC_DRV_DTOH_V2, DTOH, true, false, dstHost, srcDevice, 0, dstHost, srcDevice, count)
}

CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t count)
{
    UVMC_DRV_BODY(cuMemcpyDtoH_v2_ptds, UVMC_DRV_DTOH_V2_PTDS, DTOH, true, true, dstHost, srcDevice, 0, dstHost,
                  srcDevice, count)
}

CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount, CUstream hStream)
{
    size_t count = ByteCount;
    UVMC_DRV_BODY(cuMemcpyDtoHAsync, UVMC_DRV_DTOH_ASYNC, DTOH, false, false, dstHost, srcDevice, hStream, dstHost,
                  srcDevice, ByteCount, hStream)
}

CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t count, CUstream hStream)
{
    UVMC_DRV_BODY(cuMemcpyDtoHAsync_v2, UVMC_DRV_DTOH_ASYNC_V2, DTOH, false, false, dstHost, srcDevice, hStream,
                  dstHost, srcDevice, count, hStream)
}

CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice, size_t count, CUstream hStream)
{
    UVMC_DRV_BODY(cuMemcpyDtoHAsync_v2_ptsz, UVMC_DRV_DTOH_ASYNC_V2_PTSZ, DTOH, false, true, dstHost, srcDevice,
                  hStream, dstHost, srcDevice, count, hStream)
}

CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t count)
{
    UVMC_DRV_BODY(cuMemcpy, UVMC_DRV_MEMCPY, UNIFIED, true, false, dst, src, 0, dst, src, count)
}

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t count)
{
    UVMC_DRV_BODY(cuMemcpy_ptds, UVMC_DRV_MEMCPY_PTDS, UNIFIED, true, true, dst, src, 0, dst, src, count)
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t count, CUstream hStream)
{
    UVMC_DRV_BODY(cuMemcpyAsync, UVMC_DRV_MEMCPY_ASYNC, UNIFIED, false, false, dst, src, hStream, dst, src, count,
                  hStream)
}

CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t count, CUstream hStream)
{
    UVMC_DRV_BODY(cuMemcpyAsync_ptsz, UVMC_DRV_MEMCPY_ASYNC_PTSZ, UNIFIED, false, true, dst, src, hStream, dst, src,
                  count, hStream)
}
