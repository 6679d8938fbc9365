/* sim_driver.c: simulated CUDA driver (libcuda.so.1) for tests. All simulated device state lives here:
 * allocations, streams (one worker thread each), events, capture state, counters and faults.
 * See README.md for what is and is not modelled. */
#define __CUDA_API_VERSION_INTERNAL 1 /* declare every legacy, _v2, _ptds and _ptsz form */
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#pragma GCC visibility push(default)
#include <cuda.h>
#include "uvmsim.h"
unsigned uvmsim_hook_enter(const char *fn);
void uvmsim_rt_register(const void *addr);
#pragma GCC visibility pop

#include <uthash.h>

#define SIM_DRIVER_VERSION 13000
#define MIB2 ((size_t)2 << 20)

/* ------------------------------------------------------------------ counters and faults */

struct fault { unsigned long long at; int error; struct fault *next; };
struct counter { char *name; unsigned long long calls; struct fault *faults; UT_hash_handle hh; };
static struct counter *g_counters;
static pthread_mutex_t g_cnt_mu = PTHREAD_MUTEX_INITIALIZER;

static struct counter *counter_get(const char *fn) {
    struct counter *c;
    HASH_FIND_STR(g_counters, fn, c);
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return NULL;
        c->name = strdup(fn);
        if (!c->name) { free(c); return NULL; }
        HASH_ADD_KEYPTR(hh, g_counters, c->name, strlen(c->name), c);
    }
    return c;
}

/* Set in a child forked from a process that had CUDA state: like the real driver, CUDA is unusable
 * there (every call fails with CUDA_ERROR_NOT_INITIALIZED, the runtime with cudaErrorInitializationError). */
static int g_child_poisoned;

/* Count a call by its exported name; returns the injected error (0 = none). */
unsigned uvmsim_hook_enter(const char *fn) {
    unsigned err = 0;
    if (g_child_poisoned) return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&g_cnt_mu);
    struct counter *c = counter_get(fn);
    if (c) {
        c->calls++;
        for (struct fault **pp = &c->faults; *pp; pp = &(*pp)->next) {
            if ((*pp)->at == c->calls) {
                struct fault *f = *pp;
                err = (unsigned)f->error;
                *pp = f->next;
                free(f);
                break;
            }
        }
    }
    pthread_mutex_unlock(&g_cnt_mu);
    return err;
}

unsigned long long uvmsim_calls(const char *fn) {
    unsigned long long n = 0;
    pthread_mutex_lock(&g_cnt_mu);
    struct counter *c;
    HASH_FIND_STR(g_counters, fn, c);
    if (c) n = c->calls;
    pthread_mutex_unlock(&g_cnt_mu);
    return n;
}

void uvmsim_fail_nth(const char *fn, unsigned nth, int error) {
    if (!fn || nth == 0) return;
    pthread_mutex_lock(&g_cnt_mu);
    struct counter *c = counter_get(fn);
    struct fault *f = c ? malloc(sizeof *f) : NULL;
    if (f) {
        f->at = c->calls + nth;
        f->error = error;
        f->next = c->faults;
        c->faults = f;
    }
    pthread_mutex_unlock(&g_cnt_mu);
}

/* Code ranges of the simulated runtimes loaded in this process. Driver calls made from inside a
 * runtime are its private business (the real libcudart reaches the driver through private tables):
 * they are neither counted nor faulted, so counters show only what the program and a preloaded
 * library called. */
struct code_range { uintptr_t lo, hi; };
static struct code_range g_rt_ranges[16];
static atomic_int g_n_rt_ranges;
static pthread_mutex_t g_rt_mu = PTHREAD_MUTEX_INITIALIZER;

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uintptr_t a = (uintptr_t)arg;
    int hit = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (a >= lo && a < hi) hit = 1;
    }
    if (!hit) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        int n = atomic_load(&g_n_rt_ranges);
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || n >= 16) continue;
        g_rt_ranges[n].lo = info->dlpi_addr + ph->p_vaddr;
        g_rt_ranges[n].hi = g_rt_ranges[n].lo + ph->p_memsz;
        atomic_store(&g_n_rt_ranges, n + 1);
    }
    return 1;
}

void uvmsim_rt_register(const void *addr) {
    pthread_mutex_lock(&g_rt_mu);
    dl_iterate_phdr(phdr_cb, (void *)addr);
    pthread_mutex_unlock(&g_rt_mu);
}

static int from_runtime(const void *ra) {
    int n = atomic_load(&g_n_rt_ranges);
    for (int i = 0; i < n; i++)
        if ((uintptr_t)ra >= g_rt_ranges[i].lo && (uintptr_t)ra < g_rt_ranges[i].hi) return 1;
    return 0;
}

#define ENTER(nm)                                                                                      \
    do {                                                                                               \
        const void *ra_ = __builtin_return_address(0);                                                 \
        if (g_child_poisoned) return CUDA_ERROR_NOT_INITIALIZED;                                       \
        if (!from_runtime(ra_)) {                                                                      \
            unsigned f_ = uvmsim_hook_enter(nm);                                                       \
            if (f_) return (CUresult)f_;                                                               \
        }                                                                                              \
    } while (0)

/* ------------------------------------------------------------------ global state */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;

static atomic_uint g_op_delay_us;
static unsigned long long g_bytes, g_copies, g_pinned, g_pinned_peak, g_live_streams, g_live_events;
static struct uvmsim_prefetch *g_pf_log;
static size_t g_pf_len, g_pf_cap;

struct sim_ctx { int magic; };
static struct sim_ctx g_primary = { 0x43545831 };
static int g_primary_refs;
static __thread CUcontext tl_ctx;
static __thread CUstreamCaptureMode tl_cap_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

/* ------------------------------------------------------------------ allocations */

enum akind { A_DEVICE = 1, A_MANAGED, A_HOST, A_REGISTERED };
struct page_advice { unsigned char pref_type, read_mostly, accessed_by, last_pf_type; int pref_id, last_pf_id; };
struct alloc {
    uintptr_t base;
    size_t size;
    void *map;          /* mmap start (NULL for registered memory) */
    size_t maplen;
    int kind;
    unsigned long long id;
    struct page_advice *adv; /* managed only: one per 2 MiB page from base (base is 2 MiB aligned) */
    size_t npages;
};
static struct alloc *g_allocs;
static size_t g_nallocs, g_cap_allocs;
static unsigned long long g_next_buffer_id = 1;

static struct alloc *find_alloc_locked(uintptr_t p) {
    for (size_t i = 0; i < g_nallocs; i++)
        if (p >= g_allocs[i].base && p < g_allocs[i].base + g_allocs[i].size) return &g_allocs[i];
    return NULL;
}

static int add_alloc_locked(struct alloc a) {
    if (g_nallocs == g_cap_allocs) {
        size_t nc = g_cap_allocs ? g_cap_allocs * 2 : 64;
        struct alloc *na = realloc(g_allocs, nc * sizeof *na);
        if (!na) return -1;
        g_allocs = na;
        g_cap_allocs = nc;
    }
    a.id = g_next_buffer_id++;
    g_allocs[g_nallocs++] = a;
    return 0;
}

static void pinned_add_locked(long long d) {
    g_pinned = (unsigned long long)((long long)g_pinned + d);
    if (g_pinned > g_pinned_peak) g_pinned_peak = g_pinned;
}

/* Memory class of a pointer as the copy engine sees it. */
enum mclass { M_PAGEABLE = 0, M_PINNED, M_DEVICE, M_MANAGED };
static int mclass_locked(const void *p) {
    struct alloc *a = find_alloc_locked((uintptr_t)p);
    if (!a) return M_PAGEABLE;
    switch (a->kind) {
    case A_DEVICE: return M_DEVICE;
    case A_MANAGED: return M_MANAGED;
    default: return M_PINNED;
    }
}

/* ------------------------------------------------------------------ streams, events, ops */

enum { S_LEGACY = 1, S_PTDS, S_USER };
enum { CAP_NONE = 0, CAP_ACTIVE, CAP_INVALIDATED };

struct dep { struct stream *s; uint64_t seq; };
enum okind { OP_COPY, OP_COPY2D, OP_MEMSET, OP_HOSTFN, OP_EVENT, OP_NOP, OP_PREFETCH };
struct event;
struct op {
    struct op *next;
    int kind;
    uint64_t seq;
    struct dep *deps;
    size_t ndeps;
    void *dst;
    const void *src;
    size_t n;          /* bytes (copy), elements (memset) */
    void *staging;
    size_t dpitch, spitch, width, height;
    unsigned value;
    int esize;
    CUhostFn fn;
    void *ud;
    struct event *ev;
    struct uvmsim_prefetch pf;
};

struct stream {
    void *key; /* == this, the hash key */
    int magic;
    int kind;
    unsigned flags;
    int prio;
    int destroyed;
    uint64_t enq_seq, done_seq;
    struct op *head, *tail;
    /* capture */
    int cap_status;
    CUstreamCaptureMode cap_mode;
    pthread_t cap_thread;
    unsigned long long cap_id;
    unsigned long long cap_nodes;
    struct stream *all_next;
    UT_hash_handle hh;
};
#define STREAM_MAGIC 0x5354524d
static struct stream *g_streams_live; /* hash of user streams by pointer */
static struct stream *g_streams_all;  /* every stream ever made (never freed: deps point at them) */
static struct stream *g_legacy;
static __thread struct stream *tl_ptds;
static unsigned long long g_next_cap_id = 1;

struct event {
    void *key;
    int magic;
    unsigned flags;
    int alive;
    int refs;
    struct stream *rec_stream;
    uint64_t rec_seq;
    int captured;
    unsigned long long cap_id;
    double t_ms;
    UT_hash_handle hh;
};
#define EVENT_MAGIC 0x45564e54
static struct event *g_events;

struct graph { int magic; unsigned long long nodes; };
#define GRAPH_MAGIC 0x47524148

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void event_unref_locked(struct event *e) {
    if (--e->refs == 0) {
        e->magic = 0;
        free(e);
    }
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
        else for (size_t i = 0; i < o->n; i++) ((uint32_t *)o->dst)[i] = o->value;
        break;
    case OP_HOSTFN: o->fn(o->ud); break;
    default: break;
    }
}

static void complete_op_locked(struct stream *s, struct op *o) {
    switch (o->kind) {
    case OP_COPY: g_bytes += o->n; g_copies++; break;
    case OP_COPY2D: g_bytes += o->width * o->height; g_copies++; break;
    case OP_EVENT:
        if (o->ev->rec_stream == s && o->ev->rec_seq == o->seq) o->ev->t_ms = now_ms();
        event_unref_locked(o->ev);
        break;
    case OP_PREFETCH: {
        if (g_pf_len == g_pf_cap) {
            size_t nc = g_pf_cap ? g_pf_cap * 2 : 64;
            struct uvmsim_prefetch *nl = realloc(g_pf_log, nc * sizeof *nl);
            if (nl) { g_pf_log = nl; g_pf_cap = nc; }
        }
        if (g_pf_len < g_pf_cap) g_pf_log[g_pf_len++] = o->pf;
        struct alloc *a = find_alloc_locked((uintptr_t)o->pf.ptr);
        if (a && a->adv && o->pf.count) {
            size_t p0 = ((uintptr_t)o->pf.ptr - a->base) / MIB2;
            size_t p1 = ((uintptr_t)o->pf.ptr + o->pf.count - 1 - a->base) / MIB2;
            for (size_t p = p0; p <= p1 && p < a->npages; p++) {
                a->adv[p].last_pf_type = (unsigned char)o->pf.loc_type;
                a->adv[p].last_pf_id = o->pf.loc_id;
            }
        }
        break;
    }
    default: break;
    }
    s->done_seq = o->seq;
    free(o->staging);
    free(o->deps);
    free(o);
}

static void *worker_main(void *arg) {
    struct stream *s = arg;
    pthread_mutex_lock(&g_mu);
    for (;;) {
        while (!(s->head && deps_ready_locked(s->head)) && !(s->destroyed && !s->head))
            pthread_cond_wait(&g_cv, &g_mu);
        if (!s->head) break; /* destroyed and drained */
        struct op *o = s->head;
        pthread_mutex_unlock(&g_mu);
        unsigned d = atomic_load(&g_op_delay_us);
        if (d) usleep(d);
        run_op(o);
        pthread_mutex_lock(&g_mu);
        s->head = o->next;
        if (!s->head) s->tail = NULL;
        complete_op_locked(s, o);
        pthread_cond_broadcast(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

static struct stream *stream_new_locked(int kind, unsigned flags, int prio) {
    struct stream *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->magic = STREAM_MAGIC;
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
    s->all_next = g_streams_all;
    g_streams_all = s;
    return s;
}

static struct stream *legacy_locked(void) {
    if (!g_legacy) g_legacy = stream_new_locked(S_LEGACY, 0, 0);
    return g_legacy;
}
static pthread_key_t g_ptds_key;
static struct stream *ptds_locked(void) {
    if (!tl_ptds || tl_ptds->destroyed) {
        tl_ptds = stream_new_locked(S_PTDS, 0, 0);
        if (tl_ptds) pthread_setspecific(g_ptds_key, tl_ptds);
    }
    return tl_ptds;
}

/* A host thread ended: its per-thread stream drains, then its worker exits. */
static void ptds_thread_exit(void *arg) {
    struct stream *s = arg;
    pthread_mutex_lock(&g_mu);
    s->destroyed = 1;
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
}

static void fork_prepare(void) { pthread_mutex_lock(&g_cnt_mu); pthread_mutex_lock(&g_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&g_mu); pthread_mutex_unlock(&g_cnt_mu); }
static void fork_child(void) {
    if (g_streams_all || g_nallocs) g_child_poisoned = 1; /* no worker threads exist here */
    pthread_mutex_unlock(&g_mu);
    pthread_mutex_unlock(&g_cnt_mu);
}

__attribute__((constructor)) static void sim_driver_init(void) {
    pthread_key_create(&g_ptds_key, ptds_thread_exit);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static int is_blocking(const struct stream *s) {
    return s->kind == S_PTDS || (s->kind == S_USER && !(s->flags & CU_STREAM_NON_BLOCKING));
}

/* Resolve a stream handle; ptds: the caller entered through a _ptds/_ptsz entry point. */
static CUresult resolve_locked(CUstream h, int ptds, struct stream **out) {
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

/* ------------------------------------------------------------------ capture rules */

static void invalidate_capture_locked(unsigned long long id) {
    for (struct stream *s = g_streams_all; s; s = s->all_next)
        if (s->cap_status != CAP_NONE && s->cap_id == id) s->cap_status = CAP_INVALIDATED;
}

/* BRIEF §7: is this thread prohibited from potentially unsafe calls? If invalidate, break the
 * captures it conflicts with. */
static int prohibited_locked(int invalidate) {
    if (tl_cap_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return 0;
    pthread_t self = pthread_self();
    int hit = 0;
    for (struct stream *s = g_streams_all; s; s = s->all_next) {
        if (s->cap_status == CAP_NONE) continue;
        int own = pthread_equal(s->cap_thread, self);
        int conflict = (own && s->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
                       (!own && tl_cap_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                        s->cap_mode == CU_STREAM_CAPTURE_MODE_GLOBAL);
        if (conflict) {
            hit = 1;
            if (invalidate) s->cap_status = CAP_INVALIDATED;
        }
    }
    if (hit && invalidate)
        for (struct stream *s = g_streams_all; s; s = s->all_next)
            if (s->cap_status == CAP_INVALIDATED) invalidate_capture_locked(s->cap_id);
    return hit;
}

/* Legacy-stream work while a blocking stream captures: invalidate those captures, return 1. */
static int legacy_implicit_locked(void) {
    int hit = 0;
    for (struct stream *s = g_streams_all; s; s = s->all_next)
        if (s->cap_status != CAP_NONE && is_blocking(s)) {
            hit = 1;
            invalidate_capture_locked(s->cap_id);
        }
    return hit;
}

static int any_capture_locked(void) {
    for (struct stream *s = g_streams_all; s; s = s->all_next)
        if (s->cap_status != CAP_NONE) return 1;
    return 0;
}

/* Guard for a potentially unsafe call (sync alloc/free/copy, device sync). */
static CUresult unsafe_guard(void) {
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_mu);
    if (prohibited_locked(1)) r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    pthread_mutex_unlock(&g_mu);
    return r;
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
    if (o->kind == OP_EVENT && o->ev) event_unref_locked(o->ev);
    free(o->staging);
    free(o->deps);
    free(o);
}

/* Queue o on s (captured when s captures). host_sync: the call returns only after o ran (illegal
 * in capture). extra: optional dependency (stream wait event). Takes ownership of o. */
static CUresult submit_locked(struct stream *s, struct op *o, int host_sync, struct dep *extra) {
    if (s->cap_status == CAP_INVALIDATED) { op_free(o); return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; }
    if (s->cap_status == CAP_ACTIVE) {
        if (host_sync) {
            invalidate_capture_locked(s->cap_id);
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
    if (s->kind == S_LEGACY && legacy_implicit_locked()) {
        op_free(o);
        return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    size_t cap = 0;
    int bad = 0;
    if (s->kind == S_LEGACY) {
        for (struct stream *t = g_streams_all; t; t = t->all_next)
            if (t != s && is_blocking(t) && add_dep(o, &cap, t, t->enq_seq)) bad = 1;
    } else if (is_blocking(s) && g_legacy) {
        if (add_dep(o, &cap, g_legacy, g_legacy->enq_seq)) bad = 1;
    }
    if (extra && extra->s != s && add_dep(o, &cap, extra->s, extra->seq)) bad = 1;
    if (bad) {
        op_free(o);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    o->seq = ++s->enq_seq;
    if (o->kind == OP_EVENT) {
        o->ev->rec_stream = s;
        o->ev->rec_seq = o->seq;
        o->ev->captured = 0;
    }
    o->next = NULL;
    if (s->tail) s->tail->next = o;
    else s->head = o;
    s->tail = o;
    pthread_cond_broadcast(&g_cv);
    if (host_sync) {
        uint64_t seq = o->seq;
        while (s->done_seq < seq) pthread_cond_wait(&g_cv, &g_mu);
    }
    return CUDA_SUCCESS;
}

static void wait_stream_locked(struct stream *s, uint64_t seq) {
    while (s->done_seq < seq) pthread_cond_wait(&g_cv, &g_mu);
}

/* Wait for everything queued so far on s; the legacy stream also waits for blocking streams. */
static void sync_stream_locked(struct stream *s) {
    uint64_t seq = s->enq_seq;
    if (s->kind == S_LEGACY) {
        for (struct stream *t = g_streams_all; t; t = t->all_next)
            if (is_blocking(t)) wait_stream_locked(t, t->enq_seq);
    }
    wait_stream_locked(s, seq);
}

static int stream_idle_locked(struct stream *s) {
    if (s->done_seq < s->enq_seq) return 0;
    if (s->kind == S_LEGACY)
        for (struct stream *t = g_streams_all; t; t = t->all_next)
            if (is_blocking(t) && t->done_seq < t->enq_seq) return 0;
    return 1;
}

#define NEED_CTX() do { if (!tl_ctx) return CUDA_ERROR_INVALID_CONTEXT; } while (0)

/* ------------------------------------------------------------------ copies */

enum ccheck { C_ANY = 0, C_DTOH, C_HTOD, C_DTOD };

static int devside(int mc) { return mc == M_DEVICE || mc == M_MANAGED || mc == M_PINNED; }

static CUresult do_copy(void *dst, const void *src, size_t n, CUstream h, int ptds, int check, int sync_call) {
    NEED_CTX();
    if (n && (!dst || !src)) return CUDA_ERROR_INVALID_VALUE;
    if (sync_call) { CUresult g = unsafe_guard(); if (g) return g; }
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    CUresult r = resolve_locked(h, ptds, &s);
    if (r) { pthread_mutex_unlock(&g_mu); return r; }
    int ms = mclass_locked(src), md = mclass_locked(dst);
    if (((check == C_DTOH || check == C_DTOD) && !devside(ms)) || ((check == C_HTOD || check == C_DTOD) && !devside(md))) {
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    int dev_s = ms == M_DEVICE || ms == M_MANAGED, dev_d = md == M_DEVICE || md == M_MANAGED;
    int host_sync = sync_call || md == M_PAGEABLE || (!dev_s && !dev_d);
    int pageable = ms == M_PAGEABLE || md == M_PAGEABLE;
    if (pageable && s->cap_status == CAP_ACTIVE) {
        invalidate_capture_locked(s->cap_id);
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    struct op *o = calloc(1, sizeof *o);
    if (!o) { pthread_mutex_unlock(&g_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    o->kind = OP_COPY;
    o->dst = dst;
    o->src = src;
    o->n = n;
    if (!host_sync && ms == M_PAGEABLE && n && s->cap_status == CAP_NONE) {
        /* pageable source: staged at call time, like the real driver */
        o->staging = malloc(n);
        if (!o->staging) { free(o); pthread_mutex_unlock(&g_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
        memcpy(o->staging, src, n);
    }
    r = submit_locked(s, o, host_sync, NULL);
    pthread_mutex_unlock(&g_mu);
    return r;
}

#define P(x) ((void *)(uintptr_t)(x))

static CUresult do_copy2d(const CUDA_MEMCPY2D *c, CUstream h, int ptds, int sync_call) {
    NEED_CTX();
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    const char *src;
    char *dst;
    switch (c->srcMemoryType) {
    case CU_MEMORYTYPE_HOST: src = c->srcHost; break;
    case CU_MEMORYTYPE_DEVICE: case CU_MEMORYTYPE_UNIFIED: src = P(c->srcDevice); break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    switch (c->dstMemoryType) {
    case CU_MEMORYTYPE_HOST: dst = c->dstHost; break;
    case CU_MEMORYTYPE_DEVICE: case CU_MEMORYTYPE_UNIFIED: dst = P(c->dstDevice); break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    if (c->WidthInBytes && c->Height && (!src || !dst)) return CUDA_ERROR_INVALID_VALUE;
    if ((c->Height > 1 && (c->srcPitch < c->WidthInBytes || c->dstPitch < c->WidthInBytes)))
        return CUDA_ERROR_INVALID_VALUE;
    src += c->srcY * c->srcPitch + c->srcXInBytes;
    dst += c->dstY * c->dstPitch + c->dstXInBytes;
    if (sync_call) { CUresult g = unsafe_guard(); if (g) return g; }
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    CUresult r = resolve_locked(h, ptds, &s);
    if (r) { pthread_mutex_unlock(&g_mu); return r; }
    int ms = mclass_locked(src), md = mclass_locked(dst);
    if ((c->srcMemoryType == CU_MEMORYTYPE_DEVICE && !devside(ms)) || (c->dstMemoryType == CU_MEMORYTYPE_DEVICE && !devside(md))) {
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    int dev_s = ms == M_DEVICE || ms == M_MANAGED, dev_d = md == M_DEVICE || md == M_MANAGED;
    int host_sync = sync_call || md == M_PAGEABLE || (!dev_s && !dev_d);
    if ((ms == M_PAGEABLE || md == M_PAGEABLE) && s->cap_status == CAP_ACTIVE) {
        invalidate_capture_locked(s->cap_id);
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    struct op *o = calloc(1, sizeof *o);
    if (!o) { pthread_mutex_unlock(&g_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    o->kind = OP_COPY2D;
    o->dst = dst;
    o->src = src;
    o->dpitch = c->dstPitch;
    o->spitch = c->srcPitch;
    o->width = c->WidthInBytes;
    o->height = c->Height;
    r = submit_locked(s, o, host_sync, NULL);
    pthread_mutex_unlock(&g_mu);
    return r;
}

static CUresult do_memset(CUdeviceptr d, unsigned v, int esize, size_t n, CUstream h, int ptds, int sync_call) {
    NEED_CTX();
    if (n && !d) return CUDA_ERROR_INVALID_VALUE;
    if (sync_call) { CUresult g = unsafe_guard(); if (g) return g; }
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    CUresult r = resolve_locked(h, ptds, &s);
    if (r) { pthread_mutex_unlock(&g_mu); return r; }
    struct alloc *a = find_alloc_locked(d);
    if (n && (!a || d + n * (size_t)esize > a->base + a->size)) { pthread_mutex_unlock(&g_mu); return CUDA_ERROR_INVALID_VALUE; }
    struct op *o = calloc(1, sizeof *o);
    if (!o) { pthread_mutex_unlock(&g_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    o->kind = OP_MEMSET;
    o->dst = P(d);
    o->value = v;
    o->esize = esize;
    o->n = n;
    r = submit_locked(s, o, sync_call, NULL);
    pthread_mutex_unlock(&g_mu);
    return r;
}

/* Exported copy entry points: every real name, each counted under its own name. */
CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { ENTER("cuMemcpy"); return do_copy(P(dst), P(src), n, NULL, 0, C_ANY, 1); }
CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { ENTER("cuMemcpy_ptds"); return do_copy(P(dst), P(src), n, NULL, 1, C_ANY, 1); }
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { ENTER("cuMemcpyAsync"); return do_copy(P(dst), P(src), n, h, 0, C_ANY, 0); }
CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { ENTER("cuMemcpyAsync_ptsz"); return do_copy(P(dst), P(src), n, h, 1, C_ANY, 0); }

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) { ENTER("cuMemcpyDtoH_v2"); return do_copy(dst, P(src), n, NULL, 0, C_DTOH, 1); }
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) { ENTER("cuMemcpyDtoH_v2_ptds"); return do_copy(dst, P(src), n, NULL, 1, C_DTOH, 1); }
CUresult CUDAAPI cuMemcpyDtoH(void *dst, CUdeviceptr_v1 src, unsigned int n) { ENTER("cuMemcpyDtoH"); return do_copy(dst, P(src), n, NULL, 0, C_DTOH, 1); }
CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream h) { ENTER("cuMemcpyDtoHAsync_v2"); return do_copy(dst, P(src), n, h, 0, C_DTOH, 0); }
CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream h) { ENTER("cuMemcpyDtoHAsync_v2_ptsz"); return do_copy(dst, P(src), n, h, 1, C_DTOH, 0); }
CUresult CUDAAPI cuMemcpyDtoHAsync(void *dst, CUdeviceptr_v1 src, unsigned int n, CUstream h) { ENTER("cuMemcpyDtoHAsync"); return do_copy(dst, P(src), n, h, 0, C_DTOH, 0); }

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) { ENTER("cuMemcpyHtoD_v2"); return do_copy(P(dst), src, n, NULL, 0, C_HTOD, 1); }
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n) { ENTER("cuMemcpyHtoD_v2_ptds"); return do_copy(P(dst), src, n, NULL, 1, C_HTOD, 1); }
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr_v1 dst, const void *src, unsigned int n) { ENTER("cuMemcpyHtoD"); return do_copy(P(dst), src, n, NULL, 0, C_HTOD, 1); }
CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream h) { ENTER("cuMemcpyHtoDAsync_v2"); return do_copy(P(dst), src, n, h, 0, C_HTOD, 0); }
CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream h) { ENTER("cuMemcpyHtoDAsync_v2_ptsz"); return do_copy(P(dst), src, n, h, 1, C_HTOD, 0); }
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr_v1 dst, const void *src, unsigned int n, CUstream h) { ENTER("cuMemcpyHtoDAsync"); return do_copy(P(dst), src, n, h, 0, C_HTOD, 0); }

CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) { ENTER("cuMemcpyDtoD_v2"); return do_copy(P(dst), P(src), n, NULL, 0, C_DTOD, 1); }
CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { ENTER("cuMemcpyDtoD_v2_ptds"); return do_copy(P(dst), P(src), n, NULL, 1, C_DTOD, 1); }
CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n) { ENTER("cuMemcpyDtoD"); return do_copy(P(dst), P(src), n, NULL, 0, C_DTOD, 1); }
CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { ENTER("cuMemcpyDtoDAsync_v2"); return do_copy(P(dst), P(src), n, h, 0, C_DTOD, 0); }
CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { ENTER("cuMemcpyDtoDAsync_v2_ptsz"); return do_copy(P(dst), P(src), n, h, 1, C_DTOD, 0); }
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n, CUstream h) { ENTER("cuMemcpyDtoDAsync"); return do_copy(P(dst), P(src), n, h, 0, C_DTOD, 0); }

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *c) { ENTER("cuMemcpy2D_v2"); return do_copy2d(c, NULL, 0, 1); }
CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *c) { ENTER("cuMemcpy2D_v2_ptds"); return do_copy2d(c, NULL, 1, 1); }
CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *c, CUstream h) { ENTER("cuMemcpy2DAsync_v2"); return do_copy2d(c, h, 0, 0); }
CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *c, CUstream h) { ENTER("cuMemcpy2DAsync_v2_ptsz"); return do_copy2d(c, h, 1, 0); }

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { ENTER("cuMemsetD8_v2"); return do_memset(d, v, 1, n, NULL, 0, 1); }
CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) { ENTER("cuMemsetD8_v2_ptds"); return do_memset(d, v, 1, n, NULL, 1, 1); }
CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) { ENTER("cuMemsetD16_v2"); return do_memset(d, v, 2, n, NULL, 0, 1); }
CUresult CUDAAPI cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n) { ENTER("cuMemsetD16_v2_ptds"); return do_memset(d, v, 2, n, NULL, 1, 1); }
CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) { ENTER("cuMemsetD32_v2"); return do_memset(d, v, 4, n, NULL, 0, 1); }
CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) { ENTER("cuMemsetD32_v2_ptds"); return do_memset(d, v, 4, n, NULL, 1, 1); }
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream h) { ENTER("cuMemsetD8Async"); return do_memset(d, v, 1, n, h, 0, 0); }
CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream h) { ENTER("cuMemsetD8Async_ptsz"); return do_memset(d, v, 1, n, h, 1, 0); }
CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream h) { ENTER("cuMemsetD16Async"); return do_memset(d, v, 2, n, h, 0, 0); }
CUresult CUDAAPI cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream h) { ENTER("cuMemsetD16Async_ptsz"); return do_memset(d, v, 2, n, h, 1, 0); }
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream h) { ENTER("cuMemsetD32Async"); return do_memset(d, v, 4, n, h, 0, 0); }
CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream h) { ENTER("cuMemsetD32Async_ptsz"); return do_memset(d, v, 4, n, h, 1, 0); }

/* ------------------------------------------------------------------ allocation entry points */

static void *map_bytes(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static CUresult alloc_common(void **out, size_t size, int kind) {
    NEED_CTX();
    if (!out || size == 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult g = unsafe_guard();
    if (g) return g;
    struct alloc a = { 0 };
    a.kind = kind;
    a.size = size;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (size + pg - 1) / pg * pg;
    if (kind == A_MANAGED || kind == A_DEVICE) {
        /* 2 MiB aligned base, like the UVM driver's VA blocks */
        size_t mlen = len + MIB2;
        char *m = map_bytes(mlen);
        if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
        uintptr_t b = ((uintptr_t)m + MIB2 - 1) & ~(uintptr_t)(MIB2 - 1);
        a.map = m;
        a.maplen = mlen;
        a.base = b;
        if (kind == A_MANAGED) {
            a.npages = (size + MIB2 - 1) / MIB2;
            a.adv = calloc(a.npages, sizeof *a.adv);
            if (!a.adv) { munmap(m, mlen); return CUDA_ERROR_OUT_OF_MEMORY; }
        }
    } else {
        char *m = map_bytes(len);
        if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t off = 0; off < len; off += pg) ((volatile char *)m)[off] = 0; /* commit: page-locked */
        a.map = m;
        a.maplen = len;
        a.base = (uintptr_t)m;
    }
    pthread_mutex_lock(&g_mu);
    if (add_alloc_locked(a)) {
        pthread_mutex_unlock(&g_mu);
        munmap(a.map, a.maplen);
        free(a.adv);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (kind == A_HOST) pinned_add_locked((long long)size);
    pthread_mutex_unlock(&g_mu);
    *out = (void *)a.base;
    return CUDA_SUCCESS;
}

static CUresult free_common(uintptr_t p, int want_host) {
    NEED_CTX();
    if (!p) return CUDA_SUCCESS;
    CUresult g = unsafe_guard();
    if (g) return g;
    pthread_mutex_lock(&g_mu);
    /* freeing synchronizes the device, like the real cuMemFree */
    for (struct stream *t = g_streams_all; t; t = t->all_next) wait_stream_locked(t, t->enq_seq);
    size_t i;
    for (i = 0; i < g_nallocs; i++)
        if (g_allocs[i].base == p) break;
    if (i == g_nallocs || (want_host ? g_allocs[i].kind != A_HOST
                                     : (g_allocs[i].kind != A_DEVICE && g_allocs[i].kind != A_MANAGED))) {
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct alloc a = g_allocs[i];
    g_allocs[i] = g_allocs[--g_nallocs];
    if (a.kind == A_HOST) pinned_add_locked(-(long long)a.size);
    pthread_mutex_unlock(&g_mu);
    munmap(a.map, a.maplen);
    free(a.adv);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t n) { ENTER("cuMemAlloc_v2"); return alloc_common((void **)dptr, n, A_DEVICE); }
CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t n, unsigned int flags) {
    ENTER("cuMemAllocManaged");
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
    return alloc_common((void **)dptr, n, A_MANAGED);
}
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr p) { ENTER("cuMemFree_v2"); return free_common(p, 0); }
CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t n, unsigned int flags) {
    ENTER("cuMemHostAlloc");
    if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_common(pp, n, A_HOST);
}
CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t n) { ENTER("cuMemAllocHost_v2"); return alloc_common(pp, n, A_HOST); }
CUresult CUDAAPI cuMemFreeHost(void *p) { ENTER("cuMemFreeHost"); return free_common((uintptr_t)p, 1); }

static CUresult host_register(void *p, size_t n, unsigned flags) {
    NEED_CTX();
    (void)flags;
    if (!p || !n) return CUDA_ERROR_INVALID_VALUE;
    CUresult g = unsafe_guard();
    if (g) return g;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nallocs; i++) {
        uintptr_t b = g_allocs[i].base, e = b + g_allocs[i].size;
        if ((uintptr_t)p < e && (uintptr_t)p + n > b) {
            pthread_mutex_unlock(&g_mu);
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    struct alloc a = { 0 };
    a.base = (uintptr_t)p;
    a.size = n;
    a.kind = A_REGISTERED;
    if (add_alloc_locked(a)) { pthread_mutex_unlock(&g_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    pinned_add_locked((long long)n);
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) { ENTER("cuMemHostRegister_v2"); return host_register(p, n, flags); }
CUresult CUDAAPI cuMemHostRegister(void *p, size_t n, unsigned int flags) { ENTER("cuMemHostRegister"); return host_register(p, n, flags); }
CUresult CUDAAPI cuMemHostUnregister(void *p) {
    ENTER("cuMemHostUnregister");
    NEED_CTX();
    CUresult g = unsafe_guard();
    if (g) return g;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nallocs; i++)
        if (g_allocs[i].kind == A_REGISTERED && g_allocs[i].base == (uintptr_t)p) {
            pinned_add_locked(-(long long)g_allocs[i].size);
            g_allocs[i] = g_allocs[--g_nallocs];
            pthread_mutex_unlock(&g_mu);
            return CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr p) {
    ENTER("cuMemGetAddressRange_v2");
    pthread_mutex_lock(&g_mu);
    struct alloc *a = find_alloc_locked(p);
    CUresult r = CUDA_ERROR_NOT_FOUND;
    if (a && a->kind != A_REGISTERED) {
        if (pbase) *pbase = a->base;
        if (psize) *psize = a->size;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *freeb, size_t *total) {
    ENTER("cuMemGetInfo_v2");
    NEED_CTX();
    if (total) *total = (size_t)16 << 30;
    if (freeb) *freeb = (size_t)15 << 30;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ pointer attributes */

static CUresult ptr_attr_locked(void *data, CUpointer_attribute at, uintptr_t p, int strict) {
    struct alloc *a = find_alloc_locked(p);
    if (!a && strict) return CUDA_ERROR_INVALID_VALUE;
    switch (at) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = a ? (CUcontext)&g_primary : NULL; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = !a ? 0u : (a->kind == A_DEVICE || a->kind == A_MANAGED) ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = a ? p : 0; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (a && a->kind == A_DEVICE) {
            if (strict) return CUDA_ERROR_INVALID_VALUE;
            *(void **)data = NULL;
        } else *(void **)data = a ? (void *)p : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(unsigned char *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = a ? a->id : 0; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned int *)data = a && a->kind == A_MANAGED; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = a ? 0 : -2; break;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR: *(CUdeviceptr *)data = a ? a->base : 0; break;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: *(size_t *)data = a ? a->size : 0; break;
    case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned char *)data = a != NULL; break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(void **)data = NULL; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute at, CUdeviceptr p) {
    ENTER("cuPointerGetAttribute");
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    CUresult r = ptr_attr_locked(data, at, p, 1);
    pthread_mutex_unlock(&g_mu);
    return r;
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int num, CUpointer_attribute *ats, void **data, CUdeviceptr p) {
    ENTER("cuPointerGetAttributes");
    if (!ats || !data) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&g_mu);
    for (unsigned i = 0; i < num && !r; i++)
        if (data[i]) r = ptr_attr_locked(data[i], ats[i], p, 0);
    pthread_mutex_unlock(&g_mu);
    return r;
}

/* ------------------------------------------------------------------ hints */

static CUresult managed_range_locked(uintptr_t p, size_t n, struct alloc **out) {
    struct alloc *a = find_alloc_locked(p);
    if (!a || a->kind != A_MANAGED || n == 0 || p + n > a->base + a->size) return CUDA_ERROR_INVALID_VALUE;
    *out = a;
    return CUDA_SUCCESS;
}

static CUresult check_loc(CUmemLocation loc, int allow_host) {
    switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return loc.id == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST: case CU_MEM_LOCATION_TYPE_HOST_NUMA: case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return allow_host ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult do_prefetch(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned flags, CUstream h, int ptds) {
    NEED_CTX();
    CUresult r = check_loc(loc, 1);
    if (r) return r;
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    struct alloc *a;
    r = resolve_locked(h, ptds, &s);
    if (!r) r = managed_range_locked(p, n, &a);
    if (!r && s->cap_status == CAP_ACTIVE) {
        invalidate_capture_locked(s->cap_id);
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (r) { pthread_mutex_unlock(&g_mu); return r; }
    struct op *o = calloc(1, sizeof *o);
    if (!o) { pthread_mutex_unlock(&g_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    o->kind = OP_PREFETCH;
    o->pf.ptr = P(p);
    o->pf.count = n;
    o->pf.loc_type = loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? UVMSIM_LOC_DEVICE : UVMSIM_LOC_HOST;
    o->pf.loc_id = loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? loc.id : 0;
    o->pf.stream = (void *)h;
    r = submit_locked(s, o, 0, NULL);
    pthread_mutex_unlock(&g_mu);
    return r;
}

static CUmemLocation dev_to_loc(CUdevice d) {
    CUmemLocation l;
    memset(&l, 0, sizeof l);
    if (d == CU_DEVICE_CPU) l.type = CU_MEM_LOCATION_TYPE_HOST;
    else { l.type = CU_MEM_LOCATION_TYPE_DEVICE; l.id = d; }
    return l;
}

CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags, CUstream h) { ENTER("cuMemPrefetchAsync_v2"); return do_prefetch(p, n, loc, flags, h, 0); }
CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags, CUstream h) { ENTER("cuMemPrefetchAsync_v2_ptsz"); return do_prefetch(p, n, loc, flags, h, 1); }
CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice d, CUstream h) { ENTER("cuMemPrefetchAsync"); return do_prefetch(p, n, dev_to_loc(d), 0, h, 0); }
CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr p, size_t n, CUdevice d, CUstream h) { ENTER("cuMemPrefetchAsync_ptsz"); return do_prefetch(p, n, dev_to_loc(d), 0, h, 1); }

static CUresult do_advise(CUdeviceptr p, size_t n, CUmem_advise adv, CUmemLocation loc) {
    NEED_CTX();
    int needs_loc = adv == CU_MEM_ADVISE_SET_PREFERRED_LOCATION || adv == CU_MEM_ADVISE_SET_ACCESSED_BY ||
                    adv == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
    if (adv < CU_MEM_ADVISE_SET_READ_MOSTLY || adv > CU_MEM_ADVISE_UNSET_ACCESSED_BY) return CUDA_ERROR_INVALID_VALUE;
    if (needs_loc) { CUresult r = check_loc(loc, 1); if (r) return r; }
    pthread_mutex_lock(&g_mu);
    struct alloc *a;
    CUresult r = managed_range_locked(p, n, &a);
    if (r) { pthread_mutex_unlock(&g_mu); return r; }
    size_t p0 = (p - a->base) / MIB2, p1 = (p + n - 1 - a->base) / MIB2;
    unsigned char bit = loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? 1 : 2;
    for (size_t i = p0; i <= p1 && i < a->npages; i++) {
        struct page_advice *pa = &a->adv[i];
        switch (adv) {
        case CU_MEM_ADVISE_SET_READ_MOSTLY: pa->read_mostly = 1; break;
        case CU_MEM_ADVISE_UNSET_READ_MOSTLY: pa->read_mostly = 0; break;
        case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
            pa->pref_type = loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? UVMSIM_LOC_DEVICE : UVMSIM_LOC_HOST;
            pa->pref_id = loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? loc.id : 0;
            break;
        case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: pa->pref_type = 0; pa->pref_id = 0; break;
        case CU_MEM_ADVISE_SET_ACCESSED_BY: pa->accessed_by |= bit; break;
        case CU_MEM_ADVISE_UNSET_ACCESSED_BY: pa->accessed_by &= (unsigned char)~bit; break;
        default: break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr p, size_t n, CUmem_advise adv, CUmemLocation loc) { ENTER("cuMemAdvise_v2"); return do_advise(p, n, adv, loc); }
CUresult CUDAAPI cuMemAdvise(CUdeviceptr p, size_t n, CUmem_advise adv, CUdevice d) { ENTER("cuMemAdvise"); return do_advise(p, n, adv, dev_to_loc(d)); }

static int loc_as_device(int type, int id) { return type == UVMSIM_LOC_DEVICE ? id : type == UVMSIM_LOC_HOST ? CU_DEVICE_CPU : CU_DEVICE_INVALID; }

CUresult CUDAAPI cuMemRangeGetAttribute(void *data, size_t dsz, CUmem_range_attribute at, CUdeviceptr p, size_t n) {
    ENTER("cuMemRangeGetAttribute");
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    struct alloc *a;
    CUresult r = managed_range_locked(p, n, &a);
    if (r) { pthread_mutex_unlock(&g_mu); return r; }
    size_t p0 = (p - a->base) / MIB2, p1 = (p + n - 1 - a->base) / MIB2;
    struct page_advice *f = &a->adv[p0];
    int same_pref = 1, same_pf = 1, all_rm = 1;
    unsigned char acc = 0xff;
    for (size_t i = p0; i <= p1 && i < a->npages; i++) {
        struct page_advice *pa = &a->adv[i];
        same_pref &= pa->pref_type == f->pref_type && pa->pref_id == f->pref_id;
        same_pf &= pa->last_pf_type == f->last_pf_type && pa->last_pf_id == f->last_pf_id;
        all_rm &= pa->read_mostly;
        acc &= pa->accessed_by;
    }
    int *iv = data;
    if (dsz < 4) r = CUDA_ERROR_INVALID_VALUE;
    else switch (at) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: *iv = all_rm; break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION: *iv = same_pref ? loc_as_device(f->pref_type, f->pref_id) : CU_DEVICE_INVALID; break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE: *iv = same_pref ? f->pref_type : CU_MEM_LOCATION_TYPE_INVALID; break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID: *iv = same_pref ? f->pref_id : 0; break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: *iv = same_pf ? loc_as_device(f->last_pf_type, f->last_pf_id) : CU_DEVICE_INVALID; break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE: *iv = same_pf ? f->last_pf_type : CU_MEM_LOCATION_TYPE_INVALID; break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID: *iv = same_pf ? f->last_pf_id : 0; break;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
        size_t k = 0, m = dsz / 4;
        for (size_t i = 0; i < m; i++) iv[i] = CU_DEVICE_INVALID;
        if ((acc != 0xff) && (acc & 1) && k < m) iv[k++] = 0;
        break;
    }
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

/* ------------------------------------------------------------------ streams */

static CUresult stream_create(CUstream *ph, unsigned flags, int prio) {
    NEED_CTX();
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    struct stream *s = stream_new_locked(S_USER, flags, prio);
    if (!s) { pthread_mutex_unlock(&g_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    s->key = s;
    HASH_ADD_PTR(g_streams_live, key, s);
    g_live_streams++;
    pthread_mutex_unlock(&g_mu);
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
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    HASH_FIND_PTR(g_streams_live, &h, s);
    if (!s) { pthread_mutex_unlock(&g_mu); return CUDA_ERROR_INVALID_HANDLE; }
    if (s->cap_status != CAP_NONE) invalidate_capture_locked(s->cap_id);
    HASH_DEL(g_streams_live, s);
    g_live_streams--;
    s->destroyed = 1; /* the worker drains what is queued, then exits */
    pthread_cond_broadcast(&g_cv);
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy_v2(CUstream h) { ENTER("cuStreamDestroy_v2"); return stream_destroy(h); }
CUresult CUDAAPI cuStreamDestroy(CUstream h) { ENTER("cuStreamDestroy"); return stream_destroy(h); }

static CUresult stream_sync(CUstream h, int ptds, int query) {
    NEED_CTX();
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    CUresult r = resolve_locked(h, ptds, &s);
    if (!r && s->cap_status != CAP_NONE) {
        invalidate_capture_locked(s->cap_id);
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (!r && s->kind == S_LEGACY) {
        if (prohibited_locked(1)) r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        else if (legacy_implicit_locked()) r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    if (!r) {
        if (query) r = stream_idle_locked(s) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
        else sync_stream_locked(s);
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream h) { ENTER("cuStreamSynchronize"); return stream_sync(h, 0, 0); }
CUresult CUDAAPI cuStreamSynchronize_ptsz(CUstream h) { ENTER("cuStreamSynchronize_ptsz"); return stream_sync(h, 1, 0); }
CUresult CUDAAPI cuStreamQuery(CUstream h) { ENTER("cuStreamQuery"); return stream_sync(h, 0, 1); }
CUresult CUDAAPI cuStreamQuery_ptsz(CUstream h) { ENTER("cuStreamQuery_ptsz"); return stream_sync(h, 1, 1); }

static CUresult stream_get(CUstream h, int ptds, unsigned *flags, int *prio) {
    NEED_CTX();
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    CUresult r = resolve_locked(h, ptds, &s);
    if (!r) {
        if (flags) *flags = s->flags;
        if (prio) *prio = s->prio;
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}
CUresult CUDAAPI cuStreamGetFlags(CUstream h, unsigned int *f) { ENTER("cuStreamGetFlags"); if (!f) return CUDA_ERROR_INVALID_VALUE; return stream_get(h, 0, f, NULL); }
CUresult CUDAAPI cuStreamGetFlags_ptsz(CUstream h, unsigned int *f) { ENTER("cuStreamGetFlags_ptsz"); if (!f) return CUDA_ERROR_INVALID_VALUE; return stream_get(h, 1, f, NULL); }
CUresult CUDAAPI cuStreamGetPriority(CUstream h, int *p) { ENTER("cuStreamGetPriority"); if (!p) return CUDA_ERROR_INVALID_VALUE; return stream_get(h, 0, NULL, p); }
CUresult CUDAAPI cuStreamGetPriority_ptsz(CUstream h, int *p) { ENTER("cuStreamGetPriority_ptsz"); if (!p) return CUDA_ERROR_INVALID_VALUE; return stream_get(h, 1, NULL, p); }

static struct event *find_event_locked(CUevent e) {
    struct event *ev;
    HASH_FIND_PTR(g_events, &e, ev);
    return ev;
}

static struct stream *capture_origin_locked(unsigned long long id) {
    for (struct stream *t = g_streams_all; t; t = t->all_next)
        if (t->cap_status != CAP_NONE && t->cap_id == id) return t;
    return NULL;
}

static CUresult stream_wait_event(CUstream h, CUevent e, unsigned flags, int ptds) {
    NEED_CTX();
    (void)flags;
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    CUresult r = resolve_locked(h, ptds, &s);
    struct event *ev = r ? NULL : find_event_locked(e);
    if (!r && !ev) r = CUDA_ERROR_INVALID_HANDLE;
    if (r) { pthread_mutex_unlock(&g_mu); return r; }
    struct stream *origin = ev->captured ? capture_origin_locked(ev->cap_id) : NULL;
    if (origin && s->cap_status == CAP_NONE) {
        /* fork into the capture: s joins the capture sequence of the event */
        s->cap_status = origin->cap_status;
        s->cap_id = origin->cap_id;
        s->cap_mode = origin->cap_mode;
        s->cap_thread = origin->cap_thread;
        s->cap_nodes++;
        pthread_mutex_unlock(&g_mu);
        return CUDA_SUCCESS;
    }
    struct op *o = calloc(1, sizeof *o);
    if (!o) { pthread_mutex_unlock(&g_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    o->kind = OP_NOP;
    struct dep d = { ev->rec_stream, ev->rec_seq };
    r = submit_locked(s, o, 0, (ev->rec_stream && !ev->captured) ? &d : NULL);
    pthread_mutex_unlock(&g_mu);
    return r;
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream h, CUevent e, unsigned int f) { ENTER("cuStreamWaitEvent"); return stream_wait_event(h, e, f, 0); }
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int f) { ENTER("cuStreamWaitEvent_ptsz"); return stream_wait_event(h, e, f, 1); }

static CUresult launch_host_func(CUstream h, CUhostFn fn, void *ud, int ptds) {
    NEED_CTX();
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    CUresult r = resolve_locked(h, ptds, &s);
    if (r) { pthread_mutex_unlock(&g_mu); return r; }
    struct op *o = calloc(1, sizeof *o);
    if (!o) { pthread_mutex_unlock(&g_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    o->kind = OP_HOSTFN;
    o->fn = fn;
    o->ud = ud;
    r = submit_locked(s, o, 0, NULL);
    pthread_mutex_unlock(&g_mu);
    return r;
}
CUresult CUDAAPI cuLaunchHostFunc(CUstream h, CUhostFn fn, void *ud) { ENTER("cuLaunchHostFunc"); return launch_host_func(h, fn, ud, 0); }
CUresult CUDAAPI cuLaunchHostFunc_ptsz(CUstream h, CUhostFn fn, void *ud) { ENTER("cuLaunchHostFunc_ptsz"); return launch_host_func(h, fn, ud, 1); }

/* ------------------------------------------------------------------ events */

CUresult CUDAAPI cuEventCreate(CUevent *ph, unsigned int flags) {
    ENTER("cuEventCreate");
    NEED_CTX();
    if (!ph || (flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    struct event *ev = calloc(1, sizeof *ev);
    if (!ev) return CUDA_ERROR_OUT_OF_MEMORY;
    ev->key = ev;
    ev->magic = EVENT_MAGIC;
    ev->flags = flags;
    ev->alive = 1;
    ev->refs = 1;
    pthread_mutex_lock(&g_mu);
    HASH_ADD_PTR(g_events, key, ev);
    g_live_events++;
    pthread_mutex_unlock(&g_mu);
    *ph = (CUevent)ev;
    return CUDA_SUCCESS;
}

static CUresult event_record(CUevent e, CUstream h, int ptds) {
    NEED_CTX();
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    CUresult r = resolve_locked(h, ptds, &s);
    struct event *ev = r ? NULL : find_event_locked(e);
    if (!r && !ev) r = CUDA_ERROR_INVALID_HANDLE;
    struct op *o = r ? NULL : calloc(1, sizeof *o);
    if (!r && !o) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r) { pthread_mutex_unlock(&g_mu); return r; }
    o->kind = OP_EVENT;
    o->ev = ev;
    ev->refs++;
    r = submit_locked(s, o, 0, NULL);
    pthread_mutex_unlock(&g_mu);
    return r;
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream h) { ENTER("cuEventRecord"); return event_record(e, h, 0); }
CUresult CUDAAPI cuEventRecord_ptsz(CUevent e, CUstream h) { ENTER("cuEventRecord_ptsz"); return event_record(e, h, 1); }
CUresult CUDAAPI cuEventRecordWithFlags(CUevent e, CUstream h, unsigned int f) { ENTER("cuEventRecordWithFlags"); (void)f; return event_record(e, h, 0); }
CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent e, CUstream h, unsigned int f) { ENTER("cuEventRecordWithFlags_ptsz"); (void)f; return event_record(e, h, 1); }

static int event_done_locked(struct event *ev) { return !ev->rec_stream || ev->rec_stream->done_seq >= ev->rec_seq; }

static CUresult event_wait(CUevent e, int query) {
    NEED_CTX();
    pthread_mutex_lock(&g_mu);
    struct event *ev = find_event_locked(e);
    CUresult r = CUDA_SUCCESS;
    if (!ev) r = CUDA_ERROR_INVALID_HANDLE;
    else if (ev->captured) r = CUDA_ERROR_CAPTURED_EVENT;
    else if (query) r = event_done_locked(ev) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    else {
        ev->refs++;
        while (!event_done_locked(ev)) pthread_cond_wait(&g_cv, &g_mu);
        event_unref_locked(ev);
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}
CUresult CUDAAPI cuEventQuery(CUevent e) { ENTER("cuEventQuery"); return event_wait(e, 1); }
CUresult CUDAAPI cuEventSynchronize(CUevent e) { ENTER("cuEventSynchronize"); return event_wait(e, 0); }

static CUresult event_destroy(CUevent e) {
    NEED_CTX();
    pthread_mutex_lock(&g_mu);
    struct event *ev = find_event_locked(e);
    if (!ev) { pthread_mutex_unlock(&g_mu); return CUDA_ERROR_INVALID_HANDLE; }
    HASH_DEL(g_events, ev);
    g_live_events--;
    ev->alive = 0;
    event_unref_locked(ev);
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy_v2(CUevent e) { ENTER("cuEventDestroy_v2"); return event_destroy(e); }
CUresult CUDAAPI cuEventDestroy(CUevent e) { ENTER("cuEventDestroy"); return event_destroy(e); }

static CUresult event_elapsed(float *ms, CUevent a, CUevent b) {
    NEED_CTX();
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    struct event *ea = find_event_locked(a), *eb = find_event_locked(b);
    CUresult r = CUDA_SUCCESS;
    if (!ea || !eb || !ea->rec_stream || !eb->rec_stream || ((ea->flags | eb->flags) & CU_EVENT_DISABLE_TIMING))
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (ea->captured || eb->captured) r = CUDA_ERROR_CAPTURED_EVENT;
    else if (!event_done_locked(ea) || !event_done_locked(eb)) r = CUDA_ERROR_NOT_READY;
    else *ms = (float)(eb->t_ms - ea->t_ms);
    pthread_mutex_unlock(&g_mu);
    return r;
}
CUresult CUDAAPI cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { ENTER("cuEventElapsedTime_v2"); return event_elapsed(ms, a, b); }
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent a, CUevent b) { ENTER("cuEventElapsedTime"); return event_elapsed(ms, a, b); }

/* ------------------------------------------------------------------ capture */

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, int ptds) {
    NEED_CTX();
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    CUresult r = resolve_locked(h, ptds, &s);
    if (!r && s->kind == S_LEGACY) r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!r && s->cap_status != CAP_NONE) r = CUDA_ERROR_ILLEGAL_STATE;
    if (!r) {
        s->cap_status = CAP_ACTIVE;
        s->cap_mode = mode;
        s->cap_thread = pthread_self();
        s->cap_id = g_next_cap_id++;
        s->cap_nodes = 0;
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}
CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode m) { ENTER("cuStreamBeginCapture_v2"); return begin_capture(h, m, 0); }
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode m) { ENTER("cuStreamBeginCapture_v2_ptsz"); return begin_capture(h, m, 1); }
CUresult CUDAAPI cuStreamBeginCapture(CUstream h) { ENTER("cuStreamBeginCapture"); return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, 0); }
CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream h) { ENTER("cuStreamBeginCapture_ptsz"); return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, 1); }

static CUresult end_capture(CUstream h, CUgraph *pg, int ptds) {
    NEED_CTX();
    if (!pg) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    CUresult r = resolve_locked(h, ptds, &s);
    if (!r && s->cap_status == CAP_NONE) r = CUDA_ERROR_ILLEGAL_STATE;
    if (!r && s->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(s->cap_thread, pthread_self()))
        r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    if (r) { pthread_mutex_unlock(&g_mu); return r; }
    int invalid = s->cap_status == CAP_INVALIDATED;
    unsigned long long id = s->cap_id, nodes = 0;
    for (struct stream *t = g_streams_all; t; t = t->all_next)
        if (t->cap_status != CAP_NONE && t->cap_id == id) {
            nodes += t->cap_nodes;
            t->cap_status = CAP_NONE;
            t->cap_nodes = 0;
        }
    pthread_mutex_unlock(&g_mu);
    *pg = NULL;
    if (invalid) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    struct graph *g = calloc(1, sizeof *g);
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    g->magic = GRAPH_MAGIC;
    g->nodes = nodes;
    *pg = (CUgraph)g;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamEndCapture(CUstream h, CUgraph *pg) { ENTER("cuStreamEndCapture"); return end_capture(h, pg, 0); }
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream h, CUgraph *pg) { ENTER("cuStreamEndCapture_ptsz"); return end_capture(h, pg, 1); }

static CUresult capture_info(CUstream h, int ptds, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                             const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps, int is_query) {
    NEED_CTX();
    if (!st) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_mu);
    struct stream *s;
    CUresult r = resolve_locked(h, ptds, &s);
    if (!r && s->kind == S_LEGACY) {
        for (struct stream *t = g_streams_all; t; t = t->all_next)
            if (t->cap_status != CAP_NONE && is_blocking(t)) r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    if (!r) {
        *st = s->cap_status == CAP_ACTIVE ? CU_STREAM_CAPTURE_STATUS_ACTIVE
              : s->cap_status == CAP_INVALIDATED ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_NONE;
        if (!is_query) {
            if (id) *id = s->cap_status ? s->cap_id : 0;
            if (g) *g = NULL;
            if (deps) *deps = NULL;
            if (edges) *edges = NULL;
            if (ndeps) *ndeps = 0;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}
CUresult CUDAAPI cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st) { ENTER("cuStreamIsCapturing"); return capture_info(h, 0, st, NULL, NULL, NULL, NULL, NULL, 1); }
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *st) { ENTER("cuStreamIsCapturing_ptsz"); return capture_info(h, 1, st, NULL, NULL, NULL, NULL, NULL, 1); }
CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id) { ENTER("cuStreamGetCaptureInfo"); return capture_info(h, 0, st, id, NULL, NULL, NULL, NULL, 0); }
CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id) { ENTER("cuStreamGetCaptureInfo_ptsz"); return capture_info(h, 1, st, id, NULL, NULL, NULL, NULL, 0); }
CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d, size_t *n) { ENTER("cuStreamGetCaptureInfo_v2"); return capture_info(h, 0, st, id, g, d, NULL, n, 0); }
CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d, size_t *n) { ENTER("cuStreamGetCaptureInfo_v2_ptsz"); return capture_info(h, 1, st, id, g, d, NULL, n, 0); }
CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d, const CUgraphEdgeData **e, size_t *n) { ENTER("cuStreamGetCaptureInfo_v3"); return capture_info(h, 0, st, id, g, d, e, n, 0); }
CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d, const CUgraphEdgeData **e, size_t *n) { ENTER("cuStreamGetCaptureInfo_v3_ptsz"); return capture_info(h, 1, st, id, g, d, e, n, 0); }

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
    ENTER("cuThreadExchangeStreamCaptureMode");
    if (!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                  *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = tl_cap_mode;
    tl_cap_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
    ENTER("cuGraphDestroy");
    struct graph *gr = (struct graph *)g;
    if (!gr || gr->magic != GRAPH_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    gr->magic = 0;
    free(gr);
    return CUDA_SUCCESS;
}

/* Graphs are dummies: the node count is what the capture recorded; an executable graph can be
 * created and destroyed, never launched (its work would be kernels and copies we did not keep). */
struct graph_exec { int magic; };
#define GRAPH_EXEC_MAGIC 0x47455845
CUresult CUDAAPI cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n) {
    ENTER("cuGraphGetNodes");
    struct graph *gr = (struct graph *)g;
    if (!gr || gr->magic != GRAPH_MAGIC || !n) return CUDA_ERROR_INVALID_VALUE;
    if (nodes)
        for (size_t i = 0; i < *n && i < gr->nodes; i++) nodes[i] = (CUgraphNode)((char *)gr + 1 + i);
    if (!nodes || *n > gr->nodes) *n = (size_t)gr->nodes;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g, unsigned long long flags) {
    ENTER("cuGraphInstantiateWithFlags");
    (void)flags;
    struct graph *gr = (struct graph *)g;
    if (!pe || !gr || gr->magic != GRAPH_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    struct graph_exec *e = calloc(1, sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = GRAPH_EXEC_MAGIC;
    *pe = (CUgraphExec)e;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec ge) {
    ENTER("cuGraphExecDestroy");
    struct graph_exec *e = (struct graph_exec *)ge;
    if (!e || e->magic != GRAPH_EXEC_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    e->magic = 0;
    free(e);
    return CUDA_SUCCESS;
}
static CUresult graph_launch(CUgraphExec ge) {
    static atomic_int once;
    struct graph_exec *e = (struct graph_exec *)ge;
    if (!e || e->magic != GRAPH_EXEC_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    if (!atomic_exchange(&once, 1)) fprintf(stderr, "uvmsim: cuGraphLaunch is not simulated: graphs cannot be replayed\n");
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec ge, CUstream s) { ENTER("cuGraphLaunch"); (void)s; return graph_launch(ge); }
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec ge, CUstream s) { ENTER("cuGraphLaunch_ptsz"); (void)s; return graph_launch(ge); }

/* ------------------------------------------------------------------ device and context */

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
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
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
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pc, CUdevice d) {
    ENTER("cuDevicePrimaryCtxRetain");
    if (!pc) return CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_mu);
    g_primary_refs++;
    pthread_mutex_unlock(&g_mu);
    *pc = (CUcontext)&g_primary;
    return CUDA_SUCCESS;
}
static CUresult primary_release(CUdevice d) {
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_mu);
    if (g_primary_refs > 0) g_primary_refs--;
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice d) { ENTER("cuDevicePrimaryCtxRelease_v2"); return primary_release(d); }
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d) { ENTER("cuDevicePrimaryCtxRelease"); return primary_release(d); }
CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active) {
    ENTER("cuDevicePrimaryCtxGetState");
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    if (d != 0) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_mu);
    *active = g_primary_refs > 0;
    pthread_mutex_unlock(&g_mu);
    *flags = 0;
    return CUDA_SUCCESS;
}

/* Called by the generated stubs for every driver export not defined here (libcuda_exports.txt). */
__attribute__((visibility("hidden"))) CUresult uvmsim_drv_not_simulated(const char *name, atomic_int *once) {
    if (!atomic_exchange(once, 1)) fprintf(stderr, "uvmsim: %s is not simulated\n", name);
    if (g_child_poisoned) return CUDA_ERROR_NOT_INITIALIZED;
    unsigned f = uvmsim_hook_enter(name);
    return f ? (CUresult)f : CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pc) { ENTER("cuCtxGetCurrent"); if (!pc) return CUDA_ERROR_INVALID_VALUE; *pc = tl_ctx; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext c) {
    ENTER("cuCtxSetCurrent");
    if (c && c != (CUcontext)&g_primary) return CUDA_ERROR_INVALID_CONTEXT;
    tl_ctx = c;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxGetDevice(CUdevice *d) { ENTER("cuCtxGetDevice"); NEED_CTX(); if (!d) return CUDA_ERROR_INVALID_VALUE; *d = 0; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSynchronize(void) {
    ENTER("cuCtxSynchronize");
    NEED_CTX();
    pthread_mutex_lock(&g_mu);
    if (any_capture_locked()) {
        for (struct stream *t = g_streams_all; t; t = t->all_next)
            if (t->cap_status != CAP_NONE) invalidate_capture_locked(t->cap_id);
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    for (struct stream *t = g_streams_all; t; t = t->all_next) wait_stream_locked(t, t->enq_seq);
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

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

/* ------------------------------------------------------------------ cuGetProcAddress */

CUresult CUDAAPI cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st);
CUresult CUDAAPI cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags);

struct proc { const char *name; int minver; void *fn, *fn_ptds; };
#define R(n, v, f) { n, v, (void *)(f), NULL }
#define RP(n, v, f, fp) { n, v, (void *)(f), (void *)(fp) }
/* rows of one name: highest minver first */
static const struct proc g_procs[] = {
    R("cuGetProcAddress", 12000, cuGetProcAddress_v2), R("cuGetProcAddress", 11030, cuGetProcAddress),
    R("cuInit", 2000, cuInit), R("cuDriverGetVersion", 2020, cuDriverGetVersion),
    R("cuDeviceGet", 2000, cuDeviceGet), R("cuDeviceGetCount", 2000, cuDeviceGetCount),
    R("cuDeviceGetName", 2000, cuDeviceGetName), R("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    R("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    R("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    R("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2), R("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    R("cuCtxGetCurrent", 4000, cuCtxGetCurrent), R("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    R("cuCtxGetDevice", 2000, cuCtxGetDevice), R("cuCtxSynchronize", 2000, cuCtxSynchronize),
    R("cuGetErrorString", 6000, cuGetErrorString), R("cuGetErrorName", 6000, cuGetErrorName),
    R("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    R("cuMemAlloc", 3020, cuMemAlloc_v2), R("cuMemFree", 3020, cuMemFree_v2),
    R("cuMemAllocManaged", 6000, cuMemAllocManaged),
    R("cuMemHostAlloc", 2020, cuMemHostAlloc), R("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    R("cuMemFreeHost", 2000, cuMemFreeHost),
    R("cuMemHostRegister", 6050, cuMemHostRegister_v2), R("cuMemHostRegister", 4000, cuMemHostRegister),
    R("cuMemHostUnregister", 4000, cuMemHostUnregister),
    R("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    R("cuPointerGetAttribute", 4000, cuPointerGetAttribute), R("cuPointerGetAttributes", 7000, cuPointerGetAttributes),
    RP("cuMemcpy", 4000, cuMemcpy, cuMemcpy_ptds), RP("cuMemcpyAsync", 4000, cuMemcpyAsync, cuMemcpyAsync_ptsz),
    RP("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds), R("cuMemcpyDtoH", 2000, cuMemcpyDtoH),
    RP("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz), R("cuMemcpyDtoHAsync", 2000, cuMemcpyDtoHAsync),
    RP("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds), R("cuMemcpyHtoD", 2000, cuMemcpyHtoD),
    RP("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz), R("cuMemcpyHtoDAsync", 2000, cuMemcpyHtoDAsync),
    RP("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds), R("cuMemcpyDtoD", 2000, cuMemcpyDtoD),
    RP("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz), R("cuMemcpyDtoDAsync", 3000, cuMemcpyDtoDAsync),
    RP("cuMemcpy2D", 3020, cuMemcpy2D_v2, cuMemcpy2D_v2_ptds), RP("cuMemcpy2DAsync", 3020, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz),
    RP("cuMemsetD8", 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds), RP("cuMemsetD16", 3020, cuMemsetD16_v2, cuMemsetD16_v2_ptds),
    RP("cuMemsetD32", 3020, cuMemsetD32_v2, cuMemsetD32_v2_ptds),
    RP("cuMemsetD8Async", 3020, cuMemsetD8Async, cuMemsetD8Async_ptsz), RP("cuMemsetD16Async", 3020, cuMemsetD16Async, cuMemsetD16Async_ptsz),
    RP("cuMemsetD32Async", 3020, cuMemsetD32Async, cuMemsetD32Async_ptsz),
    RP("cuMemPrefetchAsync", 12020, cuMemPrefetchAsync_v2, cuMemPrefetchAsync_v2_ptsz), RP("cuMemPrefetchAsync", 8000, cuMemPrefetchAsync, cuMemPrefetchAsync_ptsz),
    R("cuMemAdvise", 12020, cuMemAdvise_v2), R("cuMemAdvise", 8000, cuMemAdvise),
    R("cuMemRangeGetAttribute", 8000, cuMemRangeGetAttribute),
    R("cuStreamCreate", 2000, cuStreamCreate), R("cuStreamCreateWithPriority", 5050, cuStreamCreateWithPriority),
    R("cuStreamDestroy", 4000, cuStreamDestroy_v2), R("cuStreamDestroy", 2000, cuStreamDestroy),
    RP("cuStreamSynchronize", 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
    RP("cuStreamQuery", 2000, cuStreamQuery, cuStreamQuery_ptsz),
    RP("cuStreamGetFlags", 5050, cuStreamGetFlags, cuStreamGetFlags_ptsz),
    RP("cuStreamGetPriority", 5050, cuStreamGetPriority, cuStreamGetPriority_ptsz),
    RP("cuStreamWaitEvent", 3020, cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
    RP("cuLaunchHostFunc", 10000, cuLaunchHostFunc, cuLaunchHostFunc_ptsz),
    R("cuEventCreate", 2000, cuEventCreate),
    RP("cuEventRecord", 2000, cuEventRecord, cuEventRecord_ptsz),
    RP("cuEventRecordWithFlags", 11010, cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz),
    R("cuEventQuery", 2000, cuEventQuery), R("cuEventSynchronize", 2000, cuEventSynchronize),
    R("cuEventDestroy", 4000, cuEventDestroy_v2), R("cuEventDestroy", 2000, cuEventDestroy),
    R("cuEventElapsedTime", 12080, cuEventElapsedTime_v2), R("cuEventElapsedTime", 2000, cuEventElapsedTime),
    RP("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz),
    RP("cuStreamBeginCapture", 10000, cuStreamBeginCapture, cuStreamBeginCapture_ptsz),
    RP("cuStreamEndCapture", 10000, cuStreamEndCapture, cuStreamEndCapture_ptsz),
    RP("cuStreamIsCapturing", 10000, cuStreamIsCapturing, cuStreamIsCapturing_ptsz),
    RP("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo_v3_ptsz),
    RP("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2, cuStreamGetCaptureInfo_v2_ptsz),
    RP("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo, cuStreamGetCaptureInfo_ptsz),
    R("cuThreadExchangeStreamCaptureMode", 10010, cuThreadExchangeStreamCaptureMode),
    R("cuGraphDestroy", 10000, cuGraphDestroy),
    R("cuGraphGetNodes", 10000, cuGraphGetNodes), R("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    R("cuGraphExecDestroy", 10000, cuGraphExecDestroy), RP("cuGraphLaunch", 10000, cuGraphLaunch, cuGraphLaunch_ptsz),
    R("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
};

static CUresult proc_lookup(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st) {
    if (!sym || !pfn || (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        return CUDA_ERROR_INVALID_VALUE;
    int known = 0;
    for (size_t i = 0; i < sizeof g_procs / sizeof g_procs[0]; i++) {
        if (strcmp(g_procs[i].name, sym)) continue;
        known = 1;
        if (ver < g_procs[i].minver) continue;
        int ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && g_procs[i].fn_ptds;
        *pfn = ptds ? g_procs[i].fn_ptds : g_procs[i].fn;
        if (st) *st = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    *pfn = NULL;
    if (st) *st = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}
CUresult CUDAAPI cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st) {
    ENTER("cuGetProcAddress_v2");
    return proc_lookup(sym, pfn, ver, flags, st);
}
CUresult CUDAAPI cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags) {
    ENTER("cuGetProcAddress");
    return proc_lookup(sym, pfn, ver, flags, NULL);
}

/* ------------------------------------------------------------------ test control API (uvmsim.h) */

void uvmsim_reset(void) {
    pthread_mutex_lock(&g_cnt_mu);
    struct counter *c, *tmp;
    HASH_ITER(hh, g_counters, c, tmp) {
        c->calls = 0;
        while (c->faults) {
            struct fault *f = c->faults;
            c->faults = f->next;
            free(f);
        }
    }
    pthread_mutex_unlock(&g_cnt_mu);
    pthread_mutex_lock(&g_mu);
    g_bytes = g_copies = 0;
    g_pf_len = 0;
    g_pinned_peak = g_pinned;
    pthread_mutex_unlock(&g_mu);
}

#define GETTER(fn, var)                                                                                \
    unsigned long long fn(void) {                                                                      \
        pthread_mutex_lock(&g_mu);                                                                     \
        unsigned long long v_ = var;                                                                   \
        pthread_mutex_unlock(&g_mu);                                                                   \
        return v_;                                                                                     \
    }
GETTER(uvmsim_bytes_copied, g_bytes)
GETTER(uvmsim_copies, g_copies)
GETTER(uvmsim_pinned_bytes, g_pinned)
GETTER(uvmsim_pinned_peak, g_pinned_peak)
GETTER(uvmsim_live_streams, g_live_streams)
GETTER(uvmsim_live_events, g_live_events)

size_t uvmsim_prefetch_log(struct uvmsim_prefetch *out, size_t max) {
    pthread_mutex_lock(&g_mu);
    size_t n = g_pf_len;
    for (size_t i = 0; i < n && i < max && out; i++) out[i] = g_pf_log[i];
    pthread_mutex_unlock(&g_mu);
    return n;
}

int uvmsim_advice(const void *ptr, int advice) {
    int r = -1;
    pthread_mutex_lock(&g_mu);
    struct alloc *a = find_alloc_locked((uintptr_t)ptr);
    if (a && a->kind == A_MANAGED) {
        struct page_advice *pa = &a->adv[((uintptr_t)ptr - a->base) / MIB2];
        switch (advice) {
        case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: r = pa->pref_type; break;
        case CU_MEM_ADVISE_SET_ACCESSED_BY: r = pa->accessed_by != 0; break;
        case CU_MEM_ADVISE_SET_READ_MOSTLY: r = pa->read_mostly; break;
        default: r = -1; break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return r;
}

void uvmsim_set_op_delay_us(unsigned us) { atomic_store(&g_op_delay_us, us); }
