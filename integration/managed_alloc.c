/* managed_alloc.c: allocator for torch.cuda.memory.CUDAPluggableAllocator that hands out CUDA
 * managed memory the way FBGEMM's new_managed_tensor does (fbgemm_gpu memory_utils.cu):
 * cudaMallocManaged with default flags, advice PreferredLocation = CPU and AccessedBy = the
 * device, and madvise(MADV_DONTFORK). Used with torch.cuda.MemPool + torch.cuda.use_mem_pool.
 * Shared by integration/checkpoint_job.py and tests/torch. Needs only libcudart.so.13 by SONAME
 * (no RUNPATH): on the simulator that is tests/sim's runtime, preloaded; on a GPU machine the
 * one PyTorch already loaded. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdio.h>
#include <sys/mman.h>
#include <sys/types.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#define EXPORT __attribute__((visibility("default")))

EXPORT void *uvmc_managed_alloc(ssize_t size, int device, cudaStream_t stream);
EXPORT void uvmc_managed_free(void *ptr, ssize_t size, int device, cudaStream_t stream);

void *uvmc_managed_alloc(ssize_t size, int device, cudaStream_t stream)
{
    (void)stream;
    void *p = NULL;
    if (size <= 0) return NULL;
    cudaError_t e = cudaMallocManaged(&p, (size_t)size, cudaMemAttachGlobal);
    if (e != cudaSuccess) {
        fprintf(stderr, "uvmc_managed_alloc: cudaMallocManaged(%zd): %s\n", size, cudaGetErrorString(e));
        return NULL;
    }
    struct cudaMemLocation cpu = { .type = cudaMemLocationTypeHost, .id = 0 };
    struct cudaMemLocation gpu = { .type = cudaMemLocationTypeDevice, .id = device };
    if ((e = cudaMemAdvise(p, (size_t)size, cudaMemAdviseSetPreferredLocation, cpu)) != cudaSuccess ||
        (e = cudaMemAdvise(p, (size_t)size, cudaMemAdviseSetAccessedBy, gpu)) != cudaSuccess) {
        fprintf(stderr, "uvmc_managed_alloc: cudaMemAdvise: %s\n", cudaGetErrorString(e));
        cudaFree(p);
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
    if (ptr) cudaFree(ptr);
}
