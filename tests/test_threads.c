/* test_threads.c: 32 threads make their first (large, split) copy at the same moment, each on its
 * own stream: init runs once, every destination is exact, every copy was split. */
#include <cuda_runtime_api.h>
#include <pthread.h>

#include "test_common.h"
#include "uvmsim.h"

#define THREADS 32

static uint8_t *managed;
static size_t per;
static pthread_barrier_t start;
static int failures;

static void *worker(void *arg)
{
    size_t t = (size_t)(uintptr_t)arg;
    cudaStream_t s;
    uint8_t *dst;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) || cudaMallocHost((void **)&dst, per)) {
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
        pthread_barrier_wait(&start);
        return NULL;
    }
    pthread_barrier_wait(&start);
    cudaError_t rc = cudaMemcpyAsync(dst, managed + t * per, per, cudaMemcpyDeviceToHost, s);
    if (rc == cudaSuccess)
        rc = cudaStreamSynchronize(s);
    size_t bad = 0;
    for (size_t i = 0; i < per; i++)
        bad += dst[i] != test_pattern(t * per + i);
    if (rc != cudaSuccess || bad) {
        fprintf(stderr, "thread %zu: rc %d, %zu bytes differ\n", t, (int)rc, bad);
        __atomic_add_fetch(&failures, 1, __ATOMIC_RELAXED);
    }
    cudaFreeHost(dst);
    cudaStreamDestroy(s);
    return NULL;
}

int main(void)
{
    test_load_config();
    if (!test_interposed("cudaMemcpyAsync")) {
        fprintf(stderr, "test_threads: libuvmchunk.so is not preloaded\n");
        return 1;
    }
    per = test_cfg.threshold + test_cfg.chunk_size / 2 + 3;
    if (cudaMallocManaged((void **)&managed, per * THREADS, cudaMemAttachGlobal) != cudaSuccess)
        return 1;
    for (size_t i = 0; i < per * THREADS; i++)
        managed[i] = test_pattern(i);
    uvmsim_reset();
    pthread_barrier_init(&start, NULL, THREADS);
    pthread_t th[THREADS];
    for (size_t t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    for (size_t t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    unsigned long long copies = uvmsim_calls("cudaMemcpyAsync");
    unsigned long long want = (unsigned long long)THREADS * test_blocks(per);
    printf("%d threads: %llu block copies (want %llu), %d failures\n", THREADS, copies, want, failures);
    cudaFree(managed);
    int ok = failures == 0 && copies == want;
    printf("%d passed, %d failed\n", ok, !ok);
    return ok ? 0 : 1;
}
