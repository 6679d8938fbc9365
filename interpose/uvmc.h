/* uvmc.h: internal declarations shared by the files of the preload library.
 * Everything here has hidden visibility; only the UVMC_INTERPOSED wrappers are exported. */
#ifndef UVMC_H
#define UVMC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Every legacy, _v2, _ptds and _ptsz driver name declared under its own spelling (no renaming
 * macros), so each interposed symbol is written as exported and type-checked against its own
 * prototype. */
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include "symbols.h"
#include "uvmc_config.h"

/* cudaGetDriverEntryPoint is deprecated in CUDA 13 but still exported and called: we interpose it
 * on purpose, so naming it is not a mistake to warn about. */
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#define UVMC_EXPORT __attribute__((visibility("default")))
#define UVMC_LIKELY(x) __builtin_expect(!!(x), 1)
#define UVMC_UNLIKELY(x) __builtin_expect(!!(x), 0)

/* The _ptds/_ptsz names are not declared unless the whole build uses per-thread default streams;
 * declare every interposed name with its prototype's type, so a wrapper of another type cannot
 * build, and check it again explicitly. Driver names are exported as they are (libcuda has no
 * symbol versions). */
#define UVMC_DECLARE(name, proto, lib) UVMC_DECLARE_##lib(name, proto)
#define UVMC_DECLARE_DRIVER(name, proto)                                                 \
    extern __typeof__(proto) name UVMC_EXPORT;                                           \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&name), __typeof__(&proto)), \
                   #name " must have the type of " #proto);
#define UVMC_DECLARE_RUNTIME(name, proto)
UVMC_INTERPOSED(UVMC_DECLARE)

/* Runtime names are exported once per CUDA major, under the runtime's own version nodes: a
 * reference to cudaMemcpyAsync@libcudart.so.12 (a CUDA 12 extension) reaches the wrapper that
 * forwards to libcudart.so.12, one to @libcudart.so.13 (or a lookup by plain name: the default)
 * the one that forwards to libcudart.so.13. An unversioned definition would satisfy both (glibc
 * accepts it for a versioned reference) and send one caller's calls to the other's runtime. The
 * files of runtime entry points are compiled once per major with UVMC_RT_MAJOR set (CMake): each
 * wrapper is defined as UVMC_RT_FN(name), preceded by UVMC_RT_SYMVER(name), and calls through the
 * table of its major, UVMC_RT_TABLE. */
#define UVMC_CAT_(a, b, c) a##b##c
#define UVMC_CAT(a, b, c) UVMC_CAT_(a, b, c)
#define UVMC_STR_(x) #x
#define UVMC_STR(x) UVMC_STR_(x)
#ifdef UVMC_RT_MAJOR
#define UVMC_RT_TABLE UVMC_CAT(uvmc_rt, UVMC_RT_MAJOR, )
#define UVMC_RT_FN(name) UVMC_CAT(uvmc_rt, UVMC_RT_MAJOR, _##name)
#if UVMC_RT_MAJOR == 13
#define UVMC_RT_VERSION "@@libcudart.so.13" /* the default: lookups by plain name get it */
#else
#define UVMC_RT_VERSION "@libcudart.so.12"
#endif
#define UVMC_RT_SYMVER(name) __asm__(".symver " UVMC_STR(UVMC_RT_FN(name)) ", " #name UVMC_RT_VERSION);
#define UVMC_DECLARE_RT(name, proto, lib) UVMC_DECLARE_RT_##lib(name, proto)
#define UVMC_DECLARE_RT_RUNTIME(name, proto)                                                       \
    extern __typeof__(proto) UVMC_RT_FN(name) UVMC_EXPORT;                                          \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&UVMC_RT_FN(name)), __typeof__(&proto)), \
                   #name " must have the type of " #proto);
#define UVMC_DECLARE_RT_DRIVER(name, proto)
UVMC_INTERPOSED(UVMC_DECLARE_RT)
#endif

/* ---- init.c: one-time initialisation and the immutable configuration ---- */

/* Written once under pthread_once, read-only afterwards. */
extern struct uvmc_config uvmc_cfg;
/* Copies below this many bytes pass straight through: SIZE_MAX when disabled. */
extern size_t uvmc_hot_threshold;

void uvmc_init_slow(void);
extern atomic_bool uvmc_initialized;
static inline void uvmc_init(void)
{
    /* An acquire load is cheaper than pthread_once on the hot path; init_slow uses pthread_once. */
    if (UVMC_UNLIKELY(!atomic_load_explicit(&uvmc_initialized, memory_order_acquire)))
        uvmc_init_slow();
}

/* Re-entrancy guard: non-zero while this thread is inside the library's own copy path, so CUDA
 * calls the library makes (or that the runtime makes beneath it) pass straight through. */
extern _Thread_local unsigned uvmc_tls_busy __attribute__((tls_model("initial-exec")));

/* ---- resolve.c: the real functions ---- */

/* The driver's interposed names (one libcuda in a process). */
struct uvmc_real {
#define UVMC_REAL_FIELD(name, proto, lib) UVMC_REAL_FIELD_##lib(name, proto)
#define UVMC_REAL_FIELD_DRIVER(name, proto) __typeof__(&proto) name;
#define UVMC_REAL_FIELD_RUNTIME(name, proto)
    UVMC_INTERPOSED(UVMC_REAL_FIELD)
};
extern struct uvmc_real uvmc_real;

/* One runtime's functions: those interposed and those called. uvmc_rt12 and uvmc_rt13 hold
 * libcudart.so.12's and .13's (found by their version node), uvmc_rt0 a runtime built without
 * symbol versions (found by plain name). */
struct uvmc_rt {
#define UVMC_RT_FIELD(name, proto, lib) UVMC_RT_FIELD_##lib(name, proto)
#define UVMC_RT_FIELD_RUNTIME(name, proto) __typeof__(&proto) name;
#define UVMC_RT_FIELD_DRIVER(name, proto)
    UVMC_INTERPOSED(UVMC_RT_FIELD)
#define UVMC_CALLED_FIELD(name) __typeof__(&name) name;
    UVMC_RUNTIME_CALLED(UVMC_CALLED_FIELD)
#undef UVMC_CALLED_FIELD
    const char *node;               /* version node and SONAME ("libcudart.so.13"); NULL: plain names */
    unsigned long long tried_at;    /* loaded-objects count at the last lookup of what is missing */
};
extern struct uvmc_rt uvmc_rt12, uvmc_rt13, uvmc_rt0;

struct uvmc_driver {
#define UVMC_DRIVER_FIELD(name, version, type, required) type name;
    UVMC_DRIVER_CALLED(UVMC_DRIVER_FIELD)
#undef UVMC_DRIVER_FIELD
};
extern struct uvmc_driver uvmc_drv;

/* Resolves every real driver function still missing; returns true when all interposed ones are
 * found. Safe to call again (a driver loaded later is found then). */
bool uvmc_resolve_real(void);
/* The runtime a wrapper of own's major calls for the runtime function at offset `field` of struct
 * uvmc_rt: own, once that function is found there (looked up again only after more objects were
 * loaded); else, for the default major (13, which also answers lookups by plain name), the runtime
 * that is there: libcudart.so.12, or one without versions. NULL when none has it. */
const struct uvmc_rt *uvmc_rt_fallback(struct uvmc_rt *own, size_t field);
/* True once the driver functions are usable. Never loads libcuda: while no CUDA driver is in the
 * process there can be no managed memory, so the caller passes the copy through and asks again. */
bool uvmc_driver_ready(void);
void uvmc_resolve_atfork_prepare(void);
void uvmc_resolve_atfork_release(void);
/* True when fn lies in this library. */
bool uvmc_is_ours(void *fn);
/* Logs once that the real `name` cannot be found; the wrapper then fails the call. */
void uvmc_report_missing(const char *name);

/* A real function pointer, read where another thread may be resolving it: an acquire load that
 * pairs with the release store of resolve.c (each is written once, NULL to found, under its lock),
 * so the plain call through it that follows happens after the write. */
#define UVMC_LOADED(field) __atomic_load_n(&(field), __ATOMIC_ACQUIRE)

/* Start of every driver wrapper: init, then make sure the real function is there, else fail the
 * call the way a missing library would (there is nothing to pass it through to). */
#define UVMC_REAL_OR_RETURN(name, missing)                                               \
    uvmc_init();                                                                         \
    if (UVMC_UNLIKELY(!UVMC_LOADED(uvmc_real.name)) && !uvmc_resolve_real() && !uvmc_real.name) { \
        uvmc_report_missing(#name);                                                      \
        return missing;                                                                  \
    }

/* The same for a runtime wrapper: `rt` is then the runtime it calls (its own major's). */
#define UVMC_RT_OR_RETURN(name, missing)                                                       \
    uvmc_init();                                                                               \
    const struct uvmc_rt *rt = &UVMC_RT_TABLE;                                                  \
    if (UVMC_UNLIKELY(!UVMC_LOADED(rt->name)) &&                                               \
        !(rt = uvmc_rt_fallback(&UVMC_RT_TABLE, offsetof(struct uvmc_rt, name)))) {           \
        uvmc_report_missing(#name);                                                            \
        return missing;                                                                        \
    }

/* ---- lazy.c: lazily pinned buffers (hostalloc.c serves them, every observed use decides) ---- */
/* A buffer is watched while its first use other than a split copy's destination is still to come.
 * The fast path sees each watched buffer's exact range: up to UVMC_LAZY_SLOTS of them in slots
 * published with release stores, any more through the table under the lock (spill). Their hull
 * (lo, hi) comes first: hi is 0 while none is watched, so the hot path pays one load and one
 * comparison. A reader learns a buffer's address only after its publication, so it sees it. */
#define UVMC_LAZY_SLOTS 8
struct uvmc_lazy_range {
    atomic_uintptr_t lo, hi; /* [lo, hi); hi 0: free */
};
extern struct uvmc_lazy_range uvmc_lazy_slots[UVMC_LAZY_SLOTS];
extern atomic_uintptr_t uvmc_lazy_lo, uvmc_lazy_hi;
extern atomic_bool uvmc_lazy_spill;
/* Lazy buffers recorded in this process, whatever their state: frees look only while non-zero. */
extern atomic_size_t uvmc_lazy_live;
/* The end of [p, p+n), saturated (a range that would wrap still overlaps what lies above p). */
static inline uintptr_t uvmc_end(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    return n > UINTPTR_MAX - a ? UINTPTR_MAX : a + (n ? n : 1);
}
/* True while no buffer is watched: a use of many ranges (a batch copy) need not look at them. */
static inline bool uvmc_lazy_none(void)
{
    return atomic_load_explicit(&uvmc_lazy_hi, memory_order_acquire) == 0;
}
/* Inside the hull: the slots, exactly (or the spill's answer, "maybe"). Out of line. */
bool uvmc_lazy_hit(uintptr_t a, uintptr_t b);
/* True when [p, p+n) may overlap a watched buffer. */
static inline bool uvmc_lazy_maybe(const void *p, size_t n)
{
    uintptr_t hi = atomic_load_explicit(&uvmc_lazy_hi, memory_order_acquire), a = (uintptr_t)p;
    if (UVMC_LIKELY(hi == 0) || a >= hi)
        return false;
    uintptr_t b = uvmc_end(p, n);
    return b > atomic_load_explicit(&uvmc_lazy_lo, memory_order_relaxed) && uvmc_lazy_hit(a, b);
}
/* The hot path's test, inline and without a call: [a, a+n) and [b, b+n) both lie outside the hull
 * of the watched buffers (while none is watched: one load and two comparisons). When it says no,
 * uvmc_lazy_maybe2 decides, out of the hot path. */
static inline bool uvmc_lazy_outside2(const void *a, const void *b, size_t n)
{
    uintptr_t hi = atomic_load_explicit(&uvmc_lazy_hi, memory_order_acquire);
    if (UVMC_LIKELY((uintptr_t)a >= hi && (uintptr_t)b >= hi))
        return true;
    uintptr_t lo = atomic_load_explicit(&uvmc_lazy_lo, memory_order_relaxed);
    return hi == 0 || (((uintptr_t)a >= hi || uvmc_end(a, n) <= lo) && ((uintptr_t)b >= hi || uvmc_end(b, n) <= lo));
}
/* The same for two ranges of n bytes (a copy's destination and source), exactly. */
static inline bool uvmc_lazy_maybe2(const void *a, const void *b, size_t n)
{
    uintptr_t hi = atomic_load_explicit(&uvmc_lazy_hi, memory_order_acquire);
    if (UVMC_LIKELY((uintptr_t)a >= hi && (uintptr_t)b >= hi))
        return false;
    return uvmc_lazy_maybe(a, n) || uvmc_lazy_maybe(b, n);
}
/* Converts every watched buffer overlapping [p, p+n) into pinned memory (slow path). rt: the use
 * came through that runtime, which may set up the thread's context first; NULL: through the
 * driver (which gets exactly what the real call gives a thread without one). Nothing when the
 * library itself is the caller (uvmc_tls_busy). */
void uvmc_lazy_touch(const void *p, size_t n, const struct uvmc_rt *rt);
/* Any use of [p, p+n) but a split copy's destination: pinned memory first. */
static inline void uvmc_lazy_use(const void *p, size_t n, const struct uvmc_rt *rt)
{
    if (UVMC_UNLIKELY(uvmc_lazy_maybe(p, n)))
        uvmc_lazy_touch(p, n, rt);
}
/* True when [p, p+n) overlaps a watched buffer: pinned memory as far as the program knows. */
bool uvmc_lazy_watched(const void *p, size_t n);
/* The copy path's own conversion of its destination (whatever uvmc_tls_busy says): true when
 * every watched buffer overlapping [p, p+n) is pinned now. */
bool uvmc_lazy_pin(const void *p, size_t n, const struct uvmc_rt *rt);
/* [p, p+n) is the destination of a split copy out of managed memory: an undecided buffer there
 * stays pageable, and watched, until its next other use. */
void uvmc_lazy_claim(const void *p, size_t n);
/* A lazily committed, huge-page-advised mapping of size bytes, recorded undecided; NULL on failure
 * (the caller then passes the request through). flags: the caller's (Portable or 0). */
void *uvmc_lazy_alloc(size_t size, unsigned flags);
/* Records the caller's [ptr, ptr+size) as registered lazily (nothing locked yet): 0; or the code
 * the real registration gives a range overlapping one already recorded (712, the same value for
 * the runtime and the driver); or -1 when it cannot be recorded (the caller passes it through).
 * runtime: cudaHostRegister (whose default registration is portable under unified addressing). */
int uvmc_lazy_register(void *ptr, size_t size, unsigned flags, bool runtime);
/* Frees an allocation of ours (after the device is done with it and unregistered, if it was
 * pinned or ever reachable by a copy the library did not split, as the real free waits): 0, or the
 * driver's CUresult with the buffer kept as it was; -1 when ptr is not one. */
int uvmc_lazy_free(void *ptr);
/* True when [p, p+n) overlaps a watched buffer: registered as far as the program knows, so a
 * registration of it gets the answer a second registration gets. */
bool uvmc_lazy_overlaps_undecided(const void *p, size_t n);
/* Forgets a lazy registration (unregistering it if it was converted): 0 or the driver's CUresult;
 * -1 when ptr is not one. */
int uvmc_lazy_unregister(void *ptr);
void uvmc_lazy_atfork_prepare(void);
void uvmc_lazy_atfork_parent(void);
void uvmc_lazy_atfork_child(void);

/* ---- the library's own driver calls run in relaxed capture mode, so no other thread's global
 * capture is invalidated by them (cuda_runtime_api.h, cudaThreadExchangeStreamCaptureMode) ---- */
struct uvmc_relaxed {
    CUstreamCaptureMode mode;
    bool exchanged;
    bool pushed; /* the copy's stream's context was pushed (classify.c); uvmc_unrelax pops it */
};
struct uvmc_relaxed uvmc_relax(void);
void uvmc_unrelax(struct uvmc_relaxed r);

/* The hot path every copy wrapper shares (runtime.c, driver.c), inline and without a call, so it
 * keeps no register across one: initialised, the real function found, below the threshold (or
 * beneath the library's own path), outside every lazy buffer's hull, stats off. Then it tail-calls
 * the real function; anything else goes to uvmc_copy_rest, out of line. */
#define UVMC_HOT_COPY(real, dstp, srcp)                                                    \
    (UVMC_LIKELY(atomic_load_explicit(&uvmc_initialized, memory_order_acquire)) &&           \
     UVMC_LIKELY((real) != NULL) && (UVMC_LIKELY(count < uvmc_hot_threshold) || uvmc_tls_busy) && \
     (UVMC_LIKELY(uvmc_lazy_outside2((dstp), (srcp), count)) || uvmc_tls_busy) && !uvmc_cfg.stats)

/* The bytes a pitched range spans from its base: conservative, a wider range only pins sooner. */
static inline size_t uvmc_pitched(size_t pitch, size_t x, size_t y, size_t width, size_t rows)
{
    return rows ? pitch * (y + rows - 1) + x + width : 0;
}

/* An observing wrapper (observe.c, runtime_observe.c): note the uses, then the real call with the
 * caller's arguments. */
#define UVMC_OBSERVE_AND_CALL(real, uses, ...) \
    uses;                                      \
    return real(__VA_ARGS__);

/* procaddr.c: an entry point the real query returned, or our wrapper of exactly that ABI. */
void *uvmc_wrap_entry_point(void *fn);

/* ---- resolve.c: glibc's dlsym, through which every lookup of the library's own goes ---- */
typedef void *(*uvmc_dlsym_fn)(void *, const char *);
uvmc_dlsym_fn uvmc_real_dlsym(void);

/* ---- log.c ---- */
void uvmc_log(enum uvmc_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define UVMC_LOG_ON(level) ((level) <= uvmc_cfg.log_level)

/* ---- pyhook.c ---- */
/* Once per process, at the first managed allocation, split copy or lazily served request: in a
 * Python with PyTorch where the uvmchunk package's hook did not run, one line saying that
 * checkpoints take the copy path (and why), unless dcp_views = off. Inline: once decided (at the
 * first call in a process without Python, once PyTorch is loaded in one with it) it costs a managed
 * allocation one relaxed load and one comparison; before that, in a Python that has not imported
 * torch yet, one step of dl_iterate_phdr. It makes no CUDA call and leaves errno as it found it. */
extern atomic_bool uvmc_pyhook_checked;
void uvmc_pyhook_check_once(void);
static inline void uvmc_pyhook_check(void)
{
    if (UVMC_UNLIKELY(!atomic_load_explicit(&uvmc_pyhook_checked, memory_order_relaxed)))
        uvmc_pyhook_check_once();
}

/* ---- stats.c ---- */
struct uvmc_stats {
    atomic_ullong split;        /* copies split into blocks */
    atomic_ullong split_bytes;
    atomic_ullong blocks;
    atomic_ullong sync_bytes;   /* bytes of the split copies that returned after landing */
    atomic_ullong sync_ns;      /* time inside those calls: their throughput */
    atomic_ullong passed_large; /* at or above threshold but not managed-to-host: passed through */
    atomic_ullong passed_small; /* below threshold (counted only when stats = on) */
    atomic_ullong hint_failures;
    atomic_ullong substituted;       /* pinned requests and registrations served lazily */
    atomic_ullong substituted_bytes; /* bytes those asked for (mapped, not committed or locked) */
    atomic_ullong converted;         /* lazy buffers pinned at their first use */
    atomic_ullong host_engine;       /* split copies that ran on the host engine */
    atomic_ullong staged;            /* split copies fed through the staging ring */
};
extern struct uvmc_stats uvmc_stats;
void uvmc_stats_print(void);
unsigned long long uvmc_now_ns(void);

/* ---- hostcopy.c: the host engine's memcpy, on the calling thread ---- */
/* Copies len bytes with up to copy_threads threads: the caller takes one part, the pool the rest;
 * returns when every byte landed. Never calls CUDA. */
void uvmc_host_memcpy(void *dst, const void *src, size_t len);
void uvmc_host_pool_atfork_prepare(void);
void uvmc_host_pool_atfork_release(void);

/* ---- staging.c: the page-locked ring a pageable destination is fed through ---- */
/* Bytes per ring slot: chunk_size, at most 16 MiB, so the ring (depth slots) stays small: the
 * library exists to keep host memory unlocked. Practitioners stage in 4-64 MiB slots. */
#define UVMC_STAGING_SLOT_MAX ((size_t)16 << 20)
static inline size_t uvmc_staging_slot(void)
{
    return uvmc_cfg.chunk_size < UVMC_STAGING_SLOT_MAX ? uvmc_cfg.chunk_size : UVMC_STAGING_SLOT_MAX;
}
/* The process's ring of depth slots, locked for the caller, or NULL (none could
 * be allocated, or another copy holds it): the copy then goes without. Allocated once, on first
 * need, in relaxed capture mode so no other thread's capture is disturbed; released at exit. */
void *uvmc_staging_acquire(void);
void uvmc_staging_release(void);
/* The ring may still be written by a copy whose blocks could not be waited for: it is dropped (not
 * freed, not reused; said once) and the next copy that needs one allocates another. */
void uvmc_staging_abandon(void);

/* ---- copy.c / classify.c / engine.c: one large copy ---- */

struct uvmc_copy;

/* How the engine reaches CUDA for one API family. Codes are cudaError_t (runtime) or CUresult
 * (driver), 0 meaning success, so each caller gets the code type and last-error state its own
 * API gives. */
struct uvmc_api {
    /* True when every real function the split path needs is there. */
    bool (*ready)(const struct uvmc_copy *c);
    /* One stream-ordered copy of a block, through the asynchronous form of the caller's entry. */
    int (*block)(const struct uvmc_copy *c, void *dst, const void *src, size_t len);
    int (*event_sync)(const struct uvmc_copy *c, CUevent ev);
    int (*stream_sync)(const struct uvmc_copy *c, CUstream stream);
    /* The unmodified call, exactly as the caller made it. */
    int (*passthrough)(const struct uvmc_copy *c);
};

/* How the blocks of a classified copy move (engine.c). */
enum uvmc_mode {
    UVMC_MODE_QUEUE,  /* copy engine, asynchronous into pinned memory: queued, never waited for */
    UVMC_MODE_DIRECT, /* copy engine into the destination, waited for group by group */
    UVMC_MODE_STAGED, /* copy engine into the staging ring, then host memcpy into the pageable destination */
    UVMC_MODE_HOST,   /* host memcpy out of host-resident managed memory on the calling thread */
};

struct uvmc_copy {
    const struct uvmc_api *api;
    const struct uvmc_rt *rt;     /* the caller's runtime; NULL for a driver entry point */
    int entry;                    /* which entry point, for api->block and api->passthrough */
    bool sync;                    /* a synchronous entry: returns after the last byte landed */
    bool per_thread;              /* a _ptds/_ptsz entry: stream 0 is the per-thread stream */
    bool small;                   /* below the threshold: only here to pin a lazy buffer it touches */
    void *dst;
    const void *src;
    size_t count;                 /* bytes */
    enum cudaMemcpyKind kind;     /* driver copies: DeviceToHost (DtoH family) or Default (unified) */
    CUstream stream;              /* as the caller passed it (0 for the synchronous entries) */
    /* filled by classification */
    CUstream hstream;             /* explicit handle: CU_STREAM_LEGACY / CU_STREAM_PER_THREAD for 0 */
    bool dst_pinned;              /* destination page-locked (else pageable) */
    bool prefers_host;            /* the source's preferred location is the CPU (FBGEMM's advice) */
    bool drained;                 /* host engine into a lazy buffer on a stream seen drained: the
                                   * host copies without queueing anything on the stream */
    enum uvmc_mode mode;
    CUdevice device;              /* device of the current context */
};

/* A copy at or above the threshold: classify, then split or pass through; counts it. */
int uvmc_large_copy(struct uvmc_copy *c);
/* A copy the hot path did not take, with its real functions found (c->api, c->rt): below the
 * threshold (or beneath the library's own path) and touching no lazy buffer, the real call,
 * counted when stats = on; else, marked small if it is, the large-copy path (which pins a lazy
 * buffer a small one touches). */
int uvmc_copy_rest(struct uvmc_copy *c);

/* True when this thread has a current context. For runtime entry points (rt, the caller's
 * runtime) the runtime is first asked to set one up, as the unmodified call would (cudaGetDevice +
 * cudaSetDevice); the driver's entry points (rt NULL) get exactly what the real call gives a thread
 * without one, so they only look. */
bool uvmc_thread_context(const struct uvmc_rt *rt);

/* True when the copy must be split: kind, capture state, source inside one managed allocation, host
 * destination (docs/design.md, "How one copy is handled"); then picks its mode. Makes only driver calls, which never
 * touch the runtime's last error. Once the thread has a context, it switches the thread to relaxed
 * capture mode (*mode says how to switch back, whatever the answer): the queries, waits and blocks
 * of a split copy are the library's own and must not invalidate another thread's capture. */
bool uvmc_classify(struct uvmc_copy *c, struct uvmc_relaxed *mode);

/* Runs a classified copy as blocks. Returns the first error (a block's, or a wait's), or 0. */
int uvmc_engine_copy(const struct uvmc_copy *c);

#endif
