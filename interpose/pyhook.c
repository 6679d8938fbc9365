/* pyhook.c: says once per process when a Python with PyTorch runs under the library without the
 * uvmchunk package's automatic DCP views (python/uvmchunk/_autoload.py), so its saves copy. */
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uvmc.h"

/* The hook records the pid of the Python that installed it (_autoload.py, _HOOK_ENV): an inherited
 * value belongs to a parent (torchrun's agent), not to this process. */
#define UVMC_HOOK_ENV "_UVMCHUNK_DCP_HOOK_PID"

static int uvmc_find_torch_python(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    const char *base = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
    return base && strcmp(base + 1, "libtorch_python.so") == 0;
}

void uvmc_pyhook_check(void)
{
    static atomic_bool checked;
    if (atomic_load_explicit(&checked, memory_order_relaxed) || atomic_exchange(&checked, true))
        return;
    if (!uvmc_cfg.dcp_views || !dl_iterate_phdr(uvmc_find_torch_python, NULL))
        return; /* views switched off, or no PyTorch in this process */
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
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = '\0';
    uvmc_log(UVMC_LOG_WARN,
             "this Python (%s, pid %d) has PyTorch but not the uvmchunk package's hook (it needs `pip install "
             "uvmchunk` in this environment and PyTorch 2.5 or newer): checkpoints of managed tensors take the "
             "copy path, not zero-copy views",
             n > 0 ? exe : "?", (int)getpid());
}
