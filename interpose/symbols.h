/* symbols.h: every CUDA symbol libuvmchunk interposes or calls, each declared once.
 * CMake generates the export list from UVMC_INTERPOSED; wrappers' types are checked at build. */
#ifndef UVMC_SYMBOLS_H
#define UVMC_SYMBOLS_H

/* Interposed and exported: X(name, prototype whose type the wrapper must have, library that
 * defines the real one). The _ptds/_ptsz forms are what per-thread-default-stream builds call
 * (cuda.h, the _v2 defines). Legacy unsuffixed driver names are the CUDA 2.x/3.x ABIs (32-bit sizes) that
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
    X(cuGetProcAddress_v2, cuGetProcAddress_v2, DRIVER)                                  \
    /* every other use a lazily pinned buffer can see (hostalloc.c, observe.c) */ \
    X(cudaHostRegister, cudaHostRegister, RUNTIME) \
    X(cudaHostUnregister, cudaHostUnregister, RUNTIME) \
    X(cudaPointerGetAttributes, cudaPointerGetAttributes, RUNTIME) \
    X(cudaHostGetDevicePointer, cudaHostGetDevicePointer, RUNTIME) \
    X(cudaHostGetFlags, cudaHostGetFlags, RUNTIME) \
    X(cudaMemcpy2D, cudaMemcpy2D, RUNTIME) \
    X(cudaMemcpy2D_ptds, cudaMemcpy2D, RUNTIME) \
    X(cudaMemcpy2DAsync, cudaMemcpy2DAsync, RUNTIME) \
    X(cudaMemcpy2DAsync_ptsz, cudaMemcpy2DAsync, RUNTIME) \
    X(cudaMemcpy3D, cudaMemcpy3D, RUNTIME) \
    X(cudaMemcpy3D_ptds, cudaMemcpy3D, RUNTIME) \
    X(cudaMemcpy3DAsync, cudaMemcpy3DAsync, RUNTIME) \
    X(cudaMemcpy3DAsync_ptsz, cudaMemcpy3DAsync, RUNTIME) \
    X(cudaMemcpyToSymbol, cudaMemcpyToSymbol, RUNTIME) \
    X(cudaMemcpyToSymbol_ptds, cudaMemcpyToSymbol, RUNTIME) \
    X(cudaMemcpyToSymbolAsync, cudaMemcpyToSymbolAsync, RUNTIME) \
    X(cudaMemcpyToSymbolAsync_ptsz, cudaMemcpyToSymbolAsync, RUNTIME) \
    X(cudaMemcpyFromSymbol, cudaMemcpyFromSymbol, RUNTIME) \
    X(cudaMemcpyFromSymbol_ptds, cudaMemcpyFromSymbol, RUNTIME) \
    X(cudaMemcpyFromSymbolAsync, cudaMemcpyFromSymbolAsync, RUNTIME) \
    X(cudaMemcpyFromSymbolAsync_ptsz, cudaMemcpyFromSymbolAsync, RUNTIME) \
    X(cudaMemcpy2DToArray, cudaMemcpy2DToArray, RUNTIME) \
    X(cudaMemcpy2DToArray_ptds, cudaMemcpy2DToArray, RUNTIME) \
    X(cudaMemcpy2DToArrayAsync, cudaMemcpy2DToArrayAsync, RUNTIME) \
    X(cudaMemcpy2DToArrayAsync_ptsz, cudaMemcpy2DToArrayAsync, RUNTIME) \
    X(cudaMemcpy2DFromArray, cudaMemcpy2DFromArray, RUNTIME) \
    X(cudaMemcpy2DFromArray_ptds, cudaMemcpy2DFromArray, RUNTIME) \
    X(cudaMemcpy2DFromArrayAsync, cudaMemcpy2DFromArrayAsync, RUNTIME) \
    X(cudaMemcpy2DFromArrayAsync_ptsz, cudaMemcpy2DFromArrayAsync, RUNTIME) \
    X(cudaMemcpyToArray, cudaMemcpyToArray, RUNTIME) \
    X(cudaMemcpyToArray_ptds, cudaMemcpyToArray, RUNTIME) \
    X(cudaMemcpyToArrayAsync, cudaMemcpyToArrayAsync, RUNTIME) \
    X(cudaMemcpyToArrayAsync_ptsz, cudaMemcpyToArrayAsync, RUNTIME) \
    X(cudaMemcpyFromArray, cudaMemcpyFromArray, RUNTIME) \
    X(cudaMemcpyFromArray_ptds, cudaMemcpyFromArray, RUNTIME) \
    X(cudaMemcpyFromArrayAsync, cudaMemcpyFromArrayAsync, RUNTIME) \
    X(cudaMemcpyFromArrayAsync_ptsz, cudaMemcpyFromArrayAsync, RUNTIME) \
    X(cuMemHostRegister, cuMemHostRegister, DRIVER) \
    X(cuMemHostRegister_v2, cuMemHostRegister_v2, DRIVER) \
    X(cuMemHostUnregister, cuMemHostUnregister, DRIVER) \
    X(cuPointerGetAttribute, cuPointerGetAttribute, DRIVER) \
    X(cuPointerGetAttributes, cuPointerGetAttributes, DRIVER) \
    X(cuMemHostGetDevicePointer_v2, cuMemHostGetDevicePointer_v2, DRIVER) \
    X(cuMemHostGetFlags, cuMemHostGetFlags, DRIVER) \
    X(cuMemcpyHtoD, cuMemcpyHtoD, DRIVER) \
    X(cuMemcpyHtoD_v2, cuMemcpyHtoD_v2, DRIVER) \
    X(cuMemcpyHtoD_v2_ptds, cuMemcpyHtoD_v2, DRIVER) \
    X(cuMemcpyHtoDAsync, cuMemcpyHtoDAsync, DRIVER) \
    X(cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2, DRIVER) \
    X(cuMemcpyHtoDAsync_v2_ptsz, cuMemcpyHtoDAsync_v2, DRIVER) \
    X(cuMemcpy2D_v2, cuMemcpy2D_v2, DRIVER) \
    X(cuMemcpy2D_v2_ptds, cuMemcpy2D_v2, DRIVER) \
    X(cuMemcpy2DUnaligned_v2, cuMemcpy2DUnaligned_v2, DRIVER) \
    X(cuMemcpy2DUnaligned_v2_ptds, cuMemcpy2DUnaligned_v2, DRIVER) \
    X(cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2, DRIVER) \
    X(cuMemcpy2DAsync_v2_ptsz, cuMemcpy2DAsync_v2, DRIVER) \
    X(cuMemcpy3D_v2, cuMemcpy3D_v2, DRIVER) \
    X(cuMemcpy3D_v2_ptds, cuMemcpy3D_v2, DRIVER) \
    X(cuMemcpy3DAsync_v2, cuMemcpy3DAsync_v2, DRIVER) \
    X(cuMemcpy3DAsync_v2_ptsz, cuMemcpy3DAsync_v2, DRIVER) \
    X(cuMemcpyHtoA_v2, cuMemcpyHtoA_v2, DRIVER) \
    X(cuMemcpyHtoA_v2_ptds, cuMemcpyHtoA_v2, DRIVER) \
    X(cuMemcpyHtoAAsync_v2, cuMemcpyHtoAAsync_v2, DRIVER) \
    X(cuMemcpyHtoAAsync_v2_ptsz, cuMemcpyHtoAAsync_v2, DRIVER) \
    X(cuMemcpyAtoH_v2, cuMemcpyAtoH_v2, DRIVER) \
    X(cuMemcpyAtoH_v2_ptds, cuMemcpyAtoH_v2, DRIVER) \
    X(cuMemcpyAtoHAsync_v2, cuMemcpyAtoHAsync_v2, DRIVER) \
    X(cuMemcpyAtoHAsync_v2_ptsz, cuMemcpyAtoHAsync_v2, DRIVER) \
    /* memsets, peer and batch copies (CUDA 12.8+), the legacy device-pointer query */ \
    X(cudaMemset, cudaMemset, RUNTIME) \
    X(cudaMemset_ptds, cudaMemset, RUNTIME) \
    X(cudaMemsetAsync, cudaMemsetAsync, RUNTIME) \
    X(cudaMemsetAsync_ptsz, cudaMemsetAsync, RUNTIME) \
    X(cudaMemset2D, cudaMemset2D, RUNTIME) \
    X(cudaMemset2D_ptds, cudaMemset2D, RUNTIME) \
    X(cudaMemset2DAsync, cudaMemset2DAsync, RUNTIME) \
    X(cudaMemset2DAsync_ptsz, cudaMemset2DAsync, RUNTIME) \
    X(cudaMemset3D, cudaMemset3D, RUNTIME) \
    X(cudaMemset3D_ptds, cudaMemset3D, RUNTIME) \
    X(cudaMemset3DAsync, cudaMemset3DAsync, RUNTIME) \
    X(cudaMemset3DAsync_ptsz, cudaMemset3DAsync, RUNTIME) \
    X(cudaMemcpyPeer, cudaMemcpyPeer, RUNTIME) \
    X(cudaMemcpyPeerAsync, cudaMemcpyPeerAsync, RUNTIME) \
    X(cudaMemcpy3DPeer, cudaMemcpy3DPeer, RUNTIME) \
    X(cudaMemcpy3DPeer_ptds, cudaMemcpy3DPeer, RUNTIME) \
    X(cudaMemcpy3DPeerAsync, cudaMemcpy3DPeerAsync, RUNTIME) \
    X(cudaMemcpy3DPeerAsync_ptsz, cudaMemcpy3DPeerAsync, RUNTIME) \
    X(cudaMemcpyBatchAsync, cudaMemcpyBatchAsync, RUNTIME) \
    X(cudaMemcpyBatchAsync_ptsz, cudaMemcpyBatchAsync, RUNTIME) \
    X(cudaMemcpy3DBatchAsync, cudaMemcpy3DBatchAsync, RUNTIME) \
    X(cudaMemcpy3DBatchAsync_ptsz, cudaMemcpy3DBatchAsync, RUNTIME) \
    X(cuMemsetD8_v2, cuMemsetD8_v2, DRIVER) \
    X(cuMemsetD8_v2_ptds, cuMemsetD8_v2, DRIVER) \
    X(cuMemsetD16_v2, cuMemsetD16_v2, DRIVER) \
    X(cuMemsetD16_v2_ptds, cuMemsetD16_v2, DRIVER) \
    X(cuMemsetD32_v2, cuMemsetD32_v2, DRIVER) \
    X(cuMemsetD32_v2_ptds, cuMemsetD32_v2, DRIVER) \
    X(cuMemsetD8Async, cuMemsetD8Async, DRIVER) \
    X(cuMemsetD8Async_ptsz, cuMemsetD8Async, DRIVER) \
    X(cuMemsetD16Async, cuMemsetD16Async, DRIVER) \
    X(cuMemsetD16Async_ptsz, cuMemsetD16Async, DRIVER) \
    X(cuMemsetD32Async, cuMemsetD32Async, DRIVER) \
    X(cuMemsetD32Async_ptsz, cuMemsetD32Async, DRIVER) \
    X(cuMemsetD2D8_v2, cuMemsetD2D8_v2, DRIVER) \
    X(cuMemsetD2D8_v2_ptds, cuMemsetD2D8_v2, DRIVER) \
    X(cuMemsetD2D16_v2, cuMemsetD2D16_v2, DRIVER) \
    X(cuMemsetD2D16_v2_ptds, cuMemsetD2D16_v2, DRIVER) \
    X(cuMemsetD2D32_v2, cuMemsetD2D32_v2, DRIVER) \
    X(cuMemsetD2D32_v2_ptds, cuMemsetD2D32_v2, DRIVER) \
    X(cuMemsetD2D8Async, cuMemsetD2D8Async, DRIVER) \
    X(cuMemsetD2D8Async_ptsz, cuMemsetD2D8Async, DRIVER) \
    X(cuMemsetD2D16Async, cuMemsetD2D16Async, DRIVER) \
    X(cuMemsetD2D16Async_ptsz, cuMemsetD2D16Async, DRIVER) \
    X(cuMemsetD2D32Async, cuMemsetD2D32Async, DRIVER) \
    X(cuMemsetD2D32Async_ptsz, cuMemsetD2D32Async, DRIVER) \
    X(cuMemcpyPeer, cuMemcpyPeer, DRIVER) \
    X(cuMemcpyPeer_ptds, cuMemcpyPeer, DRIVER) \
    X(cuMemcpyPeerAsync, cuMemcpyPeerAsync, DRIVER) \
    X(cuMemcpyPeerAsync_ptsz, cuMemcpyPeerAsync, DRIVER) \
    X(cuMemcpy3DPeer, cuMemcpy3DPeer, DRIVER) \
    X(cuMemcpy3DPeer_ptds, cuMemcpy3DPeer, DRIVER) \
    X(cuMemcpy3DPeerAsync, cuMemcpy3DPeerAsync, DRIVER) \
    X(cuMemcpy3DPeerAsync_ptsz, cuMemcpy3DPeerAsync, DRIVER) \
    X(cuMemcpyBatchAsync, cuMemcpyBatchAsync, DRIVER) \
    X(cuMemcpyBatchAsync_ptsz, cuMemcpyBatchAsync, DRIVER) \
    X(cuMemcpyBatchAsync_v2, cuMemcpyBatchAsync_v2, DRIVER) \
    X(cuMemcpyBatchAsync_v2_ptsz, cuMemcpyBatchAsync_v2, DRIVER) \
    X(cuMemcpy3DBatchAsync, cuMemcpy3DBatchAsync, DRIVER) \
    X(cuMemcpy3DBatchAsync_ptsz, cuMemcpy3DBatchAsync, DRIVER) \
    X(cuMemcpy3DBatchAsync_v2, cuMemcpy3DBatchAsync_v2, DRIVER) \
    X(cuMemcpy3DBatchAsync_v2_ptsz, cuMemcpy3DBatchAsync_v2, DRIVER) \
    X(cuMemHostGetDevicePointer, cuMemHostGetDevicePointer, DRIVER) \
    /* managed allocations, passed through: the first says a missing package hook (pyhook.c) */ \
    X(cudaMallocManaged, cudaMallocManaged, RUNTIME) \
    X(cuMemAllocManaged, cuMemAllocManaged, DRIVER)

/* Runtime functions called but never interposed: X(name). Resolved like the interposed ones. */
#define UVMC_RUNTIME_CALLED(X) \
    X(cudaGetDevice)           \
    X(cudaSetDevice)           \
    X(cudaEventSynchronize)    \
    X(cudaStreamSynchronize)

/* Driver functions, fetched through cuGetProcAddress with an explicit ABI version so one build
 * serves libcudart 12 and 13: X(name, version, pointer type, required). */
#define UVMC_DRIVER_CALLED(X)                                                 \
    X(cuCtxGetCurrent, 4000, PFN_cuCtxGetCurrent_v4000, 1)                    \
    X(cuEventSynchronize, 2000, PFN_cuEventSynchronize_v2000, 1)              \
    X(cuEventQuery, 2000, PFN_cuEventQuery_v2000, 1)                          \
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
    X(cuStreamGetFlags, 5050, PFN_cuStreamGetFlags_v5050, 0)                  \
    X(cuDeviceGetAttribute, 2000, PFN_cuDeviceGetAttribute_v2000, 1)          \
    X(cuMemHostAlloc, 2020, PFN_cuMemHostAlloc_v2020, 0)                      \
    X(cuMemFreeHost, 2000, PFN_cuMemFreeHost_v2000, 0)                        \
    X(cuThreadExchangeStreamCaptureMode, 10010, PFN_cuThreadExchangeStreamCaptureMode_v10010, 0) \
    X(cuMemHostRegister, 6050, PFN_cuMemHostRegister_v6050, 0)                \
    X(cuMemHostUnregister, 4000, PFN_cuMemHostUnregister_v4000, 0)            \
    X(cuCtxSynchronize, 2000, PFN_cuCtxSynchronize_v2000, 0)                  \
    X(cuStreamGetCtx, 9020, PFN_cuStreamGetCtx_v9020, 0)                      \
    X(cuCtxPushCurrent, 4000, PFN_cuCtxPushCurrent_v4000, 0)                  \
    X(cuCtxPopCurrent, 4000, PFN_cuCtxPopCurrent_v4000, 0)                    \
    X(cuDeviceGetCount, 2000, PFN_cuDeviceGetCount_v2000, 0)                  \
    X(cuDeviceGet, 2000, PFN_cuDeviceGet_v2000, 0)                            \
    X(cuDevicePrimaryCtxGetState, 7000, PFN_cuDevicePrimaryCtxGetState_v7000, 0) \
    X(cuDevicePrimaryCtxRetain, 7000, PFN_cuDevicePrimaryCtxRetain_v7000, 0)  \
    X(cuDevicePrimaryCtxRelease, 11000, PFN_cuDevicePrimaryCtxRelease_v11000, 0)

#endif
