/* sim_memory.c: simulated memory: the allocation table (managed, device, pinned host, registered host),
 * the alloc/free/register entry points, address ranges and pointer attributes. */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_internal.h"

/* ------------------------------------------------------------------ allocation table */

struct alloc *sim_allocs;
size_t sim_nallocs;
static size_t g_cap_allocs;
static unsigned long long g_next_buffer_id = 1;

struct alloc *sim_find_alloc_locked(uintptr_t p) {
    for (size_t i = 0; i < sim_nallocs; i++)
        if (p >= sim_allocs[i].base && p < sim_allocs[i].base + sim_allocs[i].size) return &sim_allocs[i];
    return NULL;
}

static int add_alloc_locked(struct alloc a) {
    if (sim_nallocs == g_cap_allocs) {
        size_t nc = g_cap_allocs ? g_cap_allocs * 2 : 64;
        struct alloc *na = realloc(sim_allocs, nc * sizeof *na);
        if (!na) return -1;
        sim_allocs = na;
        g_cap_allocs = nc;
    }
    a.id = g_next_buffer_id++;
    sim_allocs[sim_nallocs++] = a;
    return 0;
}

static void pinned_add_locked(long long d) {
    sim_pinned = (unsigned long long)((long long)sim_pinned + d);
    if (sim_pinned > sim_pinned_peak) sim_pinned_peak = sim_pinned;
}

/* Memory class of a pointer as the copy engine sees it. */
int sim_mclass_locked(const void *p) {
    struct alloc *a = sim_find_alloc_locked((uintptr_t)p);
    if (!a) return M_PAGEABLE;
    switch (a->kind) {
    case A_DEVICE: return M_DEVICE;
    case A_MANAGED: return M_MANAGED;
    default: return M_PINNED;
    }
}

/* ------------------------------------------------------------------ allocation entry points */

static void *map_bytes(size_t len) {
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* Managed allocations come one after another out of one reserved range (when it can be had), as
 * from a VA allocator: a copy can then run from one allocation into the next, which only a
 * per-allocation check tells apart. Space is never reused; a freed allocation's pages are released
 * and its range stays reserved. */
/* 1 TiB when the address space has it; ThreadSanitizer's restricted layout refuses that about one
 * time in five, so smaller ranges are tried down to 16 GiB before giving up adjacency. */
#define MANAGED_VA_MAX ((size_t)1 << 40)
#define MANAGED_VA_MIN ((size_t)1 << 34)
static char *g_va, *g_va_next;
static size_t g_va_len;

static char *managed_va_take(size_t span) {
    pthread_mutex_lock(&sim_mu);
    if (!g_va) {
        g_va = (char *)-1;
        for (size_t len = MANAGED_VA_MAX; len >= MANAGED_VA_MIN && g_va == (char *)-1; len /= 4) {
            void *r = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (r != MAP_FAILED) g_va = g_va_next = r, g_va_len = len;
        }
    }
    char *p = NULL;
    if (g_va != (char *)-1 && (size_t)(g_va + g_va_len - g_va_next) >= span) {
        p = g_va_next;
        g_va_next += span;
    }
    pthread_mutex_unlock(&sim_mu);
    if (p && mprotect(p, span, PROT_READ | PROT_WRITE) != 0) p = NULL; /* a hole is left: harmless */
    return p;
}

static void release_pages(const struct alloc *a) {
    if (!a->map) /* registered memory is the program's */
        return;
    if (a->in_va) /* fresh inaccessible pages in place: the range stays ours */
        mmap(a->map, a->maplen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    else
        munmap(a->map, a->maplen);
}

/* Everything an allocation holds, once it is out of the table. */
static void drop_alloc(const struct alloc *a) {
    release_pages(a);
    free(a->adv);
    free(a->res);
}

static CUresult alloc_common(void **out, size_t size, int kind, int global, unsigned flags) {
    NEED_CTX();
    if (!out || size == 0) return CUDA_ERROR_INVALID_VALUE;
    CUresult g = sim_unsafe_guard();
    if (g) return g;
    struct alloc a = { 0 };
    a.kind = kind;
    a.dev = sim_cur_dev();
    a.size = size;
    a.flags = flags;
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (size + pg - 1) / pg * pg;
    if (kind == A_MANAGED || kind == A_DEVICE) {
        /* 2 MiB aligned base, like the UVM driver's VA blocks. Managed allocations are placed right
         * after the previous one when that address is free, as a VA allocator may: a copy can then
         * run from one allocation into the next, which only a per-allocation check tells apart. */
        size_t span = (len + MIB2 - 1) & ~(MIB2 - 1);
        char *m = kind == A_MANAGED ? managed_va_take(span) : NULL;
        if (m) {
            a.map = m;
            a.maplen = span;
            a.base = (uintptr_t)m;
            a.in_va = 1;
        } else {
            size_t mlen = len + MIB2;
            m = map_bytes(mlen);
            if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
            a.map = m;
            a.maplen = mlen;
            a.base = ((uintptr_t)m + MIB2 - 1) & ~(uintptr_t)(MIB2 - 1);
        }

        if (kind == A_MANAGED) {
            a.npages = (size + MIB2 - 1) / MIB2;
            a.global = global;
            a.nadv = (size + ADV_PAGE - 1) / ADV_PAGE;
            a.adv = calloc(a.nadv, sizeof *a.adv);
            if (!a.adv || sim_res_new(&a)) { free(a.adv); release_pages(&a); return CUDA_ERROR_OUT_OF_MEMORY; }
        }
    } else {
        char *m = map_bytes(len);
        if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t off = 0; off < len; off += pg) ((volatile char *)m)[off] = 0; /* commit: page-locked */
        a.map = m;
        a.maplen = len;
        a.base = (uintptr_t)m;
    }
    pthread_mutex_lock(&sim_mu);
    if (add_alloc_locked(a)) {
        pthread_mutex_unlock(&sim_mu);
        drop_alloc(&a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (kind == A_HOST) pinned_add_locked((long long)size);
    pthread_mutex_unlock(&sim_mu);
    *out = (void *)a.base;
    return CUDA_SUCCESS;
}

static CUresult free_common(uintptr_t p, int want_host) {
    NEED_CTX();
    if (!p) return CUDA_SUCCESS;
    CUresult g = sim_unsafe_guard();
    if (g) return g;
    pthread_mutex_lock(&sim_mu);
    /* freeing synchronizes the device, like the real cuMemFree */
    for (struct stream *t = sim_streams_all; t; t = t->all_next) sim_wait_stream_locked(t, t->enq_seq);
    size_t i;
    for (i = 0; i < sim_nallocs; i++)
        if (sim_allocs[i].base == p) break;
    if (i == sim_nallocs || (want_host ? sim_allocs[i].kind != A_HOST
                                     : (sim_allocs[i].kind != A_DEVICE && sim_allocs[i].kind != A_MANAGED))) {
        pthread_mutex_unlock(&sim_mu);
        return CUDA_ERROR_INVALID_VALUE;
    }
    struct alloc a = sim_allocs[i];
    sim_allocs[i] = sim_allocs[--sim_nallocs];
    if (a.kind == A_HOST) pinned_add_locked(-(long long)a.size);
    pthread_mutex_unlock(&sim_mu);
    drop_alloc(&a);
    return CUDA_SUCCESS;
}

/* cuDevicePrimaryCtxReset: the device idles, then every allocation and registration of the context
 * is gone; pinned and managed pages are unmapped, so a stale pointer faults as on the real driver,
 * where the context's memory is released. Streams and events survive (lenient: the real reset
 * destroys them too). */
void sim_memory_reset(int dev) {
    pthread_mutex_lock(&sim_mu);
    for (struct stream *t = sim_streams_all; t; t = t->all_next)
        if (t->dev == dev) sim_wait_stream_locked(t, t->enq_seq);
    struct alloc *gone = malloc((sim_nallocs ? sim_nallocs : 1) * sizeof *gone);
    size_t n = 0;
    if (gone) {
        for (size_t i = 0; i < sim_nallocs;) {
            if (sim_allocs[i].dev != dev) { i++; continue; }
            if (sim_allocs[i].kind == A_HOST || sim_allocs[i].kind == A_REGISTERED) pinned_add_locked(-(long long)sim_allocs[i].size);
            gone[n++] = sim_allocs[i];
            sim_allocs[i] = sim_allocs[--sim_nallocs];
        }
    }
    pthread_mutex_unlock(&sim_mu);
    for (size_t i = 0; i < n; i++) drop_alloc(&gone[i]);
    free(gone);
}

CUresult CUDAAPI cuMemAlloc_v2(CUdeviceptr *dptr, size_t n) { ENTER("cuMemAlloc_v2"); return alloc_common((void **)dptr, n, A_DEVICE, 0, 0); }
CUresult CUDAAPI cuMemAllocManaged(CUdeviceptr *dptr, size_t n, unsigned int flags) {
    ENTER("cuMemAllocManaged");
    if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST) return CUDA_ERROR_INVALID_VALUE;
    return alloc_common((void **)dptr, n, A_MANAGED, flags == CU_MEM_ATTACH_GLOBAL, 0);
}
CUresult CUDAAPI cuMemFree_v2(CUdeviceptr p) { ENTER("cuMemFree_v2"); return free_common(p, 0); }
CUresult CUDAAPI cuMemHostAlloc(void **pp, size_t n, unsigned int flags) {
    ENTER("cuMemHostAlloc");
    if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
        return CUDA_ERROR_INVALID_VALUE;
    return alloc_common(pp, n, A_HOST, 0, flags);
}
CUresult CUDAAPI cuMemAllocHost_v2(void **pp, size_t n) { ENTER("cuMemAllocHost_v2"); return alloc_common(pp, n, A_HOST, 0, 0); }
CUresult CUDAAPI cuMemFreeHost(void *p) { ENTER("cuMemFreeHost"); return free_common((uintptr_t)p, 1); }

static CUresult host_register(void *p, size_t n, unsigned flags) {
    NEED_CTX();
    if (!p || !n) return CUDA_ERROR_INVALID_VALUE;
    CUresult g = sim_unsafe_guard();
    if (g) return g;
    pthread_mutex_lock(&sim_mu);
    for (size_t i = 0; i < sim_nallocs; i++) {
        uintptr_t b = sim_allocs[i].base, e = b + sim_allocs[i].size;
        if ((uintptr_t)p < e && (uintptr_t)p + n > b) {
            pthread_mutex_unlock(&sim_mu);
            return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
        }
    }
    struct alloc a = { 0 };
    a.base = (uintptr_t)p;
    a.size = n;
    a.kind = A_REGISTERED;
    a.dev = sim_cur_dev();
    a.flags = flags;
    if (add_alloc_locked(a)) { pthread_mutex_unlock(&sim_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    pinned_add_locked((long long)n);
    pthread_mutex_unlock(&sim_mu);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemHostRegister_v2(void *p, size_t n, unsigned int flags) { ENTER("cuMemHostRegister_v2"); return host_register(p, n, flags); }
CUresult CUDAAPI cuMemHostRegister(void *p, size_t n, unsigned int flags) { ENTER("cuMemHostRegister"); return host_register(p, n, flags); }
CUresult CUDAAPI cuMemHostUnregister(void *p) {
    ENTER("cuMemHostUnregister");
    NEED_CTX();
    CUresult g = sim_unsafe_guard();
    if (g) return g;
    pthread_mutex_lock(&sim_mu);
    for (size_t i = 0; i < sim_nallocs; i++)
        if (sim_allocs[i].kind == A_REGISTERED && sim_allocs[i].base == (uintptr_t)p) {
            pinned_add_locked(-(long long)sim_allocs[i].size);
            sim_allocs[i] = sim_allocs[--sim_nallocs];
            pthread_mutex_unlock(&sim_mu);
            return CUDA_SUCCESS;
        }
    pthread_mutex_unlock(&sim_mu);
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}

CUresult CUDAAPI cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr p) {
    ENTER("cuMemGetAddressRange_v2");
    pthread_mutex_lock(&sim_mu);
    struct alloc *a = sim_find_alloc_locked(p);
    CUresult r = CUDA_ERROR_NOT_FOUND;
    /* Documented for cuMemAddressReserve ranges; reported not to handle managed memory (openucx/ucx#7485). */
    if (a && a->kind == A_MANAGED && sim_sw.managed_range != SIM_RANGE_EXACT) r = CUDA_ERROR_INVALID_VALUE;
    else if (a && a->kind != A_REGISTERED) {
        if (pbase) *pbase = a->base;
        if (psize) *psize = a->size;
        r = CUDA_SUCCESS;
    }
    pthread_mutex_unlock(&sim_mu);
    return r;
}

CUresult CUDAAPI cuMemGetInfo_v2(size_t *freeb, size_t *total) {
    ENTER("cuMemGetInfo_v2");
    NEED_CTX();
    /* Per device: 16 GiB, 1 GiB of it taken by the context, less what cuMemAlloc took there. */
    int dev = sim_cur_dev();
    size_t used = (size_t)1 << 30, total_b = (size_t)16 << 30;
    pthread_mutex_lock(&sim_mu);
    for (size_t i = 0; i < sim_nallocs; i++)
        if (sim_allocs[i].kind == A_DEVICE && sim_allocs[i].dev == dev) used += sim_allocs[i].size;
    pthread_mutex_unlock(&sim_mu);
    if (total) *total = total_b;
    if (freeb) *freeb = used < total_b ? total_b - used : 0;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ pointer attributes */

static CUresult ptr_attr_locked(void *data, CUpointer_attribute at, uintptr_t p, int strict) {
    struct alloc *a = sim_find_alloc_locked(p);
    if (!a && strict) return CUDA_ERROR_INVALID_VALUE;
    switch (at) {
    case CU_POINTER_ATTRIBUTE_CONTEXT: *(CUcontext *)data = a ? (CUcontext)&sim_primary[a->dev] : NULL; break;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data = !a ? 0u : (a->kind == A_DEVICE || a->kind == A_MANAGED) ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST;
        break;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER: *(CUdeviceptr *)data = a ? p : 0; break;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
        if (a && a->kind == A_DEVICE) {
            if (strict) return CUDA_ERROR_INVALID_VALUE;
            *(void **)data = NULL;
        } else *(void **)data = a ? (void *)p : NULL;
        break;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS: *(unsigned char *)data = 0; break;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID: *(unsigned long long *)data = a ? a->id : 0; break;
    case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned int *)data = a && a->kind == A_MANAGED; break;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL: *(int *)data = a ? a->dev : -2; break;
    /* UVMSIM_MANAGED_RANGE=none: managed memory answers 0; refuse: the whole query fails (README.md) */
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE: {
        int exact = a && (a->kind != A_MANAGED || sim_sw.managed_range == SIM_RANGE_EXACT);
        if (a && a->kind == A_MANAGED && sim_sw.managed_range == SIM_RANGE_REFUSE) return CUDA_ERROR_INVALID_VALUE;
        if (at == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) *(CUdeviceptr *)data = exact ? a->base : 0;
        else *(size_t *)data = exact ? a->size : 0;
        break;
    }
    case CU_POINTER_ATTRIBUTE_MAPPED: *(unsigned char *)data = a != NULL; break;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE: *(void **)data = NULL; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

CUresult CUDAAPI cuPointerGetAttribute(void *data, CUpointer_attribute at, CUdeviceptr p) {
    ENTER("cuPointerGetAttribute");
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mu);
    CUresult r = ptr_attr_locked(data, at, p, 1);
    pthread_mutex_unlock(&sim_mu);
    return r;
}

CUresult CUDAAPI cuPointerGetAttributes(unsigned int num, CUpointer_attribute *ats, void **data, CUdeviceptr p) {
    ENTER("cuPointerGetAttributes");
    if (!ats || !data) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_mu);
    for (unsigned i = 0; i < num && !r; i++)
        if (data[i]) r = ptr_attr_locked(data[i], ats[i], p, 0);
    pthread_mutex_unlock(&sim_mu);
    return r;
}

int uvmsim_host_flags(const void *p) {
    pthread_mutex_lock(&sim_mu);
    struct alloc *a = sim_find_alloc_locked((uintptr_t)p);
    int r = a && (a->kind == A_HOST || a->kind == A_REGISTERED) ? (int)a->flags : -1;
    pthread_mutex_unlock(&sim_mu);
    return r;
}
