/* test_fidelity.c: the library on the strict simulator (tests/sim/README.md): containment without range
 * attributes, bounded queues in every mode, no host functions, no needless migration, and no CPU
 * touch of managed memory while device work runs when concurrent managed access is 0. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "test_check.h"
#include "uvmsim.h"

extern __typeof__(cudaMemcpy) cudaMemcpy_ptds;
extern __typeof__(cudaMemcpyAsync) cudaMemcpyAsync_ptsz;

#define NBLK 512 /* blocks of the large copy */

static uint8_t *src, *pinned, *pageable;
static size_t n;       /* NBLK chunks */
static bool cma;       /* the device's concurrent managed access */
static cudaStream_t user;

static void fill(uint8_t *p, size_t len)
{
    for (size_t i = 0; i < len; i += 4096)
        p[i] = test_pattern(i / 4096);
    p[len - 1] = 0x77;
}

/* Every 4096th byte and the last: the whole buffer moved, in order, without reading the source. */
static void expect_copy(const uint8_t *dst, size_t len)
{
    for (size_t i = 0; i < len; i += 4096)
        if (dst[i] != test_pattern(i / 4096))
            ck_abort_msg("byte %zu of %zu differs", i, len);
    ck_assert_uint_eq(dst[len - 1], 0x77);
}

static void advise(void *p, size_t len, bool prefer_cpu)
{
    CUmemLocation cpu = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
    CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)p;
    if (prefer_cpu) {
        ck_assert_int_eq(cuMemAdvise_v2(d, len, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, cpu), CUDA_SUCCESS);
        ck_assert_int_eq(cuMemAdvise_v2(d, len, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu), CUDA_SUCCESS);
    } else {
        ck_assert_int_eq(cuMemAdvise_v2(d, len, CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION, cpu), CUDA_SUCCESS);
        ck_assert_int_eq(cuMemAdvise_v2(d, len, CU_MEM_ADVISE_UNSET_ACCESSED_BY, gpu), CUDA_SUCCESS);
    }
}

static void setup(void)
{
    n = NBLK * test_cfg.chunk_size;
    int v = 0;
    ck_assert_int_eq(cudaDeviceGetAttribute(&v, cudaDevAttrConcurrentManagedAccess, 0), cudaSuccess);
    cma = v == 1;
    ck_assert_int_eq(cudaMallocManaged((void **)&src, n, cudaMemAttachGlobal), cudaSuccess);
    ck_assert_int_eq(cudaMallocHost((void **)&pinned, n), cudaSuccess);
    pageable = malloc(n);
    ck_assert_ptr_nonnull(pageable);
    ck_assert_int_eq(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
    fill(src, n);
    uvmsim_set_op_delay_us(0);
    uvmsim_reset();
}

static void teardown(void)
{
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    /* the library never touched managed memory on the CPU while device work ran */
    ck_assert_uint_eq(uvmsim_stat("cma_violations"), 0);
    ck_assert_uint_eq(uvmsim_stat("host_functions"), 0);
    cudaStreamDestroy(user);
    cudaFree(src);
    cudaFreeHost(pinned);
    free(pageable);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}

START_TEST(split_without_range_attributes_and_not_across_allocations)
{
    /* The strict simulator fails every query that names a range attribute of managed memory
     * (tests/sim/README.md, UVMSIM_MANAGED_RANGE). */
    size_t size = 1;
    ck_assert_int_eq(cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, (CUdeviceptr)(uintptr_t)src),
                     CUDA_ERROR_INVALID_VALUE);
    size_t len = 6 * test_cfg.chunk_size + 5;
    unsigned long long c = uvmsim_calls("cudaMemcpy"), q = uvmsim_calls("cuPointerGetAttributes");
    ck_assert_int_eq(cudaMemcpy(pinned, src + 3, len, cudaMemcpyDeviceToHost), cudaSuccess);
    ck_assert_uint_eq(uvmsim_calls("cudaMemcpy") - c, 0); /* split: no unsplit call reached the runtime */
    /* the source's first and last byte, the destination */
    ck_assert_uint_eq(uvmsim_calls("cuPointerGetAttributes") - q, 3);
    /* Two managed allocations, one right after the other: a copy running from the first into the
     * second is not inside one allocation, so it passes through unsplit. */
    uint8_t *a, *b;
    size_t half = 4 * test_cfg.chunk_size > ((size_t)2 << 20) ? 4 * test_cfg.chunk_size : (size_t)2 << 20;
    ck_assert_int_eq(cudaMallocManaged((void **)&a, half, cudaMemAttachGlobal), cudaSuccess);
    ck_assert_int_eq(cudaMallocManaged((void **)&b, half, cudaMemAttachGlobal), cudaSuccess);
    ck_assert_msg(b == a + half, "the simulator placed the allocations apart; this test needs them adjacent");
    unsigned long long s = uvmsim_calls("cudaMemcpyAsync");
    cudaMemcpyAsync(pinned, a + half / 2, half, cudaMemcpyDeviceToHost, user);
    ck_assert_uint_eq(uvmsim_calls("cudaMemcpyAsync") - s, 1);
    cudaStreamSynchronize(user);
    cudaGetLastError(); /* whatever the unsplit call said is the runtime's answer */
    cudaFree(a);
    cudaFree(b);
}
END_TEST

/* One large copy through an entry point, then the queue bound: at most depth + 1 of the copy's own
 * operations were ever queued or running on the stream (a copy queued asynchronously into pinned
 * memory, which may not wait, at most its blocks: at most 4 x depth). */
static void expect_bounded_to(const char *what, cudaError_t rc, const uint8_t *dst, unsigned long long bound)
{
    ck_assert_msg(rc == cudaSuccess, "%s returned %d", what, (int)rc);
    ck_assert_int_eq(cudaStreamSynchronize(user), cudaSuccess);
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    expect_copy(dst, n);
    ck_assert_msg(uvmsim_stat("max_outstanding") <= bound, "%s: %llu operations outstanding, depth %u", what,
                  uvmsim_stat("max_outstanding"), test_cfg.depth);
    ck_assert_uint_eq(uvmsim_stat("host_functions"), 0);
    memset(pinned, 0, 4096);
    memset(pageable, 0, 4096);
    uvmsim_reset();
}

static void expect_bounded(const char *what, cudaError_t rc, const uint8_t *dst)
{
    expect_bounded_to(what, rc, dst, test_cfg.depth + 1);
}

START_TEST(large_copy_keeps_the_queue_bounded_in_every_mode)
{
    for (int pass = 0; pass < 2; pass++) { /* no advice (copy engine), then FBGEMM's (host engine) */
        advise(src, n, pass == 1);
        uvmsim_reset();
        expect_bounded("cudaMemcpy to pinned", cudaMemcpy(pinned, src, n, cudaMemcpyDeviceToHost), pinned);
        expect_bounded("cudaMemcpy_ptds to pageable", cudaMemcpy_ptds(pageable, src, n, cudaMemcpyDefault), pageable);
        expect_bounded("cudaMemcpyAsync to pageable",
                       cudaMemcpyAsync(pageable, src, n, cudaMemcpyDeviceToHost, user), pageable);
        expect_bounded("cudaMemcpyAsync to pageable, legacy stream",
                       cudaMemcpyAsync(pageable, src, n, cudaMemcpyDeviceToHost, 0), pageable);
        expect_bounded("cuMemcpyDtoH_v2 to pinned", (cudaError_t)cuMemcpyDtoH_v2(pinned, (CUdeviceptr)(uintptr_t)src, n),
                       pinned);
        expect_bounded("cuMemcpyAsync to pageable",
                       (cudaError_t)cuMemcpyAsync((CUdeviceptr)(uintptr_t)pageable, (CUdeviceptr)(uintptr_t)src, n,
                                                  (CUstream)user),
                       pageable);
        /* an idle stream: the host engine, which waits, when it may read managed memory while the
         * device works; else queued */
        expect_bounded_to("cudaMemcpyAsync to pinned, idle stream",
                          cudaMemcpyAsync(pinned, src, n, cudaMemcpyDeviceToHost, user), pinned,
                          pass == 1 && cma ? test_cfg.depth + 1 : test_queued_blocks(n));
    }
}
END_TEST

static void *open_gate_later(void *arg)
{
    usleep(3000000);
    test_gate_open(arg);
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

START_TEST(async_copy_into_pinned_never_blocks_a_full_stream)
{
    /* Nothing on the stream completes until the gate opens, 3 s later: a copy that put more than
     * the stream's capacity (64) on it would block its caller until then. */
    struct test_gate g = TEST_GATE_INIT;
    ck_assert_int_eq(cudaLaunchHostFunc(user, test_gate_wait, &g), cudaSuccess);
    pthread_t th;
    pthread_create(&th, NULL, open_gate_later, &g);
    double t0 = now_s();
    ck_assert_int_eq(cudaMemcpyAsync(pinned, src, n, cudaMemcpyDeviceToHost, user), cudaSuccess);
    double took = now_s() - t0;
    pthread_join(th, NULL);
    ck_assert_msg(took < 1.5, "the copy blocked its caller for %.2f s", took);
    ck_assert_int_eq(cudaStreamSynchronize(user), cudaSuccess);
    expect_copy(pinned, n);
    ck_assert_uint_le(uvmsim_stat("max_outstanding"), 1 + test_queued_blocks(n) * (test_cfg.prefetch ? 2 : 1));
    ck_assert_uint_le(test_queued_blocks(n), 24);
    ck_assert_uint_eq(uvmsim_stat("host_functions"), 1); /* the test's own gate */
    uvmsim_reset();
}
END_TEST

START_TEST(checkpoint_copy_of_an_fbgemm_table_migrates_nothing)
{
    /* PyTorch's to("cpu", non_blocking=True) of FBGEMM's table (torchrec#3399): pinned power-of-two
     * destination, copy on a side stream, event, synchronize; then the pageable form. */
    advise(src, n, true);
    uvmsim_reset();
    cudaEvent_t ev;
    ck_assert_int_eq(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(pinned, src, n, cudaMemcpyDeviceToHost, user), cudaSuccess);
    ck_assert_int_eq(cudaEventRecord(ev, user), cudaSuccess);
    ck_assert_int_eq(cudaEventSynchronize(ev), cudaSuccess);
    expect_copy(pinned, n);
    ck_assert_int_eq(cudaMemcpyAsync(pageable, src, n, cudaMemcpyDeviceToHost, user), cudaSuccess);
    expect_copy(pageable, n); /* complete on return */
    ck_assert_uint_eq(uvmsim_stat("migrations_to_host"), 0);
    ck_assert_uint_eq(uvmsim_stat("migrations_to_device"), 0);
    cudaEventDestroy(ev);
}
END_TEST

START_TEST(gpu_resident_table_copied_to_pageable_stays_on_the_device)
{
    if (!cma) /* no prefetch to a device without concurrent managed access */
        return;
    CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    ck_assert_int_eq(cuMemPrefetchAsync_v2((CUdeviceptr)(uintptr_t)src, n, gpu, 0, (CUstream)user), CUDA_SUCCESS);
    ck_assert_int_eq(cudaStreamSynchronize(user), cudaSuccess);
    uvmsim_reset();
    ck_assert_int_eq(cudaMemcpyAsync(pageable, src, n, cudaMemcpyDeviceToHost, user), cudaSuccess);
    expect_copy(pageable, n);
    ck_assert_uint_eq(uvmsim_stat("migrations_to_host"), 0);
    ck_assert_uint_eq(uvmsim_stat("migrations_to_device"), 0);
    for (size_t off = 0; off < n; off += (size_t)2 << 20)
        ck_assert_int_eq(uvmsim_residency(src + off), UVMSIM_LOC_DEVICE);
    ck_assert_uint_le(uvmsim_pinned_peak(), uvmsim_pinned_bytes() + test_cfg.depth * test_cfg.chunk_size);
}
END_TEST

/* A kernel on the caller's stream that dereferences pageable memory 20 ms into the copy: the
 * context's error is sticky from then on (cuda_runtime_api.h, cudaGetLastError). */
static void CUDART_CB poison_context(void *arg)
{
    usleep(20000);
    uvmsim_device_access(arg, 64);
}

START_TEST(context_error_mid_copy_releases_everything)
{
    for (int pass = 0; pass < 2; pass++) { /* copy engine (staged), then host engine */
        advise(src, n, pass == 1);
        uvmsim_set_op_delay_us(200);
        uvmsim_reset();
        ck_assert_int_eq(cudaLaunchHostFunc(user, poison_context, pageable), cudaSuccess);
        cudaError_t rc = cudaMemcpyAsync(pageable, src, n, cudaMemcpyDeviceToHost, user);
        ck_assert_int_eq(rc, cudaErrorIllegalAddress);
        /* every event the copy created it also destroyed (on a dead context the destroy fails,
         * as everything does, but nothing of the library's is left to outlive it) */
        ck_assert_uint_gt(uvmsim_calls("cuEventCreate"), 0);
        ck_assert_uint_eq(uvmsim_calls("cuEventDestroy_v2"), uvmsim_calls("cuEventCreate"));
        uvmsim_set_op_delay_us(0);
        uvmsim_reset(); /* a fresh context, as after cudaDeviceReset */
        ck_assert_int_eq(cudaStreamSynchronize(user), cudaSuccess);
        cudaGetLastError();
        ck_assert_int_eq(cudaMemcpyAsync(pageable, src, n, cudaMemcpyDeviceToHost, user), cudaSuccess);
        expect_copy(pageable, n);
    }
}
END_TEST

/* cudaDeviceReset releases every allocation of the context, the library's staging ring with them:
 * the next copy into pageable memory gets a new ring rather than one whose pages are gone. */
START_TEST(staging_ring_renewed_after_a_device_reset)
{
    advise(src, n, false); /* no CPU preference: the copy engine through the ring */
    ck_assert_int_eq(cudaMemcpy(pageable, src, n, cudaMemcpyDeviceToHost), cudaSuccess);
    expect_copy(pageable, n);
    unsigned long long rings = uvmsim_calls("cuMemHostAlloc");
    ck_assert_int_eq(cudaStreamDestroy(user), cudaSuccess);
    ck_assert_int_eq(cudaDeviceReset(), cudaSuccess);
    /* the fixture's allocations went with the context: new ones for the copy and the teardown */
    ck_assert_int_eq(cudaMallocManaged((void **)&src, n, cudaMemAttachGlobal), cudaSuccess);
    ck_assert_int_eq(cudaMallocHost((void **)&pinned, n), cudaSuccess);
    ck_assert_int_eq(cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking), cudaSuccess);
    fill(src, n);
    memset(pageable, 0, n);
    ck_assert_int_eq(cudaMemcpyAsync(pageable, src, n, cudaMemcpyDeviceToHost, user), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(user), cudaSuccess);
    expect_copy(pageable, n);
    ck_assert_uint_eq(uvmsim_calls("cuMemHostAlloc") - rings, 1); /* one new ring */
}
END_TEST

/* ---- found by review (issue 16): each failed before its fix */

struct async_copy {
    void *dst;
    const void *src;
    size_t n;
    cudaStream_t s;
    bool ptsz;
    cudaError_t rc;
};

static void *async_copy_main(void *arg)
{
    struct async_copy *a = arg;
    a->rc = (a->ptsz ? cudaMemcpyAsync_ptsz : cudaMemcpyAsync)(a->dst, a->src, a->n, cudaMemcpyDeviceToHost, a->s);
    return NULL;
}

START_TEST(async_copy_on_a_stream_behind_the_legacy_stream_returns)
{
    /* An idle stream created without cudaStreamNonBlocking (and the per-thread stream) still waits
     * for earlier legacy-stream work: with the legacy stream held at a gate the test opens only
     * after the call, a copy that waited for its stream would never return. FBGEMM's advice, so the
     * host engine is the candidate. */
    advise(src, n, true);
    cudaStream_t blocking;
    ck_assert_int_eq(cudaStreamCreate(&blocking), cudaSuccess);
    struct async_copy cases[] = {
        {pinned, src, n, blocking, false, cudaErrorUnknown},
        {pinned, src, n, cudaStreamPerThread, false, cudaErrorUnknown},
        {pinned, src, n, 0, true, cudaErrorUnknown}, /* stream 0 through _ptsz: the per-thread stream */
    };
    char waited[64] = "";
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        struct test_gate g = TEST_GATE_INIT;
        memset(pinned, 0, n);
        ck_assert_int_eq(cudaLaunchHostFunc(cudaStreamLegacy, test_gate_wait, &g), cudaSuccess);
        if (!test_returns_before_gate(async_copy_main, &cases[k], 10.0, &g))
            snprintf(waited + strlen(waited), sizeof waited - strlen(waited), " %zu", k);
        ck_assert_int_eq(cases[k].rc, cudaSuccess);
        ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
        expect_copy(pinned, n);
    }
    ck_assert_msg(!waited[0], "the asynchronous copy waited for the gated legacy stream in case(s)%s", waited);
    ck_assert_int_eq(cudaStreamDestroy(blocking), cudaSuccess);
    uvmsim_reset(); /* the test's own gates */
}
END_TEST

int main(void)
{
    test_load_config();
    if (!test_require_preload("test_fidelity", (const char *[]){"cudaMemcpyAsync", "cuMemcpyDtoH_v2", NULL}))
        return 1;
    if (test_cfg.engine != UVMC_ENGINE_AUTO || test_cfg.threshold > ((size_t)4 << 20)) {
        fprintf(stderr, "test_fidelity: run with engine = auto and threshold <= 4MiB\n");
        return 1;
    }
    TCase *tc = test_case("fidelity", setup, teardown);
    tcase_add_test(tc, split_without_range_attributes_and_not_across_allocations);
    tcase_add_test(tc, large_copy_keeps_the_queue_bounded_in_every_mode);
    tcase_add_test(tc, async_copy_into_pinned_never_blocks_a_full_stream);
    tcase_add_test(tc, checkpoint_copy_of_an_fbgemm_table_migrates_nothing);
    tcase_add_test(tc, gpu_resident_table_copied_to_pageable_stays_on_the_device);
    tcase_add_test(tc, context_error_mid_copy_releases_everything);
    tcase_add_test(tc, staging_ring_renewed_after_a_device_reset);
    tcase_add_test(tc, async_copy_on_a_stream_behind_the_legacy_stream_returns);
    return test_run(tc, "fidelity");
}
