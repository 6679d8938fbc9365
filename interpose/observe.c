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

static void uvmc_use_3d_peer_drv(const CUDA_MEMCPY3D_PEER *p)
{
    UVMC_USE_3D_DRV(p);
}

/* Batch copies (CUDA 12.8+): every pair; nothing looked at while no lazy buffer waits. */
static void uvmc_use_batch_drv(const CUdeviceptr *dsts, const CUdeviceptr *srcs, const size_t *sizes, size_t count)
{
    if (uvmc_lazy_none() || !dsts || !srcs || !sizes)
        return;
    for (size_t i = 0; i < count; i++) {
        uvmc_lazy_use((const void *)(uintptr_t)dsts[i], sizes[i], NULL);
        uvmc_lazy_use((const void *)(uintptr_t)srcs[i], sizes[i], NULL);
    }
}

/* A pointer operand of a 3-D batch copy (as runtime_observe.c's: bytes between pointers, at most
 * 16 per element against an array). */
static void uvmc_use_operand_drv(const CUmemcpy3DOperand *o, const CUmemcpy3DOperand *other, const CUextent3D *e)
{
    if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER || !e->width || !e->height || !e->depth)
        return;
    size_t row = o->op.ptr.rowLength ? o->op.ptr.rowLength : e->width;
    size_t layer = o->op.ptr.layerHeight ? o->op.ptr.layerHeight : e->height;
    size_t elem = other->type == CU_MEMCPY_OPERAND_TYPE_ARRAY ? 16 : 1;
    uvmc_lazy_use((const void *)(uintptr_t)o->op.ptr.ptr,
                  elem * (row * layer * (e->depth - 1) + row * (e->height - 1) + e->width), NULL);
}

static void uvmc_use_batch_3d_drv(size_t numOps, const CUDA_MEMCPY3D_BATCH_OP *ops)
{
    if (uvmc_lazy_none() || !ops)
        return;
    for (size_t i = 0; i < numOps; i++) {
        uvmc_use_operand_drv(&ops[i].src, &ops[i].dst, &ops[i].extent);
        uvmc_use_operand_drv(&ops[i].dst, &ops[i].src, &ops[i].extent);
    }
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

/* ---- memsets (the legacy 32-bit forms cannot address a lazy buffer), peer and batch copies */

CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    UVMC_OBSERVED(cuMemsetD8_v2, DUSE(dstDevice, N), dstDevice, uc, N)
}
CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N)
{
    UVMC_OBSERVED(cuMemsetD8_v2_ptds, DUSE(dstDevice, N), dstDevice, uc, N)
}
CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    UVMC_OBSERVED(cuMemsetD16_v2, DUSE(dstDevice, 2 * N), dstDevice, us, N)
}
CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N)
{
    UVMC_OBSERVED(cuMemsetD16_v2_ptds, DUSE(dstDevice, 2 * N), dstDevice, us, N)
}
CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    UVMC_OBSERVED(cuMemsetD32_v2, DUSE(dstDevice, 4 * N), dstDevice, ui, N)
}
CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N)
{
    UVMC_OBSERVED(cuMemsetD32_v2_ptds, DUSE(dstDevice, 4 * N), dstDevice, ui, N)
}
CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    UVMC_OBSERVED(cuMemsetD8Async, DUSE(dstDevice, N), dstDevice, uc, N, hStream)
}
CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N, CUstream hStream)
{
    UVMC_OBSERVED(cuMemsetD8Async_ptsz, DUSE(dstDevice, N), dstDevice, uc, N, hStream)
}
CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
    UVMC_OBSERVED(cuMemsetD16Async, DUSE(dstDevice, 2 * N), dstDevice, us, N, hStream)
}
CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N, CUstream hStream)
{
    UVMC_OBSERVED(cuMemsetD16Async_ptsz, DUSE(dstDevice, 2 * N), dstDevice, us, N, hStream)
}
CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    UVMC_OBSERVED(cuMemsetD32Async, DUSE(dstDevice, 4 * N), dstDevice, ui, N, hStream)
}
CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N, CUstream hStream)
{
    UVMC_OBSERVED(cuMemsetD32Async_ptsz, DUSE(dstDevice, 4 * N), dstDevice, ui, N, hStream)
}

#define SET_2D(name, elem, ...) \
    UVMC_OBSERVED(name, DUSE(dstDevice, uvmc_pitched(dstPitch, 0, 0, (elem) * Width, Height)), __VA_ARGS__)
CUresult cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height)
{
    SET_2D(cuMemsetD2D8_v2, 1, dstDevice, dstPitch, uc, Width, Height)
}
CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height)
{
    SET_2D(cuMemsetD2D8_v2_ptds, 1, dstDevice, dstPitch, uc, Width, Height)
}
CUresult cuMemsetD2D16_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height)
{
    SET_2D(cuMemsetD2D16_v2, 2, dstDevice, dstPitch, us, Width, Height)
}
CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height)
{
    SET_2D(cuMemsetD2D16_v2_ptds, 2, dstDevice, dstPitch, us, Width, Height)
}
CUresult cuMemsetD2D32_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height)
{
    SET_2D(cuMemsetD2D32_v2, 4, dstDevice, dstPitch, ui, Width, Height)
}
CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height)
{
    SET_2D(cuMemsetD2D32_v2_ptds, 4, dstDevice, dstPitch, ui, Width, Height)
}
CUresult cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height,
                           CUstream hStream)
{
    SET_2D(cuMemsetD2D8Async, 1, dstDevice, dstPitch, uc, Width, Height, hStream)
}
CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc, size_t Width, size_t Height,
                                CUstream hStream)
{
    SET_2D(cuMemsetD2D8Async_ptsz, 1, dstDevice, dstPitch, uc, Width, Height, hStream)
}
CUresult cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width, size_t Height,
                            CUstream hStream)
{
    SET_2D(cuMemsetD2D16Async, 2, dstDevice, dstPitch, us, Width, Height, hStream)
}
CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us, size_t Width,
                                 size_t Height, CUstream hStream)
{
    SET_2D(cuMemsetD2D16Async_ptsz, 2, dstDevice, dstPitch, us, Width, Height, hStream)
}
CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height,
                            CUstream hStream)
{
    SET_2D(cuMemsetD2D32Async, 4, dstDevice, dstPitch, ui, Width, Height, hStream)
}
CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui, size_t Width, size_t Height,
                                 CUstream hStream)
{
    SET_2D(cuMemsetD2D32Async_ptsz, 4, dstDevice, dstPitch, ui, Width, Height, hStream)
}

CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
                      size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyPeer, (DUSE(dstDevice, ByteCount), DUSE(srcDevice, ByteCount)), dstDevice, dstContext,
                  srcDevice, srcContext, ByteCount)
}
CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
                           size_t ByteCount)
{
    UVMC_OBSERVED(cuMemcpyPeer_ptds, (DUSE(dstDevice, ByteCount), DUSE(srcDevice, ByteCount)), dstDevice, dstContext,
                  srcDevice, srcContext, ByteCount)
}
CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice, CUcontext srcContext,
                           size_t ByteCount, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyPeerAsync, (DUSE(dstDevice, ByteCount), DUSE(srcDevice, ByteCount)), dstDevice, dstContext,
                  srcDevice, srcContext, ByteCount, hStream)
}
CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                CUcontext srcContext, size_t ByteCount, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyPeerAsync_ptsz, (DUSE(dstDevice, ByteCount), DUSE(srcDevice, ByteCount)), dstDevice,
                  dstContext, srcDevice, srcContext, ByteCount, hStream)
}
CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy)
{
    UVMC_OBSERVED(cuMemcpy3DPeer, uvmc_use_3d_peer_drv(pCopy), pCopy)
}
CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy)
{
    UVMC_OBSERVED(cuMemcpy3DPeer_ptds, uvmc_use_3d_peer_drv(pCopy), pCopy)
}
CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy3DPeerAsync, uvmc_use_3d_peer_drv(pCopy), pCopy, hStream)
}
CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy3DPeerAsync_ptsz, uvmc_use_3d_peer_drv(pCopy), pCopy, hStream)
}

/* CUDA 12.8's batch ABI (with failIdx) and CUDA 13's (_v2). */
CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                            CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                            CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyBatchAsync, uvmc_use_batch_drv(dsts, srcs, sizes, count), dsts, srcs, sizes, count, attrs,
                  attrsIdxs, numAttrs, failIdx, hStream)
}
CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                 CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                                 CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyBatchAsync_ptsz, uvmc_use_batch_drv(dsts, srcs, sizes, count), dsts, srcs, sizes, count,
                  attrs, attrsIdxs, numAttrs, failIdx, hStream)
}
CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                               CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyBatchAsync_v2, uvmc_use_batch_drv(dsts, srcs, sizes, count), dsts, srcs, sizes, count, attrs,
                  attrsIdxs, numAttrs, hStream)
}
CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                                    CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpyBatchAsync_v2_ptsz, uvmc_use_batch_drv(dsts, srcs, sizes, count), dsts, srcs, sizes, count,
                  attrs, attrsIdxs, numAttrs, hStream)
}
CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx, unsigned long long flags,
                              CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy3DBatchAsync, uvmc_use_batch_3d_drv(numOps, opList), numOps, opList, failIdx, flags, hStream)
}
CUresult cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, size_t *failIdx,
                                   unsigned long long flags, CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy3DBatchAsync_ptsz, uvmc_use_batch_3d_drv(numOps, opList), numOps, opList, failIdx, flags,
                  hStream)
}
CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags,
                                 CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy3DBatchAsync_v2, uvmc_use_batch_3d_drv(numOps, opList), numOps, opList, flags, hStream)
}
CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList, unsigned long long flags,
                                      CUstream hStream)
{
    UVMC_OBSERVED(cuMemcpy3DBatchAsync_v2_ptsz, uvmc_use_batch_3d_drv(numOps, opList), numOps, opList, flags, hStream)
}

/* The legacy (CUDA 2.x) query, 32-bit device pointer out: still a use of the host memory. */
CUresult cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags)
{
    UVMC_OBSERVED(cuMemHostGetDevicePointer, DUSE(p, 1), pdptr, p, Flags)
}

/* A managed allocation through the driver (a program's own, or one fetched with cuGetProcAddress):
 * as runtime_observe.c's cudaMallocManaged, passed through after pyhook.c's one-time check. */
CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
    UVMC_OBSERVED(cuMemAllocManaged, uvmc_pyhook_check(), dptr, bytesize, flags)
}
