/* staging.c: the page-locked ring (depth slots of uvmc_staging_slot() bytes) through which the copy engine
 * feeds a pageable destination, so the driver never stages such a copy itself. One per process. */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "uvmc.h"
#include "uvmc_units.h"

static pthread_mutex_t uvmc_ring_lock = PTHREAD_MUTEX_INITIALIZER; /* held by the copy using the ring */
static pthread_mutex_t uvmc_ring_setup = PTHREAD_MUTEX_INITIALIZER;
static void *uvmc_ring;
static unsigned long long uvmc_ring_id; /* the driver's buffer ID of the ring */
static pid_t uvmc_ring_pid;
static bool uvmc_ring_failed;

/* The buffer ID of the allocation holding p, or 0 (not one, or no answer): IDs are never reused
 * within a process, so a changed ID means the ring's memory is no longer what was allocated. */
static unsigned long long uvmc_buffer_id(void *p)
{
    unsigned long long id = 0;
    CUpointer_attribute attr = CU_POINTER_ATTRIBUTE_BUFFER_ID;
    void *data = &id;
    if (!uvmc_drv.cuPointerGetAttributes ||
        uvmc_drv.cuPointerGetAttributes(1, &attr, &data, (CUdeviceptr)(uintptr_t)p) != CUDA_SUCCESS)
        return 0;
    return id;
}

/* At exit, before the runtime's own teardown (registered earlier, so run later). Not in a forked
 * child: the ring is the parent's, and CUDA is unusable there. */
static void uvmc_ring_free(void)
{
    if (pthread_mutex_trylock(&uvmc_ring_lock) != 0)
        return; /* a copy still uses it (a thread running at exit): the process's end frees it */
    /* Not after a reset released it: its address may be the program's own buffer by now. */
    if (uvmc_ring && uvmc_ring_pid == getpid() && uvmc_drv.cuMemFreeHost && uvmc_ring_id == uvmc_buffer_id(uvmc_ring)) {
        struct uvmc_relaxed mode = uvmc_relax();
        uvmc_drv.cuMemFreeHost(uvmc_ring);
        uvmc_unrelax(mode);
    }
    uvmc_ring = NULL;
    pthread_mutex_unlock(&uvmc_ring_lock);
}

/* Relaxed capture mode for this thread around the allocation: a page-locked allocation is a
 * "potentially unsafe" call that would fail, and invalidate another thread's global-mode capture
 * (CUDA Runtime API, API synchronization behavior; cudaThreadExchangeStreamCaptureMode). */
static void *uvmc_ring_alloc(size_t bytes)
{
    void *p = NULL;
    struct uvmc_relaxed mode = uvmc_relax();
    CUresult r = uvmc_drv.cuMemHostAlloc ? uvmc_drv.cuMemHostAlloc(&p, bytes, CU_MEMHOSTALLOC_PORTABLE)
                                         : CUDA_ERROR_NOT_FOUND;
    uvmc_unrelax(mode);
    if (r != CUDA_SUCCESS) {
        uvmc_log(UVMC_LOG_WARN,
                 "cannot allocate the staging ring of %s (CUresult %d); copies into pageable memory "
                 "go straight to the driver",
                 uvmc_bytes_text(bytes).s, (int)r);
        return NULL;
    }
    return p;
}

void *uvmc_staging_acquire(void)
{
    /* Another copy holds the ring: this one goes without rather than wait behind it. */
    if (pthread_mutex_trylock(&uvmc_ring_lock) != 0)
        return NULL;
    pthread_mutex_lock(&uvmc_ring_setup);
    if (uvmc_ring_pid != getpid()) { /* first use, or a forked child: nothing of the parent's is ours */
        uvmc_ring = NULL;
        uvmc_ring_failed = false;
        uvmc_ring_pid = getpid();
    }
    if (uvmc_ring && uvmc_ring_id != uvmc_buffer_id(uvmc_ring)) {
        /* The context that owned it was reset (cudaDeviceReset): its memory is gone, so it is
         * dropped, not freed, and a new one is made. */
        uvmc_log(UVMC_LOG_INFO, "the staging ring was released with its context; allocating a new one");
        uvmc_ring = NULL;
    }
    if (!uvmc_ring && !uvmc_ring_failed) {
        static bool registered;
        uvmc_ring = uvmc_ring_alloc((size_t)uvmc_cfg.depth * uvmc_staging_slot());
        uvmc_ring_id = uvmc_ring ? uvmc_buffer_id(uvmc_ring) : 0;
        uvmc_ring_failed = !uvmc_ring;
        if (uvmc_ring && !registered)
            registered = atexit(uvmc_ring_free) == 0;
    }
    void *ring = uvmc_ring;
    pthread_mutex_unlock(&uvmc_ring_setup);
    if (!ring)
        pthread_mutex_unlock(&uvmc_ring_lock);
    return ring;
}

void uvmc_staging_release(void)
{
    pthread_mutex_unlock(&uvmc_ring_lock);
}

void uvmc_staging_abandon(void)
{
    static atomic_bool said;
    pthread_mutex_lock(&uvmc_ring_setup);
    if (!atomic_exchange(&said, true))
        uvmc_log(UVMC_LOG_WARN, "a copy's blocks could not be waited for; its staging ring of %s is given up, "
                 "not reused", uvmc_bytes_text((size_t)uvmc_cfg.depth * uvmc_staging_slot()).s);
    uvmc_ring = NULL;
    pthread_mutex_unlock(&uvmc_ring_setup);
    pthread_mutex_unlock(&uvmc_ring_lock);
}
