/* test_two_runtimes.c: each caller's runtime calls reach the runtime it was linked against.
 *   two MODULE (built against libcudart.so.13): MODULE, built against libcudart.so.12 and loaded
 *       RTLD_LOCAL, makes a copy with an invalid direction: the error must be its own runtime's
 *       last error (21), not left in this program's runtime; this program's own one stays its own.
 *   unversioned (built against libcudart.so.12 only): a lookup by plain name, as
 *       ctypes.CDLL(None).cudaPointerGetAttributes makes, gets the default (CUDA 13) wrapper, which
 *       must answer through the runtime that is there. */
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "test_common.h"

static int two(const char *module)
{
    void *h = dlopen(module, RTLD_NOW | RTLD_LOCAL);
    int (*bad_copy)(void) = h ? (int (*)(void))dlsym(h, "uvmc_test_bad_copy_last_error") : NULL;
    if (!bad_copy) {
        fprintf(stderr, "cannot load %s: %s\n", module, dlerror());
        return 1;
    }
    if (!dlopen("libcudart.so.12", RTLD_NOW | RTLD_NOLOAD) || !dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD)) {
        fprintf(stderr, "both runtimes must be loaded: this test would prove nothing\n");
        return 1;
    }
    void *a = NULL, *b = NULL;
    if (cudaMalloc(&a, 16) || cudaMalloc(&b, 16))
        return 1;
    cudaGetLastError();
    int theirs = bad_copy();                   /* 21 in the extension's runtime */
    cudaError_t leaked = cudaGetLastError();   /* nothing in this program's */
    cudaError_t rc = cudaMemcpy(a, b, 16, (enum cudaMemcpyKind)77);
    cudaError_t mine = cudaGetLastError();     /* this program's own error, in its own runtime */
    int ok = theirs == cudaErrorInvalidMemcpyDirection && leaked == cudaSuccess &&
             rc == cudaErrorInvalidMemcpyDirection && mine == cudaErrorInvalidMemcpyDirection;
    printf("CUDA 12 extension's last error %d (want 21), left in the program's runtime %d (want 0), the program's "
           "own %d (want 21)\n",
           theirs, (int)leaked, (int)mine);
    printf("%d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}

static int unversioned(void)
{
    if (dlopen("libcudart.so.13", RTLD_NOW | RTLD_NOLOAD)) {
        fprintf(stderr, "libcudart.so.13 is loaded: this test would prove nothing\n");
        return 1;
    }
    cudaError_t (*attrs)(struct cudaPointerAttributes *, const void *) =
        (cudaError_t (*)(struct cudaPointerAttributes *, const void *))dlsym(RTLD_DEFAULT, "cudaPointerGetAttributes");
    void *pinned = NULL;
    if (!attrs || cudaMallocHost(&pinned, 4096))
        return 1;
    struct cudaPointerAttributes a;
    memset(&a, 0, sizeof a);
    cudaError_t rc = attrs(&a, pinned);
    Dl_info info;
    bool ours = dladdr((void *)attrs, &info) && info.dli_fname && strstr(info.dli_fname, "libuvmchunk.so");
    int ok = ours && rc == cudaSuccess && a.type == cudaMemoryTypeHost;
    printf("unversioned lookup: %s's, answered %d, type %d (want libuvmchunk's, 0, %d)\n",
           ours ? "libuvmchunk" : "another object", (int)rc, (int)a.type, (int)cudaMemoryTypeHost);
    printf("%d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}

int main(int argc, char **argv)
{
    test_load_config();
    if (!test_interposed("cudaMemcpy")) {
        fprintf(stderr, "test_two_runtimes: libuvmchunk.so is not preloaded\n");
        return 1;
    }
    if (argc == 3 && !strcmp(argv[1], "two"))
        return two(argv[2]);
    if (argc == 2 && !strcmp(argv[1], "unversioned"))
        return unversioned();
    fprintf(stderr, "usage: test_two_runtimes two MODULE | unversioned\n");
    return 2;
}
