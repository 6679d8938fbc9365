/* engine.c: runs one classified copy as consecutive blocks of chunk_size bytes on the caller's
 * stream (host memcpy or copy engine), with at most `depth` blocks prefetched ahead in stream order. */
#include <stdint.h>
#include <stdlib.h>

#include "uvmc.h"

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

/* Queues block [off, off+len): a host function for the host engine (a failure to enqueue it is
 * reported like a failed copy), else a real copy on the caller's stream. */
static int uvmc_issue_block(const struct uvmc_copy *c, size_t off, size_t len)
{
    void *dst = (char *)c->dst + off;
    const void *src = (const char *)c->src + off;
    if (!c->host_engine)
        return c->api->block(c, dst, src, len);
    struct uvmc_host_job *job = uvmc_host_job_new(dst, src, len);
    if (!job)
        return c->api->out_of_memory;
    int rc = c->api->host_fn(c, job);
    if (rc != 0)
        free(job); /* never queued, so never run */
    return rc;
}

/* The synchronous entry points return after the last block landed: an event after it, or the
 * whole stream when no event can be had. An earlier block's failure is reported here. */
static int uvmc_wait_copied(const struct uvmc_copy *c)
{
    CUevent ev;
    if (uvmc_drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) == CUDA_SUCCESS) {
        int rc = 0;
        bool recorded = uvmc_drv.cuEventRecord(ev, c->hstream) == CUDA_SUCCESS;
        if (recorded)
            rc = c->api->event_sync(ev);
        uvmc_drv.cuEventDestroy(ev);
        if (recorded)
            return rc;
    }
    return c->api->stream_sync(c->hstream);
}

int uvmc_engine_copy(const struct uvmc_copy *c)
{
    const size_t chunk = uvmc_cfg.chunk_size;
    const size_t nblocks = c->count / chunk + (c->count % chunk != 0);
    const size_t window = uvmc_cfg.depth < nblocks ? uvmc_cfg.depth : nblocks;

    if (c->host_engine)
        uvmc_host_pool_start();
    unsigned long long t0 = uvmc_now_ns();
    /* The prefetch of block i + window - 1 is queued just before block i, so it runs once block
     * i - 1 has landed: at most `depth` blocks are prefetched ahead of the copy, bounded by the
     * stream itself. The host never waits for the device while queueing, so a stream that the
     * caller gates on something it does after an asynchronous call into pinned memory returns
     * cannot deadlock. */
    for (size_t j = 0; j < window; j++)
        uvmc_prefetch_block(c, j, nblocks);

    int rc = 0;
    size_t issued = 0;
    for (size_t i = 0; i < nblocks; i++) {
        if (i > 0)
            uvmc_prefetch_block(c, i + window - 1, nblocks);
        size_t off = i * chunk;
        rc = uvmc_issue_block(c, off, c->count - off < chunk ? c->count - off : chunk);
        if (rc != 0)
            break;
        issued++;
    }
    /* A device-to-host copy into pageable memory is complete when the call returns, even from the
     * asynchronous entry points (BRIEF §7); the copy engine's blocks are each synchronous then,
     * the host engine's host functions are not, so wait for the last one. */
    bool waited = c->sync || (c->host_engine && !c->dst_pinned);
    if (rc == 0 && waited)
        rc = uvmc_wait_copied(c);

    unsigned long long ns = uvmc_now_ns() - t0;
    atomic_fetch_add_explicit(&uvmc_stats.split, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&uvmc_stats.split_bytes, c->count, memory_order_relaxed);
    atomic_fetch_add_explicit(&uvmc_stats.blocks, issued, memory_order_relaxed);
    if (c->sync || !c->dst_pinned) { /* returned after the last byte landed: a real duration */
        atomic_fetch_add_explicit(&uvmc_stats.sync_bytes, c->count, memory_order_relaxed);
        atomic_fetch_add_explicit(&uvmc_stats.sync_ns, ns, memory_order_relaxed);
    }
    if (c->host_engine)
        atomic_fetch_add_explicit(&uvmc_stats.host_engine, 1, memory_order_relaxed);
    if (UVMC_LOG_ON(UVMC_LOG_DEBUG))
        uvmc_log(UVMC_LOG_DEBUG,
                 "split %s copy of %zu bytes into %zu/%zu blocks of %zu on the %s engine (%s "
                 "destination, stream %p): %.3f ms, %s",
                 c->sync ? "synchronous" : "asynchronous", c->count, issued, nblocks, chunk,
                 c->host_engine ? "host" : "copy", c->dst_pinned ? "pinned" : "pageable", (void *)c->hstream,
                 (double)ns / 1e6, rc == 0 ? "ok" : "failed");
    return rc;
}

/* The one path of a copy at or above the threshold. The guard makes CUDA calls made beneath it
 * (ours, or the runtime's own driver calls) pass straight through: a copy is split once. */
int uvmc_large_copy(struct uvmc_copy *c)
{
    int rc;
    uvmc_tls_busy++;
    if (uvmc_classify(c)) {
        rc = uvmc_engine_copy(c);
    } else {
        atomic_fetch_add_explicit(&uvmc_stats.passed_large, 1, memory_order_relaxed);
        rc = c->api->passthrough(c);
    }
    uvmc_tls_busy--;
    return rc;
}
