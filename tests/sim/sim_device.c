/* sim_device.c: the simulated devices (UVMSIM_DEVICES of them) and their primary contexts: cuInit,
 * device queries and attributes per ordinal, primary-context retain/release, the current context per
 * thread (set, push, pop), cuCtxSynchronize of the current device, error strings. Peers: sim_peer.c. */
#include <stdio.h>

#include "sim_internal.h"

static int g_primary_refs[SIM_MAX_DEVICES];
#define BAD_DEV(d) (!sim_valid_dev(d))

/* ------------------------------------------------------------------ device */

CUresult CUDAAPI cuInit(unsigned int flags) { ENTER("cuInit"); return flags ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int *v) { ENTER("cuDriverGetVersion"); if (!v) return CUDA_ERROR_INVALID_VALUE; *v = SIM_DRIVER_VERSION; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGet(CUdevice *d, int ord) { ENTER("cuDeviceGet"); if (!d) return CUDA_ERROR_INVALID_VALUE; if (BAD_DEV(ord)) return CUDA_ERROR_INVALID_DEVICE; *d = ord; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetCount(int *n) { ENTER("cuDeviceGetCount"); if (!n) return CUDA_ERROR_INVALID_VALUE; *n = sim_sw.devices; return CUDA_SUCCESS; }
CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice d) {
    ENTER("cuDeviceGetName");
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (BAD_DEV(d)) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", "uvmchunk simulated GPU");
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceTotalMem_v2(size_t *b, CUdevice d) {
    ENTER("cuDeviceTotalMem_v2");
    if (!b) return CUDA_ERROR_INVALID_VALUE;
    if (BAD_DEV(d)) return CUDA_ERROR_INVALID_DEVICE;
    *b = (size_t)16 << 30;
    return CUDA_SUCCESS;
}
/* Every attribute real code sizes grids or divides with answers like one H200 (Hopper, compute
 * capability 9.0, 132 multiprocessors): the per-multiprocessor and per-block limits are those of the
 * CUDA C++ Programming Guide's table "Technical Specifications per Compute Capability" for 9.0
 * (2048 threads and 32 blocks per multiprocessor, 64 K registers per multiprocessor and per block,
 * 228 KB shared memory per multiprocessor, 227 KB per block opt-in, 48 KB by default, 1 KB
 * reserved per block, grid 2^31-1 x 65535 x 65535, block 1024 x 1024 x 64), 50 MiB of L2, HBM3e on
 * a 5120-bit bus. A zero here is a divisor in someone's launch code (PyTorch sizes its random
 * kernels' grids by maxThreadsPerMultiProcessor). Features that would lead a program into calls the
 * simulator does not model (virtual memory management, IPC handles, stream memory operations,
 * multicast) read 0. cudaGetDeviceProperties is filled from this same table (sim_runtime.c). */
static const struct { CUdevice_attribute a; int v; } g_attrs[] = {
    { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, 1024 }, { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, 1024 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, 64 },
    { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, 2147483647 }, { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, 65535 },
    { CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, 65535 },
    { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, 49152 },
    { CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY, 65536 },
    { CU_DEVICE_ATTRIBUTE_WARP_SIZE, 32 },
    { CU_DEVICE_ATTRIBUTE_MAX_PITCH, 2147483647 },
    { CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK, 65536 },
    { CU_DEVICE_ATTRIBUTE_CLOCK_RATE, 1980000 },          /* kHz */
    { CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT, 512 },
    { CU_DEVICE_ATTRIBUTE_GPU_OVERLAP, 1 },
    { CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132 },
    { CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT, 0 },
    { CU_DEVICE_ATTRIBUTE_INTEGRATED, 0 },
    { CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY, 1 },
    { CU_DEVICE_ATTRIBUTE_COMPUTE_MODE, 0 },              /* CU_COMPUTEMODE_DEFAULT */
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_WIDTH, 131072 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_WIDTH, 131072 }, { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_HEIGHT, 65536 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH, 16384 }, { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT, 16384 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH, 16384 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_WIDTH, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_HEIGHT, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LAYERED_LAYERS, 2048 },
    { CU_DEVICE_ATTRIBUTE_SURFACE_ALIGNMENT, 512 },
    { CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS, 1 },
    { CU_DEVICE_ATTRIBUTE_ECC_ENABLED, 1 },
    { CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, 0 },
    { CU_DEVICE_ATTRIBUTE_TCC_DRIVER, 0 },
    { CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, 3201000 },   /* kHz */
    { CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, 5120 },
    { CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, 50 << 20 },
    { CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, 2048 },
    { CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT, 2 },
    { CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_WIDTH, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LAYERED_LAYERS, 2048 },
    { CU_DEVICE_ATTRIBUTE_CAN_TEX2D_GATHER, 1 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_WIDTH, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_GATHER_HEIGHT, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_WIDTH_ALTERNATE, 8192 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_HEIGHT_ALTERNATE, 8192 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE3D_DEPTH_ALTERNATE, 32768 },
    { CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, 0 },
    { CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT, 32 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_WIDTH, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_WIDTH, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURECUBEMAP_LAYERED_LAYERS, 2046 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_WIDTH, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_WIDTH, 131072 }, { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_HEIGHT, 65536 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_WIDTH, 16384 }, { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_HEIGHT, 16384 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE3D_DEPTH, 16384 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_WIDTH, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE1D_LAYERED_LAYERS, 2048 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_WIDTH, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_HEIGHT, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACE2D_LAYERED_LAYERS, 2048 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_WIDTH, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_WIDTH, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_SURFACECUBEMAP_LAYERED_LAYERS, 2046 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_LINEAR_WIDTH, 268435456 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_WIDTH, 131072 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_HEIGHT, 65000 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_LINEAR_PITCH, 2097120 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_WIDTH, 32768 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE2D_MIPMAPPED_HEIGHT, 32768 },
    { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9 }, { CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0 },
    { CU_DEVICE_ATTRIBUTE_MAXIMUM_TEXTURE1D_MIPMAPPED_WIDTH, 32768 },
    { CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED, 1 }, { CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, 233472 },
    { CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR, 65536 },
    { CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY, 1 },
    { CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD, 0 }, { CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD_GROUP_ID, 0 },
    { CU_DEVICE_ATTRIBUTE_HOST_NATIVE_ATOMIC_SUPPORTED, 0 },
    { CU_DEVICE_ATTRIBUTE_SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO, 2 },
    { CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS, 0 },
    /* CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: the UVMSIM_CMA switch, below */
    { CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1 },
    { CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH, 1 }, { CU_DEVICE_ATTRIBUTE_COOPERATIVE_MULTI_DEVICE_LAUNCH, 1 },
    { CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, 232448 },
    { CU_DEVICE_ATTRIBUTE_CAN_FLUSH_REMOTE_WRITES, 0 },
    { CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES, 0 },
    { CU_DEVICE_ATTRIBUTE_DIRECT_MANAGED_MEM_ACCESS_FROM_HOST, 0 },
    { CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0 },
    { CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR, 32 },
    { CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, 32505856 },
    { CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE, 134213632 },
    { CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK, 1024 },
    { CU_DEVICE_ATTRIBUTE_SPARSE_CUDA_ARRAY_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_TIMELINE_SEMAPHORE_INTEROP_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH, 1 },
    { CU_DEVICE_ATTRIBUTE_MEM_SYNC_DOMAIN_COUNT, 4 },
    { CU_DEVICE_ATTRIBUTE_TENSOR_MAP_ACCESS_SUPPORTED, 1 },
    { CU_DEVICE_ATTRIBUTE_UNIFIED_FUNCTION_POINTERS, 1 },
    { CU_DEVICE_ATTRIBUTE_NUMA_ID, -1 }, { CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID, -1 },
};

CUresult CUDAAPI cuDeviceGetAttribute(int *pi, CUdevice_attribute a, CUdevice d) {
    ENTER("cuDeviceGetAttribute");
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (BAD_DEV(d)) return CUDA_ERROR_INVALID_DEVICE;
    if ((int)a <= 0 || a >= CU_DEVICE_ATTRIBUTE_MAX) return CUDA_ERROR_INVALID_VALUE;
    int v = 0; /* every attribute not listed: a feature this device does not offer */
    if (a == CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS) v = sim_sw.cma;
    for (size_t i = 0; i < sizeof g_attrs / sizeof g_attrs[0]; i++)
        if (g_attrs[i].a == a) v = g_attrs[i].v;
    /* Each device on its own bus (0000:01:00.0, 0000:02:00.0, ...), as cudaDeviceGetPCIBusId and NVML
     * say: PyTorch and NCCL tell devices apart by it. */
    if (a == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID) v = d + 1;
    *pi = v;
    return CUDA_SUCCESS;
}
/* ------------------------------------------------------------------ context */

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *pc, CUdevice d) {
    ENTER("cuDevicePrimaryCtxRetain");
    if (!pc) return CUDA_ERROR_INVALID_VALUE;
    if (BAD_DEV(d)) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_mu);
    g_primary_refs[d]++;
    pthread_mutex_unlock(&sim_mu);
    *pc = (CUcontext)&sim_primary[d];
    return CUDA_SUCCESS;
}
static CUresult primary_release(CUdevice d) {
    if (BAD_DEV(d)) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_mu);
    if (g_primary_refs[d] > 0) g_primary_refs[d]--;
    pthread_mutex_unlock(&sim_mu);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease_v2(CUdevice d) { ENTER("cuDevicePrimaryCtxRelease_v2"); return primary_release(d); }
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice d) { ENTER("cuDevicePrimaryCtxRelease"); return primary_release(d); }
static CUresult primary_reset(CUdevice d) {
    if (BAD_DEV(d)) return CUDA_ERROR_INVALID_DEVICE;
    sim_memory_reset(d);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxReset_v2(CUdevice d) { ENTER("cuDevicePrimaryCtxReset_v2"); return primary_reset(d); }
CUresult CUDAAPI cuDevicePrimaryCtxReset(CUdevice d) { ENTER("cuDevicePrimaryCtxReset"); return primary_reset(d); }
CUresult CUDAAPI cuDevicePrimaryCtxGetState(CUdevice d, unsigned int *flags, int *active) {
    ENTER("cuDevicePrimaryCtxGetState");
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    if (BAD_DEV(d)) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_mu);
    *active = g_primary_refs[d] > 0;
    pthread_mutex_unlock(&sim_mu);
    *flags = 0;
    return CUDA_SUCCESS;
}

static int is_primary(CUcontext c) {
    struct sim_ctx *x = (struct sim_ctx *)c;
    return x >= sim_primary && x < sim_primary + sim_sw.devices;
}
CUresult CUDAAPI cuCtxGetCurrent(CUcontext *pc) { ENTER("cuCtxGetCurrent"); if (!pc) return CUDA_ERROR_INVALID_VALUE; *pc = sim_tl_ctx; return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxSetCurrent(CUcontext c) {
    ENTER("cuCtxSetCurrent");
    if (c && !is_primary(c)) return CUDA_ERROR_INVALID_CONTEXT;
    sim_tl_ctx = c;
    return CUDA_SUCCESS;
}
/* The thread's context stack (cuda.h cuCtxPushCurrent / cuCtxPopCurrent): its top is the current
 * context, which cuCtxSetCurrent replaces. */
#define CTX_STACK 32
static __thread CUcontext tl_stack[CTX_STACK];
static __thread int tl_depth;
static CUresult ctx_push(CUcontext c) {
    if (!c || !is_primary(c)) return CUDA_ERROR_INVALID_CONTEXT;
    if (tl_depth == CTX_STACK) return CUDA_ERROR_OUT_OF_MEMORY;
    tl_stack[tl_depth++] = sim_tl_ctx;
    sim_tl_ctx = c;
    return CUDA_SUCCESS;
}
static CUresult ctx_pop(CUcontext *pc) {
    if (!sim_tl_ctx) return CUDA_ERROR_INVALID_CONTEXT;
    if (pc) *pc = sim_tl_ctx;
    sim_tl_ctx = tl_depth ? tl_stack[--tl_depth] : NULL;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxPushCurrent_v2(CUcontext c) { ENTER("cuCtxPushCurrent_v2"); return ctx_push(c); }
CUresult CUDAAPI cuCtxPushCurrent(CUcontext c) { ENTER("cuCtxPushCurrent"); return ctx_push(c); }
CUresult CUDAAPI cuCtxPopCurrent_v2(CUcontext *pc) { ENTER("cuCtxPopCurrent_v2"); return ctx_pop(pc); }
CUresult CUDAAPI cuCtxPopCurrent(CUcontext *pc) { ENTER("cuCtxPopCurrent"); return ctx_pop(pc); }
CUresult CUDAAPI cuCtxGetDevice(CUdevice *d) { ENTER("cuCtxGetDevice"); NEED_CTX(); if (!d) return CUDA_ERROR_INVALID_VALUE; *d = sim_cur_dev(); return CUDA_SUCCESS; }
/* Waits for the current context's streams only (cuda.h cuCtxSynchronize: "until the device has
 * completed all preceding requested tasks" of the current context). */
CUresult CUDAAPI cuCtxSynchronize(void) {
    ENTER("cuCtxSynchronize");
    NEED_CTX();
    int dev = sim_cur_dev();
    pthread_mutex_lock(&sim_mu);
    if (sim_any_capture_locked()) {
        for (struct stream *t = sim_streams_all; t; t = t->all_next)
            if (t->cap_status != CAP_NONE) sim_invalidate_capture_locked(t->cap_id);
        pthread_mutex_unlock(&sim_mu);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    for (struct stream *t = sim_streams_all; t; t = t->all_next)
        if (t->dev == dev) sim_wait_stream_locked(t, t->enq_seq);
    pthread_mutex_unlock(&sim_mu);
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ error strings */

static const struct { CUresult code; const char *name, *str; } g_errs[] = {
    { CUDA_SUCCESS, "CUDA_SUCCESS", "no error" },
    { CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument" },
    { CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory" },
    { CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error" },
    { CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal" },
    { CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context" },
    { CUDA_ERROR_PEER_ACCESS_UNSUPPORTED, "CUDA_ERROR_PEER_ACCESS_UNSUPPORTED", "peer access is not supported between these two devices" },
    { CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled" },
    { CUDA_ERROR_PEER_ACCESS_NOT_ENABLED, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled" },
    { CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle" },
    { CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found" },
    { CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready" },
    { CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation cannot be performed in the present state" },
    { CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped" },
    { CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region" },
    { CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported" },
    { CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED", "operation not permitted when stream is capturing" },
    { CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED", "operation failed due to a previous error during capture" },
    { CUDA_ERROR_STREAM_CAPTURE_IMPLICIT, "CUDA_ERROR_STREAM_CAPTURE_IMPLICIT", "operation would make the legacy stream depend on a capturing blocking stream" },
    { CUDA_ERROR_CAPTURED_EVENT, "CUDA_ERROR_CAPTURED_EVENT", "operation not permitted on an event last recorded in a capturing stream" },
    { CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD, "CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD", "attempt to terminate a thread-local capture sequence from another thread" },
    { CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error" },
};
static int err_index(CUresult e) {
    for (size_t i = 0; i < sizeof g_errs / sizeof g_errs[0]; i++)
        if (g_errs[i].code == e) return (int)i;
    return -1;
}
CUresult CUDAAPI cuGetErrorString(CUresult e, const char **s) {
    ENTER("cuGetErrorString");
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    int i = err_index(e);
    *s = i < 0 ? NULL : g_errs[i].str;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult e, const char **s) {
    ENTER("cuGetErrorName");
    if (!s) return CUDA_ERROR_INVALID_VALUE;
    int i = err_index(e);
    *s = i < 0 ? NULL : g_errs[i].name;
    return i < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
}
