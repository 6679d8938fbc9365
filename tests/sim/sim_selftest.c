/* sim_selftest.c: proves the simulator's own behaviours (async copies, stream ordering, capture,
 * faults, last error, pointer attributes, entry-point lookup, hints, the CUDA 12 flavour). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "sim_cudart12.h"
#include "sim_selftest_check.h"
#include "uvmsim.h"

/* declared by the header only under CUDA_API_PER_THREAD_DEFAULT_STREAM */
cudaError_t cudaLaunchHostFunc_ptsz(cudaStream_t stream, cudaHostFn_t fn, void *userData);


#define MIB ((size_t)1 << 20)

/* Run once per profile (CTest): the strict one (default) and UVMSIM_PROFILE=lenient. */
static int g_strict = 1;
static const char *g_range = "refuse"; /* UVMSIM_MANAGED_RANGE in effect */

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int all_bytes(const void *p, int v, size_t n) {
    const unsigned char *c = p;
    for (size_t i = 0; i < n; i++)
        if (c[i] != (unsigned char)v) return 0;
    return 1;
}

/* ------------------------------------------------------------------ contexts */

static void *no_ctx_thread(void *arg) {
    (void)arg;
    CUcontext c = (CUcontext)1;
    EQ(cuCtxGetCurrent(&c), CUDA_SUCCESS);
    CHECK(c == NULL);
    CUdeviceptr p;
    EQ(cuMemAlloc(&p, 4096), CUDA_ERROR_INVALID_CONTEXT);
    CUstream s;
    EQ(cuStreamCreate(&s, 0), CUDA_ERROR_INVALID_CONTEXT);
    int n = 0;
    EQ(cudaGetDeviceCount(&n), cudaSuccess); /* a runtime call makes the primary context current */
    EQ(cuCtxGetCurrent(&c), CUDA_SUCCESS);
    CHECK(c != NULL);
    return NULL;
}

static void test_context(void) {
    EQ(cudaFree(NULL), cudaSuccess);
    CUcontext c = NULL, pc = NULL;
    EQ(cuCtxGetCurrent(&c), CUDA_SUCCESS);
    EQ(cuDevicePrimaryCtxRetain(&pc, 0), CUDA_SUCCESS);
    CHECK(c != NULL && c == pc);
    pthread_t t;
    pthread_create(&t, NULL, no_ctx_thread, NULL);
    pthread_join(t, NULL);
    int v = 0;
    EQ(cudaRuntimeGetVersion(&v), cudaSuccess);
    EQ(v, 13000);
    struct cudaDeviceProp prop;
    EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
    CHECK(strstr(prop.name, "simulated") != NULL);
    EQ(prop.managedMemory, 1);
    EQ(prop.concurrentManagedAccess, 1);
}

/* H200-like limits in the properties and the attributes alike: no zero that launch code divides by
 * (PyTorch sizes its random kernels' grids by maxThreadsPerMultiProcessor). */
static void test_properties(void) {
    struct cudaDeviceProp p;
    memset(&p, 0, sizeof p);
    EQ(cudaGetDeviceProperties(&p, 0), cudaSuccess);
    EQ(p.major, 9);
    EQ(p.multiProcessorCount, 132);
    EQ(p.maxThreadsPerMultiProcessor, 2048);
    EQ(p.maxBlocksPerMultiProcessor, 32);
    EQ(p.regsPerMultiprocessor, 65536);
    EQ(p.regsPerBlock, 65536);
    EQ(p.sharedMemPerMultiprocessor, 233472);
    EQ(p.sharedMemPerBlock, 49152);
    EQ(p.sharedMemPerBlockOptin, 232448);
    EQ(p.maxThreadsDim[2], 64);
    EQ(p.maxGridSize[0], 2147483647);
    EQ(p.l2CacheSize, 50 << 20);
    EQ(p.warpSize, 32);
    const struct { enum cudaDeviceAttr a; long long v; } same[] = {
        { cudaDevAttrMaxThreadsPerMultiProcessor, p.maxThreadsPerMultiProcessor },
        { cudaDevAttrMaxBlocksPerMultiprocessor, p.maxBlocksPerMultiProcessor },
        { cudaDevAttrMaxRegistersPerMultiprocessor, p.regsPerMultiprocessor },
        { cudaDevAttrMaxRegistersPerBlock, p.regsPerBlock },
        { cudaDevAttrMaxSharedMemoryPerMultiprocessor, (long long)p.sharedMemPerMultiprocessor },
        { cudaDevAttrMaxSharedMemoryPerBlock, (long long)p.sharedMemPerBlock },
        { cudaDevAttrMaxSharedMemoryPerBlockOptin, (long long)p.sharedMemPerBlockOptin },
        { cudaDevAttrMaxBlockDimX, p.maxThreadsDim[0] }, { cudaDevAttrMaxGridDimY, p.maxGridSize[1] },
        { cudaDevAttrMultiProcessorCount, p.multiProcessorCount }, { cudaDevAttrL2CacheSize, p.l2CacheSize },
        { cudaDevAttrMaxThreadsPerBlock, p.maxThreadsPerBlock }, { cudaDevAttrWarpSize, p.warpSize },
        { cudaDevAttrTotalConstantMemory, (long long)p.totalConstMem },
    };
    for (size_t i = 0; i < sizeof same / sizeof same[0]; i++) {
        int v = -1;
        EQ(cudaDeviceGetAttribute(&v, same[i].a, 0), cudaSuccess);
        EQ(v, same[i].v);
        CHECK(v > 0);
    }
    int clock = 0;
    EQ(cuDeviceGetAttribute(&clock, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 0), CUDA_SUCCESS);
    CHECK(clock > 0);
    int v = 0;
    EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_MAX, 0), CUDA_ERROR_INVALID_VALUE);
}

/* libnvidia-ml.so.1 (sim_nvml.c): the calls FBGEMM's fbgemm_gpu_py.so imports, on the default eight
 * devices without link-level NvLink answers, and nothing answered before nvmlInit. */
typedef struct { char legacy[16]; unsigned domain, bus, device, id, subsys; char busId[32]; } nvml_pci;
static void test_nvml(void) {
    void *h = dlopen(UVMSIM_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    if (!h) return;
    int (*init)(void) = (int (*)(void))dlsym(h, "nvmlInit_v2");
    int (*count)(unsigned *) = (int (*)(unsigned *))dlsym(h, "nvmlDeviceGetCount_v2");
    int (*byindex)(unsigned, void **) = (int (*)(unsigned, void **))dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    int (*pciinfo)(void *, nvml_pci *) = (int (*)(void *, nvml_pci *))dlsym(h, "nvmlDeviceGetPciInfo_v3");
    int (*linkstate)(void *, unsigned, int *) = (int (*)(void *, unsigned, int *))dlsym(h, "nvmlDeviceGetNvLinkState");
    int (*remote)(void *, unsigned, nvml_pci *) = (int (*)(void *, unsigned, nvml_pci *))dlsym(h, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    CHECK(init && count && byindex && pciinfo && linkstate && remote);
    if (!init || !count || !byindex || !pciinfo || !linkstate || !remote) return;
    unsigned n = 0;
    EQ(count(&n), 1); /* NVML_ERROR_UNINITIALIZED */
    EQ(init(), 0);
    EQ(count(&n), 0);
    EQ(n, 8);
    void *dev = NULL;
    EQ(byindex(0, &dev), 0);
    CHECK(dev != NULL);
    EQ(byindex(8, &dev), 2); /* NVML_ERROR_INVALID_ARGUMENT */
    EQ(byindex(0, &dev), 0);
    nvml_pci p;
    memset(&p, 0xff, sizeof p);
    EQ(pciinfo(dev, &p), 0);
    EQ(p.domain, 0);
    EQ(p.bus, 1); /* the PCI bus id cudaDeviceGetPCIBusId reports: 0000:01:00.0 */
    EQ(p.device, 0);
    CHECK(!strcmp(p.busId, "00000000:01:00.0"));
    char rt_id[32] = "";
    EQ(cudaDeviceGetPCIBusId(rt_id, sizeof rt_id, 0), cudaSuccess);
    CHECK(!strcmp(rt_id, p.legacy));
    int active = -1;
    EQ(linkstate(dev, 0, &active), 3); /* NVML_ERROR_NOT_SUPPORTED: no NvLink */
    EQ(remote(dev, 0, &p), 3);
    dlclose(h);
}

/* ------------------------------------------------------------------ async copies */

static void test_async_copy(void) {
    const size_t n = 4 * MIB;
    char *src, *pinned;
    EQ(cudaMallocManaged((void **)&src, n, cudaMemAttachGlobal), cudaSuccess);
    memset(src, 0xAB, n);
    unsigned long long pin0 = uvmsim_pinned_bytes();
    EQ(cudaHostAlloc((void **)&pinned, n, cudaHostAllocDefault), cudaSuccess);
    EQ(uvmsim_pinned_bytes(), pin0 + n);
    CHECK(uvmsim_pinned_peak() >= pin0 + n);
    memset(pinned, 0, n);
    cudaStream_t s;
    EQ(cudaStreamCreate(&s), cudaSuccess);
    uvmsim_reset();
    uvmsim_set_op_delay_us(50000);

    /* pinned destination: the call returns at once, the bytes arrive later */
    double t0 = now_ms();
    EQ(cudaMemcpyAsync(pinned, src, n, cudaMemcpyDeviceToHost, s), cudaSuccess);
    CHECK(now_ms() - t0 < 40);
    CHECK(pinned[0] == 0 && pinned[n - 1] == 0); /* stale */
    EQ(uvmsim_copies(), 0);
    EQ(cudaStreamQuery(s), cudaErrorNotReady);
    EQ(cudaGetLastError(), cudaSuccess); /* NotReady is not an error */
    EQ(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(all_bytes(pinned, 0xAB, n));
    EQ(uvmsim_copies(), 1);
    EQ(uvmsim_bytes_copied(), n);
    EQ(uvmsim_calls("cudaMemcpyAsync"), 1);
    EQ(uvmsim_calls("cuMemcpyAsync"), 0);          /* runtime-internal driver calls are private */
    EQ(uvmsim_calls("cuPointerGetAttributes"), 0);

    /* pageable destination: lenient, the async call returns only after the copy ran; strict
     * (UVMSIM_PAGEABLE_D2H=async), it may return before (CUDA 12.2+ API-sync page) */
    char *pageable = calloc(1, n);
    t0 = now_ms();
    EQ(cudaMemcpyAsync(pageable, src, n, cudaMemcpyDeviceToHost, s), cudaSuccess);
    if (g_strict) {
        CHECK(now_ms() - t0 < 40);
        CHECK(pageable[0] == 0);
        EQ(cudaStreamSynchronize(s), cudaSuccess);
    } else {
        CHECK(now_ms() - t0 >= 45);
    }
    CHECK(all_bytes(pageable, 0xAB, n));

    /* events: pending until the stream gets there */
    cudaEvent_t a, b;
    unsigned long long ev0 = uvmsim_live_events();
    EQ(cudaEventCreate(&a), cudaSuccess);
    EQ(cudaEventCreate(&b), cudaSuccess);
    EQ(uvmsim_live_events(), ev0 + 2);
    /* behind nothing (the stream idle, the legacy stream too), complete at once despite the delay */
    EQ(cudaEventRecord(a, s), cudaSuccess);
    EQ(cudaEventQuery(a), cudaSuccess);
    EQ(cudaMemsetAsync(src, 0x11, n, s), cudaSuccess);
    EQ(cudaMemcpyAsync(pinned, src, n, cudaMemcpyDefault, s), cudaSuccess);
    EQ(cudaEventRecord(b, s), cudaSuccess);
    EQ(cudaEventQuery(b), cudaErrorNotReady);
    EQ(cudaEventSynchronize(b), cudaSuccess);
    EQ(cudaEventQuery(b), cudaSuccess);
    CHECK(all_bytes(pinned, 0x11, n));
    float ms = -1;
    EQ(cudaEventElapsedTime(&ms, a, b), cudaSuccess);
    CHECK(ms >= 90);
    EQ(cudaEventDestroy(a), cudaSuccess);
    EQ(cudaEventDestroy(b), cudaSuccess);
    EQ(uvmsim_live_events(), ev0);

    /* 2-D copy */
    memset(src, 7, n);
    memset(pinned, 0, n);
    EQ(cudaMemcpy2DAsync(pinned, 256, src, 512, 128, 16, cudaMemcpyDeviceToHost, s), cudaSuccess);
    EQ(cudaStreamSynchronize(s), cudaSuccess);
    CHECK(pinned[0] == 7 && pinned[127] == 7 && pinned[128] == 0 && pinned[15 * 256 + 127] == 7);

    uvmsim_set_op_delay_us(0);
    /* errors */
    EQ(cudaMemcpyAsync(pinned, NULL, n, cudaMemcpyDeviceToHost, s), cudaErrorInvalidValue);
    EQ(cudaMemcpyAsync(pinned, pageable, n, cudaMemcpyDeviceToHost, s), cudaErrorInvalidValue); /* source not device */
    EQ(cudaMemcpyAsync(pinned, src, n, (enum cudaMemcpyKind)9, s), cudaErrorInvalidMemcpyDirection);
    EQ(cudaMemcpyAsync(pinned, src, n, cudaMemcpyDeviceToHost, (cudaStream_t)(uintptr_t)0x1234), cudaErrorInvalidResourceHandle);
    EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    EQ(cudaGetLastError(), cudaSuccess);

    EQ(cudaStreamDestroy(s), cudaSuccess);
    free(pageable);
    EQ(cudaFreeHost(pinned), cudaSuccess);
    EQ(uvmsim_pinned_bytes(), pin0);
    EQ(cudaFree(src), cudaSuccess);
}

/* ------------------------------------------------------------------ legacy vs per-thread streams */

struct stamp { double t; pthread_t th; };
static void sleeper(void *arg) { (void)arg; usleep(100000); }
static void stamp_fn(void *arg) {
    struct stamp *s = arg;
    s->t = now_ms();
    s->th = pthread_self();
}

static void *ptds_thread(void *arg) {
    struct stamp *st = arg;
    EQ(cudaLaunchHostFunc(cudaStreamPerThread, stamp_fn, st), cudaSuccess);
    EQ(cudaStreamSynchronize(cudaStreamPerThread), cudaSuccess);
    return NULL;
}

static void test_streams(void) {
    cudaStream_t blocking, nonblocking;
    unsigned long long live0 = uvmsim_live_streams();
    EQ(cudaStreamCreate(&blocking), cudaSuccess);
    EQ(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking), cudaSuccess);
    EQ(uvmsim_live_streams(), live0 + 2);

    /* legacy-stream work waits for earlier blocking-stream work; non-blocking streams do not */
    struct stamp leg = { 0 }, nb = { 0 }, blk = { 0 };
    double t0 = now_ms();
    EQ(cudaLaunchHostFunc(blocking, sleeper, NULL), cudaSuccess);
    EQ(cudaLaunchHostFunc(0, stamp_fn, &leg), cudaSuccess);
    EQ(cudaLaunchHostFunc(nonblocking, stamp_fn, &nb), cudaSuccess);
    EQ(cudaLaunchHostFunc(blocking, stamp_fn, &blk), cudaSuccess);
    EQ(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(leg.t - t0 >= 95);
    if (!g_strict) /* strict: one host-function thread for all streams (test_fidelity) */
        CHECK(nb.t - t0 < 90);
    CHECK(blk.t >= leg.t);

    /* later blocking-stream work waits for earlier legacy work */
    struct stamp b2 = { 0 }, n2 = { 0 };
    t0 = now_ms();
    EQ(cudaLaunchHostFunc(cudaStreamLegacy, sleeper, NULL), cudaSuccess);
    EQ(cudaLaunchHostFunc(blocking, stamp_fn, &b2), cudaSuccess);
    EQ(cudaLaunchHostFunc(nonblocking, stamp_fn, &n2), cudaSuccess);
    EQ(cudaStreamSynchronize(blocking), cudaSuccess);
    EQ(cudaStreamSynchronize(nonblocking), cudaSuccess);
    CHECK(b2.t - t0 >= 95);
    if (!g_strict)
        CHECK(n2.t - t0 < 90);

    /* idle is not independent: while legacy work runs, an idle blocking stream and the per-thread
     * stream read idle, yet their next operation waits for that work (CUDA Runtime API, "stream
     * synchronization behavior"); libuvmchunk's host engine rests on this */
    struct stamp b4 = { 0 }, p4 = { 0 };
    t0 = now_ms();
    EQ(cudaLaunchHostFunc(cudaStreamLegacy, sleeper, NULL), cudaSuccess);
    EQ(cudaStreamQuery(blocking), cudaSuccess);
    EQ(cudaStreamQuery(cudaStreamPerThread), cudaSuccess);
    EQ(cudaLaunchHostFunc(blocking, stamp_fn, &b4), cudaSuccess);
    EQ(cudaLaunchHostFunc(cudaStreamPerThread, stamp_fn, &p4), cudaSuccess);
    EQ(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(b4.t - t0 >= 95);
    CHECK(p4.t - t0 >= 95);

    /* per-thread default stream: its own queue per host thread, distinct from legacy */
    struct stamp l3 = { 0 }, p3 = { 0 }, q3 = { 0 }, z3 = { 0 };
    EQ(cudaLaunchHostFunc(0, stamp_fn, &l3), cudaSuccess);
    EQ(cudaLaunchHostFunc(cudaStreamPerThread, stamp_fn, &p3), cudaSuccess);
    EQ(cudaLaunchHostFunc_ptsz(0, stamp_fn, &z3), cudaSuccess); /* 0 through _ptsz = per-thread */
    pthread_t t;
    pthread_create(&t, NULL, ptds_thread, &q3);
    pthread_join(t, NULL);
    EQ(cudaDeviceSynchronize(), cudaSuccess);
    CHECK(pthread_equal(p3.th, z3.th));
    /* lenient: each stream's host functions on its own thread; strict: one thread for all */
    CHECK(g_strict == pthread_equal(l3.th, p3.th));
    CHECK(g_strict == pthread_equal(p3.th, q3.th));

    EQ(cudaStreamDestroy(blocking), cudaSuccess);
    EQ(cudaStreamDestroy(nonblocking), cudaSuccess);
    EQ(uvmsim_live_streams(), live0);
    EQ(cudaStreamDestroy(blocking), cudaErrorInvalidResourceHandle);
    cudaGetLastError();
}

/* ------------------------------------------------------------------ capture */

static void *other_thread_malloc(void *arg) {
    void *p = NULL;
    *(cudaError_t *)arg = cudaMalloc(&p, 4096);
    if (!*(cudaError_t *)arg) cudaFree(p);
    return NULL;
}

/* Another thread's queries and waits, in the given interaction mode (UVMSIM_CAPTURE_QUERIES). */
struct other_query { enum cudaStreamCaptureMode mode; cudaStream_t s; cudaEvent_t ev; cudaError_t q, e; };
static void *other_thread_query(void *arg) {
    struct other_query *o = arg;
    enum cudaStreamCaptureMode m = o->mode;
    cudaThreadExchangeStreamCaptureMode(&m);
    o->q = cudaStreamQuery(o->s);
    o->e = cudaEventSynchronize(o->ev);
    cudaThreadExchangeStreamCaptureMode(&m);
    cudaGetLastError();
    return NULL;
}

static void test_capture(void) {
    const size_t n = MIB;
    char *src, *pinned, *pageable = calloc(1, n);
    EQ(cudaMallocManaged((void **)&src, n, cudaMemAttachGlobal), cudaSuccess);
    EQ(cudaMallocHost((void **)&pinned, n), cudaSuccess);
    memset(src, 3, n);
    memset(pinned, 0, n);
    cudaStream_t s;
    EQ(cudaStreamCreate(&s), cudaSuccess);
    uvmsim_reset();

    /* a valid capture records the copy without running it */
    enum cudaStreamCaptureStatus st;
    EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
    EQ(st, cudaStreamCaptureStatusActive);
    unsigned long long id = 0;
    EQ(cudaStreamGetCaptureInfo(s, &st, &id, NULL, NULL, NULL, NULL), cudaSuccess);
    CHECK(id != 0);
    EQ(cudaMemcpyAsync(pinned, src, n, cudaMemcpyDeviceToHost, s), cudaSuccess);
    cudaEvent_t ev;
    EQ(cudaEventCreate(&ev), cudaSuccess);
    EQ(cudaEventRecord(ev, s), cudaSuccess);
    EQ(cudaEventQuery(ev), cudaErrorCapturedEvent);
    EQ(cudaGetLastError(), cudaErrorCapturedEvent);
    EQ(cudaStreamIsCapturing(0, &st), cudaErrorStreamCaptureImplicit);
    cudaGetLastError();
    cudaGraph_t g = NULL;
    EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    CHECK(g != NULL);
    EQ(cudaGraphDestroy(g), cudaSuccess);
    EQ(cudaStreamSynchronize(s), cudaSuccess);
    EQ(uvmsim_copies(), 0);
    CHECK(pinned[0] == 0);
    EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
    EQ(st, cudaStreamCaptureStatusNone);

    /* a forbidden call fails with 900 and invalidates; EndCapture then fails with 901 */
    void *p = NULL;
    EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    EQ(cudaMalloc(&p, 4096), cudaErrorStreamCaptureUnsupported);
    EQ(cudaStreamIsCapturing(s, &st), cudaSuccess);
    EQ(st, cudaStreamCaptureStatusInvalidated);
    EQ(cudaMemcpyAsync(pinned, src, n, cudaMemcpyDeviceToHost, s), cudaErrorStreamCaptureInvalidated);
    g = (cudaGraph_t)1;
    EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    CHECK(g == NULL);
    EQ(cudaGetLastError(), cudaErrorStreamCaptureInvalidated);

    /* each unsafe call on the capturing stream */
    EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    EQ(cudaStreamSynchronize(s), cudaErrorStreamCaptureUnsupported);
    EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    EQ(cudaMemcpyAsync(pageable, src, n, cudaMemcpyDeviceToHost, s), cudaErrorStreamCaptureUnsupported);
    EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    struct cudaMemLocation host = { cudaMemLocationTypeHost, 0 };
    EQ(cudaMemPrefetchAsync(src, n, host, 0, s), cudaErrorStreamCaptureUnsupported);
    EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    EQ(cudaMemcpyAsync(pinned, src, n, cudaMemcpyDeviceToHost, 0), cudaErrorStreamCaptureImplicit);
    EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);

    /* modes: another thread's global capture forbids cudaMalloc here; thread-local and relaxed do not */
    cudaError_t e = cudaSuccess;
    pthread_t t;
    EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
    pthread_create(&t, NULL, other_thread_malloc, &e);
    pthread_join(t, NULL);
    EQ(e, cudaErrorStreamCaptureUnsupported);
    EQ(cudaStreamEndCapture(s, &g), cudaErrorStreamCaptureInvalidated);
    EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    pthread_create(&t, NULL, other_thread_malloc, &e);
    pthread_join(t, NULL);
    EQ(e, cudaSuccess);
    enum cudaStreamCaptureMode m = cudaStreamCaptureModeRelaxed;
    EQ(cudaThreadExchangeStreamCaptureMode(&m), cudaSuccess);
    EQ(m, cudaStreamCaptureModeGlobal);
    EQ(cudaMalloc(&p, 4096), cudaSuccess); /* relaxed: allowed even during our own capture */
    EQ(cudaThreadExchangeStreamCaptureMode(&m), cudaSuccess);
    EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    EQ(cudaGraphDestroy(g), cudaSuccess);
    EQ(cudaFree(p), cudaSuccess);
    EQ(cudaEventDestroy(ev), cudaSuccess);

    /* another thread's global capture forbids a global-mode thread to query or wait for any stream
     * or event (strict: cuda_runtime_api.h, cudaThreadExchangeStreamCaptureMode; pytorch#104555),
     * and invalidates it; thread-local and relaxed threads may */
    {
        cudaStream_t other;
        cudaEvent_t done;
        EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
        EQ(cudaEventCreate(&done), cudaSuccess);
        EQ(cudaEventRecord(done, other), cudaSuccess);
        EQ(cudaStreamSynchronize(other), cudaSuccess);
        enum cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                              cudaStreamCaptureModeRelaxed};
        for (int k = 0; k < 3; k++) {
            struct other_query o = {modes[k], other, done, cudaErrorUnknown, cudaErrorUnknown};
            EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal), cudaSuccess);
            pthread_create(&t, NULL, other_thread_query, &o);
            pthread_join(t, NULL);
            int refused = g_strict && k == 0;
            EQ(o.q, refused ? cudaErrorStreamCaptureUnsupported : cudaSuccess);
            EQ(o.e, refused ? cudaErrorStreamCaptureUnsupported : cudaSuccess);
            EQ(cudaStreamEndCapture(s, &g), refused ? cudaErrorStreamCaptureInvalidated : cudaSuccess);
            if (!refused) EQ(cudaGraphDestroy(g), cudaSuccess);
            cudaGetLastError();
        }
        EQ(cudaEventDestroy(done), cudaSuccess);
        EQ(cudaStreamDestroy(other), cudaSuccess);
    }

    /* capture on the legacy stream is refused */
    EQ(cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
    cudaGetLastError();
    EQ(cudaStreamDestroy(s), cudaSuccess);
    EQ(cudaFreeHost(pinned), cudaSuccess);
    EQ(cudaFree(src), cudaSuccess);
    free(pageable);
}

/* ------------------------------------------------------------------ faults and last error */

static void test_faults(void) {
    const size_t n = 64 * 1024;
    char *src, *dst;
    EQ(cudaMallocManaged((void **)&src, n, cudaMemAttachGlobal), cudaSuccess);
    EQ(cudaMallocHost((void **)&dst, n), cudaSuccess);
    memset(src, 9, n);
    uvmsim_reset();
    uvmsim_fail_nth("cudaMemcpyAsync", 2, cudaErrorInvalidValue);
    EQ(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    EQ(cudaStreamSynchronize(0), cudaSuccess);
    EQ(cudaPeekAtLastError(), cudaSuccess);
    memset(dst, 0, n);
    EQ(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, 0), cudaErrorInvalidValue);
    EQ(cudaStreamSynchronize(0), cudaSuccess);
    CHECK(dst[0] == 0); /* the failing call did nothing */
    EQ(uvmsim_copies(), 1);
    EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);
    EQ(cudaGetLastError(), cudaErrorInvalidValue);
    EQ(cudaGetLastError(), cudaSuccess);
    EQ(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    EQ(uvmsim_calls("cudaMemcpyAsync"), 3);
    /* driver names fault independently */
    uvmsim_fail_nth("cuMemcpyDtoH_v2", 1, CUDA_ERROR_OUT_OF_MEMORY);
    EQ(cuMemcpyDtoH(dst, (CUdeviceptr)src, n), CUDA_ERROR_OUT_OF_MEMORY);
    EQ(cuMemcpyDtoH(dst, (CUdeviceptr)src, n), CUDA_SUCCESS);
    EQ(uvmsim_calls("cuMemcpyDtoH_v2"), 2);
    /* reset clears pending faults */
    uvmsim_fail_nth("cudaMemset", 1, cudaErrorUnknown);
    uvmsim_reset();
    EQ(cudaMemset(src, 0, n), cudaSuccess);
    EQ(cudaFreeHost(dst), cudaSuccess);
    EQ(cudaFree(src), cudaSuccess);
}

/* ------------------------------------------------------------------ pointer attributes */

static void test_pointers(void) {
    const size_t n = 6 * MIB;
    char *m, *d, *h;
    char *plain = malloc(4096);
    EQ(cudaMallocManaged((void **)&m, n, cudaMemAttachGlobal), cudaSuccess);
    EQ(cudaMalloc((void **)&d, MIB), cudaSuccess);
    EQ(cudaMallocHost((void **)&h, MIB), cudaSuccess);
    struct cudaPointerAttributes a;
    EQ(cudaPointerGetAttributes(&a, m), cudaSuccess);
    EQ(a.type, cudaMemoryTypeManaged);
    EQ(a.device, 0);
    EQ(cudaPointerGetAttributes(&a, m + n - 1), cudaSuccess);
    EQ(a.type, cudaMemoryTypeManaged);
    EQ(cudaPointerGetAttributes(&a, d + 100), cudaSuccess);
    EQ(a.type, cudaMemoryTypeDevice);
    CHECK(a.hostPointer == NULL);
    EQ(cudaPointerGetAttributes(&a, h), cudaSuccess);
    EQ(a.type, cudaMemoryTypeHost);
    EQ(cudaPointerGetAttributes(&a, plain), cudaSuccess);
    EQ(a.type, cudaMemoryTypeUnregistered);
    EQ(cudaGetLastError(), cudaSuccess);

    unsigned int managed = 7, mt = 7;
    CUdeviceptr start = 0;
    size_t size = 0;
    int ord = 7;
    CUcontext ctx = NULL;
    CUpointer_attribute at[6] = { CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, CU_POINTER_ATTRIBUTE_CONTEXT,
                                  CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE };
    void *data[6] = { &managed, &mt, &ord, &ctx, &start, &size };
    EQ(cuPointerGetAttributes(4, at, data, (CUdeviceptr)(m + 3 * MIB + 5)), CUDA_SUCCESS);
    EQ(managed, 1);
    EQ(mt, CU_MEMORYTYPE_DEVICE);
    EQ(ord, 0);
    CHECK(ctx != NULL);
    /* UVMSIM_MANAGED_RANGE: exact answers, none reads 0, refuse fails the whole query */
    EQ(cuPointerGetAttributes(6, at, data, (CUdeviceptr)(m + 3 * MIB + 5)),
       !strcmp(g_range, "refuse") ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
    EQ(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, (CUdeviceptr)m),
       !strcmp(g_range, "refuse") ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS);
    EQ(start, !strcmp(g_range, "exact") ? (CUdeviceptr)m : 0);
    EQ(size, !strcmp(g_range, "exact") ? n : 0);
    EQ(cuPointerGetAttributes(6, at, data, (CUdeviceptr)plain), CUDA_SUCCESS);
    EQ(managed, 0);
    EQ(mt, 0);
    EQ(start, 0);
    EQ(size, 0);
    CHECK(ctx == NULL);
    EQ(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)plain), CUDA_ERROR_INVALID_VALUE);
    EQ(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)(m + 1)), CUDA_SUCCESS);
    EQ(managed, 1);
    EQ(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, (CUdeviceptr)h), CUDA_SUCCESS);
    EQ(managed, 0);
    start = 0;
    size = 0;
    int exact = !strcmp(g_range, "exact");
    EQ(cuMemGetAddressRange((CUdeviceptr *)&start, &size, (CUdeviceptr)(m + n - 1)),
       exact ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
    EQ(start, exact ? (CUdeviceptr)m : 0);
    EQ(size, exact ? n : 0);
    EQ(cuMemGetAddressRange((CUdeviceptr *)&start, &size, (CUdeviceptr)(d + 5)), CUDA_SUCCESS);
    EQ(start, (CUdeviceptr)d);
    /* BUFFER_ID: one per allocation in both profiles */
    unsigned long long id0 = 0, id1 = 1, id2 = 2;
    EQ(cuPointerGetAttribute(&id0, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)m), CUDA_SUCCESS);
    EQ(cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)(m + n - 1)), CUDA_SUCCESS);
    EQ(cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)d), CUDA_SUCCESS);
    EQ(id0, id1);
    CHECK(id0 != id2 && id0 != 0);
    EQ(cuMemGetAddressRange((CUdeviceptr *)&start, &size, (CUdeviceptr)plain), CUDA_ERROR_NOT_FOUND);

    /* registered host memory is pinned */
    unsigned long long pin0 = uvmsim_pinned_bytes();
    EQ(cudaHostRegister(plain, 4096, cudaHostRegisterDefault), cudaSuccess);
    EQ(uvmsim_pinned_bytes(), pin0 + 4096);
    EQ(cudaPointerGetAttributes(&a, plain + 10), cudaSuccess);
    EQ(a.type, cudaMemoryTypeHost);
    EQ(cudaHostUnregister(plain), cudaSuccess);
    EQ(uvmsim_pinned_bytes(), pin0);

    /* hints */
    struct cudaMemLocation hostloc = { cudaMemLocationTypeHost, 0 }, dev0 = { cudaMemLocationTypeDevice, 0 };
    EQ(cudaMemAdvise(m, 4 * MIB, cudaMemAdviseSetPreferredLocation, hostloc), cudaSuccess);
    EQ(cudaMemAdvise(m, n, cudaMemAdviseSetAccessedBy, dev0), cudaSuccess);
    EQ(uvmsim_advice(m, CU_MEM_ADVISE_SET_PREFERRED_LOCATION), UVMSIM_LOC_HOST);
    EQ(uvmsim_advice(m + 4 * MIB, CU_MEM_ADVISE_SET_PREFERRED_LOCATION), 0);
    EQ(uvmsim_advice(m + 5 * MIB, CU_MEM_ADVISE_SET_ACCESSED_BY), 1);
    EQ(uvmsim_advice(m, CU_MEM_ADVISE_SET_READ_MOSTLY), 0);
    EQ(uvmsim_advice(plain, CU_MEM_ADVISE_SET_READ_MOSTLY), -1);
    int pl = 0;
    EQ(cudaMemRangeGetAttribute(&pl, sizeof pl, cudaMemRangeAttributePreferredLocation, m, MIB), cudaSuccess);
    EQ(pl, cudaCpuDeviceId);
    /* advice is per 4 KiB page: unsetting the preference of 8 KiB (rounded outwards from a range
     * that is not page aligned) leaves its neighbours in the same 2 MiB block preferring the CPU */
    EQ(cudaMemAdvise(m + MIB + 4096 + 512, 4096, cudaMemAdviseUnsetPreferredLocation, hostloc), cudaSuccess);
    EQ(cudaMemRangeGetAttribute(&pl, sizeof pl, cudaMemRangeAttributePreferredLocation, m + MIB + 4096, 8192), cudaSuccess);
    EQ(pl, cudaInvalidDeviceId);
    EQ(cudaMemRangeGetAttribute(&pl, sizeof pl, cudaMemRangeAttributePreferredLocation, m + MIB, 4096), cudaSuccess);
    EQ(pl, cudaCpuDeviceId);
    EQ(cudaMemRangeGetAttribute(&pl, sizeof pl, cudaMemRangeAttributePreferredLocation, m + MIB + 3 * 4096, MIB), cudaSuccess);
    EQ(pl, cudaCpuDeviceId);
    EQ(cudaMemAdvise(m + MIB + 4096, 8192, cudaMemAdviseSetPreferredLocation, hostloc), cudaSuccess);
    uvmsim_reset();
    EQ(cudaMemPrefetchAsync(m + 2 * MIB, 2 * MIB, hostloc, 0, cudaStreamPerThread), cudaSuccess);
    EQ(cuMemPrefetchAsync((CUdeviceptr)m, MIB, (CUmemLocation){ CU_MEM_LOCATION_TYPE_DEVICE, 0 }, 0, NULL), CUDA_SUCCESS);
    EQ(cudaDeviceSynchronize(), cudaSuccess);
    struct uvmsim_prefetch log[4];
    EQ(uvmsim_prefetch_log(log, 4), 2);
    CHECK(log[0].ptr == m + 2 * MIB && log[0].count == 2 * MIB && log[0].loc_type == UVMSIM_LOC_HOST);
    CHECK(log[0].stream == (void *)cudaStreamPerThread);
    CHECK(log[1].loc_type == UVMSIM_LOC_DEVICE && log[1].loc_id == 0 && log[1].stream == NULL);
    EQ(cudaMemPrefetchAsync(plain, 4096, hostloc, 0, 0), cudaErrorInvalidValue);
    EQ(cudaMemPrefetchAsync(d, 4096, hostloc, 0, 0), cudaErrorInvalidValue);
    cudaGetLastError();

    EQ(cudaFree(m), cudaSuccess);
    EQ(cudaFree(d), cudaSuccess);
    EQ(cudaFreeHost(h), cudaSuccess);
    EQ(cudaFree(plain), cudaErrorInvalidValue);
    cudaGetLastError();
    free(plain);
}

/* ------------------------------------------------------------------ entry points */

static void test_proc_address(void) {
    void *fn = NULL, *want;
    CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    EQ(cuGetProcAddress("cuMemcpyDtoHAsync", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &st), CUDA_SUCCESS);
    EQ(st, CU_GET_PROC_ADDRESS_SUCCESS);
    want = dlsym(RTLD_DEFAULT, "cuMemcpyDtoHAsync_v2_ptsz");
    CHECK(want != NULL && fn == want);
    EQ(cuGetProcAddress("cuMemcpyDtoHAsync", &fn, 12000, CU_GET_PROC_ADDRESS_DEFAULT, NULL), CUDA_SUCCESS);
    CHECK(fn == dlsym(RTLD_DEFAULT, "cuMemcpyDtoHAsync_v2"));
    EQ(cuGetProcAddress("cuMemcpy", &fn, 12000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL), CUDA_SUCCESS);
    CHECK(fn == dlsym(RTLD_DEFAULT, "cuMemcpy_ptds"));
    EQ(cuGetProcAddress("cuMemPrefetchAsync", &fn, 12000, 0, NULL), CUDA_SUCCESS);
    CHECK(fn == dlsym(RTLD_DEFAULT, "cuMemPrefetchAsync"));
    EQ(cuGetProcAddress("cuMemPrefetchAsync", &fn, 13000, 0, NULL), CUDA_SUCCESS);
    CHECK(fn == dlsym(RTLD_DEFAULT, "cuMemPrefetchAsync_v2"));
    EQ(cuGetProcAddress("cuNoSuchThing", &fn, 13000, 0, &st), CUDA_ERROR_NOT_FOUND);
    EQ(st, CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND);
    CHECK(fn == NULL);
    EQ(cuGetProcAddress("cuLaunchHostFunc", &fn, 9000, 0, &st), CUDA_ERROR_NOT_FOUND);
    EQ(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
    /* the legacy 4-argument ABI */
    CUresult (*legacy)(const char *, void **, int, cuuint64_t) =
        (CUresult(*)(const char *, void **, int, cuuint64_t))dlsym(RTLD_DEFAULT, "cuGetProcAddress");
    CHECK(legacy != NULL);
    if (legacy) {
        EQ(legacy("cuMemcpyDtoH", &fn, 3020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM), CUDA_SUCCESS);
        CHECK(fn == dlsym(RTLD_DEFAULT, "cuMemcpyDtoH_v2_ptds"));
    }
    /* the runtime's own entry-point query */
    enum cudaDriverEntryPointQueryResult q;
    EQ(cudaGetDriverEntryPointByVersion("cuMemcpyAsync", &fn, 12000, cudaEnablePerThreadDefaultStream, &q), cudaSuccess);
    EQ(q, cudaDriverEntryPointSuccess);
    CHECK(fn == dlsym(RTLD_DEFAULT, "cuMemcpyAsync_ptsz"));
}

/* ------------------------------------------------------------------ the CUDA 12 flavour */

static void test_cudart12(void) {
    void *h = dlopen(UVMSIM_CUDART12_PATH, RTLD_NOW | RTLD_LOCAL);
    CHECK(h != NULL);
    if (!h) return;
    cudaError_t (*ver)(int *) = (cudaError_t(*)(int *))dlvsym(h, "cudaRuntimeGetVersion", "libcudart.so.12");
    cudaError_t (*prefetch)(const void *, size_t, int, cudaStream_t) =
        (cudaError_t(*)(const void *, size_t, int, cudaStream_t))dlvsym(h, "cudaMemPrefetchAsync", "libcudart.so.12");
    cudaError_t (*sync)(void) = (cudaError_t(*)(void))dlvsym(h, "cudaDeviceSynchronize", "libcudart.so.12");
    CHECK(ver && prefetch && sync);
    if (!ver || !prefetch || !sync) return;
    int v = 0;
    EQ(ver(&v), cudaSuccess);
    EQ(v, 12080);
    char *m;
    EQ(cudaMallocManaged((void **)&m, MIB, cudaMemAttachGlobal), cudaSuccess);
    uvmsim_reset();
    EQ(prefetch(m, MIB, cudaCpuDeviceId, 0), cudaSuccess);
    EQ(sync(), cudaSuccess);
    struct uvmsim_prefetch log[1];
    EQ(uvmsim_prefetch_log(log, 1), 1);
    EQ(log[0].loc_type, UVMSIM_LOC_HOST);
    EQ(uvmsim_calls("cudaMemPrefetchAsync"), 1);
    EQ(uvmsim_calls("cuMemPrefetchAsync"), 0); /* the runtime's own driver calls are not counted */

    /* CUDA 12 layouts: cudaDeviceProp (1032 bytes, clockRate and friends still in it) and the
     * 24-byte cudaPointerAttributes; nothing written past either */
    cudaError_t (*props)(struct uvmsim_device_prop12 *, int) =
        (cudaError_t(*)(struct uvmsim_device_prop12 *, int))dlvsym(h, "cudaGetDeviceProperties_v2", "libcudart.so.12");
    cudaError_t (*attrs)(void *, const void *) = (cudaError_t(*)(void *, const void *))dlvsym(h, "cudaPointerGetAttributes", "libcudart.so.12");
    CHECK(props && attrs);
    if (props && attrs) {
        static unsigned char buf[sizeof(struct uvmsim_device_prop12) + 64];
        memset(buf, 0xA5, sizeof buf);
        struct uvmsim_device_prop12 *p = (struct uvmsim_device_prop12 *)buf;
        EQ(props(p, 0), cudaSuccess);
        EQ(p->major, 9);
        EQ(p->clockRate, 1980000);
        EQ(p->memoryClockRate, 3201000);
        EQ(p->maxThreadsPerMultiProcessor, 2048);
        EQ(p->multiProcessorCount, 132);
        EQ(p->cooperativeMultiDeviceLaunch, 1);
        EQ(p->unifiedFunctionPointers, 1);
        EQ(p->concurrentManagedAccess, 1);
        CHECK(all_bytes(buf + sizeof *p, 0xA5, 64));
        unsigned char pa[24 + 64];
        memset(pa, 0xA5, sizeof pa);
        EQ(attrs(pa, m), cudaSuccess);
        EQ(((struct cudaPointerAttributes *)pa)->type, cudaMemoryTypeManaged);
        CHECK(all_bytes(pa + 24, 0xA5, 64));
    }
    EQ(cudaFree(m), cudaSuccess);
}

/* ------------------------------------------------------------------ fork */

static void test_fork(void) {
    pid_t pid = fork();
    if (pid == 0) {
        void *p = NULL;
        /* CUDA state does not survive fork: calls fail instead of hanging */
        _exit(cudaMalloc(&p, 4096) == cudaErrorInitializationError ? 0 : 1);
    }
    int status = -1;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

/* Hosting an unmodified program: fat-binary registration is a no-op, launches fail clearly (and set
 * the last error, not stickily), unsimulated exports exist and fail with cudaErrorNotSupported,
 * graphs instantiate. */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaUnregisterFatBinary(void **h);
static void test_hosting(void) {
    void **h = __cudaRegisterFatBinary(NULL);
    CHECK(h != NULL);
    __cudaUnregisterFatBinary(h);
    cudaGetLastError();
    dim3 one = { 1, 1, 1 };
    EQ(cudaLaunchKernel((const void *)test_hosting, one, one, NULL, 0, 0), cudaErrorNotSupported);
    EQ(cudaGetLastError(), cudaErrorNotSupported);
    EQ(cudaGetLastError(), cudaSuccess);
    unsigned long long before = uvmsim_calls("cudaArrayGetInfo");
    EQ(cudaArrayGetInfo(NULL, NULL, NULL, NULL), cudaErrorNotSupported); /* a generated stub */
    EQ(uvmsim_calls("cudaArrayGetInfo"), before + 1);
    EQ(cudaGetLastError(), cudaErrorNotSupported);
    int lo = 1, hi = 1, can = 1;
    EQ(cudaDeviceGetStreamPriorityRange(&lo, &hi), cudaSuccess);
    CHECK(lo == 0 && hi < 0);
    EQ(cudaDeviceCanAccessPeer(&can, 0, 0), cudaSuccess);
    EQ(can, 0);
    cudaStream_t s;
    EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    void *d = NULL;
    EQ(cudaMalloc(&d, 4096), cudaSuccess);
    EQ(cudaStreamBeginCapture(s, cudaStreamCaptureModeRelaxed), cudaSuccess);
    EQ(cudaMemsetAsync(d, 1, 4096, s), cudaSuccess);
    cudaGraph_t g = NULL;
    EQ(cudaStreamEndCapture(s, &g), cudaSuccess);
    size_t n = 0;
    EQ(cudaGraphGetNodes(g, NULL, &n), cudaSuccess);
    EQ(n, 1);
    cudaGraphExec_t ge = NULL;
    EQ(cudaGraphInstantiateWithFlags(&ge, g, 0), cudaSuccess);
    EQ(cudaGraphLaunch(ge, s), cudaErrorNotSupported);
    cudaGetLastError();
    EQ(cudaGraphExecDestroy(ge), cudaSuccess);
    EQ(cudaGraphDestroy(g), cudaSuccess);
    EQ(cudaFree(d), cudaSuccess);
    EQ(cudaStreamDestroy(s), cudaSuccess);
}

/* ------------------------------------------------------------------ fidelity switches (strict profile) */

struct gate { pthread_mutex_t mu; pthread_cond_t cv; int open; };
static void gate_fn(void *arg) {
    struct gate *g = arg;
    pthread_mutex_lock(&g->mu);
    while (!g->open) pthread_cond_wait(&g->cv, &g->mu);
    pthread_mutex_unlock(&g->mu);
}
struct filler { cudaStream_t s; char *dev; atomic_int queued; };
static void *fill_thread(void *arg) {
    struct filler *f = arg;
    for (int i = 0; i < 70; i++) {
        if (cudaMemsetAsync(f->dev, i, 4096, f->s) != cudaSuccess) break;
        atomic_fetch_add(&f->queued, 1);
    }
    return NULL;
}

static void test_fidelity(void) {
    uvmsim_reset();
    /* capacity: with 64 ops queued or running, the next enqueue blocks until one completes */
    cudaStream_t s;
    EQ(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    char *dev;
    EQ(cudaMalloc((void **)&dev, MIB), cudaSuccess);
    struct gate g = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0 };
    struct filler f = { s, dev, 0 };
    EQ(cudaLaunchHostFunc(s, gate_fn, &g), cudaSuccess);
    pthread_t th;
    pthread_create(&th, NULL, fill_thread, &f);
    usleep(200000);
    EQ(atomic_load(&f.queued), g_strict ? 63 : 70);
    pthread_mutex_lock(&g.mu);
    g.open = 1;
    pthread_cond_broadcast(&g.cv);
    pthread_mutex_unlock(&g.mu);
    pthread_join(th, NULL);
    EQ(atomic_load(&f.queued), 70);
    EQ(cudaStreamSynchronize(s), cudaSuccess);
    EQ(uvmsim_stat("max_outstanding"), g_strict ? 64 : 71);
    EQ(uvmsim_stat("host_functions"), 1);

    /* host functions: strict, one thread runs them all, so a slow one delays another stream's */
    cudaStream_t other;
    EQ(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking), cudaSuccess);
    struct stamp st = { 0 };
    double t0 = now_ms();
    EQ(cudaLaunchHostFunc(s, sleeper, NULL), cudaSuccess);
    usleep(20000); /* the sleeper is running */
    EQ(cudaLaunchHostFunc(other, stamp_fn, &st), cudaSuccess);
    EQ(cudaStreamSynchronize(other), cudaSuccess);
    CHECK(g_strict ? st.t - t0 >= 95 : st.t - t0 < 90);
    EQ(cudaStreamSynchronize(s), cudaSuccess);
    EQ(cudaStreamDestroy(other), cudaSuccess);

    /* residency: blocks start on the host; prefetch moves them; a copy-engine read without an
     * accessed-by mapping moves them to the device; a CPU touch brings one back */
    const size_t n = 6 * MIB;
    char *m, *pin;
    EQ(cudaMallocManaged((void **)&m, n, cudaMemAttachGlobal), cudaSuccess);
    EQ(cudaMallocHost((void **)&pin, n), cudaSuccess);
    memset(m, 0x3C, n);
    EQ(uvmsim_residency(m), UVMSIM_LOC_HOST);
    EQ(uvmsim_residency(pin), -1);
    uvmsim_reset();
    CUmemLocation gpu = { .type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0 };
    const char *cma_env = getenv("UVMSIM_CMA");
    int no_cma = cma_env && !strcmp(cma_env, "0");
    if (!no_cma) {
    EQ(cuMemPrefetchAsync_v2((CUdeviceptr)m, 4 * MIB, gpu, 0, (CUstream)s), CUDA_SUCCESS);
    EQ(cudaStreamSynchronize(s), cudaSuccess);
    EQ(uvmsim_stat("migrations_to_device"), g_strict ? 2 : 0);
    EQ(uvmsim_residency(m + 2 * MIB), g_strict ? UVMSIM_LOC_DEVICE : UVMSIM_LOC_HOST);
    CHECK(all_bytes(m + MIB, 0x3C, MIB)); /* a CPU read: block 0 comes back */
    EQ(uvmsim_stat("migrations_to_host"), g_strict ? 1 : 0);
    EQ(uvmsim_residency(m), UVMSIM_LOC_HOST);
    EQ(uvmsim_residency(m + 2 * MIB), g_strict ? UVMSIM_LOC_DEVICE : UVMSIM_LOC_HOST);
    EQ(cudaMemcpy(pin, m + 4 * MIB, 2 * MIB, cudaMemcpyDeviceToHost), cudaSuccess); /* block 2: no mapping */
    EQ(uvmsim_stat("migrations_to_device"), g_strict ? 3 : 0);
    EQ(cuMemAdvise_v2((CUdeviceptr)m, n, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu), CUDA_SUCCESS);
    EQ(cudaMemcpy(pin, m, MIB, cudaMemcpyDeviceToHost), cudaSuccess); /* mapped: read in place */
    EQ(uvmsim_stat("migrations_to_device"), g_strict ? 3 : 0);
    CHECK(all_bytes(pin, 0x3C, MIB));
    CHECK(all_bytes(m, 0x3C, n)); /* everything back on the host, bytes intact */
    EQ(uvmsim_residency(m + 4 * MIB), UVMSIM_LOC_HOST);
    }

    /* device access: pinned and managed are reachable; pageable is an illegal address, sticky */
    char *plain = malloc(4096);
    EQ(uvmsim_device_access(pin, n), CUDA_SUCCESS);
    EQ(uvmsim_device_access(m, n), CUDA_SUCCESS);
    EQ(uvmsim_device_access(plain, 4096), CUDA_ERROR_ILLEGAL_ADDRESS);
    EQ(cudaStreamSynchronize(s), cudaErrorIllegalAddress);
    EQ(cuStreamSynchronize((CUstream)s), CUDA_ERROR_ILLEGAL_ADDRESS);
    EQ(uvmsim_stat("sticky_error"), CUDA_ERROR_ILLEGAL_ADDRESS);
    uvmsim_reset();
    cudaGetLastError();
    EQ(cudaStreamSynchronize(s), cudaSuccess);

    /* concurrent managed access (run with UVMSIM_CMA=0 too) */
    int cma = -1;
    EQ(cudaDeviceGetAttribute(&cma, cudaDevAttrConcurrentManagedAccess, 0), cudaSuccess);
    EQ(cma, !no_cma);
    if (!cma) {
        EQ(cuMemPrefetchAsync_v2((CUdeviceptr)m, MIB, gpu, 0, (CUstream)s), CUDA_ERROR_INVALID_DEVICE);
        uvmsim_set_op_delay_us(50000);
        EQ(cudaMemsetAsync(dev, 1, 4096, s), cudaSuccess); /* device work on another allocation */
        CHECK(m[5] == 0x3C);                                  /* CPU touch meanwhile: a violation */
        EQ(cudaStreamSynchronize(s), cudaSuccess);
        uvmsim_set_op_delay_us(0);
        EQ(uvmsim_stat("cma_violations"), 1);
        m[6] = 0x3C; /* idle device: fine */
        EQ(uvmsim_stat("cma_violations"), 1);
    }
    cudaGetLastError();
    free(plain);
    EQ(cudaFree(m), cudaSuccess);
    EQ(cudaFreeHost(pin), cudaSuccess);
    EQ(cudaFree(dev), cudaSuccess);
    EQ(cudaStreamDestroy(s), cudaSuccess);
}

/* cudaDeviceReset: every allocation and registration of the context is released. */
static void test_reset(void) {
    char *h = NULL, *m = NULL;
    static char reg[8192] __attribute__((aligned(4096)));
    EQ(cudaMallocHost((void **)&h, 4096), cudaSuccess);
    EQ(cudaMallocManaged((void **)&m, 4096, cudaMemAttachGlobal), cudaSuccess);
    EQ(cudaHostRegister(reg, sizeof reg, cudaHostRegisterDefault), cudaSuccess);
    CHECK(uvmsim_pinned_bytes() > 0);
    EQ(cudaDeviceReset(), cudaSuccess);
    EQ(uvmsim_pinned_bytes(), 0);
    struct cudaPointerAttributes a;
    EQ(cudaPointerGetAttributes(&a, m), cudaSuccess);
    EQ(a.type, cudaMemoryTypeUnregistered);
    EQ(cudaFreeHost(h), cudaErrorInvalidValue);
    cudaGetLastError();
    EQ(cudaHostRegister(reg, sizeof reg, cudaHostRegisterDefault), cudaSuccess); /* no longer registered */
    EQ(cudaHostUnregister(reg), cudaSuccess);
}

int main(void) {
    const char *profile = getenv("UVMSIM_PROFILE");
    g_strict = !(profile && !strcmp(profile, "lenient"));
    const char *range = getenv("UVMSIM_MANAGED_RANGE");
    g_range = range && *range ? range : g_strict ? "refuse" : "exact";
    test_fidelity();
    const char *cma_env = getenv("UVMSIM_CMA");
    if (cma_env && !strcmp(cma_env, "0")) /* the rest assumes concurrent managed access */
        goto done;
    test_context();
    test_async_copy();
    test_streams();
    test_capture();
    test_faults();
    test_pointers();
    test_proc_address();
    test_properties();
    test_nvml();
    test_cudart12();
    test_hosting();
    test_fork();
    test_reset(); /* last: it releases everything */
done:
    if (g_fail) {
        fprintf(stderr, "sim_selftest: %d check(s) failed\n", g_fail);
        return 1;
    }
    printf("sim_selftest: all checks passed\n");
    return 0;
}
