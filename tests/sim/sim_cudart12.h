/* sim_cudart12.h: the CUDA 12 layouts that the CUDA 13 headers no longer describe, for the
 * libcudart.so.12 flavour of sim_runtime.c (which is compiled against the toolkit's CUDA 13
 * headers). Field order and types as in driver_types.h of CUDA 12.8 (the nvidia-cuda-runtime-cu12
 * 12.8.90 wheel, include/driver_types.h): CUDA 13 dropped clockRate, deviceOverlap,
 * kernelExecTimeoutEnabled, computeMode, maxTexture1DLinear, memoryClockRate,
 * singleToDoublePrecisionPerfRatio and cooperativeMultiDeviceLaunch from cudaDeviceProp (so every
 * later field moved) and appended reserved words to cudaPointerAttributes. A CUDA 12 program's
 * buffers have these sizes: writing the CUDA 13 layout into them puts every value in the wrong
 * field (or past the end). */
#ifndef UVMSIM_SIM_CUDART12_H
#define UVMSIM_SIM_CUDART12_H

#include <stddef.h>

#include <cuda_runtime_api.h>

struct uvmsim_device_prop12 {
    char name[256];
    cudaUUID_t uuid;
    char luid[8];
    unsigned int luidDeviceNodeMask;
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    int regsPerBlock;
    int warpSize;
    size_t memPitch;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int clockRate;
    size_t totalConstMem;
    int major;
    int minor;
    size_t textureAlignment;
    size_t texturePitchAlignment;
    int deviceOverlap;
    int multiProcessorCount;
    int kernelExecTimeoutEnabled;
    int integrated;
    int canMapHostMemory;
    int computeMode;
    int maxTexture1D;
    int maxTexture1DMipmap;
    int maxTexture1DLinear;
    int maxTexture2D[2];
    int maxTexture2DMipmap[2];
    int maxTexture2DLinear[3];
    int maxTexture2DGather[2];
    int maxTexture3D[3];
    int maxTexture3DAlt[3];
    int maxTextureCubemap;
    int maxTexture1DLayered[2];
    int maxTexture2DLayered[3];
    int maxTextureCubemapLayered[2];
    int maxSurface1D;
    int maxSurface2D[2];
    int maxSurface3D[3];
    int maxSurface1DLayered[2];
    int maxSurface2DLayered[3];
    int maxSurfaceCubemap;
    int maxSurfaceCubemapLayered[2];
    size_t surfaceAlignment;
    int concurrentKernels;
    int ECCEnabled;
    int pciBusID;
    int pciDeviceID;
    int pciDomainID;
    int tccDriver;
    int asyncEngineCount;
    int unifiedAddressing;
    int memoryClockRate;
    int memoryBusWidth;
    int l2CacheSize;
    int persistingL2CacheMaxSize;
    int maxThreadsPerMultiProcessor;
    int streamPrioritiesSupported;
    int globalL1CacheSupported;
    int localL1CacheSupported;
    size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor;
    int managedMemory;
    int isMultiGpuBoard;
    int multiGpuBoardGroupID;
    int hostNativeAtomicSupported;
    int singleToDoublePrecisionPerfRatio;
    int pageableMemoryAccess;
    int concurrentManagedAccess;
    int computePreemptionSupported;
    int canUseHostPointerForRegisteredMem;
    int cooperativeLaunch;
    int cooperativeMultiDeviceLaunch;
    size_t sharedMemPerBlockOptin;
    int pageableMemoryAccessUsesHostPageTables;
    int directManagedMemAccessFromHost;
    int maxBlocksPerMultiProcessor;
    int accessPolicyMaxWindowSize;
    size_t reservedSharedMemPerBlock;
    int hostRegisterSupported;
    int sparseCudaArraySupported;
    int hostRegisterReadOnlySupported;
    int timelineSemaphoreInteropSupported;
    int memoryPoolsSupported;
    int gpuDirectRDMASupported;
    unsigned int gpuDirectRDMAFlushWritesOptions;
    int gpuDirectRDMAWritesOrdering;
    unsigned int memoryPoolSupportedHandleTypes;
    int deferredMappingCudaArraySupported;
    int ipcEventSupported;
    int clusterLaunch;
    int unifiedFunctionPointers;
    int reserved[63];
};
/* Sizes and offsets measured with the CUDA 12.8 header (gcc, x86-64). */
_Static_assert(sizeof(struct uvmsim_device_prop12) == 1032, "CUDA 12 cudaDeviceProp is 1032 bytes");
_Static_assert(offsetof(struct uvmsim_device_prop12, clockRate) == 348, "clockRate at 348");
_Static_assert(offsetof(struct uvmsim_device_prop12, maxThreadsPerMultiProcessor) == 624, "maxThreadsPerMultiProcessor at 624");
_Static_assert(offsetof(struct uvmsim_device_prop12, unifiedFunctionPointers) == 776, "unifiedFunctionPointers at 776");

/* CUDA 12's cudaPointerAttributes ends before CUDA 13's reserved words: 24 bytes. */
#define UVMSIM_POINTER_ATTRIBUTES12_SIZE offsetof(struct cudaPointerAttributes, reserved)
_Static_assert(UVMSIM_POINTER_ATTRIBUTES12_SIZE == 24, "CUDA 12 cudaPointerAttributes is 24 bytes");

#endif
