/* hostalloc.c: the page-locked allocation and registration entry points. Requests of at least
 * pinned_threshold bytes with no flag but Portable are served lazily (lazy.c); frees and
 * unregistrations of those are handled here, every other pointer passes through. */
#include <stdint.h>

#include "uvmc.h"

/* PyTorch pins a checkpoint destination rounded up to a power of two before the copy (BRIEF §1):
 * up to twice the tensor, locked. Served lazily, it commits only the bytes written and locks
 * nothing unless a use asks for pinned memory. Only flags that promise no device mapping and no
 * write-combining qualify: Portable (1) is the one such flag, with the same value in the runtime
 * and the driver, for allocations and registrations alike. */
static bool uvmc_lazy_candidate(size_t size, unsigned flags)
{
    _Static_assert(cudaHostAllocPortable == CU_MEMHOSTALLOC_PORTABLE, "one flag test serves both APIs");
    _Static_assert(cudaHostRegisterPortable == CU_MEMHOSTREGISTER_PORTABLE, "and both registrations");
    _Static_assert(cudaHostAllocPortable == cudaHostRegisterPortable, "and allocations and registrations");
    return uvmc_cfg.enabled && uvmc_cfg.pinned_threshold != 0 && size >= uvmc_cfg.pinned_threshold &&
           (flags & ~(unsigned)cudaHostAllocPortable) == 0 && !uvmc_tls_busy;
}

/* Serving lazily needs what the real call needs: a current context. The runtime's entry points set
 * one up as the real call would (and a failure there, in a forked child say, sends the request to
 * the real call to report); the driver's only look. */
#define UVMC_LAZY_ALLOC(pp, size, flags, runtime, ok)                                                 \
    if ((pp) && uvmc_lazy_candidate((size), (flags)) && uvmc_thread_context(runtime) &&              \
        (*(pp) = uvmc_lazy_alloc((size), (flags))))                                                  \
        return ok;

cudaError_t cudaHostAlloc(void **ptr, size_t size, unsigned int flags)
{
    UVMC_REAL_OR_RETURN(cudaHostAlloc, cudaErrorSharedObjectSymbolNotFound);
    UVMC_LAZY_ALLOC(ptr, size, flags, true, cudaSuccess);
    return uvmc_real.cudaHostAlloc(ptr, size, flags);
}

cudaError_t cudaMallocHost(void **ptr, size_t size)
{
    UVMC_REAL_OR_RETURN(cudaMallocHost, cudaErrorSharedObjectSymbolNotFound);
    UVMC_LAZY_ALLOC(ptr, size, 0, true, cudaSuccess);
    return uvmc_real.cudaMallocHost(ptr, size);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
    UVMC_REAL_OR_RETURN(cuMemHostAlloc, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    UVMC_LAZY_ALLOC(pp, bytesize, flags, false, CUDA_SUCCESS);
    return uvmc_real.cuMemHostAlloc(pp, bytesize, flags);
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    UVMC_REAL_OR_RETURN(cuMemAllocHost_v2, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    UVMC_LAZY_ALLOC(pp, bytesize, 0, false, CUDA_SUCCESS);
    return uvmc_real.cuMemAllocHost_v2(pp, bytesize);
}

/* A free of a lazy buffer: unregistered first if it was pinned (as the real free would), then
 * unmapped. The driver's code comes back in the runtime's terms; the two coincide for the codes a
 * registration gives. */
cudaError_t cudaFreeHost(void *ptr)
{
    UVMC_REAL_OR_RETURN(cudaFreeHost, cudaErrorSharedObjectSymbolNotFound);
    if (ptr && atomic_load_explicit(&uvmc_lazy_live, memory_order_relaxed))
        uvmc_thread_context(true); /* as the real free would, before any driver call of ours */
    int r = uvmc_lazy_free(ptr);
    return r < 0 ? uvmc_real.cudaFreeHost(ptr) : (cudaError_t)r;
}

CUresult cuMemFreeHost(void *p)
{
    UVMC_REAL_OR_RETURN(cuMemFreeHost, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    int r = uvmc_lazy_free(p);
    return r < 0 ? uvmc_real.cuMemFreeHost(p) : (CUresult)r;
}

/* Memory the driver already has registered (or allocated pinned): the real call answers. */
static bool uvmc_registered_already(void *ptr)
{
    unsigned int type = 0;
    CUpointer_attribute at = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    void *data = &type;
    return uvmc_driver_ready() && uvmc_drv.cuPointerGetAttributes(1, &at, &data, (CUdeviceptr)(uintptr_t)ptr) == CUDA_SUCCESS &&
           type == CU_MEMORYTYPE_HOST;
}

/* PyTorch's pinned_use_cuda_host_register option and async checkpoint staging pin with a
 * registration; a very large one fails with "invalid argument" (BRIEF §1, §9). Kept lazy like an
 * allocation: nothing is locked until a use asks for it. Mapped, IoMemory and ReadOnly
 * registrations pass through. */
#define UVMC_LAZY_REGISTER(ptr, size, flags, runtime, type)                                            \
    if ((ptr) && uvmc_lazy_overlaps_undecided((ptr), (size)))                                          \
        return (type)CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;                                        \
    if ((ptr) && uvmc_lazy_candidate((size), (flags)) && uvmc_thread_context(runtime) &&              \
        !uvmc_registered_already(ptr)) {                                                               \
        int r_ = uvmc_lazy_register((ptr), (size), (flags), (runtime));                                        \
        if (r_ >= 0)                                                                                   \
            return (type)r_;                                                                           \
    }

cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags)
{
    UVMC_REAL_OR_RETURN(cudaHostRegister, cudaErrorSharedObjectSymbolNotFound);
    UVMC_LAZY_REGISTER(ptr, size, flags, true, cudaError_t);
    return uvmc_real.cudaHostRegister(ptr, size, flags);
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    UVMC_REAL_OR_RETURN(cuMemHostRegister_v2, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    UVMC_LAZY_REGISTER(p, bytesize, Flags, false, CUresult);
    return uvmc_real.cuMemHostRegister_v2(p, bytesize, Flags);
}

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    UVMC_REAL_OR_RETURN(cuMemHostRegister, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    UVMC_LAZY_REGISTER(p, bytesize, Flags, false, CUresult);
    return uvmc_real.cuMemHostRegister(p, bytesize, Flags);
}

/* Unregistering a range still lazy forgets it; a converted one is unregistered for real. */
cudaError_t cudaHostUnregister(void *ptr)
{
    UVMC_REAL_OR_RETURN(cudaHostUnregister, cudaErrorSharedObjectSymbolNotFound);
    if (ptr && atomic_load_explicit(&uvmc_lazy_live, memory_order_relaxed))
        uvmc_thread_context(true);
    int r = uvmc_lazy_unregister(ptr);
    return r < 0 ? uvmc_real.cudaHostUnregister(ptr) : (cudaError_t)r;
}

CUresult cuMemHostUnregister(void *p)
{
    UVMC_REAL_OR_RETURN(cuMemHostUnregister, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    int r = uvmc_lazy_unregister(p);
    return r < 0 ? uvmc_real.cuMemHostUnregister(p) : (CUresult)r;
}
