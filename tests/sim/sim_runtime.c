/* sim_runtime.c: simulated CUDA runtime (libcudart.so.13, or .so.12 with -DUVMSIM_CUDART_MAJOR=12).
 * Like the real libcudart it holds no device state and has no DT_NEEDED on libcuda: at first use it
 * dlopens libcuda.so.1 and fetches every driver entry point through cuGetProcAddress_v2. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <uthash.h>

#ifndef UVMSIM_CUDART_MAJOR
#define UVMSIM_CUDART_MAJOR 13
#endif

#if UVMSIM_CUDART_MAJOR == 12
/* hide the CUDA 13 declarations; this flavour defines the CUDA 12 int-device forms */
#define cudaMemPrefetchAsync uvmsim_hidden_decl_cudaMemPrefetchAsync
#define cudaMemAdvise uvmsim_hidden_decl_cudaMemAdvise
#define cudaGetDeviceProperties uvmsim_hidden_decl_cudaGetDeviceProperties
#define RT_VERSION 12080
#else
#define RT_VERSION 13000
#endif

#pragma GCC visibility push(default)
#include <cuda_runtime_api.h>
#if UVMSIM_CUDART_MAJOR == 12
#undef cudaMemPrefetchAsync
#undef cudaMemAdvise
#undef cudaGetDeviceProperties
#include "sim_cudart12.h"
typedef struct uvmsim_device_prop12 rt_device_prop;                      /* CUDA 12 layout */
#define RT_POINTER_ATTRIBUTES_SIZE UVMSIM_POINTER_ATTRIBUTES12_SIZE
cudaError_t CUDARTAPI cudaGetDeviceProperties(rt_device_prop *prop, int device);
cudaError_t CUDARTAPI cudaMemPrefetchAsync(const void *devPtr, size_t count, int dstDevice, cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count, int dstDevice, cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemAdvise(const void *devPtr, size_t count, enum cudaMemoryAdvise advice, int device);
cudaError_t CUDARTAPI cudaMemPrefetchAsync_v2(const void *devPtr, size_t count, struct cudaMemLocation location, unsigned int flags, cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemPrefetchAsync_v2_ptsz(const void *devPtr, size_t count, struct cudaMemLocation location, unsigned int flags, cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemAdvise_v2(const void *devPtr, size_t count, enum cudaMemoryAdvise advice, struct cudaMemLocation location);
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_v2(cudaStream_t stream, enum cudaStreamCaptureStatus *st, unsigned long long *id, cudaGraph_t *g, const cudaGraphNode_t **d, size_t *n);
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_v2_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *st, unsigned long long *id, cudaGraph_t *g, const cudaGraphNode_t **d, size_t *n);
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_v3(cudaStream_t stream, enum cudaStreamCaptureStatus *st, unsigned long long *id, cudaGraph_t *g, const cudaGraphNode_t **d, const cudaGraphEdgeData **e, size_t *n);
#else
typedef struct cudaDeviceProp rt_device_prop;
#define RT_POINTER_ATTRIBUTES_SIZE sizeof(struct cudaPointerAttributes)
cudaError_t CUDARTAPI cudaMemPrefetchAsync_ptsz(const void *devPtr, size_t count, struct cudaMemLocation location, unsigned int flags, cudaStream_t stream);
#endif
/* per-thread default stream entry points (declared by the header only under CUDA_API_PER_THREAD_DEFAULT_STREAM) */
cudaError_t CUDARTAPI cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind);
cudaError_t CUDARTAPI cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind);
cudaError_t CUDARTAPI cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream);
cudaError_t CUDARTAPI cudaMemset_ptds(void *devPtr, int value, size_t count);
cudaError_t CUDARTAPI cudaMemsetAsync_ptsz(void *devPtr, int value, size_t count, cudaStream_t stream);
cudaError_t CUDARTAPI cudaStreamSynchronize_ptsz(cudaStream_t stream);
cudaError_t CUDARTAPI cudaStreamQuery_ptsz(cudaStream_t stream);
cudaError_t CUDARTAPI cudaStreamGetFlags_ptsz(cudaStream_t stream, unsigned int *flags);
cudaError_t CUDARTAPI cudaStreamGetPriority_ptsz(cudaStream_t stream, int *priority);
cudaError_t CUDARTAPI cudaStreamWaitEvent_ptsz(cudaStream_t stream, cudaEvent_t event, unsigned int flags);
cudaError_t CUDARTAPI cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData);
cudaError_t CUDARTAPI cudaEventRecord_ptsz(cudaEvent_t event, cudaStream_t stream);
cudaError_t CUDARTAPI cudaEventRecordWithFlags_ptsz(cudaEvent_t event, cudaStream_t stream, unsigned int flags);
cudaError_t CUDARTAPI cudaStreamBeginCapture_ptsz(cudaStream_t stream, enum cudaStreamCaptureMode mode);
cudaError_t CUDARTAPI cudaStreamEndCapture_ptsz(cudaStream_t stream, cudaGraph_t *pGraph);
cudaError_t CUDARTAPI cudaStreamIsCapturing_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *pCaptureStatus);
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_ptsz(cudaStream_t stream, enum cudaStreamCaptureStatus *st, unsigned long long *id, cudaGraph_t *g, const cudaGraphNode_t **d, const cudaGraphEdgeData **e, size_t *n);
cudaError_t CUDARTAPI cudaGetDeviceProperties_v2(rt_device_prop *prop, int device);
cudaError_t CUDARTAPI cudaGetDriverEntryPoint_ptsz(const char *symbol, void **funcPtr, unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus);
cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags, enum cudaDriverEntryPointQueryResult *driverStatus);
#pragma GCC visibility pop

#include <cuda.h> /* driver types only; nothing of it is defined here */

/* The simulated driver's launch hooks (sim_kernels.c), fetched with dlsym like uvmsim_hook_enter. */
unsigned uvmsim_kernel_launch(const char *entry, const void *handle, const char *mangled, void **args, CUstream h, int ptds);
void uvmsim_kernel_name(const void *handle, const char *mangled);

/* ------------------------------------------------------------------ driver entry points */

typedef CUresult (*pf_prefetch_legacy)(CUdeviceptr, size_t, CUdevice, CUstream);
typedef CUresult (*pf_advise_legacy)(CUdeviceptr, size_t, CUmem_advise, CUdevice);

#define DECL(fn) static __typeof__(fn) *d_##fn;
#define DECLP(fn) static __typeof__(fn) *d_##fn, *dp_##fn;
DECL(cuInit) DECL(cuDriverGetVersion) DECL(cuDeviceGetCount) DECL(cuDeviceGetName) DECL(cuDeviceTotalMem)
DECL(cuDeviceGetAttribute) DECL(cuDevicePrimaryCtxRetain) DECL(cuDevicePrimaryCtxReset) DECL(cuCtxGetCurrent) DECL(cuCtxSetCurrent)
DECL(cuCtxSynchronize) DECL(cuMemGetInfo) DECL(cuMemAlloc) DECL(cuMemFree) DECL(cuMemAllocManaged)
DECL(cuMemHostAlloc) DECL(cuMemFreeHost) DECL(cuMemHostRegister) DECL(cuMemHostUnregister)
DECL(cuPointerGetAttributes) DECL(cuMemAdvise) DECL(cuMemRangeGetAttribute)
DECLP(cuMemcpy) DECLP(cuMemcpyAsync) DECLP(cuMemcpy2D) DECLP(cuMemcpy2DAsync) DECLP(cuMemsetD8) DECLP(cuMemsetD8Async)
DECLP(cuMemPrefetchAsync)
DECL(cuStreamCreate) DECL(cuStreamCreateWithPriority) DECL(cuStreamDestroy)
DECLP(cuStreamSynchronize) DECLP(cuStreamQuery) DECLP(cuStreamGetFlags) DECLP(cuStreamGetPriority) DECLP(cuStreamWaitEvent)
DECLP(cuLaunchHostFunc) DECL(cuEventCreate) DECLP(cuEventRecord) DECLP(cuEventRecordWithFlags) DECL(cuEventQuery)
DECL(cuEventSynchronize) DECL(cuEventDestroy) DECL(cuEventElapsedTime)
DECLP(cuStreamBeginCapture) DECLP(cuStreamEndCapture) DECLP(cuStreamIsCapturing) DECLP(cuStreamGetCaptureInfo)
DECL(cuThreadExchangeStreamCaptureMode) DECL(cuGraphDestroy) DECL(cuGetProcAddress)
DECL(cuCtxGetDevice) DECL(cuDeviceCanAccessPeer) DECL(cuDeviceGetP2PAttribute) DECL(cuCtxEnablePeerAccess)
DECL(cuCtxDisablePeerAccess) DECLP(cuStreamGetDevice)
DECL(cuGraphGetNodes) DECL(cuGraphInstantiateWithFlags) DECL(cuGraphExecDestroy) DECLP(cuGraphLaunch)
static pf_prefetch_legacy d_prefetch_legacy, dp_prefetch_legacy;
static pf_advise_legacy d_advise_legacy;

static unsigned (*g_hook_enter)(const char *);
static __typeof__(uvmsim_kernel_launch) *g_kernel_launch;
static __typeof__(uvmsim_kernel_name) *g_kernel_name;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_ok;
static __thread cudaError_t tl_last;

static void rt_init(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    if (!h) return;
    __typeof__(cuGetProcAddress) *gpa = (__typeof__(cuGetProcAddress) *)dlsym(h, "cuGetProcAddress_v2");
    g_hook_enter = (unsigned (*)(const char *))dlsym(h, "uvmsim_hook_enter");
    g_kernel_launch = (__typeof__(uvmsim_kernel_launch) *)dlsym(h, "uvmsim_kernel_launch");
    g_kernel_name = (__typeof__(uvmsim_kernel_name) *)dlsym(h, "uvmsim_kernel_name");
    void (*reg)(const void *) = (void (*)(const void *))dlsym(h, "uvmsim_rt_register");
    if (!gpa || !g_hook_enter || !reg || !g_kernel_launch || !g_kernel_name) return;
    reg((const void *)rt_init); /* our own driver calls are not the program's: not counted */
    const cuuint64_t L = CU_GET_PROC_ADDRESS_DEFAULT, T = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    struct { const char *name; int ver; cuuint64_t flags; void **slot; } f[] = {
#define F(n, v, slot) { n, v, L, (void **)&slot }
#define FT(n, v, slot) { n, v, T, (void **)&slot }
        F("cuGetProcAddress", 12000, d_cuGetProcAddress),
        F("cuInit", 2000, d_cuInit), F("cuDriverGetVersion", 2020, d_cuDriverGetVersion),
        F("cuDeviceGetCount", 2000, d_cuDeviceGetCount), F("cuDeviceGetName", 2000, d_cuDeviceGetName),
        F("cuDeviceTotalMem", 3020, d_cuDeviceTotalMem), F("cuDeviceGetAttribute", 2000, d_cuDeviceGetAttribute),
        F("cuDevicePrimaryCtxRetain", 7000, d_cuDevicePrimaryCtxRetain),
        F("cuDevicePrimaryCtxReset", 11000, d_cuDevicePrimaryCtxReset), F("cuCtxGetCurrent", 4000, d_cuCtxGetCurrent),
        F("cuCtxSetCurrent", 4000, d_cuCtxSetCurrent), F("cuCtxSynchronize", 2000, d_cuCtxSynchronize),
        F("cuCtxGetDevice", 2000, d_cuCtxGetDevice), F("cuDeviceCanAccessPeer", 4000, d_cuDeviceCanAccessPeer),
        F("cuDeviceGetP2PAttribute", 8000, d_cuDeviceGetP2PAttribute),
        F("cuCtxEnablePeerAccess", 4000, d_cuCtxEnablePeerAccess), F("cuCtxDisablePeerAccess", 4000, d_cuCtxDisablePeerAccess),
        F("cuStreamGetDevice", 12080, d_cuStreamGetDevice), FT("cuStreamGetDevice", 12080, dp_cuStreamGetDevice),
        F("cuMemGetInfo", 3020, d_cuMemGetInfo), F("cuMemAlloc", 3020, d_cuMemAlloc), F("cuMemFree", 3020, d_cuMemFree),
        F("cuMemAllocManaged", 6000, d_cuMemAllocManaged), F("cuMemHostAlloc", 2020, d_cuMemHostAlloc),
        F("cuMemFreeHost", 2000, d_cuMemFreeHost), F("cuMemHostRegister", 6050, d_cuMemHostRegister),
        F("cuMemHostUnregister", 4000, d_cuMemHostUnregister), F("cuPointerGetAttributes", 7000, d_cuPointerGetAttributes),
        F("cuMemAdvise", 12020, d_cuMemAdvise), F("cuMemAdvise", 8000, d_advise_legacy),
        F("cuMemRangeGetAttribute", 8000, d_cuMemRangeGetAttribute),
        F("cuMemcpy", 4000, d_cuMemcpy), FT("cuMemcpy", 7000, dp_cuMemcpy),
        F("cuMemcpyAsync", 4000, d_cuMemcpyAsync), FT("cuMemcpyAsync", 7000, dp_cuMemcpyAsync),
        F("cuMemcpy2D", 3020, d_cuMemcpy2D), FT("cuMemcpy2D", 7000, dp_cuMemcpy2D),
        F("cuMemcpy2DAsync", 3020, d_cuMemcpy2DAsync), FT("cuMemcpy2DAsync", 7000, dp_cuMemcpy2DAsync),
        F("cuMemsetD8", 3020, d_cuMemsetD8), FT("cuMemsetD8", 7000, dp_cuMemsetD8),
        F("cuMemsetD8Async", 3020, d_cuMemsetD8Async), FT("cuMemsetD8Async", 7000, dp_cuMemsetD8Async),
        F("cuMemPrefetchAsync", 12020, d_cuMemPrefetchAsync), FT("cuMemPrefetchAsync", 12020, dp_cuMemPrefetchAsync),
        F("cuMemPrefetchAsync", 8000, d_prefetch_legacy), FT("cuMemPrefetchAsync", 8000, dp_prefetch_legacy),
        F("cuStreamCreate", 2000, d_cuStreamCreate), F("cuStreamCreateWithPriority", 5050, d_cuStreamCreateWithPriority),
        F("cuStreamDestroy", 4000, d_cuStreamDestroy),
        F("cuStreamSynchronize", 2000, d_cuStreamSynchronize), FT("cuStreamSynchronize", 7000, dp_cuStreamSynchronize),
        F("cuStreamQuery", 2000, d_cuStreamQuery), FT("cuStreamQuery", 7000, dp_cuStreamQuery),
        F("cuStreamGetFlags", 5050, d_cuStreamGetFlags), FT("cuStreamGetFlags", 7000, dp_cuStreamGetFlags),
        F("cuStreamGetPriority", 5050, d_cuStreamGetPriority), FT("cuStreamGetPriority", 7000, dp_cuStreamGetPriority),
        F("cuStreamWaitEvent", 3020, d_cuStreamWaitEvent), FT("cuStreamWaitEvent", 7000, dp_cuStreamWaitEvent),
        F("cuLaunchHostFunc", 10000, d_cuLaunchHostFunc), FT("cuLaunchHostFunc", 10000, dp_cuLaunchHostFunc),
        F("cuEventCreate", 2000, d_cuEventCreate),
        F("cuEventRecord", 2000, d_cuEventRecord), FT("cuEventRecord", 7000, dp_cuEventRecord),
        F("cuEventRecordWithFlags", 11010, d_cuEventRecordWithFlags), FT("cuEventRecordWithFlags", 11010, dp_cuEventRecordWithFlags),
        F("cuEventQuery", 2000, d_cuEventQuery), F("cuEventSynchronize", 2000, d_cuEventSynchronize),
        F("cuEventDestroy", 4000, d_cuEventDestroy), F("cuEventElapsedTime", 12080, d_cuEventElapsedTime),
        F("cuStreamBeginCapture", 10010, d_cuStreamBeginCapture), FT("cuStreamBeginCapture", 10010, dp_cuStreamBeginCapture),
        F("cuStreamEndCapture", 10000, d_cuStreamEndCapture), FT("cuStreamEndCapture", 10000, dp_cuStreamEndCapture),
        F("cuStreamIsCapturing", 10000, d_cuStreamIsCapturing), FT("cuStreamIsCapturing", 10000, dp_cuStreamIsCapturing),
        F("cuStreamGetCaptureInfo", 12030, d_cuStreamGetCaptureInfo), FT("cuStreamGetCaptureInfo", 12030, dp_cuStreamGetCaptureInfo),
        F("cuThreadExchangeStreamCaptureMode", 10010, d_cuThreadExchangeStreamCaptureMode),
        F("cuGraphDestroy", 10000, d_cuGraphDestroy),
        F("cuGraphGetNodes", 10000, d_cuGraphGetNodes), F("cuGraphInstantiateWithFlags", 11040, d_cuGraphInstantiateWithFlags),
        F("cuGraphExecDestroy", 10000, d_cuGraphExecDestroy),
        F("cuGraphLaunch", 10000, d_cuGraphLaunch), FT("cuGraphLaunch", 10000, dp_cuGraphLaunch),
#undef F
#undef FT
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        CUdriverProcAddressQueryResult st;
        if (gpa(f[i].name, f[i].slot, f[i].ver, f[i].flags, &st) != CUDA_SUCCESS || !*f[i].slot) return;
    }
    if (d_cuInit(0) != CUDA_SUCCESS) return;
    g_ok = 1;
}

static cudaError_t rt_err(cudaError_t e) {
    if (e != cudaSuccess && e != cudaErrorNotReady) tl_last = e;
    return e;
}
static cudaError_t map(CUresult r) { return (cudaError_t)r; } /* the codes this simulator uses coincide */
#define RET(expr) return rt_err(map(expr))

/* Count, check an injected fault, make the primary context current (like the real runtime). */
static cudaError_t rt_begin(const char *name) {
    pthread_once(&g_once, rt_init);
    if (!g_ok) return cudaErrorInsufficientDriver;
    unsigned f = g_hook_enter(name);
    if (f) return (cudaError_t)f;
    CUcontext c = NULL;
    d_cuCtxGetCurrent(&c);
    if (!c) {
        if (d_cuDevicePrimaryCtxRetain(&c, 0) != CUDA_SUCCESS || d_cuCtxSetCurrent(c) != CUDA_SUCCESS)
            return cudaErrorInitializationError;
    }
    return cudaSuccess;
}
#define BEGIN(nm)                                                                                      \
    do {                                                                                               \
        cudaError_t b_ = rt_begin(nm);                                                                 \
        if (b_) return rt_err(b_);                                                                     \
    } while (0)

#define DP(x) ((CUdeviceptr)(uintptr_t)(x))
#define ST(s) ((CUstream)(s))

/* ------------------------------------------------------------------ errors and versions */

cudaError_t CUDARTAPI cudaGetLastError(void) {
    BEGIN("cudaGetLastError");
    cudaError_t e = tl_last;
    tl_last = cudaSuccess;
    return e;
}
cudaError_t CUDARTAPI cudaPeekAtLastError(void) { BEGIN("cudaPeekAtLastError"); return tl_last; }

static const struct { cudaError_t e; const char *name, *str; } g_rterrs[] = {
    { cudaSuccess, "cudaSuccess", "no error" },
    { cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument" },
    { cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory" },
    { cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error" },
    { cudaErrorInvalidPitchValue, "cudaErrorInvalidPitchValue", "invalid pitch argument" },
    { cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy" },
    { cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version" },
    { cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected" },
    { cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal" },
    { cudaErrorDeviceUninitialized, "cudaErrorDeviceUninitialized", "invalid device context" },
    { cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle" },
    { cudaErrorIllegalState, "cudaErrorIllegalState", "the operation cannot be performed in the present state" },
    { cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found" },
    { cudaErrorNotReady, "cudaErrorNotReady", "device not ready" },
    { cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered", "part or all of the requested memory range is already mapped" },
    { cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered", "pointer does not correspond to a registered memory region" },
    { cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported" },
    { cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported", "operation not permitted when stream is capturing" },
    { cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated", "operation failed due to a previous error during capture" },
    { cudaErrorStreamCaptureImplicit, "cudaErrorStreamCaptureImplicit", "operation would make the legacy stream depend on a capturing blocking stream" },
    { cudaErrorCapturedEvent, "cudaErrorCapturedEvent", "operation not permitted on an event last recorded in a capturing stream" },
    { cudaErrorStreamCaptureWrongThread, "cudaErrorStreamCaptureWrongThread", "attempt to terminate a thread-local capture sequence from another thread" },
    { cudaErrorUnknown, "cudaErrorUnknown", "unknown error" },
};
const char *CUDARTAPI cudaGetErrorString(cudaError_t e) {
    for (size_t i = 0; i < sizeof g_rterrs / sizeof g_rterrs[0]; i++)
        if (g_rterrs[i].e == e) return g_rterrs[i].str;
    return "unrecognized error code";
}
const char *CUDARTAPI cudaGetErrorName(cudaError_t e) {
    for (size_t i = 0; i < sizeof g_rterrs / sizeof g_rterrs[0]; i++)
        if (g_rterrs[i].e == e) return g_rterrs[i].name;
    return "cudaErrorUnknown";
}

cudaError_t CUDARTAPI cudaRuntimeGetVersion(int *v) {
    if (!v) return rt_err(cudaErrorInvalidValue);
    *v = RT_VERSION;
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaDriverGetVersion(int *v) {
    if (!v) return rt_err(cudaErrorInvalidValue);
    pthread_once(&g_once, rt_init);
    if (!g_ok) { *v = 0; return cudaSuccess; }
    RET(d_cuDriverGetVersion(v));
}

/* ------------------------------------------------------------------ device */

cudaError_t CUDARTAPI cudaGetDeviceCount(int *n) {
    BEGIN("cudaGetDeviceCount");
    if (!n) return rt_err(cudaErrorInvalidValue);
    RET(d_cuDeviceGetCount(n));
}
/* The calling thread's device: its current context's (device 0 until cudaSetDevice, as the runtime's
 * default; CUDA Runtime API, cudaSetDevice: per host thread). */
cudaError_t CUDARTAPI cudaGetDevice(int *d) {
    BEGIN("cudaGetDevice");
    if (!d) return rt_err(cudaErrorInvalidValue);
    CUdevice dev = 0;
    CUresult r = d_cuCtxGetDevice(&dev);
    if (!r) *d = dev;
    RET(r);
}
static int valid_device(int d) {
    int n = 0;
    return d >= 0 && d_cuDeviceGetCount(&n) == CUDA_SUCCESS && d < n;
}
/* Makes d's primary context current on this thread, initializing it (CUDA 12: cudaSetDevice
 * initializes the device's primary context at once). */
cudaError_t CUDARTAPI cudaSetDevice(int d) {
    BEGIN("cudaSetDevice");
    if (!valid_device(d)) return rt_err(cudaErrorInvalidDevice);
    CUcontext c = NULL, cur = NULL;
    d_cuCtxGetCurrent(&cur);
    CUdevice have = -1;
    if (cur && d_cuCtxGetDevice(&have) == CUDA_SUCCESS && have == d) return cudaSuccess;
    CUresult r = d_cuDevicePrimaryCtxRetain(&c, d);
    if (!r) r = d_cuCtxSetCurrent(c);
    RET(r);
}
/* The current device's primary context's reset (its memory released; see sim_memory_reset). */
cudaError_t CUDARTAPI cudaDeviceReset(void) {
    BEGIN("cudaDeviceReset");
    CUdevice d = 0;
    d_cuCtxGetDevice(&d);
    RET(d_cuDevicePrimaryCtxReset(d));
}
cudaError_t CUDARTAPI cudaDeviceSynchronize(void) { BEGIN("cudaDeviceSynchronize"); RET(d_cuCtxSynchronize()); }
cudaError_t CUDARTAPI cudaDeviceGetAttribute(int *v, enum cudaDeviceAttr a, int d) {
    BEGIN("cudaDeviceGetAttribute");
    if (!v) return rt_err(cudaErrorInvalidValue);
    RET(d_cuDeviceGetAttribute(v, (CUdevice_attribute)a, d));
}
static int dev_attr(CUdevice_attribute a, int d) {
    int v = 0;
    d_cuDeviceGetAttribute(&v, a, d);
    return v;
}
/* Filled from the driver's attributes, as the real runtime does, so both always agree (sim_device.c
 * holds the values); the CUDA 12 flavour fills the CUDA 12 layout (sim_cudart12.h). */
static cudaError_t get_props(rt_device_prop *p, int d) {
    if (!p) return rt_err(cudaErrorInvalidValue);
    if (!valid_device(d)) return rt_err(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    d_cuDeviceGetName(p->name, (int)sizeof p->name, d);
    /* device 0 "uvmchunk-sim-gpu", device d its last byte plus d: distinct, as sim_nvml.c says */
    char uuid[16];
    memcpy(uuid, "uvmchunk-sim-gpu", sizeof uuid);
    uuid[15] = (char)(uuid[15] + d);
    memcpy(p->uuid.bytes, uuid, sizeof uuid);
    size_t tot = 0;
    d_cuDeviceTotalMem(&tot, d);
    p->totalGlobalMem = tot;
#define A(f, a) p->f = dev_attr(CU_DEVICE_ATTRIBUTE_##a, d)
    A(sharedMemPerBlock, MAX_SHARED_MEMORY_PER_BLOCK); A(regsPerBlock, MAX_REGISTERS_PER_BLOCK); A(warpSize, WARP_SIZE);
    A(memPitch, MAX_PITCH); A(maxThreadsPerBlock, MAX_THREADS_PER_BLOCK);
    A(maxThreadsDim[0], MAX_BLOCK_DIM_X); A(maxThreadsDim[1], MAX_BLOCK_DIM_Y); A(maxThreadsDim[2], MAX_BLOCK_DIM_Z);
    A(maxGridSize[0], MAX_GRID_DIM_X); A(maxGridSize[1], MAX_GRID_DIM_Y); A(maxGridSize[2], MAX_GRID_DIM_Z);
    A(totalConstMem, TOTAL_CONSTANT_MEMORY); A(major, COMPUTE_CAPABILITY_MAJOR); A(minor, COMPUTE_CAPABILITY_MINOR);
    A(textureAlignment, TEXTURE_ALIGNMENT); A(texturePitchAlignment, TEXTURE_PITCH_ALIGNMENT);
    A(multiProcessorCount, MULTIPROCESSOR_COUNT); A(integrated, INTEGRATED); A(canMapHostMemory, CAN_MAP_HOST_MEMORY);
    A(maxTexture1D, MAXIMUM_TEXTURE1D_WIDTH); A(maxTexture1DMipmap, MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH);
    A(maxTexture2D[0], MAXIMUM_TEXTURE2D_WIDTH); A(maxTexture2D[1], MAXIMUM_TEXTURE2D_HEIGHT);
    A(maxTexture2DMipmap[0], MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH); A(maxTexture2DMipmap[1], MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT);
    A(maxTexture2DLinear[0], MAXIMUM_TEXTURE2D_LINEAR_WIDTH); A(maxTexture2DLinear[1], MAXIMUM_TEXTURE2D_LINEAR_HEIGHT);
    A(maxTexture2DLinear[2], MAXIMUM_TEXTURE2D_LINEAR_PITCH);
    A(maxTexture2DGather[0], MAXIMUM_TEXTURE2D_GATHER_WIDTH); A(maxTexture2DGather[1], MAXIMUM_TEXTURE2D_GATHER_HEIGHT);
    A(maxTexture3D[0], MAXIMUM_TEXTURE3D_WIDTH); A(maxTexture3D[1], MAXIMUM_TEXTURE3D_HEIGHT); A(maxTexture3D[2], MAXIMUM_TEXTURE3D_DEPTH);
    A(maxTexture3DAlt[0], MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE); A(maxTexture3DAlt[1], MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE);
    A(maxTexture3DAlt[2], MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE);
    A(maxTextureCubemap, MAXIMUM_TEXTURECUBEMAP_WIDTH);
    A(maxTexture1DLayered[0], MAXIMUM_TEXTURE1D_LAYERED_WIDTH); A(maxTexture1DLayered[1], MAXIMUM_TEXTURE1D_LAYERED_LAYERS);
    A(maxTexture2DLayered[0], MAXIMUM_TEXTURE2D_LAYERED_WIDTH); A(maxTexture2DLayered[1], MAXIMUM_TEXTURE2D_LAYERED_HEIGHT);
    A(maxTexture2DLayered[2], MAXIMUM_TEXTURE2D_LAYERED_LAYERS);
    A(maxTextureCubemapLayered[0], MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH);
    A(maxTextureCubemapLayered[1], MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS);
    A(maxSurface1D, MAXIMUM_SURFACE1D_WIDTH);
    A(maxSurface2D[0], MAXIMUM_SURFACE2D_WIDTH); A(maxSurface2D[1], MAXIMUM_SURFACE2D_HEIGHT);
    A(maxSurface3D[0], MAXIMUM_SURFACE3D_WIDTH); A(maxSurface3D[1], MAXIMUM_SURFACE3D_HEIGHT); A(maxSurface3D[2], MAXIMUM_SURFACE3D_DEPTH);
    A(maxSurface1DLayered[0], MAXIMUM_SURFACE1D_LAYERED_WIDTH); A(maxSurface1DLayered[1], MAXIMUM_SURFACE1D_LAYERED_LAYERS);
    A(maxSurface2DLayered[0], MAXIMUM_SURFACE2D_LAYERED_WIDTH); A(maxSurface2DLayered[1], MAXIMUM_SURFACE2D_LAYERED_HEIGHT);
    A(maxSurface2DLayered[2], MAXIMUM_SURFACE2D_LAYERED_LAYERS);
    A(maxSurfaceCubemap, MAXIMUM_SURFACECUBEMAP_WIDTH);
    A(maxSurfaceCubemapLayered[0], MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH);
    A(maxSurfaceCubemapLayered[1], MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS);
    A(surfaceAlignment, SURFACE_ALIGNMENT); A(concurrentKernels, CONCURRENT_KERNELS); A(ECCEnabled, ECC_ENABLED);
    A(pciBusID, PCI_BUS_ID); A(pciDeviceID, PCI_DEVICE_ID); A(pciDomainID, PCI_DOMAIN_ID); A(tccDriver, TCC_DRIVER);
    A(asyncEngineCount, ASYNC_ENGINE_COUNT); A(unifiedAddressing, UNIFIED_ADDRESSING);
    A(memoryBusWidth, GLOBAL_MEMORY_BUS_WIDTH); A(l2CacheSize, L2_CACHE_SIZE);
    A(persistingL2CacheMaxSize, MAX_PERSISTING_L2_CACHE_SIZE);
    A(maxThreadsPerMultiProcessor, MAX_THREADS_PER_MULTIPROCESSOR);
    A(streamPrioritiesSupported, STREAM_PRIORITIES_SUPPORTED);
    A(globalL1CacheSupported, GLOBAL_L1_CACHE_SUPPORTED); A(localL1CacheSupported, LOCAL_L1_CACHE_SUPPORTED);
    A(sharedMemPerMultiprocessor, MAX_SHARED_MEMORY_PER_MULTIPROCESSOR);
    A(regsPerMultiprocessor, MAX_REGISTERS_PER_MULTIPROCESSOR); A(managedMemory, MANAGED_MEMORY);
    A(isMultiGpuBoard, MULTI_GPU_BOARD); A(multiGpuBoardGroupID, MULTI_GPU_BOARD_GROUP_ID);
    A(hostNativeAtomicSupported, HOST_NATIVE_ATOMIC_SUPPORTED); A(pageableMemoryAccess, PAGEABLE_MEMORY_ACCESS);
    A(concurrentManagedAccess, CONCURRENT_MANAGED_ACCESS); A(computePreemptionSupported, COMPUTE_PREEMPTION_SUPPORTED);
    A(canUseHostPointerForRegisteredMem, CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM);
    A(cooperativeLaunch, COOPERATIVE_LAUNCH); A(sharedMemPerBlockOptin, MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    A(pageableMemoryAccessUsesHostPageTables, PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES);
    A(directManagedMemAccessFromHost, DIRECT_MANAGED_MEM_ACCESS_FROM_HOST);
    A(maxBlocksPerMultiProcessor, MAX_BLOCKS_PER_MULTIPROCESSOR);
    A(accessPolicyMaxWindowSize, MAX_ACCESS_POLICY_WINDOW_SIZE);
    A(reservedSharedMemPerBlock, RESERVED_SHARED_MEMORY_PER_BLOCK); A(hostRegisterSupported, HOST_REGISTER_SUPPORTED);
    A(sparseCudaArraySupported, SPARSE_CUDA_ARRAY_SUPPORTED);
    A(hostRegisterReadOnlySupported, READ_ONLY_HOST_REGISTER_SUPPORTED);
    A(timelineSemaphoreInteropSupported, TIMELINE_SEMAPHORE_INTEROP_SUPPORTED);
    A(memoryPoolsSupported, MEMORY_POOLS_SUPPORTED); A(gpuDirectRDMASupported, GPU_DIRECT_RDMA_SUPPORTED);
    A(gpuDirectRDMAFlushWritesOptions, GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS);
    A(gpuDirectRDMAWritesOrdering, GPU_DIRECT_RDMA_WRITES_ORDERING);
    A(memoryPoolSupportedHandleTypes, MEMPOOL_SUPPORTED_HANDLE_TYPES);
    A(deferredMappingCudaArraySupported, DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED);
    A(ipcEventSupported, IPC_EVENT_SUPPORTED); A(clusterLaunch, CLUSTER_LAUNCH);
    A(unifiedFunctionPointers, UNIFIED_FUNCTION_POINTERS);
#if UVMSIM_CUDART_MAJOR == 12 /* fields CUDA 13 dropped */
    A(clockRate, CLOCK_RATE); A(deviceOverlap, GPU_OVERLAP); A(kernelExecTimeoutEnabled, KERNEL_EXEC_TIMEOUT);
    A(computeMode, COMPUTE_MODE); A(maxTexture1DLinear, MAXIMUM_TEXTURE1D_LINEAR_WIDTH);
    A(memoryClockRate, MEMORY_CLOCK_RATE); A(singleToDoublePrecisionPerfRatio, SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO);
    A(cooperativeMultiDeviceLaunch, COOPERATIVE_MULTI_DEVICE_LAUNCH);
#else /* fields CUDA 13 added */
    A(deviceNumaConfig, NUMA_CONFIG); A(deviceNumaId, NUMA_ID); A(mpsEnabled, MPS_ENABLED); A(hostNumaId, HOST_NUMA_ID);
    A(gpuPciDeviceID, GPU_PCI_DEVICE_ID); A(gpuPciSubsystemID, GPU_PCI_SUBSYSTEM_ID);
    A(hostNumaMultinodeIpcSupported, HOST_NUMA_MULTINODE_IPC_SUPPORTED);
#endif
#undef A
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaGetDeviceProperties(rt_device_prop *p, int d) { BEGIN("cudaGetDeviceProperties"); return get_props(p, d); }
cudaError_t CUDARTAPI cudaGetDeviceProperties_v2(rt_device_prop *p, int d) { BEGIN("cudaGetDeviceProperties_v2"); return get_props(p, d); }
cudaError_t CUDARTAPI cudaMemGetInfo(size_t *f, size_t *t) { BEGIN("cudaMemGetInfo"); RET(d_cuMemGetInfo(f, t)); }

/* ------------------------------------------------------------------ memory */

cudaError_t CUDARTAPI cudaMalloc(void **p, size_t n) {
    BEGIN("cudaMalloc");
    if (!p) return rt_err(cudaErrorInvalidValue);
    if (n == 0) { *p = NULL; return cudaSuccess; }
    CUresult r = d_cuMemAlloc((CUdeviceptr *)p, n);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return rt_err(cudaErrorMemoryAllocation);
    RET(r);
}
cudaError_t CUDARTAPI cudaMallocManaged(void **p, size_t n, unsigned int flags) {
    BEGIN("cudaMallocManaged");
    if (!p || n == 0) return rt_err(cudaErrorInvalidValue);
    CUresult r = d_cuMemAllocManaged((CUdeviceptr *)p, n, flags);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return rt_err(cudaErrorMemoryAllocation);
    RET(r);
}
cudaError_t CUDARTAPI cudaFree(void *p) {
    BEGIN("cudaFree");
    if (!p) return cudaSuccess;
    RET(d_cuMemFree(DP(p)));
}
cudaError_t CUDARTAPI cudaHostAlloc(void **p, size_t n, unsigned int flags) {
    BEGIN("cudaHostAlloc");
    if (!p) return rt_err(cudaErrorInvalidValue);
    CUresult r = d_cuMemHostAlloc(p, n, flags);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return rt_err(cudaErrorMemoryAllocation);
    RET(r);
}
cudaError_t CUDARTAPI cudaMallocHost(void **p, size_t n) {
    BEGIN("cudaMallocHost");
    if (!p) return rt_err(cudaErrorInvalidValue);
    CUresult r = d_cuMemHostAlloc(p, n, 0);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return rt_err(cudaErrorMemoryAllocation);
    RET(r);
}
cudaError_t CUDARTAPI cudaFreeHost(void *p) {
    BEGIN("cudaFreeHost");
    if (!p) return cudaSuccess;
    RET(d_cuMemFreeHost(p));
}
cudaError_t CUDARTAPI cudaHostRegister(void *p, size_t n, unsigned int flags) { BEGIN("cudaHostRegister"); RET(d_cuMemHostRegister(p, n, flags)); }
cudaError_t CUDARTAPI cudaHostUnregister(void *p) { BEGIN("cudaHostUnregister"); RET(d_cuMemHostUnregister(p)); }

/* 0 unregistered, 1 host (page-locked), 2 device, 3 managed */
static int classify(const void *p) {
    unsigned int mt = 0, managed = 0;
    CUpointer_attribute at[2] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED };
    void *data[2] = { &mt, &managed };
    if (d_cuPointerGetAttributes(2, at, data, DP(p)) != CUDA_SUCCESS) return 0;
    if (managed) return 3;
    return mt == CU_MEMORYTYPE_DEVICE ? 2 : mt == CU_MEMORYTYPE_HOST ? 1 : 0;
}

cudaError_t CUDARTAPI cudaPointerGetAttributes(struct cudaPointerAttributes *a, const void *p) {
    BEGIN("cudaPointerGetAttributes");
    if (!a) return rt_err(cudaErrorInvalidValue);
    unsigned int mt = 0, managed = 0;
    int ord = -2;
    CUdeviceptr dp = 0;
    void *hp = NULL;
    CUpointer_attribute at[5] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                  CU_POINTER_ATTRIBUTE_HOST_POINTER };
    void *data[5] = { &mt, &managed, &ord, &dp, &hp };
    CUresult r = d_cuPointerGetAttributes(5, at, data, DP(p));
    if (r) RET(r);
    memset(a, 0, RT_POINTER_ATTRIBUTES_SIZE); /* the caller's struct: 24 bytes in CUDA 12, 88 in 13 */
    a->type = managed ? cudaMemoryTypeManaged : mt == CU_MEMORYTYPE_DEVICE ? cudaMemoryTypeDevice
              : mt == CU_MEMORYTYPE_HOST ? cudaMemoryTypeHost : cudaMemoryTypeUnregistered;
    a->device = ord;
    a->devicePointer = (void *)(uintptr_t)dp;
    a->hostPointer = hp;
    return cudaSuccess;
}

/* Validate a copy kind like the real runtime. */
static cudaError_t check_kind(const void *dst, const void *src, enum cudaMemcpyKind kind) {
    if ((unsigned)kind > cudaMemcpyDefault) return cudaErrorInvalidMemcpyDirection;
    if (kind == cudaMemcpyDefault) return cudaSuccess;
    int cs = classify(src), cd = classify(dst);
    int src_dev = cs != 0, dst_dev = cd != 0, src_host = cs != 2, dst_host = cd != 2;
    int ok = kind == cudaMemcpyHostToHost ? (src_host && dst_host)
             : kind == cudaMemcpyHostToDevice ? (src_host && dst_dev)
             : kind == cudaMemcpyDeviceToHost ? (src_dev && dst_host)
             : (src_dev && dst_dev);
    return ok ? cudaSuccess : cudaErrorInvalidValue;
}

static cudaError_t memcpy_common(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s, int pt, int async) {
    if (n && (!dst || !src)) return rt_err(cudaErrorInvalidValue);
    cudaError_t e = check_kind(dst, src, kind);
    if (e) return rt_err(e);
    if (n == 0) return cudaSuccess;
    if (async) RET((pt ? dp_cuMemcpyAsync : d_cuMemcpyAsync)(DP(dst), DP(src), n, ST(s)));
    RET((pt ? dp_cuMemcpy : d_cuMemcpy)(DP(dst), DP(src), n));
}
cudaError_t CUDARTAPI cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind k) { BEGIN("cudaMemcpy"); return memcpy_common(dst, src, n, k, 0, 0, 0); }
cudaError_t CUDARTAPI cudaMemcpy_ptds(void *dst, const void *src, size_t n, enum cudaMemcpyKind k) { BEGIN("cudaMemcpy_ptds"); return memcpy_common(dst, src, n, k, 0, 1, 0); }
cudaError_t CUDARTAPI cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k, cudaStream_t s) { BEGIN("cudaMemcpyAsync"); return memcpy_common(dst, src, n, k, s, 0, 1); }
cudaError_t CUDARTAPI cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t n, enum cudaMemcpyKind k, cudaStream_t s) { BEGIN("cudaMemcpyAsync_ptsz"); return memcpy_common(dst, src, n, k, s, 1, 1); }

static cudaError_t memcpy2d_common(void *dst, size_t dpitch, const void *src, size_t spitch, size_t w, size_t h,
                                   enum cudaMemcpyKind kind, cudaStream_t s, int pt, int async) {
    if (w && h && (!dst || !src)) return rt_err(cudaErrorInvalidValue);
    if (h > 1 && (w > dpitch || w > spitch)) return rt_err(cudaErrorInvalidPitchValue);
    cudaError_t e = check_kind(dst, src, kind);
    if (e) return rt_err(e);
    if (!w || !h) return cudaSuccess;
    CUDA_MEMCPY2D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.srcDevice = DP(src);
    c.srcPitch = spitch;
    c.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
    c.dstDevice = DP(dst);
    c.dstPitch = dpitch;
    c.WidthInBytes = w;
    c.Height = h;
    if (async) RET((pt ? dp_cuMemcpy2DAsync : d_cuMemcpy2DAsync)(&c, ST(s)));
    RET((pt ? dp_cuMemcpy2D : d_cuMemcpy2D)(&c));
}
cudaError_t CUDARTAPI cudaMemcpy2D(void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k) { BEGIN("cudaMemcpy2D"); return memcpy2d_common(dst, dp, src, sp, w, h, k, 0, 0, 0); }
cudaError_t CUDARTAPI cudaMemcpy2D_ptds(void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k) { BEGIN("cudaMemcpy2D_ptds"); return memcpy2d_common(dst, dp, src, sp, w, h, k, 0, 1, 0); }
cudaError_t CUDARTAPI cudaMemcpy2DAsync(void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k, cudaStream_t s) { BEGIN("cudaMemcpy2DAsync"); return memcpy2d_common(dst, dp, src, sp, w, h, k, s, 0, 1); }
cudaError_t CUDARTAPI cudaMemcpy2DAsync_ptsz(void *dst, size_t dp, const void *src, size_t sp, size_t w, size_t h, enum cudaMemcpyKind k, cudaStream_t s) { BEGIN("cudaMemcpy2DAsync_ptsz"); return memcpy2d_common(dst, dp, src, sp, w, h, k, s, 1, 1); }

cudaError_t CUDARTAPI cudaMemset(void *p, int v, size_t n) { BEGIN("cudaMemset"); if (!n) return cudaSuccess; RET(d_cuMemsetD8(DP(p), (unsigned char)v, n)); }
cudaError_t CUDARTAPI cudaMemset_ptds(void *p, int v, size_t n) { BEGIN("cudaMemset_ptds"); if (!n) return cudaSuccess; RET(dp_cuMemsetD8(DP(p), (unsigned char)v, n)); }
cudaError_t CUDARTAPI cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s) { BEGIN("cudaMemsetAsync"); if (!n) return cudaSuccess; RET(d_cuMemsetD8Async(DP(p), (unsigned char)v, n, ST(s))); }
cudaError_t CUDARTAPI cudaMemsetAsync_ptsz(void *p, int v, size_t n, cudaStream_t s) { BEGIN("cudaMemsetAsync_ptsz"); if (!n) return cudaSuccess; RET(dp_cuMemsetD8Async(DP(p), (unsigned char)v, n, ST(s))); }

/* ------------------------------------------------------------------ hints */

static CUmemLocation to_loc(struct cudaMemLocation l) {
    CUmemLocation c;
    memset(&c, 0, sizeof c);
    c.type = (CUmemLocationType)l.type;
    c.id = l.id;
    return c;
}
#if UVMSIM_CUDART_MAJOR == 12
cudaError_t CUDARTAPI cudaMemPrefetchAsync(const void *p, size_t n, int dev, cudaStream_t s) { BEGIN("cudaMemPrefetchAsync"); RET(d_prefetch_legacy(DP(p), n, dev, ST(s))); }
cudaError_t CUDARTAPI cudaMemPrefetchAsync_ptsz(const void *p, size_t n, int dev, cudaStream_t s) { BEGIN("cudaMemPrefetchAsync_ptsz"); RET(dp_prefetch_legacy(DP(p), n, dev, ST(s))); }
cudaError_t CUDARTAPI cudaMemPrefetchAsync_v2(const void *p, size_t n, struct cudaMemLocation l, unsigned int f, cudaStream_t s) { BEGIN("cudaMemPrefetchAsync_v2"); RET(d_cuMemPrefetchAsync(DP(p), n, to_loc(l), f, ST(s))); }
cudaError_t CUDARTAPI cudaMemPrefetchAsync_v2_ptsz(const void *p, size_t n, struct cudaMemLocation l, unsigned int f, cudaStream_t s) { BEGIN("cudaMemPrefetchAsync_v2_ptsz"); RET(dp_cuMemPrefetchAsync(DP(p), n, to_loc(l), f, ST(s))); }
cudaError_t CUDARTAPI cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise a, int dev) { BEGIN("cudaMemAdvise"); RET(d_advise_legacy(DP(p), n, (CUmem_advise)a, dev)); }
cudaError_t CUDARTAPI cudaMemAdvise_v2(const void *p, size_t n, enum cudaMemoryAdvise a, struct cudaMemLocation l) { BEGIN("cudaMemAdvise_v2"); RET(d_cuMemAdvise(DP(p), n, (CUmem_advise)a, to_loc(l))); }
#else
cudaError_t CUDARTAPI cudaMemPrefetchAsync(const void *p, size_t n, struct cudaMemLocation l, unsigned int f, cudaStream_t s) { BEGIN("cudaMemPrefetchAsync"); RET(d_cuMemPrefetchAsync(DP(p), n, to_loc(l), f, ST(s))); }
cudaError_t CUDARTAPI cudaMemPrefetchAsync_ptsz(const void *p, size_t n, struct cudaMemLocation l, unsigned int f, cudaStream_t s) { BEGIN("cudaMemPrefetchAsync_ptsz"); RET(dp_cuMemPrefetchAsync(DP(p), n, to_loc(l), f, ST(s))); }
cudaError_t CUDARTAPI cudaMemAdvise(const void *p, size_t n, enum cudaMemoryAdvise a, struct cudaMemLocation l) { BEGIN("cudaMemAdvise"); RET(d_cuMemAdvise(DP(p), n, (CUmem_advise)a, to_loc(l))); }
#endif
cudaError_t CUDARTAPI cudaMemRangeGetAttribute(void *data, size_t sz, enum cudaMemRangeAttribute a, const void *p, size_t n) {
    BEGIN("cudaMemRangeGetAttribute");
    RET(d_cuMemRangeGetAttribute(data, sz, (CUmem_range_attribute)a, DP(p), n));
}

/* ------------------------------------------------------------------ streams */

cudaError_t CUDARTAPI cudaStreamCreate(cudaStream_t *s) { BEGIN("cudaStreamCreate"); if (!s) return rt_err(cudaErrorInvalidValue); RET(d_cuStreamCreate((CUstream *)s, 0)); }
cudaError_t CUDARTAPI cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int f) { BEGIN("cudaStreamCreateWithFlags"); if (!s) return rt_err(cudaErrorInvalidValue); RET(d_cuStreamCreate((CUstream *)s, f)); }
cudaError_t CUDARTAPI cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int f, int p) { BEGIN("cudaStreamCreateWithPriority"); if (!s) return rt_err(cudaErrorInvalidValue); RET(d_cuStreamCreateWithPriority((CUstream *)s, f, p)); }
cudaError_t CUDARTAPI cudaStreamDestroy(cudaStream_t s) { BEGIN("cudaStreamDestroy"); RET(d_cuStreamDestroy(ST(s))); }
cudaError_t CUDARTAPI cudaStreamSynchronize(cudaStream_t s) { BEGIN("cudaStreamSynchronize"); RET(d_cuStreamSynchronize(ST(s))); }
cudaError_t CUDARTAPI cudaStreamSynchronize_ptsz(cudaStream_t s) { BEGIN("cudaStreamSynchronize_ptsz"); RET(dp_cuStreamSynchronize(ST(s))); }
cudaError_t CUDARTAPI cudaStreamQuery(cudaStream_t s) { BEGIN("cudaStreamQuery"); RET(d_cuStreamQuery(ST(s))); }
cudaError_t CUDARTAPI cudaStreamQuery_ptsz(cudaStream_t s) { BEGIN("cudaStreamQuery_ptsz"); RET(dp_cuStreamQuery(ST(s))); }
cudaError_t CUDARTAPI cudaStreamGetFlags(cudaStream_t s, unsigned int *f) { BEGIN("cudaStreamGetFlags"); RET(d_cuStreamGetFlags(ST(s), f)); }
cudaError_t CUDARTAPI cudaStreamGetFlags_ptsz(cudaStream_t s, unsigned int *f) { BEGIN("cudaStreamGetFlags_ptsz"); RET(dp_cuStreamGetFlags(ST(s), f)); }
cudaError_t CUDARTAPI cudaStreamGetPriority(cudaStream_t s, int *p) { BEGIN("cudaStreamGetPriority"); RET(d_cuStreamGetPriority(ST(s), p)); }
cudaError_t CUDARTAPI cudaStreamGetPriority_ptsz(cudaStream_t s, int *p) { BEGIN("cudaStreamGetPriority_ptsz"); RET(dp_cuStreamGetPriority(ST(s), p)); }
cudaError_t CUDARTAPI cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int f) { BEGIN("cudaStreamWaitEvent"); RET(d_cuStreamWaitEvent(ST(s), (CUevent)e, f)); }
cudaError_t CUDARTAPI cudaStreamWaitEvent_ptsz(cudaStream_t s, cudaEvent_t e, unsigned int f) { BEGIN("cudaStreamWaitEvent_ptsz"); RET(dp_cuStreamWaitEvent(ST(s), (CUevent)e, f)); }
cudaError_t CUDARTAPI cudaLaunchHostFunc(cudaStream_t s, cudaHostFn_t fn, void *ud) { BEGIN("cudaLaunchHostFunc"); RET(d_cuLaunchHostFunc(ST(s), fn, ud)); }
cudaError_t CUDARTAPI cudaLaunchHostFunc_ptsz(cudaStream_t s, cudaHostFn_t fn, void *ud) { BEGIN("cudaLaunchHostFunc_ptsz"); RET(dp_cuLaunchHostFunc(ST(s), fn, ud)); }

/* ------------------------------------------------------------------ events */

cudaError_t CUDARTAPI cudaEventCreate(cudaEvent_t *e) { BEGIN("cudaEventCreate"); if (!e) return rt_err(cudaErrorInvalidValue); RET(d_cuEventCreate((CUevent *)e, 0)); }
cudaError_t CUDARTAPI cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int f) { BEGIN("cudaEventCreateWithFlags"); if (!e) return rt_err(cudaErrorInvalidValue); RET(d_cuEventCreate((CUevent *)e, f)); }
cudaError_t CUDARTAPI cudaEventRecord(cudaEvent_t e, cudaStream_t s) { BEGIN("cudaEventRecord"); RET(d_cuEventRecord((CUevent)e, ST(s))); }
cudaError_t CUDARTAPI cudaEventRecord_ptsz(cudaEvent_t e, cudaStream_t s) { BEGIN("cudaEventRecord_ptsz"); RET(dp_cuEventRecord((CUevent)e, ST(s))); }
cudaError_t CUDARTAPI cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int f) { BEGIN("cudaEventRecordWithFlags"); RET(d_cuEventRecordWithFlags((CUevent)e, ST(s), f)); }
cudaError_t CUDARTAPI cudaEventRecordWithFlags_ptsz(cudaEvent_t e, cudaStream_t s, unsigned int f) { BEGIN("cudaEventRecordWithFlags_ptsz"); RET(dp_cuEventRecordWithFlags((CUevent)e, ST(s), f)); }
cudaError_t CUDARTAPI cudaEventQuery(cudaEvent_t e) { BEGIN("cudaEventQuery"); RET(d_cuEventQuery((CUevent)e)); }
cudaError_t CUDARTAPI cudaEventSynchronize(cudaEvent_t e) { BEGIN("cudaEventSynchronize"); RET(d_cuEventSynchronize((CUevent)e)); }
cudaError_t CUDARTAPI cudaEventDestroy(cudaEvent_t e) { BEGIN("cudaEventDestroy"); RET(d_cuEventDestroy((CUevent)e)); }
cudaError_t CUDARTAPI cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) { BEGIN("cudaEventElapsedTime"); RET(d_cuEventElapsedTime(ms, (CUevent)a, (CUevent)b)); }

/* ------------------------------------------------------------------ capture */

cudaError_t CUDARTAPI cudaStreamBeginCapture(cudaStream_t s, enum cudaStreamCaptureMode m) { BEGIN("cudaStreamBeginCapture"); RET(d_cuStreamBeginCapture(ST(s), (CUstreamCaptureMode)m)); }
cudaError_t CUDARTAPI cudaStreamBeginCapture_ptsz(cudaStream_t s, enum cudaStreamCaptureMode m) { BEGIN("cudaStreamBeginCapture_ptsz"); RET(dp_cuStreamBeginCapture(ST(s), (CUstreamCaptureMode)m)); }
cudaError_t CUDARTAPI cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g) { BEGIN("cudaStreamEndCapture"); RET(d_cuStreamEndCapture(ST(s), (CUgraph *)g)); }
cudaError_t CUDARTAPI cudaStreamEndCapture_ptsz(cudaStream_t s, cudaGraph_t *g) { BEGIN("cudaStreamEndCapture_ptsz"); RET(dp_cuStreamEndCapture(ST(s), (CUgraph *)g)); }
cudaError_t CUDARTAPI cudaStreamIsCapturing(cudaStream_t s, enum cudaStreamCaptureStatus *st) { BEGIN("cudaStreamIsCapturing"); if (!st) return rt_err(cudaErrorInvalidValue); RET(d_cuStreamIsCapturing(ST(s), (CUstreamCaptureStatus *)st)); }
cudaError_t CUDARTAPI cudaStreamIsCapturing_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st) { BEGIN("cudaStreamIsCapturing_ptsz"); if (!st) return rt_err(cudaErrorInvalidValue); RET(dp_cuStreamIsCapturing(ST(s), (CUstreamCaptureStatus *)st)); }

static cudaError_t capinfo(int pt, cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id, cudaGraph_t *g,
                           const cudaGraphNode_t **d, const cudaGraphEdgeData **e, size_t *n) {
    if (!st) return rt_err(cudaErrorInvalidValue);
    RET((pt ? dp_cuStreamGetCaptureInfo : d_cuStreamGetCaptureInfo)(ST(s), (CUstreamCaptureStatus *)st, (cuuint64_t *)id,
                                                                  (CUgraph *)g, (const CUgraphNode **)d,
                                                                  (const CUgraphEdgeData **)e, n));
}
#if UVMSIM_CUDART_MAJOR == 12
/* CUDA 12's cudaStreamGetCaptureInfo took (stream, status, id): touch only those three */
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id, cudaGraph_t *g, const cudaGraphNode_t **d, const cudaGraphEdgeData **e, size_t *n) {
    BEGIN("cudaStreamGetCaptureInfo"); (void)g; (void)d; (void)e; (void)n; return capinfo(0, s, st, id, NULL, NULL, NULL, NULL);
}
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id, cudaGraph_t *g, const cudaGraphNode_t **d, const cudaGraphEdgeData **e, size_t *n) {
    BEGIN("cudaStreamGetCaptureInfo_ptsz"); (void)g; (void)d; (void)e; (void)n; return capinfo(1, s, st, id, NULL, NULL, NULL, NULL);
}
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_v2(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id, cudaGraph_t *g, const cudaGraphNode_t **d, size_t *n) { BEGIN("cudaStreamGetCaptureInfo_v2"); return capinfo(0, s, st, id, g, d, NULL, n); }
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_v2_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id, cudaGraph_t *g, const cudaGraphNode_t **d, size_t *n) { BEGIN("cudaStreamGetCaptureInfo_v2_ptsz"); return capinfo(1, s, st, id, g, d, NULL, n); }
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_v3(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id, cudaGraph_t *g, const cudaGraphNode_t **d, const cudaGraphEdgeData **e, size_t *n) { BEGIN("cudaStreamGetCaptureInfo_v3"); return capinfo(0, s, st, id, g, d, e, n); }
#else
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id, cudaGraph_t *g, const cudaGraphNode_t **d, const cudaGraphEdgeData **e, size_t *n) { BEGIN("cudaStreamGetCaptureInfo"); return capinfo(0, s, st, id, g, d, e, n); }
cudaError_t CUDARTAPI cudaStreamGetCaptureInfo_ptsz(cudaStream_t s, enum cudaStreamCaptureStatus *st, unsigned long long *id, cudaGraph_t *g, const cudaGraphNode_t **d, const cudaGraphEdgeData **e, size_t *n) { BEGIN("cudaStreamGetCaptureInfo_ptsz"); return capinfo(1, s, st, id, g, d, e, n); }
#endif
cudaError_t CUDARTAPI cudaThreadExchangeStreamCaptureMode(enum cudaStreamCaptureMode *m) {
    BEGIN("cudaThreadExchangeStreamCaptureMode");
    RET(d_cuThreadExchangeStreamCaptureMode((CUstreamCaptureMode *)m));
}
cudaError_t CUDARTAPI cudaGraphDestroy(cudaGraph_t g) { BEGIN("cudaGraphDestroy"); RET(d_cuGraphDestroy((CUgraph)g)); }

/* ------------------------------------------------------------------ driver entry points */

static cudaError_t entry_point(const char *sym, void **fp, unsigned ver, unsigned long long flags, enum cudaDriverEntryPointQueryResult *st) {
    if (!sym || !fp) return rt_err(cudaErrorInvalidValue);
    CUdriverProcAddressQueryResult r = CU_GET_PROC_ADDRESS_SUCCESS;
    CUresult c = d_cuGetProcAddress(sym, fp, (int)ver, (cuuint64_t)flags, &r);
    if (st) *st = (enum cudaDriverEntryPointQueryResult)r;
    if (c == CUDA_ERROR_NOT_FOUND) return cudaSuccess; /* reported through driverStatus */
    RET(c);
}
cudaError_t CUDARTAPI cudaGetDriverEntryPoint(const char *sym, void **fp, unsigned long long flags, enum cudaDriverEntryPointQueryResult *st) { BEGIN("cudaGetDriverEntryPoint"); return entry_point(sym, fp, RT_VERSION, flags, st); }
cudaError_t CUDARTAPI cudaGetDriverEntryPoint_ptsz(const char *sym, void **fp, unsigned long long flags, enum cudaDriverEntryPointQueryResult *st) { BEGIN("cudaGetDriverEntryPoint_ptsz"); return entry_point(sym, fp, RT_VERSION, flags ? flags : cudaEnablePerThreadDefaultStream, st); }
cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion(const char *sym, void **fp, unsigned int v, unsigned long long flags, enum cudaDriverEntryPointQueryResult *st) { BEGIN("cudaGetDriverEntryPointByVersion"); return entry_point(sym, fp, v, flags, st); }
cudaError_t CUDARTAPI cudaGetDriverEntryPointByVersion_ptsz(const char *sym, void **fp, unsigned int v, unsigned long long flags, enum cudaDriverEntryPointQueryResult *st) { BEGIN("cudaGetDriverEntryPointByVersion_ptsz"); return entry_point(sym, fp, v, flags ? flags : cudaEnablePerThreadDefaultStream, st); }

/* ------------------------------------------------------------------ hosting an unmodified CUDA program
 * (PyTorch's wheel): fat-binary registration is a no-op, kernel launches fail with a clear error,
 * and every other export of the real libcudart.so.13 exists (cudart13_exports.txt; the names not
 * defined here become generated weak stubs that return cudaErrorNotSupported). */

#include <stdatomic.h>

static void say_once(atomic_int *once, const char *what) {
    if (!atomic_exchange(once, 1)) fprintf(stderr, "uvmsim: %s is not simulated\n", what);
}

/* Called by every generated stub (hidden: only this library calls it). */
__attribute__((visibility("hidden"))) int uvmsim_rt_not_simulated(const char *name, atomic_int *once) {
    say_once(once, name);
    pthread_once(&g_once, rt_init);
    if (g_ok) {
        unsigned f = g_hook_enter(name);
        if (f) return rt_err((cudaError_t)f);
    }
    return rt_err(cudaErrorNotSupported);
}

#pragma GCC visibility push(default)
void **CUDARTAPI __cudaRegisterFatBinary(void *fatCubin);
void CUDARTAPI __cudaRegisterFatBinaryEnd(void **h);
void CUDARTAPI __cudaUnregisterFatBinary(void **h);
void CUDARTAPI __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName, int tl,
                                      uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
void CUDARTAPI __cudaRegisterVar(void **h, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                                 size_t size, int constant, int global);
void CUDARTAPI __cudaRegisterManagedVar(void **h, void **hostVarPtrAddress, char *deviceAddress, const char *deviceName,
                                        int ext, size_t size, int constant, int global);
void CUDARTAPI __cudaRegisterHostVar(void **h, const char *deviceName, void *hostVar, size_t size);
void CUDARTAPI __cudaRegisterUnifiedTable(void *table);
char CUDARTAPI __cudaInitModule(void **h);
unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, void *stream);
cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream);
cudaError_t CUDARTAPI __cudaLaunchKernel(const void *func, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s);
cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(const void *func, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s);
cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t *k, const void *entryFuncAddr);
cudaError_t CUDARTAPI cudaLaunchKernel_ptsz(const void *func, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s);
cudaError_t CUDARTAPI cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *config, const void *func, void **args);
cudaError_t CUDARTAPI cudaLaunchCooperativeKernel_ptsz(const void *func, dim3 g, dim3 b, void **args, size_t shm, cudaStream_t s);
#pragma GCC visibility pop

/* Fat binaries: registration always "succeeds"; no device code is kept (none can run), only each
 * kernel's name by its host stub, so a launch can say which kernel it was (sim_kernels.c). Programs
 * register their kernels from static constructors, before any runtime call: the table is the
 * runtime's own, like the real one's. */
struct kfun { const void *host; const char *name; UT_hash_handle hh; };
static struct kfun *g_kfuns;
static pthread_mutex_t g_kfun_mu = PTHREAD_MUTEX_INITIALIZER;

static const char *kernel_name(const void *host) {
    struct kfun *k;
    pthread_mutex_lock(&g_kfun_mu);
    HASH_FIND_PTR(g_kfuns, &host, k);
    pthread_mutex_unlock(&g_kfun_mu);
    return k ? k->name : NULL;
}

static char g_fatbin_handle;
void **CUDARTAPI __cudaRegisterFatBinary(void *fatCubin) { (void)fatCubin; return (void **)&g_fatbin_handle; }
void CUDARTAPI __cudaRegisterFatBinaryEnd(void **h) { (void)h; }
void CUDARTAPI __cudaUnregisterFatBinary(void **h) { (void)h; }
void CUDARTAPI __cudaRegisterFunction(void **h, const char *hostFun, char *deviceFun, const char *deviceName, int tl,
                                      uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize) {
    (void)h; (void)tl; (void)tid; (void)bid; (void)bDim; (void)gDim; (void)wSize;
    const char *name = deviceName ? deviceName : deviceFun; /* the mangled name, in the caller's rodata */
    if (!hostFun || !name) return;
    const void *key = hostFun;
    pthread_mutex_lock(&g_kfun_mu);
    struct kfun *k;
    HASH_FIND_PTR(g_kfuns, &key, k);
    if (!k && (k = malloc(sizeof *k))) {
        k->host = key;
        HASH_ADD_PTR(g_kfuns, host, k);
    }
    if (k) k->name = name;
    pthread_mutex_unlock(&g_kfun_mu);
}
void CUDARTAPI __cudaRegisterVar(void **h, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                                 size_t size, int constant, int global) {
    (void)h; (void)hostVar; (void)deviceAddress; (void)deviceName; (void)ext; (void)size; (void)constant; (void)global;
}
void CUDARTAPI __cudaRegisterManagedVar(void **h, void **hostVarPtrAddress, char *deviceAddress, const char *deviceName,
                                        int ext, size_t size, int constant, int global) {
    (void)h; (void)hostVarPtrAddress; (void)deviceAddress; (void)deviceName; (void)ext; (void)size; (void)constant; (void)global;
}
void CUDARTAPI __cudaRegisterHostVar(void **h, const char *deviceName, void *hostVar, size_t size) { (void)h; (void)deviceName; (void)hostVar; (void)size; }
void CUDARTAPI __cudaRegisterUnifiedTable(void *table) { (void)table; }
char CUDARTAPI __cudaInitModule(void **h) { (void)h; return 1; }

/* <<<...>>> compiles to push + pop + a launch: keep the configuration per thread. */
static __thread struct { dim3 g, b; size_t shm; void *s; } tl_cfg;
unsigned CUDARTAPI __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, void *stream) {
    tl_cfg.g = gridDim; tl_cfg.b = blockDim; tl_cfg.shm = sharedMem; tl_cfg.s = stream;
    return 0;
}
cudaError_t CUDARTAPI __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream) {
    if (gridDim) *gridDim = tl_cfg.g;
    if (blockDim) *blockDim = tl_cfg.b;
    if (sharedMem) *sharedMem = tl_cfg.shm;
    if (stream) *(void **)stream = tl_cfg.s;
    return cudaSuccess;
}

/* Kernel handles: a registered kernel's handle is its host stub's address, whichever way it is
 * asked for (CUDA 13's <<<>>> asks __cudaGetKernel once per launch site, then launches the handle
 * with __cudaLaunchKernel; cudaGetKernel and cudaGetFuncBySymbol hand out the same), so every
 * launch entry point names the kernel the same way. The driver learns each handle's name, for its
 * own launch entry points. An address nobody registered is cudaErrorInvalidDeviceFunction. */
static cudaError_t kernel_handle(void **out, const void *fn) {
    if (!out) return rt_err(cudaErrorInvalidValue);
    const char *name = kernel_name(fn);
    if (!name) return rt_err(cudaErrorInvalidDeviceFunction);
    g_kernel_name(fn, name);
    *out = (void *)fn;
    return cudaSuccess;
}
cudaError_t CUDARTAPI __cudaGetKernel(cudaKernel_t *k, const void *fn) { BEGIN("__cudaGetKernel"); return kernel_handle((void **)k, fn); }
cudaError_t CUDARTAPI cudaGetKernel(cudaKernel_t *k, const void *fn) { BEGIN("cudaGetKernel"); return kernel_handle((void **)k, fn); }
cudaError_t CUDARTAPI cudaGetFuncBySymbol(cudaFunction_t *f, const void *fn) { BEGIN("cudaGetFuncBySymbol"); return kernel_handle((void **)f, fn); }
cudaError_t CUDARTAPI cudaFuncGetName(const char **name, const void *fn) {
    BEGIN("cudaFuncGetName");
    if (!name) return rt_err(cudaErrorInvalidValue);
    *name = kernel_name(fn);
    return *name ? cudaSuccess : rt_err(cudaErrorInvalidDeviceFunction);
}

/* No device code runs here. Every launch goes to the driver's policy (UVMSIM_KERNELS, sim_kernels.c):
 * by default it fails with cudaErrorNotSupported (also the last error) after one line naming the
 * kernel; with noop it is queued on its stream and runs nothing (a fill kernel writes its value). */
static cudaError_t launch(const char *entry, const void *fn, void **args, cudaStream_t s, int ptds) {
    BEGIN(entry);
    RET(g_kernel_launch(entry, fn, kernel_name(fn), args, ST(s), ptds));
}
cudaError_t CUDARTAPI cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t shm, cudaStream_t s) {
    (void)g; (void)b; (void)shm; return launch("cudaLaunchKernel", f, a, s, 0);
}
cudaError_t CUDARTAPI cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t shm, cudaStream_t s) {
    (void)g; (void)b; (void)shm; return launch("cudaLaunchKernel_ptsz", f, a, s, 1);
}
cudaError_t CUDARTAPI __cudaLaunchKernel(const void *f, dim3 g, dim3 b, void **a, size_t shm, cudaStream_t s) {
    (void)g; (void)b; (void)shm; return launch("__cudaLaunchKernel", f, a, s, 0);
}
cudaError_t CUDARTAPI __cudaLaunchKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t shm, cudaStream_t s) {
    (void)g; (void)b; (void)shm; return launch("__cudaLaunchKernel_ptsz", f, a, s, 1);
}
cudaError_t CUDARTAPI cudaLaunchKernelExC(const cudaLaunchConfig_t *c, const void *f, void **a) {
    if (!c) { BEGIN("cudaLaunchKernelExC"); return rt_err(cudaErrorInvalidValue); }
    return launch("cudaLaunchKernelExC", f, a, c->stream, 0);
}
cudaError_t CUDARTAPI cudaLaunchKernelExC_ptsz(const cudaLaunchConfig_t *c, const void *f, void **a) {
    if (!c) { BEGIN("cudaLaunchKernelExC_ptsz"); return rt_err(cudaErrorInvalidValue); }
    return launch("cudaLaunchKernelExC_ptsz", f, a, c->stream, 1);
}
cudaError_t CUDARTAPI cudaLaunchCooperativeKernel(const void *f, dim3 g, dim3 b, void **a, size_t shm, cudaStream_t s) {
    (void)g; (void)b; (void)shm; return launch("cudaLaunchCooperativeKernel", f, a, s, 0);
}
cudaError_t CUDARTAPI cudaLaunchCooperativeKernel_ptsz(const void *f, dim3 g, dim3 b, void **a, size_t shm, cudaStream_t s) {
    (void)g; (void)b; (void)shm; return launch("cudaLaunchCooperativeKernel_ptsz", f, a, s, 1);
}

/* ------------------------------------------------------------------ page-locked host queries */

/* Page-locked memory (allocated or registered) answers with its flags and, under unified
 * addressing, device pointer == host pointer; any other pointer is cudaErrorInvalidValue, as on
 * a real machine. Allocation flags are not recorded: every page-locked range reports Default. */
static int rt_is_pinned(const void *p) {
    unsigned int mt = 0, managed = 0;
    CUpointer_attribute at[2] = { CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED };
    void *data[2] = { &mt, &managed };
    return p && d_cuPointerGetAttributes(2, at, data, DP(p)) == CUDA_SUCCESS && !managed && mt == CU_MEMORYTYPE_HOST;
}
cudaError_t CUDARTAPI cudaHostGetFlags(unsigned int *flags, void *p) {
    BEGIN("cudaHostGetFlags");
    if (!flags || !rt_is_pinned(p)) return rt_err(cudaErrorInvalidValue);
    *flags = cudaHostAllocDefault;
    return cudaSuccess;
}
cudaError_t CUDARTAPI cudaHostGetDevicePointer(void **dev, void *p, unsigned int flags) {
    BEGIN("cudaHostGetDevicePointer");
    if (!dev || flags != 0 || !rt_is_pinned(p)) return rt_err(cudaErrorInvalidValue);
    *dev = p;
    return cudaSuccess;
}

/* ------------------------------------------------------------------ what a CUDA program asks at start-up
 * (PyTorch's lazy init, stream pools, caching allocators): answers of one GPU of a
 * multi-GPU node. */

#pragma GCC visibility push(default)
cudaError_t CUDARTAPI cudaGraphLaunch_ptsz(cudaGraphExec_t ge, cudaStream_t s);
#pragma GCC visibility pop

cudaError_t CUDARTAPI cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
    BEGIN("cudaDeviceGetStreamPriorityRange");
    if (least) *least = 0;
    if (greatest) *greatest = -5;
    return cudaSuccess;
}
/* Peer access (sim_peer.c holds the answers: every other device, as on an NVLink node). */
cudaError_t CUDARTAPI cudaDeviceCanAccessPeer(int *can, int d, int peer) {
    BEGIN("cudaDeviceCanAccessPeer");
    if (!can) return rt_err(cudaErrorInvalidValue);
    RET(d_cuDeviceCanAccessPeer(can, d, peer));
}
cudaError_t CUDARTAPI cudaDeviceGetP2PAttribute(int *v, enum cudaDeviceP2PAttr a, int src, int dst) {
    BEGIN("cudaDeviceGetP2PAttribute");
    RET(d_cuDeviceGetP2PAttribute(v, (CUdevice_P2PAttribute)a, src, dst));
}
/* CUDA Runtime API, cudaDeviceEnablePeerAccess: cudaErrorInvalidDevice where cudaDeviceCanAccessPeer
 * says no (an invalid ordinal, the current device itself), cudaErrorPeerAccessAlreadyEnabled the
 * second time, cudaErrorInvalidValue for flags other than 0. */
cudaError_t CUDARTAPI cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
    BEGIN("cudaDeviceEnablePeerAccess");
    CUdevice me = 0;
    d_cuCtxGetDevice(&me);
    int can = 0;
    if (d_cuDeviceCanAccessPeer(&can, me, peer) != CUDA_SUCCESS || !can) return rt_err(cudaErrorInvalidDevice);
    if (flags) return rt_err(cudaErrorInvalidValue);
    CUcontext c = NULL;
    CUresult r = d_cuDevicePrimaryCtxRetain(&c, peer);
    RET(r ? r : d_cuCtxEnablePeerAccess(c, 0));
}
cudaError_t CUDARTAPI cudaDeviceDisablePeerAccess(int peer) {
    BEGIN("cudaDeviceDisablePeerAccess");
    if (!valid_device(peer)) return rt_err(cudaErrorInvalidDevice);
    CUcontext c = NULL;
    CUresult r = d_cuDevicePrimaryCtxRetain(&c, peer);
    RET(r ? r : d_cuCtxDisablePeerAccess(c));
}
cudaError_t CUDARTAPI cudaStreamGetDevice(cudaStream_t s, int *d) {
    BEGIN("cudaStreamGetDevice");
    if (!d) return rt_err(cudaErrorInvalidValue);
    RET(d_cuStreamGetDevice(ST(s), d));
}
cudaError_t CUDARTAPI cudaStreamGetDevice_ptsz(cudaStream_t s, int *d) {
    BEGIN("cudaStreamGetDevice_ptsz");
    if (!d) return rt_err(cudaErrorInvalidValue);
    RET(dp_cuStreamGetDevice(ST(s), d));
}
cudaError_t CUDARTAPI cudaGetDeviceFlags(unsigned int *f) { BEGIN("cudaGetDeviceFlags"); if (!f) return rt_err(cudaErrorInvalidValue); *f = 0; return cudaSuccess; }
cudaError_t CUDARTAPI cudaSetDeviceFlags(unsigned int f) { BEGIN("cudaSetDeviceFlags"); (void)f; return cudaSuccess; }
cudaError_t CUDARTAPI cudaInitDevice(int d, unsigned int df, unsigned int f) {
    BEGIN("cudaInitDevice");
    (void)df; (void)f;
    return valid_device(d) ? cudaSuccess : rt_err(cudaErrorInvalidDevice);
}
cudaError_t CUDARTAPI cudaDeviceGetPCIBusId(char *id, int len, int d) {
    BEGIN("cudaDeviceGetPCIBusId");
    if (!id || len <= 0) return rt_err(cudaErrorInvalidValue);
    if (!valid_device(d)) return rt_err(cudaErrorInvalidDevice);
    snprintf(id, (size_t)len, "0000:%02x:00.0", (unsigned)dev_attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, d));
    return cudaSuccess;
}

cudaError_t CUDARTAPI cudaGraphGetNodes(cudaGraph_t g, cudaGraphNode_t *nodes, size_t *n) { BEGIN("cudaGraphGetNodes"); RET(d_cuGraphGetNodes((CUgraph)g, (CUgraphNode *)nodes, n)); }
cudaError_t CUDARTAPI cudaGraphInstantiateWithFlags(cudaGraphExec_t *pe, cudaGraph_t g, unsigned long long f) { BEGIN("cudaGraphInstantiateWithFlags"); RET(d_cuGraphInstantiateWithFlags((CUgraphExec *)pe, (CUgraph)g, f)); }
cudaError_t CUDARTAPI cudaGraphInstantiate(cudaGraphExec_t *pe, cudaGraph_t g, unsigned long long f) { BEGIN("cudaGraphInstantiate"); RET(d_cuGraphInstantiateWithFlags((CUgraphExec *)pe, (CUgraph)g, f)); }
cudaError_t CUDARTAPI cudaGraphExecDestroy(cudaGraphExec_t ge) { BEGIN("cudaGraphExecDestroy"); RET(d_cuGraphExecDestroy((CUgraphExec)ge)); }
cudaError_t CUDARTAPI cudaGraphLaunch(cudaGraphExec_t ge, cudaStream_t s) { BEGIN("cudaGraphLaunch"); RET(d_cuGraphLaunch((CUgraphExec)ge, ST(s))); }
cudaError_t CUDARTAPI cudaGraphLaunch_ptsz(cudaGraphExec_t ge, cudaStream_t s) { BEGIN("cudaGraphLaunch_ptsz"); RET(dp_cuGraphLaunch((CUgraphExec)ge, ST(s))); }
