/* hostalloc.c: pinned-allocation substitution. Page-locked requests of at least pinned_threshold
 * bytes become lazily committed pageable mappings; frees of those are handled here (uthash table). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <uthash.h>

#include "uvmc.h"

/* PyTorch pins a checkpoint destination rounded up to a power of two before the copy (BRIEF §1):
 * up to twice the tensor, locked. A private anonymous mapping without reserve commits only the
 * pages written, locks nothing, and returns every page to the system at munmap. */

struct uvmc_subst {
    void *ptr;
    size_t size; /* bytes mapped */
    UT_hash_handle hh;
};

static struct uvmc_subst *uvmc_subst_table;
static pthread_mutex_t uvmc_subst_lock = PTHREAD_MUTEX_INITIALIZER;
/* Live entries: frees skip the lock while nothing was ever substituted. */
static atomic_size_t uvmc_subst_live;

/* Only flags that promise no device mapping and no write-combining: Portable (1) is the one
 * such flag, with the same value in the runtime and the driver. */
static bool uvmc_substitutable(size_t size, unsigned flags)
{
    _Static_assert(cudaHostAllocPortable == CU_MEMHOSTALLOC_PORTABLE, "one flag test serves both APIs");
    return uvmc_cfg.enabled && uvmc_cfg.pinned_threshold != 0 && size >= uvmc_cfg.pinned_threshold &&
           (flags & ~(unsigned)cudaHostAllocPortable) == 0 && !uvmc_tls_busy;
}

/* Returns the new mapping, or NULL (the caller then passes the request through). */
static void *uvmc_subst_alloc(size_t size)
{
    struct uvmc_subst *e = malloc(sizeof *e);
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!e || p == MAP_FAILED) {
        free(e);
        if (p != MAP_FAILED)
            munmap(p, size);
        uvmc_log(UVMC_LOG_WARN, "cannot map %zu pageable bytes; allocating them pinned as asked", size);
        return NULL;
    }
    e->ptr = p;
    e->size = size;
    pthread_mutex_lock(&uvmc_subst_lock);
    HASH_ADD_PTR(uvmc_subst_table, ptr, e);
    atomic_fetch_add_explicit(&uvmc_subst_live, 1, memory_order_relaxed);
    pthread_mutex_unlock(&uvmc_subst_lock);
    atomic_fetch_add_explicit(&uvmc_stats.substituted, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&uvmc_stats.substituted_bytes, size, memory_order_relaxed);
    uvmc_log(UVMC_LOG_DEBUG, "pinned request of %zu bytes served pageable at %p", size, p);
    return p;
}

/* Unmaps ptr if it is one of ours; false for any other pointer. */
static bool uvmc_subst_release(void *ptr)
{
    if (!atomic_load_explicit(&uvmc_subst_live, memory_order_relaxed))
        return false;
    struct uvmc_subst *e;
    pthread_mutex_lock(&uvmc_subst_lock);
    HASH_FIND_PTR(uvmc_subst_table, &ptr, e);
    if (e) {
        HASH_DEL(uvmc_subst_table, e);
        atomic_fetch_sub_explicit(&uvmc_subst_live, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&uvmc_subst_lock);
    if (!e)
        return false;
    munmap(e->ptr, e->size);
    free(e);
    return true;
}

/* Substitution needs what the real allocation needs: a current context. The runtime's entry
 * points set one up as the real call would (and a failure there, in a forked child say, sends
 * the request to the real call to report); the driver's only look. */
cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    UVMC_REAL_OR_RETURN(cudaHostAlloc, cudaErrorSharedObjectSymbolNotFound);
    if (ptr && uvmc_substitutable(size, flags) && uvmc_thread_context(true) && (*ptr = uvmc_subst_alloc(size)))
        return cudaSuccess;
    return uvmc_real.cudaHostAlloc(ptr, size, flags);
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    UVMC_REAL_OR_RETURN(cudaMallocHost, cudaErrorSharedObjectSymbolNotFound);
    if (ptr && uvmc_substitutable(size, 0) && uvmc_thread_context(true) && (*ptr = uvmc_subst_alloc(size)))
        return cudaSuccess;
    return uvmc_real.cudaMallocHost(ptr, size);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
    UVMC_REAL_OR_RETURN(cuMemHostAlloc, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    if (pp && uvmc_substitutable(bytesize, flags) && uvmc_thread_context(false) && (*pp = uvmc_subst_alloc(bytesize)))
        return CUDA_SUCCESS;
    return uvmc_real.cuMemHostAlloc(pp, bytesize, flags);
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    UVMC_REAL_OR_RETURN(cuMemAllocHost_v2, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    if (pp && uvmc_substitutable(bytesize, 0) && uvmc_thread_context(false) && (*pp = uvmc_subst_alloc(bytesize)))
        return CUDA_SUCCESS;
    return uvmc_real.cuMemAllocHost_v2(pp, bytesize);
}

/* No device work can still touch a substituted buffer when it is freed: it is pageable memory,
 * which no kernel may access, and every copy into or out of pageable memory (ours included, see
 * engine.c) is complete when its call returns. So the free waits for nothing, and stays legal
 * while another thread captures a graph, as the real free is. */
cudaError_t cudaFreeHost(void *ptr)
{
    UVMC_REAL_OR_RETURN(cudaFreeHost, cudaErrorSharedObjectSymbolNotFound);
    if (!uvmc_subst_release(ptr))
        return uvmc_real.cudaFreeHost(ptr);
    return cudaSuccess;
}

CUresult cuMemFreeHost(void *p)
{
    UVMC_REAL_OR_RETURN(cuMemFreeHost, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    if (!uvmc_subst_release(p))
        return uvmc_real.cuMemFreeHost(p);
    return CUDA_SUCCESS;
}
