/* sim_events.c: simulated events: create/record/query/synchronize/elapsed/destroy, and stream waits on
 * events (including a wait that joins another stream to a capture). */
#include <stdlib.h>

#include "sim_internal.h"

static struct event *g_events; /* live events by pointer */

void sim_event_unref_locked(struct event *e) {
    if (--e->refs == 0) {
        e->magic = 0;
        free(e);
    }
}

static struct event *find_event_locked(CUevent e) {
    struct event *ev;
    HASH_FIND_PTR(g_events, &e, ev);
    return ev;
}

/* ------------------------------------------------------------------ stream waits */

static struct stream *capture_origin_locked(unsigned long long id) {
    for (struct stream *t = sim_streams_all; t; t = t->all_next)
        if (t->cap_status != CAP_NONE && t->cap_id == id) return t;
    return NULL;
}

static CUresult stream_wait_event(CUstream h, CUevent e, unsigned flags, int ptds) {
    NEED_CTX();
    (void)flags;
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    CUresult r = sim_resolve_locked(h, ptds, &s);
    struct event *ev = r ? NULL : find_event_locked(e);
    if (!r && !ev) r = CUDA_ERROR_INVALID_HANDLE;
    if (r) { pthread_mutex_unlock(&sim_mu); return r; }
    struct stream *origin = ev->captured ? capture_origin_locked(ev->cap_id) : NULL;
    if (origin && s->cap_status == CAP_NONE) {
        /* fork into the capture: s joins the capture sequence of the event */
        s->cap_status = origin->cap_status;
        s->cap_id = origin->cap_id;
        s->cap_mode = origin->cap_mode;
        s->cap_thread = origin->cap_thread;
        s->cap_nodes++;
        pthread_mutex_unlock(&sim_mu);
        return CUDA_SUCCESS;
    }
    struct op *o = calloc(1, sizeof *o);
    if (!o) { pthread_mutex_unlock(&sim_mu); return CUDA_ERROR_OUT_OF_MEMORY; }
    o->kind = OP_NOP;
    struct dep d = { ev->rec_stream, ev->rec_seq };
    r = sim_submit_locked(s, o, 0, (ev->rec_stream && !ev->captured) ? &d : NULL);
    pthread_mutex_unlock(&sim_mu);
    return r;
}
CUresult CUDAAPI cuStreamWaitEvent(CUstream h, CUevent e, unsigned int f) { ENTER("cuStreamWaitEvent"); return stream_wait_event(h, e, f, 0); }
CUresult CUDAAPI cuStreamWaitEvent_ptsz(CUstream h, CUevent e, unsigned int f) { ENTER("cuStreamWaitEvent_ptsz"); return stream_wait_event(h, e, f, 1); }

/* ------------------------------------------------------------------ event entry points */

CUresult CUDAAPI cuEventCreate(CUevent *ph, unsigned int flags) {
    ENTER("cuEventCreate");
    NEED_CTX();
    if (!ph || (flags & ~(unsigned)(CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)))
        return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING)) return CUDA_ERROR_INVALID_VALUE;
    struct event *ev = calloc(1, sizeof *ev);
    if (!ev) return CUDA_ERROR_OUT_OF_MEMORY;
    ev->key = ev;
    ev->magic = EVENT_MAGIC;
    ev->flags = flags;
    ev->dev = sim_cur_dev();
    ev->alive = 1;
    ev->refs = 1;
    pthread_mutex_lock(&sim_mu);
    HASH_ADD_PTR(g_events, key, ev);
    sim_live_events++;
    pthread_mutex_unlock(&sim_mu);
    *ph = (CUevent)ev;
    return CUDA_SUCCESS;
}

static CUresult event_record(CUevent e, CUstream h, int ptds) {
    NEED_CTX();
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    CUresult r = sim_resolve_locked(h, ptds, &s);
    struct event *ev = r ? NULL : find_event_locked(e);
    if (!r && !ev) r = CUDA_ERROR_INVALID_HANDLE;
    /* CUDA C++ Programming Guide, "Stream and Event Behavior": recording an event on a stream of
     * another device fails (waits, queries and synchronizes across devices succeed). */
    if (!r && ev->dev != s->dev) r = CUDA_ERROR_INVALID_HANDLE;
    struct op *o = r ? NULL : calloc(1, sizeof *o);
    if (!r && !o) r = CUDA_ERROR_OUT_OF_MEMORY;
    if (r) { pthread_mutex_unlock(&sim_mu); return r; }
    o->kind = OP_EVENT;
    o->ev = ev;
    ev->refs++;
    r = sim_submit_locked(s, o, 0, NULL);
    pthread_mutex_unlock(&sim_mu);
    return r;
}
CUresult CUDAAPI cuEventRecord(CUevent e, CUstream h) { ENTER("cuEventRecord"); return event_record(e, h, 0); }
CUresult CUDAAPI cuEventRecord_ptsz(CUevent e, CUstream h) { ENTER("cuEventRecord_ptsz"); return event_record(e, h, 1); }
CUresult CUDAAPI cuEventRecordWithFlags(CUevent e, CUstream h, unsigned int f) { ENTER("cuEventRecordWithFlags"); (void)f; return event_record(e, h, 0); }
CUresult CUDAAPI cuEventRecordWithFlags_ptsz(CUevent e, CUstream h, unsigned int f) { ENTER("cuEventRecordWithFlags_ptsz"); (void)f; return event_record(e, h, 1); }

static int event_done_locked(struct event *ev) { return !ev->rec_stream || ev->rec_stream->done_seq >= ev->rec_seq; }

static CUresult event_wait(CUevent e, int query) {
    NEED_CTX();
    pthread_mutex_lock(&sim_mu);
    struct event *ev = find_event_locked(e);
    CUresult r = CUDA_SUCCESS;
    if (!ev) r = CUDA_ERROR_INVALID_HANDLE;
    else if (ev->captured) r = CUDA_ERROR_CAPTURED_EVENT;
    else if (sim_sw.capture_queries && sim_prohibited_locked(1)) r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    else if (query) r = event_done_locked(ev) ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
    else {
        ev->refs++;
        while (!event_done_locked(ev)) pthread_cond_wait(&sim_cv, &sim_mu);
        sim_event_unref_locked(ev);
    }
    pthread_mutex_unlock(&sim_mu);
    return r;
}
CUresult CUDAAPI cuEventQuery(CUevent e) { ENTER("cuEventQuery"); return event_wait(e, 1); }
CUresult CUDAAPI cuEventSynchronize(CUevent e) { ENTER("cuEventSynchronize"); return event_wait(e, 0); }

static CUresult event_destroy(CUevent e) {
    NEED_CTX();
    pthread_mutex_lock(&sim_mu);
    struct event *ev = find_event_locked(e);
    if (!ev) { pthread_mutex_unlock(&sim_mu); return CUDA_ERROR_INVALID_HANDLE; }
    HASH_DEL(g_events, ev);
    sim_live_events--;
    ev->alive = 0;
    sim_event_unref_locked(ev);
    pthread_mutex_unlock(&sim_mu);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy_v2(CUevent e) { ENTER("cuEventDestroy_v2"); return event_destroy(e); }
CUresult CUDAAPI cuEventDestroy(CUevent e) { ENTER("cuEventDestroy"); return event_destroy(e); }

static CUresult event_elapsed(float *ms, CUevent a, CUevent b) {
    NEED_CTX();
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mu);
    struct event *ea = find_event_locked(a), *eb = find_event_locked(b);
    CUresult r = CUDA_SUCCESS;
    if (!ea || !eb || !ea->rec_stream || !eb->rec_stream || ((ea->flags | eb->flags) & CU_EVENT_DISABLE_TIMING) ||
        ea->dev != eb->dev) /* same section: the elapsed time of two devices' events fails */
        r = CUDA_ERROR_INVALID_HANDLE;
    else if (ea->captured || eb->captured) r = CUDA_ERROR_CAPTURED_EVENT;
    else if (!event_done_locked(ea) || !event_done_locked(eb)) r = CUDA_ERROR_NOT_READY;
    else *ms = (float)(eb->t_ms - ea->t_ms);
    pthread_mutex_unlock(&sim_mu);
    return r;
}
CUresult CUDAAPI cuEventElapsedTime_v2(float *ms, CUevent a, CUevent b) { ENTER("cuEventElapsedTime_v2"); return event_elapsed(ms, a, b); }
CUresult CUDAAPI cuEventElapsedTime(float *ms, CUevent a, CUevent b) { ENTER("cuEventElapsedTime"); return event_elapsed(ms, a, b); }
