/* observe.c: every other use of host memory the library can see (copies of any kind and
 * dimensionality, pointer and flag queries): a lazily pinned buffer it touches becomes pinned
 * memory first (lazy.c), then the real call proceeds unchanged. While no lazy buffer is waiting for
 * its first use, each wrapper costs one load and one comparison on top of the real call. */
#include <stdint.h>

#include "uvmc.h"

/* The bytes a pitched range spans from its base: conservative, a wider range only pins sooner. */
static size_t uvmc_pitched(size_t pitch, size_t x, size_t y, size_t width, size_t rows)
{
    return rows ? pitch * (y + rows - 1) + x + width : 0;
}

/* Host side of a runtime 3D copy, from the pitched pointer (arrays have none): every slice up to
 * the last one the copy reaches. */
static void uvmc_use_pitched_3d(const struct cudaPitchedPtr *pp, const struct cudaPos *pos, const struct cudaExtent *e)
{
    size_t rows = pp->ysize ? pp->ysize : pos->y + e->height;
    if (pp->ptr && e->depth)
        uvmc_lazy_use(pp->ptr, pp->pitch * rows * (pos->z + e->depth), true);
}

static void uvmc_use_3d(const struct cudaMemcpy3DParms *p)
{
    if (!p)
        return;
    uvmc_use_pitched_3d(&p->srcPtr, &p->srcPos, &p->extent);
    uvmc_use_pitched_3d(&p->dstPtr, &p->dstPos, &p->extent);
}

/* A driver descriptor's side: its host address, or its device address, which under unified
 * addressing may be a mapped pinned buffer's own (arrays have neither). */
static const void *uvmc_side(CUmemorytype type, const void *host, CUdeviceptr dev)
{
    if (type == CU_MEMORYTYPE_HOST)
        return host;
    if (type == CU_MEMORYTYPE_UNIFIED || type == CU_MEMORYTYPE_DEVICE)
        return (const void *)(uintptr_t)dev;
    return NULL;
}

static void uvmc_use_2d(const CUDA_MEMCPY2D *p)
{
    if (!p)
        return;
    const void *s = uvmc_side(p->srcMemoryType, p->srcHost, p->srcDevice);
    const void *d = uvmc_side(p->dstMemoryType, p->dstHost, p->dstDevice);
    if (s)
        uvmc_lazy_use(s, uvmc_pitched(p->srcPitch, p->srcXInBytes, p->srcY, p->WidthInBytes, p->Height), false);
    if (d)
        uvmc_lazy_use(d, uvmc_pitched(p->dstPitch, p->dstXInBytes, p->dstY, p->WidthInBytes, p->Height), false);
}

static void uvmc_use_3d_drv(const CUDA_MEMCPY3D *p)
{
    if (!p || !p->Depth)
        return;
    const void *s = uvmc_side(p->srcMemoryType, p->srcHost, p->srcDevice);
    const void *d = uvmc_side(p->dstMemoryType, p->dstHost, p->dstDevice);
    size_t sh = p->srcHeight ? p->srcHeight : p->srcY + p->Height, dh = p->dstHeight ? p->dstHeight : p->dstY + p->Height;
    if (s)
        uvmc_lazy_use(s, p->srcPitch * sh * (p->srcZ + p->Depth), false);
    if (d)
        uvmc_lazy_use(d, p->dstPitch * dh * (p->dstZ + p->Depth), false);
}

/* One wrapper: resolve, note the uses, then the real call with the caller's arguments. */
#define UVMC_OBSERVED(name, missing, uses, ...)                                                       \
    UVMC_REAL_OR_RETURN(name, missing);                                                               \
    uses;                                                                                             \
    return uvmc_real.name(__VA_ARGS__);
#define RT_MISSING cudaErrorSharedObjectSymbolNotFound
#define DRV_MISSING CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND
#define USE(p, n) uvmc_lazy_use((const void *)(uintptr_t)(p), (n), true)
#define DUSE(p, n) uvmc_lazy_use((const void *)(uintptr_t)(p), (n), false)

/* ---- queries: how PyTorch answers is_pinned(), and what a caller asks before a device access */

cudaError_t cudaPointerGetAttributes(struct cudaPointerAttributes *attributes, const void *ptr)
{
    UVMC_OBSERVED(cudaPointerGetAttributes, RT_MISSING, USE(ptr, 1), attributes, ptr)
}
cudaError_t cudaHostGetDevicePointer(void **pDevice, void *pHost, unsigned int flags)
{
    UVMC_OBSERVED(cudaHostGetDevicePointer, RT_MISSING, USE(pHost, 1), pDevice, pHost, flags)
}
cudaError_t cudaHostGetFlags(unsigned int *pFlags, void *pHost)
{
    UVMC_OBSERVED(cudaHostGetFlags, RT_MISSING, USE(pHost, 1), pFlags, pHost)
}
CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    UVMC_OBSERVED(cuPointerGetAttribute, DRV_MISSING, DUSE(ptr, 1), data, attribute, ptr)
}
CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                CUdeviceptr ptr)
{
    UVMC_OBSERVED(cuPointerGetAttributes, DRV_MISSING, DUSE(ptr, 1), numAttributes, attributes, data, ptr)
}
CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    UVMC_OBSERVED(cuMemHostGetDevicePointer_v2, DRV_MISSING, DUSE(p, 1), pdptr, p, Flags)
}
CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    UVMC_OBSERVED(cuMemHostGetFlags, DRV_MISSING, DUSE(p, 1), pFlags, p)
}

/* ---- runtime copies other than the 1-D ones (runtime.c) */

#define RT_2D(name, ...)                                                                              \
    UVMC_OBSERVED(name, RT_MISSING,                                                                   \
                  (USE(dst, uvmc_pitched(dpitch, 0, 0, width, height)),                               \
                   USE(src, uvmc_pitched(spitch, 0, 0, width, height))), __VA_ARGS__)
cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                         enum cudaMemcpyKind kind)
{
    RT_2D(cudaMemcpy2D, dst, dpitch, src, spitch, width, height, kind)
}
cudaError_t cudaMemcpy2D_ptds(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind)
{
    RT_2D(cudaMemcpy2D_ptds, dst, dpitch, src, spitch, width, height, kind)
}
cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width, size_t height,
                              enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_2D(cudaMemcpy2DAsync, dst, dpitch, src, spitch, width, height, kind, stream)
}
cudaError_t cudaMemcpy2DAsync_ptsz(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                   size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_2D(cudaMemcpy2DAsync_ptsz, dst, dpitch, src, spitch, width, height, kind, stream)
}

cudaError_t cudaMemcpy3D(const struct cudaMemcpy3DParms *p)
{
    UVMC_OBSERVED(cudaMemcpy3D, RT_MISSING, uvmc_use_3d(p), p)
}
cudaError_t cudaMemcpy3D_ptds(const struct cudaMemcpy3DParms *p)
{
    UVMC_OBSERVED(cudaMemcpy3D_ptds, RT_MISSING, uvmc_use_3d(p), p)
}
cudaError_t cudaMemcpy3DAsync(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpy3DAsync, RT_MISSING, uvmc_use_3d(p), p, stream)
}
cudaError_t cudaMemcpy3DAsync_ptsz(const struct cudaMemcpy3DParms *p, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpy3DAsync_ptsz, RT_MISSING, uvmc_use_3d(p), p, stream)
}

cudaError_t cudaMemcpyToSymbol(const void *symbol, const void *src, size_t count, size_t offset,
                               enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyToSymbol, RT_MISSING, USE(src, count), symbol, src, count, offset, kind)
}
cudaError_t cudaMemcpyToSymbol_ptds(const void *symbol, const void *src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyToSymbol_ptds, RT_MISSING, USE(src, count), symbol, src, count, offset, kind)
}
cudaError_t cudaMemcpyToSymbolAsync(const void *symbol, const void *src, size_t count, size_t offset,
                                    enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyToSymbolAsync, RT_MISSING, USE(src, count), symbol, src, count, offset, kind, stream)
}
cudaError_t cudaMemcpyToSymbolAsync_ptsz(const void *symbol, const void *src, size_t count, size_t offset,
                                         enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyToSymbolAsync_ptsz, RT_MISSING, USE(src, count), symbol, src, count, offset, kind, stream)
}
cudaError_t cudaMemcpyFromSymbol(void *dst, const void *symbol, size_t count, size_t offset, enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyFromSymbol, RT_MISSING, USE(dst, count), dst, symbol, count, offset, kind)
}
cudaError_t cudaMemcpyFromSymbol_ptds(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyFromSymbol_ptds, RT_MISSING, USE(dst, count), dst, symbol, count, offset, kind)
}
cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *symbol, size_t count, size_t offset,
                                      enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyFromSymbolAsync, RT_MISSING, USE(dst, count), dst, symbol, count, offset, kind, stream)
}
cudaError_t cudaMemcpyFromSymbolAsync_ptsz(void *dst, const void *symbol, size_t count, size_t offset,
                                           enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyFromSymbolAsync_ptsz, RT_MISSING, USE(dst, count), dst, symbol, count, offset, kind,
                  stream)
}

#define RT_TO_ARRAY(name, ...)                                                                        \
    UVMC_OBSERVED(name, RT_MISSING, USE(src, uvmc_pitched(spitch, 0, 0, width, height)), __VA_ARGS__)
cudaError_t cudaMemcpy2DToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch,
                                size_t width, size_t height, enum cudaMemcpyKind kind)
{
    RT_TO_ARRAY(cudaMemcpy2DToArray, dst, wOffset, hOffset, src, spitch, width, height, kind)
}
cudaError_t cudaMemcpy2DToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch,
                                     size_t width, size_t height, enum cudaMemcpyKind kind)
{
    RT_TO_ARRAY(cudaMemcpy2DToArray_ptds, dst, wOffset, hOffset, src, spitch, width, height, kind)
}
cudaError_t cudaMemcpy2DToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t spitch,
                                     size_t width, size_t height, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    RT_TO_ARRAY(cudaMemcpy2DToArrayAsync, dst, wOffset, hOffset, src, spitch, width, height, kind, stream)
}
cudaError_t cudaMemcpy2DToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                          size_t spitch, size_t width, size_t height, enum cudaMemcpyKind kind,
                                          cudaStream_t stream)
{
    RT_TO_ARRAY(cudaMemcpy2DToArrayAsync_ptsz, dst, wOffset, hOffset, src, spitch, width, height, kind, stream)
}

#define RT_FROM_ARRAY(name, ...)                                                                      \
    UVMC_OBSERVED(name, RT_MISSING, USE(dst, uvmc_pitched(dpitch, 0, 0, width, height)), __VA_ARGS__)
cudaError_t cudaMemcpy2DFromArray(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                  size_t width, size_t height, enum cudaMemcpyKind kind)
{
    RT_FROM_ARRAY(cudaMemcpy2DFromArray, dst, dpitch, src, wOffset, hOffset, width, height, kind)
}
cudaError_t cudaMemcpy2DFromArray_ptds(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                       size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind)
{
    RT_FROM_ARRAY(cudaMemcpy2DFromArray_ptds, dst, dpitch, src, wOffset, hOffset, width, height, kind)
}
cudaError_t cudaMemcpy2DFromArrayAsync(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                       size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind,
                                       cudaStream_t stream)
{
    RT_FROM_ARRAY(cudaMemcpy2DFromArrayAsync, dst, dpitch, src, wOffset, hOffset, width, height, kind, stream)
}
cudaError_t cudaMemcpy2DFromArrayAsync_ptsz(void *dst, size_t dpitch, cudaArray_const_t src, size_t wOffset,
                                            size_t hOffset, size_t width, size_t height, enum cudaMemcpyKind kind,
                                            cudaStream_t stream)
{
    RT_FROM_ARRAY(cudaMemcpy2DFromArrayAsync_ptsz, dst, dpitch, src, wOffset, hOffset, width, height, kind, stream)
}

cudaError_t cudaMemcpyToArray(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t count,
                              enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyToArray, RT_MISSING, USE(src, count), dst, wOffset, hOffset, src, count, kind)
}
cudaError_t cudaMemcpyToArray_ptds(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t count,
                                   enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyToArray_ptds, RT_MISSING, USE(src, count), dst, wOffset, hOffset, src, count, kind)
}
cudaError_t cudaMemcpyToArrayAsync(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src, size_t count,
                                   enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyToArrayAsync, RT_MISSING, USE(src, count), dst, wOffset, hOffset, src, count, kind, stream)
}
cudaError_t cudaMemcpyToArrayAsync_ptsz(cudaArray_t dst, size_t wOffset, size_t hOffset, const void *src,
                                        size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyToArrayAsync_ptsz, RT_MISSING, USE(src, count), dst, wOffset, hOffset, src, count, kind,
                  stream)
}
cudaError_t cudaMemcpyFromArray(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
                                enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyFromArray, RT_MISSING, USE(dst, count), dst, src, wOffset, hOffset, count, kind)
}
cudaError_t cudaMemcpyFromArray_ptds(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
                                     enum cudaMemcpyKind kind)
{
    UVMC_OBSERVED(cudaMemcpyFromArray_ptds, RT_MISSING, USE(dst, count), dst, src, wOffset, hOffset, count, kind)
}
cudaError_t cudaMemcpyFromArrayAsync(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset, size_t count,
                                     enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyFromArrayAsync, RT_MISSING, USE(dst, count), dst, src, wOffset, hOffset, count, kind,
                  stream)
}
cudaError_t cudaMemcpyFromArrayAsync_ptsz(void *dst, cudaArray_const_t src, size_t wOffset, size_t hOffset,
                                          size_t count, enum cudaMemcpyKind kind, cudaStream_t stream)
{
    UVMC_OBSERVED(cudaMemcpyFromArrayAsync_ptsz, RT_MISSING, USE(dst, count), dst, src, wOffset, hOffset, count, kind,
                  stream)
}

/* ---- driver copies other than device-to-host and unified ones (driver.c) */

CUresult cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount)
{
    UVMC_OBSERVED(cuMemcpyHtoD, DRV_MISSING, DUSE(srcHost, ByteCount), dstDevice, srcHost, ByteCount)
}
CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyHtoD_v2, DRV_MISSING, DUSE(srcHost, ByteCount), dstDevice, srcHost, ByteCount)
}
CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyHtoD_v2_ptds, DRV_MISSING, DUSE(srcHost, ByteCount), dstDevice, srcHost, ByteCount)
}
CUresult cuMemcpyHtoDAsync(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyHtoDAsync, DRV_MISSING, DUSE(srcHost, ByteCount), dstDevice, srcHost, ByteCount, hStream)
}
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyHtoDAsync_v2, DRV_MISSING, DUSE(srcHost, ByteCount), dstDevice, srcHost, ByteCount, hStream)
}
CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyHtoDAsync_v2_ptsz, DRV_MISSING, DUSE(srcHost, ByteCount), dstDevice, srcHost, ByteCount,
                  hStream)
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    UVMC_OBSERVED(cuMemcpy2D_v2, DRV_MISSING, uvmc_use_2d(pCopy), pCopy)
}
CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    UVMC_OBSERVED(cuMemcpy2D_v2_ptds, DRV_MISSING, uvmc_use_2d(pCopy), pCopy)
}
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
    UVMC_OBSERVED(cuMemcpy2DUnaligned_v2, DRV_MISSING, uvmc_use_2d(pCopy), pCopy)
}
CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    UVMC_OBSERVED(cuMemcpy2DUnaligned_v2_ptds, DRV_MISSING, uvmc_use_2d(pCopy), pCopy)
}
CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy2DAsync_v2, DRV_MISSING, uvmc_use_2d(pCopy), pCopy, hStream)
}
CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy2DAsync_v2_ptsz, DRV_MISSING, uvmc_use_2d(pCopy), pCopy, hStream)
}
CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
    UVMC_OBSERVED(cuMemcpy3D_v2, DRV_MISSING, uvmc_use_3d_drv(pCopy), pCopy)
}
CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy)
{
    UVMC_OBSERVED(cuMemcpy3D_v2_ptds, DRV_MISSING, uvmc_use_3d_drv(pCopy), pCopy)
}
CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy3DAsync_v2, DRV_MISSING, uvmc_use_3d_drv(pCopy), pCopy, hStream)
}
CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy3DAsync_v2_ptsz, DRV_MISSING, uvmc_use_3d_drv(pCopy), pCopy, hStream)
}

CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyHtoA_v2, DRV_MISSING, DUSE(srcHost, ByteCount), dstArray, dstOffset, srcHost, ByteCount)
}
CUresult cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyHtoA_v2_ptds, DRV_MISSING, DUSE(srcHost, ByteCount), dstArray, dstOffset, srcHost, ByteCount)
}
CUresult cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount,
                              CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyHtoAAsync_v2, DRV_MISSING, DUSE(srcHost, ByteCount), dstArray, dstOffset, srcHost,
                  ByteCount, hStream)
}
CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount,
                                   CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyHtoAAsync_v2_ptsz, DRV_MISSING, DUSE(srcHost, ByteCount), dstArray, dstOffset, srcHost,
                  ByteCount, hStream)
}
CUresult cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyAtoH_v2, DRV_MISSING, DUSE(dstHost, ByteCount), dstHost, srcArray, srcOffset, ByteCount)
}
CUresult cuMemcpyAtoH_v2_ptds(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyAtoH_v2_ptds, DRV_MISSING, DUSE(dstHost, ByteCount), dstHost, srcArray, srcOffset, ByteCount)
}
CUresult cuMemcpyAtoHAsync_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyAtoHAsync_v2, DRV_MISSING, DUSE(dstHost, ByteCount), dstHost, srcArray, srcOffset,
                  ByteCount, hStream)
}
CUresult cuMemcpyAtoHAsync_v2_ptsz(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount,
                                   CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyAtoHAsync_v2_ptsz, DRV_MISSING, DUSE(dstHost, ByteCount), dstHost, srcArray, srcOffset,
                  ByteCount, hStream)
}
