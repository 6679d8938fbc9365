/* hostalloc.h: what the page-locked allocation and registration entry points of both APIs share
 * (hostalloc.c, the driver's; runtime_alloc.c, the runtime's): which requests are served lazily. */
#ifndef UVMC_HOSTALLOC_H
#define UVMC_HOSTALLOC_H

#include "uvmc.h"

/* PyTorch pins a checkpoint destination rounded up to a power of two before the copy
 * (aten/src/ATen/cuda/CachingHostAllocator.cpp):
 * up to twice the tensor, locked. Served lazily, it commits only the bytes written and locks
 * nothing unless a use asks for pinned memory. Only flags that promise no device mapping and no
 * write-combining qualify: Portable (1) is the one such flag, with the same value in the runtime
 * and the driver, for allocations and registrations alike. */
static inline bool uvmc_lazy_candidate(size_t size, unsigned flags)
{
    _Static_assert(cudaHostAllocPortable == CU_MEMHOSTALLOC_PORTABLE, "one flag test serves both APIs");
    _Static_assert(cudaHostRegisterPortable == CU_MEMHOSTREGISTER_PORTABLE, "and both registrations");
    _Static_assert(cudaHostAllocPortable == cudaHostRegisterPortable, "and allocations and registrations");
    return uvmc_cfg.enabled && uvmc_cfg.pinned_threshold != 0 && size >= uvmc_cfg.pinned_threshold &&
           (flags & ~(unsigned)cudaHostAllocPortable) == 0 && !uvmc_tls_busy;
}

/* Serving lazily needs what the real call needs: a current context. The runtime's entry points set
 * one up as the real call would (and a failure there, in a forked child say, sends the request to
 * the real call to report); the driver's only look (rt NULL). */
#define UVMC_LAZY_ALLOC(pp, size, flags, rt, ok)                                                      \
    if ((pp) && uvmc_lazy_candidate((size), (flags)) && uvmc_thread_context(rt) &&                   \
        (*(pp) = uvmc_lazy_alloc((size), (flags))))                                                  \
        return ok;

/* Memory the driver already has registered (or allocated pinned): the real call answers. */
static inline bool uvmc_registered_already(void *ptr)
{
    unsigned int type = 0;
    CUpointer_attribute at = CU_POINTER_ATTRIBUTE_MEMORY_TYPE;
    void *data = &type;
    return uvmc_driver_ready() && uvmc_drv.cuPointerGetAttributes(1, &at, &data, (CUdeviceptr)(uintptr_t)ptr) == CUDA_SUCCESS &&
           type == CU_MEMORYTYPE_HOST;
}

/* PyTorch's pinned_use_cuda_host_register option and async checkpoint staging pin with a
 * registration; a very large one fails with "invalid argument" (pytorch#152335, #139884). Kept lazy like an
 * allocation: nothing is locked until a use asks for it. Mapped, IoMemory and ReadOnly
 * registrations pass through. */
#define UVMC_LAZY_REGISTER(ptr, size, flags, rt, type)                                                 \
    if ((ptr) && uvmc_lazy_overlaps_undecided((ptr), (size)))                                          \
        return (type)CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;                                        \
    if ((ptr) && uvmc_lazy_candidate((size), (flags)) && uvmc_thread_context(rt) &&                   \
        !uvmc_registered_already(ptr)) {                                                               \
        int r_ = uvmc_lazy_register((ptr), (size), (flags), (rt) != NULL);                             \
        if (r_ >= 0)                                                                                   \
            return (type)r_;                                                                           \
    }

#endif
