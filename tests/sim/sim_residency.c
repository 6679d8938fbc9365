/* sim_residency.c: where each 2 MiB block of managed memory lives (host or device), page faults that
 * move it, concurrent-managed-access violations, and the device-access check of uvmsim.h.
 * A block the CPU may not touch is mprotect'ed; a CPU touch then faults into the handler here, which
 * does what the UVM driver would (migrate, or count a violation) and lets the access go on. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_internal.h"

static unsigned long long g_device_busy; /* device ops queued or running, all streams (under sim_mu) */
static struct sigaction g_old_segv;
static int g_handler_installed;

static size_t block_len(const struct alloc *a, size_t b)
{
    size_t pg = (size_t)sysconf(_SC_PAGESIZE);
    size_t end = (a->size + pg - 1) / pg * pg;
    size_t off = b * MIB2;
    return end - off < MIB2 ? end - off : MIB2;
}

/* The CPU may not touch a block that lives on the device (it would fault and migrate), nor, without
 * concurrent managed access, globally attached managed memory while device work runs. */
static int wants_protection(const struct alloc *a, const struct block_state *b)
{
    if (b->busy || b->excused)
        return 0;
    return b->on_device || (!sim_sw.cma && a->global && g_device_busy);
}

static void handle_segv(int sig, siginfo_t *si, void *uc);

static void apply_locked(struct alloc *a, size_t i)
{
    struct block_state *b = &a->res[i];
    int want = wants_protection(a, b);
    if (want == b->protected_)
        return;
    if (want && !g_handler_installed) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = handle_segv;
        sa.sa_flags = SA_SIGINFO | SA_NODEFER;
        sigemptyset(&sa.sa_mask);
        if (sigaction(SIGSEGV, &sa, &g_old_segv) != 0)
            return;
        g_handler_installed = 1;
    }
    if (mprotect((void *)(a->base + i * MIB2), block_len(a, i), want ? PROT_NONE : PROT_READ | PROT_WRITE) == 0)
        b->protected_ = (unsigned char)want;
}

static void apply_all_locked(void)
{
    for (size_t k = 0; k < sim_nallocs; k++) {
        struct alloc *a = &sim_allocs[k];
        if (a->kind == A_MANAGED && a->res)
            for (size_t i = 0; i < a->npages; i++)
                apply_locked(a, i);
    }
}

int sim_res_new(struct alloc *a)
{
    a->res = calloc(a->npages, sizeof *a->res);
    return a->res ? 0 : -1;
}

/* A CPU touch of a protected managed block: the device-resident block migrates to the host; a
 * touch while CMA = 0 forbids it is counted (the real driver would kill the process). The faulting
 * thread never holds sim_mu (the simulator touches managed bytes only in workers, outside it). */
static void handle_segv(int sig, siginfo_t *si, void *uc)
{
    uintptr_t p = (uintptr_t)si->si_addr;
    int handled = 0;
    pthread_mutex_lock(&sim_mu);
    struct alloc *a = sim_find_alloc_locked(p);
    if (a && a->kind == A_MANAGED && a->res) {
        size_t i = (p - a->base) / MIB2;
        struct block_state *b = &a->res[i];
        if (!sim_sw.cma && a->global && g_device_busy) {
            atomic_fetch_add(&sim_cma_violations, 1);
            b->excused = 1; /* one count per block and busy period */
        }
        if (b->on_device) {
            b->on_device = 0;
            atomic_fetch_add(&sim_mig_to_host, 1);
        }
        apply_locked(a, i);
        if (b->protected_) /* could not lift it: do not loop forever */
            mprotect((void *)(a->base + i * MIB2), block_len(a, i), PROT_READ | PROT_WRITE);
        handled = 1;
    }
    pthread_mutex_unlock(&sim_mu);
    if (handled)
        return;
    /* Not ours: what was there before us decides. */
    if (g_old_segv.sa_flags & SA_SIGINFO) {
        g_old_segv.sa_sigaction(sig, si, uc);
    } else if (g_old_segv.sa_handler != SIG_DFL && g_old_segv.sa_handler != SIG_IGN) {
        g_old_segv.sa_handler(sig);
    } else {
        signal(SIGSEGV, SIG_DFL); /* the access repeats and kills the process as it would have */
    }
}

/* The blocks [p, p+n) of a managed allocation, or nothing. */
static struct alloc *managed_blocks_locked(const void *ptr, size_t n, size_t *b0, size_t *b1)
{
    struct alloc *a = n ? sim_find_alloc_locked((uintptr_t)ptr) : NULL;
    if (!a || a->kind != A_MANAGED || !a->res)
        return NULL;
    uintptr_t p = (uintptr_t)ptr, end = p + n - 1 < a->base + a->size ? p + n - 1 : a->base + a->size - 1;
    *b0 = (p - a->base) / MIB2;
    *b1 = (end - a->base) / MIB2;
    return a;
}

/* A device-side access (copy engine, memset, kernel): a host-resident block without an accessed-by
 * mapping for the device moves there (fault and switch). */
static void device_touch_locked(const void *ptr, size_t n, int busy_delta, int dev)
{
    size_t b0, b1;
    struct alloc *a = managed_blocks_locked(ptr, n, &b0, &b1);
    if (!a)
        return;
    for (size_t i = b0; i <= b1 && i < a->npages; i++) {
        struct block_state *b = &a->res[i];
        /* the accessed-by advice of the first page this access touches in the block */
        uintptr_t first = a->base + i * MIB2 > (uintptr_t)ptr ? a->base + i * MIB2 : (uintptr_t)ptr;
        if (busy_delta > 0 && sim_sw.residency && b->on_device != 1 + dev && !(a->adv[ADV_FIRST(a, first)].accessed_by & (1ull << dev))) {
            b->on_device = (unsigned char)(1 + dev);
            atomic_fetch_add(&sim_mig_to_device, 1);
        }
        b->busy = (unsigned)((int)b->busy + busy_delta);
        apply_locked(a, i);
    }
}

static void op_ranges(struct op *o, int delta)
{
    switch (o->kind) {
    case OP_COPY:
        device_touch_locked(o->src, o->n, delta, o->dev);
        device_touch_locked(o->dst, o->n, delta, o->dev);
        break;
    case OP_COPY2D:
        if (o->height) {
            device_touch_locked(o->src, o->spitch * (o->height - 1) + o->width, delta, o->dev);
            device_touch_locked(o->dst, o->dpitch * (o->height - 1) + o->width, delta, o->dev);
        }
        break;
    case OP_MEMSET: device_touch_locked(o->dst, o->n * (size_t)o->esize, delta, o->dev); break;
    default: break;
    }
}

void sim_res_op_begin_locked(struct op *o) { op_ranges(o, 1); }
void sim_res_op_end_locked(struct op *o) { op_ranges(o, -1); }

void sim_res_prefetch_locked(struct alloc *a, uintptr_t p, size_t n, int to_device)
{
    size_t b0, b1;
    if (!sim_sw.residency || !managed_blocks_locked((const void *)p, n, &b0, &b1))
        return;
    for (size_t i = b0; i <= b1 && i < a->npages; i++) {
        struct block_state *b = &a->res[i];
        if (b->on_device != to_device) {
            b->on_device = (unsigned char)to_device;
            atomic_fetch_add(to_device ? &sim_mig_to_device : &sim_mig_to_host, 1);
        }
        apply_locked(a, i);
    }
}

void sim_device_work_locked(int delta)
{
    unsigned long long before = g_device_busy;
    g_device_busy = (unsigned long long)((long long)g_device_busy + delta);
    if (sim_sw.cma || (before != 0) == (g_device_busy != 0))
        return;
    if (!g_device_busy) /* a new busy period counts violations afresh */
        for (size_t k = 0; k < sim_nallocs; k++)
            if (sim_allocs[k].kind == A_MANAGED && sim_allocs[k].res)
                for (size_t i = 0; i < sim_allocs[k].npages; i++)
                    sim_allocs[k].res[i].excused = 0;
    apply_all_locked();
}

int uvmsim_residency(const void *ptr)
{
    int r = -1;
    pthread_mutex_lock(&sim_mu);
    size_t b0, b1;
    struct alloc *a = managed_blocks_locked(ptr, 1, &b0, &b1);
    if (a)
        r = a->res[b0].on_device ? UVMSIM_LOC_DEVICE : UVMSIM_LOC_HOST;
    pthread_mutex_unlock(&sim_mu);
    return r;
}

/* What a kernel dereferencing [ptr, ptr+n) would do: device, managed, pinned and registered memory
 * are reachable; pageable memory is an illegal address, and that error is sticky for the context. */
int uvmsim_device_access(const void *ptr, size_t n)
{
    if (!ptr || !n)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mu);
    int r = atomic_load(&sim_sticky);
    if (!r) {
        struct alloc *a = sim_find_alloc_locked((uintptr_t)ptr);
        if (!a || (uintptr_t)ptr + n > a->base + a->size) {
            r = CUDA_ERROR_ILLEGAL_ADDRESS;
            atomic_store(&sim_sticky, r);
        } else if (a->kind == A_MANAGED) {
            device_touch_locked(ptr, n, 1, sim_cur_dev());
            device_touch_locked(ptr, n, -1, sim_cur_dev());
        }
    }
    pthread_mutex_unlock(&sim_mu);
    return r;
}
