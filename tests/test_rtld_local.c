/* test_rtld_local.c: the runtime is visible only in a local scope (dlopen RTLD_LOCAL), where
 * dlsym(RTLD_NEXT) cannot see it; the library must still find the real functions and split. */
#include <dlfcn.h>
#include <stdio.h>

#include "test_common.h"

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    test_load_config();
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen %s: %s\n", argv[1], dlerror());
        return 1;
    }
    /* a runtime name the library does not export (it wraps cudaMallocManaged, for its notices) */
    if (dlsym(RTLD_DEFAULT, "cudaDeviceSynchronize")) {
        fprintf(stderr, "the runtime is in the global scope: this test would prove nothing\n");
        return 1;
    }
    int (*run)(size_t, unsigned long long *) = (int (*)(size_t, unsigned long long *))dlsym(h, "uvmc_test_local_copy");
    size_t n = test_cfg.threshold + 2 * test_cfg.chunk_size + 11;
    unsigned long long copies = 0;
    int bad = run ? run(n, &copies) : -1;
    int ok = bad == 0 && copies == test_blocks(n);
    printf("RTLD_LOCAL runtime: result %d, %llu block copies (want %zu)\n", bad, copies, test_blocks(n));
    printf("%d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}
