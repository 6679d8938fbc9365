/* sim_kernels_selftest.c: kernel launches on the simulator (sim_kernels.c). Run by CTest three ways:
 * UVMSIM_KERNELS unset (every launch fails, naming its kernel), noop (every launch succeeds in stream
 * order, is counted by name, PyTorch's fill kernels write their value), and noop with
 * UVMSIM_KERNELS_ALLOW naming some kernels (the others fail). Each launch entry point is tried. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "sim_selftest_check.h"
#include "uvmsim.h"

/* what nvcc's host code calls (crt/host_runtime.h, crt/device_functions.h) */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName, int tl,
                            uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
cudaError_t __cudaGetKernel(cudaKernel_t *k, const void *entryFuncAddr);
cudaError_t __cudaLaunchKernel(cudaKernel_t k, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s);
cudaError_t __cudaLaunchKernel_ptsz(cudaKernel_t k, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s);
cudaError_t cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s);
CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                             unsigned shm, CUstream h, void **params, void **extra);

/* Host stubs: only their addresses matter (registered like nvcc's, launched by address). */
static void plain_stub(void) {}
static void fill_float_stub(void) {}
static void fill_long_stub(void) {}
static void fill_lambda_stub(void) {}
static void other_stub(void) {}
static void unregistered_stub(void) {}

#define PLAIN "_Z12plain_kernelIfEvi"
#define FILL_FLOAT "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"
#define FILL_LONG "_ZN2at6native27unrolled_elementwise_kernelINS0_11FillFunctorIlEESt5arrayIPcLm1EELi4E23TrivialOffsetCalculatorILi0EjES7_ILi1EjENS0_6memory15LoadWithoutCastENSA_16StoreWithoutCastEEEviT_T0_T2_T3_T4_T5_"
#define FILL_LAMBDA "_ZN2at6native18elementwise_kernelILi128ELi4EZNS0_15gpu_kernel_implINS0_11FillFunctorImEEEEvRNS_18TensorIteratorBaseERKT_EUliE_EEviT1_"
#define OTHER "_Z12other_kernelv"

static void reg(void **h, void (*stub)(void), const char *name) {
    __cudaRegisterFunction(h, (const char *)(uintptr_t)stub, (char *)name, name, -1, NULL, NULL, NULL, NULL, NULL);
}

int main(void) {
    const char *mode = getenv("UVMSIM_KERNELS"), *allow = getenv("UVMSIM_KERNELS_ALLOW");
    int noop = mode && !strcmp(mode, "noop");
    int narrowed = noop && allow && *allow; /* the CTest names FillFunctor and other_kernel */
    int plain_ok = noop && !narrowed;
    cudaError_t plain_rc = plain_ok ? cudaSuccess : cudaErrorNotSupported;

    void **h = __cudaRegisterFatBinary(NULL);
    reg(h, plain_stub, PLAIN);
    reg(h, fill_float_stub, FILL_FLOAT);
    reg(h, fill_long_stub, FILL_LONG);
    reg(h, fill_lambda_stub, FILL_LAMBDA);
    reg(h, other_stub, OTHER);

    dim3 one = { 1, 1, 1 };
    cudaStream_t s;
    EQ(cudaStreamCreate(&s), cudaSuccess);

    /* CUDA 13's <<<>>>: a handle per kernel, then __cudaLaunchKernel of it; the handle exists in
     * every mode (nvcc asks once, at the first launch), an unregistered address has none */
    cudaKernel_t k = NULL;
    EQ(__cudaGetKernel(&k, (const void *)plain_stub), cudaSuccess);
    CHECK(k != NULL);
    cudaKernel_t none = NULL;
    EQ(__cudaGetKernel(&none, (const void *)unregistered_stub), cudaErrorInvalidDeviceFunction);
    cudaGetLastError();
    const char *name = NULL;
    EQ(cudaFuncGetName(&name, (const void *)plain_stub), cudaSuccess);
    CHECK(name && !strcmp(name, PLAIN));

    int n = 7;
    void *args1[] = { &n };
    EQ(cudaLaunchKernel((const void *)plain_stub, one, one, args1, 0, s), plain_rc);
    EQ(cudaGetLastError(), plain_rc); /* a refused launch is the last error, not sticky */
    EQ(cudaGetLastError(), cudaSuccess);
    EQ(cudaLaunchKernel_ptsz((const void *)plain_stub, one, one, args1, 0, s), plain_rc);
    EQ(__cudaLaunchKernel(k, one, one, args1, 0, s), plain_rc);
    EQ(__cudaLaunchKernel_ptsz(k, one, one, args1, 0, 0), plain_rc);
    cudaLaunchConfig_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.gridDim = one;
    cfg.blockDim = one;
    cfg.stream = s;
    EQ(cudaLaunchKernelExC(&cfg, (const void *)plain_stub, args1), plain_rc);
    EQ(cudaLaunchCooperativeKernel((const void *)plain_stub, one, one, args1, 0, s), plain_rc);
    EQ(cudaLaunchKernel((const void *)unregistered_stub, one, one, args1, 0, s), cudaErrorNotSupported);
    cudaGetLastError();

    /* the driver's entry points, with the handle the runtime hands out */
    cudaFunction_t f = NULL;
    EQ(cudaGetFuncBySymbol(&f, (const void *)plain_stub), cudaSuccess);
    EQ(cuLaunchKernel((CUfunction)f, 1, 1, 1, 1, 1, 1, 0, (CUstream)s, args1, NULL), plain_ok ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED);
    EQ(cuLaunchKernel_ptsz((CUfunction)f, 1, 1, 1, 1, 1, 1, 0, NULL, args1, NULL), plain_ok ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED);
    CUlaunchConfig dc;
    memset(&dc, 0, sizeof dc);
    dc.gridDimX = dc.gridDimY = dc.gridDimZ = dc.blockDimX = dc.blockDimY = dc.blockDimZ = 1;
    dc.hStream = (CUstream)s;
    EQ(cuLaunchKernelEx(&dc, (CUfunction)f, args1, NULL), plain_ok ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED);
    EQ(cuLaunchCooperativeKernel((CUfunction)f, 1, 1, 1, 1, 1, 1, 0, (CUstream)s, args1),
       plain_ok ? CUDA_SUCCESS : CUDA_ERROR_NOT_SUPPORTED);
    const char *dname = NULL;
    EQ(cuFuncGetName(&dname, (CUfunction)f), CUDA_SUCCESS);
    CHECK(dname && !strcmp(dname, PLAIN));
    EQ(cudaStreamSynchronize(s), cudaSuccess);
    EQ(uvmsim_kernels_skipped("plain_kernel"), plain_ok ? 10 : 0);

    /* fill kernels: PyTorch's FillFunctor writes its value (noop, allowed in both noop runs) */
    const size_t N = 1000;
    float *df = NULL;
    long *dl = NULL;
    unsigned long *du = NULL;
    EQ(cudaMalloc((void **)&df, N * sizeof *df), cudaSuccess);
    EQ(cudaMallocManaged((void **)&dl, N * sizeof *dl, cudaMemAttachGlobal), cudaSuccess);
    EQ(cudaMalloc((void **)&du, N * sizeof *du), cudaSuccess);
    EQ(cudaMemset(df, 0, N * sizeof *df), cudaSuccess);
    memset(dl, 0, N * sizeof *dl);
    EQ(cudaMemset(du, 0, N * sizeof *du), cudaSuccess);
    int count = (int)N - 1; /* the last element stays 0: exactly n are written */
    float fv = 1.5f;
    long lv = -1;
    unsigned long uv = 3;
    char *pf = (char *)df, *pl = (char *)dl, *pu = (char *)du;
    void *fargs[] = { &count, &fv, &pf }, *largs[] = { &count, &lv, &pl }, *uargs[] = { &count, &uv, &pu };
    uvmsim_set_op_delay_us(100000);
    cudaError_t fill_rc = noop ? cudaSuccess : cudaErrorNotSupported;
    EQ(cudaLaunchKernel((const void *)fill_float_stub, one, one, fargs, 0, s), fill_rc);
    if (noop) EQ(cudaStreamQuery(s), cudaErrorNotReady); /* queued in stream order, not yet run */
    cudaKernel_t kl = NULL;
    EQ(__cudaGetKernel(&kl, (const void *)fill_long_stub), cudaSuccess);
    EQ(__cudaLaunchKernel(kl, one, one, largs, 0, s), fill_rc);
    EQ(cudaLaunchKernel((const void *)fill_lambda_stub, one, one, uargs, 0, s), fill_rc);
    cudaGetLastError();
    EQ(cudaStreamSynchronize(s), cudaSuccess);
    uvmsim_set_op_delay_us(0);
    float hf[1000];
    unsigned long hu[1000];
    EQ(cudaMemcpy(hf, df, sizeof hf, cudaMemcpyDeviceToHost), cudaSuccess);
    EQ(cudaMemcpy(hu, du, sizeof hu, cudaMemcpyDeviceToHost), cudaSuccess);
    if (noop) {
        CHECK(hf[0] == 1.5f && hf[N - 2] == 1.5f && hf[N - 1] == 0.0f);
        CHECK(dl[0] == -1 && dl[N - 2] == -1 && dl[N - 1] == 0);
        CHECK(hu[0] == 0); /* the lambda form's layout is unknown: skipped, nothing written */
        EQ(uvmsim_kernels_skipped("FillFunctor"), 3);
        EQ(uvmsim_kernels_skipped("FillFunctor<float>"), 1);
    } else {
        CHECK(hf[0] == 0.0f && dl[0] == 0);
    }

    /* a launch on a capturing stream is recorded into the graph */
    EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
    EQ(cudaLaunchKernel((const void *)other_stub, one, one, NULL, 0, s), noop ? cudaSuccess : cudaErrorNotSupported);
    cudaGraph_t g = NULL;
    EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    size_t nodes = 99;
    if (g) EQ(cudaGraphGetNodes(g, NULL, &nodes), cudaSuccess);
    EQ(nodes, noop ? 1 : 0);
    if (g) cudaGraphDestroy(g);
    cudaGetLastError();

    EQ(uvmsim_kernels_skipped(NULL), uvmsim_stat("kernels_skipped"));
    EQ(uvmsim_stat("kernels_skipped"), (plain_ok ? 10 : 0) + (noop ? 4 : 0));
    /* every other launch was refused: 10 plain, 3 fills, 1 captured, 1 of an unregistered address */
    EQ(uvmsim_stat("kernels_refused"), 15 - uvmsim_stat("kernels_skipped"));
    cudaFree(df);
    cudaFree(dl);
    cudaFree(du);
    cudaStreamDestroy(s);
    if (g_fail) {
        fprintf(stderr, "sim_kernels_selftest: %d check(s) failed\n", g_fail);
        return 1;
    }
    fprintf(stderr, "sim_kernels_selftest: all checks passed\n");
    return 0;
}
