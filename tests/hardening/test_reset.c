/* test_reset.c: cudaDeviceReset releases every allocation of the context, the library's staging
 * ring and the registrations of its lazy buffers with it (the simulator unmaps them). Afterwards the
 * program's own pinned buffers may land where the ring was (here the first decoy does): the library
 * must not free the old ring at exit; a lazy buffer pinned before the reset frees cleanly after it. */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <string.h>
#include <unistd.h>

#include "harden.h"

#define NDECOY 8
static unsigned char *decoy[NDECOY];
static size_t decoy_size;

/* Destructors run after every atexit handler registered during main, the library's (registered at
 * its first staged copy) included: every decoy must still be the program's. */
__attribute__((destructor)) static void decoys_are_still_ours(void)
{
    int bad = 0;
    for (int i = 0; i < NDECOY; i++) {
        if (!decoy[i])
            continue;
        bad += decoy[i][0] != (unsigned char)(0xA0 + i) || decoy[i][decoy_size - 1] != (unsigned char)(0xA0 + i);
        bad += cudaFreeHost(decoy[i]) != cudaSuccess;
    }
    if (bad) {
        fprintf(stderr, "harden_reset: FAIL: %d decoy check(s) failed at exit (freed by someone else?)\n", bad);
        _exit(1);
    }
}

int main(void)
{
    harden_require_preload("harden_reset");
    size_t n = 8 * test_cfg.chunk_size, lazy_n = test_cfg.pinned_threshold;
    CHECK(lazy_n > 0 && lazy_n <= ((size_t)16 << 20), "run with pinned_threshold 1..16MiB");
    unsigned char *m, *h = malloc(n), *lazy = NULL;
    /* a lazy buffer, pinned by its first real use (a pointer query) */
    CHECK(cudaMallocHost((void **)&lazy, lazy_n) == cudaSuccess, "lazy alloc");
    struct cudaPointerAttributes a;
    CHECK(cudaPointerGetAttributes(&a, lazy) == cudaSuccess && a.type == cudaMemoryTypeHost, "lazy pinned");
    /* the staging ring: the last mapping made before the reset, so its hole is the one the next
     * mapping of its size takes */
    CHECK(cudaMallocManaged((void **)&m, n, cudaMemAttachGlobal) == cudaSuccess, "managed");
    memset(m, 0x11, n);
    CHECK(cudaMemcpy(h, m, n, cudaMemcpyDeviceToHost) == cudaSuccess && h[n - 1] == 0x11, "staged copy");

    CHECK(cudaDeviceReset() == cudaSuccess, "reset");
    /* pinned buffers of the ring's size: one of them may take the ring's old address */
    decoy_size = (size_t)test_cfg.depth * (test_cfg.chunk_size < ((size_t)16 << 20) ? test_cfg.chunk_size : (size_t)16 << 20);
    for (int i = 0; i < NDECOY; i++) {
        CHECK(cudaMallocHost((void **)&decoy[i], decoy_size) == cudaSuccess, "decoy %d", i);
        if (decoy[i])
            memset(decoy[i], 0xA0 + i, decoy_size);
    }
    /* the lazy buffer's registration went with the context: freeing it is no error, and it is gone */
    CHECK(cudaFreeHost(lazy) == cudaSuccess, "free of the lazy buffer after the reset");
    CHECK(cudaFreeHost(lazy) != cudaSuccess, "a second free");
    cudaGetLastError();
    /* no staged copy after the reset (test_fidelity covers the ring's renewal): the stale ring is
     * what the library holds at exit */
    for (int i = 0; i < NDECOY; i++)
        CHECK(decoy[i] && decoy[i][0] == (unsigned char)(0xA0 + i), "decoy %d", i);
    free(h);
    return harden_done("harden_reset");
}
