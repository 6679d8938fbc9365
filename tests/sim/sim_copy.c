/* sim_copy.c: simulated copies, memsets and memory hints: kind checks, host synchronicity and staging,
 * every cuMemcpy and cuMemset form, prefetch (a stream op), advice per 2 MiB page and range attributes. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

#define P(x) ((void *)(uintptr_t)(x))

/* ------------------------------------------------------------------ copies */

enum ccheck { C_ANY = 0, C_DTOH, C_HTOD, C_DTOD };

static int devside(int mc) { return mc == M_DEVICE || mc == M_MANAGED || mc == M_PINNED; }

/* [p, p+n) inside the one allocation that holds p. */
static int within_alloc_locked(const void *p, size_t n) {
    struct alloc *a = sim_find_alloc_locked((uintptr_t)p);
    return a && n <= a->base + a->size - (uintptr_t)p;
}

static CUresult do_copy(void *dst, const void *src, size_t n, CUstream h, int ptds, int check, int sync_call) {
    NEED_CTX();
    if (n && (!dst || !src)) return CUDA_ERROR_INVALID_VALUE;
    if (sync_call) { CUresult g = sim_unsafe_guard(); if (g) return g; }
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    CUresult r = sim_resolve_locked(h, ptds, &s);
    if (r) { pthread_mutex_unlock(&sim_mu); return r; }
    int ms = sim_mclass_locked(src), md = sim_mclass_locked(dst);
    if (((check == C_DTOH || check == C_DTOD) && !devside(ms)) || ((check == C_HTOD || check == C_DTOD) && !devside(md))) {
        pthread_mutex_unlock(&sim_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    int dev_s = ms == M_DEVICE || ms == M_MANAGED, dev_d = md == M_DEVICE || md == M_MANAGED;
    if ((dev_s && !within_alloc_locked(src, n)) || (dev_d && !within_alloc_locked(dst, n))) {
        pthread_mutex_unlock(&sim_mu);
        return CUDA_ERROR_INVALID_VALUE; /* a device-side range runs past its allocation */
    }
    int host_sync = sync_call || (md == M_PAGEABLE && !(dev_s && sim_sw.pageable_d2h_async)) || (!dev_s && !dev_d);
    int pageable = ms == M_PAGEABLE || md == M_PAGEABLE;
    if (pageable && s->cap_status == CAP_ACTIVE) {
        sim_invalidate_capture_locked(s->cap_id);
        pthread_mutex_unlock(&sim_mu);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    struct op *o = calloc(1, sizeof *o);
    if (!o) { pthread_mutex_unlock(&sim_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    o->kind = OP_COPY;
    o->dst = dst;
    o->src = src;
    o->n = n;
    if (!host_sync && ms == M_PAGEABLE && n && s->cap_status == CAP_NONE) {
        /* pageable source: staged at call time, like the real driver */
        o->staging = malloc(n);
        if (!o->staging) { free(o); pthread_mutex_unlock(&sim_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
        memcpy(o->staging, src, n);
    }
    r = sim_submit_locked(s, o, host_sync, NULL);
    pthread_mutex_unlock(&sim_mu);
    return r;
}

static CUresult do_copy2d(const CUDA_MEMCPY2D *c, CUstream h, int ptds, int sync_call) {
    NEED_CTX();
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    const char *src;
    char *dst;
    switch (c->srcMemoryType) {
    case CU_MEMORYTYPE_HOST: src = c->srcHost; break;
    case CU_MEMORYTYPE_DEVICE: case CU_MEMORYTYPE_UNIFIED: src = P(c->srcDevice); break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    switch (c->dstMemoryType) {
    case CU_MEMORYTYPE_HOST: dst = c->dstHost; break;
    case CU_MEMORYTYPE_DEVICE: case CU_MEMORYTYPE_UNIFIED: dst = P(c->dstDevice); break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    if (c->WidthInBytes && c->Height && (!src || !dst)) return CUDA_ERROR_INVALID_VALUE;
    if ((c->Height > 1 && (c->srcPitch < c->WidthInBytes || c->dstPitch < c->WidthInBytes)))
        return CUDA_ERROR_INVALID_VALUE;
    src += c->srcY * c->srcPitch + c->srcXInBytes;
    dst += c->dstY * c->dstPitch + c->dstXInBytes;
    if (sync_call) { CUresult g = sim_unsafe_guard(); if (g) return g; }
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    CUresult r = sim_resolve_locked(h, ptds, &s);
    if (r) { pthread_mutex_unlock(&sim_mu); return r; }
    int ms = sim_mclass_locked(src), md = sim_mclass_locked(dst);
    if ((c->srcMemoryType == CU_MEMORYTYPE_DEVICE && !devside(ms)) || (c->dstMemoryType == CU_MEMORYTYPE_DEVICE && !devside(md))) {
        pthread_mutex_unlock(&sim_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    int dev_s = ms == M_DEVICE || ms == M_MANAGED, dev_d = md == M_DEVICE || md == M_MANAGED;
    int host_sync = sync_call || (md == M_PAGEABLE && !(dev_s && sim_sw.pageable_d2h_async)) || (!dev_s && !dev_d);
    if ((ms == M_PAGEABLE || md == M_PAGEABLE) && s->cap_status == CAP_ACTIVE) {
        sim_invalidate_capture_locked(s->cap_id);
        pthread_mutex_unlock(&sim_mu);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    struct op *o = calloc(1, sizeof *o);
    if (!o) { pthread_mutex_unlock(&sim_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    o->kind = OP_COPY2D;
    o->dst = dst;
    o->src = src;
    o->dpitch = c->dstPitch;
    o->spitch = c->srcPitch;
    o->width = c->WidthInBytes;
    o->height = c->Height;
    r = sim_submit_locked(s, o, host_sync, NULL);
    pthread_mutex_unlock(&sim_mu);
    return r;
}

static CUresult do_memset(CUdeviceptr d, uint64_t v, int esize, size_t n, CUstream h, int ptds, int sync_call) {
    NEED_CTX();
    if (n && !d) return CUDA_ERROR_INVALID_VALUE;
    if (sync_call) { CUresult g = sim_unsafe_guard(); if (g) return g; }
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    CUresult r = sim_resolve_locked(h, ptds, &s);
    if (r) { pthread_mutex_unlock(&sim_mu); return r; }
    struct alloc *a = sim_find_alloc_locked(d);
    if (n && (!a || d + n * (size_t)esize > a->base + a->size)) { pthread_mutex_unlock(&sim_mu); return CUDA_ERROR_INVALID_VALUE; }
    struct op *o = calloc(1, sizeof *o);
    if (!o) { pthread_mutex_unlock(&sim_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    o->kind = OP_MEMSET;
    o->dst = P(d);
    o->value = v;
    o->esize = esize;
    o->n = n;
    r = sim_submit_locked(s, o, sync_call, NULL);
    pthread_mutex_unlock(&sim_mu);
    return r;
}

/* A fill kernel's effect (sim_kernels.c): an asynchronous memset of esize-byte elements. */
CUresult sim_fill(CUdeviceptr d, uint64_t v, int esize, size_t n, CUstream h, int ptds) {
    if (esize != 1 && esize != 2 && esize != 4 && esize != 8) return CUDA_ERROR_INVALID_VALUE;
    return do_memset(d, v, esize, n, h, ptds, 0);
}

/* Exported copy entry points: every real name, each counted under its own name. */
CUresult CUDAAPI cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) { ENTER("cuMemcpy"); return do_copy(P(dst), P(src), n, NULL, 0, C_ANY, 1); }
CUresult CUDAAPI cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { ENTER("cuMemcpy_ptds"); return do_copy(P(dst), P(src), n, NULL, 1, C_ANY, 1); }
CUresult CUDAAPI cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { ENTER("cuMemcpyAsync"); return do_copy(P(dst), P(src), n, h, 0, C_ANY, 0); }
CUresult CUDAAPI cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { ENTER("cuMemcpyAsync_ptsz"); return do_copy(P(dst), P(src), n, h, 1, C_ANY, 0); }

CUresult CUDAAPI cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) { ENTER("cuMemcpyDtoH_v2"); return do_copy(dst, P(src), n, NULL, 0, C_DTOH, 1); }
CUresult CUDAAPI cuMemcpyDtoH_v2_ptds(void *dst, CUdeviceptr src, size_t n) { ENTER("cuMemcpyDtoH_v2_ptds"); return do_copy(dst, P(src), n, NULL, 1, C_DTOH, 1); }
CUresult CUDAAPI cuMemcpyDtoH(void *dst, CUdeviceptr_v1 src, unsigned int n) { ENTER("cuMemcpyDtoH"); return do_copy(dst, P(src), n, NULL, 0, C_DTOH, 1); }
CUresult CUDAAPI cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream h) { ENTER("cuMemcpyDtoHAsync_v2"); return do_copy(dst, P(src), n, h, 0, C_DTOH, 0); }
CUresult CUDAAPI cuMemcpyDtoHAsync_v2_ptsz(void *dst, CUdeviceptr src, size_t n, CUstream h) { ENTER("cuMemcpyDtoHAsync_v2_ptsz"); return do_copy(dst, P(src), n, h, 1, C_DTOH, 0); }
CUresult CUDAAPI cuMemcpyDtoHAsync(void *dst, CUdeviceptr_v1 src, unsigned int n, CUstream h) { ENTER("cuMemcpyDtoHAsync"); return do_copy(dst, P(src), n, h, 0, C_DTOH, 0); }

CUresult CUDAAPI cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) { ENTER("cuMemcpyHtoD_v2"); return do_copy(P(dst), src, n, NULL, 0, C_HTOD, 1); }
CUresult CUDAAPI cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void *src, size_t n) { ENTER("cuMemcpyHtoD_v2_ptds"); return do_copy(P(dst), src, n, NULL, 1, C_HTOD, 1); }
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr_v1 dst, const void *src, unsigned int n) { ENTER("cuMemcpyHtoD"); return do_copy(P(dst), src, n, NULL, 0, C_HTOD, 1); }
CUresult CUDAAPI cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream h) { ENTER("cuMemcpyHtoDAsync_v2"); return do_copy(P(dst), src, n, h, 0, C_HTOD, 0); }
CUresult CUDAAPI cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void *src, size_t n, CUstream h) { ENTER("cuMemcpyHtoDAsync_v2_ptsz"); return do_copy(P(dst), src, n, h, 1, C_HTOD, 0); }
CUresult CUDAAPI cuMemcpyHtoDAsync(CUdeviceptr_v1 dst, const void *src, unsigned int n, CUstream h) { ENTER("cuMemcpyHtoDAsync"); return do_copy(P(dst), src, n, h, 0, C_HTOD, 0); }

CUresult CUDAAPI cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) { ENTER("cuMemcpyDtoD_v2"); return do_copy(P(dst), P(src), n, NULL, 0, C_DTOD, 1); }
CUresult CUDAAPI cuMemcpyDtoD_v2_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n) { ENTER("cuMemcpyDtoD_v2_ptds"); return do_copy(P(dst), P(src), n, NULL, 1, C_DTOD, 1); }
CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n) { ENTER("cuMemcpyDtoD"); return do_copy(P(dst), P(src), n, NULL, 0, C_DTOD, 1); }
CUresult CUDAAPI cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { ENTER("cuMemcpyDtoDAsync_v2"); return do_copy(P(dst), P(src), n, h, 0, C_DTOD, 0); }
CUresult CUDAAPI cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream h) { ENTER("cuMemcpyDtoDAsync_v2_ptsz"); return do_copy(P(dst), P(src), n, h, 1, C_DTOD, 0); }
CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr_v1 dst, CUdeviceptr_v1 src, unsigned int n, CUstream h) { ENTER("cuMemcpyDtoDAsync"); return do_copy(P(dst), P(src), n, h, 0, C_DTOD, 0); }

CUresult CUDAAPI cuMemcpy2D_v2(const CUDA_MEMCPY2D *c) { ENTER("cuMemcpy2D_v2"); return do_copy2d(c, NULL, 0, 1); }
CUresult CUDAAPI cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *c) { ENTER("cuMemcpy2D_v2_ptds"); return do_copy2d(c, NULL, 1, 1); }
CUresult CUDAAPI cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *c, CUstream h) { ENTER("cuMemcpy2DAsync_v2"); return do_copy2d(c, h, 0, 0); }
CUresult CUDAAPI cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *c, CUstream h) { ENTER("cuMemcpy2DAsync_v2_ptsz"); return do_copy2d(c, h, 1, 0); }

CUresult CUDAAPI cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { ENTER("cuMemsetD8_v2"); return do_memset(d, v, 1, n, NULL, 0, 1); }
CUresult CUDAAPI cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n) { ENTER("cuMemsetD8_v2_ptds"); return do_memset(d, v, 1, n, NULL, 1, 1); }
CUresult CUDAAPI cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) { ENTER("cuMemsetD16_v2"); return do_memset(d, v, 2, n, NULL, 0, 1); }
CUresult CUDAAPI cuMemsetD16_v2_ptds(CUdeviceptr d, unsigned short v, size_t n) { ENTER("cuMemsetD16_v2_ptds"); return do_memset(d, v, 2, n, NULL, 1, 1); }
CUresult CUDAAPI cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n) { ENTER("cuMemsetD32_v2"); return do_memset(d, v, 4, n, NULL, 0, 1); }
CUresult CUDAAPI cuMemsetD32_v2_ptds(CUdeviceptr d, unsigned int v, size_t n) { ENTER("cuMemsetD32_v2_ptds"); return do_memset(d, v, 4, n, NULL, 1, 1); }
CUresult CUDAAPI cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream h) { ENTER("cuMemsetD8Async"); return do_memset(d, v, 1, n, h, 0, 0); }
CUresult CUDAAPI cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream h) { ENTER("cuMemsetD8Async_ptsz"); return do_memset(d, v, 1, n, h, 1, 0); }
CUresult CUDAAPI cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream h) { ENTER("cuMemsetD16Async"); return do_memset(d, v, 2, n, h, 0, 0); }
CUresult CUDAAPI cuMemsetD16Async_ptsz(CUdeviceptr d, unsigned short v, size_t n, CUstream h) { ENTER("cuMemsetD16Async_ptsz"); return do_memset(d, v, 2, n, h, 1, 0); }
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream h) { ENTER("cuMemsetD32Async"); return do_memset(d, v, 4, n, h, 0, 0); }
CUresult CUDAAPI cuMemsetD32Async_ptsz(CUdeviceptr d, unsigned int v, size_t n, CUstream h) { ENTER("cuMemsetD32Async_ptsz"); return do_memset(d, v, 4, n, h, 1, 0); }

/* ------------------------------------------------------------------ hints */

static CUresult managed_range_locked(uintptr_t p, size_t n, struct alloc **out) {
    struct alloc *a = sim_find_alloc_locked(p);
    if (!a || a->kind != A_MANAGED || n == 0 || p + n > a->base + a->size) return CUDA_ERROR_INVALID_VALUE;
    *out = a;
    return CUDA_SUCCESS;
}

static CUresult check_loc(CUmemLocation loc, int allow_host) {
    switch (loc.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return sim_valid_dev(loc.id) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
    case CU_MEM_LOCATION_TYPE_HOST: case CU_MEM_LOCATION_TYPE_HOST_NUMA: case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT:
        return allow_host ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult do_prefetch(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned flags, CUstream h, int ptds) {
    NEED_CTX();
    CUresult r = check_loc(loc, 1);
    if (r) return r;
    if (flags) return CUDA_ERROR_INVALID_VALUE;
    /* Without concurrent managed access there is no prefetch to a device (CUDA Programming Guide, concurrent managed access). */
    if (!sim_sw.cma && loc.type == CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    struct alloc *a;
    r = sim_resolve_locked(h, ptds, &s);
    if (!r) r = managed_range_locked(p, n, &a);
    if (!r && s->cap_status == CAP_ACTIVE) {
        sim_invalidate_capture_locked(s->cap_id);
        r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (r) { pthread_mutex_unlock(&sim_mu); return r; }
    struct op *o = calloc(1, sizeof *o);
    if (!o) { pthread_mutex_unlock(&sim_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    o->kind = OP_PREFETCH;
    o->pf.ptr = P(p);
    o->pf.count = n;
    o->pf.loc_type = loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? UVMSIM_LOC_DEVICE : UVMSIM_LOC_HOST;
    o->pf.loc_id = loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? loc.id : 0;
    o->pf.stream = (void *)h;
    r = sim_submit_locked(s, o, 0, NULL);
    pthread_mutex_unlock(&sim_mu);
    return r;
}

static CUmemLocation dev_to_loc(CUdevice d) {
    CUmemLocation l;
    memset(&l, 0, sizeof l);
    if (d == CU_DEVICE_CPU) l.type = CU_MEM_LOCATION_TYPE_HOST;
    else { l.type = CU_MEM_LOCATION_TYPE_DEVICE; l.id = d; }
    return l;
}

CUresult CUDAAPI cuMemPrefetchAsync_v2(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags, CUstream h) { ENTER("cuMemPrefetchAsync_v2"); return do_prefetch(p, n, loc, flags, h, 0); }
CUresult CUDAAPI cuMemPrefetchAsync_v2_ptsz(CUdeviceptr p, size_t n, CUmemLocation loc, unsigned int flags, CUstream h) { ENTER("cuMemPrefetchAsync_v2_ptsz"); return do_prefetch(p, n, loc, flags, h, 1); }
CUresult CUDAAPI cuMemPrefetchAsync(CUdeviceptr p, size_t n, CUdevice d, CUstream h) { ENTER("cuMemPrefetchAsync"); return do_prefetch(p, n, dev_to_loc(d), 0, h, 0); }
CUresult CUDAAPI cuMemPrefetchAsync_ptsz(CUdeviceptr p, size_t n, CUdevice d, CUstream h) { ENTER("cuMemPrefetchAsync_ptsz"); return do_prefetch(p, n, dev_to_loc(d), 0, h, 1); }

static CUresult do_advise(CUdeviceptr p, size_t n, CUmem_advise adv, CUmemLocation loc) {
    NEED_CTX();
    int needs_loc = adv == CU_MEM_ADVISE_SET_PREFERRED_LOCATION || adv == CU_MEM_ADVISE_SET_ACCESSED_BY ||
                    adv == CU_MEM_ADVISE_UNSET_ACCESSED_BY;
    if (adv < CU_MEM_ADVISE_SET_READ_MOSTLY || adv > CU_MEM_ADVISE_UNSET_ACCESSED_BY) return CUDA_ERROR_INVALID_VALUE;
    if (needs_loc) { CUresult r = check_loc(loc, 1); if (r) return r; }
    pthread_mutex_lock(&sim_mu);
    struct alloc *a;
    CUresult r = managed_range_locked(p, n, &a);
    if (r) { pthread_mutex_unlock(&sim_mu); return r; }
    size_t p0 = ADV_FIRST(a, p), p1 = ADV_LAST(a, p, n);
    unsigned long long bit = loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? 1ull << loc.id : ADV_HOST_BIT;
    for (size_t i = p0; i <= p1 && i < a->nadv; i++) {
        struct page_advice *pa = &a->adv[i];
        switch (adv) {
        case CU_MEM_ADVISE_SET_READ_MOSTLY: pa->read_mostly = 1; break;
        case CU_MEM_ADVISE_UNSET_READ_MOSTLY: pa->read_mostly = 0; break;
        case CU_MEM_ADVISE_SET_PREFERRED_LOCATION:
            pa->pref_type = loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? UVMSIM_LOC_DEVICE : UVMSIM_LOC_HOST;
            pa->pref_id = loc.type == CU_MEM_LOCATION_TYPE_DEVICE ? loc.id : 0;
            break;
        case CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION: pa->pref_type = 0; pa->pref_id = 0; break;
        case CU_MEM_ADVISE_SET_ACCESSED_BY: pa->accessed_by |= bit; break;
        case CU_MEM_ADVISE_UNSET_ACCESSED_BY: pa->accessed_by &= ~bit; break;
        default: break;
        }
    }
    pthread_mutex_unlock(&sim_mu);
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAdvise_v2(CUdeviceptr p, size_t n, CUmem_advise adv, CUmemLocation loc) { ENTER("cuMemAdvise_v2"); return do_advise(p, n, adv, loc); }
CUresult CUDAAPI cuMemAdvise(CUdeviceptr p, size_t n, CUmem_advise adv, CUdevice d) { ENTER("cuMemAdvise"); return do_advise(p, n, adv, dev_to_loc(d)); }

static int loc_as_device(int type, int id) { return type == UVMSIM_LOC_DEVICE ? id : type == UVMSIM_LOC_HOST ? CU_DEVICE_CPU : CU_DEVICE_INVALID; }

CUresult CUDAAPI cuMemRangeGetAttribute(void *data, size_t dsz, CUmem_range_attribute at, CUdeviceptr p, size_t n) {
    ENTER("cuMemRangeGetAttribute");
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mu);
    struct alloc *a;
    CUresult r = managed_range_locked(p, n, &a);
    if (r) { pthread_mutex_unlock(&sim_mu); return r; }
    size_t p0 = ADV_FIRST(a, p), p1 = ADV_LAST(a, p, n);
    struct page_advice *f = &a->adv[p0];
    int same_pref = 1, same_pf = 1, all_rm = 1;
    unsigned long long acc = ~0ull;
    for (size_t i = p0; i <= p1 && i < a->nadv; i++) {
        struct page_advice *pa = &a->adv[i];
        same_pref &= pa->pref_type == f->pref_type && pa->pref_id == f->pref_id;
        same_pf &= pa->last_pf_type == f->last_pf_type && pa->last_pf_id == f->last_pf_id;
        all_rm &= pa->read_mostly;
        acc &= pa->accessed_by;
    }
    int *iv = data;
    if (dsz < 4) r = CUDA_ERROR_INVALID_VALUE;
    else switch (at) {
    case CU_MEM_RANGE_ATTRIBUTE_READ_MOSTLY: *iv = all_rm; break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION: *iv = same_pref ? loc_as_device(f->pref_type, f->pref_id) : CU_DEVICE_INVALID; break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_TYPE: *iv = same_pref ? f->pref_type : CU_MEM_LOCATION_TYPE_INVALID; break;
    case CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION_ID: *iv = same_pref ? f->pref_id : 0; break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION: *iv = same_pf ? loc_as_device(f->last_pf_type, f->last_pf_id) : CU_DEVICE_INVALID; break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_TYPE: *iv = same_pf ? f->last_pf_type : CU_MEM_LOCATION_TYPE_INVALID; break;
    case CU_MEM_RANGE_ATTRIBUTE_LAST_PREFETCH_LOCATION_ID: *iv = same_pf ? f->last_pf_id : 0; break;
    case CU_MEM_RANGE_ATTRIBUTE_ACCESSED_BY: {
        size_t k = 0, m = dsz / 4;
        for (size_t i = 0; i < m; i++) iv[i] = CU_DEVICE_INVALID;
        for (int d = 0; d < sim_sw.devices && acc != ~0ull; d++)
            if ((acc & (1ull << d)) && k < m) iv[k++] = d;
        break;
    }
    default: r = CUDA_ERROR_INVALID_VALUE;
    }
    pthread_mutex_unlock(&sim_mu);
    return r;
}
