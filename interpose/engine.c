/* engine.c: runs one classified copy as consecutive blocks of chunk_size bytes on the caller's
 * stream (host memcpy or copy engine), with at most `depth` blocks prefetched ahead in stream order. */
#include <stdint.h>
#include <stdlib.h>

#include "uvmc.h"

static bool uvmc_per_thread(enum uvmc_entry e)
{
    return e == UVMC_EP_SYNC_PTDS || e == UVMC_EP_ASYNC_PTSZ;
}

cudaError_t uvmc_passthrough(const struct uvmc_copy *c)
{
    switch (c->entry) {
    case UVMC_EP_SYNC:
        return uvmc_real.cudaMemcpy(c->dst, c->src, c->count, c->kind);
    case UVMC_EP_SYNC_PTDS:
        return uvmc_real.cudaMemcpy_ptds(c->dst, c->src, c->count, c->kind);
    case UVMC_EP_ASYNC:
        return uvmc_real.cudaMemcpyAsync(c->dst, c->src, c->count, c->kind, c->stream);
    case UVMC_EP_ASYNC_PTSZ:
        return uvmc_real.cudaMemcpyAsync_ptsz(c->dst, c->src, c->count, c->kind, c->stream);
    }
    return cudaErrorInvalidValue; /* unreachable: every entry is handled above */
}

/* A stream-ordered prefetch of block j: to the host for the host engine (its memcpy then faults
 * on nothing), else as configured. A hint: its failure is counted, never returned. */
static void uvmc_prefetch_block(const struct uvmc_copy *c, size_t j, size_t nblocks)
{
    enum uvmc_prefetch where = c->host_engine ? UVMC_PREFETCH_HOST : uvmc_cfg.prefetch;
    if (where == UVMC_PREFETCH_NONE || j >= nblocks || !uvmc_drv.cuMemPrefetchAsync)
        return;
    size_t off = j * uvmc_cfg.chunk_size;
    size_t len = c->count - off < uvmc_cfg.chunk_size ? c->count - off : uvmc_cfg.chunk_size;
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
    if (where == UVMC_PREFETCH_DEVICE) {
        loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
        loc.id = c->device;
    }
    CUresult r = uvmc_drv.cuMemPrefetchAsync((CUdeviceptr)(uintptr_t)c->src + off, len, loc, 0, c->hstream);
    if (r != CUDA_SUCCESS) {
        atomic_fetch_add_explicit(&uvmc_stats.hint_failures, 1, memory_order_relaxed);
        uvmc_log(UVMC_LOG_DEBUG, "prefetch of %zu bytes at %p failed (CUresult %d); copy goes on", len,
                 (const void *)((const char *)c->src + off), (int)r);
    }
}

/* Queues block [off, off+len): a host function for the host engine (its failure sets the
 * runtime's last error like a failed copy), else a real copy on the caller's stream. */
static cudaError_t uvmc_issue_block(const struct uvmc_copy *c, __typeof__(uvmc_real.cudaMemcpyAsync) copy,
                                    size_t off, size_t len)
{
    void *dst = (char *)c->dst + off;
    const void *src = (const char *)c->src + off;
    if (!c->host_engine)
        return copy(dst, src, len, c->kind, c->stream);
    struct uvmc_host_job *job = uvmc_host_job_new(dst, src, len);
    if (!job)
        return cudaErrorMemoryAllocation;
    cudaError_t rc = uvmc_real.cudaLaunchHostFunc((cudaStream_t)c->hstream, uvmc_host_copy_fn, job);
    if (rc != cudaSuccess)
        free(job); /* never queued, so never run */
    return rc;
}

/* The synchronous entry points return after the last block landed: an event after it, or the
 * whole stream when no event can be had. The runtime reports an earlier block's failure here. */
static cudaError_t uvmc_wait_copied(const struct uvmc_copy *c)
{
    CUevent ev;
    if (uvmc_drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
        cudaError_t rc = cudaErrorUnknown;
        bool recorded = uvmc_drv.cuEventRecord(ev, c->hstream) == CUDA_SUCCESS;
        if (recorded)
            rc = uvmc_real.cudaEventSynchronize((cudaEvent_t)ev);
        uvmc_drv.cuEventDestroy(ev);
        if (recorded)
            return rc;
    }
    return uvmc_real.cudaStreamSynchronize((cudaStream_t)c->hstream);
}

cudaError_t uvmc_engine_copy(const struct uvmc_copy *c)
{
    const size_t chunk = uvmc_cfg.chunk_size;
    const size_t nblocks = c->count / chunk + (c->count % chunk != 0);
    const size_t window = uvmc_cfg.depth < nblocks ? uvmc_cfg.depth : nblocks;
    const bool sync = c->entry == UVMC_EP_SYNC || c->entry == UVMC_EP_SYNC_PTDS;
    /* Blocks go through the asynchronous form of the caller's entry point; stream 0 keeps the
     * meaning it had there (legacy, or per-thread for _ptds/_ptsz). */
    __typeof__(uvmc_real.cudaMemcpyAsync) copy =
        uvmc_per_thread(c->entry) ? uvmc_real.cudaMemcpyAsync_ptsz : uvmc_real.cudaMemcpyAsync;

    if (c->host_engine)
        uvmc_host_pool_start();
    unsigned long long t0 = uvmc_now_ns();
    /* The prefetch of block i + window - 1 is queued just before block i, so it runs once block
     * i - 1 has landed: at most `depth` blocks are prefetched ahead of the copy, bounded by the
     * stream itself. The host never waits for the device here, so a stream that the caller gates
     * on something it does after this call returns cannot deadlock. */
    for (size_t j = 0; j < window; j++)
        uvmc_prefetch_block(c, j, nblocks);

    cudaError_t rc = cudaSuccess;
    size_t issued = 0;
    for (size_t i = 0; i < nblocks; i++) {
        if (i > 0)
            uvmc_prefetch_block(c, i + window - 1, nblocks);
        size_t off = i * chunk;
        rc = uvmc_issue_block(c, copy, off, c->count - off < chunk ? c->count - off : chunk);
        if (rc != cudaSuccess)
            break;
        issued++;
    }
    if (rc == cudaSuccess && sync)
        rc = uvmc_wait_copied(c);

    unsigned long long ns = uvmc_now_ns() - t0;
    atomic_fetch_add_explicit(&uvmc_stats.split, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&uvmc_stats.split_bytes, c->count, memory_order_relaxed);
    atomic_fetch_add_explicit(&uvmc_stats.blocks, issued, memory_order_relaxed);
    atomic_fetch_add_explicit(&uvmc_stats.split_ns, ns, memory_order_relaxed);
    if (c->host_engine)
        atomic_fetch_add_explicit(&uvmc_stats.host_engine, 1, memory_order_relaxed);
    if (UVMC_LOG_ON(UVMC_LOG_DEBUG))
        uvmc_log(UVMC_LOG_DEBUG,
                 "split %s copy of %zu bytes into %zu/%zu blocks of %zu on the %s engine (%s "
                 "destination, stream %p): %.3f ms, %s",
                 sync ? "synchronous" : "asynchronous", c->count, issued, nblocks, chunk,
                 c->host_engine ? "host" : "copy",
                 c->dst_pinned ? "pinned" : "pageable", (void *)c->hstream, (double)ns / 1e6,
                 rc == cudaSuccess ? "ok" : "failed");
    return rc;
}
