/* observe.c: the driver's other uses of host memory the library can see (copies of any kind and
 * dimensionality, pointer and flag queries): a lazily pinned buffer they touch becomes pinned
 * memory first (lazy.c), then the real call proceeds unchanged. While no lazy buffer is waiting for
 * its first use, each wrapper costs one load and one comparison on top of the real call. The
 * runtime's are in runtime_observe.c. */
#include <stdint.h>

#include "uvmc.h"

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
        uvmc_lazy_use(s, uvmc_pitched(p->srcPitch, p->srcXInBytes, p->srcY, p->WidthInBytes, p->Height), NULL);
    if (d)
        uvmc_lazy_use(d, uvmc_pitched(p->dstPitch, p->dstXInBytes, p->dstY, p->WidthInBytes, p->Height), NULL);
}

/* A driver 3-D descriptor's sides (CUDA_MEMCPY3D and CUDA_MEMCPY3D_PEER name them alike): every
 * slice up to the last one the copy reaches. */
#define UVMC_USE_3D_DRV(p)                                                                               \
    do {                                                                                                 \
        if (!(p) || !(p)->Depth)                                                                         \
            break;                                                                                       \
        const void *s_ = uvmc_side((p)->srcMemoryType, (p)->srcHost, (p)->srcDevice);                   \
        const void *d_ = uvmc_side((p)->dstMemoryType, (p)->dstHost, (p)->dstDevice);                   \
        size_t sh_ = (p)->srcHeight ? (p)->srcHeight : (p)->srcY + (p)->Height;                           \
        size_t dh_ = (p)->dstHeight ? (p)->dstHeight : (p)->dstY + (p)->Height;                           \
        if (s_)                                                                                          \
            uvmc_lazy_use(s_, (p)->srcPitch * sh_ * ((p)->srcZ + (p)->Depth), NULL);                       \
        if (d_)                                                                                          \
            uvmc_lazy_use(d_, (p)->dstPitch * dh_ * ((p)->dstZ + (p)->Depth), NULL);                       \
    } while (0)

static void uvmc_use_3d_drv(const CUDA_MEMCPY3D *p)
{
    UVMC_USE_3D_DRV(p);
}

/* One wrapper: resolve, note the uses, then the real call with the caller's arguments. */
#define UVMC_OBSERVED(name, uses, ...)                                \
    UVMC_REAL_OR_RETURN(name, CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND) \
    UVMC_OBSERVE_AND_CALL(uvmc_real.name, uses, __VA_ARGS__)
#define DUSE(p, n) uvmc_lazy_use((const void *)(uintptr_t)(p), (n), NULL)

/* ---- queries */

CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr)
{
    UVMC_OBSERVED(cuPointerGetAttribute, DUSE(ptr, 1), data, attribute, ptr)
}

CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute *attributes, void **data,
                                CUdeviceptr ptr)
{
    UVMC_OBSERVED(cuPointerGetAttributes, DUSE(ptr, 1), numAttributes, attributes, data, ptr)
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags)
{
    UVMC_OBSERVED(cuMemHostGetDevicePointer_v2, DUSE(p, 1), pdptr, p, Flags)
}

CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p)
{
    UVMC_OBSERVED(cuMemHostGetFlags, DUSE(p, 1), pFlags, p)
}

/* ---- copies other than device-to-host and unified ones (driver.c) */

CUresult cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount)
{
    UVMC_OBSERVED(cuMemcpyHtoD, DUSE(srcHost, ByteCount), dstDevice, srcHost, ByteCount)
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyHtoD_v2, DUSE(srcHost, ByteCount), dstDevice, srcHost, ByteCount)
}

CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyHtoD_v2_ptds, DUSE(srcHost, ByteCount), dstDevice, srcHost, ByteCount)
}

CUresult cuMemcpyHtoDAsync(CUdeviceptr_v1 dstDevice, const void *srcHost, unsigned int ByteCount, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyHtoDAsync, DUSE(srcHost, ByteCount), dstDevice, srcHost, ByteCount, hStream)
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyHtoDAsync_v2, DUSE(srcHost, ByteCount), dstDevice, srcHost, ByteCount, hStream)
}

CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyHtoDAsync_v2_ptsz, DUSE(srcHost, ByteCount), dstDevice, srcHost, ByteCount,
                  hStream)
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy)
{
    UVMC_OBSERVED(cuMemcpy2D_v2, uvmc_use_2d(pCopy), pCopy)
}

CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    UVMC_OBSERVED(cuMemcpy2D_v2_ptds, uvmc_use_2d(pCopy), pCopy)
}

CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy)
{
    UVMC_OBSERVED(cuMemcpy2DUnaligned_v2, uvmc_use_2d(pCopy), pCopy)
}

CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy)
{
    UVMC_OBSERVED(cuMemcpy2DUnaligned_v2_ptds, uvmc_use_2d(pCopy), pCopy)
}

CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy2DAsync_v2, uvmc_use_2d(pCopy), pCopy, hStream)
}

CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy2DAsync_v2_ptsz, uvmc_use_2d(pCopy), pCopy, hStream)
}

CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy)
{
    UVMC_OBSERVED(cuMemcpy3D_v2, uvmc_use_3d_drv(pCopy), pCopy)
}

CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy)
{
    UVMC_OBSERVED(cuMemcpy3D_v2_ptds, uvmc_use_3d_drv(pCopy), pCopy)
}

CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy3DAsync_v2, uvmc_use_3d_drv(pCopy), pCopy, hStream)
}

CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy3DAsync_v2_ptsz, uvmc_use_3d_drv(pCopy), pCopy, hStream)
}

CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyHtoA_v2, DUSE(srcHost, ByteCount), dstArray, dstOffset, srcHost, ByteCount)
}

CUresult cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyHtoA_v2_ptds, DUSE(srcHost, ByteCount), dstArray, dstOffset, srcHost, ByteCount)
}

CUresult cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount,
                              CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyHtoAAsync_v2, DUSE(srcHost, ByteCount), dstArray, dstOffset, srcHost,
                  ByteCount, hStream)
}

CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset, const void *srcHost, size_t ByteCount,
                                   CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyHtoAAsync_v2_ptsz, DUSE(srcHost, ByteCount), dstArray, dstOffset, srcHost,
                  ByteCount, hStream)
}

CUresult cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyAtoH_v2, DUSE(dstHost, ByteCount), dstHost, srcArray, srcOffset, ByteCount)
}

CUresult cuMemcpyAtoH_v2_ptds(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyAtoH_v2_ptds, DUSE(dstHost, ByteCount), dstHost, srcArray, srcOffset, ByteCount)
}

CUresult cuMemcpyAtoHAsync_v2(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyAtoHAsync_v2, DUSE(dstHost, ByteCount), dstHost, srcArray, srcOffset,
                  ByteCount, hStream)
}

CUresult cuMemcpyAtoHAsync_v2_ptsz(void *dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount,
                                   CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyAtoHAsync_v2_ptsz, DUSE(dstHost, ByteCount), dstHost, srcArray, srcOffset,
                  ByteCount, hStream)
}

