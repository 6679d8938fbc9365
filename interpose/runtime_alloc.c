/* runtime_alloc.c: the runtime's page-locked allocation and registration entry points, compiled
 * once per CUDA major (uvmc.h, UVMC_RT_MAJOR). Served lazily as the driver's (hostalloc.h), with
 * the caller's runtime setting up the thread's context as the real call would. */
#include <stddef.h>
#include <stdint.h>

#include "hostalloc.h"

UVMC_RT_SYMVER(cudaHostAlloc)
cudaError_t UVMC_RT_FN(cudaHostAlloc)(void **ptr, size_t size, unsigned int flags)
{
    UVMC_RT_OR_RETURN(cudaHostAlloc, cudaErrorSharedObjectSymbolNotFound);
    UVMC_LAZY_ALLOC(ptr, size, flags, rt, cudaSuccess);
    return rt->cudaHostAlloc(ptr, size, flags);
}

UVMC_RT_SYMVER(cudaMallocHost)
cudaError_t UVMC_RT_FN(cudaMallocHost)(void **ptr, size_t size)
{
    UVMC_RT_OR_RETURN(cudaMallocHost, cudaErrorSharedObjectSymbolNotFound);
    UVMC_LAZY_ALLOC(ptr, size, 0, rt, cudaSuccess);
    return rt->cudaMallocHost(ptr, size);
}

/* A free of a lazy buffer: unregistered first if it was pinned (as the real free would), then
 * unmapped. The driver's code comes back in the runtime's terms; the two coincide for the codes a
 * registration gives. */
UVMC_RT_SYMVER(cudaFreeHost)
cudaError_t UVMC_RT_FN(cudaFreeHost)(void *ptr)
{
    UVMC_RT_OR_RETURN(cudaFreeHost, cudaErrorSharedObjectSymbolNotFound);
    if (ptr && atomic_load_explicit(&uvmc_lazy_live, memory_order_relaxed))
        uvmc_thread_context(rt); /* as the real free would, before any driver call of ours */
    int r = uvmc_lazy_free(ptr);
    return r < 0 ? rt->cudaFreeHost(ptr) : (cudaError_t)r;
}

UVMC_RT_SYMVER(cudaHostRegister)
cudaError_t UVMC_RT_FN(cudaHostRegister)(void *ptr, size_t size, unsigned int flags)
{
    UVMC_RT_OR_RETURN(cudaHostRegister, cudaErrorSharedObjectSymbolNotFound);
    UVMC_LAZY_REGISTER(ptr, size, flags, rt, cudaError_t);
    return rt->cudaHostRegister(ptr, size, flags);
}

/* Unregistering a range still lazy forgets it; a converted one is unregistered for real. */
UVMC_RT_SYMVER(cudaHostUnregister)
cudaError_t UVMC_RT_FN(cudaHostUnregister)(void *ptr)
{
    UVMC_RT_OR_RETURN(cudaHostUnregister, cudaErrorSharedObjectSymbolNotFound);
    if (ptr && atomic_load_explicit(&uvmc_lazy_live, memory_order_relaxed))
        uvmc_thread_context(rt);
    int r = uvmc_lazy_unregister(ptr);
    return r < 0 ? rt->cudaHostUnregister(ptr) : (cudaError_t)r;
}
