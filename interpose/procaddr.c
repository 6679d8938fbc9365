/* procaddr.c: the driver's entry-point queries (cuGetProcAddress legacy and _v2; the runtime's
 * cudaGetDriverEntryPoint* are in runtime_procaddr.c): the real query answers; a driver function we
 * wrap comes back as our wrapper of the same ABI. */
#include <dlfcn.h>
#include <string.h>

#include "uvmc.h"

/* Which ELF symbol the real query returned decides the wrapper, as cuinterpose does:
 * cuMemcpyDtoH_v2_ptds for a per-thread request gets our _ptds wrapper, an ABI we do not wrap
 * (or an address that is not exactly a symbol) is returned untouched. */
void *uvmc_wrap_entry_point(void *fn)
{
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_sname || info.dli_saddr != fn)
        return fn;
#define UVMC_LIB_WRAPPED_RUNTIME 0
#define UVMC_LIB_WRAPPED_DRIVER 1
#define UVMC_WRAP_IF(name, proto, lib)                                      \
    if (UVMC_LIB_WRAPPED_##lib && strcmp(info.dli_sname, #name) == 0)       \
        return (void *)&name;
    UVMC_INTERPOSED(UVMC_WRAP_IF)
#undef UVMC_WRAP_IF
    return fn;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags)
{
    UVMC_REAL_OR_RETURN(cuGetProcAddress, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    CUresult r = uvmc_real.cuGetProcAddress(symbol, pfn, cudaVersion, flags);
    if (r == CUDA_SUCCESS && pfn)
        *pfn = uvmc_wrap_entry_point(*pfn);
    return r;
}

/* symbolStatus may be NULL (HAMi-core#36 crashed on the difference between the two ABIs). */
CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *symbolStatus)
{
    UVMC_REAL_OR_RETURN(cuGetProcAddress_v2, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND);
    CUresult r = uvmc_real.cuGetProcAddress_v2(symbol, pfn, cudaVersion, flags, symbolStatus);
    if (r == CUDA_SUCCESS && pfn)
        *pfn = uvmc_wrap_entry_point(*pfn);
    return r;
}
