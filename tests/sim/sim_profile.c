/* sim_profile.c: the simulator's behaviour switches (strict and lenient profiles, one environment
 * variable per behaviour), the fidelity counters, uvmsim_stat and the UVMSIM_REPORT line at exit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* Strict until loaded: the harshest documented reading (README.md, "Behaviour switches"). */
struct sim_switches sim_sw = {.managed_range = SIM_RANGE_REFUSE, .stream_capacity = 64, .cma = 1, .residency = 1, .pageable_d2h_async = 1,
                              .capture_queries = 1, .devices = 8};

unsigned long long sim_hostfns, sim_max_outstanding;
atomic_ullong sim_mig_to_host, sim_mig_to_device, sim_cma_violations;
atomic_int sim_sticky;

/* One switch: NAME=value picks among `words` (index = value), or a number when words is NULL. A bad
 * value keeps the profile's and says so once. */
static void load_one(const char *name, const char *const *words, int *out)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return;
    if (!words) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end == '\0' && n >= 0 && n <= 1 << 20) {
            *out = (int)n;
            return;
        }
    } else {
        for (int i = 0; words[i]; i++)
            if (!strcmp(v, words[i])) {
                *out = i;
                return;
            }
    }
    fprintf(stderr, "uvmsim: %s=%s is not understood; keeping %d\n", name, v, *out);
}

void sim_switches_load(void)
{
    static const char *const profiles[] = {"strict", "lenient", NULL};
    static const char *const ranges[] = {"none", "exact", "refuse", NULL}; /* SIM_RANGE_* */
    static const char *const hostfn[] = {"1", "per-stream", NULL};
    static const char *const onoff[] = {"0", "1", NULL};
    static const char *const d2h[] = {"sync", "async", NULL};
    static const char *const queries[] = {"allowed", "unsafe", NULL};
    int lenient = 0;
    load_one("UVMSIM_PROFILE", profiles, &lenient);
    /* lenient: the simulator as it was before the fidelity switches existed */
    int range = lenient ? SIM_RANGE_EXACT : SIM_RANGE_REFUSE, cap = lenient ? 0 : 64, per_stream = lenient, cma = 1, res = !lenient,
        async = !lenient, unsafe_queries = !lenient, report = 0;
    load_one("UVMSIM_MANAGED_RANGE", ranges, &range);
    load_one("UVMSIM_STREAM_CAPACITY", NULL, &cap);
    load_one("UVMSIM_HOSTFN_THREADS", hostfn, &per_stream);
    load_one("UVMSIM_CMA", onoff, &cma);
    load_one("UVMSIM_RESIDENCY", onoff, &res);
    load_one("UVMSIM_PAGEABLE_D2H", d2h, &async);
    load_one("UVMSIM_CAPTURE_QUERIES", queries, &unsafe_queries);
    load_one("UVMSIM_REPORT", onoff, &report);
    /* Eight devices by default, as on an HGX H100/H200 node: one per rank of an ordinary job. */
    int devices = 8;
    load_one("UVMSIM_DEVICES", NULL, &devices);
    if (devices < 1 || devices > SIM_MAX_DEVICES) {
        fprintf(stderr, "uvmsim: UVMSIM_DEVICES=%d is not understood; keeping 8\n", devices);
        devices = 8;
    }
    sim_kernels_load();
    sim_sw = (struct sim_switches){.managed_range = range, .stream_capacity = (unsigned)cap,
                                   .hostfn_per_stream = per_stream, .cma = cma, .residency = res,
                                   .pageable_d2h_async = async, .capture_queries = unsafe_queries,
                                   .report = report, .devices = devices};
}

unsigned long long uvmsim_stat(const char *key)
{
    if (!key)
        return 0;
    if (!strcmp(key, "migrations_to_host"))
        return atomic_load(&sim_mig_to_host);
    if (!strcmp(key, "migrations_to_device"))
        return atomic_load(&sim_mig_to_device);
    if (!strcmp(key, "cma_violations"))
        return atomic_load(&sim_cma_violations);
    if (!strcmp(key, "sticky_error"))
        return (unsigned long long)atomic_load(&sim_sticky);
    if (!strcmp(key, "kernels_skipped"))
        return sim_kernels_total(0);
    if (!strcmp(key, "kernels_refused"))
        return sim_kernels_total(1);
    unsigned long long v = 0;
    pthread_mutex_lock(&sim_mu);
    if (!strcmp(key, "host_functions"))
        v = sim_hostfns;
    else if (!strcmp(key, "max_outstanding"))
        v = sim_max_outstanding;
    else if (!strcmp(key, "pinned_peak_bytes"))
        v = sim_pinned_peak;
    else if (!strcmp(key, "bytes_copied"))
        v = sim_bytes;
    pthread_mutex_unlock(&sim_mu);
    return v;
}

/* The report: one line, so a shell test can grep a key. */
__attribute__((destructor)) static void sim_report(void)
{
    if (!sim_sw.report || sim_child_poisoned)
        return;
    fprintf(stderr,
            "uvmsim: host_functions=%llu max_outstanding=%llu migrations_to_host=%llu migrations_to_device=%llu "
            "cma_violations=%llu pinned_peak_bytes=%llu sticky_error=%llu kernels_skipped=%llu profile=%s\n",
            uvmsim_stat("host_functions"), uvmsim_stat("max_outstanding"), uvmsim_stat("migrations_to_host"),
            uvmsim_stat("migrations_to_device"), uvmsim_stat("cma_violations"), uvmsim_stat("pinned_peak_bytes"),
            uvmsim_stat("sticky_error"), uvmsim_stat("kernels_skipped"),
            sim_sw.managed_range == SIM_RANGE_EXACT && !sim_sw.stream_capacity && sim_sw.hostfn_per_stream && !sim_sw.residency &&
                    !sim_sw.pageable_d2h_async && !sim_sw.capture_queries
                ? "lenient"
                : "strict");
    sim_kernels_report();
}
