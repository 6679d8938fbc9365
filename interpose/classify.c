/* classify.c: decides whether one copy at or above the threshold is split (device-to-host or default
 * kind, stream not capturing, source inside one managed allocation, host destination) and how. */
#include <stdint.h>
#include <time.h>

#include "uvmc.h"
#include "uvmc_units.h"

/* How long an event recorded on the caller's stream may take to complete for the stream to count
 * as drained: on an idle device microseconds; the bound only keeps a busy one from costing more. */
#define UVMC_DRAIN_NS (100ull * 1000 * 1000)

/* Stream 0 means the legacy stream, or the per-thread stream for the _ptds/_ptsz entry points
 * (CUDA Runtime API, cudaThreadExchangeStreamCaptureMode); the driver calls below get the explicit handle so no build flag changes it. */
static CUstream uvmc_explicit_stream(const struct uvmc_copy *c)
{
    if (c->stream)
        return c->stream;
    return c->per_thread ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

/* [src, src+count) lies in one managed allocation: the first and the last byte are both managed and
 * carry the same buffer ID ("unique per allocation"), each pair asked alone. The range attributes
 * are documented for cuMemAddressReserve ranges and reported not to answer for managed memory
 * (cuda.h 13.0; openucx/ucx#7485, #11635); a driver may even fail a query that names them, and
 * asking them would cost the query the last byte costs anyway, so they are not asked. */
static bool uvmc_source_managed(const struct uvmc_copy *c)
{
    unsigned int is_managed = 0; /* an unsigned int, never a bool (cuda.h, CU_POINTER_ATTRIBUTE_IS_MANAGED) */
    unsigned long long id = 0, last_id = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_BUFFER_ID};
    void *first[] = {&is_managed, &id};
    CUdeviceptr src = (CUdeviceptr)(uintptr_t)c->src;
    if (uvmc_drv.cuPointerGetAttributes(2, attrs, first, src) != CUDA_SUCCESS || !is_managed || id == 0)
        return false;
    if (src + c->count - 1 < src) /* wraps around the address space */
        return false;
    is_managed = 0;
    void *last[] = {&is_managed, &last_id};
    return uvmc_drv.cuPointerGetAttributes(2, attrs, last, src + c->count - 1) == CUDA_SUCCESS && is_managed &&
           last_id == id;
}

/* Pinned or pageable host memory; not device, not managed. Sets c->dst_pinned. */
static bool uvmc_destination_host(struct uvmc_copy *c)
{
    unsigned int is_managed = 0;
    CUmemorytype type = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_IS_MANAGED, CU_POINTER_ATTRIBUTE_MEMORY_TYPE};
    void *data[] = {&is_managed, &type};
    /* cuPointerGetAttributes succeeds with zeroed attributes for memory CUDA does not know. */
    if (uvmc_drv.cuPointerGetAttributes(2, attrs, data, (CUdeviceptr)(uintptr_t)c->dst) != CUDA_SUCCESS ||
        is_managed)
        return false;
    if (type == CU_MEMORYTYPE_HOST) {
        c->dst_pinned = true;
        return true;
    }
    c->dst_pinned = false;
    return type == 0;
}

/* FBGEMM advises its tables to prefer the CPU (torchrec#3399); mixed advice reads as "no". */
static bool uvmc_source_prefers_cpu(const struct uvmc_copy *c)
{
    int where = CU_DEVICE_INVALID;
    return uvmc_drv.cuMemRangeGetAttribute &&
           uvmc_drv.cuMemRangeGetAttribute(&where, sizeof where, CU_MEM_RANGE_ATTRIBUTE_PREFERRED_LOCATION,
                                           (CUdeviceptr)(uintptr_t)c->src, c->count) == CUDA_SUCCESS &&
           where == CU_DEVICE_CPU;
}

/* The CPU may read managed memory while the GPU works only with concurrent managed access
 * (bare-metal Linux, Pascal or newer; not WSL2 or some virtual machines: CUDA Programming Guide, concurrent managed access). Asked once per
 * device; a failed query reads as "no". */
static bool uvmc_concurrent_managed_access(CUdevice dev)
{
    enum { max_devices = 64 };
    static atomic_int known[max_devices]; /* per device ordinal: 0 unknown, 1 no, 2 yes */
    if (dev < 0 || dev >= max_devices)
        return false;
    int k = atomic_load_explicit(&known[dev], memory_order_relaxed);
    if (!k) {
        int v = 0;
        k = uvmc_drv.cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS, dev) == CUDA_SUCCESS &&
                    v == 1
                ? 2
                : 1;
        atomic_store_explicit(&known[dev], k, memory_order_relaxed);
    }
    return k == 2;
}

/* Nothing queued on the stream now, and nothing will make its next operation wait: a stream
 * created non-blocking (cuStreamGetFlags) and idle. A blocking stream (and the per-thread stream)
 * that is idle still waits for earlier legacy-stream work, and the legacy stream for every blocking
 * stream (CUDA Runtime API, "stream synchronization behavior"): the caller may release that work
 * only after the call returns. The legacy and per-thread handles are never queried. */
static bool uvmc_stream_independent_and_idle(const struct uvmc_copy *c)
{
    unsigned int flags = 0;
    if (c->hstream == CU_STREAM_LEGACY || c->hstream == CU_STREAM_PER_THREAD || !uvmc_drv.cuStreamGetFlags ||
        uvmc_drv.cuStreamGetFlags(c->hstream, &flags) != CUDA_SUCCESS || !(flags & CU_STREAM_NON_BLOCKING))
        return false;
    return uvmc_drv.cuStreamQuery(c->hstream) == CUDA_SUCCESS;
}

/* The host engine and the staged path wait for the caller's stream before they read: legal for a
 * call that returns after landing anyway (synchronous, or into pageable memory, where the real
 * call may wait too), and for an asynchronous one into pinned memory only when the wait can be
 * for nothing but the library's own operations. idle: the stream's answer if already asked. */
static bool uvmc_may_wait(const struct uvmc_copy *c, int idle)
{
    if (c->sync || !c->dst_pinned)
        return true;
    return idle >= 0 ? idle : uvmc_stream_independent_and_idle(c);
}

/* Everything the stream's next operation would wait for has completed: an event recorded on it
 * (which waits for the stream's own queued work and for what the stream waits for, the legacy or
 * the blocking streams included) completes within UVMC_DRAIN_NS. Its own work counts too: DCP's
 * loader queues its smaller copies first (sorted by size), and those land in microseconds. Never
 * longer: what keeps it pending may be something the caller does only after the call. */
static bool uvmc_stream_drained(const struct uvmc_copy *c)
{
    CUevent ev = NULL;
    if (uvmc_drv.cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING) != CUDA_SUCCESS)
        return false;
    bool done = false;
    unsigned long long t0 = uvmc_now_ns();
    CUresult r = uvmc_drv.cuEventRecord(ev, c->hstream);
    if (r == CUDA_SUCCESS)
        for (;;) {
            r = uvmc_drv.cuEventQuery(ev);
            if (r == CUDA_SUCCESS || r != CUDA_ERROR_NOT_READY || uvmc_now_ns() - t0 > UVMC_DRAIN_NS) {
                done = r == CUDA_SUCCESS;
                break;
            }
            nanosleep(&(struct timespec){0, 20000}, NULL);
        }
    uvmc_drv.cuEventDestroy(ev);
    if (!done)
        uvmc_log(UVMC_LOG_DEBUG, "stream %p not drained: an event on it incomplete after %.1f ms (CUresult %d)",
                 (void *)c->hstream, (double)(uvmc_now_ns() - t0) / 1e6, (int)r);
    return done;
}

/* The host engine is the candidate: chosen (engine = auto) for a source that prefers the CPU, or
 * asked for (engine = host); and the CPU may read managed memory while the device works. */
static bool uvmc_host_candidate(struct uvmc_copy *c)
{
    c->prefers_host = uvmc_source_prefers_cpu(c);
    return uvmc_cfg.engine != UVMC_ENGINE_COPY && (c->prefers_host || uvmc_cfg.engine == UVMC_ENGINE_HOST) &&
           uvmc_concurrent_managed_access(c->device);
}

static const char *const uvmc_mode_names[] = {"queue", "direct", "staged", "host"};

/* engine = auto: host memcpy when the source prefers the CPU (no PCIe crossing at all)
 * and the CPU may read managed memory while kernels run; engine = host without the preference.
 * Otherwise the copy engine: queued when asynchronous into pinned memory, through the staging ring
 * into pageable memory, else waited for group by group. */
static void uvmc_pick_mode(struct uvmc_copy *c, bool host_candidate, int idle)
{
    if (c->drained || (host_candidate && uvmc_may_wait(c, idle)))
        c->mode = UVMC_MODE_HOST;
    else if (!c->dst_pinned)
        c->mode = UVMC_MODE_STAGED;
    else
        c->mode = c->sync ? UVMC_MODE_DIRECT : UVMC_MODE_QUEUE;
    if (UVMC_LOG_ON(UVMC_LOG_DEBUG))
        uvmc_log(UVMC_LOG_DEBUG, "copy of %s: %s mode (engine %s, source %s the CPU, %s destination%s)",
                 uvmc_bytes_text(c->count).s,
                 uvmc_mode_names[c->mode], uvmc_cfg.engine == UVMC_ENGINE_AUTO   ? "auto"
                                           : uvmc_cfg.engine == UVMC_ENGINE_HOST ? "host"
                                                                                 : "copy",
                 c->prefers_host ? "prefers" : "does not prefer", c->dst_pinned ? "pinned" : "pageable",
                 c->drained ? ", stream drained" : "");
}

bool uvmc_thread_context(const struct uvmc_rt *rt)
{
    CUcontext ctx = NULL;
    if (uvmc_driver_ready() && uvmc_drv.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx)
        return true;
    int dev = 0;
    /* A failure here (a forked child, no device) is the real call's to report: pass through. */
    if (!rt || !rt->cudaGetDevice || !rt->cudaSetDevice || rt->cudaGetDevice(&dev) != cudaSuccess ||
        rt->cudaSetDevice(dev) != cudaSuccess)
        return false;
    return uvmc_driver_ready() && uvmc_drv.cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx;
}

/* The caller's stream may belong to another device than the thread's current one (device 1's
 * stream while device 0 is current): the library's own work on it (events, prefetches, the device
 * it names) then runs in the stream's context, as recording an event of one device on another's
 * stream fails (CUDA C++ Programming Guide, "Stream and Event Behavior"). Pushed here (cuda.h
 * cuStreamGetCtx, cuCtxPushCurrent), popped by uvmc_unrelax before the caller's call proceeds or
 * returns; driver calls leave the runtime's last error alone. */
static void uvmc_enter_stream_context(const struct uvmc_copy *c, struct uvmc_relaxed *mode)
{
    CUcontext cur = NULL, own = NULL;
    if (!uvmc_drv.cuStreamGetCtx || !uvmc_drv.cuCtxPushCurrent || !uvmc_drv.cuCtxPopCurrent ||
        uvmc_drv.cuStreamGetCtx(c->hstream, &own) != CUDA_SUCCESS || !own ||
        (uvmc_drv.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == own))
        return;
    mode->pushed = uvmc_drv.cuCtxPushCurrent(own) == CUDA_SUCCESS;
}

bool uvmc_classify(struct uvmc_copy *c, struct uvmc_relaxed *mode)
{
    if (c->kind != cudaMemcpyDeviceToHost && c->kind != cudaMemcpyDefault)
        return false;
    if (!c->dst || !c->src || !uvmc_thread_context(c->rt) || !c->api->ready(c))
        return false;
    *mode = uvmc_relax();
    c->hstream = uvmc_explicit_stream(c);
    uvmc_enter_stream_context(c, mode);
    /* A capturing stream must see exactly the caller's call: anything we add could invalidate it
     * (CUDA Runtime API, API synchronization behavior). An error here (906 on the legacy stream, say) is the real call's to report. */
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    if (uvmc_drv.cuStreamIsCapturing(c->hstream, &capture) != CUDA_SUCCESS ||
        capture != CU_STREAM_CAPTURE_STATUS_NONE)
        return false;
    if (!uvmc_source_managed(c) || !uvmc_destination_host(c))
        return false;
    if (uvmc_drv.cuCtxGetDevice(&c->device) != CUDA_SUCCESS)
        c->device = 0;
    int idle = -1;
    bool host = uvmc_host_candidate(c);
    if (!c->sync && !c->dst_pinned && uvmc_lazy_watched(c->dst, c->count)) {
        /* A lazy buffer: pinned memory as far as the caller knows, so this asynchronous call must
         * not wait for anything the caller may do after it. It is written as pageable memory only
         * where nothing can be waited for: a stream created non-blocking and idle (its own
         * operations then wait for nothing else), or, for the host engine, which then queues
         * nothing on the stream, one seen drained (DCP's loader copies on PyTorch's current
         * stream, the legacy one). Otherwise it becomes pinned first and the copy is queued; if it
         * cannot be pinned, the real call gets the pageable memory it now is. */
        idle = uvmc_stream_independent_and_idle(c);
        if (!idle && host && uvmc_stream_drained(c)) {
            c->drained = true;
        } else if (!idle) {
            if (!uvmc_lazy_pin(c->dst, c->count, c->rt))
                return false;
            c->dst_pinned = true;
        }
    }
    uvmc_pick_mode(c, host, idle);
    return true;
}
