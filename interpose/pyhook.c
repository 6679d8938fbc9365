/* pyhook.c: says once per process when a Python with PyTorch runs under the library without the
 * uvmchunk package's automatic DCP views (python/uvmchunk/_autoload.py), so its saves copy: at its
 * first managed allocation (the tables it will save), split copy or lazily served request. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uvmc.h"

/* The hook records the pid of the Python that installed it (_autoload.py, _HOOK_ENV): an inherited
 * value belongs to a parent (torchrun's agent), not to this process. */
#define UVMC_HOOK_ENV "_UVMCHUNK_DCP_HOOK_PID"

/* dlpi_adds when the objects were last scanned: a rescan stops at its first object when nothing was
 * loaded since (dl_iterate_phdr(3)) */
static _Atomic unsigned long long uvmc_pyhook_adds;

static int uvmc_find_torch_python(struct dl_phdr_info *info, size_t size, void *arg)
{
    bool *first = arg;
    if (*first) {
        *first = false;
        if (size >= offsetof(struct dl_phdr_info, dlpi_adds) + sizeof info->dlpi_adds &&
            atomic_exchange(&uvmc_pyhook_adds, info->dlpi_adds) == info->dlpi_adds)
            return -1; /* nothing loaded since the last scan: PyTorch is still not there */
    }
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    return base && strcmp(base + 1, "libtorch_python.so") == 0;
}

#ifndef UVMC_SOURCE_DIR
#define UVMC_SOURCE_DIR ""
#endif

/* The interpreter as the job named it (Python's sys.executable): argv[0] when it holds a '/', else
 * the first match on PATH. Not /proc/self/exe, which resolves a virtual environment's bin/python
 * link to the base interpreter the environment was made from, where pip would install elsewhere. */
static void uvmc_python_path(char *out, size_t size)
{
    char argv0[PATH_MAX] = "";
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, argv0, sizeof argv0 - 1);
        argv0[n > 0 ? n : 0] = '\0';
        close(fd);
    }
    snprintf(out, size, "%s", *argv0 ? argv0 : "python");
    if (strchr(argv0, '/') != NULL) {
        if (argv0[0] != '/') { /* relative: as sys.executable, from the working directory */
            char cwd[PATH_MAX];
            if (getcwd(cwd, sizeof cwd) != NULL && (size_t)snprintf(out, size, "%s/%s", cwd, argv0) >= size)
                snprintf(out, size, "%s", argv0); /* too long to show whole: as the job named it */
        }
        return;
    }
    const char *path = getenv("PATH");
    while (path != NULL && *path && *argv0) {
        const char *end = strchr(path, ':');
        size_t len = end ? (size_t)(end - path) : strlen(path);
        char candidate[PATH_MAX];
        if (len && (size_t)snprintf(candidate, sizeof candidate, "%.*s/%s", (int)len, path, argv0) < sizeof candidate &&
            access(candidate, X_OK) == 0) {
            snprintf(out, size, "%s", candidate);
            return;
        }
        path = end ? end + 1 : NULL;
    }
}

atomic_bool uvmc_pyhook_checked;
static _Atomic bool uvmc_python_seen; /* Py_IsInitialized was found once: a Python process */

static void uvmc_pyhook_say(void);

void uvmc_pyhook_check_once(void)
{
    int saved = errno; /* a managed allocation's caller may look at errno after it: as it was */
    if (!uvmc_cfg.enabled || !uvmc_cfg.dcp_views) {
        atomic_store(&uvmc_pyhook_checked, true); /* everything passed through, or views switched off */
    } else if (!uvmc_python_seen && uvmc_real_dlsym()(RTLD_DEFAULT, "Py_IsInitialized") == NULL) {
        atomic_store(&uvmc_pyhook_checked, true); /* no Python in this process: nothing to say, ever */
    } else {
        uvmc_python_seen = true;
        bool first = true;
        /* decided once PyTorch is in the process, said by one thread; until then asked again at the
         * next managed allocation or large copy (a C extension may allocate before `import torch`),
         * at the cost of one step of dl_iterate_phdr while nothing new is loaded */
        if (dl_iterate_phdr(uvmc_find_torch_python, &first) == 1 && !atomic_exchange(&uvmc_pyhook_checked, true))
            uvmc_pyhook_say();
    }
    errno = saved;
}

static void uvmc_pyhook_say(void)
{
    const char *pid = getenv(UVMC_HOOK_ENV);
    if (pid && strtol(pid, NULL, 10) == (long)getpid())
        return;
    const char *autoload = getenv("TORCH_DEVICE_BACKEND_AUTOLOAD");
    if (autoload && strcmp(autoload, "1") != 0) {
        uvmc_log(UVMC_LOG_INFO, "TORCH_DEVICE_BACKEND_AUTOLOAD=%s: no automatic zero-copy DCP views; "
                 "checkpoints of managed tensors take the copy path", autoload);
        return;
    }
    char exe[PATH_MAX];
    uvmc_python_path(exe, sizeof exe);
    char source[PATH_MAX + 32];
    if (*UVMC_SOURCE_DIR && snprintf(source, sizeof source, "%s/pyproject.toml", UVMC_SOURCE_DIR) > 0 &&
        access(source, R_OK) == 0)
        snprintf(source, sizeof source, "%s", UVMC_SOURCE_DIR);
    else
        snprintf(source, sizeof source, "/path/to/the/libuvmchunk/checkout");
    /* torchrun's RANK: which worker lacks it, where every rank says its own line. */
    const char *rank = getenv("RANK");
    char who[32] = "";
    if (rank && *rank && strlen(rank) <= 12 && strspn(rank, "0123456789") == strlen(rank))
        snprintf(who, sizeof who, ", rank %s", rank);
    /* The package is not on any index: it installs from the checkout the library was built from. */
    uvmc_log(UVMC_LOG_WARN,
             "this Python (%s, pid %d%s) has PyTorch but not the uvmchunk package's hook, so checkpoints of managed "
             "tensors take the copy path, not zero-copy views: install it with `%s -m pip install %s` (PyTorch 2.5 "
             "or newer)",
             exe, (int)getpid(), who, exe, source);
}
