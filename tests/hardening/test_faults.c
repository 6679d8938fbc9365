/* test_faults.c: a 16-block copy with an injected error at every block index, every wait and every
 * event operation, on each runtime entry point: the error comes back, nothing leaks, the next copy
 * succeeds; failed event creation falls back unsplit; a failed prefetch never fails the copy. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>

#include "harden.h"
#include "uvmsim.h"

extern __typeof__(cudaMemcpy) cudaMemcpy_ptds;
extern __typeof__(cudaMemcpyAsync) cudaMemcpyAsync_ptsz;

#define NBLOCKS 16

static uint8_t *managed, *pinned;
static size_t n; /* 16 blocks exactly */
static cudaStream_t user;

enum ep { EP_ASYNC_USER, EP_ASYNC_LEGACY, EP_SYNC, EP_ASYNC_PTSZ, EP_SYNC_PTDS, EP_COUNT };
static const char *const ep_name[] = {"cudaMemcpyAsync(user stream)", "cudaMemcpyAsync(stream 0)", "cudaMemcpy",
                                      "cudaMemcpyAsync_ptsz(stream 0)", "cudaMemcpy_ptds"};

/* The runtime function each block of a split copy goes through. */
static const char *block_fn(enum ep e)
{
    return e == EP_ASYNC_PTSZ || e == EP_SYNC_PTDS ? "cudaMemcpyAsync_ptsz" : "cudaMemcpyAsync";
}

static cudaError_t copy(enum ep e)
{
    switch (e) {
    case EP_ASYNC_USER:
        return cudaMemcpyAsync(pinned, managed, n, cudaMemcpyDeviceToHost, user);
    case EP_ASYNC_LEGACY:
        return cudaMemcpyAsync(pinned, managed, n, cudaMemcpyDeviceToHost, 0);
    case EP_SYNC:
        return cudaMemcpy(pinned, managed, n, cudaMemcpyDeviceToHost);
    case EP_ASYNC_PTSZ:
        return cudaMemcpyAsync_ptsz(pinned, managed, n, cudaMemcpyDeviceToHost, 0);
    default:
        return cudaMemcpy_ptds(pinned, managed, n, cudaMemcpyDeviceToHost);
    }
}

static bool bytes_exact(void)
{
    for (size_t i = 0; i < n; i++)
        if (pinned[i] != test_pattern(i))
            return false;
    return pinned[n] == 0xEE;
}

static void drain(void)
{
    cudaDeviceSynchronize();
    cudaStreamSynchronize(user);
}

/* After a failure: nothing outlives the call, and a clean copy works and is split. */
static void expect_recovery(enum ep e, const char *what, unsigned at, unsigned long long events0,
                            unsigned long long streams0)
{
    drain();
    CHECK(uvmsim_live_events() == events0, "%s, %s %u: %llu events leaked", ep_name[e], what, at,
          uvmsim_live_events() - events0);
    CHECK(uvmsim_live_streams() == streams0, "%s, %s %u: streams changed", ep_name[e], what, at);
    cudaGetLastError();
    memset(pinned, 0xEE, n + 1);
    unsigned long long b = uvmsim_calls(block_fn(e));
    cudaError_t rc = copy(e);
    drain();
    CHECK(rc == cudaSuccess, "%s, after %s %u: next copy returned %d", ep_name[e], what, at, (int)rc);
    CHECK(uvmsim_calls(block_fn(e)) - b == NBLOCKS, "%s, after %s %u: next copy made %llu blocks",
          ep_name[e], what, at, uvmsim_calls(block_fn(e)) - b);
    CHECK(bytes_exact(), "%s, after %s %u: bytes differ", ep_name[e], what, at);
    CHECK(cudaGetLastError() == cudaSuccess, "%s, after %s %u: last error left", ep_name[e], what, at);
}

static void every_block_fails(enum ep e)
{
    unsigned long long events0 = uvmsim_live_events(), streams0 = uvmsim_live_streams();
    for (unsigned at = 1; at <= NBLOCKS; at++) {
        uvmsim_fail_nth(block_fn(e), at, cudaErrorMemoryAllocation);
        unsigned long long b = uvmsim_calls(block_fn(e));
        cudaError_t rc = copy(e);
        unsigned long long issued = uvmsim_calls(block_fn(e)) - b;
        CHECK(rc == cudaErrorMemoryAllocation, "%s, block %u fails: returned %d", ep_name[e], at, (int)rc);
        CHECK(issued == at, "%s, block %u fails: %llu blocks attempted", ep_name[e], at, issued);
        CHECK(cudaGetLastError() == cudaErrorMemoryAllocation, "%s, block %u fails: last error", ep_name[e], at);
        expect_recovery(e, "block", at, events0, streams0);
    }
}

/* Whatever waits the engine makes (per-slot events, a final event, a stream synchronize), each
 * one failing in turn: its error is returned with the last error set, nothing leaks. */
static void every_wait_fails(enum ep e)
{
    static const char *const waits_fn[] = {"cudaEventSynchronize", "cudaStreamSynchronize"};
    unsigned long long events0 = uvmsim_live_events(), streams0 = uvmsim_live_streams();
    for (int f = 0; f < 2; f++) {
        unsigned long long w = uvmsim_calls(waits_fn[f]);
        cudaError_t rc0 = copy(e);
        unsigned long long waits = uvmsim_calls(waits_fn[f]) - w;
        drain();
        CHECK(rc0 == cudaSuccess, "%s: clean copy returned %d", ep_name[e], (int)rc0);
        for (unsigned at = 1; at <= waits; at++) {
            uvmsim_fail_nth(waits_fn[f], at, cudaErrorLaunchFailure);
            cudaError_t rc = copy(e);
            CHECK(rc == cudaErrorLaunchFailure, "%s, %s %u fails: returned %d", ep_name[e], waits_fn[f], at, (int)rc);
            CHECK(cudaGetLastError() == cudaErrorLaunchFailure, "%s, %s %u fails: last error", ep_name[e],
                  waits_fn[f], at);
            expect_recovery(e, waits_fn[f], at, events0, streams0);
        }
    }
}

/* cudaMemcpy returns after the last block landed: with slow stream ops, every byte is there
 * when it returns, before anything else synchronizes. */
static void sync_entry_waits(enum ep e)
{
    if (e != EP_SYNC && e != EP_SYNC_PTDS)
        return;
    uvmsim_set_op_delay_us(2000);
    memset(pinned, 0xEE, n + 1);
    cudaError_t rc = copy(e);
    CHECK(rc == cudaSuccess && bytes_exact(), "%s returned %d before every byte landed", ep_name[e], (int)rc);
    uvmsim_set_op_delay_us(0);
    drain();
}

/* A failed record only loosens the bound on blocks in flight: the copy still succeeds. */
static void every_record_fails(enum ep e)
{
    unsigned long long events0 = uvmsim_live_events(), streams0 = uvmsim_live_streams();
    for (unsigned at = 1; at <= NBLOCKS; at++) {
        uvmsim_fail_nth("cuEventRecord", at, CUDA_ERROR_LAUNCH_FAILED);
        memset(pinned, 0xEE, n + 1);
        cudaError_t rc = copy(e);
        if (e == EP_SYNC || e == EP_SYNC_PTDS)
            CHECK(bytes_exact(), "%s, record %u fails: returned before the bytes landed", ep_name[e], at);
        drain();
        uvmsim_reset(); /* a fault past the records this copy made must not hit a later check */
        CHECK(rc == cudaSuccess, "%s, record %u fails: returned %d", ep_name[e], at, (int)rc);
        CHECK(bytes_exact(), "%s, record %u fails: bytes differ", ep_name[e], at);
        CHECK(cudaGetLastError() == cudaSuccess, "%s, record %u fails: last error left", ep_name[e], at);
        expect_recovery(e, "record", at, events0, streams0);
    }
}

/* Failed event creation, at each event the engine creates: the copy still succeeds, exact,
 * either unsplit (fallback) or completely split, never partly; no last error, nothing leaked. */
static void every_event_create_fails(enum ep e)
{
    unsigned long long events0 = uvmsim_live_events(), streams0 = uvmsim_live_streams();
    unsigned long long c0 = uvmsim_calls("cuEventCreate");
    copy(e);
    drain();
    unsigned long long creates = uvmsim_calls("cuEventCreate") - c0;
    for (unsigned at = 1; at <= creates; at++) {
        uvmsim_fail_nth("cuEventCreate", at, CUDA_ERROR_OUT_OF_MEMORY);
        memset(pinned, 0xEE, n + 1);
        unsigned long long b = uvmsim_calls(block_fn(e)), s = uvmsim_calls("cudaMemcpy") +
                                                               uvmsim_calls("cudaMemcpy_ptds");
        cudaError_t rc = copy(e);
        if (e == EP_SYNC || e == EP_SYNC_PTDS)
            CHECK(bytes_exact(), "%s, event %u not created: returned before the bytes landed", ep_name[e], at);
        drain();
        unsigned long long calls = uvmsim_calls(block_fn(e)) - b +
                                   (uvmsim_calls("cudaMemcpy") + uvmsim_calls("cudaMemcpy_ptds") - s);
        CHECK(rc == cudaSuccess, "%s, event %u not created: returned %d", ep_name[e], at, (int)rc);
        CHECK(calls == 1 || calls == NBLOCKS, "%s, event %u not created: %llu copy calls, want 1 or %d", ep_name[e],
              at, calls, NBLOCKS);
        CHECK(bytes_exact(), "%s, event %u not created: bytes differ", ep_name[e], at);
        CHECK(cudaGetLastError() == cudaSuccess, "%s, event %u not created: last error left", ep_name[e], at);
        expect_recovery(e, "event create", at, events0, streams0);
    }
}

/* Every prefetch failing (one at a time, then all): the copy succeeds, bytes exact. */
static void every_prefetch_fails(enum ep e)
{
    unsigned long long events0 = uvmsim_live_events(), streams0 = uvmsim_live_streams();
    for (unsigned at = 1; at <= NBLOCKS + 1; at++) {
        if (at <= NBLOCKS)
            uvmsim_fail_nth("cuMemPrefetchAsync_v2", at, CUDA_ERROR_INVALID_VALUE);
        else
            for (unsigned k = 1; k <= NBLOCKS; k++)
                uvmsim_fail_nth("cuMemPrefetchAsync_v2", k, CUDA_ERROR_INVALID_VALUE);
        memset(pinned, 0xEE, n + 1);
        unsigned long long p = uvmsim_calls("cuMemPrefetchAsync_v2");
        cudaError_t rc = copy(e);
        drain();
        CHECK(uvmsim_calls("cuMemPrefetchAsync_v2") - p == NBLOCKS, "%s: %llu prefetches, want %d", ep_name[e],
              uvmsim_calls("cuMemPrefetchAsync_v2") - p, NBLOCKS);
        CHECK(rc == cudaSuccess, "%s, prefetch %u fails: returned %d", ep_name[e], at, (int)rc);
        CHECK(bytes_exact(), "%s, prefetch %u fails: bytes differ", ep_name[e], at);
        CHECK(cudaGetLastError() == cudaSuccess, "%s, prefetch %u fails: last error left", ep_name[e], at);
        uvmsim_reset(); /* drops faults left pending when fewer prefetches ran */
        expect_recovery(e, "prefetch", at, events0, streams0);
    }
}

int main(int argc, char **argv)
{
    harden_require_preload("faults");
    const char *mode = argc > 1 ? argv[1] : "core";
    n = NBLOCKS * test_cfg.chunk_size;
    if (n < test_cfg.threshold) {
        fprintf(stderr, "faults: 16 blocks of chunk_size must reach the threshold\n");
        return 1;
    }
    if (cudaMallocManaged((void **)&managed, n, cudaMemAttachGlobal) || cudaMallocHost((void **)&pinned, n + 1) ||
        cudaStreamCreateWithFlags(&user, cudaStreamNonBlocking)) {
        fprintf(stderr, "faults: setup failed\n");
        return 1;
    }
    for (size_t i = 0; i < n; i++)
        managed[i] = test_pattern(i);
    memset(pinned, 0xEE, n + 1);
    uvmsim_reset();
    for (enum ep e = 0; e < EP_COUNT; e++) {
        if (!strcmp(mode, "prefetch")) {
            if (test_cfg.prefetch == UVMC_PREFETCH_NONE) {
                fprintf(stderr, "faults prefetch: run with UVMCHUNK_PREFETCH=host or device\n");
                return 1;
            }
            every_prefetch_fails(e);
            continue;
        }
        every_block_fails(e);
        sync_entry_waits(e);
        every_wait_fails(e);
        every_record_fails(e);
        every_event_create_fails(e);
    }
    cudaStreamDestroy(user);
    cudaFreeHost(pinned);
    cudaFree(managed);
    return harden_done(!strcmp(mode, "prefetch") ? "faults prefetch" : "faults");
}
