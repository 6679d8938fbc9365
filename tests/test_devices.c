/* test_devices.c: the library on two simulated devices (UVMSIM_DEVICES): a copy on another device's
 * stream than the thread's current one runs the library's own work in the stream's context and gives
 * the caller back its device, and freeing a lazily pinned buffer waits for every active device and
 * leaves another device's error to it. Each test failed before its fix (interpose/classify.c,
 * interpose/lazy.c). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <stdlib.h>

#include "test_check.h"
#include "uvmsim.h"

static size_t n; /* above the copy threshold and the pinned threshold */

static void setup(void)
{
    n = 4 * test_cfg.chunk_size > test_cfg.threshold ? 4 * test_cfg.chunk_size : test_cfg.threshold;
    if (n < 2 * test_cfg.pinned_threshold)
        n = 2 * test_cfg.pinned_threshold;
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    uvmsim_set_op_delay_us(0);
    cudaGetLastError();
    uvmsim_reset();
}

static void teardown(void)
{
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
}

START_TEST(copy_on_another_devices_stream_runs_there_and_restores_the_device)
{
    /* A rank's stream of device 1, used while the thread's current device is 0 (a helper thread
     * that never called cudaSetDevice): the split copy's events must be device 1's. */
    uint8_t *managed = NULL, *dst = malloc(n);
    ck_assert_ptr_nonnull(dst);
    cudaStream_t s1;
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    ck_assert_int_eq(cudaMallocManaged((void **)&managed, n, cudaMemAttachGlobal), cudaSuccess);
    for (size_t i = 0; i < n; i++)
        managed[i] = test_pattern(i);
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    CUcontext before = NULL, after = NULL;
    ck_assert_int_eq(cuCtxGetCurrent(&before), CUDA_SUCCESS);
    uvmsim_reset();
    ck_assert_int_eq(cudaMemcpyAsync(dst, managed, n, cudaMemcpyDeviceToHost, s1), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s1), cudaSuccess);
    for (size_t i = 0; i < n; i++)
        ck_assert_uint_eq(dst[i], test_pattern(i));
    /* every wait was on an event the library could record (a failed record falls back to a
     * stream synchronize, the library's own; the one above is the test's) */
    ck_assert_uint_gt(uvmsim_calls("cudaEventSynchronize") + uvmsim_calls("cuEventSynchronize"), 0);
    ck_assert_uint_eq(uvmsim_calls("cudaStreamSynchronize"), 1);
    int dev = -1;
    ck_assert_int_eq(cudaGetDevice(&dev), cudaSuccess);
    ck_assert_int_eq(dev, 0);
    ck_assert_int_eq(cuCtxGetCurrent(&after), CUDA_SUCCESS);
    ck_assert_ptr_eq(after, before);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(s1), cudaSuccess);
    ck_assert_int_eq(cudaFree(managed), cudaSuccess);
    free(dst);
}
END_TEST

START_TEST(lazy_free_waits_for_every_device)
{
    /* The buffer stayed pageable (a split copy's destination); a small device-to-host copy into it
     * is queued on device 1's stream; the free comes from device 0: it must wait for device 1. */
    uint8_t *managed = NULL, *p = NULL, *dev1 = NULL;
    ck_assert_int_eq(cudaMallocManaged((void **)&managed, n, cudaMemAttachGlobal), cudaSuccess);
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(p, managed, n, cudaMemcpyDeviceToHost), cudaSuccess); /* split: claims it */
    cudaStream_t s1;
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&dev1, 4096), cudaSuccess);
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    uvmsim_set_op_delay_us(100000);
    ck_assert_int_eq(cudaMemcpyAsync(p, dev1, 4096, cudaMemcpyDeviceToHost, s1), cudaSuccess);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess); /* must not unmap under device 1's copy */
    ck_assert_int_eq(cudaStreamQuery(s1), cudaSuccess);
    uvmsim_set_op_delay_us(0);
    int dev = -1;
    ck_assert_int_eq(cudaGetDevice(&dev), cudaSuccess);
    ck_assert_int_eq(dev, 0);
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    ck_assert_int_eq(cudaStreamDestroy(s1), cudaSuccess);
    ck_assert_int_eq(cudaFree(dev1), cudaSuccess);
    ck_assert_int_eq(cudaFree(managed), cudaSuccess);
}
END_TEST

START_TEST(lazy_free_leaves_another_devices_error_to_it)
{
    /* As above, the copy on device 1 done; device 1's synchronize fails (an injected fault: the
     * second cuCtxSynchronize, the first being the current device's): the free from device 0
     * still succeeds, and nothing of device 1's error reaches this caller. */
    uint8_t *managed = NULL, *p = NULL, *dev1 = NULL;
    ck_assert_int_eq(cudaMallocManaged((void **)&managed, n, cudaMemAttachGlobal), cudaSuccess);
    ck_assert_int_eq(cudaHostAlloc((void **)&p, n, cudaHostAllocDefault), cudaSuccess);
    ck_assert_int_eq(cudaMemcpy(p, managed, n, cudaMemcpyDeviceToHost), cudaSuccess);
    cudaStream_t s1;
    ck_assert_int_eq(cudaSetDevice(1), cudaSuccess);
    ck_assert_int_eq(cudaMalloc((void **)&dev1, 4096), cudaSuccess);
    ck_assert_int_eq(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking), cudaSuccess);
    ck_assert_int_eq(cudaMemcpyAsync(p, dev1, 4096, cudaMemcpyDeviceToHost, s1), cudaSuccess);
    ck_assert_int_eq(cudaStreamSynchronize(s1), cudaSuccess);
    ck_assert_int_eq(cudaSetDevice(0), cudaSuccess);
    unsigned long long syncs = uvmsim_calls("cuCtxSynchronize");
    uvmsim_fail_nth("cuCtxSynchronize", 2, CUDA_ERROR_LAUNCH_FAILED);
    ck_assert_int_eq(cudaFreeHost(p), cudaSuccess);
    ck_assert_uint_eq(uvmsim_calls("cuCtxSynchronize"), syncs + 2); /* device 0's, then device 1's */
    ck_assert_int_eq(cudaGetLastError(), cudaSuccess);
    int dev = -1;
    ck_assert_int_eq(cudaGetDevice(&dev), cudaSuccess);
    ck_assert_int_eq(dev, 0);
    ck_assert_int_eq(cudaStreamDestroy(s1), cudaSuccess);
    ck_assert_int_eq(cudaFree(dev1), cudaSuccess);
    ck_assert_int_eq(cudaFree(managed), cudaSuccess);
}
END_TEST

int main(void)
{
    test_load_config();
    if (!test_require_preload("test_devices", (const char *[]){"cudaMemcpyAsync", "cudaHostAlloc", NULL}))
        return 1;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 2) {
        fprintf(stderr, "test_devices: run with UVMSIM_DEVICES=2 or more\n");
        return 1;
    }
    TCase *tc = test_case("devices", setup, teardown);
    tcase_add_test(tc, copy_on_another_devices_stream_runs_there_and_restores_the_device);
    tcase_add_test(tc, lazy_free_waits_for_every_device);
    tcase_add_test(tc, lazy_free_leaves_another_devices_error_to_it);
    return test_run(tc, "devices");
}
