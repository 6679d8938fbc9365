/* test_driver.c: the driver path of libuvmchunk, preloaded, on the simulated libcuda: each copy
 * entry point (bytes, blocks), entry-point queries (versions, per-thread flag, both query ABIs,
 * the runtime's), an untouched unrelated symbol, a thread without a context. */
#define __CUDA_API_VERSION_INTERNAL 1 /* every driver name under its own spelling */
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "test_check.h"
#include "uvmsim.h"

#define SIZE ((size_t)16 << 20)
#define P(x) ((CUdeviceptr)(uintptr_t)(x))

static uint8_t *managed, *pinned, *pageable;
static size_t big;

static void setup(void)
{
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess); /* makes the primary context current */
    ck_assert_int_eq(cuMemAllocManaged((CUdeviceptr *)&managed, SIZE, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS);
    ck_assert_int_eq(cuMemHostAlloc((void **)&pinned, SIZE + 64, 0), CUDA_SUCCESS);
    pageable = malloc(SIZE + 64);
    for (size_t i = 0; i < SIZE; i++)
        managed[i] = test_pattern(i);
    memset(pinned, 0xEE, SIZE + 64);
    memset(pageable, 0xEE, SIZE + 64);
    big = test_cfg.threshold + 2 * test_cfg.chunk_size + 12345;
    ck_assert_uint_le(big + 64, SIZE);
    uvmsim_reset();
}

static void teardown(void)
{
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    cuMemFree_v2(P(managed));
    cuMemFreeHost(pinned);
    free(pageable);
}

static void expect_bytes(const uint8_t *dst, size_t off, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (dst[i] != test_pattern(off + i))
            ck_abort_msg("byte %zu of %zu differs", i, n);
    ck_assert_msg(dst[n] == 0xEE, "byte after the copy was written");
}

/* Copy calls that move one block on the copy engine (the host engine makes none). */
static unsigned long long blocks_now(void)
{
    return uvmsim_calls("cuMemcpyDtoHAsync_v2") + uvmsim_calls("cuMemcpyDtoHAsync_v2_ptsz") +
           uvmsim_calls("cuMemcpyAsync") + uvmsim_calls("cuMemcpyAsync_ptsz");
}

/* What one split copy of n bytes costs in copy calls on an idle user stream: none on the host engine
 * (engine = host; the source carries no advice, so auto never picks it); one per chunk on the copy
 * engine, fewer and larger when queued asynchronously into pinned memory. */
static size_t expected_blocks(size_t n, bool sync, bool dst_pinned)
{
    if (test_cfg.engine == UVMC_ENGINE_HOST)
        return 0;
    return !sync && dst_pinned ? test_queued_blocks(n) : test_blocks(n);
}

typedef CUresult (*copy_fn)(uint8_t *dst, const uint8_t *src, size_t n, CUstream s);
static CUresult e_dtoh(uint8_t *d, const uint8_t *s, size_t n, CUstream st) { (void)st; return cuMemcpyDtoH_v2(d, P(s), n); }
static CUresult e_dtoh_ptds(uint8_t *d, const uint8_t *s, size_t n, CUstream st) { (void)st; return cuMemcpyDtoH_v2_ptds(d, P(s), n); }
static CUresult e_dtoh_async(uint8_t *d, const uint8_t *s, size_t n, CUstream st) { return cuMemcpyDtoHAsync_v2(d, P(s), n, st); }
static CUresult e_dtoh_async_ptsz(uint8_t *d, const uint8_t *s, size_t n, CUstream st) { return cuMemcpyDtoHAsync_v2_ptsz(d, P(s), n, st); }
static CUresult e_memcpy(uint8_t *d, const uint8_t *s, size_t n, CUstream st) { (void)st; return cuMemcpy(P(d), P(s), n); }
static CUresult e_memcpy_ptds(uint8_t *d, const uint8_t *s, size_t n, CUstream st) { (void)st; return cuMemcpy_ptds(P(d), P(s), n); }
static CUresult e_memcpy_async(uint8_t *d, const uint8_t *s, size_t n, CUstream st) { return cuMemcpyAsync(P(d), P(s), n, st); }
static CUresult e_memcpy_async_ptsz(uint8_t *d, const uint8_t *s, size_t n, CUstream st) { return cuMemcpyAsync_ptsz(P(d), P(s), n, st); }

static const struct {
    const char *name;
    copy_fn fn;
    bool sync;
} entries[] = {
    {"cuMemcpyDtoH_v2", e_dtoh, true},           {"cuMemcpyDtoH_v2_ptds", e_dtoh_ptds, true},
    {"cuMemcpyDtoHAsync_v2", e_dtoh_async, false}, {"cuMemcpyDtoHAsync_v2_ptsz", e_dtoh_async_ptsz, false},
    {"cuMemcpy", e_memcpy, true},                 {"cuMemcpy_ptds", e_memcpy_ptds, true},
    {"cuMemcpyAsync", e_memcpy_async, false},     {"cuMemcpyAsync_ptsz", e_memcpy_async_ptsz, false},
};
#define NENTRIES (sizeof entries / sizeof *entries)

START_TEST(each_entry_point_splits_exactly)
{
    CUstream s;
    ck_assert_int_eq(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), CUDA_SUCCESS);
    uint8_t *dsts[] = {pinned, pageable};
    for (size_t d = 0; d < 2; d++) {
        uint8_t *dst = dsts[d] + 3;
        memset(dsts[d], 0xEE, SIZE + 64);
        uvmsim_set_op_delay_us(entries[_i].sync ? 200 : 0);
        unsigned long long b = blocks_now();
        CUresult r = entries[_i].fn(dst, managed + 7, big, s);
        ck_assert_msg(r == CUDA_SUCCESS, "%s returned %d", entries[_i].name, (int)r);
        if (entries[_i].sync)
            expect_bytes(dst, 7, big); /* landed before the call returned */
        ck_assert_int_eq(cuStreamSynchronize(s), CUDA_SUCCESS);
        ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
        uvmsim_set_op_delay_us(0);
        expect_bytes(dst, 7, big);
        size_t want = expected_blocks(big, entries[_i].sync, d == 0);
        ck_assert_msg(blocks_now() - b == want, "%s: %llu block calls, want %zu", entries[_i].name,
                      blocks_now() - b, want);
        ck_assert_uint_eq(uvmsim_stat("host_functions"), 0);
    }
    ck_assert_int_eq(cuStreamDestroy_v2(s), CUDA_SUCCESS);
}
END_TEST

START_TEST(below_threshold_and_non_managed_pass_through)
{
    unsigned long long b = blocks_now(), q = uvmsim_calls("cuPointerGetAttributes");
    ck_assert_int_eq(cuMemcpyDtoHAsync_v2(pinned, P(managed), test_cfg.threshold - 1, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuStreamSynchronize(0), CUDA_SUCCESS);
    ck_assert_uint_eq(blocks_now() - b, 1);
    ck_assert_uint_eq(uvmsim_calls("cuPointerGetAttributes") - q, 0);
    b = blocks_now();
    ck_assert_int_eq(cuMemcpyAsync(P(pageable), P(pinned), big, 0), CUDA_SUCCESS); /* host to host */
    ck_assert_int_eq(cuStreamSynchronize(0), CUDA_SUCCESS);
    ck_assert_uint_eq(blocks_now() - b, 1);
}
END_TEST

START_TEST(failing_block_returns_its_cuerror)
{
    /* On the legacy stream an asynchronous copy into pinned memory is queued on the copy engine
     * whatever the engine setting (nothing may wait for that stream). */
    uvmsim_fail_nth("cuMemcpyDtoHAsync_v2", 2, CUDA_ERROR_ILLEGAL_ADDRESS);
    unsigned long long b = blocks_now();
    ck_assert_int_eq(cuMemcpyDtoHAsync_v2(pinned, P(managed), big, 0), CUDA_ERROR_ILLEGAL_ADDRESS);
    ck_assert_uint_eq(blocks_now() - b, 2);
    ck_assert_int_eq(cuCtxSynchronize(), CUDA_SUCCESS);
    ck_assert_int_eq(cudaPeekAtLastError(), cudaSuccess); /* driver errors never touch the runtime's */
    ck_assert_int_eq(cuMemcpyDtoH_v2(pinned, P(managed), big), CUDA_SUCCESS);
    expect_bytes(pinned, 0, big);
}
END_TEST

static void *no_context_thread(void *arg)
{
    CUresult *r = arg;
    CUcontext ctx = (CUcontext)1;
    cuCtxGetCurrent(&ctx);
    r[0] = ctx ? CUDA_ERROR_UNKNOWN : CUDA_SUCCESS; /* the thread starts without a context */
    r[1] = cuMemcpyDtoH_v2(pinned, P(managed), big);
    return NULL;
}

START_TEST(thread_without_context_gets_the_real_answer)
{
    CUresult r[2];
    pthread_t th;
    unsigned long long real0 = uvmsim_calls("cuMemcpyDtoH_v2"), b = blocks_now();
    pthread_create(&th, NULL, no_context_thread, r);
    pthread_join(th, NULL);
    ck_assert_int_eq(r[0], CUDA_SUCCESS);
    ck_assert_int_eq(r[1], CUDA_ERROR_INVALID_CONTEXT);
    ck_assert_uint_eq(uvmsim_calls("cuMemcpyDtoH_v2") - real0, 1); /* the real call, unsplit */
    ck_assert_uint_eq(blocks_now() - b, 0);
}
END_TEST

/* ---- entry-point queries ---- */

static void *ours(const char *name)
{
    ck_assert(test_interposed(name));
    return dlsym(RTLD_DEFAULT, name);
}

/* The real driver's answer, asked on libcuda's own handle (never interposed). */
static CUresult real_query(const char *sym, void **fn, int ver, cuuint64_t flags, CUdriverProcAddressQueryResult *st)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    ck_assert_ptr_nonnull(h);
    PFN_cuGetProcAddress_v12000 gpa = (PFN_cuGetProcAddress_v12000)dlsym(h, "cuGetProcAddress_v2");
    CUresult r = gpa(sym, fn, ver, flags, st);
    dlclose(h);
    return r;
}

START_TEST(queries_return_the_wrapper_of_the_same_abi)
{
    const cuuint64_t D = CU_GET_PROC_ADDRESS_DEFAULT, T = CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM;
    struct {
        const char *sym;
        int ver;
        cuuint64_t flags;
        const char *want;
    } q[] = {
        {"cuMemcpyDtoH", 3020, D, "cuMemcpyDtoH_v2"},        {"cuMemcpyDtoH", 2000, D, "cuMemcpyDtoH"},
        {"cuMemcpyDtoH", 7000, T, "cuMemcpyDtoH_v2_ptds"},   {"cuMemcpyDtoHAsync", 3020, D, "cuMemcpyDtoHAsync_v2"},
        {"cuMemcpyDtoHAsync", 2000, D, "cuMemcpyDtoHAsync"}, {"cuMemcpyDtoHAsync", 7000, T, "cuMemcpyDtoHAsync_v2_ptsz"},
        {"cuMemcpy", 4000, D, "cuMemcpy"},                   {"cuMemcpy", 7000, T, "cuMemcpy_ptds"},
        {"cuMemcpyAsync", 4000, D, "cuMemcpyAsync"},         {"cuMemcpyAsync", 7000, T, "cuMemcpyAsync_ptsz"},
        {"cuGetProcAddress", 12000, D, "cuGetProcAddress_v2"}, {"cuGetProcAddress", 11030, D, "cuGetProcAddress"},
        {"cuMemHostAlloc", 2020, D, "cuMemHostAlloc"},
    };
    for (size_t k = 0; k < sizeof q / sizeof *q; k++) {
        void *fn = NULL, *legacy = NULL;
        CUdriverProcAddressQueryResult st = -1;
        ck_assert_int_eq(cuGetProcAddress_v2(q[k].sym, &fn, q[k].ver, q[k].flags, &st), CUDA_SUCCESS);
        ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_SUCCESS);
        ck_assert_msg(fn == ours(q[k].want), "%s@%d flags %llu: not our %s", q[k].sym, q[k].ver,
                      (unsigned long long)q[k].flags, q[k].want);
        ck_assert_int_eq(cuGetProcAddress_v2(q[k].sym, &fn, q[k].ver, q[k].flags, NULL), CUDA_SUCCESS);
        ck_assert_ptr_eq(fn, ours(q[k].want));
        ck_assert_int_eq(cuGetProcAddress(q[k].sym, &legacy, q[k].ver, q[k].flags), CUDA_SUCCESS);
        ck_assert_ptr_eq(legacy, ours(q[k].want));
    }
}
END_TEST

START_TEST(unrelated_and_failed_queries_are_untouched)
{
    const char *syms[] = {"cuMemAlloc", "cuStreamSynchronize", "cuNoSuchFunction", "cuMemPrefetchAsync"};
    int vers[] = {3020, 7000, 12000, 8000};
    for (size_t k = 0; k < 4; k++) {
        void *mine = (void *)1, *theirs = (void *)2;
        CUdriverProcAddressQueryResult st1 = -1, st2 = -2;
        CUresult r1 = cuGetProcAddress_v2(syms[k], &mine, vers[k], 0, &st1);
        CUresult r2 = real_query(syms[k], &theirs, vers[k], 0, &st2);
        ck_assert_int_eq(r1, r2);
        ck_assert_int_eq(st1, st2);
        ck_assert_ptr_eq(mine, theirs);
    }
    /* too low a version: the status says so, exactly as the real query */
    void *fn = (void *)1;
    CUdriverProcAddressQueryResult st = -1;
    ck_assert_int_ne(cuGetProcAddress_v2("cuMemPrefetchAsync", &fn, 7000, 0, &st), CUDA_SUCCESS);
    ck_assert_int_eq(st, CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT);
}
END_TEST

START_TEST(runtime_queries_return_wrappers_too)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult st;
    ck_assert_int_eq(cudaGetDriverEntryPointByVersion("cuMemcpyDtoHAsync", &fn, 12000, cudaEnableDefault, &st), cudaSuccess);
    ck_assert_ptr_eq(fn, ours("cuMemcpyDtoHAsync_v2"));
    ck_assert_int_eq(cudaGetDriverEntryPointByVersion("cuMemcpyDtoHAsync", &fn, 12000, cudaEnablePerThreadDefaultStream, &st),
                     cudaSuccess);
    ck_assert_ptr_eq(fn, ours("cuMemcpyDtoHAsync_v2_ptsz"));
    ck_assert_int_eq(cudaGetDriverEntryPoint("cuMemcpy", &fn, cudaEnableDefault, &st), cudaSuccess);
    ck_assert_ptr_eq(fn, ours("cuMemcpy"));
    /* and the pointer handed back splits */
    PFN_cuMemcpyDtoHAsync_v3020 copy;
    ck_assert_int_eq(cudaGetDriverEntryPointByVersion("cuMemcpyDtoHAsync", (void **)&copy, 12000, cudaEnableDefault, &st),
                     cudaSuccess);
    unsigned long long b = blocks_now();
    ck_assert_int_eq(copy(pinned, P(managed), big, 0), CUDA_SUCCESS);
    ck_assert_int_eq(cuStreamSynchronize(0), CUDA_SUCCESS);
    ck_assert_uint_eq(blocks_now() - b, test_queued_blocks(big));
    expect_bytes(pinned, 0, big);
}
END_TEST

START_TEST(runtime_copy_is_split_once)
{
    /* The runtime path splits; nothing beneath it reaches the driver wrappers again. */
    unsigned long long a = uvmsim_calls("cudaMemcpyAsync"), d = blocks_now();
    ck_assert_int_eq(cudaMemcpyAsync(pinned, managed, big, cudaMemcpyDeviceToHost, 0), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(0), cudaSuccess);
    ck_assert_uint_eq(uvmsim_calls("cudaMemcpyAsync") - a, test_queued_blocks(big));
    ck_assert_uint_eq(blocks_now() - d, 0);
    expect_bytes(pinned, 0, big);
}
END_TEST

int main(void)
{
    test_load_config();
    if (!test_require_preload("test_driver", (const char *[]){"cuMemcpyDtoHAsync_v2", "cuGetProcAddress_v2", NULL}))
        return 1;
    TCase *tc = test_case("driver", setup, teardown);
    tcase_add_loop_test(tc, each_entry_point_splits_exactly, 0, NENTRIES);
    tcase_add_test(tc, below_threshold_and_non_managed_pass_through);
    tcase_add_test(tc, failing_block_returns_its_cuerror);
    tcase_add_test(tc, thread_without_context_gets_the_real_answer);
    tcase_add_test(tc, queries_return_the_wrapper_of_the_same_abi);
    tcase_add_test(tc, unrelated_and_failed_queries_are_untouched);
    tcase_add_test(tc, runtime_queries_return_wrappers_too);
    tcase_add_test(tc, runtime_copy_is_split_once);
    return test_run(tc, "driver");
}
