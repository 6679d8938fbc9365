/* runtime_observe.c: the runtime's other uses of host memory the library can see (copies of any
 * kind and dimensionality, pointer and flag queries), compiled once per CUDA major (uvmc.h,
 * UVMC_RT_MAJOR): a lazily pinned buffer they touch becomes pinned memory first (lazy.c), through
 * the caller's runtime, then the real call proceeds unchanged. While no lazy buffer is waiting for
 * its first use, each wrapper costs one load and one comparison on top of the real call. The
 * driver's are in observe.c. */
#include <stddef.h>
#include <stdint.h>

#include "uvmc.h"

/* Host side of a runtime 3D copy, from the pitched pointer (arrays have none): every slice up to
 * the last one the copy reaches. */
static void uvmc_use_pitched_3d(const struct cudaPitchedPtr *pp, const struct cudaPos *pos, const struct cudaExtent *e,
                                const struct uvmc_rt *rt)
{
    size_t rows = pp->ysize ? pp->ysize : pos->y + e->height;
    if (pp->ptr && e->depth)
        uvmc_lazy_use(pp->ptr, pp->pitch * rows * (pos->z + e->depth), rt);
}

static void uvmc_use_3d(const struct cudaMemcpy3DParms *p, const struct uvmc_rt *rt)
{
    if (!p)
        return;
    uvmc_use_pitched_3d(&p->srcPtr, &p->srcPos, &p->extent, rt);
    uvmc_use_pitched_3d(&p->dstPtr, &p->dstPos, &p->extent, rt);
}

/* One wrapper: resolve, note the uses (through the caller's runtime, rt), then the real call. */
#define UVMC_OBSERVED(name, uses, ...)                                \
    UVMC_RT_OR_RETURN(name, cudaErrorSharedObjectSymbolNotFound)      \
    UVMC_OBSERVE_AND_CALL(rt->name, uses, __VA_ARGS__)
#define USE(p, n) uvmc_lazy_use((const void *)(uintptr_t)(p), (n), rt)

#define RT_2D(name, ...)                                                                              \
    UVMC_OBSERVED(name,                                                                               \
                  (USE(dst, uvmc_pitched(dpitch, 0, 0, width, height)),                               \
                   USE(src, uvmc_pitched(spitch, 0, 0, width, height))), __VA_ARGS__)
#define RT_TO_ARRAY(name, ...)                                                                        \
    UVMC_OBSERVED(name, USE(src, uvmc_pitched(spitch, 0, 0, width, height)), __VA_ARGS__)
#define RT_FROM_ARRAY(name, ...)                                                                      \
    UVMC_OBSERVED(name, USE(dst, uvmc_pitched(dpitch, 0, 0, width, height)), __VA_ARGS__)

/* ---- queries: how PyTorch answers is_pinned(), and what a caller asks before a device access */

UVMC_RT_SYMVER(cudaPointerGetAttributes)
cudaError_t UVMC_RT_FN(cudaPointerGetAttributes)(struct cudaPointerAttributes *attributes, const void *ptr)
{
    UVMC_OBSERVED(cudaPointerGetAttributes, USE(ptr, 1), attributes, ptr)
}

UVMC_RT_SYMVER(cudaHostGetDevicePointer)
cudaError_t UVMC_RT_FN(cudaHostGetDevicePointer)(void **pDevice, void *pHost, unsigned int flags)
{
    UVMC_OBSERVED(cudaHostGetDevicePointer, USE(pHost, 1), pDevice, pHost, flags)
}

UVMC_RT_SYMVER(cudaHostGetFlags)
cudaError_t UVMC_RT_FN(cudaHostGetFlags)(unsigned int *pFlags, void *pHost)
{
    UVMC_OBSERVED(cudaHostGetFlags, USE(pHost, 1), pFlags, pHost)
}

/* ---- copies other than the 1-D ones (runtime.c) */

UVMC_RT_SYMVER(cudaMemcpy2D)
cudaError_t UVMC_RT_FN(cudaMemcpy2D)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                     size_t height, enum cudaMemcpyKind kind)
{
    RT_2D(cudaMemcpy2D, dst, dpitch, src, spitch, width, height, kind)
}

UVMC_RT_SYMVER(cudaMemcpy2D_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpy2D_ptds)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                          size_t height, enum cudaMemcpyKind kind)
{
    RT_2D(cudaMemcpy2D_ptds, dst, dpitch, src, spitch, width, height, kind)
}

UVMC_RT_SYMVER(cudaMemcpy2DAsync)
cudaError_t UVMC_RT_FN(cudaMemcpy2DAsync)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                          size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_2D(cudaMemcpy2DAsync, dst, dpitch, src, spitch, width, height, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpy2DAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpy2DAsync_ptsz)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                               size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_2D(cudaMemcpy2DAsync_ptsz, dst, dpitch, src, spitch, width, height, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpy3D)
cudaError_t UVMC_RT_FN(cudaMemcpy3D)(const struct cudaMemcpy3DParms *p)
{
    UVMC_OBSERVED(cudaMemcpy3D, uvmc_use_3d(p, rt), p)
}

UVMC_RT_SYMVER(cudaMemcpy3D_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpy3D_ptds)(const struct cudaMemcpy3DParms *p)
{
    UVMC_OBSERVED(cudaMemcpy3D_ptds, uvmc_use_3d(p, rt), p)
}

UVMC_RT_SYMVER(cudaMemcpy3DAsync)
cudaError_t UVMC_RT_FN(cudaMemcpy3DAsync)(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpy3DAsync, uvmc_use_3d(p, rt), p, stream)
}

UVMC_RT_SYMVER(cudaMemcpy3DAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpy3DAsync_ptsz)(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpy3DAsync_ptsz, uvmc_use_3d(p, rt), p, stream)
}

UVMC_RT_SYMVER(cudaMemcpyToSymbol)
cudaError_t UVMC_RT_FN(cudaMemcpyToSymbol)(const void *symbol, const void *src, size_t count, size_t offset,
                                           enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyToSymbol, USE(src, count), symbol, src, count, offset, kind)
}

UVMC_RT_SYMVER(cudaMemcpyToSymbol_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpyToSymbol_ptds)(const void *symbol, const void *src, size_t count, size_t offset,
                                                enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyToSymbol_ptds, USE(src, count), symbol, src, count, offset, kind)
}

UVMC_RT_SYMVER(cudaMemcpyToSymbolAsync)
cudaError_t UVMC_RT_FN(cudaMemcpyToSymbolAsync)(const void *symbol, const void *src, size_t count, size_t offset,
                                                enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyToSymbolAsync, USE(src, count), symbol, src, count, offset, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpyToSymbolAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpyToSymbolAsync_ptsz)(const void *symbol, const void *src, size_t count, size_t offset,
                                                     enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyToSymbolAsync_ptsz, USE(src, count), symbol, src, count, offset, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpyFromSymbol)
cudaError_t UVMC_RT_FN(cudaMemcpyFromSymbol)(void *dst, const void *symbol, size_t count, size_t offset,
                                             enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyFromSymbol, USE(dst, count), dst, symbol, count, offset, kind)
}

UVMC_RT_SYMVER(cudaMemcpyFromSymbol_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpyFromSymbol_ptds)(void *dst, const void *symbol, size_t count, size_t offset,
                                                  enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyFromSymbol_ptds, USE(dst, count), dst, symbol, count, offset, kind)
}

UVMC_RT_SYMVER(cudaMemcpyFromSymbolAsync)
cudaError_t UVMC_RT_FN(cudaMemcpyFromSymbolAsync)(void *dst, const void *symbol, size_t count, size_t offset,
                                                  enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyFromSymbolAsync, USE(dst, count), dst, symbol, count, offset, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpyFromSymbolAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpyFromSymbolAsync_ptsz)(void *dst, const void *symbol, size_t count, size_t offset,
                                                       enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyFromSymbolAsync_ptsz, USE(dst, count), dst, symbol, count, offset, kind,
                  stream)
}

UVMC_RT_SYMVER(cudaMemcpy2DToArray)
cudaError_t UVMC_RT_FN(cudaMemcpy2DToArray)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                            size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind)
{
    RT_TO_ARRAY(cudaMemcpy2DToArray, dst, wOffset, hOffset, src, spitch, width, height, kind)
}

UVMC_RT_SYMVER(cudaMemcpy2DToArray_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpy2DToArray_ptds)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                                 size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind)
{
    RT_TO_ARRAY(cudaMemcpy2DToArray_ptds, dst, wOffset, hOffset, src, spitch, width, height, kind)
}

UVMC_RT_SYMVER(cudaMemcpy2DToArrayAsync)
cudaError_t UVMC_RT_FN(cudaMemcpy2DToArrayAsync)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                                 size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,
                                                 cudaStream_t stream)
{
    RT_TO_ARRAY(cudaMemcpy2DToArrayAsync, dst, wOffset, hOffset, src, spitch, width, height, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpy2DToArrayAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpy2DToArrayAsync_ptsz)(cudaArray_t dst, size_t wOffset, size_t hOffset,
                                                      const void *src, size_t spitch, size_t width, size_t height,
                                                      enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_TO_ARRAY(cudaMemcpy2DToArrayAsync_ptsz, dst, wOffset, hOffset, src, spitch, width, height, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpy2DFromArray)
cudaError_t UVMC_RT_FN(cudaMemcpy2DFromArray)(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                              size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind)
{
    RT_FROM_ARRAY(cudaMemcpy2DFromArray, dst, dpitch, src, wOffset, hOffset, width, height, kind)
}

UVMC_RT_SYMVER(cudaMemcpy2DFromArray_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpy2DFromArray_ptds)(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                                   size_t hOffset, size_t width, size_t height,
                                                   enum cudaMemcpyKind kind)
{
    RT_FROM_ARRAY(cudaMemcpy2DFromArray_ptds, dst, dpitch, src, wOffset, hOffset, width, height, kind)
}

UVMC_RT_SYMVER(cudaMemcpy2DFromArrayAsync)
cudaError_t UVMC_RT_FN(cudaMemcpy2DFromArrayAsync)(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                                   size_t hOffset, size_t width, size_t height,
                                                   enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_FROM_ARRAY(cudaMemcpy2DFromArrayAsync, dst, dpitch, src, wOffset, hOffset, width, height, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpy2DFromArrayAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpy2DFromArrayAsync_ptsz)(void *dst, size_t dpitch, cudaArray_const_t src,
                                                        size_t wOffset, size_t hOffset, size_t width, size_t height,
                                                        enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_FROM_ARRAY(cudaMemcpy2DFromArrayAsync_ptsz, dst, dpitch, src, wOffset, hOffset, width, height, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpyToArray)
cudaError_t UVMC_RT_FN(cudaMemcpyToArray)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                          size_t count, enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyToArray, USE(src, count), dst, wOffset, hOffset, src, count, kind)
}

UVMC_RT_SYMVER(cudaMemcpyToArray_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpyToArray_ptds)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                               size_t count, enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyToArray_ptds, USE(src, count), dst, wOffset, hOffset, src, count, kind)
}

UVMC_RT_SYMVER(cudaMemcpyToArrayAsync)
cudaError_t UVMC_RT_FN(cudaMemcpyToArrayAsync)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                               size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyToArrayAsync, USE(src, count), dst, wOffset, hOffset, src, count, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpyToArrayAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpyToArrayAsync_ptsz)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                                    size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyToArrayAsync_ptsz, USE(src, count), dst, wOffset, hOffset, src, count, kind,
                  stream)
}

UVMC_RT_SYMVER(cudaMemcpyFromArray)
cudaError_t UVMC_RT_FN(cudaMemcpyFromArray)(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                            size_t count, enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyFromArray, USE(dst, count), dst, src, wOffset, hOffset, count, kind)
}

UVMC_RT_SYMVER(cudaMemcpyFromArray_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpyFromArray_ptds)(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                                 size_t count, enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyFromArray_ptds, USE(dst, count), dst, src, wOffset, hOffset, count, kind)
}

UVMC_RT_SYMVER(cudaMemcpyFromArrayAsync)
cudaError_t UVMC_RT_FN(cudaMemcpyFromArrayAsync)(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                                 size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyFromArrayAsync, USE(dst, count), dst, src, wOffset, hOffset, count, kind,
                  stream)
}

UVMC_RT_SYMVER(cudaMemcpyFromArrayAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpyFromArrayAsync_ptsz)(void *dst, cudaArray_const_t src, size_t wOffset,
                                                      size_t hOffset, size_t count, enum cudaMemcpyKind kind,
                                                      cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyFromArrayAsync_ptsz, USE(dst, count), dst, src, wOffset, hOffset, count, kind,
                  stream)
}

/* ---- memsets, peer copies and batch copies */

UVMC_RT_SYMVER(cudaMemset)
cudaError_t UVMC_RT_FN(cudaMemset)(void *devPtr, int value, size_t count)
{
    UVMC_OBSERVED(cudaMemset, USE(devPtr, count), devPtr, value, count)
}

UVMC_RT_SYMVER(cudaMemset_ptds)
cudaError_t UVMC_RT_FN(cudaMemset_ptds)(void *devPtr, int value, size_t count)
{
    UVMC_OBSERVED(cudaMemset_ptds, USE(devPtr, count), devPtr, value, count)
}

UVMC_RT_SYMVER(cudaMemsetAsync)
cudaError_t UVMC_RT_FN(cudaMemsetAsync)(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemsetAsync, USE(devPtr, count), devPtr, value, count, stream)
}

UVMC_RT_SYMVER(cudaMemsetAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemsetAsync_ptsz)(void *devPtr, int value, size_t count, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemsetAsync_ptsz, USE(devPtr, count), devPtr, value, count, stream)
}

#define RT_SET_2D(name, ...) UVMC_OBSERVED(name, USE(devPtr, uvmc_pitched(pitch, 0, 0, width, height)), __VA_ARGS__)

UVMC_RT_SYMVER(cudaMemset2D)
cudaError_t UVMC_RT_FN(cudaMemset2D)(void *devPtr, size_t pitch, int value, size_t width, size_t height)
{
    RT_SET_2D(cudaMemset2D, devPtr, pitch, value, width, height)
}

UVMC_RT_SYMVER(cudaMemset2D_ptds)
cudaError_t UVMC_RT_FN(cudaMemset2D_ptds)(void *devPtr, size_t pitch, int value, size_t width, size_t height)
{
    RT_SET_2D(cudaMemset2D_ptds, devPtr, pitch, value, width, height)
}

UVMC_RT_SYMVER(cudaMemset2DAsync)
cudaError_t UVMC_RT_FN(cudaMemset2DAsync)(void *devPtr, size_t pitch, int value, size_t width, size_t height,
                                          cudaStream_t stream)
{
    RT_SET_2D(cudaMemset2DAsync, devPtr, pitch, value, width, height, stream)
}

UVMC_RT_SYMVER(cudaMemset2DAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemset2DAsync_ptsz)(void *devPtr, size_t pitch, int value, size_t width, size_t height,
                                               cudaStream_t stream)
{
    RT_SET_2D(cudaMemset2DAsync_ptsz, devPtr, pitch, value, width, height, stream)
}

/* A 3-D memset covers the pitched pointer's slices from its origin. */
static const struct cudaPos uvmc_origin;
#define RT_SET_3D(name, ...) \
    UVMC_OBSERVED(name, uvmc_use_pitched_3d(&pitchedDevPtr, &uvmc_origin, &extent, rt), __VA_ARGS__)

UVMC_RT_SYMVER(cudaMemset3D)
cudaError_t UVMC_RT_FN(cudaMemset3D)(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent)
{
    RT_SET_3D(cudaMemset3D, pitchedDevPtr, value, extent)
}

UVMC_RT_SYMVER(cudaMemset3D_ptds)
cudaError_t UVMC_RT_FN(cudaMemset3D_ptds)(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent)
{
    RT_SET_3D(cudaMemset3D_ptds, pitchedDevPtr, value, extent)
}

UVMC_RT_SYMVER(cudaMemset3DAsync)
cudaError_t UVMC_RT_FN(cudaMemset3DAsync)(struct cudaPitchedPtr pitchedDevPtr, int value, struct cudaExtent extent,
                                          cudaStream_t stream)
{
    RT_SET_3D(cudaMemset3DAsync, pitchedDevPtr, value, extent, stream)
}

UVMC_RT_SYMVER(cudaMemset3DAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemset3DAsync_ptsz)(struct cudaPitchedPtr pitchedDevPtr, int value,
                                               struct cudaExtent extent, cudaStream_t stream)
{
    RT_SET_3D(cudaMemset3DAsync_ptsz, pitchedDevPtr, value, extent, stream)
}

/* Peer copies take pointers too; under unified addressing a pinned buffer's is its own. */
UVMC_RT_SYMVER(cudaMemcpyPeer)
cudaError_t UVMC_RT_FN(cudaMemcpyPeer)(void *dst, int dstDevice, const void *src, int srcDevice, size_t count)
{
    UVMC_OBSERVED(cudaMemcpyPeer, (USE(dst, count), USE(src, count)), dst, dstDevice, src, srcDevice, count)
}

UVMC_RT_SYMVER(cudaMemcpyPeerAsync)
cudaError_t UVMC_RT_FN(cudaMemcpyPeerAsync)(void *dst, int dstDevice, const void *src, int srcDevice, size_t count,
                                            cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyPeerAsync, (USE(dst, count), USE(src, count)), dst, dstDevice, src, srcDevice, count,
                  stream)
}

static void uvmc_use_3d_peer(const struct cudaMemcpy3DPeerParms *p, const struct uvmc_rt *rt)
{
    if (!p)
        return;
    uvmc_use_pitched_3d(&p->srcPtr, &p->srcPos, &p->extent, rt);
    uvmc_use_pitched_3d(&p->dstPtr, &p->dstPos, &p->extent, rt);
}

UVMC_RT_SYMVER(cudaMemcpy3DPeer)
cudaError_t UVMC_RT_FN(cudaMemcpy3DPeer)(const struct cudaMemcpy3DPeerParms *p)
{
    UVMC_OBSERVED(cudaMemcpy3DPeer, uvmc_use_3d_peer(p, rt), p)
}

UVMC_RT_SYMVER(cudaMemcpy3DPeer_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpy3DPeer_ptds)(const struct cudaMemcpy3DPeerParms *p)
{
    UVMC_OBSERVED(cudaMemcpy3DPeer_ptds, uvmc_use_3d_peer(p, rt), p)
}

UVMC_RT_SYMVER(cudaMemcpy3DPeerAsync)
cudaError_t UVMC_RT_FN(cudaMemcpy3DPeerAsync)(const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpy3DPeerAsync, uvmc_use_3d_peer(p, rt), p, stream)
}

UVMC_RT_SYMVER(cudaMemcpy3DPeerAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpy3DPeerAsync_ptsz)(const struct cudaMemcpy3DPeerParms *p, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpy3DPeerAsync_ptsz, uvmc_use_3d_peer(p, rt), p, stream)
}

/* Batch copies (CUDA 12.8+): every pair of the batch. Nothing is looked at while no lazy buffer
 * waits for its first use. */
static void uvmc_use_batch(void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count,
                           const struct uvmc_rt *rt)
{
    if (uvmc_lazy_none() || !dsts || !srcs || !sizes)
        return;
    for (size_t i = 0; i < count; i++) {
        uvmc_lazy_use(dsts[i], sizes[i], rt);
        uvmc_lazy_use(srcs[i], sizes[i], rt);
    }
}

UVMC_RT_SYMVER(cudaMemcpyBatchAsync)
cudaError_t UVMC_RT_FN(cudaMemcpyBatchAsync)(void *const *dsts, const void *const *srcs, const size_t *sizes,
                                             size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
                                             size_t numAttrs, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyBatchAsync, uvmc_use_batch(dsts, srcs, sizes, count, rt), dsts, srcs, sizes, count,
                  attrs, attrsIdxs, numAttrs, stream)
}

UVMC_RT_SYMVER(cudaMemcpyBatchAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpyBatchAsync_ptsz)(void *const *dsts, const void *const *srcs, const size_t *sizes,
                                                  size_t count, struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs,
                                                  size_t numAttrs, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyBatchAsync_ptsz, uvmc_use_batch(dsts, srcs, sizes, count, rt), dsts, srcs, sizes, count,
                  attrs, attrsIdxs, numAttrs, stream)
}

/* A pointer operand of a 3-D batch copy: from its start to the last element the extent reaches,
 * rows and layers tightly packed where their length is 0. Elements are bytes between pointers; an
 * array's element is at most 16 bytes (four 32-bit channels), which bounds the other side. */
static void uvmc_use_operand(const struct cudaMemcpy3DOperand *o, const struct cudaMemcpy3DOperand *other,
                             const struct cudaExtent *e, const struct uvmc_rt *rt)
{
    if (o->type != cudaMemcpyOperandTypePointer || !e->width || !e->height || !e->depth)
        return;
    size_t row = o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width;
    size_t layer = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height;
    size_t elem = other->type == cudaMemcpyOperandTypeArray ? 16 : 1;
    uvmc_lazy_use(o->op.ptr.ptr, elem * (row * layer * (e->depth - 1) + row * (e->height - 1) + e->width), rt);
}

static void uvmc_use_batch_3d(size_t numOps, const struct cudaMemcpy3DBatchOp *ops, const struct uvmc_rt *rt)
{
    if (uvmc_lazy_none() || !ops)
        return;
    for (size_t i = 0; i < numOps; i++) {
        uvmc_use_operand(&ops[i].src, &ops[i].dst, &ops[i].extent, rt);
        uvmc_use_operand(&ops[i].dst, &ops[i].src, &ops[i].extent, rt);
    }
}

UVMC_RT_SYMVER(cudaMemcpy3DBatchAsync)
cudaError_t UVMC_RT_FN(cudaMemcpy3DBatchAsync)(size_t numOps, struct cudaMemcpy3DBatchOp *opList,
                                               unsigned long long flags, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpy3DBatchAsync, uvmc_use_batch_3d(numOps, opList, rt), numOps, opList, flags, stream)
}

UVMC_RT_SYMVER(cudaMemcpy3DBatchAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpy3DBatchAsync_ptsz)(size_t numOps, struct cudaMemcpy3DBatchOp *opList,
                                                    unsigned long long flags, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpy3DBatchAsync_ptsz, uvmc_use_batch_3d(numOps, opList, rt), numOps, opList, flags, stream)
}

/* ---- managed allocations: passed through unchanged; the first one in a process is when a Python
 * job's managed tables appear, before any checkpoint of them, so pyhook.c says then whether the
 * package's hook is missing (after that: one load and one comparison on top of the real call). */

UVMC_RT_SYMVER(cudaMallocManaged)
cudaError_t UVMC_RT_FN(cudaMallocManaged)(void **devPtr, size_t size, unsigned int flags)
{
    UVMC_OBSERVED(cudaMallocManaged, uvmc_pyhook_check(), devPtr, size, flags)
}
