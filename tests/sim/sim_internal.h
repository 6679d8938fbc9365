/* sim_internal.h: what the simulated driver's files (sim_*.c) share: headers, object types, the shared
 * state and helpers (all hidden, prefixed sim_), and the ENTER / NEED_CTX prologues. Not installed. */
#ifndef UVMSIM_SIM_INTERNAL_H
#define UVMSIM_SIM_INTERNAL_H

#define __CUDA_API_VERSION_INTERNAL 1 /* declare every legacy, _v2, _ptds and _ptsz form */
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#pragma GCC visibility push(default)
#include <cuda.h>
#include "uvmsim.h"
unsigned uvmsim_hook_enter(const char *fn);
void uvmsim_rt_register(const void *addr);
/* Kernel launches (sim_kernels.c), called by the simulated runtimes: a launch of the kernel named
 * `mangled` (NULL when unknown) on stream h, through the runtime entry point `entry`; the name of a
 * handle the runtime handed out (so a driver launch of it can be named). */
unsigned uvmsim_kernel_launch(const char *entry, const void *handle, const char *mangled, void **args, CUstream h, int ptds);
void uvmsim_kernel_name(const void *handle, const char *mangled);
#pragma GCC visibility pop

#include <uthash.h>

#define SIM_DRIVER_VERSION 13000
#define MIB2 ((size_t)2 << 20)

/* ------------------------------------------------------------------ object types */

struct fault { unsigned long long at; int error; struct fault *next; };
struct counter { char *name; unsigned long long calls; struct fault *faults; UT_hash_handle hh; };

/* One primary context per device (UVMSIM_DEVICES of them); the only contexts there are. peers: bit p set
 * once cuCtxEnablePeerAccess / cudaDeviceEnablePeerAccess made device p's memory reachable from it. */
#define SIM_MAX_DEVICES 64
struct sim_ctx { int magic; int dev; unsigned long long peers; };

enum akind { A_DEVICE = 1, A_MANAGED, A_HOST, A_REGISTERED };
/* Advice is kept per 4 KiB page, as the UVM driver keeps it (its policy ioctls take page-aligned
 * ranges and split VA ranges at page boundaries: open-gpu-kernel-modules, uvm_api_range_type_check),
 * rounded outwards: two tensors a caching allocator carved out of one segment keep their own. */
#define ADV_PAGE ((size_t)4096)
/* accessed_by: bit d for device d, ADV_HOST_BIT for the CPU. */
#define ADV_HOST_BIT (1ull << 63)
struct page_advice { unsigned char pref_type, read_mostly, last_pf_type; int pref_id, last_pf_id; unsigned long long accessed_by; };
struct alloc;
/* First and last advice page of [p, p + n) inside a (callers clamp to a->nadv). */
#define ADV_FIRST(a, p) (((uintptr_t)(p) - (a)->base) / ADV_PAGE)
#define ADV_LAST(a, p, n) (((uintptr_t)(p) + (n) - 1 - (a)->base) / ADV_PAGE)
struct alloc {
    uintptr_t base;
    int global;         /* managed: attached globally (CU_MEM_ATTACH_GLOBAL) */
    int in_va;          /* managed: carved out of the reserved managed range */
    size_t size;
    void *map;          /* mmap start (NULL for registered memory) */
    size_t maplen;
    int kind;
    int dev;            /* the device whose context was current when it was made */
    unsigned flags;     /* page-locked: the flags it was allocated or registered with */
    unsigned long long id;
    struct page_advice *adv; /* managed only: one per ADV_PAGE from base */
    size_t nadv;
    size_t npages;           /* 2 MiB blocks (residency) */
    struct block_state *res; /* managed only: residency and protection per 2 MiB page (sim_residency.c) */
};

/* Memory class of a pointer as the copy engine sees it. */
enum mclass { M_PAGEABLE = 0, M_PINNED, M_DEVICE, M_MANAGED };

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
    uint64_t value;    /* memset: the element's bit pattern (esize 1, 2, 4 or 8 bytes) */
    int esize;
    CUhostFn fn;
    void *ud;
    struct event *ev;
    struct uvmsim_prefetch pf;
    int dev;           /* its stream's device (set when queued) */
    int device_work;   /* counted in sim_device_busy while queued or running */
    struct op *hf_next; /* single host-function thread's queue (UVMSIM_HOSTFN_THREADS=1) */
    int hf_done;
};

struct stream {
    void *key; /* == this, the hash key */
    int magic;
    int kind;
    int dev;   /* the device current when it was made (the legacy and per-thread streams: theirs) */
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

struct event {
    void *key;
    int magic;
    unsigned flags;
    int dev;   /* the device current when it was made */
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

#pragma GCC visibility push(hidden)

/* ------------------------------------------------------------------ switches (sim_profile.c) */

/* One per driver behaviour whose real reading is unknown or documented as "may"; README.md names the
 * source of each strict value. Read once from the environment when the driver loads. */
enum { SIM_RANGE_NONE, SIM_RANGE_EXACT, SIM_RANGE_REFUSE }; /* UVMSIM_MANAGED_RANGE values */
struct sim_switches {
    int managed_range;       /* UVMSIM_MANAGED_RANGE: how range attributes answer for managed memory */
    unsigned stream_capacity; /* UVMSIM_STREAM_CAPACITY: ops queued or running per stream; 0 = unbounded */
    int hostfn_per_stream;   /* UVMSIM_HOSTFN_THREADS=per-stream (else one thread for the context) */
    int cma;                 /* UVMSIM_CMA: concurrent managed access */
    int residency;           /* UVMSIM_RESIDENCY: managed 2 MiB blocks live on the host or the device */
    int pageable_d2h_async;  /* UVMSIM_PAGEABLE_D2H=async: such copies may return before they land */
    int capture_queries;     /* UVMSIM_CAPTURE_QUERIES=unsafe: stream and event queries and waits are
                              * potentially unsafe calls under another thread's global capture */
    int report;              /* UVMSIM_REPORT=1: one line of counters at exit */
    int devices;             /* UVMSIM_DEVICES: how many devices there are (1..SIM_MAX_DEVICES; not a
                              * fidelity switch: the profiles leave it alone) */
};
extern struct sim_switches sim_sw;
void sim_switches_load(void);

/* Counters for the report and uvmsim_stat (under sim_mu, except the atomics the fault handler bumps). */
extern unsigned long long sim_hostfns, sim_max_outstanding;
extern atomic_ullong sim_mig_to_host, sim_mig_to_device, sim_cma_violations;
/* A sticky context error (CUDA_ERROR_ILLEGAL_ADDRESS after a bad device access): every later call that
 * needs the context fails with it, host functions no longer run. uvmsim_reset clears it. */
extern atomic_int sim_sticky;

/* ------------------------------------------------------------------ residency (sim_residency.c) */

/* on_device: 0 on the host, else 1 + the device it lives on (each device its own residency). */
struct block_state { unsigned char on_device, protected_, excused; unsigned busy; };
/* Sets up residency for a new managed allocation (every block on the host); -1 when out of memory. */
int sim_res_new(struct alloc *a);
/* Around one op run by a worker: device-side access (moves blocks, counts migrations) and lifting
 * protection while the simulated device touches the bytes. */
void sim_res_op_begin_locked(struct op *o);
void sim_res_op_end_locked(struct op *o);
/* A prefetch that ran: moves its blocks (to_device: 0 the host, else 1 + the device). */
void sim_res_prefetch_locked(struct alloc *a, uintptr_t p, size_t n, int to_device);
/* Device work queued or running anywhere changed (CMA = 0 protects managed memory meanwhile). */
void sim_device_work_locked(int delta);

/* ------------------------------------------------------------------ kernels (sim_kernels.c) */

/* UVMSIM_KERNELS and UVMSIM_KERNELS_ALLOW, read once when the driver loads. */
void sim_kernels_load(void);
/* Launches so far that ran no device code (UVMSIM_KERNELS=noop; refused = 0) or that were refused
 * (refused = 1), for the report and uvmsim_stat. */
unsigned long long sim_kernels_total(int refused);
void sim_kernels_report(void);

/* ------------------------------------------------------------------ copies (sim_copy.c) */

/* Queue a fill of n elements of esize bytes (1, 2, 4 or 8) with the bit pattern v at d on stream h. */
CUresult sim_fill(CUdeviceptr d, uint64_t v, int esize, size_t n, CUstream h, int ptds);

/* ------------------------------------------------------------------ shared state (sim_core.c) */

extern struct counter *sim_counters;      /* under sim_cnt_mu */
extern pthread_mutex_t sim_cnt_mu;
/* Set in a child forked from a process that had CUDA state (see sim_core.c). */
extern int sim_child_poisoned;

extern pthread_mutex_t sim_mu; /* everything below, the allocation table and all streams/events */
extern pthread_cond_t sim_cv;

extern atomic_uint sim_op_delay_us;
extern unsigned long long sim_bytes, sim_copies, sim_pinned, sim_pinned_peak, sim_live_streams, sim_live_events;
extern struct uvmsim_prefetch *sim_pf_log;
extern size_t sim_pf_len, sim_pf_cap;

extern struct sim_ctx sim_primary[SIM_MAX_DEVICES];
extern __thread CUcontext sim_tl_ctx;
/* The device of the thread's current context (0 with none, as the runtime's default device). */
int sim_cur_dev(void);
int sim_valid_dev(int d);

struct counter *sim_counter_get(const char *fn);
int sim_from_runtime(const void *ra);

/* ------------------------------------------------------------------ allocations (sim_memory.c) */

extern struct alloc *sim_allocs;
extern size_t sim_nallocs;
void sim_memory_reset(int dev); /* releases what device dev's context allocated */
struct alloc *sim_find_alloc_locked(uintptr_t p);
int sim_mclass_locked(const void *p);

/* ------------------------------------------------------------------ streams and ops (sim_streams.c) */

extern struct stream *sim_streams_all; /* every stream ever made (never freed: deps point at them) */
extern pthread_key_t sim_ptds_key;
void sim_ptds_thread_exit(void *arg);
int sim_is_blocking(const struct stream *s);
CUresult sim_resolve_locked(CUstream h, int ptds, struct stream **out);
CUresult sim_submit_locked(struct stream *s, struct op *o, int host_sync, struct dep *extra);
void sim_wait_stream_locked(struct stream *s, uint64_t seq);

/* ------------------------------------------------------------------ events (sim_events.c) */

void sim_event_unref_locked(struct event *e);

/* ------------------------------------------------------------------ capture rules (sim_capture.c) */

void sim_invalidate_capture_locked(unsigned long long id);
int sim_prohibited_locked(int invalidate);
int sim_legacy_implicit_locked(void);
int sim_any_capture_locked(void);
CUresult sim_unsafe_guard(void);

#pragma GCC visibility pop

/* ------------------------------------------------------------------ entry-point prologues */

/* Count and fault a call by its exported name, unless a simulated runtime made it. A macro: the
 * return address must be the exported function's. */
#define ENTER(nm)                                                                                      \
    do {                                                                                               \
        const void *ra_ = __builtin_return_address(0);                                                 \
        if (sim_child_poisoned) return CUDA_ERROR_NOT_INITIALIZED;                                     \
        if (!sim_from_runtime(ra_)) {                                                                  \
            unsigned f_ = uvmsim_hook_enter(nm);                                                       \
            if (f_) return (CUresult)f_;                                                               \
        }                                                                                              \
    } while (0)

#define NEED_CTX()                                                                                     \
    do {                                                                                               \
        if (!sim_tl_ctx) return CUDA_ERROR_INVALID_CONTEXT;                                            \
        int st_ = atomic_load(&sim_sticky);                                                            \
        if (st_) return (CUresult)st_;                                                                 \
    } while (0)

#endif
