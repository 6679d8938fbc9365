/* stats.c: process-wide counters of intercepted and passed-through copies, and the summary line
 * printed at exit when stats = on. Relaxed atomics: the counters order nothing. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "uvmc.h"
#include "uvmc_units.h"

struct uvmc_stats uvmc_stats;

unsigned long long uvmc_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec;
}

#define UVMC_LOAD(field) atomic_load_explicit(&uvmc_stats.field, memory_order_relaxed)

/* Appends to a line being built; a part that does not fit is cut (the line stays one line). */
__attribute__((format(printf, 3, 4))) static void uvmc_add(char *line, size_t size, const char *fmt, ...)
{
    size_t used = strlen(line);
    if (used + 1 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + used, size - used, fmt, ap);
    va_end(ap);
}

/* ", rank 3" for torchrun's RANK / LOCAL_RANK (read here, at exit, never on a copy's path). */
static void uvmc_add_rank(char *line, size_t size, const char *label, const char *var)
{
    const char *v = getenv(var);
    if (v != NULL && *v != '\0' && strlen(v) <= 12 && strspn(v, "0123456789") == strlen(v))
        uvmc_add(line, size, ", %s %s", label, v);
}

/* What the uvmchunk Python package's zero-copy views moved in this process: it keeps
 * UVMC_VIEWS_ENV = "PID SAVED_TENSORS SAVED_BYTES LOADED_TENSORS LOADED_BYTES" up to date after each
 * checkpoint (python/uvmchunk/_report.py); read here, at exit, never on a copy's path. A value of
 * another pid was inherited from a parent (a process DCP's async executor started) and is not ours. */
#define UVMC_VIEWS_ENV "_UVMCHUNK_VIEW_TOTALS"

struct uvmc_views {
    unsigned long long saved, saved_bytes, loaded, loaded_bytes;
};

static struct uvmc_views uvmc_views_read(void)
{
    struct uvmc_views v = {0, 0, 0, 0};
    long pid = 0;
    const char *e = getenv(UVMC_VIEWS_ENV);
    if (e == NULL ||
        sscanf(e, "%ld %llu %llu %llu %llu", &pid, &v.saved, &v.saved_bytes, &v.loaded, &v.loaded_bytes) != 5 ||
        pid != (long)getpid())
        memset(&v, 0, sizeof v);
    return v;
}

void uvmc_stats_print(void)
{
    struct uvmc_views views = uvmc_views_read();
    /* A process that only looked the library up (a launcher probing for the driver) says nothing. */
    if (!UVMC_LOAD(split) && !UVMC_LOAD(passed_large) && !UVMC_LOAD(passed_small) && !UVMC_LOAD(substituted) &&
        !views.saved && !views.loaded)
        return;
    /* Whose line it is: under torchrun every rank prints one. */
    char line[480] = "";
    uvmc_add(line, sizeof line, "pid %d", (int)getpid());
    uvmc_add_rank(line, sizeof line, "rank", "RANK");
    uvmc_add_rank(line, sizeof line, "local rank", "LOCAL_RANK");

    unsigned long long split = UVMC_LOAD(split), blocks = UVMC_LOAD(blocks);
    uvmc_add(line, sizeof line, ": split %llu %s", split, uvmc_plural(split, "copy", "copies"));
    if (split) {
        uvmc_add(line, sizeof line, " (%s in %llu %s", uvmc_bytes_text(UVMC_LOAD(split_bytes)).s, blocks,
                 uvmc_plural(blocks, "block", "blocks"));
        if (UVMC_LOAD(host_engine))
            uvmc_add(line, sizeof line, ", %llu on the host engine", UVMC_LOAD(host_engine));
        if (UVMC_LOAD(staged))
            uvmc_add(line, sizeof line, ", %llu staged", UVMC_LOAD(staged));
        /* Throughput only over the calls that returned after their last byte landed (the host engine,
         * staged, or a synchronous call, whichever API it came through): a copy into pinned memory
         * that only queued its blocks returns at once, so its call time says nothing about bandwidth. */
        unsigned long long sbytes = UVMC_LOAD(sync_bytes);
        double secs = (double)UVMC_LOAD(sync_ns) / 1e9;
        if (sbytes && secs > 0)
            uvmc_add(line, sizeof line, "; %s over %.3f s in calls that returned complete)",
                     uvmc_rate_text((double)sbytes, secs).s, secs);
        else
            uvmc_add(line, sizeof line, "; every call returned once queued)");
    }
    uvmc_add(line, sizeof line, "; passed through %llu at or above threshold, %llu below", UVMC_LOAD(passed_large),
             UVMC_LOAD(passed_small));
    unsigned long long hints = UVMC_LOAD(hint_failures);
    if (hints) /* prefetch hints the driver refused: the copies went on without them */
        uvmc_add(line, sizeof line, "; %llu failed prefetch %s", hints, uvmc_plural(hints, "hint", "hints"));
    unsigned long long lazy = UVMC_LOAD(substituted);
    uvmc_add(line, sizeof line, "; %llu pinned %s served lazily", lazy, uvmc_plural(lazy, "request", "requests"));
    if (lazy)
        uvmc_add(line, sizeof line, " (%s, %llu pinned at first use)", uvmc_bytes_text(UVMC_LOAD(substituted_bytes)).s,
                 UVMC_LOAD(converted));
    /* Views: DCP wrote from (read into) managed pages, so none of those bytes was a copy above. */
    if (views.saved || views.loaded) {
        uvmc_add(line, sizeof line, "; zero-copy views: %llu %s saved (%s)", views.saved,
                 uvmc_plural(views.saved, "tensor", "tensors"), uvmc_bytes_text(views.saved_bytes).s);
        uvmc_add(line, sizeof line, ", %llu loaded (%s)", views.loaded, uvmc_bytes_text(views.loaded_bytes).s);
    }
    uvmc_log(UVMC_LOG_ERROR, "stats: %s", line);
}
