/* engine.c: runs one classified copy as blocks on the caller's stream, never with more than
 * depth + 1 of its own operations queued there (real queues are bounded: tests/sim/README.md, UVMSIM_STREAM_CAPACITY), and never
 * through a host function. */
#include <stdint.h>
#include <stdlib.h>

#include "uvmc.h"
#include "uvmc_units.h"

/* An asynchronous copy into pinned memory returns without waiting, so it cannot bound its queue by
 * waiting: it is cut into at most 4 x depth blocks, and never more than this many (with a prefetch
 * each, 48 operations), below the ~57 outstanding operations after which a real enqueue was
 * reported to block (tests/sim/README.md). Larger copies get larger blocks. */
#define UVMC_QUEUE_BLOCKS_MAX 24u

/* Where block j is prefetched, if anywhere. Only a source that prefers the host is ever prefetched
 * there (a GPU-resident one would migrate and fault back at the next kernel: cuda.h, cuMemPrefetchAsync). */
static enum uvmc_prefetch uvmc_prefetch_of(const struct uvmc_copy *c)
{
    if (c->drained)
        return UVMC_PREFETCH_NONE;
    if (c->mode == UVMC_MODE_HOST || uvmc_cfg.prefetch == UVMC_PREFETCH_HOST)
        return c->prefers_host ? UVMC_PREFETCH_HOST : UVMC_PREFETCH_NONE;
    return uvmc_cfg.prefetch;
}

/* A stream-ordered prefetch: a hint, its failure counted, never returned. */
static void uvmc_prefetch(const struct uvmc_copy *c, enum uvmc_prefetch where, size_t off, size_t len)
{
    if (where == UVMC_PREFETCH_NONE || !uvmc_drv.cuMemPrefetchAsync)
        return;
    CUmemLocation loc = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
    if (where == UVMC_PREFETCH_DEVICE) {
        loc.type = CU_MEM_LOCATION_TYPE_DEVICE;
        loc.id = c->device;
    }
    CUresult r = uvmc_drv.cuMemPrefetchAsync((CUdeviceptr)(uintptr_t)c->src + off, len, loc, 0, c->hstream);
    if (r != CUDA_SUCCESS) {
        atomic_fetch_add_explicit(&uvmc_stats.hint_failures, 1, memory_order_relaxed);
        uvmc_log(UVMC_LOG_DEBUG, "prefetch of %s at %p failed (CUresult %d); copy goes on", uvmc_bytes_text(len).s,
                 (const void *)((const char *)c->src + off), (int)r);
    }
}

/* The blocks of one copy and the plan that bounds its queue. */
struct uvmc_plan {
    size_t chunk;       /* bytes per block */
    size_t nblocks;
    enum uvmc_prefetch where;
    size_t group;       /* blocks per group: one event after each group */
    unsigned inflight;  /* groups queued at once (2 overlaps the host's part with the device's) */
    char *ring;         /* staging ring (staged mode) */
    bool wait_failed;   /* a wait returned an error: what was queued may still be running */
};

static size_t uvmc_block_len(const struct uvmc_copy *c, const struct uvmc_plan *p, size_t i)
{
    size_t off = i * p->chunk;
    return c->count - off < p->chunk ? c->count - off : p->chunk;
}

/* Groups of g blocks, each followed by one event, with k groups queued: k * (g * ops + 1) <= depth + 1
 * operations. Two groups when the budget allows one block each, else one. */
static void uvmc_plan_groups(struct uvmc_plan *p, unsigned ops_per_block)
{
    size_t budget = (size_t)uvmc_cfg.depth + 1;
    if (ops_per_block == 0) { /* nothing per block: one wait for the work ahead, then the host copies */
        p->group = p->nblocks;
        p->inflight = 1;
    } else if (budget >= 2 * ((size_t)ops_per_block + 1)) {
        p->group = (budget - 2) / (2 * ops_per_block);
        p->inflight = 2;
    } else {
        p->group = (budget - 1) / ops_per_block ? (budget - 1) / ops_per_block : 1;
        p->inflight = 1;
    }
}

/* Queues block i: its prefetch, then (copy engine) its copy into the destination or a ring slot. */
static int uvmc_issue_block(const struct uvmc_copy *c, const struct uvmc_plan *p, size_t i)
{
    size_t off = i * p->chunk, len = uvmc_block_len(c, p, i);
    uvmc_prefetch(c, p->where, off, len);
    if (c->mode == UVMC_MODE_HOST)
        return 0;
    void *dst = c->mode == UVMC_MODE_STAGED ? p->ring + (i % uvmc_cfg.depth) * p->chunk : (char *)c->dst + off;
    return c->api->block(c, dst, (const char *)c->src + off, len);
}

/* The host's part of block i once it landed: out of the ring, or out of the managed source. */
static void uvmc_host_part(const struct uvmc_copy *c, const struct uvmc_plan *p, size_t i)
{
    size_t off = i * p->chunk, len = uvmc_block_len(c, p, i);
    if (c->mode == UVMC_MODE_STAGED)
        uvmc_host_memcpy((char *)c->dst + off, p->ring + (i % uvmc_cfg.depth) * p->chunk, len);
    else if (c->mode == UVMC_MODE_HOST)
        uvmc_host_memcpy((char *)c->dst + off, (const char *)c->src + off, len);
}

/* Waits for everything queued before the group's event: the event (created with blocking sync, so
 * the wait sleeps), or the whole stream when there is none. */
static int uvmc_wait(const struct uvmc_copy *c, CUevent ev)
{
    return ev ? c->api->event_sync(c, ev) : c->api->stream_sync(c, c->hstream);
}

/* An asynchronous copy into pinned memory: queued, returned at once (a stream the caller gates on
 * something it does after the call cannot deadlock), in at most UVMC_QUEUE_BLOCKS_MAX blocks. */
static int uvmc_run_queued(const struct uvmc_copy *c, struct uvmc_plan *p, size_t *issued)
{
    size_t most = 4 * (size_t)uvmc_cfg.depth < UVMC_QUEUE_BLOCKS_MAX ? 4 * (size_t)uvmc_cfg.depth : UVMC_QUEUE_BLOCKS_MAX;
    size_t per = (p->nblocks + most - 1) / most; /* chunks per block */
    p->chunk *= per;
    p->nblocks = c->count / p->chunk + (c->count % p->chunk != 0);
    for (size_t i = 0; i < p->nblocks; i++) {
        int rc = uvmc_issue_block(c, p, i);
        if (rc != 0)
            return rc;
        ++*issued;
    }
    return 0;
}

/* A group of blocks queued on the stream, with the event recorded after it. */
struct uvmc_group {
    size_t first, end; /* blocks [first, end) */
    CUevent ev;
    bool recorded;
};

/* Waits for the group, then does the host's part of it. After an earlier error it only waits, so
 * nothing the device still writes (the ring) is handed back early. */
static int uvmc_finish_group(const struct uvmc_copy *c, struct uvmc_plan *p, const struct uvmc_group *g, int rc)
{
    int w = uvmc_wait(c, g->recorded ? g->ev : NULL);
    p->wait_failed = p->wait_failed || w != 0;
    if (rc != 0 || w != 0)
        return rc != 0 ? rc : w;
    for (size_t i = g->first; i < g->end; i++)
        uvmc_host_part(c, p, i);
    return 0;
}

/* Every other mode returns after the last byte landed: groups of blocks, an event after each, at
 * most p->inflight groups queued; the host does its part of the oldest group once its event
 * completed, while the device works on the next one. After an error nothing more is queued. */
static int uvmc_run_grouped(const struct uvmc_copy *c, struct uvmc_plan *p, size_t *issued)
{
    struct uvmc_group g[2] = {{0}};
    for (unsigned k = 0; k < p->inflight; k++)
        if (uvmc_drv.cuEventCreate(&g[k].ev, CU_EVENT_DISABLE_TIMING | CU_EVENT_BLOCKING_SYNC) != CUDA_SUCCESS)
            g[k].ev = NULL;
    unsigned head = 0, queued = 0; /* FIFO of queued groups in g[] */
    int rc = 0;
    for (size_t next = 0; rc == 0 && next < p->nblocks;) {
        if (queued == p->inflight) {
            rc = uvmc_finish_group(c, p, &g[head], rc);
            head = (head + 1) % p->inflight;
            queued--;
            if (rc != 0)
                break;
        }
        struct uvmc_group *q = &g[(head + queued) % p->inflight];
        size_t stop = next + p->group < p->nblocks ? next + p->group : p->nblocks;
        for (q->first = next; rc == 0 && next < stop; next++) {
            rc = uvmc_issue_block(c, p, next);
            *issued += rc == 0;
        }
        q->end = rc == 0 ? next : next - 1;
        q->recorded = q->ev && uvmc_drv.cuEventRecord(q->ev, c->hstream) == CUDA_SUCCESS;
        queued++;
    }
    for (; queued; queued--, head = (head + 1) % p->inflight)
        rc = uvmc_finish_group(c, p, &g[head], rc);
    for (unsigned k = 0; k < p->inflight; k++)
        if (g[k].ev)
            uvmc_drv.cuEventDestroy(g[k].ev);
    return rc;
}

static const char *const uvmc_mode_label[] = {"queued", "direct", "staged", "host"};

int uvmc_engine_copy(const struct uvmc_copy *c_in)
{
    uvmc_pyhook_check();
    struct uvmc_copy copy = *c_in, *c = &copy;
    struct uvmc_plan p = {.chunk = uvmc_cfg.chunk_size};
    p.nblocks = c->count / p.chunk + (c->count % p.chunk != 0);
    if (c->mode == UVMC_MODE_STAGED) {
        if ((p.ring = uvmc_staging_acquire()) != NULL) { /* blocks of one ring slot */
            p.chunk = uvmc_staging_slot();
            p.nblocks = c->count / p.chunk + (c->count % p.chunk != 0);
        } else {
            c->mode = UVMC_MODE_DIRECT; /* no ring: the driver stages, each group still waited for */
        }
    }
    p.where = uvmc_prefetch_of(c);
    unsigned ops = (p.where != UVMC_PREFETCH_NONE) + (c->mode != UVMC_MODE_HOST);
    uvmc_plan_groups(&p, ops);

    unsigned long long t0 = uvmc_now_ns();
    size_t issued = 0;
    int rc = 0;
    if (c->drained) { /* nothing queued on the stream: what it would wait for has completed */
        for (; issued < p.nblocks; issued++)
            uvmc_host_part(c, &p, issued);
    } else {
        rc = c->mode == UVMC_MODE_QUEUE ? uvmc_run_queued(c, &p, &issued) : uvmc_run_grouped(c, &p, &issued);
    }
    /* A failed wait says nothing of the blocks behind it: they are drained before the call returns
     * and the ring is handed on. If even that fails, the ring is given up, never reused. */
    if (p.wait_failed && uvmc_drv.cuStreamSynchronize(c->hstream) != CUDA_SUCCESS &&
        (!uvmc_drv.cuCtxSynchronize || uvmc_drv.cuCtxSynchronize() != CUDA_SUCCESS) && p.ring) {
        uvmc_staging_abandon();
        p.ring = NULL;
    }
    if (p.ring)
        uvmc_staging_release();

    unsigned long long ns = uvmc_now_ns() - t0;
    atomic_fetch_add_explicit(&uvmc_stats.split, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&uvmc_stats.split_bytes, c->count, memory_order_relaxed);
    atomic_fetch_add_explicit(&uvmc_stats.blocks, issued, memory_order_relaxed);
    if (c->mode != UVMC_MODE_QUEUE) { /* returned after the last byte landed: a real duration */
        atomic_fetch_add_explicit(&uvmc_stats.sync_bytes, c->count, memory_order_relaxed);
        atomic_fetch_add_explicit(&uvmc_stats.sync_ns, ns, memory_order_relaxed);
    }
    if (c->mode == UVMC_MODE_HOST)
        atomic_fetch_add_explicit(&uvmc_stats.host_engine, 1, memory_order_relaxed);
    if (c->mode == UVMC_MODE_STAGED)
        atomic_fetch_add_explicit(&uvmc_stats.staged, 1, memory_order_relaxed);
    if (UVMC_LOG_ON(UVMC_LOG_DEBUG))
        uvmc_log(UVMC_LOG_DEBUG,
                 "split copy of %s (%s call) into %zu of %zu %s of %s, %s (%s destination, stream %p, groups "
                 "of %zu): %s in %.3f ms, %s",
                 uvmc_bytes_text(c->count).s, c->sync ? "synchronous" : "asynchronous", issued, p.nblocks,
                 uvmc_plural(p.nblocks, "block", "blocks"), uvmc_bytes_text(p.chunk).s, uvmc_mode_label[c->mode],
                 c->dst_pinned ? "pinned" : "pageable", (void *)c->hstream, p.group,
                 c->mode == UVMC_MODE_QUEUE ? "returned once queued" : "returned complete", (double)ns / 1e6,
                 rc == 0 ? "ok" : "failed");
    return rc;
}

/* The one path of a copy at or above the threshold (and of a small one touching a lazy buffer). The
 * guard makes CUDA calls made beneath it (ours, or the runtime's own driver calls) pass straight
 * through: a copy is split once. */
int uvmc_large_copy(struct uvmc_copy *c)
{
    int rc;
    uvmc_tls_busy++;
    struct uvmc_relaxed mode = {.exchanged = false};
    if (!c->small && uvmc_classify(c, &mode)) {
        if (!c->dst_pinned) /* a split copy's destination stays pageable until its next other use */
            uvmc_lazy_claim(c->dst, c->count);
        rc = uvmc_engine_copy(c);
        uvmc_unrelax(mode);
    } else {
        uvmc_unrelax(mode);
        uvmc_tls_busy--; /* any other use pins a lazy buffer before the call proceeds */
        uvmc_lazy_use(c->dst, c->count, c->rt);
        uvmc_lazy_use(c->src, c->count, c->rt);
        uvmc_tls_busy++;
        atomic_fetch_add_explicit(c->small ? &uvmc_stats.passed_small : &uvmc_stats.passed_large, 1,
                                  memory_order_relaxed);
        rc = c->api->passthrough(c);
    }
    uvmc_tls_busy--;
    return rc;
}

int uvmc_copy_rest(struct uvmc_copy *c)
{
    c->small = c->count < uvmc_hot_threshold || uvmc_tls_busy;
    if (c->small && (!uvmc_lazy_maybe2(c->dst, c->src, c->count) || uvmc_tls_busy)) {
        if (uvmc_cfg.stats)
            atomic_fetch_add_explicit(&uvmc_stats.passed_small, 1, memory_order_relaxed);
        return c->api->passthrough(c);
    }
    return uvmc_large_copy(c);
}
