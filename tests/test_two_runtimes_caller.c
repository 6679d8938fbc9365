/* test_two_runtimes_caller.c: an extension built against the other CUDA major (linked to the
 * simulated libcudart.so.12), loaded RTLD_LOCAL by test_two_runtimes into a process whose program
 * uses libcudart.so.13, as a CUDA 12 extension in a CUDA 13 PyTorch process. */
#include <cuda_runtime_api.h>

/* A copy with an invalid direction through its own runtime, then that runtime's last error. */
__attribute__((visibility("default"))) int uvmc_test_bad_copy_last_error(void)
{
    void *a = NULL, *b = NULL;
    if (cudaMalloc(&a, 16) || cudaMalloc(&b, 16))
        return -1;
    cudaGetLastError();
    cudaError_t rc = cudaMemcpy(a, b, 16, (enum cudaMemcpyKind)77);
    cudaError_t last = cudaGetLastError();
    cudaFree(a);
    cudaFree(b);
    return rc == last ? (int)last : -2;
}
