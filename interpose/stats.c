/* stats.c: process-wide counters of intercepted and passed-through copies, and the summary line
 * printed at exit when stats = on. Relaxed atomics: the counters order nothing. */
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
    unsigned long long bytes = UVMC_LOAD(split_bytes);
    double secs = (double)UVMC_LOAD(split_ns) / 1e9;
    uvmc_log(UVMC_LOG_ERROR,
             "stats: split %llu copies (%llu bytes in %llu blocks, %.3f s, %.2f GB/s; %llu on the host "
             "engine); passed through %llu at or above threshold, %llu below; %llu failed hints; "
             "%llu pinned requests served pageable (%llu bytes)",
             UVMC_LOAD(split), bytes, UVMC_LOAD(blocks), secs, secs > 0 ? (double)bytes / secs / 1e9 : 0.0,
             UVMC_LOAD(host_engine), UVMC_LOAD(passed_large), UVMC_LOAD(passed_small),
             UVMC_LOAD(hint_failures), UVMC_LOAD(substituted), UVMC_LOAD(substituted_bytes));
}
