/* test_interpose.c: the runtime path of libuvmchunk, preloaded into this program, against the
 * simulated libcudart (13 or 12 flavour): classification, bytes, stream order, capture, faults. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <unistd.h>

#include "procfs.h"
#include "test_check.h"
#include "uvmsim.h"

/* Only declared by the headers in per-thread-default-stream builds. */
extern __typeof__(cudaMemcpy) cudaMemcpy_ptds;
extern __typeof__(cudaMemcpyAsync) cudaMemcpyAsync_ptsz;

#define MANAGED_SIZE ((size_t)24 << 20)
#define GUARD 64

static uint8_t *managed, *managed2, *pinned, *pageable, *device;
static size_t big; /* a size of several blocks, above the threshold */

static void fill_managed(void)
{
    for (size_t i = 0; i < MANAGED_SIZE; i++)
        managed[i] = test_pattern(i);
}

static void setup(void)
{
    uvmsim_set_op_delay_us(0);
    ck_assert_int_eq(cudaMallocManaged((void **)&managed, MANAGED_SIZE, cudaMemAttachGlobal), cudaSuccess);
    ck_assert_int_eq(cudaMallocManaged((void **)&managed2, MANAGED_SIZE, cudaMemAttachGlobal), cudaSuccess);
    ck_assert_int_eq(cudaMallocHost((void **)&pinned, MANAGED_SIZE + GUARD), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&device, MANAGED_SIZE), cudaSuccess);
    pageable = malloc(MANAGED_SIZE + GUARD);
    ck_assert_ptr_nonnull(pageable);
    fill_managed();
    memset(pinned, 0xEE, MANAGED_SIZE + GUARD);
    memset(pageable, 0xEE, MANAGED_SIZE + GUARD);
    big = 3 * test_cfg.chunk_size + test_cfg.chunk_size / 2 + 5;
    if (big < test_cfg.threshold)
        big = test_cfg.threshold + 7;
    ck_assert_uint_le(big + 4096, MANAGED_SIZE);
    cudaGetLastError();
    uvmsim_reset();
}

static void teardown(void)
{
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    cudaFree(managed);
    cudaFree(managed2);
    cudaFree(device);
    cudaFreeHost(pinned);
    free(pageable);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}

/* What reached the simulated runtime during one call. */
struct seen {
    cudaError_t rc;
    unsigned long long async_copies, sync_copies, queries;
};

static unsigned long long queries_now(void)
{
    return uvmsim_calls("cuPointerGetAttributes") + uvmsim_calls("cuPointerGetAttribute") +
           uvmsim_calls("cuStreamIsCapturing") + uvmsim_calls("cuEventCreate") +
           uvmsim_calls("cudaPointerGetAttributes") + uvmsim_calls("cudaStreamIsCapturing");
}

/* Calls that move bytes on the device: real copies (the copy engine's blocks, or an unsplit call).
 * The host engine makes none: it copies on the calling thread (and enqueues no host function). */
static unsigned long long block_calls(const char *copy_fn)
{
    return uvmsim_calls(copy_fn);
}

/* Copy calls one split copy of n bytes makes. The host engine (engine = host here: the suite's
 * managed buffers carry no advice) makes none, when it may wait for the stream: a synchronous call,
 * a pageable destination, or an idle stream created non-blocking. The copy engine makes one
 * per chunk, or fewer, larger ones when it queues an asynchronous copy into pinned memory. */
static size_t split_copies(size_t n, bool async_pinned, bool idle_stream)
{
    if (test_cfg.engine == UVMC_ENGINE_HOST && (!async_pinned || idle_stream))
        return 0;
    return async_pinned ? test_queued_blocks(n) : test_blocks(n);
}

static struct seen copy_async(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s)
{
    unsigned long long a = block_calls("cudaMemcpyAsync"), q = queries_now();
    struct seen r = {.rc = cudaMemcpyAsync(dst, src, n, kind, s)};
    r.async_copies = block_calls("cudaMemcpyAsync") - a;
    r.queries = queries_now() - q;
    cudaStreamSynchronize(s);
    return r;
}

static void expect_bytes(const uint8_t *dst, const uint8_t *src_managed_at, size_t n)
{
    size_t off = (size_t)(src_managed_at - managed);
    for (size_t i = 0; i < n; i++)
        if (dst[i] != test_pattern(off + i))
            ck_abort_msg("byte %zu of %zu differs: %02x != %02x", i, n, dst[i], test_pattern(off + i));
    ck_assert_msg(dst[n] == 0xEE, "byte after the copy was written");
}

/* ---- classification ---- */

START_TEST(split_managed_base_to_pinned)
{
    struct seen r = copy_async(pinned, managed, big, cudaMemcpyDeviceToHost, 0);
    ck_assert_int_eq(r.rc, cudaSuccess);
    ck_assert_uint_eq(r.async_copies, split_copies(big, true, false));
    expect_bytes(pinned, managed, big);
}
END_TEST

START_TEST(split_managed_interior_unaligned_to_pageable)
{
    const uint8_t *src = managed + 4096 * 3 + 13;
    struct seen r = copy_async(pageable + 1, src, big, cudaMemcpyDefault, 0);
    ck_assert_int_eq(r.rc, cudaSuccess);
    ck_assert_uint_eq(r.async_copies, split_copies(big, false, false));
    expect_bytes(pageable + 1, src, big);
}
END_TEST

START_TEST(split_at_threshold_and_prime_sizes)
{
    size_t sizes[] = {test_cfg.threshold, 10000019, 7340033, test_cfg.chunk_size * 4 + 1};
    for (size_t k = 0; k < sizeof sizes / sizeof *sizes; k++) {
        size_t n = sizes[k];
        if (n < test_cfg.threshold || n + 1 > MANAGED_SIZE)
            continue;
        memset(pinned, 0xEE, n + 1);
        struct seen r = copy_async(pinned, managed + 1, n, cudaMemcpyDeviceToHost, 0);
        ck_assert_int_eq(r.rc, cudaSuccess);
        ck_assert_uint_eq(r.async_copies, split_copies(n, true, false));
        expect_bytes(pinned, managed + 1, n);
    }
}
END_TEST

START_TEST(below_threshold_makes_no_cuda_call)
{
    struct seen r = copy_async(pinned, managed, test_cfg.threshold - 1, cudaMemcpyDeviceToHost, 0);
    ck_assert_int_eq(r.rc, cudaSuccess);
    ck_assert_uint_eq(r.async_copies, 1);
    ck_assert_uint_eq(r.queries, 0);
    expect_bytes(pinned, managed, test_cfg.threshold - 1);
}
END_TEST

START_TEST(copy_crossing_end_of_allocation_passes_through)
{
    /* Starts inside `managed`, ends past it: not one managed allocation, so unsplit. */
    const uint8_t *src = managed + MANAGED_SIZE - big / 2;
    struct seen r = copy_async(pinned, src, big, cudaMemcpyDeviceToHost, 0);
    ck_assert_uint_eq(r.async_copies, 1);
    cudaGetLastError();
}
END_TEST

START_TEST(non_managed_sources_pass_through)
{
    const void *srcs[] = {device, pinned, pageable};
    for (size_t k = 0; k < 3; k++) {
        struct seen r = copy_async(pageable + MANAGED_SIZE / 2, srcs[k], big / 4 > test_cfg.threshold ? big / 4 : test_cfg.threshold,
                                   cudaMemcpyDefault, 0);
        ck_assert_int_eq(r.rc, cudaSuccess);
        ck_assert_uint_eq(r.async_copies, 1);
    }
}
END_TEST

START_TEST(non_host_destinations_pass_through)
{
    void *dsts[] = {device, managed2};
    for (size_t k = 0; k < 2; k++) {
        struct seen r = copy_async(dsts[k], managed, big, cudaMemcpyDefault, 0);
        ck_assert_int_eq(r.rc, cudaSuccess);
        ck_assert_uint_eq(r.async_copies, 1);
    }
}
END_TEST

START_TEST(only_device_to_host_and_default_kinds_split)
{
    enum cudaMemcpyKind kinds[] = {cudaMemcpyHostToHost, cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost,
                                   cudaMemcpyDeviceToDevice, cudaMemcpyDefault};
    for (size_t k = 0; k < 5; k++) {
        bool split = kinds[k] == cudaMemcpyDeviceToHost || kinds[k] == cudaMemcpyDefault;
        struct seen r = copy_async(pinned, managed, big, kinds[k], 0);
        ck_assert_uint_eq(r.async_copies, split ? split_copies(big, true, false) : 1);
        if (split)
            expect_bytes(pinned, managed, big);
        cudaGetLastError(); /* some of these kinds are invalid for these pointers: the runtime's call */
    }
}
END_TEST

START_TEST(synchronous_entry_points_split_and_wait)
{
    uvmsim_set_op_delay_us(300);
    unsigned long long a = block_calls("cudaMemcpyAsync"), s = uvmsim_calls("cudaMemcpy");
    ck_assert_int_eq(cudaMemcpy(pinned, managed, big, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_uint_eq(block_calls("cudaMemcpyAsync") - a, split_copies(big, false, false));
    ck_assert_uint_eq(uvmsim_calls("cudaMemcpy") - s, 0);
    expect_bytes(pinned, managed, big); /* checked before any synchronize: cudaMemcpy waited */

    memset(pinned, 0xEE, big + 1);
    a = block_calls("cudaMemcpyAsync_ptsz");
    ck_assert_int_eq(cudaMemcpy_ptds(pinned, managed, big, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_uint_eq(block_calls("cudaMemcpyAsync_ptsz") - a, split_copies(big, false, false));
    expect_bytes(pinned, managed, big);
}
END_TEST

START_TEST(failed_query_leaves_no_last_error)
{
    /* Above the threshold, malloc'd source: classified, passed through, no error of ours left. */
    struct seen r = copy_async(pageable + MANAGED_SIZE / 2, pageable, test_cfg.threshold, cudaMemcpyDefault, 0);
    ck_assert_int_eq(r.rc, cudaSuccess);
    ck_assert_int_eq(cudaPeekAtLastError(), cudaSuccess);
    /* An error the program had before a split copy is still there after it. */
    ck_assert_int_ne(cudaMemcpyAsync(NULL, managed, 16, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    cudaError_t before = cudaPeekAtLastError();
    ck_assert_int_ne(before, cudaSuccess);
    r = copy_async(pinned, managed, big, cudaMemcpyDeviceToHost, 0);
    ck_assert_int_eq(r.rc, cudaSuccess);
    ck_assert_uint_eq(r.async_copies, split_copies(big, true, false));
    ck_assert_int_eq(cudaGetLastError(), before);
}
END_TEST

/* ---- stream order ---- */

struct probe {
    const uint8_t *dst;
    size_t n;
    uint8_t expect;
    int ok; /* 1: every byte as expected when the host function ran */
};

static void CUDART_CB probe_fn(void *arg)
{
    struct probe *p = arg;
    p->ok = 1;
    for (size_t i = 0; i < p->n; i++)
        if (p->dst[i] != p->expect) {
            p->ok = 0;
            break;
        }
}

/* A slow write queued before the copy is seen by it; a host function queued after it sees every
 * byte. A block issued on any other stream would run during the write and read stale bytes. */
static void CUDART_CB slow_writer_fn(void *arg)
{
    struct probe *p = arg;
    usleep(30000);
    memset(managed, p->expect, p->n);
}

static void check_order(cudaStream_t queue_on, bool ptsz)
{
    uvmsim_set_op_delay_us(1000);
    struct probe p = {.dst = pinned, .n = big, .expect = 0x5A, .ok = -1};
    ck_assert_int_eq(cudaLaunchHostFunc(queue_on, slow_writer_fn, &p), cudaSuccess);
    unsigned long long a = block_calls(ptsz ? "cudaMemcpyAsync_ptsz" : "cudaMemcpyAsync");
    cudaError_t rc = ptsz ? cudaMemcpyAsync_ptsz(pinned, managed, big, cudaMemcpyDeviceToHost, 0)
                          : cudaMemcpyAsync(pinned, managed, big, cudaMemcpyDeviceToHost, queue_on);
    ck_assert_int_eq(rc, cudaSuccess);
    ck_assert_uint_eq(block_calls(ptsz ? "cudaMemcpyAsync_ptsz" : "cudaMemcpyAsync") - a, split_copies(big, true, false));
    ck_assert_int_eq(cudaLaunchHostFunc(queue_on, probe_fn, &p), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(queue_on), cudaSuccess);
    ck_assert_int_eq(p.ok, 1);
    uvmsim_set_op_delay_us(0);
    fill_managed();
}

START_TEST(order_on_user_stream)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    check_order(s, false);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}
END_TEST

START_TEST(order_on_legacy_stream)
{
    check_order(0, false);
}
END_TEST

START_TEST(order_on_per_thread_stream)
{
    check_order(cudaStreamPerThread, true);
}
END_TEST

START_TEST(async_copy_returns_before_pinned_bytes_land)
{
    /* Behind queued work, the split cudaMemcpyAsync only queues (whatever the engine: the host
     * engine would have to wait): with every operation delayed, nothing has landed when it
     * returns; everything has after a synchronize. */
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    uvmsim_set_op_delay_us(20000);
    ck_assert_int_eq(cudaMemsetAsync(device, 0, 16, s), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(pinned, managed, big, cudaMemcpyDeviceToHost, s), cudaSuccess);
    size_t landed = 0;
    while (landed < big && pinned[landed] == test_pattern(landed))
        landed++;
    ck_assert_uint_lt(landed, test_cfg.chunk_size);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    expect_bytes(pinned, managed, big);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}
END_TEST

START_TEST(async_copy_into_pageable_is_complete_on_return)
{
    /* A device-to-host copy into pageable memory returns after it landed, even asynchronous
     * (CUDA Runtime API, cudaMemcpyAsync): read at once, with every operation delayed, the bytes must be there. */
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    uvmsim_set_op_delay_us(5000);
    unsigned long long b = block_calls("cudaMemcpyAsync");
    ck_assert_int_eq(cudaMemcpyAsync(pageable + 2, managed + 9, big, cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_uint_eq(block_calls("cudaMemcpyAsync") - b, split_copies(big, false, true));
    expect_bytes(pageable + 2, managed + 9, big);
    uvmsim_set_op_delay_us(0);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}
END_TEST

static void *first_copy_thread(void *arg)
{
    unsigned long long *blocks = arg;
    unsigned long long b = block_calls("cudaMemcpyAsync");
    cudaError_t rc = cudaMemcpyAsync(pinned, managed, big, cudaMemcpyDeviceToHost, 0);
    if (rc == cudaSuccess)
        rc = cudaStreamSynchronize(0);
    *blocks = rc == cudaSuccess ? block_calls("cudaMemcpyAsync") - b : 0;
    return NULL;
}

START_TEST(first_copy_on_a_new_thread_is_split)
{
    /* The thread has made no CUDA call yet, so it has no current context: the runtime is asked to
     * set one up, as the unmodified call would, and the copy is split like any other. */
    pthread_t th;
    unsigned long long blocks = 0;
    pthread_create(&th, NULL, first_copy_thread, &blocks);
    pthread_join(th, NULL);
    ck_assert_uint_eq(blocks, split_copies(big, true, false));
    expect_bytes(pinned, managed, big);
}
END_TEST

START_TEST(async_copy_behind_a_host_gate_does_not_deadlock)
{
    /* The stream waits for something the program does only after cudaMemcpyAsync returns: the
     * split call must return without waiting for any block, as the unsplit one would. */
    cudaStream_t s;
    struct test_gate g = TEST_GATE_INIT;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(cudaLaunchHostFunc(s, test_gate_wait, &g), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(pinned, managed, big, cudaMemcpyDeviceToHost, s), cudaSuccess);
    test_gate_open(&g);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    expect_bytes(pinned, managed, big);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}
END_TEST

/* ---- capture ---- */

START_TEST(capturing_stream_passes_through_and_stays_valid)
{
    enum cudaStreamCaptureMode modes[] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal,
                                         cudaStreamCaptureModeRelaxed};
    for (size_t k = 0; k < 3; k++) {
        cudaStream_t s;
        ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
        ck_assert_int_eq(cudaStreamBeginCapture(s, modes[k]), cudaSuccess);
        unsigned long long a = uvmsim_calls("cudaMemcpyAsync"), e = uvmsim_calls("cuEventCreate");
        ck_assert_int_eq(cudaMemcpyAsync(pinned, managed, big, cudaMemcpyDeviceToHost, s), cudaSuccess);
        ck_assert_uint_eq(uvmsim_calls("cudaMemcpyAsync") - a, 1);
        ck_assert_uint_eq(uvmsim_calls("cuEventCreate") - e, 0);
        cudaGraph_t g = NULL;
        ck_assert_int_eq(cudaStreamEndCapture(s, &g), cudaSuccess);
        ck_assert_ptr_nonnull(g);
        ck_assert_int_eq(cudaGraphDestroy(g), cudaSuccess);
        ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    }
}
END_TEST

/* ---- faults ---- */

START_TEST(failing_block_returns_its_error_and_leaks_nothing)
{
    size_t n = 16 * test_cfg.chunk_size;
    if (n + 1 > MANAGED_SIZE)
        n = (MANAGED_SIZE - 1) / test_cfg.chunk_size * test_cfg.chunk_size;
    /* On the legacy stream an asynchronous copy into pinned memory is always queued on the copy
     * engine (nothing may wait for that stream), in fewer, larger blocks. */
    size_t nb = split_copies(n, true, false);
    ck_assert_uint_gt(nb, 2);
    unsigned at[] = {1, (unsigned)(nb / 2), (unsigned)nb};
    unsigned long long events0 = uvmsim_live_events();
    for (size_t k = 0; k < 3; k++) {
        uvmsim_fail_nth("cudaMemcpyAsync", at[k], cudaErrorMemoryAllocation);
        unsigned long long a = uvmsim_calls("cudaMemcpyAsync");
        ck_assert_int_eq(cudaMemcpyAsync(pinned, managed, n, cudaMemcpyDeviceToHost, 0), cudaErrorMemoryAllocation);
        ck_assert_uint_eq(uvmsim_calls("cudaMemcpyAsync") - a, at[k]); /* nothing issued after it */
        ck_assert_int_eq(cudaGetLastError(), cudaErrorMemoryAllocation);
        ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
        ck_assert_uint_eq(uvmsim_live_events(), events0);
        memset(pinned, 0xEE, n + 1);
        struct seen r = copy_async(pinned, managed, n, cudaMemcpyDeviceToHost, 0);
        ck_assert_int_eq(r.rc, cudaSuccess);
        expect_bytes(pinned, managed, n);
    }
}
END_TEST

START_TEST(synchronous_copy_without_an_event_still_waits)
{
    /* No event for the final wait: the whole stream is synchronized instead; no error leaks. */
    uvmsim_set_op_delay_us(300);
    uvmsim_fail_nth("cuEventCreate", 1, CUDA_ERROR_OUT_OF_MEMORY);
    unsigned long long a = block_calls("cudaMemcpyAsync");
    ck_assert_int_eq(cudaMemcpy(pinned, managed, big, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_uint_eq(block_calls("cudaMemcpyAsync") - a, split_copies(big, false, false));
    expect_bytes(pinned, managed, big);
    ck_assert_int_eq(cudaPeekAtLastError(), cudaSuccess);
}
END_TEST

START_TEST(failed_final_wait_returns_its_error)
{
    uvmsim_fail_nth("cudaEventSynchronize", 1, cudaErrorLaunchFailure);
    ck_assert_int_eq(cudaMemcpy(pinned, managed, big, cudaMemcpyDeviceToHost), cudaErrorLaunchFailure);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorLaunchFailure);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
}
END_TEST

struct failed_wait {
    cudaStream_t s;
    cudaError_t rc, query, last;
};

static void *failed_wait_copy(void *arg)
{
    struct failed_wait *f = arg;
    f->rc = cudaMemcpyAsync(pageable, managed, big, cudaMemcpyDeviceToHost, f->s);
    f->query = cudaStreamQuery(f->s);
    f->last = cudaGetLastError();
    return NULL;
}

START_TEST(failed_wait_drains_the_stream_before_returning)
{
    /* The first wait of a copy into pageable memory fails while its blocks are still held back on
     * the stream: the call returns its error only once they landed, so nothing still writes the
     * staging ring (or the destination) when it is handed on. */
    struct failed_wait f = {0, cudaErrorUnknown, cudaErrorUnknown, cudaErrorUnknown};
    struct test_gate g = TEST_GATE_INIT;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&f.s, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(cudaLaunchHostFunc(f.s, test_gate_wait, &g), cudaSuccess);
    uvmsim_fail_nth("cudaEventSynchronize", 1, cudaErrorLaunchFailure);
    /* the gate opens after 1 s whether or not the call returned: a call that drains returns then */
    test_returns_before_gate(failed_wait_copy, &f, 1.0, &g);
    ck_assert_int_eq(f.rc, cudaErrorLaunchFailure);
    ck_assert_int_eq(f.query, cudaSuccess); /* nothing of the copy was still queued when it returned */
    ck_assert_int_eq(f.last, cudaErrorLaunchFailure); /* the failed wait's, as the unsplit call would leave */
    ck_assert_int_eq(cudaStreamDestroy(f.s), cudaSuccess);
}
END_TEST

/* FBGEMM's advice (torchrec#3399: preferred location CPU, accessed by the GPU), set through the driver so one test source serves both runtimes. */
static void advise_prefer_cpu(void *p, size_t n)
{
    CUmemLocation cpu = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
    CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    ck_assert_int_eq(cuMemAdvise_v2((CUdeviceptr)(uintptr_t)p, n, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, cpu), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAdvise_v2((CUdeviceptr)(uintptr_t)p, n, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu), CUDA_SUCCESS);
}

/* ---- hints (run with prefetch = host or device) ---- */

/* Only a source that prefers the host is ever prefetched there: the host suite advises it so. */
static void hints_advice(void)
{
    if (test_cfg.prefetch == UVMC_PREFETCH_HOST)
        advise_prefer_cpu(managed, MANAGED_SIZE);
}

START_TEST(prefetch_ahead_on_the_callers_stream)
{
    hints_advice();
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    struct {
        cudaStream_t given;
        bool ptsz;
        void *logged;
    } cases[] = {{s, false, s}, {0, false, (void *)CU_STREAM_LEGACY}, {0, true, (void *)CU_STREAM_PER_THREAD}};
    for (size_t k = 0; k < 3; k++) {
        uvmsim_reset();
        cudaError_t rc = cases[k].ptsz ? cudaMemcpyAsync_ptsz(pinned, managed, big, cudaMemcpyDeviceToHost, 0)
                                       : cudaMemcpyAsync(pinned, managed, big, cudaMemcpyDeviceToHost, cases[k].given);
        ck_assert_int_eq(rc, cudaSuccess);
        ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
        expect_bytes(pinned, managed, big);
        struct uvmsim_prefetch log[64];
        size_t nb = test_blocks(big), got = uvmsim_prefetch_log(log, 64);
        ck_assert_uint_eq(nb, test_queued_blocks(big)); /* one size of block whichever way it ran */
        ck_assert_uint_eq(got, nb); /* every block prefetched once */
        for (size_t i = 0; i < got && i < 64; i++) {
            ck_assert_ptr_eq(log[i].ptr, managed + i * test_cfg.chunk_size);
            ck_assert_int_eq(log[i].loc_type, test_cfg.prefetch == UVMC_PREFETCH_HOST ? UVMSIM_LOC_HOST : UVMSIM_LOC_DEVICE);
            ck_assert_ptr_eq(log[i].stream, cases[k].logged);
        }
        /* queued (copy engine, returns at once): at most a prefetch and a copy per block; else
         * (host engine, only on the idle non-blocking stream: the legacy and per-thread streams
         * may wait for each other) at most depth + 1 operations at a time */
        bool queued = test_cfg.prefetch != UVMC_PREFETCH_HOST || cases[k].given != s;
        ck_assert_uint_le(uvmsim_stat("max_outstanding"), queued ? 2 * nb : test_cfg.depth + 1);
    }
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}
END_TEST

START_TEST(failed_prefetch_never_fails_the_copy)
{
    hints_advice();
    uvmsim_fail_nth("cuMemPrefetchAsync_v2", 1, CUDA_ERROR_INVALID_VALUE);
    uvmsim_fail_nth("cuMemPrefetchAsync_v2", 2, CUDA_ERROR_INVALID_VALUE);
    struct seen r = copy_async(pinned, managed, big, cudaMemcpyDeviceToHost, 0);
    ck_assert_int_eq(r.rc, cudaSuccess);
    ck_assert_uint_eq(r.async_copies, test_queued_blocks(big));
    ck_assert_uint_eq(uvmsim_calls("cuMemPrefetchAsync_v2"), test_queued_blocks(big));
    ck_assert_int_eq(cudaPeekAtLastError(), cudaSuccess);
    expect_bytes(pinned, managed, big);
}
END_TEST

START_TEST(host_prefetch_skips_a_source_without_cpu_preference)
{
    /* prefetch = host on a table that does not prefer the CPU: it keeps its residency */
    struct seen r = copy_async(pinned, managed, big, cudaMemcpyDeviceToHost, 0);
    ck_assert_int_eq(r.rc, cudaSuccess);
    ck_assert_uint_eq(uvmsim_prefetch_log(NULL, 0), 0);
    ck_assert_uint_eq(uvmsim_stat("migrations_to_host"), 0);
    expect_bytes(pinned, managed, big);
}
END_TEST

START_TEST(no_prefetch_when_configured_none)
{
    /* ... and the host engine prefetches only a source that prefers the host (none does here). */
    struct seen r = copy_async(pinned, managed, big, cudaMemcpyDeviceToHost, 0);
    ck_assert_int_eq(r.rc, cudaSuccess);
    ck_assert_uint_eq(uvmsim_prefetch_log(NULL, 0), 0);
}
END_TEST

/* ---- host engine (engine = auto) ---- */

/* Which engine ran one copy on an idle user stream, told by the copies that reached the runtime:
 * none for the host engine, one per block for the copy engine (fewer when queued into pinned). */
static void expect_engine(void *dst, bool dst_pinned, const void *src, size_t n, bool host)
{
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    unsigned long long c = uvmsim_calls("cudaMemcpyAsync");
    ck_assert_int_eq(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    ck_assert_uint_eq(uvmsim_calls("cudaMemcpyAsync") - c,
                      host ? 0 : dst_pinned ? test_queued_blocks(n) : test_blocks(n));
    ck_assert_uint_eq(uvmsim_stat("host_functions"), 0);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}

START_TEST(auto_picks_host_only_for_a_cpu_preferred_source)
{
    expect_engine(pinned, true, managed, big, false);    /* no advice: copy engine */
    expect_bytes(pinned, managed, big);
    expect_engine(pageable, false, managed, big, false); /* no advice, pageable: copy engine, staged */
    expect_bytes(pageable, managed, big);
    memset(pinned, 0xEE, big + 1);
    memset(pageable, 0xEE, big + 1);
    advise_prefer_cpu(managed, MANAGED_SIZE);
    uvmsim_reset();
    expect_engine(pinned, true, managed, big, true);     /* prefers the CPU, idle stream: host */
    expect_bytes(pinned, managed, big);
    expect_engine(pageable, false, managed, big, true);
    expect_bytes(pageable, managed, big);
    /* the copy engine's reads above moved the first block to the device (no accessed-by yet); the
     * host engine's prefetch brought it back, and nothing went the other way */
    ck_assert_uint_eq(uvmsim_stat("migrations_to_device"), 0);
    ck_assert_int_eq(uvmsim_residency(managed), UVMSIM_LOC_HOST);
}
END_TEST

START_TEST(host_engine_prefetches_every_block_to_host)
{
    advise_prefer_cpu(managed, MANAGED_SIZE);
    ck_assert_int_eq(cudaMemcpyAsync(pageable + 3, managed + 5, big, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    expect_bytes(pageable + 3, managed + 5, big); /* complete on return */
    struct uvmsim_prefetch log[64];
    size_t got = uvmsim_prefetch_log(log, 64);
    ck_assert_uint_eq(got, test_blocks(big));
    for (size_t i = 0; i < got && i < 64; i++) {
        ck_assert_ptr_eq(log[i].ptr, managed + 5 + i * test_cfg.chunk_size);
        ck_assert_int_eq(log[i].loc_type, UVMSIM_LOC_HOST);
    }
    ck_assert_uint_le(uvmsim_stat("max_outstanding"), test_cfg.depth + 1);
}
END_TEST

START_TEST(host_engine_copies_in_stream_order_and_sizes)
{
    advise_prefer_cpu(managed, MANAGED_SIZE);
    size_t sizes[] = {big, 10000019, test_cfg.threshold, test_cfg.threshold + 3 * test_cfg.chunk_size};
    for (size_t k = 0; k < 4; k++) {
        size_t n = sizes[k];
        if (n + 64 > MANAGED_SIZE)
            continue;
        memset(pageable, 0xEE, n + 64);
        uvmsim_reset();
        struct seen r = copy_async(pageable + 17, managed + 29, n, cudaMemcpyDefault, 0);
        ck_assert_int_eq(r.rc, cudaSuccess);
        ck_assert_uint_eq(r.async_copies, 0);
        ck_assert_uint_eq(uvmsim_prefetch_log(NULL, 0), test_blocks(n));
        expect_bytes(pageable + 17, managed + 29, n);
    }
}
END_TEST

START_TEST(host_engine_failed_prefetch_still_copies)
{
    advise_prefer_cpu(managed, MANAGED_SIZE);
    uvmsim_fail_nth("cuMemPrefetchAsync_v2", 1, CUDA_ERROR_INVALID_VALUE);
    uvmsim_fail_nth("cuMemPrefetchAsync_v2", 3, CUDA_ERROR_INVALID_VALUE);
    struct seen r = copy_async(pageable, managed + 1, big, cudaMemcpyDeviceToHost, 0);
    ck_assert_int_eq(r.rc, cudaSuccess);
    ck_assert_uint_eq(r.async_copies, 0);
    ck_assert_int_eq(cudaPeekAtLastError(), cudaSuccess);
    expect_bytes(pageable, managed + 1, big);
    ck_assert_uint_eq(uvmsim_prefetch_log(NULL, 0), test_blocks(big) - 2); /* the others still ran */
}
END_TEST

START_TEST(host_engine_failed_wait_returns_error_and_leaks_nothing)
{
    advise_prefer_cpu(managed, MANAGED_SIZE);
    unsigned long long events0 = uvmsim_live_events();
    uvmsim_fail_nth("cudaEventSynchronize", 2, cudaErrorLaunchFailure);
    ck_assert_int_eq(cudaMemcpyAsync(pageable, managed, big, cudaMemcpyDeviceToHost, 0), cudaErrorLaunchFailure);
    ck_assert_int_eq(cudaGetLastError(), cudaErrorLaunchFailure);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    ck_assert_uint_eq(uvmsim_live_events(), events0);
    struct seen r = copy_async(pageable, managed, big, cudaMemcpyDeviceToHost, 0);
    ck_assert_int_eq(r.rc, cudaSuccess);
    expect_bytes(pageable, managed, big);
}
END_TEST

/* ---- pinned-allocation substitution (pinned_threshold set small) ---- */

static long rss_kib(void)
{
    return uvmc_proc_kib("/proc/self/status", "VmRSS");
}

static bool reported_pinned(void *p)
{
    struct cudaPointerAttributes a;
    ck_assert_int_eq(cudaPointerGetAttributes(&a, p), cudaSuccess);
    return a.type == cudaMemoryTypeHost;
}

START_TEST(large_pinned_requests_are_served_lazily)
{
    size_t thr = test_cfg.pinned_threshold, n = 64 * thr;
    unsigned long long pinned0 = uvmsim_pinned_bytes();
    long rss0 = rss_kib();
    uint8_t *p = NULL;
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    ck_assert_ptr_nonnull(p);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0);      /* nothing page-locked */
    ck_assert_int_lt(rss_kib() - rss0, (long)(thr >> 10));   /* nothing committed yet */
    memset(p, 1, thr);                                        /* only what is written */
    long grown = rss_kib() - rss0;
    ck_assert_int_ge(grown, (long)(thr >> 10) - 64);
    ck_assert_int_lt(grown, (long)(2 * thr >> 10) + 1024);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0);      /* CPU writes decide nothing */
    ck_assert(reported_pinned(p + n / 2));                   /* a query is a use: pinned first */
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + n);
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0);      /* unregistered, then unmapped */
    ck_assert_int_lt(rss_kib() - rss0, 1024);                 /* back to the baseline */
}
END_TEST

START_TEST(every_allocation_entry_point_substitutes_at_threshold)
{
    size_t thr = test_cfg.pinned_threshold;
    unsigned long long pinned0 = uvmsim_pinned_bytes();
    void *a = NULL, *b = NULL, *c = NULL, *d = NULL, *below = NULL;
    ck_assert_int_eq(cudaMallocHost(&a, thr), cudaSuccess);
    ck_assert_int_eq(cudaHostAlloc(&b, thr, cudaHostAllocPortable), cudaSuccess);
    ck_assert_int_eq(cuMemHostAlloc(&c, thr, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemAllocHost_v2(&d, thr + 1), CUDA_SUCCESS);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0);
    ck_assert_int_eq(cudaHostAlloc(&below, thr - 1, cudaHostAllocDefault), cudaSuccess);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + thr - 1); /* below: really pinned */
    ck_assert(reported_pinned(below));
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + thr - 1); /* the lazy ones: not yet */
    ck_assert(reported_pinned(a) && reported_pinned(c)); /* pinned at their first use */
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + 3 * thr - 1);
    ck_assert_int_eq(cudaFreeHost(a), cudaSuccess); /* converted */
    ck_assert_int_eq(cudaFreeHost(b), cudaSuccess); /* still undecided */
    ck_assert_int_eq(cuMemFreeHost(c), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemFreeHost(d), CUDA_SUCCESS);
    ck_assert_int_eq(cudaFreeHost(below), cudaSuccess);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0);
    /* Freed pointers are forgotten: a second free reaches the runtime, which rejects it. */
    ck_assert_int_ne(cudaFreeHost(a), cudaSuccess);
    cudaGetLastError();
}
END_TEST

START_TEST(mapped_or_write_combined_requests_stay_pinned)
{
    size_t thr = test_cfg.pinned_threshold;
    unsigned flags[] = {cudaHostAllocMapped, cudaHostAllocWriteCombined, cudaHostAllocMapped | cudaHostAllocPortable};
    for (size_t k = 0; k < 3; k++) {
        void *p = NULL;
        unsigned long long pinned0 = uvmsim_pinned_bytes();
        ck_assert_int_eq(cudaHostAlloc(&p, thr, flags[k]), cudaSuccess);
        ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + thr);
        ck_assert(reported_pinned(p));
        ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
    }
    void *q = NULL;
    ck_assert_int_eq(cuMemHostAlloc(&q, thr, CU_MEMHOSTALLOC_DEVICEMAP), CUDA_SUCCESS);
    ck_assert(reported_pinned(q));
    ck_assert_int_eq(cuMemFreeHost(q), CUDA_SUCCESS);
}
END_TEST

START_TEST(lazy_buffer_keeps_every_promise_of_pinned_memory)
{
    /* Its first query makes it what CUDA promised: page-locked, mapped for the device, with flags
     * and a device pointer; a malloc'd pointer still reports pageable. */
    uint8_t *p = NULL;
    unsigned flags = 77;
    void *dev = NULL;
    size_t n = test_cfg.pinned_threshold;
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    struct cudaPointerAttributes a;
    ck_assert_int_eq(cudaPointerGetAttributes(&a, p + 100), cudaSuccess);
    ck_assert_int_eq(a.type, cudaMemoryTypeHost);
    ck_assert_int_eq(cudaHostGetFlags(&flags, p), cudaSuccess);
    ck_assert_int_eq(cudaHostGetDevicePointer(&dev, p, 0), cudaSuccess);
    ck_assert_ptr_nonnull(dev);
    ck_assert_int_eq(uvmsim_device_access(p, n), CUDA_SUCCESS); /* a kernel may read it */
    ck_assert_int_eq(cudaPointerGetAttributes(&a, pageable), cudaSuccess);
    ck_assert_int_eq(a.type, cudaMemoryTypeUnregistered);
    ck_assert_int_eq(cudaHostGetDevicePointer(&dev, pageable, 0), cudaErrorInvalidValue);
    cudaGetLastError();
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
}
END_TEST

START_TEST(split_copy_destination_stays_pageable)
{
    /* The checkpoint destination: written by a split copy out of managed memory that returns after
     * it landed, it stays pageable and nothing is locked; its next other use (a query) pins it. An
     * asynchronous copy on the legacy stream, which may not wait, pins its destination first. */
    uint8_t *p = NULL, *q = NULL;
    size_t n = big > test_cfg.pinned_threshold ? big : test_cfg.pinned_threshold;
    unsigned long long pinned0 = uvmsim_pinned_bytes();
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n + GUARD, cudaHostAllocDefault), cudaSuccess);
    memset(p, 0xEE, n + GUARD);
    ck_assert_int_eq(cudaMemcpy(p, managed, n, cudaMemcpyDeviceToHost), cudaSuccess);
    expect_bytes(p, managed, n);
    /* the only page-locked bytes: the staging ring of the copy engine, at most depth slots */
    ck_assert_uint_le(uvmsim_pinned_bytes(), pinned0 + test_cfg.depth * test_cfg.chunk_size);
    ck_assert_uint_lt(uvmsim_pinned_bytes(), pinned0 + n);
    ck_assert_uint_eq(uvmsim_calls("cuMemHostRegister_v2"), 0);
    ck_assert(reported_pinned(p));
    ck_assert_uint_eq(uvmsim_calls("cuMemHostRegister_v2"), 1);
    ck_assert_int_eq(cudaHostAlloc((void **)&q, n + GUARD, cudaHostAllocDefault), cudaSuccess);
    memset(q, 0xEE, n + GUARD);
    ck_assert_int_eq(cudaMemcpyAsync(q, managed, n, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    ck_assert_uint_eq(uvmsim_calls("cuMemHostRegister_v2"), 2);
    ck_assert_int_eq(cudaStreamSynchronize(0), cudaSuccess);
    expect_bytes(q, managed, n);
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
    ck_assert_int_eq(cudaFreeHost(q), cudaSuccess);
}
END_TEST

struct capturer {
    pthread_barrier_t started, freed;
    int mode;
    cudaError_t end;
};

static void *capture_thread(void *arg)
{
    struct capturer *c = arg;
    cudaStream_t s;
    cudaGraph_t g = NULL;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaError_t begin = cudaStreamBeginCapture(s, (enum cudaStreamCaptureMode)c->mode);
    pthread_barrier_wait(&c->started);
    pthread_barrier_wait(&c->freed);
    c->end = begin != cudaSuccess ? begin : cudaStreamEndCapture(s, &g);
    if (g)
        cudaGraphDestroy(g);
    cudaStreamDestroy(s);
    return NULL;
}

START_TEST(free_during_another_threads_capture_keeps_it_valid)
{
    /* Freeing a lazy buffer still undecided waits for nothing, so it is legal while another thread
     * captures and leaves that capture valid (a converted one is unregistered, as the real free). */
    int modes[] = {cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal, cudaStreamCaptureModeRelaxed};
    for (int k = 0; k < 3; k++) {
        void *p = NULL;
        ck_assert_int_eq(cudaHostAlloc(&p, test_cfg.pinned_threshold, cudaHostAllocDefault), cudaSuccess);
        struct capturer c = {.mode = modes[k]};
        pthread_barrier_init(&c.started, NULL, 2);
        pthread_barrier_init(&c.freed, NULL, 2);
        pthread_t th;
        pthread_create(&th, NULL, capture_thread, &c);
        pthread_barrier_wait(&c.started);
        ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
        pthread_barrier_wait(&c.freed);
        pthread_join(th, NULL);
        ck_assert_msg(c.end == cudaSuccess, "mode %d: capture ended with %d", modes[k], (int)c.end);
        pthread_barrier_destroy(&c.started);
        pthread_barrier_destroy(&c.freed);
        cudaGetLastError();
    }
}
END_TEST

static void *substitute_on_fresh_thread(void *arg)
{
    CUresult *r = arg;
    void *p = NULL;
    CUcontext ctx = NULL;
    r[0] = (CUresult)cudaMallocHost(&p, test_cfg.pinned_threshold);
    r[1] = cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx ? CUDA_SUCCESS : CUDA_ERROR_INVALID_CONTEXT;
    r[2] = cuMemFreeHost(p);
    return NULL;
}

START_TEST(substituted_allocation_sets_up_the_context)
{
    /* As the real allocation would, the substituted one leaves the thread with a current context,
     * so the thread's later driver calls work. */
    CUresult r[3];
    pthread_t th;
    pthread_create(&th, NULL, substitute_on_fresh_thread, r);
    pthread_join(th, NULL);
    ck_assert_int_eq(r[0], CUDA_SUCCESS);
    ck_assert_int_eq(r[1], CUDA_SUCCESS);
    ck_assert_int_eq(r[2], CUDA_SUCCESS);
}
END_TEST

START_TEST(pytorch_checkpoint_sequence)
{
    /* to("cpu", non_blocking=True) on a managed table (torchrec#3399): a power-of-two pinned
     * destination, one device-to-host copy on a stream, an event, synchronize, free. */
    advise_prefer_cpu(managed, MANAGED_SIZE);
    size_t n = 9 * (size_t)1 << 20, pow2 = 16 << 20;
    ck_assert_uint_ge(n, test_cfg.threshold);
    ck_assert_uint_ge(pow2, test_cfg.pinned_threshold);
    uvmsim_reset();
    unsigned long long pinned0 = uvmsim_pinned_bytes();
    cudaStream_t s;
    cudaEvent_t ev;
    uint8_t *dst = NULL;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
    ck_assert_int_eq(cudaHostAlloc((void **)&dst, pow2, cudaHostAllocDefault), cudaSuccess);
    memset(dst, 0xEE, n + 1);
    uvmsim_set_op_delay_us(500);
    ck_assert_int_eq(cudaMemcpyAsync(dst, managed, n, cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaEventRecord(ev, s), cudaSuccess);
    ck_assert_int_eq(cudaEventSynchronize(ev), cudaSuccess);
    expect_bytes(dst, managed, n);
    ck_assert_uint_eq(uvmsim_calls("cudaMemcpyAsync"), 0); /* the host engine ran */
    ck_assert_uint_eq(uvmsim_stat("host_functions"), 0);
    ck_assert_uint_eq(uvmsim_pinned_peak(), pinned0);      /* nothing was locked */
    ck_assert_uint_eq(uvmsim_stat("migrations_to_host") + uvmsim_stat("migrations_to_device"), 0);
    /* Freed right after another copy into it: a copy into pageable memory has landed when its
     * call returns, so nothing can still write there. */
    ck_assert_int_eq(cudaMemcpyAsync(dst, managed, n, cudaMemcpyDeviceToHost, s), cudaSuccess);
    expect_bytes(dst, managed, n);
    ck_assert_int_eq(cudaFreeHost(dst), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    uvmsim_set_op_delay_us(0);
    cudaEventDestroy(ev);
    cudaStreamDestroy(s);
}
END_TEST

/* ---- disabled (enabled = off) ---- */

START_TEST(disabled_passes_everything_through)
{
    struct seen r = copy_async(pinned, managed, big, cudaMemcpyDeviceToHost, 0);
    ck_assert_int_eq(r.rc, cudaSuccess);
    ck_assert_uint_eq(r.async_copies, 1);
    ck_assert_uint_eq(r.queries, 0);
    expect_bytes(pinned, managed, big);
}
END_TEST

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "core";
    test_load_config();
    if (!test_require_preload("test_interpose", (const char *[]){"cudaMemcpyAsync", "cudaMemcpy_ptds", "cudaHostAlloc",
                                                                  "cuMemHostAlloc", NULL}))
        return 1;
    TCase *tc = test_case(which, setup, teardown);
    if (!strcmp(which, "core")) {
        if (test_cfg.prefetch != UVMC_PREFETCH_NONE || !test_cfg.enabled) {
            fprintf(stderr, "test_interpose core: run with prefetch = none and enabled = on\n");
            return 1;
        }
        tcase_add_test(tc, split_managed_base_to_pinned);
        tcase_add_test(tc, split_managed_interior_unaligned_to_pageable);
        tcase_add_test(tc, split_at_threshold_and_prime_sizes);
        tcase_add_test(tc, below_threshold_makes_no_cuda_call);
        tcase_add_test(tc, copy_crossing_end_of_allocation_passes_through);
        tcase_add_test(tc, non_managed_sources_pass_through);
        tcase_add_test(tc, non_host_destinations_pass_through);
        tcase_add_test(tc, only_device_to_host_and_default_kinds_split);
        tcase_add_test(tc, synchronous_entry_points_split_and_wait);
        tcase_add_test(tc, failed_query_leaves_no_last_error);
        tcase_add_test(tc, order_on_user_stream);
        tcase_add_test(tc, order_on_legacy_stream);
        tcase_add_test(tc, order_on_per_thread_stream);
        tcase_add_test(tc, async_copy_returns_before_pinned_bytes_land);
        tcase_add_test(tc, async_copy_behind_a_host_gate_does_not_deadlock);
        tcase_add_test(tc, async_copy_into_pageable_is_complete_on_return);
        tcase_add_test(tc, first_copy_on_a_new_thread_is_split);
        tcase_add_test(tc, capturing_stream_passes_through_and_stays_valid);
        tcase_add_test(tc, failing_block_returns_its_error_and_leaks_nothing);
        tcase_add_test(tc, synchronous_copy_without_an_event_still_waits);
        tcase_add_test(tc, failed_final_wait_returns_its_error);
        tcase_add_test(tc, failed_wait_drains_the_stream_before_returning);
        tcase_add_test(tc, no_prefetch_when_configured_none);
    } else if (!strcmp(which, "hints")) {
        if (test_cfg.prefetch == UVMC_PREFETCH_NONE) {
            fprintf(stderr, "test_interpose hints: run with prefetch = host or device\n");
            return 1;
        }
        tcase_add_test(tc, prefetch_ahead_on_the_callers_stream);
        tcase_add_test(tc, failed_prefetch_never_fails_the_copy);
        if (test_cfg.prefetch == UVMC_PREFETCH_HOST)
            tcase_add_test(tc, host_prefetch_skips_a_source_without_cpu_preference);
    } else if (!strcmp(which, "host")) {
        if (test_cfg.engine != UVMC_ENGINE_AUTO || test_cfg.prefetch != UVMC_PREFETCH_NONE) {
            fprintf(stderr, "test_interpose host: run with engine = auto and prefetch = none\n");
            return 1;
        }
        tcase_add_test(tc, auto_picks_host_only_for_a_cpu_preferred_source);
        tcase_add_test(tc, host_engine_prefetches_every_block_to_host);
        tcase_add_test(tc, host_engine_copies_in_stream_order_and_sizes);
        tcase_add_test(tc, host_engine_failed_prefetch_still_copies);
        tcase_add_test(tc, host_engine_failed_wait_returns_error_and_leaks_nothing);
    } else if (!strcmp(which, "pinned")) {
        if (test_cfg.pinned_threshold == 0 || test_cfg.pinned_threshold > ((size_t)4 << 20) ||
            test_cfg.threshold > ((size_t)9 << 20)) {
            fprintf(stderr, "test_interpose pinned: run with pinned_threshold 1..4MiB, threshold <= 9MiB\n");
            return 1;
        }
        tcase_add_test(tc, large_pinned_requests_are_served_lazily);
        tcase_add_test(tc, every_allocation_entry_point_substitutes_at_threshold);
        tcase_add_test(tc, mapped_or_write_combined_requests_stay_pinned);
        tcase_add_test(tc, lazy_buffer_keeps_every_promise_of_pinned_memory);
        tcase_add_test(tc, split_copy_destination_stays_pageable);
        tcase_add_test(tc, free_during_another_threads_capture_keeps_it_valid);
        tcase_add_test(tc, substituted_allocation_sets_up_the_context);
        tcase_add_test(tc, pytorch_checkpoint_sequence);
    } else if (!strcmp(which, "disabled")) {
        if (test_cfg.enabled) {
            fprintf(stderr, "test_interpose disabled: run with enabled = off\n");
            return 1;
        }
        tcase_add_test(tc, disabled_passes_everything_through);
    } else {
        fprintf(stderr, "usage: test_interpose [core|hints|host|pinned|disabled]\n");
        return 2;
    }
    return test_run(tc, which);
}
