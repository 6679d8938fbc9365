/* runtime.c: the exported CUDA runtime entry points. Each checks the size first (one comparison,
 * no CUDA call below the threshold), then hands a large copy to classify → engine → real call. */
#include <stdint.h>

#include "uvmc.h"


static cudaError_t uvmc_large_copy(struct uvmc_copy *c)
{
    cudaError_t rc;
    uvmc_tls_busy++;
    if (!uvmc_classify(c)) {
        atomic_fetch_add_explicit(&uvmc_stats.passed_large, 1, memory_order_relaxed);
        rc = uvmc_passthrough(c);
    } else {
        rc = uvmc_engine_copy(c);
    }
    uvmc_tls_busy--;
    return rc;
}

/* Shared shape of the four copy wrappers: init, resolve, size test, then the large-copy path.
 * A below-threshold call is counted only when stats are on (one predictable branch otherwise). */
#define UVMC_COPY_BODY(name, entry_, stream_, ...)                                                 \
    UVMC_REAL_OR_RETURN(name, cudaErrorSharedObjectSymbolNotFound);                                \
    if (UVMC_LIKELY(count < uvmc_hot_threshold) || uvmc_tls_busy) {                                \
        if (UVMC_UNLIKELY(uvmc_cfg.stats))                                                         \
            atomic_fetch_add_explicit(&uvmc_stats.passed_small, 1, memory_order_relaxed);          \
        return uvmc_real.name(__VA_ARGS__);                                                        \
    }                                                                                              \
    struct uvmc_copy c = {.dst = dst, .src = src, .count = count, .kind = kind, .stream = stream_, \
                          .entry = entry_};                                                        \
    return uvmc_large_copy(&c);

cudaError_t cudaMemcpy(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    UVMC_COPY_BODY(cudaMemcpy, UVMC_EP_SYNC, 0, dst, src, count, kind)
}

cudaError_t cudaMemcpy_ptds(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind)
{
    UVMC_COPY_BODY(cudaMemcpy_ptds, UVMC_EP_SYNC_PTDS, 0, dst, src, count, kind)
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                            cudaStream_t stream)
{
    UVMC_COPY_BODY(cudaMemcpyAsync, UVMC_EP_ASYNC, stream, dst, src, count, kind, stream)
}

cudaError_t cudaMemcpyAsync_ptsz(void *dst, const void *src, size_t count, enum cudaMemcpyKind kind,
                                 cudaStream_t stream)
{
    UVMC_COPY_BODY(cudaMemcpyAsync_ptsz, UVMC_EP_ASYNC_PTSZ, stream, dst, src, count, kind, stream)
}
