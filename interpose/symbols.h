/* symbols.h: every CUDA symbol libuvmchunk interposes or calls, each declared once.
 * CMake generates the export list from UVMC_INTERPOSED; runtime.c checks each wrapper's type. */
#ifndef UVMC_SYMBOLS_H
#define UVMC_SYMBOLS_H

/* Interposed and exported: X(name, prototype whose type the wrapper must have).
 * The _ptds/_ptsz forms are what per-thread-default-stream builds call (BRIEF §2). */
#define UVMC_INTERPOSED(X)                   \
    X(cudaMemcpy, cudaMemcpy)                \
    X(cudaMemcpy_ptds, cudaMemcpy)           \
    X(cudaMemcpyAsync, cudaMemcpyAsync)      \
    X(cudaMemcpyAsync_ptsz, cudaMemcpyAsync)

/* Runtime functions called but never interposed: X(name). Resolved like the interposed ones. */
#define UVMC_RUNTIME_CALLED(X) \
    X(cudaEventSynchronize)    \
    X(cudaStreamSynchronize)   \
    X(cudaGetErrorName)

/* Driver functions, fetched through cuGetProcAddress with an explicit ABI version so one build
 * serves libcudart 12 and 13 (BRIEF §2): X(name, version, pointer type, required). */
#define UVMC_DRIVER_CALLED(X)                                                 \
    X(cuCtxGetCurrent, 4000, PFN_cuCtxGetCurrent_v4000, 1)                    \
    X(cuCtxGetDevice, 2000, PFN_cuCtxGetDevice_v2000, 1)                      \
    X(cuPointerGetAttributes, 7000, PFN_cuPointerGetAttributes_v7000, 1)      \
    X(cuStreamIsCapturing, 10000, PFN_cuStreamIsCapturing_v10000, 1)          \
    X(cuEventCreate, 2000, PFN_cuEventCreate_v2000, 1)                        \
    X(cuEventRecord, 2000, PFN_cuEventRecord_v2000, 1)                        \
    X(cuEventDestroy, 4000, PFN_cuEventDestroy_v4000, 1)                      \
    X(cuMemPrefetchAsync, 12020, PFN_cuMemPrefetchAsync_v12020, 0)

#endif
