/* managed_alloc.c: allocator for torch.cuda.memory.CUDAPluggableAllocator that hands out CUDA
 * managed memory the way FBGEMM's new_managed_tensor does (fbgemm_gpu memory_utils.cu):
 * cudaMallocManaged with default flags, advice PreferredLocation = CPU and AccessedBy = the
 * device, and madvise(MADV_DONTFORK). Used with torch.cuda.MemPool + torch.cuda.use_mem_pool.
 * Shared by integration/checkpoint_job.py and tests/torch. It links no CUDA library: the runtime is
 * the one already in the process (PyTorch's on a GPU, the preloaded simulator otherwise), CUDA 12
 * or 13, found at first use; CUDA 12's cudaMemAdvise takes a device number where 13's takes a
 * cudaMemLocation (cuda_runtime_api.h of each), so the form is picked by the runtime's version. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT void *uvmc_managed_alloc(ssize_t size, int device, cudaStream_t stream);
EXPORT void uvmc_managed_free(void *ptr, ssize_t size, int device, cudaStream_t stream);

static struct {
    cudaError_t (*malloc_managed)(void **, size_t, unsigned);
    cudaError_t (*free)(void *);
    const char *(*error_string)(cudaError_t);
    cudaError_t (*advise13)(const void *, size_t, enum cudaMemoryAdvise, struct cudaMemLocation);
    cudaError_t (*advise12)(const void *, size_t, enum cudaMemoryAdvise, int);
    int version;
} rt;
static pthread_once_t rt_once = PTHREAD_ONCE_INIT;

/* Every function (the allocation aside: see there) from the one object that answers
 * cudaRuntimeGetVersion where PyTorch's calls bind (the global scope: a name no interposer
 * defines), else a runtime already loaded under its SONAME. */
static void rt_find(void)
{
    void *h = NULL, *any = dlsym(RTLD_DEFAULT, "cudaRuntimeGetVersion");
    Dl_info info;
    if (any && dladdr(any, &info) && info.dli_fname)
        h = dlopen(info.dli_fname, RTLD_LAZY | RTLD_NOLOAD);
    if (!h) h = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD);
    if (!h) h = dlopen("libcudart.so.12", RTLD_LAZY | RTLD_NOLOAD);
    if (!h) {
        fprintf(stderr, "uvmc_managed_alloc: no CUDA runtime is loaded in this process\n");
        return;
    }
    cudaError_t (*get_version)(int *) = (cudaError_t(*)(int *))dlsym(h, "cudaRuntimeGetVersion");
    if (!get_version || get_version(&rt.version) != cudaSuccess) return;
    /* The allocation itself as FBGEMM's binds: its versioned reference resolved in the global
     * scope, where a preloaded libuvmchunk.so answers first (it notes the process's first managed
     * allocation, interpose/pyhook.c); the runtime's own definition when nothing interposes. */
    char node[32];
    snprintf(node, sizeof node, "libcudart.so.%d", rt.version / 1000);
    *(void **)&rt.malloc_managed = dlvsym(RTLD_DEFAULT, "cudaMallocManaged", node);
    if (!rt.malloc_managed)
        *(void **)&rt.malloc_managed = dlsym(h, "cudaMallocManaged");
    *(void **)&rt.free = dlsym(h, "cudaFree");
    *(void **)&rt.error_string = dlsym(h, "cudaGetErrorString");
    if (rt.version >= 13000) *(void **)&rt.advise13 = dlsym(h, "cudaMemAdvise");
    else *(void **)&rt.advise12 = dlsym(h, "cudaMemAdvise");
}

static cudaError_t advise(void *p, size_t n, enum cudaMemoryAdvise a, int device)
{
    if (rt.advise13) {
        struct cudaMemLocation loc = { .type = device == cudaCpuDeviceId ? cudaMemLocationTypeHost : cudaMemLocationTypeDevice,
                                       .id = device == cudaCpuDeviceId ? 0 : device };
        return rt.advise13(p, n, a, loc);
    }
    return rt.advise12(p, n, a, device);
}

void *uvmc_managed_alloc(ssize_t size, int device, cudaStream_t stream)
{
    (void)stream;
    void *p = NULL;
    if (size <= 0) return NULL;
    pthread_once(&rt_once, rt_find);
    if (!rt.malloc_managed || !rt.free || !rt.error_string || !(rt.advise13 || rt.advise12)) return NULL;
    cudaError_t e = rt.malloc_managed(&p, (size_t)size, cudaMemAttachGlobal);
    if (e != cudaSuccess) {
        fprintf(stderr, "uvmc_managed_alloc: cudaMallocManaged(%zd): %s\n", size, rt.error_string(e));
        return NULL;
    }
    if ((e = advise(p, (size_t)size, cudaMemAdviseSetPreferredLocation, cudaCpuDeviceId)) != cudaSuccess ||
        (e = advise(p, (size_t)size, cudaMemAdviseSetAccessedBy, device)) != cudaSuccess) {
        fprintf(stderr, "uvmc_managed_alloc: cudaMemAdvise: %s\n", rt.error_string(e));
        rt.free(p);
        return NULL;
    }
    /* FBGEMM: the table must not be shared with forked children */
    long page = sysconf(_SC_PAGESIZE);
    size_t span = ((size_t)size + (size_t)page - 1) & ~((size_t)page - 1);
    (void)madvise(p, span, MADV_DONTFORK);
    return p;
}

void uvmc_managed_free(void *ptr, ssize_t size, int device, cudaStream_t stream)
{
    (void)size; (void)device; (void)stream;
    if (ptr && rt.free) rt.free(ptr);
}
