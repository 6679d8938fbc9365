/* dlsym.c: the opt-in path for statically linked runtimes (intercept_dlsym = on). Such programs
 * reach the driver only through dlsym(libcuda, "cuGetProcAddress_v2"); that lookup gets ours. */
#include <dlfcn.h>
#include <string.h>

#include "uvmc.h"

static _Atomic(uvmc_dlsym_fn) uvmc_real_dlsym_ptr;

/* glibc's own dlsym, found with dlvsym so the lookup never goes through our dlsym (BRIEF §2). */
uvmc_dlsym_fn uvmc_real_dlsym(void)
{
    uvmc_dlsym_fn fn = atomic_load_explicit(&uvmc_real_dlsym_ptr, memory_order_acquire);
    if (UVMC_UNLIKELY(!fn)) {
        fn = (uvmc_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!fn)
            fn = (uvmc_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        atomic_store_explicit(&uvmc_real_dlsym_ptr, fn, memory_order_release);
    }
    return fn;
}

#if defined(__x86_64__)
/* The real lookup, then our query of the same ABI in its place. Runs only for the two names with
 * intercept_dlsym = on; a RTLD_NEXT lookup made here resolves past this library, not past the
 * caller (documented in the README). */
static void *uvmc_dlsym_redirect(void *handle, const char *name)
{
    void *fn = uvmc_real_dlsym()(handle, name);
    if (!fn)
        return fn;
    bool v2 = strcmp(name, "cuGetProcAddress_v2") == 0;
    uvmc_resolve_adopt(v2 ? "cuGetProcAddress_v2" : "cuGetProcAddress", fn);
    uvmc_log(UVMC_LOG_DEBUG, "dlsym(%s) answered with libuvmchunk's query", name);
    return v2 ? (void *)&cuGetProcAddress_v2 : (void *)&cuGetProcAddress;
}

/* Called by the dlsym stub for every lookup in the process: a string test, nothing else, unless
 * the name is one of the two queries. */
void *uvmc_dlsym_target(void *handle, const char *name)
{
    (void)handle;
    uvmc_dlsym_fn real = uvmc_real_dlsym();
    if (UVMC_LIKELY(!name || strncmp(name, "cuGetProcAddress", 16) != 0) || uvmc_tls_busy ||
        (name[16] != '\0' && strcmp(name + 16, "_v2") != 0))
        return (void *)real;
    uvmc_init(); /* the library's own lookups call glibc's dlsym directly: no recursion */
    return uvmc_cfg.enabled && uvmc_cfg.intercept_dlsym ? (void *)uvmc_dlsym_redirect : (void *)real;
}
#endif
