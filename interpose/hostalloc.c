/* hostalloc.c: the driver's page-locked allocation and registration entry points. Requests of at
 * least pinned_threshold bytes with no flag but Portable are served lazily (lazy.c, hostalloc.h);
 * frees and unregistrations of those are handled here, every other pointer passes through. The
 * runtime's are in runtime_alloc.c. */
#include <stdint.h>

#include "hostalloc.h"

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags)
{
    UVMC_REAL_OR_RETURN(cuMemHostAlloc, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    UVMC_LAZY_ALLOC(pp, bytesize, flags, NULL, CUDA_SUCCESS);
    return uvmc_real.cuMemHostAlloc(pp, bytesize, flags);
}

CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
    UVMC_REAL_OR_RETURN(cuMemAllocHost_v2, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    UVMC_LAZY_ALLOC(pp, bytesize, 0, NULL, CUDA_SUCCESS);
    return uvmc_real.cuMemAllocHost_v2(pp, bytesize);
}

CUresult cuMemFreeHost(void *p)
{
    UVMC_REAL_OR_RETURN(cuMemFreeHost, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    int r = uvmc_lazy_free(p);
    return r < 0 ? uvmc_real.cuMemFreeHost(p) : (CUresult)r;
}

CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
    UVMC_REAL_OR_RETURN(cuMemHostRegister_v2, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    UVMC_LAZY_REGISTER(p, bytesize, Flags, NULL, CUresult);
    return uvmc_real.cuMemHostRegister_v2(p, bytesize, Flags);
}

CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags)
{
    UVMC_REAL_OR_RETURN(cuMemHostRegister, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    UVMC_LAZY_REGISTER(p, bytesize, Flags, NULL, CUresult);
    return uvmc_real.cuMemHostRegister(p, bytesize, Flags);
}

/* Unregistering a range still lazy forgets it; a converted one is unregistered for real. */
CUresult cuMemHostUnregister(void *p)
{
    UVMC_REAL_OR_RETURN(cuMemHostUnregister, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    int r = uvmc_lazy_unregister(p);
    return r < 0 ? uvmc_real.cuMemHostUnregister(p) : (CUresult)r;
}
