/* sim_procaddr.c: cuGetProcAddress (legacy and _v2): one table of every simulated entry point by
 * name and minimum version, with its _ptds/_ptsz form; the simulated runtimes fetch everything here. */
#include <string.h>

#include "sim_internal.h"

CUresult CUDAAPI cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st);
CUresult CUDAAPI cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags);

struct proc { const char *name; int minver; void *fn, *fn_ptds; };
#define R(n, v, f) { n, v, (void *)(f), NULL }
#define RP(n, v, f, fp) { n, v, (void *)(f), (void *)(fp) }
/* rows of one name: highest minver first */
static const struct proc g_procs[] = {
    R("cuGetProcAddress", 12000, cuGetProcAddress_v2), R("cuGetProcAddress", 11030, cuGetProcAddress),
    R("cuInit", 2000, cuInit), R("cuDriverGetVersion", 2020, cuDriverGetVersion),
    R("cuDeviceGet", 2000, cuDeviceGet), R("cuDeviceGetCount", 2000, cuDeviceGetCount),
    R("cuDeviceGetName", 2000, cuDeviceGetName), R("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    R("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    R("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    R("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2), R("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset),
    R("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2), R("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    R("cuCtxGetCurrent", 4000, cuCtxGetCurrent), R("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    R("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2), R("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    R("cuCtxPushCurrent", 2000, cuCtxPushCurrent), R("cuCtxPopCurrent", 2000, cuCtxPopCurrent),
    R("cuDeviceCanAccessPeer", 4000, cuDeviceCanAccessPeer), R("cuDeviceGetP2PAttribute", 8000, cuDeviceGetP2PAttribute),
    R("cuCtxEnablePeerAccess", 4000, cuCtxEnablePeerAccess), R("cuCtxDisablePeerAccess", 4000, cuCtxDisablePeerAccess),
    R("cuCtxGetDevice", 2000, cuCtxGetDevice), R("cuCtxSynchronize", 2000, cuCtxSynchronize),
    R("cuGetErrorString", 6000, cuGetErrorString), R("cuGetErrorName", 6000, cuGetErrorName),
    R("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    R("cuMemAlloc", 3020, cuMemAlloc_v2), R("cuMemFree", 3020, cuMemFree_v2),
    R("cuMemAllocManaged", 6000, cuMemAllocManaged),
    R("cuMemHostAlloc", 2020, cuMemHostAlloc), R("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    R("cuMemFreeHost", 2000, cuMemFreeHost),
    R("cuMemHostRegister", 6050, cuMemHostRegister_v2), R("cuMemHostRegister", 4000, cuMemHostRegister),
    R("cuMemHostUnregister", 4000, cuMemHostUnregister),
    R("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    R("cuPointerGetAttribute", 4000, cuPointerGetAttribute), R("cuPointerGetAttributes", 7000, cuPointerGetAttributes),
    RP("cuMemcpy", 4000, cuMemcpy, cuMemcpy_ptds), RP("cuMemcpyAsync", 4000, cuMemcpyAsync, cuMemcpyAsync_ptsz),
    RP("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2, cuMemcpyDtoH_v2_ptds), R("cuMemcpyDtoH", 2000, cuMemcpyDtoH),
    RP("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2, cuMemcpyDtoHAsync_v2_ptsz), R("cuMemcpyDtoHAsync", 2000, cuMemcpyDtoHAsync),
    RP("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2, cuMemcpyHtoD_v2_ptds), R("cuMemcpyHtoD", 2000, cuMemcpyHtoD),
    RP("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2, cuMemcpyHtoDAsync_v2_ptsz), R("cuMemcpyHtoDAsync", 2000, cuMemcpyHtoDAsync),
    RP("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2, cuMemcpyDtoD_v2_ptds), R("cuMemcpyDtoD", 2000, cuMemcpyDtoD),
    RP("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2, cuMemcpyDtoDAsync_v2_ptsz), R("cuMemcpyDtoDAsync", 3000, cuMemcpyDtoDAsync),
    RP("cuMemcpy2D", 3020, cuMemcpy2D_v2, cuMemcpy2D_v2_ptds), RP("cuMemcpy2DAsync", 3020, cuMemcpy2DAsync_v2, cuMemcpy2DAsync_v2_ptsz),
    RP("cuMemsetD8", 3020, cuMemsetD8_v2, cuMemsetD8_v2_ptds), RP("cuMemsetD16", 3020, cuMemsetD16_v2, cuMemsetD16_v2_ptds),
    RP("cuMemsetD32", 3020, cuMemsetD32_v2, cuMemsetD32_v2_ptds),
    RP("cuMemsetD8Async", 3020, cuMemsetD8Async, cuMemsetD8Async_ptsz), RP("cuMemsetD16Async", 3020, cuMemsetD16Async, cuMemsetD16Async_ptsz),
    RP("cuMemsetD32Async", 3020, cuMemsetD32Async, cuMemsetD32Async_ptsz),
    RP("cuMemPrefetchAsync", 12020, cuMemPrefetchAsync_v2, cuMemPrefetchAsync_v2_ptsz), RP("cuMemPrefetchAsync", 8000, cuMemPrefetchAsync, cuMemPrefetchAsync_ptsz),
    R("cuMemAdvise", 12020, cuMemAdvise_v2), R("cuMemAdvise", 8000, cuMemAdvise),
    R("cuMemRangeGetAttribute", 8000, cuMemRangeGetAttribute),
    R("cuStreamCreate", 2000, cuStreamCreate), R("cuStreamCreateWithPriority", 5050, cuStreamCreateWithPriority),
    R("cuStreamDestroy", 4000, cuStreamDestroy_v2), R("cuStreamDestroy", 2000, cuStreamDestroy),
    RP("cuStreamSynchronize", 2000, cuStreamSynchronize, cuStreamSynchronize_ptsz),
    RP("cuStreamQuery", 2000, cuStreamQuery, cuStreamQuery_ptsz),
    RP("cuStreamGetFlags", 5050, cuStreamGetFlags, cuStreamGetFlags_ptsz),
    RP("cuStreamGetCtx", 9020, cuStreamGetCtx, cuStreamGetCtx_ptsz), RP("cuStreamGetDevice", 12080, cuStreamGetDevice, cuStreamGetDevice_ptsz),
    RP("cuStreamGetPriority", 5050, cuStreamGetPriority, cuStreamGetPriority_ptsz),
    RP("cuStreamWaitEvent", 3020, cuStreamWaitEvent, cuStreamWaitEvent_ptsz),
    RP("cuLaunchHostFunc", 10000, cuLaunchHostFunc, cuLaunchHostFunc_ptsz),
    R("cuEventCreate", 2000, cuEventCreate),
    RP("cuEventRecord", 2000, cuEventRecord, cuEventRecord_ptsz),
    RP("cuEventRecordWithFlags", 11010, cuEventRecordWithFlags, cuEventRecordWithFlags_ptsz),
    R("cuEventQuery", 2000, cuEventQuery), R("cuEventSynchronize", 2000, cuEventSynchronize),
    R("cuEventDestroy", 4000, cuEventDestroy_v2), R("cuEventDestroy", 2000, cuEventDestroy),
    R("cuEventElapsedTime", 12080, cuEventElapsedTime_v2), R("cuEventElapsedTime", 2000, cuEventElapsedTime),
    RP("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2, cuStreamBeginCapture_v2_ptsz),
    RP("cuStreamBeginCapture", 10000, cuStreamBeginCapture, cuStreamBeginCapture_ptsz),
    RP("cuStreamEndCapture", 10000, cuStreamEndCapture, cuStreamEndCapture_ptsz),
    RP("cuStreamIsCapturing", 10000, cuStreamIsCapturing, cuStreamIsCapturing_ptsz),
    RP("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3, cuStreamGetCaptureInfo_v3_ptsz),
    RP("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2, cuStreamGetCaptureInfo_v2_ptsz),
    RP("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo, cuStreamGetCaptureInfo_ptsz),
    R("cuThreadExchangeStreamCaptureMode", 10010, cuThreadExchangeStreamCaptureMode),
    R("cuGraphDestroy", 10000, cuGraphDestroy),
    R("cuGraphGetNodes", 10000, cuGraphGetNodes), R("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    R("cuGraphExecDestroy", 10000, cuGraphExecDestroy), RP("cuGraphLaunch", 10000, cuGraphLaunch, cuGraphLaunch_ptsz),
    R("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),
    RP("cuLaunchKernel", 4000, cuLaunchKernel, cuLaunchKernel_ptsz),
    RP("cuLaunchKernelEx", 11060, cuLaunchKernelEx, cuLaunchKernelEx_ptsz),
    RP("cuLaunchCooperativeKernel", 9000, cuLaunchCooperativeKernel, cuLaunchCooperativeKernel_ptsz),
    R("cuFuncGetName", 12030, cuFuncGetName),
};

static CUresult proc_lookup(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st) {
    if (!sym || !pfn || (flags & ~(cuuint64_t)(CU_GET_PROC_ADDRESS_LEGACY_STREAM | CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM)))
        return CUDA_ERROR_INVALID_VALUE;
    int known = 0;
    for (size_t i = 0; i < sizeof g_procs / sizeof g_procs[0]; i++) {
        if (strcmp(g_procs[i].name, sym)) continue;
        known = 1;
        if (ver < g_procs[i].minver) continue;
        int ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) && g_procs[i].fn_ptds;
        *pfn = ptds ? g_procs[i].fn_ptds : g_procs[i].fn;
        if (st) *st = CU_GET_PROC_ADDRESS_SUCCESS;
        return CUDA_SUCCESS;
    }
    *pfn = NULL;
    if (st) *st = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return CUDA_ERROR_NOT_FOUND;
}
CUresult CUDAAPI cuGetProcAddress_v2(const char *sym, void **pfn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st) {
    ENTER("cuGetProcAddress_v2");
    return proc_lookup(sym, pfn, ver, flags, st);
}
CUresult CUDAAPI cuGetProcAddress(const char *sym, void **pfn, int ver, cuuint64_t flags) {
    ENTER("cuGetProcAddress");
    return proc_lookup(sym, pfn, ver, flags, NULL);
}
