/* runtime_procaddr.c: the runtime's entry-point queries (cudaGetDriverEntryPoint[ByVersion] and
 * their _ptsz forms), compiled once per CUDA major (uvmc.h, UVMC_RT_MAJOR): the caller's runtime
 * answers; a driver function we wrap comes back as our wrapper of the same ABI (procaddr.c). */
#include <stddef.h>

#include "uvmc.h"

#define UVMC_RT_QUERY(name, ...)                                                  \
    UVMC_RT_OR_RETURN(name, cudaErrorSharedObjectSymbolNotFound);                 \
    cudaError_t r = rt->name(__VA_ARGS__);                                        \
    if (r == cudaSuccess && funcPtr)                                              \
        *funcPtr = uvmc_wrap_entry_point(*funcPtr);                               \
    return r;

UVMC_RT_SYMVER(cudaGetDriverEntryPoint)
cudaError_t UVMC_RT_FN(cudaGetDriverEntryPoint)(const char *symbol, void **funcPtr, unsigned long long flags,
                                                enum cudaDriverEntryPointQueryResult *driverStatus)
{
    UVMC_RT_QUERY(cudaGetDriverEntryPoint, symbol, funcPtr, flags, driverStatus)
}

UVMC_RT_SYMVER(cudaGetDriverEntryPoint_ptsz)
cudaError_t UVMC_RT_FN(cudaGetDriverEntryPoint_ptsz)(const char *symbol, void **funcPtr, unsigned long long flags,
                                                     enum cudaDriverEntryPointQueryResult *driverStatus)
{
    UVMC_RT_QUERY(cudaGetDriverEntryPoint_ptsz, symbol, funcPtr, flags, driverStatus)
}

UVMC_RT_SYMVER(cudaGetDriverEntryPointByVersion)
cudaError_t UVMC_RT_FN(cudaGetDriverEntryPointByVersion)(const char *symbol, void **funcPtr, unsigned int cudaVersion,
                                                         unsigned long long flags,
                                                         enum cudaDriverEntryPointQueryResult *driverStatus)
{
    UVMC_RT_QUERY(cudaGetDriverEntryPointByVersion, symbol, funcPtr, cudaVersion, flags, driverStatus)
}

UVMC_RT_SYMVER(cudaGetDriverEntryPointByVersion_ptsz)
cudaError_t UVMC_RT_FN(cudaGetDriverEntryPointByVersion_ptsz)(const char *symbol, void **funcPtr,
                                                              unsigned int cudaVersion, unsigned long long flags,
                                                              enum cudaDriverEntryPointQueryResult *driverStatus)
{
    UVMC_RT_QUERY(cudaGetDriverEntryPointByVersion_ptsz, symbol, funcPtr, cudaVersion, flags, driverStatus)
}
