/* test_rtld_local_caller.c: a shared object that brings the CUDA runtime with it, loaded by
 * test_rtld_local with RTLD_LOCAL the way Python loads torch's extensions (dlopen(3), RTLD_LOCAL). */
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "uvmsim.h"

__attribute__((visibility("default"))) int uvmc_test_local_copy(size_t n, unsigned long long *copies)
{
    uint8_t *src, *dst;
    if (cudaMallocManaged((void **)&src, n, cudaMemAttachGlobal) || cudaMallocHost((void **)&dst, n))
        return -1;
    for (size_t i = 0; i < n; i++)
        src[i] = (uint8_t)(i * 7 + 1);
    unsigned long long a = uvmsim_calls("cudaMemcpyAsync");
    cudaError_t rc = cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, 0);
    if (rc == cudaSuccess)
        rc = cudaStreamSynchronize(0);
    *copies = uvmsim_calls("cudaMemcpyAsync") - a;
    int bad = rc != cudaSuccess || memcmp(src, dst, n) != 0;
    cudaFreeHost(dst);
    cudaFree(src);
    return bad;
}
