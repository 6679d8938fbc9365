/* test_capture.c: stream capture and the copy path.
 *   cross  (run first in its own process): another thread captures in global mode while this
 *          thread makes the process's first large copy (init, driver resolution, event creation
 *          all happen inside that window); that capture must end valid, the copy must succeed.
 *          Then copies whose split waits (host engine, staged path, synchronous copy): the
 *          library's own queries and waits run in relaxed mode and leave the capture valid.
 *   modes: a large copy on a stream captured in global, thread-local and relaxed mode is passed
 *          through unsplit (one call, no event, no prefetch, no query of the stream beyond the
 *          capture state) and the capture ends valid; then the same stream, uncaptured, splits. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <string.h>

#include "harden.h"
#include "uvmsim.h"

static uint8_t *managed, *managed_cpu, *pinned, *pinned2, *pageable;
static size_t big;

static const char *mode_name(enum cudaStreamCaptureMode m)
{
    return m == cudaStreamCaptureModeGlobal ? "global" : m == cudaStreamCaptureModeThreadLocal ? "thread-local" : "relaxed";
}

static bool exact(const uint8_t *dst)
{
    for (size_t i = 0; i < big; i++)
        if (dst[i] != test_pattern(i))
            return false;
    return true;
}

/* ---- cross-thread: the other thread's capture ---- */

static pthread_barrier_t began, copied;
static enum cudaStreamCaptureMode cross_mode;
static cudaError_t cross_end_rc;
static cudaGraph_t cross_graph;

static void *capturer(void *arg)
{
    (void)arg;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaError_t rc = cudaStreamBeginCapture(s, cross_mode);
    CHECK(rc == cudaSuccess, "begin capture (%s): %d", mode_name(cross_mode), (int)rc);
    /* Some captured work, as a real capture would have. */
    cudaMemcpyAsync(pinned2, managed, 4096, cudaMemcpyDeviceToHost, s);
    pthread_barrier_wait(&began);
    pthread_barrier_wait(&copied);
    cross_end_rc = cudaStreamEndCapture(s, &cross_graph);
    if (cross_graph)
        cudaGraphDestroy(cross_graph);
    cudaStreamDestroy(s);
    return NULL;
}

/* One large copy (asynchronous on copy_stream, or synchronous when copy_stream is NULL and sync)
 * while another thread captures in the given mode; the copy's stream is synchronized only after
 * that capture ended (a global-mode synchronize during it would itself be a prohibited call). */
static void cross_copy(enum cudaStreamCaptureMode mode, cudaStream_t copy_stream, bool sync, uint8_t *dst,
                       const uint8_t *src, const char *what)
{
    cross_mode = mode;
    cross_graph = NULL;
    pthread_barrier_init(&began, NULL, 2);
    pthread_barrier_init(&copied, NULL, 2);
    pthread_t th;
    pthread_create(&th, NULL, capturer, NULL);
    pthread_barrier_wait(&began);
    memset(dst, 0xEE, big);
    unsigned long long a = uvmsim_calls("cudaMemcpyAsync");
    cudaError_t rc = sync ? cudaMemcpy(dst, src, big, cudaMemcpyDeviceToHost)
                          : cudaMemcpyAsync(dst, src, big, cudaMemcpyDeviceToHost, copy_stream);
    unsigned long long calls = uvmsim_calls("cudaMemcpyAsync") - a;
    pthread_barrier_wait(&copied);
    pthread_join(th, NULL);
    cudaError_t synced = cudaStreamSynchronize(copy_stream);
    CHECK(rc == cudaSuccess, "%s during another thread's %s capture: copy returned %d", what, mode_name(mode), (int)rc);
    CHECK(synced == cudaSuccess, "%s during another thread's %s capture: synchronize returned %d", what,
          mode_name(mode), (int)synced);
    CHECK(cross_end_rc == cudaSuccess && cross_graph, "%s: the other thread's %s capture ended with %d", what,
          mode_name(mode), (int)cross_end_rc);
    CHECK(exact(dst), "%s during another thread's %s capture: bytes differ", what, mode_name(mode));
    CHECK(calls <= 1 || calls == test_blocks(big), "%s: %llu block calls", what, calls);
    cudaGetLastError();
    pthread_barrier_destroy(&began);
    pthread_barrier_destroy(&copied);
}

static void cross(enum cudaStreamCaptureMode mode, cudaStream_t copy_stream, const char *what)
{
    cross_copy(mode, copy_stream, false, pinned, managed, what);
}

/* ---- this thread's own capture ---- */

static void own_capture(enum cudaStreamCaptureMode mode, unsigned flags)
{
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, flags) == cudaSuccess, "stream");
    CHECK(cudaStreamBeginCapture(s, mode) == cudaSuccess, "begin %s capture", mode_name(mode));
    unsigned long long a = uvmsim_calls("cudaMemcpyAsync"), e = uvmsim_calls("cuEventCreate"),
                       r = uvmsim_calls("cuEventRecord"), p = uvmsim_calls("cuMemPrefetchAsync_v2"),
                       q = uvmsim_calls("cudaStreamQuery") + uvmsim_calls("cuStreamQuery") +
                           uvmsim_calls("cudaStreamSynchronize") + uvmsim_calls("cuStreamSynchronize");
    cudaError_t rc = cudaMemcpyAsync(pinned, managed, big, cudaMemcpyDeviceToHost, s);
    CHECK(rc == cudaSuccess, "%s capture: copy returned %d", mode_name(mode), (int)rc);
    CHECK(uvmsim_calls("cudaMemcpyAsync") - a == 1, "%s capture: %llu copy calls, want 1 unsplit", mode_name(mode),
          uvmsim_calls("cudaMemcpyAsync") - a);
    CHECK(uvmsim_calls("cuEventCreate") == e && uvmsim_calls("cuEventRecord") == r &&
              uvmsim_calls("cuMemPrefetchAsync_v2") == p,
          "%s capture: the library created/recorded events or prefetched", mode_name(mode));
    CHECK(uvmsim_calls("cudaStreamQuery") + uvmsim_calls("cuStreamQuery") + uvmsim_calls("cudaStreamSynchronize") +
                  uvmsim_calls("cuStreamSynchronize") == q,
          "%s capture: the capturing stream was queried or synchronized", mode_name(mode));
    enum cudaStreamCaptureStatus st;
    CHECK(cudaStreamIsCapturing(s, &st) == cudaSuccess && st == cudaStreamCaptureStatusActive,
          "%s capture: no longer active after the copy (status %d)", mode_name(mode), (int)st);
    cudaGraph_t g = NULL;
    rc = cudaStreamEndCapture(s, &g);
    CHECK(rc == cudaSuccess && g, "%s capture: end capture returned %d", mode_name(mode), (int)rc);
    if (g)
        cudaGraphDestroy(g);
    CHECK(cudaGetLastError() == cudaSuccess, "%s capture: last error left", mode_name(mode));

    /* Uncaptured again: the same copy is split. */
    memset(pinned, 0xEE, big);
    a = uvmsim_calls("cudaMemcpyAsync");
    rc = cudaMemcpyAsync(pinned, managed, big, cudaMemcpyDeviceToHost, s);
    cudaStreamSynchronize(s);
    CHECK(rc == cudaSuccess && uvmsim_calls("cudaMemcpyAsync") - a == test_blocks(big) && exact(pinned),
          "%s: after the capture the copy was not split or not exact", mode_name(mode));
    cudaStreamDestroy(s);
}

int main(int argc, char **argv)
{
    harden_require_preload("capture");
    const char *which = argc > 1 ? argv[1] : "modes";
    big = 3 * test_cfg.chunk_size + test_cfg.chunk_size / 2 + 5;
    if (big < test_cfg.threshold)
        big = test_cfg.threshold + 5;
    CUmemLocation cpu = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
    if (cudaMallocManaged((void **)&managed, big, cudaMemAttachGlobal) ||
        cudaMallocManaged((void **)&managed_cpu, big, cudaMemAttachGlobal) || cudaMallocHost((void **)&pinned, big) ||
        cudaMallocHost((void **)&pinned2, 4096) || !(pageable = malloc(big)) ||
        cuMemAdvise_v2((CUdeviceptr)(uintptr_t)managed_cpu, big, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, cpu)) {
        fprintf(stderr, "capture: setup failed\n");
        return 1;
    }
    for (size_t i = 0; i < big; i++)
        managed[i] = managed_cpu[i] = test_pattern(i);
    uvmsim_reset();
    cudaStream_t mine;
    cudaStreamCreateWithFlags(&mine, cudaStreamNonBlocking);
    if (!strcmp(which, "cross")) {
        /* The first large copy of the process happens inside the other thread's global capture. */
        cross(cudaStreamCaptureModeGlobal, mine, "first large copy");
        cross(cudaStreamCaptureModeGlobal, mine, "large copy on a non-blocking stream");
        cross(cudaStreamCaptureModeGlobal, cudaStreamPerThread, "large copy on the per-thread stream");
        cross(cudaStreamCaptureModeThreadLocal, mine, "large copy");
        cross(cudaStreamCaptureModeRelaxed, mine, "large copy");
        /* the split waits: its queries and waits are the library's own (issue 16) */
        cross_copy(cudaStreamCaptureModeGlobal, mine, false, pinned, managed_cpu, "host engine copy");
        cross_copy(cudaStreamCaptureModeGlobal, mine, false, pageable, managed, "staged copy into pageable memory");
        cross_copy(cudaStreamCaptureModeGlobal, NULL, true, pinned, managed, "synchronous copy");
    } else {
        unsigned flags[] = {cudaStreamNonBlocking, cudaStreamDefault};
        for (int f = 0; f < 2; f++) {
            own_capture(cudaStreamCaptureModeGlobal, flags[f]);
            own_capture(cudaStreamCaptureModeThreadLocal, flags[f]);
            own_capture(cudaStreamCaptureModeRelaxed, flags[f]);
        }
    }
    cudaStreamDestroy(mine);
    return harden_done(!strcmp(which, "cross") ? "capture cross" : "capture modes");
}
