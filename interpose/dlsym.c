/* dlsym.c: libuvmchunk-dlsym.so, the opt-in support for statically linked CUDA runtimes (nvcc's
 * default), preloaded before libuvmchunk.so (`uvmchunk-run --static-runtime`). Such a program
 * reaches the driver only through dlsym(libcuda, "cuGetProcAddress_v2"): that lookup gets
 * libuvmchunk's query, which hands back its wrappers. The object exports dlsym alone and is kept
 * out of libuvmchunk.so: a dlsym export there would come before, and bypass, a dlsym exported by an
 * object loaded later (HAMi-core's libvgpu.so through /etc/ld.so.preload enforces memory limits
 * that way). Built without sanitizer instrumentation: it runs inside every dlsym of the process,
 * including the ones sanitizer runtimes make while they start. */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

typedef void *(*uvmc_dlsym_fn)(void *, const char *);

static void *uvmc_no_dlsym(void *handle, const char *name)
{
    (void)handle;
    (void)name;
    return NULL;
}

/* glibc's dlsym, found with dlvsym so the lookup never comes back here. x86-64 only: GLIBC_2.34
 * since glibc 2.34, GLIBC_2.2.5 (libdl) before. */
static uvmc_dlsym_fn uvmc_glibc_dlsym(void)
{
    static _Atomic(uvmc_dlsym_fn) glibc;
    uvmc_dlsym_fn fn = atomic_load_explicit(&glibc, memory_order_acquire);
    if (__builtin_expect(!fn, 0)) {
        fn = (uvmc_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
        if (!fn)
            fn = (uvmc_dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
        if (!fn)
            fn = uvmc_no_dlsym; /* never jump to NULL */
        atomic_store_explicit(&glibc, fn, memory_order_release);
    }
    return fn;
}

/* The dlsym that would have answered without this object: the first one past it (an interposer's
 * loaded later, say HAMi-core's, however it is versioned; else glibc's). Every lookup is handed to
 * it, with the caller's return address, unless redirected. */
static uvmc_dlsym_fn uvmc_next_dlsym(void)
{
    static _Atomic(uvmc_dlsym_fn) next;
    uvmc_dlsym_fn fn = atomic_load_explicit(&next, memory_order_acquire);
    if (__builtin_expect(!fn, 0)) {
        fn = (uvmc_dlsym_fn)uvmc_glibc_dlsym()(RTLD_NEXT, "dlsym");
        if (!fn)
            fn = uvmc_glibc_dlsym();
        atomic_store_explicit(&next, fn, memory_order_release);
    }
    return fn;
}

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

/* True when the lookup comes from a CUDA runtime (libcudart.so.N, or a wheel's renamed
 * libcudart-1a2b3c4d.so.N): a dynamically linked runtime fetches its driver functions through its
 * own lookup, and keeps them (libuvmchunk wraps its entry points by name instead). */
static bool uvmc_from_runtime(const void *caller)
{
    Dl_info info;
    if (!caller || !dladdr(caller, &info) || !info.dli_fname)
        return false;
    const char *base = info.dli_fname;
    for (const char *p = info.dli_fname; *p; p++)
        if (*p == '/')
            base = p + 1;
    static const char rt[] = "libcudart";
    for (size_t i = 0; rt[i]; i++)
        if (base[i] != rt[i])
            return false;
    return true;
}

/* The lookup as it would have gone; then libuvmchunk's query of the same name in its place, when
 * libuvmchunk is loaded and its query forwards to the very function the lookup found (libcuda.so.1's;
 * not, say, a later interposer's own hook, which it keeps). A RTLD_NEXT lookup made here resolves
 * past this object, not past its caller: libcuda's query has one definition, so the answer is the
 * same. */
static void *uvmc_dlsym_redirect(void *handle, const char *name)
{
    void *fn = uvmc_next_dlsym()(handle, name);
    if (!fn)
        return NULL;
    uvmc_dlsym_fn glibc = uvmc_glibc_dlsym();
    void *lib = dlopen("libuvmchunk.so", RTLD_LAZY | RTLD_NOLOAD);
    void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    void *ours = lib ? glibc(lib, name) : NULL;
    void *theirs = cuda ? glibc(cuda, name) : NULL;
    if (lib)
        dlclose(lib); /* drops only the reference NOLOAD took */
    if (cuda)
        dlclose(cuda);
    return ours && theirs == fn ? ours : fn;
}

/* Called by the dlsym stub (dlsym_x86_64.S) for every lookup in the process, with the caller's
 * return address: a string test, nothing else, unless the name is one of the two queries. */
__attribute__((visibility("hidden"))) void *uvmc_dlsym_target(void *handle, const char *name, const void *caller)
{
    (void)handle;
    if (__builtin_expect(!name || !uvmc_query_name(name), 1) || uvmc_from_runtime(caller))
        return (void *)uvmc_next_dlsym();
    return (void *)uvmc_dlsym_redirect;
}
