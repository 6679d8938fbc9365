/* sim_devices_selftest.c: the simulator's devices (UVMSIM_DEVICES): ordinals and their count from the
 * variable, the current device per thread, properties per ordinal, per-device memory, streams, legacy
 * streams, synchronization and events, the context stack, and peer queries answered as an NVLink node.
 * argv[1]: the device count the environment promises (CTest runs it with the default and with 3). */
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "sim_selftest_check.h"
#include "uvmsim.h"

#define MIB ((size_t)1 << 20)

static void *other_thread(void *arg) {
    int *d = arg;
    *d = -1;
    cudaGetDevice(d); /* a new thread starts on device 0 whatever another thread set */
    return NULL;
}

/* A host function that holds its stream until released: device work that stays queued however
 * loaded the machine is. */
static atomic_int g_gate;
static int n_devices;
static void CUDART_CB hold(void *arg) {
    (void)arg;
    while (!atomic_load(&g_gate)) usleep(1000);
}

static void test_ordinals(int n) {
    int count = 0;
    EQ(cudaGetDeviceCount(&count), cudaSuccess);
    EQ(count, n);
    EQ(cuDeviceGetCount(&count), CUDA_SUCCESS);
    EQ(count, n);
    CUdevice d = -1;
    EQ(cuDeviceGet(&d, n - 1), CUDA_SUCCESS);
    EQ(d, n - 1);
    EQ(cuDeviceGet(&d, n), CUDA_ERROR_INVALID_DEVICE);
    EQ(cudaSetDevice(n), cudaErrorInvalidDevice);
    EQ(cudaGetLastError(), cudaErrorInvalidDevice);
    EQ(cudaSetDevice(-1), cudaErrorInvalidDevice);
    struct cudaDeviceProp p0, p1;
    EQ(cudaGetDeviceProperties(&p0, n), cudaErrorInvalidDevice);
    int v = 0;
    EQ(cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, n), cudaErrorInvalidDevice);
    EQ(cudaGetDeviceProperties(&p0, 0), cudaSuccess);
    EQ(cudaGetDeviceProperties(&p1, n - 1), cudaSuccess);
    EQ(p0.multiProcessorCount, p1.multiProcessorCount);
    if (n > 1) {
        CHECK(p0.pciBusID != p1.pciBusID);
        CHECK(memcmp(p0.uuid.bytes, p1.uuid.bytes, sizeof p0.uuid.bytes) != 0);
        char a[32], b[32];
        EQ(cudaDeviceGetPCIBusId(a, sizeof a, 0), cudaSuccess);
        EQ(cudaDeviceGetPCIBusId(b, sizeof b, 1), cudaSuccess);
        CHECK(strcmp(a, b) != 0);
    }
    int cur = -1;
    EQ(cudaSetDevice(n - 1), cudaSuccess);
    EQ(cudaGetDevice(&cur), cudaSuccess);
    EQ(cur, n - 1);
    CUdevice cd = -1;
    EQ(cuCtxGetDevice(&cd), CUDA_SUCCESS);
    EQ(cd, n - 1);
    pthread_t th;
    int theirs = -2;
    pthread_create(&th, NULL, other_thread, &theirs);
    pthread_join(th, NULL);
    EQ(theirs, 0);
    EQ(cudaGetDevice(&cur), cudaSuccess);
    EQ(cur, n - 1);
    EQ(cudaSetDevice(0), cudaSuccess);
}

/* Two devices at least: streams, events, memory and synchronization belong to one device each. */
static void test_per_device(void) {
    const size_t n = 8 * MIB;
    size_t free0 = 0, free1 = 0, f = 0, total = 0;
    EQ(cudaSetDevice(1), cudaSuccess);
    EQ(cudaMemGetInfo(&free1, &total), cudaSuccess);
    char *dev1 = NULL, *host = NULL;
    EQ(cudaMalloc((void **)&dev1, 64 * MIB), cudaSuccess);
    EQ(cudaMemGetInfo(&f, &total), cudaSuccess);
    EQ(free1 - f, 64 * MIB); /* device 1's memory, not device 0's */
    CUpointer_attribute at = CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL;
    int ord = -1;
    void *data[1] = { &ord };
    EQ(cuPointerGetAttributes(1, &at, data, (CUdeviceptr)(uintptr_t)dev1), CUDA_SUCCESS);
    EQ(ord, 1);
    cudaStream_t s1;
    EQ(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    int sd = -1;
    EQ(cudaStreamGetDevice(s1, &sd), cudaSuccess);
    EQ(sd, 1);
    cudaEvent_t e1;
    EQ(cudaEventCreateWithFlags(&e1, cudaEventDisableTiming), cudaSuccess);
    EQ(cudaHostAlloc((void **)&host, n, cudaHostAllocDefault), cudaSuccess);

    EQ(cudaSetDevice(0), cudaSuccess);
    EQ(cudaMemGetInfo(&free0, &total), cudaSuccess);
    EQ(free0, free1); /* device 0 untouched by device 1's allocation */
    CUcontext c1 = NULL, c0 = NULL, cur = NULL;
    EQ(cuStreamGetCtx((CUstream)s1, &c1), CUDA_SUCCESS);
    EQ(cuCtxGetCurrent(&c0), CUDA_SUCCESS);
    CHECK(c1 && c0 && c1 != c0);
    /* the context stack: push device 1's, pop back to device 0's */
    EQ(cuCtxPushCurrent(c1), CUDA_SUCCESS);
    CUdevice cd = -1;
    EQ(cuCtxGetDevice(&cd), CUDA_SUCCESS);
    EQ(cd, 1);
    EQ(cuCtxPopCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == c1);
    EQ(cuCtxGetCurrent(&cur), CUDA_SUCCESS);
    CHECK(cur == c0);

    /* An event of device 0 cannot be recorded on device 1's stream (Programming Guide, "Stream and
     * Event Behavior"); device 1's event can, from here; waits across devices are allowed. */
    cudaEvent_t e0;
    EQ(cudaEventCreateWithFlags(&e0, cudaEventDisableTiming), cudaSuccess);
    EQ(cudaEventRecord(e0, s1), cudaErrorInvalidResourceHandle);
    EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
    EQ(cudaEventRecord(e1, s1), cudaSuccess);
    EQ(cudaStreamWaitEvent(0, e1, 0), cudaSuccess);

    /* Work held on device 1's stream: device 0's synchronize and legacy stream do not wait for it;
     * device 1's do. */
    atomic_store(&g_gate, 0);
    EQ(cudaLaunchHostFunc(s1, hold, NULL), cudaSuccess);
    EQ(cudaMemcpyAsync(host, dev1, n, cudaMemcpyDeviceToHost, s1), cudaSuccess);
    EQ(cudaDeviceSynchronize(), cudaSuccess); /* device 0's: returns with device 1's work held */
    EQ(cudaStreamQuery(0), cudaSuccess);
    EQ(cudaStreamQuery(s1), cudaErrorNotReady);
    atomic_store(&g_gate, 1);
    EQ(cudaSetDevice(1), cudaSuccess);
    EQ(cudaDeviceSynchronize(), cudaSuccess);
    EQ(cudaStreamQuery(s1), cudaSuccess);

    /* device 1's legacy stream is its own: work held there does not make device 0's busy */
    atomic_store(&g_gate, 0);
    EQ(cudaLaunchHostFunc(0, hold, NULL), cudaSuccess);
    EQ(cudaSetDevice(0), cudaSuccess);
    EQ(cudaStreamQuery(0), cudaSuccess);
    EQ(cudaSetDevice(1), cudaSuccess);
    EQ(cudaStreamQuery(0), cudaErrorNotReady);
    atomic_store(&g_gate, 1);
    EQ(cudaStreamSynchronize(0), cudaSuccess);

    /* managed memory: accessed-by advice and residency per device */
    char *m = NULL;
    EQ(cudaMallocManaged((void **)&m, 4 * MIB, cudaMemAttachGlobal), cudaSuccess);
    CUmemLocation l1 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 1};
    EQ(cuMemAdvise_v2((CUdeviceptr)(uintptr_t)m, 4 * MIB, CU_MEM_ADVISE_SET_ACCESSED_BY, l1), CUDA_SUCCESS);
    int acc[4] = { 9, 9, 9, 9 };
    EQ(cudaMemRangeGetAttribute(acc, sizeof acc, cudaMemRangeAttributeAccessedBy, m, 4 * MIB), cudaSuccess);
    EQ(acc[0], 1);
    EQ(acc[1], -2); /* cudaInvalidDeviceId */
    struct cudaMemLocation on1 = {.type = cudaMemLocationTypeDevice, .id = 1}, beyond = on1;
    beyond.id = n_devices;
    EQ(cudaMemPrefetchAsync(m, 4 * MIB, on1, 0, s1), cudaSuccess);
    EQ(cudaStreamSynchronize(s1), cudaSuccess);
    EQ(uvmsim_residency(m), UVMSIM_LOC_DEVICE);
    EQ(cudaMemPrefetchAsync(m, 4 * MIB, beyond, 0, s1), cudaErrorInvalidDevice);
    EQ(cudaGetLastError(), cudaErrorInvalidDevice);
    EQ(cudaFree(m), cudaSuccess);

    EQ(cudaEventDestroy(e1), cudaSuccess);
    EQ(cudaStreamDestroy(s1), cudaSuccess);
    EQ(cudaFree(dev1), cudaSuccess);
    EQ(cudaFreeHost(host), cudaSuccess);
    EQ(cudaSetDevice(0), cudaSuccess);
    EQ(cudaEventDestroy(e0), cudaSuccess);
}

/* Peers as on an 8-GPU NVLink node (sim_peer.c): every other device, never itself. */
static void test_peers(int n) {
    int can = -1;
    EQ(cudaDeviceCanAccessPeer(&can, 0, 0), cudaSuccess);
    EQ(can, 0);
    EQ(cudaDeviceCanAccessPeer(&can, 0, n), cudaErrorInvalidDevice);
    EQ(cuDeviceCanAccessPeer(&can, n, 0), CUDA_ERROR_INVALID_DEVICE);
    int v = -1;
    EQ(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 0, 0), cudaErrorInvalidDevice);
    EQ(cudaSetDevice(0), cudaSuccess);
    EQ(cudaDeviceEnablePeerAccess(0, 0), cudaErrorInvalidDevice);
    if (n < 2) return;
    EQ(cudaDeviceCanAccessPeer(&can, 0, n - 1), cudaSuccess);
    EQ(can, 1);
    EQ(cuDeviceCanAccessPeer(&can, n - 1, 0), CUDA_SUCCESS);
    EQ(can, 1);
    EQ(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrAccessSupported, 0, 1), cudaSuccess);
    EQ(v, 1);
    EQ(cudaDeviceGetP2PAttribute(&v, cudaDevP2PAttrNativeAtomicSupported, 1, 0), cudaSuccess);
    EQ(v, 1);
    EQ(cudaDeviceDisablePeerAccess(1), cudaErrorPeerAccessNotEnabled);
    EQ(cudaDeviceEnablePeerAccess(1, 1), cudaErrorInvalidValue);
    EQ(cudaDeviceEnablePeerAccess(1, 0), cudaSuccess);
    EQ(cudaDeviceEnablePeerAccess(1, 0), cudaErrorPeerAccessAlreadyEnabled);
    EQ(cudaDeviceDisablePeerAccess(1), cudaSuccess);
    EQ(cudaGetLastError(), cudaErrorPeerAccessAlreadyEnabled);
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 8;
    n_devices = n;
    test_ordinals(n);
    if (n > 1) test_per_device();
    test_peers(n);
    if (g_fail) {
        fprintf(stderr, "sim_devices_selftest: %d check(s) failed\n", g_fail);
        return 1;
    }
    printf("sim_devices_selftest: all checks passed (%d devices)\n", n);
    return 0;
}
