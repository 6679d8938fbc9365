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
cudaError_t UVMC_RT_FN(cudaMemcpy2D)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind kind)
{
    RT_2D(cudaMemcpy2D, dst, dpitch, src, spitch, width, height, kind)
}

UVMC_RT_SYMVER(cudaMemcpy2D_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpy2D_ptds)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind)
{
    RT_2D(cudaMemcpy2D_ptds, dst, dpitch, src, spitch, width, height, kind)
}

UVMC_RT_SYMVER(cudaMemcpy2DAsync)
cudaError_t UVMC_RT_FN(cudaMemcpy2DAsync)(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t stream)
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
cudaError_t UVMC_RT_FN(cudaMemcpyFromSymbol)(void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind)
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
cudaError_t UVMC_RT_FN(cudaMemcpy2DToArray)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch,
                                size_t width, size_t height, enum cudaMemcpyKind kind)
{
    RT_TO_ARRAY(cudaMemcpy2DToArray, dst, wOffset, hOffset, src, spitch, width, height, kind)
}

UVMC_RT_SYMVER(cudaMemcpy2DToArray_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpy2DToArray_ptds)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch,
                                     size_t width, size_t height, enum cudaMemcpyKind kind)
{
    RT_TO_ARRAY(cudaMemcpy2DToArray_ptds, dst, wOffset, hOffset, src, spitch, width, height, kind)
}

UVMC_RT_SYMVER(cudaMemcpy2DToArrayAsync)
cudaError_t UVMC_RT_FN(cudaMemcpy2DToArrayAsync)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch,
                                     size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_TO_ARRAY(cudaMemcpy2DToArrayAsync, dst, wOffset, hOffset, src, spitch, width, height, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpy2DToArrayAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpy2DToArrayAsync_ptsz)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                          size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,
                                          cudaStream_t stream)
{
    RT_TO_ARRAY(cudaMemcpy2DToArrayAsync_ptsz, dst, wOffset, hOffset, src, spitch, width, height, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpy2DFromArray)
cudaError_t UVMC_RT_FN(cudaMemcpy2DFromArray)(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                  size_t width, size_t height, enum cudaMemcpyKind kind)
{
    RT_FROM_ARRAY(cudaMemcpy2DFromArray, dst, dpitch, src, wOffset, hOffset, width, height, kind)
}

UVMC_RT_SYMVER(cudaMemcpy2DFromArray_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpy2DFromArray_ptds)(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                       size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind)
{
    RT_FROM_ARRAY(cudaMemcpy2DFromArray_ptds, dst, dpitch, src, wOffset, hOffset, width, height, kind)
}

UVMC_RT_SYMVER(cudaMemcpy2DFromArrayAsync)
cudaError_t UVMC_RT_FN(cudaMemcpy2DFromArrayAsync)(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                       size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind,
                                       cudaStream_t stream)
{
    RT_FROM_ARRAY(cudaMemcpy2DFromArrayAsync, dst, dpitch, src, wOffset, hOffset, width, height, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpy2DFromArrayAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpy2DFromArrayAsync_ptsz)(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                            size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind,
                                            cudaStream_t stream)
{
    RT_FROM_ARRAY(cudaMemcpy2DFromArrayAsync_ptsz, dst, dpitch, src, wOffset, hOffset, width, height, kind, stream)
}

UVMC_RT_SYMVER(cudaMemcpyToArray)
cudaError_t UVMC_RT_FN(cudaMemcpyToArray)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t count,
                              enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyToArray, USE(src, count), dst, wOffset, hOffset, src, count, kind)
}

UVMC_RT_SYMVER(cudaMemcpyToArray_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpyToArray_ptds)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t count,
                                   enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyToArray_ptds, USE(src, count), dst, wOffset, hOffset, src, count, kind)
}

UVMC_RT_SYMVER(cudaMemcpyToArrayAsync)
cudaError_t UVMC_RT_FN(cudaMemcpyToArrayAsync)(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t count,
                                   enum cudaMemcpyKind kind, cudaStream_t stream)
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
cudaError_t UVMC_RT_FN(cudaMemcpyFromArray)(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
                                enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyFromArray, USE(dst, count), dst, src, wOffset, hOffset, count, kind)
}

UVMC_RT_SYMVER(cudaMemcpyFromArray_ptds)
cudaError_t UVMC_RT_FN(cudaMemcpyFromArray_ptds)(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
                                     enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyFromArray_ptds, USE(dst, count), dst, src, wOffset, hOffset, count, kind)
}

UVMC_RT_SYMVER(cudaMemcpyFromArrayAsync)
cudaError_t UVMC_RT_FN(cudaMemcpyFromArrayAsync)(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
                                     enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyFromArrayAsync, USE(dst, count), dst, src, wOffset, hOffset, count, kind,
                  stream)
}

UVMC_RT_SYMVER(cudaMemcpyFromArrayAsync_ptsz)
cudaError_t UVMC_RT_FN(cudaMemcpyFromArrayAsync_ptsz)(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                          size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyFromArrayAsync_ptsz, USE(dst, count), dst, src, wOffset, hOffset, count, kind,
                  stream)
}

