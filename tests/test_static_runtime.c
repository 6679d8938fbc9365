/* test_static_runtime.c: a program that reaches the driver the way a statically linked CUDA
 * runtime does: dlopen(libcuda) itself, dlsym(handle, "cuGetProcAddress_v2"), every function
 * through that query. Usage: test_static_runtime LIBCUDA split|unsplit. With libuvmchunk-dlsym.so
 * preloaded before libuvmchunk.so its large copy out of managed memory is split; without it the copy
 * passes through unchanged, whatever intercept_dlsym says. */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test_common.h"

#define GET(name, ver, type, var)                                                              \
    type var = NULL;                                                                           \
    if (gpa(#name, (void **)&var, ver, CU_GET_PROC_ADDRESS_DEFAULT, NULL) != CUDA_SUCCESS || !var) { \
        fprintf(stderr, "no %s\n", #name);                                                     \
        return 1;                                                                              \
    }

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    bool want_split = strcmp(argv[2], "split") == 0;
    test_load_config();
    /* Probed before the driver is loaded (as Python's ctypes.CDLL(None).cuGetProcAddress_v2
     * would): only our own export is found, which must never be taken for the real query. */
    void *early = dlsym(RTLD_DEFAULT, "cuGetProcAddress_v2");
    (void)early;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    PFN_cuGetProcAddress_v12000 gpa = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
    unsigned long long (*calls)(const char *) = (unsigned long long (*)(const char *))dlsym(h, "uvmsim_calls");
    if (!gpa || !calls)
        return 1;
    GET(cuInit, 2000, PFN_cuInit_v2000, init)
    GET(cuDevicePrimaryCtxRetain, 7000, PFN_cuDevicePrimaryCtxRetain_v7000, retain)
    GET(cuCtxSetCurrent, 4000, PFN_cuCtxSetCurrent_v4000, set_current)
    GET(cuMemAllocManaged, 6000, PFN_cuMemAllocManaged_v6000, alloc_managed)
    GET(cuMemHostAlloc, 2020, PFN_cuMemHostAlloc_v2020, host_alloc)
    GET(cuMemcpyDtoHAsync, 3020, PFN_cuMemcpyDtoHAsync_v3020, copy)
    GET(cuStreamSynchronize, 2000, PFN_cuStreamSynchronize_v2000, stream_sync)
    CUcontext ctx;
    if (init(0) || retain(&ctx, 0) || set_current(ctx))
        return 1;
    size_t n = test_cfg.threshold + 3 * test_cfg.chunk_size + 5;
    CUdeviceptr src;
    uint8_t *dst;
    if (alloc_managed(&src, n, CU_MEM_ATTACH_GLOBAL) || host_alloc((void **)&dst, n, 0))
        return 1;
    for (size_t i = 0; i < n; i++)
        ((uint8_t *)(uintptr_t)src)[i] = test_pattern(i);
    unsigned long long c0 = calls("cuMemcpyDtoHAsync_v2");
    CUresult r = copy(dst, src, n, 0);
    if (r == CUDA_SUCCESS)
        r = stream_sync(0);
    unsigned long long copies = calls("cuMemcpyDtoHAsync_v2") - c0;
    size_t bad = 0;
    for (size_t i = 0; i < n; i++)
        bad += dst[i] != test_pattern(i);
    unsigned long long want = want_split ? test_blocks(n) : 1;
    int ok = r == CUDA_SUCCESS && bad == 0 && copies == want;
    printf("static runtime, %s libuvmchunk-dlsym.so: result %d, %zu bytes differ, %llu copies (want %llu)\n",
           want_split ? "with" : "without", (int)r, bad, copies, want);
    printf("%d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}
