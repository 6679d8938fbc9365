/* lazy.c: lazily pinned buffers. A large page-locked request is served (or registered) lazily; the
 * uses the library can observe decide what it becomes: as the destination of split copies out of
 * managed memory it stays pageable (only the bytes written become resident, nothing is locked);
 * any other use makes it real pinned memory first, so every promise of pinned memory holds
 * (cuda_runtime_api.h, "Automatic Mapping of Host Allocated Host Memory"). No lock is held across
 * a driver call: the entry is marked busy, the lock dropped, the call made, the lock taken again;
 * racing uses of the same buffer wait for that one call, uses of other memory never do. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>
#include <uthash.h>

#include "uvmc.h"
#include "uvmc_units.h"

enum uvmc_lazy_state {
    UVMC_LAZY_UNDECIDED, /* no use seen yet: watched */
    UVMC_LAZY_WRITTEN,   /* only split copies wrote it so far: pageable, still watched */
    UVMC_LAZY_PAGEABLE,  /* its conversion failed: pageable for good */
    UVMC_LAZY_PINNED,    /* converted: registered with the driver */
};

struct uvmc_lazy {
    void *ptr;
    size_t size;        /* bytes */
    unsigned flags;     /* registration flags its conversion uses */
    bool mapped;        /* our mapping (an allocation), else the caller's memory (a registration) */
    bool busy;          /* a driver call on it runs without the lock: others wait on uvmc_lazy_cv */
    int slot;           /* its fast-path slot while watched, else -1 */
    enum uvmc_lazy_state state;
    pid_t pid;          /* the process that made it: in a forked child it is the parent's, and
                         * calls on it get the real answer (CUDA is unusable there) */
    UT_hash_handle hh;
};

static struct uvmc_lazy *uvmc_lazy_table;
static pthread_mutex_t uvmc_lazy_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t uvmc_lazy_cv = PTHREAD_COND_INITIALIZER; /* an entry stopped being busy */
atomic_size_t uvmc_lazy_live;
struct uvmc_lazy_range uvmc_lazy_slots[UVMC_LAZY_SLOTS];
atomic_uintptr_t uvmc_lazy_lo, uvmc_lazy_hi;
atomic_bool uvmc_lazy_spill;

static bool uvmc_watched(const struct uvmc_lazy *e)
{
    return e->state == UVMC_LAZY_UNDECIDED || e->state == UVMC_LAZY_WRITTEN;
}

static bool uvmc_overlaps(const struct uvmc_lazy *e, uintptr_t a, uintptr_t b)
{
    return a < uvmc_end(e->ptr, e->size) && b > (uintptr_t)e->ptr;
}

bool uvmc_lazy_hit(uintptr_t a, uintptr_t b)
{
    if (atomic_load_explicit(&uvmc_lazy_spill, memory_order_acquire))
        return true; /* more watched buffers than slots: the table answers, under the lock */
    for (unsigned i = 0; i < UVMC_LAZY_SLOTS; i++) {
        uintptr_t hi = atomic_load_explicit(&uvmc_lazy_slots[i].hi, memory_order_acquire);
        if (hi && a < hi && b > atomic_load_explicit(&uvmc_lazy_slots[i].lo, memory_order_relaxed))
            return true;
    }
    return false;
}

/* Under the lock: publishes what is watched now. Each watched entry keeps its slot (or gets a free
 * one); a slot's lo is written before its hi (release), the hull after every slot, so a reader that
 * sees a bound sees what it covers. */
static void uvmc_publish_locked(void)
{
    bool used[UVMC_LAZY_SLOTS] = {false}, spill = false;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (struct uvmc_lazy *e = uvmc_lazy_table; e; e = e->hh.next) {
        if (!uvmc_watched(e) || e->pid != getpid()) {
            e->slot = -1;
            continue;
        }
        if (e->slot >= 0)
            used[e->slot] = true;
        if ((uintptr_t)e->ptr < lo)
            lo = (uintptr_t)e->ptr;
        if (uvmc_end(e->ptr, e->size) > hi)
            hi = uvmc_end(e->ptr, e->size);
    }
    for (struct uvmc_lazy *e = uvmc_lazy_table; e; e = e->hh.next) {
        if (!uvmc_watched(e) || e->pid != getpid() || e->slot >= 0)
            continue;
        for (int i = 0; i < UVMC_LAZY_SLOTS && e->slot < 0; i++)
            if (!used[i]) {
                used[i] = true;
                e->slot = i;
            }
        spill = spill || e->slot < 0;
    }
    for (int i = 0; i < UVMC_LAZY_SLOTS; i++)
        if (!used[i])
            atomic_store_explicit(&uvmc_lazy_slots[i].hi, 0, memory_order_relaxed);
    for (struct uvmc_lazy *e = uvmc_lazy_table; e; e = e->hh.next)
        if (e->slot >= 0 &&
            atomic_load_explicit(&uvmc_lazy_slots[e->slot].lo, memory_order_relaxed) != (uintptr_t)e->ptr) {
            atomic_store_explicit(&uvmc_lazy_slots[e->slot].hi, 0, memory_order_relaxed);
            atomic_store_explicit(&uvmc_lazy_slots[e->slot].lo, (uintptr_t)e->ptr, memory_order_relaxed);
            atomic_store_explicit(&uvmc_lazy_slots[e->slot].hi, uvmc_end(e->ptr, e->size), memory_order_release);
        } else if (e->slot >= 0) {
            atomic_store_explicit(&uvmc_lazy_slots[e->slot].hi, uvmc_end(e->ptr, e->size), memory_order_release);
        }
    atomic_store_explicit(&uvmc_lazy_spill, spill, memory_order_release);
    atomic_store_explicit(&uvmc_lazy_lo, hi ? lo : 0, memory_order_relaxed);
    atomic_store_explicit(&uvmc_lazy_hi, hi, memory_order_release);
}

struct uvmc_relaxed uvmc_relax(void)
{
    struct uvmc_relaxed r = {.mode = CU_STREAM_CAPTURE_MODE_RELAXED};
    r.exchanged = uvmc_drv.cuThreadExchangeStreamCaptureMode &&
                  uvmc_drv.cuThreadExchangeStreamCaptureMode(&r.mode) == CUDA_SUCCESS;
    return r;
}

void uvmc_unrelax(struct uvmc_relaxed r)
{
    CUcontext popped;
    if (r.pushed) /* back to the caller's current context before its capture mode */
        uvmc_drv.cuCtxPopCurrent(&popped);
    if (r.exchanged)
        uvmc_drv.cuThreadExchangeStreamCaptureMode(&r.mode);
}

/* Records a buffer: 0; 712 when it overlaps one already recorded (what a second registration of
 * the same memory gives); -1 when out of memory. */
static int uvmc_lazy_add(void *ptr, size_t size, unsigned flags, bool mapped)
{
    struct uvmc_lazy *e = malloc(sizeof *e);
    if (!e)
        return -1;
    *e = (struct uvmc_lazy){.ptr = ptr, .size = size, .flags = flags, .mapped = mapped, .slot = -1,
                            .state = UVMC_LAZY_UNDECIDED, .pid = getpid()};
    uintptr_t a = (uintptr_t)ptr, b = uvmc_end(ptr, size);
    pthread_mutex_lock(&uvmc_lazy_lock);
    for (struct uvmc_lazy *o = uvmc_lazy_table; o; o = o->hh.next)
        if (o->pid == e->pid && uvmc_overlaps(o, a, b)) {
            pthread_mutex_unlock(&uvmc_lazy_lock);
            free(e);
            _Static_assert(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED == (int)cudaErrorHostMemoryAlreadyRegistered,
                           "one code serves both APIs");
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    HASH_ADD_PTR(uvmc_lazy_table, ptr, e);
    atomic_fetch_add_explicit(&uvmc_lazy_live, 1, memory_order_relaxed);
    uvmc_publish_locked();
    pthread_mutex_unlock(&uvmc_lazy_lock);
    return 0;
}

void *uvmc_lazy_alloc(size_t size, unsigned flags)
{
    /* Every host allocation is mapped and reachable from all contexts under unified addressing
     * (cuda.h, "Automatic Mapping of Host Allocated Host Memory"): its conversion registers so. */
    (void)flags;
    uvmc_pyhook_check();
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
        uvmc_log(UVMC_LOG_WARN, "cannot map %s of pageable memory; allocating it pinned as asked",
                 uvmc_bytes_text(size).s);
        return NULL;
    }
    /* First touch of 20 GiB in 4 KiB pages is five million faults; huge pages where the kernel can. */
    madvise(p, size, MADV_HUGEPAGE);
    if (uvmc_lazy_add(p, size, CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP, true) != 0) {
        munmap(p, size);
        uvmc_log(UVMC_LOG_WARN, "cannot record a lazy buffer of %s; allocating it pinned as asked",
                 uvmc_bytes_text(size).s);
        return NULL;
    }
    atomic_fetch_add_explicit(&uvmc_stats.substituted, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&uvmc_stats.substituted_bytes, size, memory_order_relaxed);
    uvmc_log(UVMC_LOG_DEBUG, "pinned request of %s served lazily at %p", uvmc_bytes_text(size).s, p);
    return p;
}

int uvmc_lazy_register(void *ptr, size_t size, unsigned flags, bool runtime)
{
    /* Mapped for the device, as under unified addressing; the runtime's default registration is
     * portable there too (cuda_runtime_api.h, cudaHostRegister: "cudaHostRegisterDefault: On a
     * system with unified virtual addressing, the memory will be both mapped and portable"). */
    unsigned reg = CU_MEMHOSTREGISTER_DEVICEMAP |
                   (runtime || (flags & CU_MEMHOSTREGISTER_PORTABLE) ? CU_MEMHOSTREGISTER_PORTABLE : 0);
    int r = uvmc_lazy_add(ptr, size, reg, false);
    if (r != 0)
        return r;
    atomic_fetch_add_explicit(&uvmc_stats.substituted, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&uvmc_stats.substituted_bytes, size, memory_order_relaxed);
    uvmc_log(UVMC_LOG_DEBUG, "registration of %s at %p kept lazy", uvmc_bytes_text(size).s, ptr);
    return 0;
}

/* Registers e with the driver, without the lock (e is busy), in relaxed capture mode so another
 * thread's capture is not disturbed (a registration is a "potentially unsafe" call). A failure
 * leaves the buffer pageable for good, said once per buffer. */
static enum uvmc_lazy_state uvmc_convert(struct uvmc_lazy *e)
{
    CUresult r = CUDA_ERROR_NOT_INITIALIZED;
    if (uvmc_driver_ready() && uvmc_drv.cuMemHostRegister) {
        struct uvmc_relaxed m = uvmc_relax();
        r = uvmc_drv.cuMemHostRegister(e->ptr, e->size, e->flags);
        uvmc_unrelax(m);
    }
    if (r == CUDA_SUCCESS) {
        atomic_fetch_add_explicit(&uvmc_stats.converted, 1, memory_order_relaxed);
        uvmc_log(UVMC_LOG_DEBUG, "lazy buffer of %s at %p pinned at its first use", uvmc_bytes_text(e->size).s,
                 e->ptr);
        return UVMC_LAZY_PINNED;
    }
    uvmc_log(UVMC_LOG_WARN, "cannot pin the buffer of %s at %p at its first use (CUresult %d); it stays pageable",
             uvmc_bytes_text(e->size).s, e->ptr, (int)r);
    return UVMC_LAZY_PAGEABLE;
}

/* Under the lock: the first watched entry of this process overlapping [a, b), or NULL. */
static struct uvmc_lazy *uvmc_first_watched_locked(uintptr_t a, uintptr_t b)
{
    pid_t self = getpid();
    for (struct uvmc_lazy *e = uvmc_lazy_table; e; e = e->hh.next)
        if (e->pid == self && uvmc_watched(e) && uvmc_overlaps(e, a, b))
            return e;
    return NULL;
}

/* Converts every watched buffer overlapping [p, p+n); true when none is left pageable. A buffer
 * another thread is converting is waited for (on the condition variable, the lock released). */
static bool uvmc_pin_range(const void *p, size_t n, const struct uvmc_rt *rt)
{
    uintptr_t a = (uintptr_t)p, b = uvmc_end(p, n);
    pthread_mutex_lock(&uvmc_lazy_lock);
    bool any = uvmc_first_watched_locked(a, b) != NULL;
    pthread_mutex_unlock(&uvmc_lazy_lock);
    if (!any)
        return true;
    /* A registration needs a current context: the runtime sets one up as the caller's runtime call
     * would; a driver caller's thread with none keeps the buffer as it is, and the real call then
     * gives its own answer. */
    if (!uvmc_thread_context(rt))
        return false;
    bool all = true;
    pthread_mutex_lock(&uvmc_lazy_lock);
    for (struct uvmc_lazy *e; (e = uvmc_first_watched_locked(a, b)) != NULL;) {
        if (e->busy) {
            pthread_cond_wait(&uvmc_lazy_cv, &uvmc_lazy_lock);
            continue; /* the table may have changed: look again */
        }
        e->busy = true;
        pthread_mutex_unlock(&uvmc_lazy_lock);
        enum uvmc_lazy_state st = uvmc_convert(e);
        pthread_mutex_lock(&uvmc_lazy_lock);
        e->state = st;
        e->busy = false;
        all = all && st == UVMC_LAZY_PINNED;
        uvmc_publish_locked();
        pthread_cond_broadcast(&uvmc_lazy_cv);
    }
    /* One converted by another thread meanwhile may have failed too. */
    pid_t self = getpid();
    for (struct uvmc_lazy *e = uvmc_lazy_table; e; e = e->hh.next)
        if (e->pid == self && e->state == UVMC_LAZY_PAGEABLE && uvmc_overlaps(e, a, b))
            all = false;
    pthread_mutex_unlock(&uvmc_lazy_lock);
    return all;
}

void uvmc_lazy_touch(const void *p, size_t n, const struct uvmc_rt *rt)
{
    if (uvmc_tls_busy) /* the library's own calls: its staging and blocks never decide anything */
        return;
    uvmc_tls_busy++;
    uvmc_pin_range(p, n, rt);
    uvmc_tls_busy--;
}

bool uvmc_lazy_pin(const void *p, size_t n, const struct uvmc_rt *rt)
{
    return uvmc_pin_range(p, n, rt);
}

bool uvmc_lazy_watched(const void *p, size_t n)
{
    if (!uvmc_lazy_maybe(p, n))
        return false;
    pthread_mutex_lock(&uvmc_lazy_lock);
    bool hit = uvmc_first_watched_locked((uintptr_t)p, uvmc_end(p, n)) != NULL;
    pthread_mutex_unlock(&uvmc_lazy_lock);
    return hit;
}

void uvmc_lazy_claim(const void *p, size_t n)
{
    if (!uvmc_lazy_maybe(p, n))
        return;
    uintptr_t a = (uintptr_t)p, b = uvmc_end(p, n);
    pid_t self = getpid();
    pthread_mutex_lock(&uvmc_lazy_lock);
    for (struct uvmc_lazy *e = uvmc_lazy_table; e; e = e->hh.next)
        if (e->state == UVMC_LAZY_UNDECIDED && !e->busy && e->pid == self && uvmc_overlaps(e, a, b)) {
            e->state = UVMC_LAZY_WRITTEN;
            uvmc_log(UVMC_LOG_DEBUG,
                     "lazy buffer at %p is a split copy's destination: pageable until its next other use", e->ptr);
        }
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

/* What releasing e takes from the driver, without the lock (e is busy), in relaxed capture mode.
 * An allocation that a copy the library did not split may have reached (pinned: any copy; pageable
 * for good: on CUDA 12.2+ a device-to-host one into pageable memory may still run) is freed only
 * after the device is idle, as the real free waits; a pinned one is then unregistered (the driver
 * holding no registration, after a context reset, is no failure). Watched, nothing can have
 * reached it: any other copy would have pinned it first, and a split copy had landed when it
 * returned. */
/* Waits for the current context, then for every other device whose primary context is active: the
 * copy that reached the buffer may have been queued on another device's stream (a rank's stream of
 * device 1 while the freeing thread's current device is 0), and cuCtxSynchronize waits for the
 * current context only (cuda.h). Only the current context's result is the caller's: another
 * device's error belongs to whoever uses that device and is left for them to see. */
static int uvmc_sync_devices(void)
{
    int r = uvmc_drv.cuCtxSynchronize(), n = 0;
    CUcontext cur = NULL, ctx = NULL, popped;
    if (!uvmc_drv.cuDeviceGetCount || !uvmc_drv.cuDeviceGet || !uvmc_drv.cuDevicePrimaryCtxGetState ||
        !uvmc_drv.cuDevicePrimaryCtxRetain || !uvmc_drv.cuDevicePrimaryCtxRelease || !uvmc_drv.cuCtxPushCurrent ||
        !uvmc_drv.cuCtxPopCurrent || uvmc_drv.cuDeviceGetCount(&n) != CUDA_SUCCESS)
        return r;
    uvmc_drv.cuCtxGetCurrent(&cur);
    for (int i = 0; i < n; i++) {
        CUdevice d;
        unsigned flags;
        int active = 0;
        if (uvmc_drv.cuDeviceGet(&d, i) != CUDA_SUCCESS ||
            uvmc_drv.cuDevicePrimaryCtxGetState(d, &flags, &active) != CUDA_SUCCESS || !active ||
            uvmc_drv.cuDevicePrimaryCtxRetain(&ctx, d) != CUDA_SUCCESS)
            continue;
        if (ctx != cur && uvmc_drv.cuCtxPushCurrent(ctx) == CUDA_SUCCESS) {
            (void)uvmc_drv.cuCtxSynchronize(); /* its error is not the caller's */
            uvmc_drv.cuCtxPopCurrent(&popped);
        }
        uvmc_drv.cuDevicePrimaryCtxRelease(d);
    }
    return r;
}

static int uvmc_release_call(struct uvmc_lazy *e)
{
    int r = 0;
    struct uvmc_relaxed m = uvmc_relax();
    if (e->mapped && !uvmc_watched(e) && uvmc_drv.cuCtxSynchronize)
        r = uvmc_sync_devices();
    if (r == 0 && e->state == UVMC_LAZY_PINNED && uvmc_drv.cuMemHostUnregister) {
        r = uvmc_drv.cuMemHostUnregister(e->ptr);
        if (r == CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED)
            r = 0;
    }
    uvmc_unrelax(m);
    return r;
}

/* Releases the entry at ptr. On a failure the entry stays, unchanged, and the driver's code is
 * returned. */
static int uvmc_lazy_release(void *ptr, bool mapped)
{
    if (!atomic_load_explicit(&uvmc_lazy_live, memory_order_relaxed))
        return -1;
    pthread_mutex_lock(&uvmc_lazy_lock);
    struct uvmc_lazy *e;
    while ((e = uvmc_lazy_find_locked(ptr, mapped)) != NULL && e->busy)
        pthread_cond_wait(&uvmc_lazy_cv, &uvmc_lazy_lock);
    if (!e) {
        pthread_mutex_unlock(&uvmc_lazy_lock);
        return -1;
    }
    e->busy = true;
    pthread_mutex_unlock(&uvmc_lazy_lock);
    int r = uvmc_release_call(e);
    pthread_mutex_lock(&uvmc_lazy_lock);
    e->busy = false;
    if (r == 0) {
        HASH_DEL(uvmc_lazy_table, e);
        atomic_fetch_sub_explicit(&uvmc_lazy_live, 1, memory_order_relaxed);
        uvmc_publish_locked();
    }
    pthread_cond_broadcast(&uvmc_lazy_cv);
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
    pthread_mutex_lock(&uvmc_lazy_lock);
    bool hit = uvmc_first_watched_locked((uintptr_t)p, uvmc_end(p, n)) != NULL;
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
 * the real answer, as without the library; its condition variable starts afresh (no waiter of the
 * parent's exists there) and nothing of the parent's is watched. */
void uvmc_lazy_atfork_prepare(void) { pthread_mutex_lock(&uvmc_lazy_lock); }
void uvmc_lazy_atfork_parent(void) { pthread_mutex_unlock(&uvmc_lazy_lock); }
void uvmc_lazy_atfork_child(void)
{
    pthread_cond_init(&uvmc_lazy_cv, NULL);
    uvmc_publish_locked();
    pthread_mutex_unlock(&uvmc_lazy_lock);
}
