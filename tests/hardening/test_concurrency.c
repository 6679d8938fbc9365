/* test_concurrency.c: 32 threads x 4 streams (two non-blocking, one blocking, the per-thread
 * stream) x mixed sizes (below, at and above the threshold, partial last blocks, sync and async
 * entry points) for a bounded time; every destination checksummed; every copy split exactly when
 * it should be. HARDEN_SECONDS sets the time (default 3). */
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <string.h>
#include <time.h>

#include "harden.h"
#include "uvmsim.h"

extern __typeof__(cudaMemcpyAsync) cudaMemcpyAsync_ptsz;

#define THREADS 32
#define STREAMS 4

static uint8_t *managed;
static size_t managed_size, max_copy;
static double deadline;
static atomic_ullong expect_async, expect_ptsz, total_copies, total_bytes;
static pthread_barrier_t start;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t next_rand(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static size_t pick_size(uint64_t *rng)
{
    size_t t = test_cfg.threshold, c = test_cfg.chunk_size;
    size_t sizes[] = {4096 + 3, t - 1, t, t + 1, t + c / 2 + 7, 2 * t + 3 * c + 1, max_copy};
    return sizes[next_rand(rng) % (sizeof sizes / sizeof *sizes)];
}

static void *worker(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (id + 1);
    cudaStream_t st[STREAMS] = {0, 0, 0, cudaStreamPerThread};
    uint8_t *dst[STREAMS] = {0};
    bool ok = !cudaStreamCreateWithFlags(&st[0], cudaStreamNonBlocking) &&
              !cudaStreamCreateWithFlags(&st[1], cudaStreamNonBlocking) &&
              !cudaStreamCreateWithFlags(&st[2], cudaStreamDefault);
    for (int k = 0; k < STREAMS && ok; k++)
        ok = cudaMallocHost((void **)&dst[k], max_copy + 1) == cudaSuccess;
    CHECK(ok, "thread %u: setup failed", id);
    pthread_barrier_wait(&start);
    if (ok) do { /* at least one round each: a loaded machine may pass the deadline during set-up */
        size_t size[STREAMS], off[STREAMS];
        for (int k = 0; k < STREAMS; k++) {
            size[k] = pick_size(&rng);
            off[k] = next_rand(&rng) % (managed_size - size[k] + 1);
            memset(dst[k], 0xEE, size[k] + 1);
            bool split = size[k] >= test_cfg.threshold;
            /* asynchronous into pinned memory: queued in fewer, larger blocks */
            unsigned long long calls = split ? test_queued_blocks(size[k]) : 1;
            cudaError_t rc;
            unsigned how = (unsigned)(next_rand(&rng) % 8);
            if (how == 0) { /* synchronous entry point: legacy stream, blocks through cudaMemcpyAsync */
                rc = cudaMemcpy(dst[k], managed + off[k], size[k], cudaMemcpyDeviceToHost);
                if (split)
                    atomic_fetch_add(&expect_async, test_blocks(size[k]));
            } else if (how == 1 && k == 3) { /* per-thread default stream through stream 0 */
                rc = cudaMemcpyAsync_ptsz(dst[k], managed + off[k], size[k], cudaMemcpyDefault, 0);
                atomic_fetch_add(&expect_ptsz, calls);
            } else {
                rc = cudaMemcpyAsync(dst[k], managed + off[k], size[k], cudaMemcpyDeviceToHost, st[k]);
                atomic_fetch_add(&expect_async, calls);
            }
            CHECK(rc == cudaSuccess, "thread %u stream %d: copy of %zu returned %d", id, k, size[k], (int)rc);
        }
        for (int k = 0; k < STREAMS; k++) {
            CHECK(cudaStreamSynchronize(st[k]) == cudaSuccess, "thread %u: synchronize", id);
            uint64_t sum = 0, want = 0;
            for (size_t i = 0; i < size[k]; i++) {
                sum = sum * 31 + dst[k][i];
                want = want * 31 + test_pattern(off[k] + i);
            }
            CHECK(sum == want && dst[k][size[k]] == 0xEE, "thread %u stream %d: %zu bytes at %zu differ", id, k,
                  size[k], off[k]);
            atomic_fetch_add(&total_copies, 1);
            atomic_fetch_add(&total_bytes, size[k]);
        }
    } while (ok && now_s() < deadline);
    for (int k = 0; k < STREAMS; k++) {
        if (dst[k])
            cudaFreeHost(dst[k]);
        if (k < 3 && st[k])
            cudaStreamDestroy(st[k]);
    }
    return NULL;
}

int main(void)
{
    harden_require_preload("concurrency");
    const char *secs = getenv("HARDEN_SECONDS");
    double duration = secs ? atof(secs) : 3.0;
    max_copy = 2 * test_cfg.threshold + 5 * test_cfg.chunk_size + 13;
    managed_size = 2 * max_copy;
    if (cudaMallocManaged((void **)&managed, managed_size, cudaMemAttachGlobal)) {
        fprintf(stderr, "concurrency: setup failed\n");
        return 1;
    }
    for (size_t i = 0; i < managed_size; i++)
        managed[i] = test_pattern(i);
    uvmsim_reset();
    pthread_barrier_init(&start, NULL, THREADS + 1);
    pthread_t th[THREADS];
    for (unsigned t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, worker, (void *)(uintptr_t)t);
    deadline = now_s() + duration; /* written before the barrier: the workers read it after theirs */
    pthread_barrier_wait(&start);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    unsigned long long got_async = uvmsim_calls("cudaMemcpyAsync"), got_ptsz = uvmsim_calls("cudaMemcpyAsync_ptsz");
    CHECK(got_async == atomic_load(&expect_async), "%llu block copies through cudaMemcpyAsync, want %llu",
          got_async, (unsigned long long)atomic_load(&expect_async));
    CHECK(got_ptsz == atomic_load(&expect_ptsz), "%llu through cudaMemcpyAsync_ptsz, want %llu", got_ptsz,
          (unsigned long long)atomic_load(&expect_ptsz));
    CHECK(uvmsim_live_events() == 0, "%llu events left", uvmsim_live_events());
    CHECK(atomic_load(&total_copies) >= THREADS * STREAMS, "only %llu copies ran",
          (unsigned long long)atomic_load(&total_copies));
    printf("concurrency: %d threads x %d streams, %.1f s: %llu copies, %.1f MiB verified\n", THREADS, STREAMS,
           duration, (unsigned long long)atomic_load(&total_copies), (double)atomic_load(&total_bytes) / (1 << 20));
    cudaFree(managed);
    return harden_done("concurrency");
}
