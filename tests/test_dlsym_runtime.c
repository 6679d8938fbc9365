/* test_dlsym_runtime.c: with the static-runtime support preloaded (libuvmchunk-dlsym.so), a
 * dynamically linked runtime's own lookup of cuGetProcAddress_v2 is not redirected (its driver
 * calls stay its own, as docs/design.md promises), while a lookup the program makes itself, as a
 * statically linked runtime does, is.
 * How the runtime's lookup is seen: the simulated driver counts (and faults) only calls that do not
 * come from a runtime. A fault waits for the next counted cuGetProcAddress_v2; the runtime's first
 * call fetches its ~80 entry points. Through its own lookup those calls are not counted and the
 * runtime works; through the library's query they are (the library calls the real query), the
 * first fails, and the runtime refuses every call. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include "test_common.h"
#include "uvmsim.h"

int main(void)
{
    test_load_config();
    if (!test_interposed("cudaMemcpyAsync")) {
        fprintf(stderr, "test_dlsym_runtime: libuvmchunk.so is not preloaded\n");
        return 1;
    }
    uvmsim_fail_nth("cuGetProcAddress_v2", 1, CUDA_ERROR_UNKNOWN);
    void *dev = NULL;
    cudaError_t rc = cudaMalloc(&dev, 4096); /* the runtime's first call: it looks up its driver */
    uvmsim_reset();                          /* the fault, if still pending */
    /* The program's own lookup, the way a static runtime makes it. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    void *gpa = h ? dlsym(h, "cuGetProcAddress_v2") : NULL;
    Dl_info info;
    bool redirected = gpa && dladdr(gpa, &info) && info.dli_fname && strstr(info.dli_fname, "libuvmchunk.so");
    int ok = rc == cudaSuccess && redirected;
    printf("runtime after its own driver lookup: %d (want 0: not redirected); program's lookup redirected: %s "
           "(want yes)\n",
           (int)rc, redirected ? "yes" : "no");
    printf("%d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}
