/* runtime.c: the exported CUDA runtime copy entry points, compiled once per CUDA major (uvmc.h,
 * UVMC_RT_MAJOR). Each checks the size first (one comparison, no CUDA call below the threshold),
 * then hands a large copy to classify → engine, with its own runtime's functions. */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "uvmc.h"

enum uvmc_runtime_entry { UVMC_RT_SYNC, UVMC_RT_SYNC_PTDS, UVMC_RT_ASYNC, UVMC_RT_ASYNC_PTSZ };

static bool uvmc_rt_ready(const struct uvmc_copy *c)
{
    return c->rt->cudaMemcpyAsync && c->rt->cudaMemcpyAsync_ptsz && c->rt->cudaEventSynchronize &&
           c->rt->cudaStreamSynchronize;
}

/* Blocks go through the asynchronous form of the caller's entry point; stream 0 keeps the
 * meaning it had there (legacy, or per-thread for _ptds/_ptsz). Failures set the last error. */
static int uvmc_rt_block(const struct uvmc_copy *c, void *dst, const void *src, size_t len)
{
    __typeof__(c->rt->cudaMemcpyAsync) copy = c->per_thread ? c->rt->cudaMemcpyAsync_ptsz : c->rt->cudaMemcpyAsync;
    return copy(dst, src, len, c->kind, (cudaStream_t)c->stream);
}

static int uvmc_rt_event_sync(const struct uvmc_copy *c, CUevent ev)
{
    return c->rt->cudaEventSynchronize((cudaEvent_t)ev);
}

static int uvmc_rt_stream_sync(const struct uvmc_copy *c, CUstream s)
{
    return c->rt->cudaStreamSynchronize((cudaStream_t)s);
}

static int uvmc_rt_passthrough(const struct uvmc_copy *c)
{
    const struct uvmc_rt *rt = c->rt;
    switch ((enum uvmc_runtime_entry)c->entry) {
    case UVMC_RT_SYNC:
        return rt->cudaMemcpy(c->dst, c->src, c->count, c->kind);
    case UVMC_RT_SYNC_PTDS:
        return rt->cudaMemcpy_ptds(c->dst, c->src, c->count, c->kind);
    case UVMC_RT_ASYNC:
        return rt->cudaMemcpyAsync(c->dst, c->src, c->count, c->kind, (cudaStream_t)c->stream);
    case UVMC_RT_ASYNC_PTSZ:
        return rt->cudaMemcpyAsync_ptsz(c->dst, c->src, c->count, c->kind, (cudaStream_t)c->stream);
    }
    return cudaErrorInvalidValue; /* unreachable: every entry is handled above */
}

static const struct uvmc_api uvmc_runtime_api = {
    .ready = uvmc_rt_ready,
    .block = uvmc_rt_block,
    .event_sync = uvmc_rt_event_sync,
    .stream_sync = uvmc_rt_stream_sync,
    .passthrough = uvmc_rt_passthrough,
};

/* Everything but the hot path, out of line: the runtime the wrapper calls (its own major's, or the
 * one its default set falls back to), then the rest (engine.c). */
static __attribute__((noinline)) int uvmc_rt_copy(struct uvmc_copy *c, struct uvmc_rt *own, size_t field,
                                                   const char *name)
{
    uvmc_init();
    const struct uvmc_rt *rt = own;
    void *fn;
    memcpy(&fn, (const char *)own + field, sizeof fn);
    if (!fn && !(rt = uvmc_rt_fallback(own, field))) {
        uvmc_report_missing(name);
        return cudaErrorSharedObjectSymbolNotFound;
    }
    c->rt = rt;
    return uvmc_copy_rest(c);
}

/* The four copy wrappers: the hot path with this major's runtime (uvmc.h), else the rest. */
#define UVMC_COPY_BODY(name, entry_, sync_, ptd_, stream_, ...)                                         \
    if (UVMC_HOT_COPY(UVMC_RT_TABLE.name, dst, src))                                                   \
        return UVMC_RT_TABLE.name(__VA_ARGS__);                                                         \
    struct uvmc_copy c = {.api = &uvmc_runtime_api, .entry = entry_, .sync = sync_, .per_thread = ptd_, \
                          .dst = dst, .src = src, .count = count, .kind = kind, .stream = (CUstream)stream_}; \
    return (cudaError_t)uvmc_rt_copy(&c, &UVMC_RT_TABLE, offsetof(struct uvmc_rt, name), #name);

UVMC_RT_SYMVER(cudaMemcpy)
cudaError_t UVMC_RT_FN(cudaMemcpy)(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    UVMC_COPY_BODY(cudaMemcpy, UVMC_RT_SYNC, true, false, 0, dst, src, count, kind)
}

UVMC_RT_SYMVER(cudaMemcpy_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpy_ptds)(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    UVMC_COPY_BODY(cudaMemcpy_ptds, UVMC_RT_SYNC_PTDS, true, true, 0, dst, src, count, kind)
}

UVMC_RT_SYMVER(cudaMemcpyAsync)
cudaError_t UVMC_RT_FN(cudaMemcpyAsync)(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                        cudaStream_t stream)
{
    UVMC_COPY_BODY(cudaMemcpyAsync, UVMC_RT_ASYNC, false, false, stream, dst, src, count, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpyAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpyAsync_ptsz)(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                             cudaStream_t stream)
{
    UVMC_COPY_BODY(cudaMemcpyAsync_ptsz, UVMC_RT_ASYNC_PTSZ, false, true, stream, dst, src, count, kind, stream)
}
