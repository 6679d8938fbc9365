/* resolve.c: finds the real CUDA functions, once and lazily, without ever loading a CUDA library.
 * Interposed names: RTLD_NEXT, then by SONAME (RTLD_NOLOAD), then any loaded object's scope;
 * the driver functions the library calls: cuGetProcAddress at explicit versions. */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "uvmc.h"

struct uvmc_real uvmc_real;
struct uvmc_driver uvmc_drv;

/* glibc's own dlsym, found with dlvsym: the library's own lookups never go through another
 * object's dlsym (libuvmchunk-dlsym.so's, or an interposer's). Its version: GLIBC_2.34 since glibc
 * 2.34; before, the architecture's first (x86-64 GLIBC_2.2.5, aarch64 GLIBC_2.17). Where none
 * answers, the dlsym this library is linked to (the process's first), never NULL. */
uvmc_dlsym_fn uvmc_real_dlsym(void)
{
    static const char *const versions[] = {"GLIBC_2.34",
#if defined(__x86_64__)
                                           "GLIBC_2.2.5",
#elif defined(__aarch64__)
                                           "GLIBC_2.17",
#endif
                                           NULL};
    static _Atomic(uvmc_dlsym_fn) real;
    uvmc_dlsym_fn fn = atomic_load_explicit(&real, memory_order_acquire);
    if (UVMC_UNLIKELY(!fn)) {
        for (size_t i = 0; !fn && versions[i]; i++)
            fn = (uvmc_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", versions[i]);
        if (!fn)
            fn = dlsym;
        atomic_store_explicit(&real, fn, memory_order_release);
    }
    return fn;
}

/* The runtimes: each exports every name under a version node named after its SONAME (readelf -V).
 * uvmc_rt0 takes what a lookup by plain name finds (the default version of whichever runtime is
 * there, or a runtime built without versions). The driver's names are unversioned. */
struct uvmc_rt uvmc_rt12 = {.node = "libcudart.so.12"}, uvmc_rt13 = {.node = "libcudart.so.13"}, uvmc_rt0;
static const char *const uvmc_driver_sonames[] = {"libcuda.so.1", NULL};
static const char *const uvmc_runtime_sonames[] = {"libcudart.so.13", "libcudart.so.12", NULL};

/* Paths of the loaded objects, collected first: dlopen is not called from inside the walk. */
struct uvmc_objects {
    char *path[256];
    size_t n;
};

static int uvmc_collect_object(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct uvmc_objects *o = arg;
    if (info->dlpi_name && info->dlpi_name[0] && o->n < sizeof o->path / sizeof *o->path)
        o->path[o->n++] = strdup(info->dlpi_name);
    return 0;
}

/* How many objects were ever loaded and unloaded: a lookup that failed is worth repeating only
 * once this changed. */
static int uvmc_count_objects(struct dl_phdr_info *info, size_t size, void *arg)
{
    if (size >= offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs)
        *(unsigned long long *)arg = info->dlpi_adds + info->dlpi_subs;
    return 1; /* the counts are the same in every entry */
}

static unsigned long long uvmc_loaded_count(void)
{
    unsigned long long n = 0;
    dl_iterate_phdr(uvmc_count_objects, &n);
    return n;
}

/* True when fn lies in this library (a lookup through a scope that holds us came back to us). */
bool uvmc_is_ours(void *fn)
{
    Dl_info mine, theirs;
    return dladdr((void *)uvmc_resolve_real, &mine) && dladdr(fn, &theirs) && mine.dli_fbase == theirs.dli_fbase;
}

/* name in handle's scope: under the version node `version`, or by plain name when it is NULL. */
static void *uvmc_lookup(void *handle, const char *name, const char *version)
{
    return version ? dlvsym(handle, name, version) : uvmc_real_dlsym()(handle, name);
}

/* Last resort for a library loaded RTLD_LOCAL under a name we do not know (wheels rename the
 * runtimes they bundle, e.g. libcudart-1a2b3c4d.so.13, node unchanged): ask each loaded object's
 * own scope, whose dependencies are searched and which never contains a preloaded library. */
static void *uvmc_resolve_in_loaded_objects(const char *name, const char *version)
{
    struct uvmc_objects o = {.n = 0};
    void *fn = NULL;
    dl_iterate_phdr(uvmc_collect_object, &o);
    for (size_t i = 0; i < o.n; i++) {
        void *h = o.path[i] && !fn ? dlopen(o.path[i], RTLD_LAZY | RTLD_NOLOAD) : NULL;
        if (h) {
            fn = uvmc_lookup(h, name, version);
            if (fn && uvmc_is_ours(fn))
                fn = NULL;
            dlclose(h);
        }
        free(o.path[i]);
    }
    return fn;
}

/* Looks a name up past this library. RTLD_NEXT sees only the global scope; Python loads
 * extensions RTLD_LOCAL, so a library that came with one is found by its SONAME instead, and
 * failing that in whichever loaded object's scope defines it. */
static void *uvmc_resolve_name(const char *name, const char *const *sonames, const char *version)
{
    void *fn = uvmc_lookup(RTLD_NEXT, name, version);
    for (size_t i = 0; !fn && sonames[i]; i++) {
        void *h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            continue;
        fn = uvmc_lookup(h, name, version);
        dlclose(h); /* drops only the reference NOLOAD took */
    }
    return fn ? fn : uvmc_resolve_in_loaded_objects(name, version);
}

static pthread_mutex_t uvmc_resolve_lock = PTHREAD_MUTEX_INITIALIZER;

bool uvmc_resolve_real(void)
{
    bool all = true;
    pthread_mutex_lock(&uvmc_resolve_lock);
#define UVMC_RESOLVE_INTERPOSED(name, proto, lib) UVMC_RESOLVE_##lib(name)
#define UVMC_RESOLVE_DRIVER(name)                                                        \
    if (!uvmc_real.name)                                                                \
        __atomic_store_n((void **)&uvmc_real.name, uvmc_resolve_name(#name, uvmc_driver_sonames, NULL), \
                         __ATOMIC_RELEASE);                                             \
    all = all && uvmc_real.name;
#define UVMC_RESOLVE_RUNTIME(name)
    UVMC_INTERPOSED(UVMC_RESOLVE_INTERPOSED)
#undef UVMC_RESOLVE_RUNTIME
#undef UVMC_RESOLVE_DRIVER
#undef UVMC_RESOLVE_INTERPOSED
    pthread_mutex_unlock(&uvmc_resolve_lock);
    return all;
}

/* Under the lock: looks up what rt still misses, unless nothing was loaded since the last time. */
static void uvmc_rt_resolve_locked(struct uvmc_rt *rt)
{
    unsigned long long count = uvmc_loaded_count();
    if (count && count == rt->tried_at) /* 0: the count is unknown here, so always look */
        return;
    rt->tried_at = count;
    const char *one[] = {rt->node, NULL};
    const char *const *sonames = rt->node ? one : uvmc_runtime_sonames;
#define UVMC_RESOLVE_INTERPOSED(name, proto, lib) UVMC_RESOLVE_##lib(name)
#define UVMC_RESOLVE_RUNTIME(name)                                                       \
    if (!rt->name)                                                                      \
        __atomic_store_n((void **)&rt->name, uvmc_resolve_name(#name, sonames, rt->node), __ATOMIC_RELEASE);
#define UVMC_RESOLVE_DRIVER(name)
    UVMC_INTERPOSED(UVMC_RESOLVE_INTERPOSED)
#undef UVMC_RESOLVE_DRIVER
#define UVMC_RESOLVE_CALLED(name) UVMC_RESOLVE_RUNTIME(name)
    UVMC_RUNTIME_CALLED(UVMC_RESOLVE_CALLED)
#undef UVMC_RESOLVE_CALLED
#undef UVMC_RESOLVE_RUNTIME
#undef UVMC_RESOLVE_INTERPOSED
}

static bool uvmc_rt_has(const struct uvmc_rt *rt, size_t field)
{
    void *fn;
    memcpy(&fn, (const char *)rt + field, sizeof fn);
    return fn != NULL;
}

const struct uvmc_rt *uvmc_rt_fallback(struct uvmc_rt *own, size_t field)
{
    const struct uvmc_rt *rt = NULL;
    pthread_mutex_lock(&uvmc_resolve_lock);
    uvmc_rt_resolve_locked(own);
    if (uvmc_rt_has(own, field)) {
        rt = own;
    } else if (own == &uvmc_rt13) { /* the default set also answers lookups by plain name */
        uvmc_rt_resolve_locked(&uvmc_rt0);
        if (uvmc_rt_has(&uvmc_rt0, field))
            rt = &uvmc_rt0;
    }
    pthread_mutex_unlock(&uvmc_resolve_lock);
    return rt;
}

/* 0: not found yet (retry later), 1: ready, 2: driver present but unusable (given up). */
static atomic_int uvmc_driver_state;

typedef CUresult (*uvmc_gpa_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*uvmc_gpa_v1_fn)(const char *, void **, int, cuuint64_t);

static int uvmc_driver_try(void)
{
    /* NOLOAD: a process without the driver must never load it because of us (dlopen(3), RTLD_NOLOAD). */
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    if (!h)
        return 0;
    /* Taken from libcuda's own handle, so a cuGetProcAddress interposed in the global scope
     * (ours included, later) is never the one used here. The handle stays open: we keep pointers. */
    uvmc_gpa_v2_fn gpa2 = (uvmc_gpa_v2_fn)uvmc_real_dlsym()(h, "cuGetProcAddress_v2");
    uvmc_gpa_v1_fn gpa1 = (uvmc_gpa_v1_fn)uvmc_real_dlsym()(h, "cuGetProcAddress");
    if (!gpa2 && !gpa1) {
        uvmc_log(UVMC_LOG_WARN, "libcuda.so.1 has no cuGetProcAddress; copies pass through unsplit");
        return 2;
    }
    int state = 1;
#define UVMC_RESOLVE_DRIVER(name, version, type, required)                                        \
    {                                                                                             \
        void *fn = NULL;                                                                          \
        CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SUCCESS;                          \
        CUresult r = gpa2 ? gpa2(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT, &st)           \
                          : gpa1(#name, &fn, version, CU_GET_PROC_ADDRESS_DEFAULT);               \
        if (r != CUDA_SUCCESS || st != CU_GET_PROC_ADDRESS_SUCCESS)                               \
            fn = NULL;                                                                            \
        *(void **)&uvmc_drv.name = fn;                                                            \
        if (!fn && (required)) {                                                                  \
            uvmc_log(UVMC_LOG_WARN, "driver has no %s (ABI %d); copies pass through unsplit",     \
                     #name, version);                                                             \
            state = 2;                                                                            \
        } else if (!fn) {                                                                         \
            uvmc_log(UVMC_LOG_INFO, "driver has no %s (ABI %d); that hint is skipped", #name,     \
                     version);                                                                    \
        }                                                                                         \
    }
    UVMC_DRIVER_CALLED(UVMC_RESOLVE_DRIVER)
#undef UVMC_RESOLVE_DRIVER
    return state;
}

bool uvmc_driver_ready(void)
{
    int state = atomic_load_explicit(&uvmc_driver_state, memory_order_acquire);
    if (UVMC_LIKELY(state == 1))
        return true;
    if (state == 2)
        return false;
    pthread_mutex_lock(&uvmc_resolve_lock);
    state = atomic_load_explicit(&uvmc_driver_state, memory_order_relaxed);
    if (state == 0) {
        state = uvmc_driver_try();
        atomic_store_explicit(&uvmc_driver_state, state, memory_order_release);
    }
    pthread_mutex_unlock(&uvmc_resolve_lock);
    return state == 1;
}

/* Held across fork() so the child never inherits it locked by a thread that does not exist there. */
void uvmc_resolve_atfork_prepare(void) { pthread_mutex_lock(&uvmc_resolve_lock); }
void uvmc_resolve_atfork_release(void) { pthread_mutex_unlock(&uvmc_resolve_lock); }

void uvmc_report_missing(const char *name)
{
    static atomic_bool said;
    if (!atomic_exchange(&said, true))
        uvmc_log(UVMC_LOG_ERROR, "cannot find the real %s in this process; failing the call", name);
}
