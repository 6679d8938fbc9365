/* sim_peer.c: peer access between the simulated devices, answered as an 8-GPU NVLink node (HGX
 * H100/H200, every pair connected through NVSwitch) answers it: every device can access every other
 * one (CUDA Runtime API, "Peer Device Memory Access": cudaDeviceCanAccessPeer gives 1 when device can
 * directly access peerDevice's memory; cuda.h cuDeviceCanAccessPeer, cuDeviceGetP2PAttribute,
 * cuCtxEnablePeerAccess, cuCtxDisablePeerAccess for the errors below). A device is not its own peer. */
#include "sim_internal.h"

CUresult CUDAAPI cuDeviceCanAccessPeer(int *can, CUdevice d, CUdevice peer) {
    ENTER("cuDeviceCanAccessPeer");
    if (!can) return CUDA_ERROR_INVALID_VALUE;
    if (!sim_valid_dev(d) || !sim_valid_dev(peer)) return CUDA_ERROR_INVALID_DEVICE;
    *can = d != peer;
    return CUDA_SUCCESS;
}

/* cuda.h cuDeviceGetP2PAttribute: CUDA_ERROR_INVALID_DEVICE for an invalid device "or if they represent
 * the same device". NVLink: access, native atomics and array access supported, one performance rank. */
CUresult CUDAAPI cuDeviceGetP2PAttribute(int *v, CUdevice_P2PAttribute a, CUdevice src, CUdevice dst) {
    ENTER("cuDeviceGetP2PAttribute");
    if (!v) return CUDA_ERROR_INVALID_VALUE;
    if (!sim_valid_dev(src) || !sim_valid_dev(dst) || src == dst) return CUDA_ERROR_INVALID_DEVICE;
    switch (a) {
    case CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK: *v = 0; return CUDA_SUCCESS;
    case CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED:
    case CU_DEVICE_P2P_ATTRIBUTE_CUDA_ARRAY_ACCESS_SUPPORTED: *v = 1; return CUDA_SUCCESS;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* cuda.h cuCtxEnablePeerAccess: INVALID_CONTEXT with no current context, a context that is not one, or
 * the current one itself; ALREADY_ENABLED the second time; INVALID_VALUE for flags other than 0. */
CUresult CUDAAPI cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
    ENTER("cuCtxEnablePeerAccess");
    NEED_CTX();
    struct sim_ctx *me = (struct sim_ctx *)sim_tl_ctx, *p = (struct sim_ctx *)peer;
    if (!p || p < sim_primary || p >= sim_primary + sim_sw.devices || p == me) return CUDA_ERROR_INVALID_CONTEXT;
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_mu);
    if (me->peers & (1ull << p->dev)) r = CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    else me->peers |= 1ull << p->dev;
    pthread_mutex_unlock(&sim_mu);
    return r;
}

CUresult CUDAAPI cuCtxDisablePeerAccess(CUcontext peer) {
    ENTER("cuCtxDisablePeerAccess");
    NEED_CTX();
    struct sim_ctx *me = (struct sim_ctx *)sim_tl_ctx, *p = (struct sim_ctx *)peer;
    if (!p || p < sim_primary || p >= sim_primary + sim_sw.devices) return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_mu);
    if (!(me->peers & (1ull << p->dev))) r = CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    else me->peers &= ~(1ull << p->dev);
    pthread_mutex_unlock(&sim_mu);
    return r;
}
