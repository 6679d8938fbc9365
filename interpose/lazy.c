/* lazy.c: lazily pinned buffers. A large page-locked request is served (or registered) lazily; its
 * first use the library can observe decides what it becomes: the destination of a split copy out of
 * managed memory stays pageable (only the bytes written become resident, nothing is locked); any
 * other use makes it real pinned memory first, so every promise of pinned memory holds (BRIEF §8). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uthash.h>

#include "uvmc.h"

enum uvmc_lazy_state {
    UVMC_LAZY_UNDECIDED, /* no use seen yet */
    UVMC_LAZY_PAGEABLE,  /* a split copy's destination, or a failed conversion: pageable for good */
    UVMC_LAZY_PINNED,    /* converted: registered with the driver */
};

struct uvmc_lazy {
    void *ptr;
    size_t size;        /* bytes */
    unsigned flags;     /* what the caller asked for (Portable or not) */
    bool mapped;        /* our mapping (an allocation), else the caller's memory (a registration) */
    enum uvmc_lazy_state state;
    pid_t pid;          /* the process that made it: in a forked child it is the parent's, and
                         * calls on it get the real answer (CUDA is unusable there) */
    UT_hash_handle hh;
};

static struct uvmc_lazy *uvmc_lazy_table;
/* Held across a conversion too, so racing first uses convert a buffer once. */
static pthread_mutex_t uvmc_lazy_lock = PTHREAD_MUTEX_INITIALIZER;
atomic_size_t uvmc_lazy_live;            /* entries in the table: frees skip the lock while 0 */
atomic_uintptr_t uvmc_lazy_lo, uvmc_lazy_hi; /* bounds of the undecided buffers; hi 0 when none */

/* Under the lock: the bounds the hot path checks, over the buffers still undecided. */
static void uvmc_lazy_bounds_locked(void)
{
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (struct uvmc_lazy *e = uvmc_lazy_table; e; e = e->hh.next)
        if (e->state == UVMC_LAZY_UNDECIDED) {
            if ((uintptr_t)e->ptr < lo)
                lo = (uintptr_t)e->ptr;
            if ((uintptr_t)e->ptr + e->size > hi)
                hi = (uintptr_t)e->ptr + e->size;
        }
    atomic_store_explicit(&uvmc_lazy_lo, hi ? lo : 0, memory_order_relaxed);
    atomic_store_explicit(&uvmc_lazy_hi, hi, memory_order_release);
}

/* The end of [p, p+n), saturated: a range that would wrap still overlaps what lies above p. */
static uintptr_t uvmc_end(const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p;
    return n > UINTPTR_MAX - a ? UINTPTR_MAX : a + (n ? n : 1);
}

/* Records a buffer: 0; 712 when it overlaps one already recorded (what a second registration of
 * the same memory gives); -1 when out of memory. */
static int uvmc_lazy_add(void *ptr, size_t size, unsigned flags, bool mapped)
{
    struct uvmc_lazy *e = malloc(sizeof *e);
    if (!e)
        return -1;
    *e = (struct uvmc_lazy){.ptr = ptr, .size = size, .flags = flags, .mapped = mapped, .state = UVMC_LAZY_UNDECIDED,
                            .pid = getpid()};
    uintptr_t a = (uintptr_t)ptr, b = uvmc_end(ptr, size);
    pthread_mutex_lock(&uvmc_lazy_lock);
    for (struct uvmc_lazy *o = uvmc_lazy_table; o; o = o->hh.next)
        if (o->pid == e->pid && a < uvmc_end(o->ptr, o->size) && b > (uintptr_t)o->ptr) {
            pthread_mutex_unlock(&uvmc_lazy_lock);
            free(e);
            _Static_assert(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED == (int)cudaErrorHostMemoryAlreadyRegistered,
                           "one code serves both APIs");
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    HASH_ADD_PTR(uvmc_lazy_table, ptr, e);
    atomic_fetch_add_explicit(&uvmc_lazy_live, 1, memory_order_relaxed);
    uvmc_lazy_bounds_locked();
    pthread_mutex_unlock(&uvmc_lazy_lock);
    return 0;
}

void *uvmc_lazy_alloc(size_t size, unsigned flags)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        uvmc_log(UVMC_LOG_WARN, "cannot map %zu pageable bytes; allocating them pinned as asked", size);
        return NULL;
    }
    /* First touch of 20 GiB in 4 KiB pages is five million faults; huge pages where the kernel can. */
    madvise(p, size, MADV_HUGEPAGE);
    if (uvmc_lazy_add(p, size, flags, true) != 0) {
        munmap(p, size);
        uvmc_log(UVMC_LOG_WARN, "cannot record a %zu-byte lazy buffer; allocating it pinned as asked", size);
        return NULL;
    }
    atomic_fetch_add_explicit(&uvmc_stats.substituted, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&uvmc_stats.substituted_bytes, size, memory_order_relaxed);
    uvmc_log(UVMC_LOG_DEBUG, "pinned request of %zu bytes served lazily at %p", size, p);
    return p;
}

int uvmc_lazy_register(void *ptr, size_t size, unsigned flags)
{
    int r = uvmc_lazy_add(ptr, size, flags, false);
    if (r != 0)
        return r;
    atomic_fetch_add_explicit(&uvmc_stats.substituted, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&uvmc_stats.substituted_bytes, size, memory_order_relaxed);
    uvmc_log(UVMC_LOG_DEBUG, "registration of %zu bytes at %p kept lazy", size, ptr);
    return 0;
}

/* Under the lock: registers e with the driver, in relaxed capture mode so another thread's
 * capture is not disturbed (a registration is a "potentially unsafe" call, BRIEF §7). Allocations
 * are mapped for the device whatever their flags, as CUDA maps every host allocation under unified
 * addressing. A failure leaves the buffer pageable for good, said once per buffer. */
static void uvmc_lazy_convert_locked(struct uvmc_lazy *e, bool runtime)
{
    unsigned flags = CU_MEMHOSTREGISTER_DEVICEMAP | (e->flags & CU_MEMHOSTALLOC_PORTABLE ? CU_MEMHOSTREGISTER_PORTABLE : 0);
    /* A registration needs a current context: the runtime sets one up as the caller's runtime call
     * would; a driver caller's thread with none keeps the buffer undecided, and the real call then
     * gives its own answer. */
    if (!uvmc_thread_context(runtime))
        return;
    CUresult r = CUDA_ERROR_NOT_INITIALIZED;
    if (uvmc_driver_ready() && uvmc_drv.cuMemHostRegister) {
        CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        bool exchanged = uvmc_drv.cuThreadExchangeStreamCaptureMode &&
                         uvmc_drv.cuThreadExchangeStreamCaptureMode(&mode) == CUDA_SUCCESS;
        r = uvmc_drv.cuMemHostRegister(e->ptr, e->size, flags);
        if (exchanged)
            uvmc_drv.cuThreadExchangeStreamCaptureMode(&mode);
    }
    if (r == CUDA_SUCCESS) {
        e->state = UVMC_LAZY_PINNED;
        atomic_fetch_add_explicit(&uvmc_stats.converted, 1, memory_order_relaxed);
        uvmc_log(UVMC_LOG_DEBUG, "lazy buffer of %zu bytes at %p pinned at its first use", e->size, e->ptr);
    } else {
        e->state = UVMC_LAZY_PAGEABLE;
        uvmc_log(UVMC_LOG_WARN, "cannot pin the %zu-byte buffer at %p at its first use (CUresult %d); it stays pageable",
                 e->size, e->ptr, (int)r);
    }
}

void uvmc_lazy_touch(const void *p, size_t n, bool runtime)
{
    if (uvmc_tls_busy) /* the library's own calls: its staging and blocks never decide anything */
        return;
    uintptr_t a = (uintptr_t)p, b = uvmc_end(p, n);
    pid_t self = getpid();
    uvmc_tls_busy++;
    pthread_mutex_lock(&uvmc_lazy_lock);
    bool changed = false;
    for (struct uvmc_lazy *e = uvmc_lazy_table; e; e = e->hh.next)
        if (e->state == UVMC_LAZY_UNDECIDED && e->pid == self && a < (uintptr_t)e->ptr + e->size &&
            b > (uintptr_t)e->ptr) {
            uvmc_lazy_convert_locked(e, runtime);
            changed = true;
        }
    if (changed)
        uvmc_lazy_bounds_locked();
    pthread_mutex_unlock(&uvmc_lazy_lock);
    uvmc_tls_busy--;
}

void uvmc_lazy_claim(const void *p, size_t n)
{
    if (!uvmc_lazy_maybe(p, n))
        return;
    uintptr_t a = (uintptr_t)p, b = uvmc_end(p, n);
    pid_t self = getpid();
    pthread_mutex_lock(&uvmc_lazy_lock);
    bool changed = false;
    for (struct uvmc_lazy *e = uvmc_lazy_table; e; e = e->hh.next)
        if (e->state == UVMC_LAZY_UNDECIDED && e->pid == self && a < (uintptr_t)e->ptr + e->size &&
            b > (uintptr_t)e->ptr) {
            e->state = UVMC_LAZY_PAGEABLE;
            changed = true;
            uvmc_log(UVMC_LOG_DEBUG, "lazy buffer at %p is a split copy's destination: stays pageable", e->ptr);
        }
    if (changed)
        uvmc_lazy_bounds_locked();
    pthread_mutex_unlock(&uvmc_lazy_lock);
}

/* The entry starting at ptr if it is an allocation (mapped) or a registration (!mapped) of this
 * process; NULL when there is none. It stays in the table (removed only once released). */
static struct uvmc_lazy *uvmc_lazy_find_locked(void *ptr, bool mapped)
{
    struct uvmc_lazy *e;
    HASH_FIND_PTR(uvmc_lazy_table, &ptr, e);
    return e && e->mapped == mapped && e->pid == getpid() ? e : NULL;
}

/* Releases the entry at ptr: unregistered if it was converted (the driver waits for what it queued
 * on it, as the real call); if it stayed pageable, after the device is idle, as the real free
 * waits (copies the library did not split may have reached it since, and on CUDA 12.2+ a
 * device-to-host one into pageable memory may still be running). Undecided, nothing can have
 * touched it: any copy would have pinned it first, and a split copy had landed when it returned.
 * On a failure the entry stays, unchanged, and the driver's code is returned; "not registered"
 * is no failure: after cudaDeviceReset the driver has forgotten the registration. */
static int uvmc_lazy_release(void *ptr, bool mapped)
{
    if (!atomic_load_explicit(&uvmc_lazy_live, memory_order_relaxed))
        return -1;
    pthread_mutex_lock(&uvmc_lazy_lock);
    struct uvmc_lazy *e = uvmc_lazy_find_locked(ptr, mapped);
    int r = e ? 0 : -1;
    if (e && e->state == UVMC_LAZY_PINNED && uvmc_drv.cuMemHostUnregister) {
        r = uvmc_drv.cuMemHostUnregister(e->ptr);
        if (r == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
            r = 0; /* the driver holds no registration (a context reset released it): nothing pins it */
    }
    else if (e && e->state == UVMC_LAZY_PAGEABLE && mapped && uvmc_drv.cuCtxSynchronize)
        r = uvmc_drv.cuCtxSynchronize();
    if (e && r == 0) {
        HASH_DEL(uvmc_lazy_table, e);
        atomic_fetch_sub_explicit(&uvmc_lazy_live, 1, memory_order_relaxed);
        uvmc_lazy_bounds_locked();
    }
    pthread_mutex_unlock(&uvmc_lazy_lock);
    if (r != 0)
        return r;
    if (e->mapped)
        munmap(e->ptr, e->size);
    free(e);
    return 0;
}

bool uvmc_lazy_overlaps_undecided(const void *p, size_t n)
{
    if (!atomic_load_explicit(&uvmc_lazy_live, memory_order_relaxed))
        return false;
    uintptr_t a = (uintptr_t)p, b = uvmc_end(p, n);
    pid_t self = getpid();
    bool hit = false;
    pthread_mutex_lock(&uvmc_lazy_lock);
    for (struct uvmc_lazy *e = uvmc_lazy_table; e && !hit; e = e->hh.next)
        hit = e->state == UVMC_LAZY_UNDECIDED && e->pid == self && a < uvmc_end(e->ptr, e->size) &&
              b > (uintptr_t)e->ptr;
    pthread_mutex_unlock(&uvmc_lazy_lock);
    return hit;
}

int uvmc_lazy_free(void *ptr)
{
    return uvmc_lazy_release(ptr, true);
}

int uvmc_lazy_unregister(void *ptr)
{
    return uvmc_lazy_release(ptr, false);
}

/* Held across fork() so the child never inherits it locked by a thread that does not exist there.
 * In the child the parent's entries stay (inherited memory, never freed by us): calls on them get
 * the real answer, as without the library. */
void uvmc_lazy_atfork_prepare(void) { pthread_mutex_lock(&uvmc_lazy_lock); }
void uvmc_lazy_atfork_release(void) { pthread_mutex_unlock(&uvmc_lazy_lock); }
