/* test_dlsym_fallback.c: libuvmchunk in a process where glibc's dlsym cannot be found under either
 * version the library knows (as on aarch64 with glibc older than 2.34, which has neither
 * GLIBC_2.34 nor GLIBC_2.2.5): this program's dlvsym, which the library's calls reach first,
 * refuses "dlsym". Every lookup must still work (and nothing may call through a NULL pointer):
 * the library resolves the runtime, and a large copy out of managed memory is split. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "test_common.h"
#include "uvmsim.h"

void *dlvsym(void *handle, const char *name, const char *version)
{
    static void *(*real)(void *, const char *, const char *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "dlvsym");
    if (!strcmp(name, "dlsym"))
        return NULL;
    return real(handle, name, version);
}

int main(void)
{
    test_load_config();
    if (!test_interposed("cudaMemcpyAsync")) {
        fprintf(stderr, "test_dlsym_fallback: libuvmchunk.so is not preloaded\n");
        return 1;
    }
    size_t n = test_cfg.threshold + 3 * test_cfg.chunk_size + 5;
    uint8_t *src = NULL, *dst = NULL;
    if (cudaMallocManaged((void **)&src, n, cudaMemAttachGlobal) || cudaMallocHost((void **)&dst, n))
        return 1;
    for (size_t i = 0; i < n; i++)
        src[i] = test_pattern(i);
    unsigned long long c0 = uvmsim_calls("cudaMemcpyAsync");
    cudaError_t rc = cudaMemcpy(dst, src, n, cudaMemcpyDeviceToHost);
    unsigned long long copies = uvmsim_calls("cudaMemcpyAsync") - c0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += dst[i] != test_pattern(i);
    int ok = rc == cudaSuccess && bad == 0 && copies == test_blocks(n);
    printf("no versioned dlsym: result %d, %zu bytes differ, %llu block copies (want %zu)\n", (int)rc, bad, copies,
           test_blocks(n));
    printf("%d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}
