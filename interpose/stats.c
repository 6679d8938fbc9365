/* stats.c: process-wide counters of intercepted and passed-through copies, and the summary line
 * printed at exit when stats = on. Relaxed atomics: the counters order nothing. */
#include <stdio.h>
#include <time.h>

#include "uvmc.h"

struct uvmc_stats uvmc_stats;

unsigned long long uvmc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

#define UVMC_LOAD(field) atomic_load_explicit(&uvmc_stats.field, memory_order_relaxed)

void uvmc_stats_print(void)
{
    /* A process that only looked the library up (a launcher probing for the driver) says nothing. */
    if (!UVMC_LOAD(split) && !UVMC_LOAD(passed_large) && !UVMC_LOAD(passed_small) && !UVMC_LOAD(substituted))
        return;
    /* Throughput only over the copies that returned after landing: an asynchronous copy into
     * pinned memory returns once queued, so its call time says nothing about bandwidth. */
    unsigned long long sbytes = UVMC_LOAD(sync_bytes);
    double secs = (double)UVMC_LOAD(sync_ns) / 1e9;
    char rate[64] = "no synchronous ones";
    if (sbytes && secs > 0)
        snprintf(rate, sizeof rate, "%.2f GB/s over %.3f s synchronous", (double)sbytes / secs / 1e9, secs);
    uvmc_log(UVMC_LOG_ERROR,
             "stats: split %llu copies (%llu bytes in %llu blocks, %llu on the host engine, %llu staged; %s); "
             "passed through %llu at or above threshold, %llu below; %llu failed hints; "
             "%llu pinned requests served lazily (%llu bytes, %llu pinned at their first use)",
             UVMC_LOAD(split), UVMC_LOAD(split_bytes), UVMC_LOAD(blocks), UVMC_LOAD(host_engine), UVMC_LOAD(staged), rate,
             UVMC_LOAD(passed_large), UVMC_LOAD(passed_small), UVMC_LOAD(hint_failures), UVMC_LOAD(substituted),
             UVMC_LOAD(substituted_bytes), UVMC_LOAD(converted));
}
