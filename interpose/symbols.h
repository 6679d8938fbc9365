/* symbols.h: every CUDA symbol libuvmchunk interposes or calls, each declared once.
 * CMake generates the export list from UVMC_INTERPOSED; wrappers' types are checked at build. */
#ifndef UVMC_SYMBOLS_H
#define UVMC_SYMBOLS_H

/* Interposed and exported: X(name, prototype whose type the wrapper must have, library that
 * defines the real one). The _ptds/_ptsz forms are what per-thread-default-stream builds call
 * (BRIEF §2). Legacy unsuffixed driver names are the CUDA 2.x/3.x ABIs (32-bit sizes) that
 * libcuda still exports; cuda.h maps cuMemcpyDtoH to cuMemcpyDtoH_v2 and so on. */
#define UVMC_INTERPOSED(X)                                                         \
    X(cudaMemcpy, cudaMemcpy, RUNTIME)                                             \
    X(cudaMemcpy_ptds, cudaMemcpy, RUNTIME)                                        \
    X(cudaMemcpyAsync, cudaMemcpyAsync, RUNTIME)                                   \
    X(cudaMemcpyAsync_ptsz, cudaMemcpyAsync, RUNTIME)                              \
    X(cudaHostAlloc, cudaHostAlloc, RUNTIME)                                       \
    X(cudaMallocHost, cudaMallocHost, RUNTIME)                                     \
    X(cudaFreeHost, cudaFreeHost, RUNTIME)                                         \
    X(cudaGetDriverEntryPoint, cudaGetDriverEntryPoint, RUNTIME)                   \
    X(cudaGetDriverEntryPoint_ptsz, cudaGetDriverEntryPoint, RUNTIME)              \
    X(cudaGetDriverEntryPointByVersion, cudaGetDriverEntryPointByVersion, RUNTIME) \
    X(cudaGetDriverEntryPointByVersion_ptsz, cudaGetDriverEntryPointByVersion, RUNTIME) \
    X(cuMemcpyDtoH, cuMemcpyDtoH, DRIVER)                                          \
    X(cuMemcpyDtoH_v2, cuMemcpyDtoH_v2, DRIVER)                                    \
    X(cuMemcpyDtoH_v2_ptds, cuMemcpyDtoH_v2, DRIVER)                               \
    X(cuMemcpyDtoHAsync, cuMemcpyDtoHAsync, DRIVER)                                \
    X(cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2, DRIVER)                          \
    X(cuMemcpyDtoHAsync_v2_ptsz, cuMemcpyDtoHAsync_v2, DRIVER)                     \
    X(cuMemcpy, cuMemcpy, DRIVER)                                                  \
    X(cuMemcpy_ptds, cuMemcpy, DRIVER)                                             \
    X(cuMemcpyAsync, cuMemcpyAsync, DRIVER)                                        \
    X(cuMemcpyAsync_ptsz, cuMemcpyAsync, DRIVER)                                   \
    X(cuMemHostAlloc, cuMemHostAlloc, DRIVER)                                      \
    X(cuMemAllocHost_v2, cuMemAllocHost_v2, DRIVER)                                \
    X(cuMemFreeHost, cuMemFreeHost, DRIVER)                                        \
    X(cuGetProcAddress, cuGetProcAddress, DRIVER)                                  \
    X(cuGetProcAddress_v2, cuGetProcAddress_v2, DRIVER)

/* One more export is not in this table: dlsym (x86-64 only), an assembly stub that must jump to
 * glibc's with the caller's return address intact (dlsym_x86_64.S, dlsym.c); CMake adds it to the
 * export list. */

/* Runtime functions called but never interposed: X(name). Resolved like the interposed ones. */
#define UVMC_RUNTIME_CALLED(X) \
    X(cudaGetDevice)           \
    X(cudaSetDevice)           \
    X(cudaEventSynchronize)    \
    X(cudaStreamSynchronize)

/* Driver functions, fetched through cuGetProcAddress with an explicit ABI version so one build
 * serves libcudart 12 and 13 (BRIEF §2): X(name, version, pointer type, required). */
#define UVMC_DRIVER_CALLED(X)                                                 \
    X(cuCtxGetCurrent, 4000, PFN_cuCtxGetCurrent_v4000, 1)                    \
    X(cuEventSynchronize, 2000, PFN_cuEventSynchronize_v2000, 1)              \
    X(cuStreamSynchronize, 2000, PFN_cuStreamSynchronize_v2000, 1)            \
    X(cuCtxGetDevice, 2000, PFN_cuCtxGetDevice_v2000, 1)                      \
    X(cuPointerGetAttributes, 7000, PFN_cuPointerGetAttributes_v7000, 1)      \
    X(cuStreamIsCapturing, 10000, PFN_cuStreamIsCapturing_v10000, 1)          \
    X(cuEventCreate, 2000, PFN_cuEventCreate_v2000, 1)                        \
    X(cuEventRecord, 2000, PFN_cuEventRecord_v2000, 1)                        \
    X(cuEventDestroy, 4000, PFN_cuEventDestroy_v4000, 1)                      \
    X(cuMemPrefetchAsync, 12020, PFN_cuMemPrefetchAsync_v12020, 0)            \
    X(cuMemRangeGetAttribute, 8000, PFN_cuMemRangeGetAttribute_v8000, 0)     \
    X(cuStreamQuery, 2000, PFN_cuStreamQuery_v2000, 1)                        \
    X(cuDeviceGetAttribute, 2000, PFN_cuDeviceGetAttribute_v2000, 1)          \
    X(cuMemHostAlloc, 2020, PFN_cuMemHostAlloc_v2020, 0)                      \
    X(cuMemFreeHost, 2000, PFN_cuMemFreeHost_v2000, 0)                        \
    X(cuThreadExchangeStreamCaptureMode, 10010, PFN_cuThreadExchangeStreamCaptureMode_v10010, 0)

#endif
