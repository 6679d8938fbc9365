/* test_lazy.c: lazily pinned buffers keep every promise of pinned memory: a large pinned buffer
 * used as an ordinary staging buffer, under another thread's capture, converted once under a race,
 * through every allocation, registration and copy entry point, with a failing registration. */
#define __CUDA_API_VERSION_INTERNAL 1 /* every legacy, _v2 form under its own name (the uses test) */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <unistd.h>

#include "test_check.h"
#include "uvmsim.h"

static uint8_t *dev;
static size_t n; /* bytes of each lazy buffer: above pinned_threshold */

static void setup(void)
{
    n = test_cfg.pinned_threshold + test_cfg.pinned_threshold / 2;
    ck_assert_int_eq(cudaMalloc((void **)&dev, n), cudaSuccess);
    uvmsim_set_op_delay_us(0);
    cudaGetLastError();
    uvmsim_reset();
}

static void teardown(void)
{
    ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
    cudaFree(dev);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}

static bool is_pinned(const void *p) /* what PyTorch's is_pinned() asks */
{
    struct cudaPointerAttributes a;
    ck_assert_int_eq(cudaPointerGetAttributes(&a, p), cudaSuccess);
    return a.type == cudaMemoryTypeHost;
}

START_TEST(lazy_buffer_as_an_ordinary_staging_buffer)
{
    /* Filled on the CPU, copied to the device asynchronously (which must not wait for the copy,
     * as from pinned memory), then back. */
    uint8_t *p = NULL;
    unsigned long long pinned0 = uvmsim_pinned_bytes();
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0);
    for (size_t i = 0; i < n; i++)
        p[i] = test_pattern(i);
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    uvmsim_set_op_delay_us(30000);
    ck_assert_int_eq(cudaMemcpyAsync(dev, p, n, cudaMemcpyHostToDevice, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamQuery(s), cudaErrorNotReady); /* returned before it landed */
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + n);   /* pinned before the copy */
    ck_assert(is_pinned(p));
    ck_assert_int_eq(uvmsim_device_access(p, n), CUDA_SUCCESS);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    uvmsim_set_op_delay_us(0);
    memset(p, 0, n);
    ck_assert_int_eq(cudaMemcpyAsync(p, dev, n, cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    for (size_t i = 0; i < n; i++)
        if (p[i] != test_pattern(i))
            ck_abort_msg("byte %zu differs", i);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0);
}
END_TEST

START_TEST(small_copies_and_other_dimensions_pin_first)
{
    /* Below the copy threshold, through the driver, in 2-D: each first use pins the buffer. */
    uint8_t *a = NULL, *b = NULL, *c = NULL;
    ck_assert_int_eq(cudaMallocHost((void **)&a, n), cudaSuccess);
    ck_assert_int_eq(cuMemHostAlloc((void **)&b, n, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cudaHostAlloc((void **)&c, n, cudaHostAllocPortable), cudaSuccess);
    unsigned long long pinned0 = uvmsim_pinned_bytes();
    ck_assert_int_eq(cudaMemcpy(dev, a + 10, 4096, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + n);
    ck_assert_int_eq(cuMemcpyDtoH_v2(b + 100, (CUdeviceptr)(uintptr_t)dev, 100), CUDA_SUCCESS);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + 2 * n);
    CUDA_MEMCPY2D m = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = c, .srcPitch = 1024,
                       .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = (CUdeviceptr)(uintptr_t)dev,
                       .dstPitch = 1024, .WidthInBytes = 512, .Height = 8};
    ck_assert_int_eq(cuMemcpy2D_v2(&m), CUDA_SUCCESS);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + 3 * n);
    ck_assert_uint_eq(uvmsim_calls("cuMemHostRegister_v2"), 3);
    ck_assert_int_eq(cudaFreeHost(a), cudaSuccess);
    ck_assert_int_eq(cuMemFreeHost(b), CUDA_SUCCESS);
    ck_assert_int_eq(cudaFreeHost(c), cudaSuccess);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 - 0);
}
END_TEST

struct capture {
    cudaStream_t s;
    pthread_barrier_t begun, copied;
    cudaError_t end;
};

static void *capturing_thread(void *arg)
{
    struct capture *c = arg;
    cudaGraph_t g = NULL;
    ck_assert_int_eq(cudaStreamBeginCapture(c->s, cudaStreamCaptureModeGlobal), cudaSuccess);
    pthread_barrier_wait(&c->begun);
    pthread_barrier_wait(&c->copied);
    c->end = cudaStreamEndCapture(c->s, &g);
    if (g)
        cudaGraphDestroy(g);
    return NULL;
}

START_TEST(copy_captured_on_another_threads_stream)
{
    /* Pinning happens in relaxed capture mode: the other thread's global capture stays valid, and
     * the captured copy is of pinned memory (one of pageable memory would fail with 900). */
    uint8_t *p = NULL;
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    struct capture c;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&c.s, cudaStreamNonBlocking), cudaSuccess);
    pthread_barrier_init(&c.begun, NULL, 2);
    pthread_barrier_init(&c.copied, NULL, 2);
    pthread_t th;
    pthread_create(&th, NULL, capturing_thread, &c);
    pthread_barrier_wait(&c.begun);
    cudaError_t rc = cudaMemcpyAsync(dev, p, n, cudaMemcpyHostToDevice, c.s);
    pthread_barrier_wait(&c.copied);
    pthread_join(th, NULL);
    ck_assert_int_eq(rc, cudaSuccess);
    ck_assert_int_eq(c.end, cudaSuccess);
    ck_assert(is_pinned(p));
    pthread_barrier_destroy(&c.begun);
    pthread_barrier_destroy(&c.copied);
    ck_assert_int_eq(cudaStreamDestroy(c.s), cudaSuccess);
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
}
END_TEST

static uint8_t *race_buf;
static pthread_barrier_t race_start;
static atomic_int race_pinned;

static void *race_thread(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&race_start);
    struct cudaPointerAttributes a;
    if (cudaPointerGetAttributes(&a, race_buf + 4096) == cudaSuccess && a.type == cudaMemoryTypeHost)
        atomic_fetch_add(&race_pinned, 1);
    return NULL;
}

START_TEST(first_uses_racing_from_16_threads_pin_once)
{
    ck_assert_int_eq(cudaHostAlloc((void **)&race_buf, n, cudaHostAllocDefault), cudaSuccess);
    pthread_barrier_init(&race_start, NULL, 16);
    atomic_store(&race_pinned, 0);
    pthread_t th[16];
    for (int i = 0; i < 16; i++)
        pthread_create(&th[i], NULL, race_thread, NULL);
    for (int i = 0; i < 16; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&race_start);
    ck_assert_int_eq(atomic_load(&race_pinned), 16); /* every caller saw pinned memory */
    ck_assert_uint_eq(uvmsim_calls("cuMemHostRegister_v2"), 1);
    ck_assert_int_eq(cudaFreeHost(race_buf), cudaSuccess);
}
END_TEST

START_TEST(failed_pinning_leaves_the_buffer_pageable)
{
    uint8_t *p = NULL;
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    uvmsim_fail_nth("cuMemHostRegister_v2", 1, CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert(!is_pinned(p)); /* the call went on with the buffer pageable */
    ck_assert(!is_pinned(p)); /* and it is not tried again */
    ck_assert_uint_eq(uvmsim_calls("cuMemHostRegister_v2"), 1);
    ck_assert_int_eq(cudaMemcpy(dev, p, 4096, cudaMemcpyHostToDevice), cudaSuccess);
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
}
END_TEST

START_TEST(registrations_are_lazy_too)
{
    /* PyTorch's pinned_use_cuda_host_register: malloc, touch, register. Nothing is locked until a
     * use asks for it; unregistering a lazy range forgets it. */
    unsigned long long pinned0 = uvmsim_pinned_bytes();
    uint8_t *a = malloc(n), *b = malloc(n), *c = malloc(n), *m = malloc(n);
    memset(a, 1, n);
    ck_assert_int_eq(cudaHostRegister(a, n, cudaHostRegisterDefault), cudaSuccess);
    ck_assert_int_eq(cuMemHostRegister_v2(b, n, CU_MEMHOSTREGISTER_PORTABLE), CUDA_SUCCESS);
    ck_assert_int_eq(cudaHostRegister(c, n, cudaHostRegisterPortable), cudaSuccess);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0);
    ck_assert_int_eq(cudaHostRegister(m, n, cudaHostRegisterMapped), cudaSuccess); /* never lazy */
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + n);
    void *d = NULL;
    ck_assert_int_eq(cudaHostGetDevicePointer(&d, a + 8, 0), cudaSuccess); /* a use: pinned */
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + 2 * n);
    unsigned type = 0;
    ck_assert_int_eq(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, (CUdeviceptr)(uintptr_t)b),
                     CUDA_SUCCESS);
    ck_assert_uint_eq(type, CU_MEMORYTYPE_HOST);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + 3 * n);
    ck_assert_int_eq(cudaHostUnregister(a), cudaSuccess);   /* converted: unregistered */
    ck_assert_int_eq(cuMemHostUnregister(b), CUDA_SUCCESS);
    ck_assert_int_eq(cudaHostUnregister(c), cudaSuccess);   /* still lazy: forgotten */
    ck_assert_int_eq(cudaHostUnregister(m), cudaSuccess);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0);
    ck_assert_int_ne(cudaHostUnregister(c), cudaSuccess);   /* forgotten: the runtime's answer */
    cudaGetLastError();
    free(a);
    free(b);
    free(c);
    free(m);
}
END_TEST

/* ---- found by a reviewer: each failed before its fix */

static void *free_on_fresh_thread(void *arg)
{
    return (void *)(intptr_t)cudaFreeHost(arg);
}

START_TEST(converted_buffer_freed_on_a_thread_without_context)
{
    uint8_t *p = NULL;
    unsigned long long pinned0 = uvmsim_pinned_bytes();
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(dev, p, 4096, cudaMemcpyHostToDevice), cudaSuccess); /* pinned now */
    pthread_t th;
    void *rc = NULL;
    pthread_create(&th, NULL, free_on_fresh_thread, p);
    pthread_join(th, &rc);
    ck_assert_int_eq((int)(intptr_t)rc, cudaSuccess); /* the runtime set up the context first */
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0);
}
END_TEST

START_TEST(failed_unregister_keeps_the_buffer)
{
    uint8_t *p = NULL;
    unsigned long long pinned0 = uvmsim_pinned_bytes();
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    ck_assert(is_pinned(p));
    uvmsim_fail_nth("cuMemHostUnregister", 1, CUDA_ERROR_UNKNOWN);
    ck_assert_int_ne(cudaFreeHost(p), cudaSuccess);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + n); /* still registered, still mapped */
    p[n - 1] = 1;
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess); /* a retry frees it */
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0);
}
END_TEST

START_TEST(a_range_is_registered_once)
{
    /* What the real call says to a second registration of the same memory. */
    uint8_t *m = malloc(n), *p = NULL;
    ck_assert_int_eq(cudaHostRegister(m, n, 0), cudaSuccess);
    ck_assert_int_eq(cudaHostRegister(m, n, 0), cudaErrorHostMemoryAlreadyRegistered);
    ck_assert_int_eq(cuMemHostRegister_v2(m + 4096, 8192, 0), CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED);
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    ck_assert_int_eq(cudaHostRegister(p, n, 0), cudaErrorHostMemoryAlreadyRegistered);
    cudaGetLastError();
    ck_assert_int_eq(cudaHostUnregister(m), cudaSuccess);
    ck_assert_int_ne(cudaHostUnregister(m), cudaSuccess);
    cudaGetLastError();
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
    free(m);
}
END_TEST

struct drv_use {
    uint8_t *p;
    CUresult rc;
    int had_context_after;
};

static void *driver_use_without_context(void *arg)
{
    struct drv_use *u = arg;
    u->rc = cuMemcpyHtoD_v2((CUdeviceptr)(uintptr_t)dev, u->p, 4096);
    CUcontext ctx = NULL;
    cuCtxGetCurrent(&ctx);
    u->had_context_after = ctx != NULL;
    return NULL;
}

START_TEST(driver_use_on_a_thread_without_context_gets_the_real_answer)
{
    struct drv_use u = {0};
    ck_assert_int_eq(cudaHostAlloc((void **)&u.p, n, cudaHostAllocDefault), cudaSuccess);
    pthread_t th;
    pthread_create(&th, NULL, driver_use_without_context, &u);
    pthread_join(th, NULL);
    ck_assert_int_eq(u.rc, CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_int_eq(u.had_context_after, 0); /* no context was made current behind its back */
    ck_assert(is_pinned(u.p));                 /* a runtime use still pins it */
    ck_assert_int_eq(cudaFreeHost(u.p), cudaSuccess);
}
END_TEST

START_TEST(pageable_buffer_freed_after_the_device_is_done_with_it)
{
    /* It stayed pageable (a split copy's destination); a later unsplit device-to-host copy into it
     * may still run when the free comes (CUDA 12.2+): the free waits, as the real one does. */
    uint8_t *managed = NULL, *p = NULL;
    size_t big = 4 * test_cfg.chunk_size > test_cfg.threshold ? 4 * test_cfg.chunk_size : test_cfg.threshold;
    ck_assert_uint_le(big, n);
    ck_assert_int_eq(cudaMallocManaged((void **)&managed, big, cudaMemAttachGlobal), cudaSuccess);
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(p, managed, big, cudaMemcpyDeviceToHost), cudaSuccess); /* split: claims it */
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    uvmsim_set_op_delay_us(50000);
    ck_assert_int_eq(cudaMemcpyAsync(p, dev, 4096, cudaMemcpyDeviceToHost, s), cudaSuccess);
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess); /* must not unmap under the running copy */
    uvmsim_set_op_delay_us(0);
    ck_assert_int_eq(cudaStreamSynchronize(s), cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    ck_assert_int_eq(cudaFree(managed), cudaSuccess);
}
END_TEST

/* ---- found by review (issue 16): each failed before its fix */

static uint8_t *managed_source(bool prefer_cpu)
{
    uint8_t *m = NULL;
    ck_assert_int_eq(cudaMallocManaged((void **)&m, n, cudaMemAttachGlobal), cudaSuccess);
    for (size_t i = 0; i < n; i++)
        m[i] = test_pattern(i);
    if (prefer_cpu) { /* FBGEMM's advice: the host engine is the candidate */
        CUmemLocation cpu = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
        CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
        ck_assert_int_eq(cuMemAdvise_v2((CUdeviceptr)(uintptr_t)m, n, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, cpu),
                         CUDA_SUCCESS);
        ck_assert_int_eq(cuMemAdvise_v2((CUdeviceptr)(uintptr_t)m, n, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu),
                         CUDA_SUCCESS);
    }
    return m;
}

static void expect_pattern(const uint8_t *p)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != test_pattern(i))
            ck_abort_msg("byte %zu differs", i);
}

struct async_copy {
    void *dst;
    const void *src;
    cudaStream_t s;
    cudaError_t rc;
};

static void *async_copy_main(void *arg)
{
    struct async_copy *a = arg;
    a->rc = cudaMemcpyAsync(a->dst, a->src, n, cudaMemcpyDeviceToHost, a->s);
    return NULL;
}

START_TEST(async_copy_into_a_lazy_buffer_never_waits_for_its_stream)
{
    /* The program got pinned memory: cudaMemcpyAsync into it returns at once, even when the stream
     * waits for something the program does only after the call (a host function at a gate; an
     * idle blocking stream behind the gated legacy stream). Whichever engine the source invites. */
    cudaStream_t nonblocking, blocking;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&nonblocking, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(cudaStreamCreate(&blocking), cudaSuccess);
    char waited[128] = "";
    int unpinned = 0;
    for (int prefer_cpu = 0; prefer_cpu < 2; prefer_cpu++)
        for (int k = 0; k < 3; k++) {
            uint8_t *m = managed_source(prefer_cpu), *p = NULL;
            ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
            struct test_gate g = TEST_GATE_INIT;
            struct async_copy a = {p, m, k == 0 ? nonblocking : k == 1 ? blocking : 0, cudaErrorUnknown};
            ck_assert_int_eq(cudaLaunchHostFunc(k == 0 ? nonblocking : cudaStreamLegacy, test_gate_wait, &g),
                             cudaSuccess);
            if (!test_returns_before_gate(async_copy_main, &a, 10.0, &g))
                snprintf(waited + strlen(waited), sizeof waited - strlen(waited), " %s/%s",
                         prefer_cpu ? "host-preferred" : "no-advice",
                         k == 0 ? "gated non-blocking" : k == 1 ? "blocking" : "legacy");
            ck_assert_int_eq(a.rc, cudaSuccess);
            ck_assert_int_eq(cudaDeviceSynchronize(), cudaSuccess);
            expect_pattern(p);
            unpinned += !is_pinned(p); /* what it was promised to be */
            ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
            ck_assert_int_eq(cudaFree(m), cudaSuccess);
        }
    ck_assert_msg(!waited[0], "the asynchronous copy waited for its stream:%s", waited);
    ck_assert_int_eq(unpinned, 0);
    ck_assert_int_eq(cudaStreamDestroy(nonblocking), cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(blocking), cudaSuccess);
}
END_TEST

START_TEST(checkpoint_copy_on_an_idle_stream_stays_lazy)
{
    /* DCP's loader: to("cpu", non_blocking=True) on PyTorch's current stream (the legacy one,
     * torch 2.11 filesystem.py; or a stream of its pool, created non-blocking), with nothing queued,
     * into a fresh block of the caching host allocator: nothing is locked, the bytes are there when
     * the call returns; the block recycled for the next tensor is written the same way. */
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    uint8_t *m = managed_source(true), *p = NULL;
    unsigned long long pinned0 = uvmsim_pinned_bytes();
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    for (int round = 0; round < 4; round++) { /* PyTorch's pool stream twice, its default (legacy) twice */
        cudaStream_t on = round < 2 ? s : 0;
        memset(p, 0, n);
        ck_assert_int_eq(cudaMemcpyAsync(p, m, n, cudaMemcpyDeviceToHost, on), cudaSuccess);
        expect_pattern(p);
        ck_assert_int_eq(cudaStreamSynchronize(on), cudaSuccess);
    }
    ck_assert_uint_eq(uvmsim_pinned_peak(), pinned0);
    ck_assert_uint_eq(uvmsim_calls("cuMemHostRegister_v2"), 0);
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
    ck_assert_int_eq(cudaFree(m), cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
}
END_TEST

static void CUDART_CB short_work(void *arg)
{
    (void)arg;
    usleep(5000); /* a smaller copy of DCP's loader still in flight */
}

START_TEST(checkpoint_copy_behind_short_work_stays_lazy)
{
    /* DCP's loader queues its smaller copies first (sorted by size) on the same stream: one still
     * in flight when the table's copy comes must not make the library pin the whole buffer. */
    uint8_t *m = managed_source(true), *p = NULL;
    unsigned long long pinned0 = uvmsim_pinned_bytes();
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    ck_assert_int_eq(cudaLaunchHostFunc(0, short_work, NULL), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(p, m, n, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(0), cudaSuccess);
    expect_pattern(p);
    ck_assert_uint_eq(uvmsim_pinned_peak(), pinned0);
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
    ck_assert_int_eq(cudaFree(m), cudaSuccess);
}
END_TEST

START_TEST(buffer_a_split_copy_wrote_is_pinned_at_its_next_other_use)
{
    /* PyTorch's host allocator hands a block a checkpoint copy wrote to its next user, who was
     * promised pinned memory: a device pointer, is_pinned(), device access. */
    uint8_t *m = managed_source(true), *p = NULL;
    unsigned long long pinned0 = uvmsim_pinned_bytes();
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(p, m, n, cudaMemcpyDeviceToHost), cudaSuccess); /* split */
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0);
    void *d = NULL;
    ck_assert_int_eq(cudaHostGetDevicePointer(&d, p, 0), cudaSuccess);
    ck_assert_ptr_nonnull(d);
    ck_assert(is_pinned(p));
    ck_assert_int_eq(uvmsim_device_access(p, n), CUDA_SUCCESS);
    ck_assert_uint_eq(uvmsim_pinned_bytes(), pinned0 + n);
    expect_pattern(p);
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
    ck_assert_int_eq(cudaFree(m), cudaSuccess);
}
END_TEST

static void *free_main(void *arg)
{
    return (void *)(intptr_t)cudaFreeHost(arg);
}

static void *query_main(void *arg)
{
    struct cudaPointerAttributes a;
    return (void *)(intptr_t)cudaPointerGetAttributes(&a, arg);
}

START_TEST(a_free_waiting_for_the_device_blocks_no_unrelated_pointer)
{
    /* A buffer whose pinning failed stays pageable; its free waits for the device, which waits at a
     * gate. Meanwhile another thread asks about an unrelated mapping that lies between two lazy
     * buffers: it must not wait for the free. */
    size_t mib = (size_t)1 << 20;
    uint8_t *a = mmap(NULL, 2 * n + mib, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0), *c = NULL;
    ck_assert_ptr_ne(a, MAP_FAILED);
    uint8_t *mid = a + n, *b = a + n + mib; /* registered lazily on either side of mid */
    ck_assert_int_eq(cudaHostRegister(a, n, cudaHostRegisterDefault), cudaSuccess);
    ck_assert_int_eq(cudaHostRegister(b, n, cudaHostRegisterDefault), cudaSuccess);
    ck_assert_int_eq(cudaHostAlloc((void **)&c, n, cudaHostAllocDefault), cudaSuccess);
    uvmsim_fail_nth("cuMemHostRegister_v2", 1, CUDA_ERROR_OUT_OF_MEMORY);
    ck_assert(!is_pinned(c)); /* pageable for good */
    cudaStream_t s;
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), cudaSuccess);
    struct test_gate g = TEST_GATE_INIT;
    ck_assert_int_eq(cudaLaunchHostFunc(s, test_gate_wait, &g), cudaSuccess);
    unsigned long long syncs = uvmsim_calls("cuCtxSynchronize");
    pthread_t th;
    pthread_create(&th, NULL, free_main, c);
    while (uvmsim_calls("cuCtxSynchronize") == syncs) /* the free is waiting for the device */
        usleep(1000);
    usleep(50000);
    bool returned = test_returns_before_gate(query_main, mid, 10.0, &g);
    void *rc = NULL;
    pthread_join(th, &rc);
    ck_assert_msg(returned, "a pointer query on an unrelated mapping waited for another thread's free");
    ck_assert_int_eq((int)(intptr_t)rc, cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(s), cudaSuccess);
    ck_assert_int_eq(cudaHostUnregister(a), cudaSuccess);
    ck_assert_int_eq(cudaHostUnregister(b), cudaSuccess);
    munmap(a, 2 * n + mib);
}
END_TEST

START_TEST(converted_default_requests_are_portable_and_mapped)
{
    /* What the real calls would have made: every host allocation is reachable from all contexts
     * under unified addressing (cuda_runtime_api.h and cuda.h, "Automatic Mapping of Host Allocated
     * Host Memory"), a runtime registration with default flags is "both mapped and portable"
     * (cudaHostRegister); a driver registration keeps its own flags, mapped. */
    const int both = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP;
    uint8_t *a = NULL, *b = NULL, *r = malloc(n), *d = malloc(n);
    ck_assert_int_eq(cudaHostAlloc((void **)&a, n, cudaHostAllocDefault), cudaSuccess);
    ck_assert_int_eq(cuMemHostAlloc((void **)&b, n, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cudaHostRegister(r, n, cudaHostRegisterDefault), cudaSuccess);
    ck_assert_int_eq(cuMemHostRegister_v2(d, n, 0), CUDA_SUCCESS);
    ck_assert(is_pinned(a) && is_pinned(b) && is_pinned(r) && is_pinned(d));
    ck_assert_int_eq(uvmsim_host_flags(a), both);
    ck_assert_int_eq(uvmsim_host_flags(b), both);
    ck_assert_int_eq(uvmsim_host_flags(r), both);
    ck_assert_int_eq(uvmsim_host_flags(d), CU_MEMHOSTREGISTER_DEVICEMAP);
    ck_assert_int_eq(cudaFreeHost(a), cudaSuccess);
    ck_assert_int_eq(cuMemFreeHost(b), CUDA_SUCCESS);
    ck_assert_int_eq(cudaHostUnregister(r), cudaSuccess);
    ck_assert_int_eq(cuMemHostUnregister(d), CUDA_SUCCESS);
    free(r);
    free(d);
}
END_TEST

/* ---- every other use the library can see (issue 16, item 9): each entry point, by name (the
 * _ptds/_ptsz forms have the prototype of their base), given a fresh lazy buffer p; it must be
 * page-locked afterwards, whether or not the simulator runs the call itself. */

static cudaStream_t uses_stream;
static struct cudaPitchedPtr make_cudaPitchedPtr(void *d, size_t p, size_t xsz, size_t ysz)
{
    struct cudaPitchedPtr s = {d, p, xsz, ysz};
    return s;
}
static struct cudaExtent make_cudaExtent(size_t w, size_t h, size_t d)
{
    struct cudaExtent e = {w, h, d};
    return e;
}
static CUcontext uses_ctx;
#define FN(type) ((__typeof__(&type))fn)
#define D(p) ((CUdeviceptr)(uintptr_t)(p))

static int use_memset(void *fn, uint8_t *p) { return FN(cudaMemset)(p, 1, 4096); }
static int use_memset_async(void *fn, uint8_t *p) { return FN(cudaMemsetAsync)(p, 1, 4096, uses_stream); }
static int use_memset_2d(void *fn, uint8_t *p) { return FN(cudaMemset2D)(p, 1024, 1, 512, 4); }
static int use_memset_2d_async(void *fn, uint8_t *p) { return FN(cudaMemset2DAsync)(p, 1024, 1, 512, 4, uses_stream); }
static int use_memset_3d(void *fn, uint8_t *p)
{
    return FN(cudaMemset3D)(make_cudaPitchedPtr(p, 1024, 512, 4), 1, make_cudaExtent(512, 4, 2));
}
static int use_memset_3d_async(void *fn, uint8_t *p)
{
    return FN(cudaMemset3DAsync)(make_cudaPitchedPtr(p, 1024, 512, 4), 1, make_cudaExtent(512, 4, 2), uses_stream);
}
static int use_peer(void *fn, uint8_t *p) { return FN(cudaMemcpyPeer)(dev, 0, p, 0, 4096); }
static int use_peer_async(void *fn, uint8_t *p) { return FN(cudaMemcpyPeerAsync)(p, 0, dev, 0, 4096, uses_stream); }
static struct cudaMemcpy3DPeerParms peer3d(uint8_t *p)
{
    struct cudaMemcpy3DPeerParms m;
    memset(&m, 0, sizeof m);
    m.srcPtr = make_cudaPitchedPtr(p, 1024, 512, 4);
    m.dstPtr = make_cudaPitchedPtr(dev, 1024, 512, 4);
    m.extent = make_cudaExtent(512, 4, 1);
    return m;
}
static int use_peer_3d(void *fn, uint8_t *p)
{
    struct cudaMemcpy3DPeerParms m = peer3d(p);
    return FN(cudaMemcpy3DPeer)(&m);
}
static int use_peer_3d_async(void *fn, uint8_t *p)
{
    struct cudaMemcpy3DPeerParms m = peer3d(p);
    return FN(cudaMemcpy3DPeerAsync)(&m, uses_stream);
}
static int use_batch(void *fn, uint8_t *p)
{
    void *dsts[] = {dev};
    const void *srcs[] = {p + 8192};
    size_t sizes[] = {4096}, idx[] = {0};
    struct cudaMemcpyAttributes at;
    memset(&at, 0, sizeof at);
    at.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    return FN(cudaMemcpyBatchAsync)(dsts, srcs, sizes, 1, &at, idx, 1, uses_stream);
}
static int use_batch_3d(void *fn, uint8_t *p)
{
    struct cudaMemcpy3DBatchOp op;
    memset(&op, 0, sizeof op);
    op.dst.type = cudaMemcpyOperandTypePointer;
    op.dst.op.ptr.ptr = p;
    op.src.type = cudaMemcpyOperandTypePointer;
    op.src.op.ptr.ptr = dev;
    op.extent = make_cudaExtent(512, 4, 1);
    op.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    return FN(cudaMemcpy3DBatchAsync)(1, &op, 0, uses_stream);
}
static int use_d8(void *fn, uint8_t *p) { return FN(cuMemsetD8_v2)(D(p), 1, 4096); }
static int use_d16(void *fn, uint8_t *p) { return FN(cuMemsetD16_v2)(D(p), 1, 2048); }
static int use_d32(void *fn, uint8_t *p) { return FN(cuMemsetD32_v2)(D(p), 1, 1024); }
static int use_d8_async(void *fn, uint8_t *p) { return FN(cuMemsetD8Async)(D(p), 1, 4096, uses_stream); }
static int use_d16_async(void *fn, uint8_t *p) { return FN(cuMemsetD16Async)(D(p), 1, 2048, uses_stream); }
static int use_d32_async(void *fn, uint8_t *p) { return FN(cuMemsetD32Async)(D(p), 1, 1024, uses_stream); }
static int use_d2d8(void *fn, uint8_t *p) { return FN(cuMemsetD2D8_v2)(D(p), 1024, 1, 512, 4); }
static int use_d2d16(void *fn, uint8_t *p) { return FN(cuMemsetD2D16_v2)(D(p), 1024, 1, 256, 4); }
static int use_d2d32(void *fn, uint8_t *p) { return FN(cuMemsetD2D32_v2)(D(p), 1024, 1, 128, 4); }
static int use_d2d8_async(void *fn, uint8_t *p) { return FN(cuMemsetD2D8Async)(D(p), 1024, 1, 512, 4, uses_stream); }
static int use_d2d16_async(void *fn, uint8_t *p) { return FN(cuMemsetD2D16Async)(D(p), 1024, 1, 256, 4, uses_stream); }
static int use_d2d32_async(void *fn, uint8_t *p) { return FN(cuMemsetD2D32Async)(D(p), 1024, 1, 128, 4, uses_stream); }
static int use_cu_peer(void *fn, uint8_t *p) { return FN(cuMemcpyPeer)(D(p), uses_ctx, D(dev), uses_ctx, 4096); }
static int use_cu_peer_async(void *fn, uint8_t *p)
{
    return FN(cuMemcpyPeerAsync)(D(dev), uses_ctx, D(p), uses_ctx, 4096, (CUstream)uses_stream);
}
static CUDA_MEMCPY3D_PEER cu_peer3d(uint8_t *p)
{
    CUDA_MEMCPY3D_PEER m;
    memset(&m, 0, sizeof m);
    m.srcMemoryType = CU_MEMORYTYPE_HOST;
    m.srcHost = p;
    m.srcPitch = 1024;
    m.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    m.dstDevice = D(dev);
    m.dstPitch = 1024;
    m.WidthInBytes = 512;
    m.Height = 4;
    m.Depth = 1;
    return m;
}
static int use_cu_peer_3d(void *fn, uint8_t *p)
{
    CUDA_MEMCPY3D_PEER m = cu_peer3d(p);
    return FN(cuMemcpy3DPeer)(&m);
}
static int use_cu_peer_3d_async(void *fn, uint8_t *p)
{
    CUDA_MEMCPY3D_PEER m = cu_peer3d(p);
    return FN(cuMemcpy3DPeerAsync)(&m, (CUstream)uses_stream);
}
static int use_cu_batch(void *fn, uint8_t *p)
{
    CUdeviceptr dsts[] = {D(p)}, srcs[] = {D(dev)};
    size_t sizes[] = {4096}, idx[] = {0}, fail = 0;
    CUmemcpyAttributes at;
    memset(&at, 0, sizeof at);
    at.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    return FN(cuMemcpyBatchAsync)(dsts, srcs, sizes, 1, &at, idx, 1, &fail, (CUstream)uses_stream);
}
static int use_cu_batch_v2(void *fn, uint8_t *p)
{
    CUdeviceptr dsts[] = {D(dev)}, srcs[] = {D(p)};
    size_t sizes[] = {4096}, idx[] = {0};
    CUmemcpyAttributes at;
    memset(&at, 0, sizeof at);
    at.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    return FN(cuMemcpyBatchAsync_v2)(dsts, srcs, sizes, 1, &at, idx, 1, (CUstream)uses_stream);
}
static CUDA_MEMCPY3D_BATCH_OP cu_batch_op(uint8_t *p)
{
    CUDA_MEMCPY3D_BATCH_OP op;
    memset(&op, 0, sizeof op);
    op.src.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op.src.op.ptr.ptr = D(p);
    op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op.dst.op.ptr.ptr = D(dev);
    op.extent.width = 512;
    op.extent.height = 4;
    op.extent.depth = 1;
    op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    return op;
}
static int use_cu_batch_3d(void *fn, uint8_t *p)
{
    CUDA_MEMCPY3D_BATCH_OP op = cu_batch_op(p);
    size_t fail = 0;
    return FN(cuMemcpy3DBatchAsync)(1, &op, &fail, 0, (CUstream)uses_stream);
}
static int use_cu_batch_3d_v2(void *fn, uint8_t *p)
{
    CUDA_MEMCPY3D_BATCH_OP op = cu_batch_op(p);
    return FN(cuMemcpy3DBatchAsync_v2)(1, &op, 0, (CUstream)uses_stream);
}
static int use_host_get_device_pointer_v1(void *fn, uint8_t *p)
{
    CUdeviceptr_v1 d = 0;
    return ((CUresult(*)(CUdeviceptr_v1 *, void *, unsigned int))fn)(&d, p, 0);
}

/* The runtime this program runs on defines name (else the library has nothing to forward to). */
static bool runtime_defines(const char *name)
{
    static const char *const sonames[] = {"libcudart.so.13", "libcudart.so.12"};
    for (size_t i = 0; i < 2; i++) {
        void *h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
        bool has = h && dlsym(h, name);
        if (h)
            dlclose(h); /* drops only the reference NOLOAD took */
        if (has)
            return true;
    }
    return false;
}

START_TEST(every_other_observed_use_pins_first)
{
    static const struct {
        const char *name;
        int (*use)(void *, uint8_t *);
    } uses[] = {
        {"cudaMemset", use_memset}, {"cudaMemset_ptds", use_memset},
        {"cudaMemsetAsync", use_memset_async}, {"cudaMemsetAsync_ptsz", use_memset_async},
        {"cudaMemset2D", use_memset_2d}, {"cudaMemset2D_ptds", use_memset_2d},
        {"cudaMemset2DAsync", use_memset_2d_async}, {"cudaMemset2DAsync_ptsz", use_memset_2d_async},
        {"cudaMemset3D", use_memset_3d}, {"cudaMemset3D_ptds", use_memset_3d},
        {"cudaMemset3DAsync", use_memset_3d_async}, {"cudaMemset3DAsync_ptsz", use_memset_3d_async},
        {"cudaMemcpyPeer", use_peer}, {"cudaMemcpyPeerAsync", use_peer_async},
        {"cudaMemcpy3DPeer", use_peer_3d}, {"cudaMemcpy3DPeer_ptds", use_peer_3d},
        {"cudaMemcpy3DPeerAsync", use_peer_3d_async}, {"cudaMemcpy3DPeerAsync_ptsz", use_peer_3d_async},
        {"cudaMemcpyBatchAsync", use_batch}, {"cudaMemcpyBatchAsync_ptsz", use_batch},
        {"cudaMemcpy3DBatchAsync", use_batch_3d}, {"cudaMemcpy3DBatchAsync_ptsz", use_batch_3d},
        {"cuMemsetD8_v2", use_d8}, {"cuMemsetD8_v2_ptds", use_d8},
        {"cuMemsetD16_v2", use_d16}, {"cuMemsetD16_v2_ptds", use_d16},
        {"cuMemsetD32_v2", use_d32}, {"cuMemsetD32_v2_ptds", use_d32},
        {"cuMemsetD8Async", use_d8_async}, {"cuMemsetD8Async_ptsz", use_d8_async},
        {"cuMemsetD16Async", use_d16_async}, {"cuMemsetD16Async_ptsz", use_d16_async},
        {"cuMemsetD32Async", use_d32_async}, {"cuMemsetD32Async_ptsz", use_d32_async},
        {"cuMemsetD2D8_v2", use_d2d8}, {"cuMemsetD2D8_v2_ptds", use_d2d8},
        {"cuMemsetD2D16_v2", use_d2d16}, {"cuMemsetD2D16_v2_ptds", use_d2d16},
        {"cuMemsetD2D32_v2", use_d2d32}, {"cuMemsetD2D32_v2_ptds", use_d2d32},
        {"cuMemsetD2D8Async", use_d2d8_async}, {"cuMemsetD2D8Async_ptsz", use_d2d8_async},
        {"cuMemsetD2D16Async", use_d2d16_async}, {"cuMemsetD2D16Async_ptsz", use_d2d16_async},
        {"cuMemsetD2D32Async", use_d2d32_async}, {"cuMemsetD2D32Async_ptsz", use_d2d32_async},
        {"cuMemcpyPeer", use_cu_peer}, {"cuMemcpyPeer_ptds", use_cu_peer},
        {"cuMemcpyPeerAsync", use_cu_peer_async}, {"cuMemcpyPeerAsync_ptsz", use_cu_peer_async},
        {"cuMemcpy3DPeer", use_cu_peer_3d}, {"cuMemcpy3DPeer_ptds", use_cu_peer_3d},
        {"cuMemcpy3DPeerAsync", use_cu_peer_3d_async}, {"cuMemcpy3DPeerAsync_ptsz", use_cu_peer_3d_async},
        {"cuMemcpyBatchAsync", use_cu_batch}, {"cuMemcpyBatchAsync_ptsz", use_cu_batch},
        {"cuMemcpyBatchAsync_v2", use_cu_batch_v2}, {"cuMemcpyBatchAsync_v2_ptsz", use_cu_batch_v2},
        {"cuMemcpy3DBatchAsync", use_cu_batch_3d}, {"cuMemcpy3DBatchAsync_ptsz", use_cu_batch_3d},
        {"cuMemcpy3DBatchAsync_v2", use_cu_batch_3d_v2}, {"cuMemcpy3DBatchAsync_v2_ptsz", use_cu_batch_3d_v2},
        {"cuMemHostGetDevicePointer", use_host_get_device_pointer_v1},
    };
    ck_assert_int_eq(cudaStreamCreateWithFlags(&uses_stream, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(cuCtxGetCurrent(&uses_ctx), CUDA_SUCCESS);
    char missed[2048] = "";
    for (size_t k = 0; k < sizeof uses / sizeof *uses; k++) {
        if (!strncmp(uses[k].name, "cuda", 4) && !runtime_defines(uses[k].name))
            continue; /* the simulated libcudart.so.12 has only what it simulates */
        uint8_t *p = NULL;
        ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
        void *fn = dlsym(RTLD_DEFAULT, uses[k].name);
        ck_assert_msg(fn != NULL, "%s is not exported by anyone", uses[k].name);
        if (test_interposed(uses[k].name))
            uses[k].use(fn, p); /* not simulated: the simulator's answer does not matter here */
        if (uvmsim_host_flags(p) < 0)
            snprintf(missed + strlen(missed), sizeof missed - strlen(missed), " %s", uses[k].name);
        cudaStreamSynchronize(uses_stream);
        cudaGetLastError();
        ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
    }
    ck_assert_int_eq(cudaStreamDestroy(uses_stream), cudaSuccess);
    ck_assert_msg(!missed[0], "not pinned before the call:%s", missed);
}
END_TEST

int main(void)
{
    test_load_config();
    if (!test_require_preload("test_lazy",
                              (const char *[]){"cudaPointerGetAttributes", "cudaHostRegister", "cuMemcpy2D_v2", NULL}))
        return 1;
    if (test_cfg.pinned_threshold == 0 || test_cfg.pinned_threshold > ((size_t)4 << 20)) {
        fprintf(stderr, "test_lazy: run with pinned_threshold 1..4MiB\n");
        return 1;
    }
    TCase *tc = test_case("lazy", setup, teardown);
    tcase_add_test(tc, lazy_buffer_as_an_ordinary_staging_buffer);
    tcase_add_test(tc, small_copies_and_other_dimensions_pin_first);
    tcase_add_test(tc, copy_captured_on_another_threads_stream);
    tcase_add_test(tc, first_uses_racing_from_16_threads_pin_once);
    tcase_add_test(tc, failed_pinning_leaves_the_buffer_pageable);
    tcase_add_test(tc, registrations_are_lazy_too);
    tcase_add_test(tc, converted_buffer_freed_on_a_thread_without_context);
    tcase_add_test(tc, failed_unregister_keeps_the_buffer);
    tcase_add_test(tc, a_range_is_registered_once);
    tcase_add_test(tc, driver_use_on_a_thread_without_context_gets_the_real_answer);
    tcase_add_test(tc, pageable_buffer_freed_after_the_device_is_done_with_it);
    tcase_add_test(tc, async_copy_into_a_lazy_buffer_never_waits_for_its_stream);
    tcase_add_test(tc, checkpoint_copy_on_an_idle_stream_stays_lazy);
    tcase_add_test(tc, checkpoint_copy_behind_short_work_stays_lazy);
    tcase_add_test(tc, buffer_a_split_copy_wrote_is_pinned_at_its_next_other_use);
    tcase_add_test(tc, a_free_waiting_for_the_device_blocks_no_unrelated_pointer);
    tcase_add_test(tc, converted_default_requests_are_portable_and_mapped);
    tcase_add_test(tc, every_other_observed_use_pins_first);
    return test_run(tc, "lazy");
}
