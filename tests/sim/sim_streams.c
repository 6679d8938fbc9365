/* sim_streams.c: simulated streams: the FIFO op queues and their worker threads, legacy / per-thread /
 * user streams, submission with implicit legacy-stream ordering, waiting, and the cuStream* entry points. */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sim_internal.h"

static struct stream *g_streams_live; /* hash of user streams by pointer */
struct stream *sim_streams_all;       /* every stream ever made (never freed: deps point at them) */
/* One legacy stream per device, and one per-thread stream per thread and device (CUDA Runtime API,
 * "Stream synchronization behavior": the default stream is per device). */
static struct stream *g_legacy[SIM_MAX_DEVICES];
static __thread struct stream **tl_ptds; /* SIM_MAX_DEVICES entries, freed at thread exit */
pthread_key_t sim_ptds_key;

/* ------------------------------------------------------------------ ops and worker threads */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int deps_ready_locked(const struct op *o) {
    for (size_t i = 0; i < o->ndeps; i++)
        if (o->deps[i].s->done_seq < o->deps[i].seq) return 0;
    return 1;
}

static void run_op(struct op *o) {
    switch (o->kind) {
    case OP_COPY:
        if (o->n) memmove(o->dst, o->staging ? o->staging : o->src, o->n);
        break;
    case OP_COPY2D:
        for (size_t r = 0; r < o->height; r++)
            memmove((char *)o->dst + r * o->dpitch, (const char *)(o->staging ? o->staging : o->src) + r * o->spitch,
                    o->width);
        break;
    case OP_MEMSET:
        if (o->esize == 1) memset(o->dst, (int)(o->value & 0xff), o->n);
        else if (o->esize == 2) for (size_t i = 0; i < o->n; i++) ((uint16_t *)o->dst)[i] = (uint16_t)o->value;
        else if (o->esize == 4) for (size_t i = 0; i < o->n; i++) ((uint32_t *)o->dst)[i] = (uint32_t)o->value;
        else for (size_t i = 0; i < o->n; i++) ((uint64_t *)o->dst)[i] = o->value;
        break;
    case OP_HOSTFN: o->fn(o->ud); break;
    default: break;
    }
}

static void complete_op_locked(struct stream *s, struct op *o) {
    switch (o->kind) {
    case OP_COPY: sim_bytes += o->n; sim_copies++; break;
    case OP_COPY2D: sim_bytes += o->width * o->height; sim_copies++; break;
    case OP_EVENT:
        if (o->ev->rec_stream == s && o->ev->rec_seq == o->seq) o->ev->t_ms = now_ms();
        sim_event_unref_locked(o->ev);
        break;
    case OP_PREFETCH: {
        if (sim_pf_len == sim_pf_cap) {
            size_t nc = sim_pf_cap ? sim_pf_cap * 2 : 64;
            struct uvmsim_prefetch *nl = realloc(sim_pf_log, nc * sizeof *nl);
            if (nl) { sim_pf_log = nl; sim_pf_cap = nc; }
        }
        if (sim_pf_len < sim_pf_cap) sim_pf_log[sim_pf_len++] = o->pf;
        struct alloc *a = sim_find_alloc_locked((uintptr_t)o->pf.ptr);
        if (a && a->res && o->pf.count)
            sim_res_prefetch_locked(a, (uintptr_t)o->pf.ptr, o->pf.count, o->pf.loc_type == UVMSIM_LOC_DEVICE ? 1 + o->pf.loc_id : 0);
        if (a && a->adv && o->pf.count) {
            size_t p0 = ADV_FIRST(a, o->pf.ptr), p1 = ADV_LAST(a, o->pf.ptr, o->pf.count);
            for (size_t p = p0; p <= p1 && p < a->nadv; p++) {
                a->adv[p].last_pf_type = (unsigned char)o->pf.loc_type;
                a->adv[p].last_pf_id = o->pf.loc_id;
            }
        }
        break;
    }
    default: break;
    }
    if (o->device_work) sim_device_work_locked(-1);
    s->done_seq = o->seq;
    free(o->staging);
    free(o->deps);
    free(o);
}

/* UVMSIM_HOSTFN_THREADS=1: one thread runs every host function of the context, one at a time, in
 * the order they become ready, so a slow one delays every other stream's (cuda.h, cuLaunchHostFunc: "may be serialized"). */
static struct op *g_hf_head, *g_hf_tail;
static int g_hf_started;

static void *hostfn_main(void *arg) {
    (void)arg;
    pthread_mutex_lock(&sim_mu);
    for (;;) {
        while (!g_hf_head) pthread_cond_wait(&sim_cv, &sim_mu);
        struct op *o = g_hf_head;
        g_hf_head = o->hf_next;
        if (!g_hf_head) g_hf_tail = NULL;
        pthread_mutex_unlock(&sim_mu);
        if (!atomic_load(&sim_sticky)) o->fn(o->ud); /* never called after a context error */
        pthread_mutex_lock(&sim_mu);
        o->hf_done = 1;
        pthread_cond_broadcast(&sim_cv);
    }
    return NULL;
}

/* Runs a host function on the context's one host-function thread and waits for it; 0 when that
 * thread cannot be had (the caller then runs it itself). */
static int hostfn_shared_locked(struct op *o) {
    if (!g_hf_started) {
        pthread_attr_t at;
        pthread_t th;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        g_hf_started = pthread_create(&th, &at, hostfn_main, NULL) == 0;
        pthread_attr_destroy(&at);
        if (!g_hf_started) return 0;
    }
    o->hf_next = NULL;
    if (g_hf_tail) g_hf_tail->hf_next = o;
    else g_hf_head = o;
    g_hf_tail = o;
    pthread_cond_broadcast(&sim_cv);
    while (!o->hf_done) pthread_cond_wait(&sim_cv, &sim_mu);
    return 1;
}

static void *worker_main(void *arg) {
    struct stream *s = arg;
    pthread_mutex_lock(&sim_mu);
    for (;;) {
        while (!(s->head && deps_ready_locked(s->head)) && !(s->destroyed && !s->head))
            pthread_cond_wait(&sim_cv, &sim_mu);
        if (!s->head) break; /* destroyed and drained */
        struct op *o = s->head;
        if (o->kind == OP_HOSTFN && !sim_sw.hostfn_per_stream && hostfn_shared_locked(o)) {
            s->head = o->next;
            if (!s->head) s->tail = NULL;
            complete_op_locked(s, o);
            pthread_cond_broadcast(&sim_cv);
            continue;
        }
        sim_res_op_begin_locked(o);
        pthread_mutex_unlock(&sim_mu);
        unsigned d = atomic_load(&sim_op_delay_us);
        if (d) usleep(d);
        if (o->kind != OP_HOSTFN || !atomic_load(&sim_sticky)) run_op(o);
        pthread_mutex_lock(&sim_mu);
        sim_res_op_end_locked(o);
        s->head = o->next;
        if (!s->head) s->tail = NULL;
        complete_op_locked(s, o);
        pthread_cond_broadcast(&sim_cv);
    }
    pthread_mutex_unlock(&sim_mu);
    return NULL;
}

/* ------------------------------------------------------------------ stream objects */

/* A stream of the device current on the calling thread. */
static struct stream *stream_new_locked(int kind, unsigned flags, int prio) {
    struct stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->magic = STREAM_MAGIC;
    s->dev = sim_cur_dev();
    s->kind = kind;
    s->flags = flags;
    s->prio = prio;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 1024 * 1024);
    pthread_t th;
    int rc = pthread_create(&th, &at, worker_main, s);
    pthread_attr_destroy(&at);
    if (rc) { free(s); return NULL; }
    s->all_next = sim_streams_all;
    sim_streams_all = s;
    return s;
}

static struct stream *legacy_locked(void) {
    int d = sim_cur_dev();
    if (!g_legacy[d]) g_legacy[d] = stream_new_locked(S_LEGACY, 0, 0);
    return g_legacy[d];
}
static struct stream *ptds_locked(void) {
    if (!tl_ptds) {
        tl_ptds = calloc(SIM_MAX_DEVICES, sizeof *tl_ptds);
        if (!tl_ptds) return NULL;
        pthread_setspecific(sim_ptds_key, tl_ptds);
    }
    struct stream **p = &tl_ptds[sim_cur_dev()];
    if (!*p || (*p)->destroyed) *p = stream_new_locked(S_PTDS, 0, 0);
    return *p;
}

/* A host thread ended: its per-thread stream drains, then its worker exits. */
void sim_ptds_thread_exit(void *arg) {
    struct stream **set = arg;
    pthread_mutex_lock(&sim_mu);
    for (int d = 0; d < SIM_MAX_DEVICES; d++)
        if (set[d]) set[d]->destroyed = 1;
    pthread_cond_broadcast(&sim_cv);
    pthread_mutex_unlock(&sim_mu);
    free(set);
}

int sim_is_blocking(const struct stream *s) {
    return s->kind == S_PTDS || (s->kind == S_USER && !(s->flags & CU_STREAM_NON_BLOCKING));
}

/* Resolve a stream handle; ptds: the caller entered through a _ptds/_ptsz entry point. */
CUresult sim_resolve_locked(CUstream h, int ptds, struct stream **out) {
    struct stream *s;
    if (h == NULL) s = ptds ? ptds_locked() : legacy_locked();
    else if (h == CU_STREAM_LEGACY) s = legacy_locked();
    else if (h == CU_STREAM_PER_THREAD) s = ptds_locked();
    else {
        HASH_FIND_PTR(g_streams_live, &h, s);
        if (!s) return CUDA_ERROR_INVALID_HANDLE;
    }
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    *out = s;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ submission */

static int add_dep(struct op *o, size_t *cap, struct stream *s, uint64_t seq) {
    if (s->done_seq >= seq) return 0;
    if (o->ndeps == *cap) {
        size_t nc = *cap ? *cap * 2 : 4;
        struct dep *nd = realloc(o->deps, nc * sizeof *nd);
        if (!nd) return -1;
        o->deps = nd;
        *cap = nc;
    }
    o->deps[o->ndeps].s = s;
    o->deps[o->ndeps].seq = seq;
    o->ndeps++;
    return 0;
}

static void op_free(struct op *o) {
    if (!o) return;
    if (o->kind == OP_EVENT && o->ev) sim_event_unref_locked(o->ev);
    free(o->staging);
    free(o->deps);
    free(o);
}

/* Queue o on s (captured when s captures). host_sync: the call returns only after o ran (illegal
 * in capture). extra: optional dependency (stream wait event). Takes ownership of o. */
CUresult sim_submit_locked(struct stream *s, struct op *o, int host_sync, struct dep *extra) {
    if (s->cap_status == CAP_INVALIDATED) { op_free(o); return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; }
    if (s->cap_status == CAP_ACTIVE) {
        if (host_sync) {
            sim_invalidate_capture_locked(s->cap_id);
            op_free(o);
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
        if (o->kind == OP_EVENT) {
            o->ev->captured = 1;
            o->ev->cap_id = s->cap_id;
        }
        s->cap_nodes++;
        op_free(o);
        return CUDA_SUCCESS;
    }
    if (s->kind == S_LEGACY && sim_legacy_implicit_locked()) {
        op_free(o);
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    size_t cap = 0;
    int bad = 0;
    if (s->kind == S_LEGACY) {
        for (struct stream *t = sim_streams_all; t; t = t->all_next)
            if (t != s && t->dev == s->dev && sim_is_blocking(t) && add_dep(o, &cap, t, t->enq_seq)) bad = 1;
    } else if (sim_is_blocking(s) && g_legacy[s->dev]) {
        struct stream *l = g_legacy[s->dev];
        if (add_dep(o, &cap, l, l->enq_seq)) bad = 1;
    }
    if (extra && extra->s != s && add_dep(o, &cap, extra->s, extra->seq)) bad = 1;
    if (bad) {
        op_free(o);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    /* An event recorded behind nothing (nothing queued on its stream, nothing it implicitly waits
     * for) completes at once, as the GPU's front end processes it at once: its completion does not
     * depend on when the host schedules the stream's worker thread, which on a loaded 2-core
     * machine took over 100 ms (the library's drain check, interpose/classify.c, bounds its poll). */
    if (o->kind == OP_EVENT && !host_sync && !s->head && o->ndeps == 0) {
        o->seq = ++s->enq_seq;
        o->ev->rec_stream = s;
        o->ev->rec_seq = o->seq;
        o->ev->captured = 0;
        o->ev->t_ms = now_ms();
        s->done_seq = o->seq;
        op_free(o); /* drops the op's reference on the event */
        pthread_cond_broadcast(&sim_cv);
        return CUDA_SUCCESS;
    }
    /* UVMSIM_STREAM_CAPACITY: a full queue blocks the caller until an op completes (NVIDIA developer forum: enqueues on a full queue hung). */
    while (sim_sw.stream_capacity && s->enq_seq - s->done_seq >= sim_sw.stream_capacity)
        pthread_cond_wait(&sim_cv, &sim_mu);
    o->dev = s->dev;
    o->seq = ++s->enq_seq;
    if (s->enq_seq - s->done_seq > sim_max_outstanding) sim_max_outstanding = s->enq_seq - s->done_seq;
    if (o->kind == OP_HOSTFN) sim_hostfns++;
    o->device_work = o->kind == OP_COPY || o->kind == OP_COPY2D || o->kind == OP_MEMSET || o->kind == OP_PREFETCH;
    if (o->device_work) sim_device_work_locked(1);
    if (o->kind == OP_EVENT) {
        o->ev->rec_stream = s;
        o->ev->rec_seq = o->seq;
        o->ev->captured = 0;
    }
    o->next = NULL;
    if (s->tail) s->tail->next = o;
    else s->head = o;
    s->tail = o;
    pthread_cond_broadcast(&sim_cv);
    if (host_sync) {
        uint64_t seq = o->seq;
        while (s->done_seq < seq) pthread_cond_wait(&sim_cv, &sim_mu);
    }
    return CUDA_SUCCESS;
}

void sim_wait_stream_locked(struct stream *s, uint64_t seq) {
    while (s->done_seq < seq) pthread_cond_wait(&sim_cv, &sim_mu);
}

/* Wait for everything queued so far on s; the legacy stream also waits for blocking streams. */
static void sync_stream_locked(struct stream *s) {
    uint64_t seq = s->enq_seq;
    if (s->kind == S_LEGACY) {
        for (struct stream *t = sim_streams_all; t; t = t->all_next)
            if (t->dev == s->dev && sim_is_blocking(t)) sim_wait_stream_locked(t, t->enq_seq);
    }
    sim_wait_stream_locked(s, seq);
}

static int stream_idle_locked(struct stream *s) {
    if (s->done_seq < s->enq_seq) return 0;
    if (s->kind == S_LEGACY)
        for (struct stream *t = sim_streams_all; t; t = t->all_next)
            if (t->dev == s->dev && sim_is_blocking(t) && t->done_seq < t->enq_seq) return 0;
    return 1;
}

/* ------------------------------------------------------------------ stream entry points */

static CUresult stream_create(CUstream *ph, unsigned flags, int prio) {
    NEED_CTX();
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mu);
    struct stream *s = stream_new_locked(S_USER, flags, prio);
    if (!s) { pthread_mutex_unlock(&sim_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    s->key = s;
    HASH_ADD_PTR(g_streams_live, key, s);
    sim_live_streams++;
    pthread_mutex_unlock(&sim_mu);
    *ph = (CUstream)s;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuStreamCreate(CUstream *ph, unsigned int flags) { ENTER("cuStreamCreate"); return stream_create(ph, flags, 0); }
CUresult CUDAAPI cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int prio) {
    ENTER("cuStreamCreateWithPriority");
    if (prio > 0) prio = 0;
    if (prio < -5) prio = -5;
    return stream_create(ph, flags, prio);
}

static CUresult stream_destroy(CUstream h) {
    NEED_CTX();
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    HASH_FIND_PTR(g_streams_live, &h, s);
    if (!s) { pthread_mutex_unlock(&sim_mu); return CUDA_ERROR_INVALID_HANDLE; }
    if (s->cap_status != CAP_NONE) sim_invalidate_capture_locked(s->cap_id);
    HASH_DEL(g_streams_live, s);
    sim_live_streams--;
    s->destroyed = 1; /* the worker drains what is queued, then exits */
    pthread_cond_broadcast(&sim_cv);
    pthread_mutex_unlock(&sim_mu);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy_v2(CUstream h) { ENTER("cuStreamDestroy_v2"); return stream_destroy(h); }
CUresult CUDAAPI cuStreamDestroy(CUstream h) { ENTER("cuStreamDestroy"); return stream_destroy(h); }

static CUresult stream_sync(CUstream h, int ptds, int query) {
    NEED_CTX();
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    CUresult r = sim_resolve_locked(h, ptds, &s);
    if (!r && s->cap_status != CAP_NONE) {
        sim_invalidate_capture_locked(s->cap_id);
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    /* Querying or synchronizing any stream is potentially unsafe for a prohibited thread
     * (UVMSIM_CAPTURE_QUERIES; the legacy stream always) */
    if (!r && (s->kind == S_LEGACY || sim_sw.capture_queries) && sim_prohibited_locked(1))
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!r && s->kind == S_LEGACY && sim_legacy_implicit_locked()) r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    if (!r) {
        if (query) r = stream_idle_locked(s) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
        else sync_stream_locked(s);
    }
    pthread_mutex_unlock(&sim_mu);
    return r;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream h) { ENTER("cuStreamSynchronize"); return stream_sync(h, 0, 0); }
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream h) { ENTER("cuStreamSynchronize_ptsz"); return stream_sync(h, 1, 0); }
CUresult CUDAAPI cuStreamQuery(CUstream h) { ENTER("cuStreamQuery"); return stream_sync(h, 0, 1); }
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream h) { ENTER("cuStreamQuery_ptsz"); return stream_sync(h, 1, 1); }

static CUresult stream_get(CUstream h, int ptds, unsigned *flags, int *prio) {
    NEED_CTX();
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    CUresult r = sim_resolve_locked(h, ptds, &s);
    if (!r) {
        if (flags) *flags = s->flags;
        if (prio) *prio = s->prio;
    }
    pthread_mutex_unlock(&sim_mu);
    return r;
}
CUresult CUDAAPI cuStreamGetFlags(CUstream h, unsigned int *f) { ENTER("cuStreamGetFlags"); if (!f) return CUDA_ERROR_INVALID_VALUE; return stream_get(h, 0, f, NULL); }
CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream h, unsigned int *f) { ENTER("cuStreamGetFlags_ptsz"); if (!f) return CUDA_ERROR_INVALID_VALUE; return stream_get(h, 1, f, NULL); }
CUresult CUDAAPI cuStreamGetPriority(CUstream h, int *p) { ENTER("cuStreamGetPriority"); if (!p) return CUDA_ERROR_INVALID_VALUE; return stream_get(h, 0, NULL, p); }
/* The stream's context and device: those current when it was made (cuda.h cuStreamGetCtx; the legacy
 * and per-thread handles name the calling thread's current context's). */
static CUresult stream_owner(CUstream h, int ptds, CUcontext *pc, CUdevice *pd) {
    NEED_CTX();
    if (!pc && !pd) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    CUresult r = sim_resolve_locked(h, ptds, &s);
    if (!r && pc) *pc = (CUcontext)&sim_primary[s->dev];
    if (!r && pd) *pd = s->dev;
    pthread_mutex_unlock(&sim_mu);
    return r;
}
CUresult CUDAAPI cuStreamGetCtx(CUstream h, CUcontext *c) { ENTER("cuStreamGetCtx"); if (!c) return CUDA_ERROR_INVALID_VALUE; return stream_owner(h, 0, c, NULL); }
CUresult CUDAAPI cuStreamGetCtx_ptsz(CUstream h, CUcontext *c) { ENTER("cuStreamGetCtx_ptsz"); if (!c) return CUDA_ERROR_INVALID_VALUE; return stream_owner(h, 1, c, NULL); }
CUresult CUDAAPI cuStreamGetDevice(CUstream h, CUdevice *d) { ENTER("cuStreamGetDevice"); if (!d) return CUDA_ERROR_INVALID_VALUE; return stream_owner(h, 0, NULL, d); }
CUresult CUDAAPI cuStreamGetDevice_ptsz(CUstream h, CUdevice *d) { ENTER("cuStreamGetDevice_ptsz"); if (!d) return CUDA_ERROR_INVALID_VALUE; return stream_owner(h, 1, NULL, d); }
CUresult CUDAAPI cuStreamGetPriority_ptsz(CUstream h, int *p) { ENTER("cuStreamGetPriority_ptsz"); if (!p) return CUDA_ERROR_INVALID_VALUE; return stream_get(h, 1, NULL, p); }

static CUresult launch_host_func(CUstream h, CUhostFn fn, void *ud, int ptds) {
    NEED_CTX();
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    CUresult r = sim_resolve_locked(h, ptds, &s);
    if (r) { pthread_mutex_unlock(&sim_mu); return r; }
    struct op *o = calloc(1, sizeof *o);
    if (!o) { pthread_mutex_unlock(&sim_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    o->kind = OP_HOSTFN;
    o->fn = fn;
    o->ud = ud;
    r = sim_submit_locked(s, o, 0, NULL);
    pthread_mutex_unlock(&sim_mu);
    return r;
}
CUresult CUDAAPI cuLaunchHostFunc(CUstream h, CUhostFn fn, void *ud) { ENTER("cuLaunchHostFunc"); return launch_host_func(h, fn, ud, 0); }
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void *ud) { ENTER("cuLaunchHostFunc_ptsz"); return launch_host_func(h, fn, ud, 1); }

