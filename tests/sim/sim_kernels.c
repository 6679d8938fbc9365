/* sim_kernels.c: kernel launches on a device that runs no device code. UVMSIM_KERNELS=fail (default)
 * makes every launch fail with one clear line naming the kernel; noop makes it succeed in stream order
 * without running anything, counted by kernel name, and UVMSIM_KERNELS_ALLOW narrows noop to the
 * named kernels. PyTorch's fill kernels write their value. Also the driver's launch entry points. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* One kernel by its (mangled) name: what is shown, whether noop may skip it, what a fill writes. */
struct kname {
    char *mangled;            /* hash key */
    char *shown;              /* demangled when a demangler is loaded, else the mangled name */
    int allowed;              /* UVMSIM_KERNELS=noop and UVMSIM_KERNELS_ALLOW names it (or is unset) */
    int fill_esize;           /* a PyTorch fill kernel whose output is linear: bytes per element */
    int said;                 /* its refusal was printed */
    unsigned long long skipped;
    UT_hash_handle hh;
};
/* A handle the runtime handed out (cudaGetKernel, cudaGetFuncBySymbol): its kernel, for driver launches. */
struct khandle { const void *handle; struct kname *k; UT_hash_handle hh; };

static pthread_mutex_t g_kmu = PTHREAD_MUTEX_INITIALIZER; /* the tables below; never held across a wait */
static struct kname *g_names;
static struct khandle *g_handles;
static unsigned long long g_skipped;
static unsigned long long g_refused; /* launches refused (fail mode, or noop and not allowed) */
static int g_unknown_said; /* launches of unregistered addresses: said once */

static int g_noop;
static char **g_allow; /* NULL: every kernel */
static size_t g_nallow;

void sim_kernels_load(void) {
    const char *v = getenv("UVMSIM_KERNELS");
    if (v && *v) {
        if (!strcmp(v, "noop")) g_noop = 1;
        else if (strcmp(v, "fail")) fprintf(stderr, "uvmsim: UVMSIM_KERNELS=%s is not understood; keeping fail\n", v);
    }
    const char *a = getenv("UVMSIM_KERNELS_ALLOW");
    if (!a || !*a) return;
    char *copy = strdup(a);
    for (char *save = NULL, *t = copy ? strtok_r(copy, ",", &save) : NULL; t; t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ') t++;
        size_t n = strlen(t);
        while (n && t[n - 1] == ' ') t[--n] = '\0';
        char **na = n ? realloc(g_allow, (g_nallow + 1) * sizeof *na) : NULL;
        if (na) { g_allow = na; g_allow[g_nallow++] = strdup(t); }
    }
    free(copy);
    if (!g_allow) g_allow = calloc(1, sizeof *g_allow); /* only separators: nothing is allowed */
}

/* __cxa_demangle when the process has a C++ runtime (every PyTorch process); looked up once. The
 * simulator links none, so without one the mangled name is shown. */
typedef char *(*demangle_fn)(const char *, char *, size_t *, int *);
static demangle_fn g_demangle;
static pthread_once_t g_demangle_once = PTHREAD_ONCE_INIT;
static void find_demangler(void) {
    g_demangle = (demangle_fn)dlsym(RTLD_DEFAULT, "__cxa_demangle");
    if (!g_demangle) {
        void *h = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);
        if (h) g_demangle = (demangle_fn)dlsym(h, "__cxa_demangle");
    }
}
static char *demangle(const char *m) {
    pthread_once(&g_demangle_once, find_demangler);
    int st = -1;
    char *r = g_demangle && m[0] == '_' && m[1] == 'Z' ? g_demangle(m, NULL, NULL, &st) : NULL;
    if (r && st == 0) return r;
    free(r);
    return strdup(m);
}

/* PyTorch's fill kernel (aten/src/ATen/native/cuda/FillKernel.cu: gpu_kernel with FillFunctor<T>),
 * in the two forms that write a contiguous output linearly: vectorized_elementwise_kernel<V,
 * FillFunctor<T>, std::array<char*, 1>>(int n, FillFunctor<T> f, std::array<char*, 1> data) and
 * unrolled_elementwise_kernel<FillFunctor<T>, std::array<char*, 1>, ..., TrivialOffsetCalculator<1,
 * ...>, ...>(int n, f, data, ...). The functor holds the value first. Returns sizeof(T), or 0. */
static int fill_esize(const char *shown) {
    const char *vec = strstr(shown, "at::native::vectorized_elementwise_kernel<");
    const char *unr = strstr(shown, "at::native::unrolled_elementwise_kernel<at::native::FillFunctor<");
    if (!vec && !(unr && strstr(shown, "TrivialOffsetCalculator<1,")))
        return 0;
    const char *f = strstr(shown, "FillFunctor<");
    if (!f || !strstr(shown, "std::array<char*, 1ul>"))
        return 0;
    f += strlen("FillFunctor<");
    static const struct { const char *t; int n; } types[] = {
        { "float>", 4 }, { "double>", 8 }, { "int>", 4 }, { "long>", 8 }, { "short>", 2 }, { "bool>", 1 },
        { "signed char>", 1 }, { "unsigned char>", 1 }, { "unsigned short>", 2 }, { "unsigned int>", 4 },
        { "unsigned long>", 8 }, { "c10::Half>", 2 }, { "c10::BFloat16>", 2 }, { "c10::complex<float> >", 8 },
        { "c10::complex<c10::Half> >", 4 }, { "c10::Float8_", 1 },
    };
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strncmp(f, types[i].t, strlen(types[i].t))) return types[i].n;
    return 0;
}

static int allowed(const struct kname *k) {
    if (!g_noop) return 0;
    if (!g_allow) return 1;
    for (size_t i = 0; i < g_nallow; i++)
        if (strstr(k->shown, g_allow[i]) || strstr(k->mangled, g_allow[i])) return 1;
    return 0;
}

/* The record of a kernel name, made on first sight. Demangling (which may dlopen the C++ runtime
 * the first time) runs outside g_kmu; a racing thread's record wins. */
static struct kname *kname_get(const char *mangled) {
    struct kname *k;
    pthread_mutex_lock(&g_kmu);
    HASH_FIND_STR(g_names, mangled, k);
    pthread_mutex_unlock(&g_kmu);
    if (k) return k;
    struct kname *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->mangled = strdup(mangled);
    n->shown = demangle(mangled);
    if (!n->mangled || !n->shown) { free(n->mangled); free(n->shown); free(n); return NULL; }
    n->allowed = allowed(n);
    n->fill_esize = fill_esize(n->shown);
    pthread_mutex_lock(&g_kmu);
    HASH_FIND_STR(g_names, mangled, k);
    if (!k) HASH_ADD_KEYPTR(hh, g_names, n->mangled, strlen(n->mangled), n);
    pthread_mutex_unlock(&g_kmu);
    if (k) { free(n->mangled); free(n->shown); free(n); return k; }
    return n;
}

void uvmsim_kernel_name(const void *handle, const char *mangled) {
    if (!handle || !mangled) return;
    struct kname *k = kname_get(mangled);
    if (!k) return;
    pthread_mutex_lock(&g_kmu);
    struct khandle *h;
    HASH_FIND_PTR(g_handles, &handle, h);
    if (!h && (h = calloc(1, sizeof *h))) {
        h->handle = handle;
        h->k = k;
        HASH_ADD_PTR(g_handles, handle, h);
    }
    pthread_mutex_unlock(&g_kmu);
}

/* Demangled template names run to kilobytes (PyTorch's random kernels): messages show the start. */
#define SHOWN_MAX 300
static int shown_len(const char *s) { size_t n = strlen(s); return (int)(n > SHOWN_MAX ? SHOWN_MAX : n); }
static const char *shown_more(const char *s) { return strlen(s) > SHOWN_MAX ? "..." : ""; }

/* A launch: refused (fail mode, or noop and not allowed) with one line per kernel, or queued on
 * its stream as a no-op (a fill for fill kernels), so work after it on that stream still waits for
 * work before it and a capturing stream records a node. */
unsigned uvmsim_kernel_launch(const char *entry, const void *handle, const char *mangled, void **args, CUstream h, int ptds) {
    NEED_CTX();
    struct kname *k = mangled ? kname_get(mangled) : NULL;
    pthread_mutex_lock(&g_kmu);
    if (!mangled) {
        struct khandle *kh;
        HASH_FIND_PTR(g_handles, &handle, kh);
        if (kh) k = kh->k;
    }
    int ok = k && k->allowed, fill = ok ? k->fill_esize : 0;
    if (!ok)
        g_refused++;
    if (!ok && (k ? !k->said : !g_unknown_said)) {
        char unknown[64];
        snprintf(unknown, sizeof unknown, "an unregistered function %p", handle);
        const char *what = k ? k->shown : unknown;
        fprintf(stderr, "uvmsim: kernel launch (%s) of %.*s%s is not simulated: no device code runs here%s\n", entry,
                shown_len(what), what, shown_more(what),
                !g_noop ? " (UVMSIM_KERNELS=noop skips launches)" : " and UVMSIM_KERNELS_ALLOW does not name it");
        if (k) k->said = 1;
        else g_unknown_said = 1;
    }
    pthread_mutex_unlock(&g_kmu);
    if (!ok) return CUDA_ERROR_NOT_SUPPORTED;
    CUresult r;
    if (fill && args && args[0] && args[1] && args[2]) {
        int n = *(const int *)args[0];
        uint64_t v = 0;
        memcpy(&v, args[1], (size_t)fill); /* FillFunctor<T>: its value is its only member */
        CUdeviceptr dst = (CUdeviceptr)(uintptr_t) * (char *const *)args[2];
        r = n > 0 ? sim_fill(dst, v, fill, (size_t)n, h, ptds) : CUDA_SUCCESS;
    } else {
        pthread_mutex_lock(&sim_mu);
        struct stream *s;
        r = sim_resolve_locked(h, ptds, &s);
        struct op *o = r ? NULL : calloc(1, sizeof *o);
        if (!r && !o) r = CUDA_ERROR_OUT_OF_MEMORY;
        if (o) {
            o->kind = OP_NOP;
            r = sim_submit_locked(s, o, 0, NULL);
        }
        pthread_mutex_unlock(&sim_mu);
    }
    if (r == CUDA_SUCCESS) {
        pthread_mutex_lock(&g_kmu);
        k->skipped++;
        g_skipped++;
        pthread_mutex_unlock(&g_kmu);
    }
    return r;
}

unsigned long long sim_kernels_total(int refused) {
    pthread_mutex_lock(&g_kmu);
    unsigned long long n = refused ? g_refused : g_skipped;
    pthread_mutex_unlock(&g_kmu);
    return n;
}

unsigned long long uvmsim_kernels_skipped(const char *pattern) {
    unsigned long long n = 0;
    pthread_mutex_lock(&g_kmu);
    for (struct kname *k = g_names; k; k = k->hh.next)
        if (!pattern || strstr(k->shown, pattern) || strstr(k->mangled, pattern)) n += k->skipped;
    pthread_mutex_unlock(&g_kmu);
    return n;
}

/* UVMSIM_REPORT=1: after the counters line, one line per kernel skipped, so a test can name them. */
void sim_kernels_report(void) {
    pthread_mutex_lock(&g_kmu);
    for (struct kname *k = g_names; k; k = k->hh.next)
        if (k->skipped)
            fprintf(stderr, "uvmsim: kernel skipped %llu times: %.*s%s\n", k->skipped, shown_len(k->shown), k->shown,
                    shown_more(k->shown));
    pthread_mutex_unlock(&g_kmu);
}

/* ------------------------------------------------------------------ driver launch entry points */

static CUresult drv_launch(const char *entry, CUfunction f, CUstream h, void **params, int ptds) {
    return (CUresult)uvmsim_kernel_launch(entry, (const void *)f, NULL, params, h, ptds);
}
CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                unsigned shm, CUstream h, void **params, void **extra) {
    ENTER("cuLaunchKernel");
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shm; (void)extra;
    return drv_launch("cuLaunchKernel", f, h, params, 0);
}
CUresult CUDAAPI cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                                     unsigned shm, CUstream h, void **params, void **extra) {
    ENTER("cuLaunchKernel_ptsz");
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shm; (void)extra;
    return drv_launch("cuLaunchKernel_ptsz", f, h, params, 1);
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    ENTER("cuLaunchKernelEx");
    (void)extra;
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    return drv_launch("cuLaunchKernelEx", f, c->hStream, params, 0);
}
CUresult CUDAAPI cuLaunchKernelEx_ptsz(const CUlaunchConfig *c, CUfunction f, void **params, void **extra) {
    ENTER("cuLaunchKernelEx_ptsz");
    (void)extra;
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    return drv_launch("cuLaunchKernelEx_ptsz", f, c->hStream, params, 1);
}
CUresult CUDAAPI cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                           unsigned bz, unsigned shm, CUstream h, void **params) {
    ENTER("cuLaunchCooperativeKernel");
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shm;
    return drv_launch("cuLaunchCooperativeKernel", f, h, params, 0);
}
CUresult CUDAAPI cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                                unsigned bz, unsigned shm, CUstream h, void **params) {
    ENTER("cuLaunchCooperativeKernel_ptsz");
    (void)gx; (void)gy; (void)gz; (void)bx; (void)by; (void)bz; (void)shm;
    return drv_launch("cuLaunchCooperativeKernel_ptsz", f, h, params, 1);
}
/* The name of a function handle the runtime handed out (PyTorch and Triton ask it for messages). */
CUresult CUDAAPI cuFuncGetName(const char **name, CUfunction f) {
    ENTER("cuFuncGetName");
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&g_kmu);
    struct khandle *kh;
    const void *key = (const void *)f;
    HASH_FIND_PTR(g_handles, &key, kh);
    *name = kh && kh->k ? kh->k->mangled : NULL;
    pthread_mutex_unlock(&g_kmu);
    return *name ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}
