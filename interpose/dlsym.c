/* dlsym.c: the opt-in path for statically linked runtimes (intercept_dlsym = on). Such programs
 * reach the driver only through a dlsym of "cuGetProcAddress_v2" on libcuda; that lookup gets ours. */
#include <dlfcn.h>

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
/* 1 for "cuGetProcAddress", 2 for "cuGetProcAddress_v2", else 0. Plain loops, no libc: sanitizer
 * runtimes call dlsym while they start, before their own interceptors (strcmp among them) work. */
static int uvmc_query_name(const char *name)
{
    static const char q[] = "cuGetProcAddress";
    size_t i = 0;
    for (; q[i]; i++)
        if (name[i] != q[i])
            return 0;
    if (name[i] == '\0')
        return 1;
    return name[i] == '_' && name[i + 1] == 'v' && name[i + 2] == '2' && name[i + 3] == '\0' ? 2 : 0;
}

/* The real lookup, then our query of the same ABI in its place. Runs only for the two names with
 * intercept_dlsym = on; a RTLD_NEXT lookup made here resolves past this library, not past the
 * caller (documented in the README). */
static void *uvmc_dlsym_redirect(void *handle, const char *name)
{
    void *fn = uvmc_real_dlsym()(handle, name);
    if (!fn)
        return fn;
    bool v2 = uvmc_query_name(name) == 2;
    /* RTLD_DEFAULT or dlopen(NULL) before libcuda is loaded finds our own export: that is already
     * the answer, and must never be taken for the real query (it would call itself). */
    if (uvmc_is_ours(fn))
        return fn;
    uvmc_resolve_adopt(v2 ? "cuGetProcAddress_v2" : "cuGetProcAddress", fn);
    uvmc_log(UVMC_LOG_DEBUG, "dlsym of %s answered with libuvmchunk's query", name);
    return v2 ? (void *)&cuGetProcAddress_v2 : (void *)&cuGetProcAddress;
}

/* Called by the dlsym stub for every lookup in the process: a string test, nothing else, unless
 * the name is one of the two queries. This file is built without sanitizer instrumentation. */
void *uvmc_dlsym_target(void *handle, const char *name)
{
    (void)handle;
    uvmc_dlsym_fn real = uvmc_real_dlsym();
    if (UVMC_LIKELY(!name || !uvmc_query_name(name)) || uvmc_tls_busy)
        return (void *)real;
    uvmc_init(); /* the library's own lookups call glibc's dlsym directly: no recursion */
    return uvmc_cfg.enabled && uvmc_cfg.intercept_dlsym ? (void *)uvmc_dlsym_redirect : (void *)real;
}
#endif
