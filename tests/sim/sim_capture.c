/* sim_capture.c: stream capture (CUDA Runtime API, cudaStreamBeginCapture): which calls a capture forbids or invalidates, begin/end/query
 * of a capture, the thread's capture mode, and the dummy graphs a capture produces. */
#include <stdio.h>
#include <stdlib.h>

#include "sim_internal.h"

static __thread CUstreamCaptureMode tl_cap_mode = CU_STREAM_CAPTURE_MODE_GLOBAL; /* cuThreadExchangeStreamCaptureMode */
static unsigned long long g_next_cap_id = 1;
struct graph { int magic; unsigned long long nodes; };
#define GRAPH_MAGIC 0x47524148

/* ------------------------------------------------------------------ capture rules */

void sim_invalidate_capture_locked(unsigned long long id) {
    for (struct stream *s = sim_streams_all; s; s = s->all_next)
        if (s->cap_status != CAP_NONE && s->cap_id == id) s->cap_status = CAP_INVALIDATED;
}

/* CUDA Runtime API, cudaThreadExchangeStreamCaptureMode: is this thread prohibited from potentially unsafe calls? If invalidate, break the
 * captures it conflicts with. */
int sim_prohibited_locked(int invalidate) {
    if (tl_cap_mode == CU_STREAM_CAPTURE_MODE_RELAXED) return 0;
    pthread_t self = pthread_self();
    int hit = 0;
    for (struct stream *s = sim_streams_all; s; s = s->all_next) {
        if (s->cap_status == CAP_NONE) continue;
        int own = pthread_equal(s->cap_thread, self);
        int conflict = (own && s->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED) ||
                       (!own && tl_cap_mode == CU_STREAM_CAPTURE_MODE_GLOBAL &&
                        s->cap_mode == CU_STREAM_CAPTURE_MODE_GLOBAL);
        if (conflict) {
            hit = 1;
            if (invalidate) s->cap_status = CAP_INVALIDATED;
        }
    }
    if (hit && invalidate)
        for (struct stream *s = sim_streams_all; s; s = s->all_next)
            if (s->cap_status == CAP_INVALIDATED) sim_invalidate_capture_locked(s->cap_id);
    return hit;
}

/* Legacy-stream work while a blocking stream captures: invalidate those captures, return 1. */
int sim_legacy_implicit_locked(void) {
    int hit = 0;
    for (struct stream *s = sim_streams_all; s; s = s->all_next)
        if (s->cap_status != CAP_NONE && sim_is_blocking(s)) {
            hit = 1;
            sim_invalidate_capture_locked(s->cap_id);
        }
    return hit;
}

int sim_any_capture_locked(void) {
    for (struct stream *s = sim_streams_all; s; s = s->all_next)
        if (s->cap_status != CAP_NONE) return 1;
    return 0;
}

/* Guard for a potentially unsafe call (sync alloc/free/copy, device sync). */
CUresult sim_unsafe_guard(void) {
    CUresult r = CUDA_SUCCESS;
    pthread_mutex_lock(&sim_mu);
    if (sim_prohibited_locked(1)) r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    pthread_mutex_unlock(&sim_mu);
    return r;
}

/* ------------------------------------------------------------------ capture entry points */

static CUresult begin_capture(CUstream h, CUstreamCaptureMode mode, int ptds) {
    NEED_CTX();
    if (mode != CU_STREAM_CAPTURE_MODE_GLOBAL && mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
        mode != CU_STREAM_CAPTURE_MODE_RELAXED)
        return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    CUresult r = sim_resolve_locked(h, ptds, &s);
    if (!r && s->kind == S_LEGACY) r = CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (!r && s->cap_status != CAP_NONE) r = CUDA_ERROR_ILLEGAL_STATE;
    if (!r) {
        s->cap_status = CAP_ACTIVE;
        s->cap_mode = mode;
        s->cap_thread = pthread_self();
        s->cap_id = g_next_cap_id++;
        s->cap_nodes = 0;
    }
    pthread_mutex_unlock(&sim_mu);
    return r;
}
CUresult CUDAAPI cuStreamBeginCapture_v2(CUstream h, CUstreamCaptureMode m) { ENTER("cuStreamBeginCapture_v2"); return begin_capture(h, m, 0); }
CUresult CUDAAPI cuStreamBeginCapture_v2_ptsz(CUstream h, CUstreamCaptureMode m) { ENTER("cuStreamBeginCapture_v2_ptsz"); return begin_capture(h, m, 1); }
CUresult CUDAAPI cuStreamBeginCapture(CUstream h) { ENTER("cuStreamBeginCapture"); return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, 0); }
CUresult CUDAAPI cuStreamBeginCapture_ptsz(CUstream h) { ENTER("cuStreamBeginCapture_ptsz"); return begin_capture(h, CU_STREAM_CAPTURE_MODE_GLOBAL, 1); }

static CUresult end_capture(CUstream h, CUgraph *pg, int ptds) {
    NEED_CTX();
    if (!pg) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    CUresult r = sim_resolve_locked(h, ptds, &s);
    if (!r && s->cap_status == CAP_NONE) r = CUDA_ERROR_ILLEGAL_STATE;
    if (!r && s->cap_mode != CU_STREAM_CAPTURE_MODE_RELAXED && !pthread_equal(s->cap_thread, pthread_self()))
        r = CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
    if (r) { pthread_mutex_unlock(&sim_mu); return r; }
    int invalid = s->cap_status == CAP_INVALIDATED;
    unsigned long long id = s->cap_id, nodes = 0;
    for (struct stream *t = sim_streams_all; t; t = t->all_next)
        if (t->cap_status != CAP_NONE && t->cap_id == id) {
            nodes += t->cap_nodes;
            t->cap_status = CAP_NONE;
            t->cap_nodes = 0;
        }
    pthread_mutex_unlock(&sim_mu);
    *pg = NULL;
    if (invalid) return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    struct graph *g = calloc(1, sizeof *g);
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    g->magic = GRAPH_MAGIC;
    g->nodes = nodes;
    *pg = (CUgraph)g;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamEndCapture(CUstream h, CUgraph *pg) { ENTER("cuStreamEndCapture"); return end_capture(h, pg, 0); }
CUresult CUDAAPI cuStreamEndCapture_ptsz(CUstream h, CUgraph *pg) { ENTER("cuStreamEndCapture_ptsz"); return end_capture(h, pg, 1); }

static CUresult capture_info(CUstream h, int ptds, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g,
                             const CUgraphNode **deps, const CUgraphEdgeData **edges, size_t *ndeps, int is_query) {
    NEED_CTX();
    if (!st) return CUDA_ERROR_INVALID_VALUE;
    pthread_mutex_lock(&sim_mu);
    struct stream *s;
    CUresult r = sim_resolve_locked(h, ptds, &s);
    if (!r && s->kind == S_LEGACY) {
        for (struct stream *t = sim_streams_all; t; t = t->all_next)
            if (t->cap_status != CAP_NONE && sim_is_blocking(t)) r = CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    }
    if (!r) {
        *st = s->cap_status == CAP_ACTIVE ? CU_STREAM_CAPTURE_STATUS_ACTIVE
              : s->cap_status == CAP_INVALIDATED ? CU_STREAM_CAPTURE_STATUS_INVALIDATED : CU_STREAM_CAPTURE_STATUS_NONE;
        if (!is_query) {
            if (id) *id = s->cap_status ? s->cap_id : 0;
            if (g) *g = NULL;
            if (deps) *deps = NULL;
            if (edges) *edges = NULL;
            if (ndeps) *ndeps = 0;
        }
    }
    pthread_mutex_unlock(&sim_mu);
    return r;
}
CUresult CUDAAPI cuStreamIsCapturing(CUstream h, CUstreamCaptureStatus *st) { ENTER("cuStreamIsCapturing"); return capture_info(h, 0, st, NULL, NULL, NULL, NULL, NULL, 1); }
CUresult CUDAAPI cuStreamIsCapturing_ptsz(CUstream h, CUstreamCaptureStatus *st) { ENTER("cuStreamIsCapturing_ptsz"); return capture_info(h, 1, st, NULL, NULL, NULL, NULL, NULL, 1); }
CUresult CUDAAPI cuStreamGetCaptureInfo(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id) { ENTER("cuStreamGetCaptureInfo"); return capture_info(h, 0, st, id, NULL, NULL, NULL, NULL, 0); }
CUresult CUDAAPI cuStreamGetCaptureInfo_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id) { ENTER("cuStreamGetCaptureInfo_ptsz"); return capture_info(h, 1, st, id, NULL, NULL, NULL, NULL, 0); }
CUresult CUDAAPI cuStreamGetCaptureInfo_v2(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d, size_t *n) { ENTER("cuStreamGetCaptureInfo_v2"); return capture_info(h, 0, st, id, g, d, NULL, n, 0); }
CUresult CUDAAPI cuStreamGetCaptureInfo_v2_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d, size_t *n) { ENTER("cuStreamGetCaptureInfo_v2_ptsz"); return capture_info(h, 1, st, id, g, d, NULL, n, 0); }
CUresult CUDAAPI cuStreamGetCaptureInfo_v3(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d, const CUgraphEdgeData **e, size_t *n) { ENTER("cuStreamGetCaptureInfo_v3"); return capture_info(h, 0, st, id, g, d, e, n, 0); }
CUresult CUDAAPI cuStreamGetCaptureInfo_v3_ptsz(CUstream h, CUstreamCaptureStatus *st, cuuint64_t *id, CUgraph *g, const CUgraphNode **d, const CUgraphEdgeData **e, size_t *n) { ENTER("cuStreamGetCaptureInfo_v3_ptsz"); return capture_info(h, 1, st, id, g, d, e, n, 0); }

CUresult CUDAAPI cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode *mode) {
    ENTER("cuThreadExchangeStreamCaptureMode");
    if (!mode || (*mode != CU_STREAM_CAPTURE_MODE_GLOBAL && *mode != CU_STREAM_CAPTURE_MODE_THREAD_LOCAL &&
                  *mode != CU_STREAM_CAPTURE_MODE_RELAXED))
        return CUDA_ERROR_INVALID_VALUE;
    CUstreamCaptureMode old = tl_cap_mode;
    tl_cap_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ graphs */

CUresult CUDAAPI cuGraphDestroy(CUgraph g) {
    ENTER("cuGraphDestroy");
    struct graph *gr = (struct graph *)g;
    if (!gr || gr->magic != GRAPH_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    gr->magic = 0;
    free(gr);
    return CUDA_SUCCESS;
}

/* Graphs are dummies: the node count is what the capture recorded; an executable graph can be
 * created and destroyed, never launched (its work would be kernels and copies we did not keep). */
struct graph_exec { int magic; };
#define GRAPH_EXEC_MAGIC 0x47455845
CUresult CUDAAPI cuGraphGetNodes(CUgraph g, CUgraphNode *nodes, size_t *n) {
    ENTER("cuGraphGetNodes");
    struct graph *gr = (struct graph *)g;
    if (!gr || gr->magic != GRAPH_MAGIC || !n) return CUDA_ERROR_INVALID_VALUE;
    if (nodes)
        for (size_t i = 0; i < *n && i < gr->nodes; i++) nodes[i] = (CUgraphNode)((char *)gr + 1 + i);
    if (!nodes || *n > gr->nodes) *n = (size_t)gr->nodes;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphInstantiateWithFlags(CUgraphExec *pe, CUgraph g, unsigned long long flags) {
    ENTER("cuGraphInstantiateWithFlags");
    (void)flags;
    struct graph *gr = (struct graph *)g;
    if (!pe || !gr || gr->magic != GRAPH_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    struct graph_exec *e = calloc(1, sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = GRAPH_EXEC_MAGIC;
    *pe = (CUgraphExec)e;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGraphExecDestroy(CUgraphExec ge) {
    ENTER("cuGraphExecDestroy");
    struct graph_exec *e = (struct graph_exec *)ge;
    if (!e || e->magic != GRAPH_EXEC_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    e->magic = 0;
    free(e);
    return CUDA_SUCCESS;
}
static CUresult graph_launch(CUgraphExec ge) {
    static atomic_int once;
    struct graph_exec *e = (struct graph_exec *)ge;
    if (!e || e->magic != GRAPH_EXEC_MAGIC) return CUDA_ERROR_INVALID_VALUE;
    if (!atomic_exchange(&once, 1)) fprintf(stderr, "uvmsim: cuGraphLaunch is not simulated: graphs cannot be replayed\n");
    return CUDA_ERROR_NOT_SUPPORTED;
}
CUresult CUDAAPI cuGraphLaunch(CUgraphExec ge, CUstream s) { ENTER("cuGraphLaunch"); (void)s; return graph_launch(ge); }
CUresult CUDAAPI cuGraphLaunch_ptsz(CUgraphExec ge, CUstream s) { ENTER("cuGraphLaunch_ptsz"); (void)s; return graph_launch(ge); }
