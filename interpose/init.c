/* init.c: one-time initialisation: configuration, real-function resolution, fork handlers.
 * Runs at the first interposed call, so non-CUDA processes pay nothing but one lookup at load. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "uvmc.h"

extern char **environ;

/* Until init has run, only log_level is read (by messages from resolution). */
struct uvmc_config uvmc_cfg = {.log_level = UVMC_LOG_WARN};
size_t uvmc_hot_threshold = SIZE_MAX;
atomic_bool uvmc_initialized;
_Thread_local unsigned uvmc_tls_busy __attribute__((tls_model("initial-exec")));

static pthread_once_t uvmc_once = PTHREAD_ONCE_INIT;

/* Config diagnostics are always shown, once per process, with what the library does instead: a
 * typo that silently changes a threshold is worse. (uvmchunk-run refuses them before the command
 * starts; a process preloaded by hand has no launcher.) */
static void uvmc_config_diag(void *ctx, const char *mistake, const char *consequence)
{
    (void)ctx;
    uvmc_log(UVMC_LOG_ERROR, "%s; %s", mistake, consequence);
}

/* The library's locks are held across fork() so the child never inherits one locked by a thread
 * that does not exist there; its own pool threads it starts afresh (hostcopy.c). */
static void uvmc_atfork_prepare(void)
{
    uvmc_resolve_atfork_prepare();
    uvmc_host_pool_atfork_prepare();
    uvmc_lazy_atfork_prepare();
}

static void uvmc_atfork_parent(void)
{
    uvmc_lazy_atfork_parent();
    uvmc_host_pool_atfork_release();
    uvmc_resolve_atfork_release();
}

static void uvmc_atfork_child(void)
{
    uvmc_lazy_atfork_child();
    uvmc_host_pool_atfork_release();
    uvmc_resolve_atfork_release();
}

/* An object loaded before libuvmchunk that also defines cudaMemcpyAsync (a simulated runtime, or
 * another interposer, earlier in LD_PRELOAD) takes the program's copies first: the library would
 * never see them. Said once, at start-up. */
static void uvmc_check_shadowed(void)
{
    void *fn = uvmc_real_dlsym()(RTLD_DEFAULT, "cudaMemcpyAsync");
    Dl_info info;
    if (fn && !uvmc_is_ours(fn) && dladdr(fn, &info) && info.dli_fname)
        uvmc_log(UVMC_LOG_WARN,
                 "cudaMemcpyAsync is defined by %s, loaded before libuvmchunk: copies never reach the library; "
                 "put libuvmchunk.so first in LD_PRELOAD",
                 info.dli_fname);
}

/* intercept_dlsym = on once meant libuvmchunk.so's own dlsym export; that export is now the
 * opt-in libuvmchunk-dlsym.so (dlsym.c), and the key only says whether it was expected. */
static void uvmc_check_static_runtime_support(void)
{
    void *h = dlopen("libuvmchunk-dlsym.so", RTLD_LAZY | RTLD_NOLOAD);
    if (h)
        dlclose(h); /* drops only the reference NOLOAD took */
    else
        uvmc_log(UVMC_LOG_WARN, "intercept_dlsym = on needs libuvmchunk-dlsym.so preloaded before libuvmchunk.so "
                                "(uvmchunk-run --static-runtime); statically linked runtimes are not caught");
}

static void uvmc_do_init(void)
{
    struct uvmc_config cfg;
    uvmc_config_load(&cfg, environ, uvmc_config_diag, NULL);
    if (cfg.stock) /* uvmchunk-run --stock: every copy as stock makes it; the Python package only measures */
        cfg.enabled = false;
    uvmc_cfg = cfg;
    uvmc_hot_threshold = cfg.enabled ? cfg.threshold : SIZE_MAX;
    if (!uvmc_resolve_real())
        uvmc_log(UVMC_LOG_DEBUG, "CUDA driver not found yet; resolution is retried at each call");
    pthread_atfork(uvmc_atfork_prepare, uvmc_atfork_parent, uvmc_atfork_child);
    if (UVMC_LOG_ON(UVMC_LOG_INFO)) {
        char desc[512];
        uvmc_config_describe(&cfg, desc, sizeof desc);
        uvmc_log(UVMC_LOG_INFO, "%s (pid %d)", desc, (int)getpid());
    }
    uvmc_check_shadowed();
    if (cfg.intercept_dlsym)
        uvmc_check_static_runtime_support();
    atomic_store_explicit(&uvmc_initialized, true, memory_order_release);
}

void uvmc_init_slow(void)
{
    pthread_once(&uvmc_once, uvmc_do_init);
}

/* The one thing done at load: an object loaded earlier that defines cudaMemcpyAsync takes every
 * call, so the first interposed call, which would initialise the library and say so, never comes.
 * Then the library initialises now (and warns); otherwise it waits for that call. */
__attribute__((constructor)) static void uvmc_load(void)
{
    void *fn = uvmc_real_dlsym()(RTLD_DEFAULT, "cudaMemcpyAsync");
    if (fn && !uvmc_is_ours(fn))
        uvmc_init();
}

/* Runs at exit (the library is never unloaded before that). */
__attribute__((destructor)) static void uvmc_fini(void)
{
    if (atomic_load_explicit(&uvmc_initialized, memory_order_acquire) && uvmc_cfg.stats)
        uvmc_stats_print();
}
