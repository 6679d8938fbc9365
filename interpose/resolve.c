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

/* Libraries that may define a real function, newest first. Runtimes export each name under a
 * version node named after their SONAME (BRIEF §2); the driver's names are unversioned. */
static const char *const uvmc_runtime_sonames[] = {"libcudart.so.13", "libcudart.so.12", NULL};
static const char *const uvmc_driver_sonames[] = {"libcuda.so.1", NULL};
#define UVMC_LIBS_RUNTIME uvmc_runtime_sonames
#define UVMC_LIBS_DRIVER uvmc_driver_sonames

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

/* True when fn lies in this library (a lookup through a scope that holds us came back to us). */
bool uvmc_is_ours(void *fn)
{
    Dl_info mine, theirs;
    return dladdr((void *)uvmc_resolve_real, &mine) && dladdr(fn, &theirs) && mine.dli_fbase == theirs.dli_fbase;
}

/* Last resort for a library loaded RTLD_LOCAL under a name we do not know (wheels rename the
 * runtimes they bundle, e.g. libcudart-1a2b3c4d.so.13): ask each loaded object's own scope, whose
 * dependencies are searched and which never contains a preloaded library. */
static void *uvmc_resolve_in_loaded_objects(const char *name)
{
    struct uvmc_objects o = {.n = 0};
    void *fn = NULL;
    dl_iterate_phdr(uvmc_collect_object, &o);
    for (size_t i = 0; i < o.n; i++) {
        void *h = o.path[i] && !fn ? dlopen(o.path[i], RTLD_LAZY | RTLD_NOLOAD) : NULL;
        if (h) {
            fn = uvmc_real_dlsym()(h, name);
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
static void *uvmc_resolve_name(const char *name, const char *const *sonames)
{
    uvmc_dlsym_fn sym = uvmc_real_dlsym();
    void *fn = sym(RTLD_NEXT, name);
    for (size_t i = 0; !fn && sonames[i]; i++) {
        void *h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            continue;
        fn = dlvsym(h, name, sonames[i]);
        if (!fn)
            fn = sym(h, name); /* unversioned: the driver, or such a build of the runtime */
        dlclose(h);              /* drops only the reference NOLOAD took */
    }
    return fn ? fn : uvmc_resolve_in_loaded_objects(name);
}

static pthread_mutex_t uvmc_resolve_lock = PTHREAD_MUTEX_INITIALIZER;

bool uvmc_resolve_real(void)
{
    bool all = true;
    pthread_mutex_lock(&uvmc_resolve_lock);
#define UVMC_RESOLVE_INTERPOSED(name, proto, lib)                                       \
    if (!uvmc_real.name)                                                                \
        *(void **)&uvmc_real.name = uvmc_resolve_name(#name, UVMC_LIBS_##lib);          \
    all = all && uvmc_real.name;
    UVMC_INTERPOSED(UVMC_RESOLVE_INTERPOSED)
#undef UVMC_RESOLVE_INTERPOSED
#define UVMC_RESOLVE_CALLED(name) \
    if (!uvmc_real.name)          \
        *(void **)&uvmc_real.name = uvmc_resolve_name(#name, UVMC_LIBS_RUNTIME);
    UVMC_RUNTIME_CALLED(UVMC_RESOLVE_CALLED)
#undef UVMC_RESOLVE_CALLED
    pthread_mutex_unlock(&uvmc_resolve_lock);
    return all;
}

/* 0: not found yet (retry later), 1: ready, 2: driver present but unusable (given up). */
static atomic_int uvmc_driver_state;

typedef CUresult (*uvmc_gpa_v2_fn)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);
typedef CUresult (*uvmc_gpa_v1_fn)(const char *, void **, int, cuuint64_t);

static int uvmc_driver_try(void)
{
    /* NOLOAD: a process without the driver must never load it because of us (BRIEF §2). */
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
