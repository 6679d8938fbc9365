/* memory.c: `uvmchunk-bench memory` and `uvmchunk-bench throughput`, the figures of the pinned
 * substitution and the host engine: the checkpoint call sequence replayed in child processes with
 * and without libuvmchunk.so preloaded, one table per mode. Figures only; nothing is asserted. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "bench.h"
#include "procfs.h"
#include "uvmc_units.h"

#define MIB ((size_t)1 << 20)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static size_t next_pow2(size_t n)
{
    size_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}


/* Resets VmHWM to the current RSS (Linux: "5" to clear_refs), so each step has its own peak. */
static int reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

#define CHECK(call)                                                                      \
    do {                                                                                 \
        cudaError_t e_ = (call);                                                         \
        if (e_ != cudaSuccess) {                                                         \
            fprintf(stderr, "uvmchunk-bench: %s failed: %d\n", #call, (int)e_);                \
            exit(1);                                                                     \
        }                                                                                \
    } while (0)

void uvmc_bench_fbgemm_advice(void *p, size_t n)
{
    CUmemLocation cpu = {.type = CU_MEM_LOCATION_TYPE_HOST, .id = 0};
    CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    cuMemAdvise_v2((CUdeviceptr)(uintptr_t)p, n, CU_MEM_ADVISE_SET_PREFERRED_LOCATION, cpu);
    cuMemAdvise_v2((CUdeviceptr)(uintptr_t)p, n, CU_MEM_ADVISE_SET_ACCESSED_BY, gpu);
}

/* A managed table of `table` bytes, resident in host RAM with FBGEMM's advice (torchrec#3399). */
static uint8_t *make_table(size_t table)
{
    uint8_t *t;
    CHECK(cudaMallocManaged((void **)&t, table, cudaMemAttachGlobal));
    uvmc_bench_fbgemm_advice(t, table);
    for (size_t i = 0; i < table; i += 4096)
        t[i] = (uint8_t)(i >> 12);
    return t;
}

/* Child, memory mode: ten checkpoint copies with sizes in ratio 1 : 7 : 33 of `table`, each
 * into a fresh pinned destination of the power-of-two size, as PyTorch allocates it. Prints one
 * line per step: size, peak extra KiB, extra KiB after the free. */
int uvmc_bench_child_memory(size_t table)
{
    uint8_t *t = make_table(table);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    long base = uvmc_proc_kib("/proc/self/status", "VmRSS");
    static const unsigned ratio[] = {1, 7, 33, 1, 7, 33, 1, 7, 33, 33};
    for (int k = 0; k < 10; k++) {
        size_t n = table / 33 * ratio[k];
        if (ratio[k] == 33)
            n = table;
        if (reset_peak() != 0) {
            fprintf(stderr, "uvmchunk-bench: cannot reset the peak RSS (/proc/self/clear_refs)\n");
            return 1;
        }
        void *dst;
        CHECK(cudaHostAlloc(&dst, next_pow2(n), cudaHostAllocDefault));
        CHECK(cudaMemcpyAsync(dst, t, n, cudaMemcpyDeviceToHost, s));
        CHECK(cudaStreamSynchronize(s));
        long peak = uvmc_proc_kib("/proc/self/status", "VmHWM") - base;
        CHECK(cudaFreeHost(dst));
        long after = uvmc_proc_kib("/proc/self/status", "VmRSS") - base;
        printf("step %d %zu %ld %ld\n", k, n, peak, after);
    }
    return 0;
}

/* Child, throughput mode: one copy of n bytes from the table into a pageable destination already
 * faulted in; prints seconds. */
int uvmc_bench_child_throughput(size_t n)
{
    uint8_t *t = make_table(n);
    uint8_t *dst = malloc(n);
    if (!dst)
        return 1;
    memset(dst, 0, n);
    cudaStream_t s;
    CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    double t0 = now_s();
    CHECK(cudaMemcpyAsync(dst, t, n, cudaMemcpyDeviceToHost, s));
    CHECK(cudaStreamSynchronize(s));
    double secs = now_s() - t0;
    int bad = memcmp(dst, t, n) != 0;
    printf("seconds %.6f %s\n", secs, bad ? "MISMATCH" : "ok");
    return bad;
}

/* Runs this program's `--child MODE SIZE` with or without the library and the given config
 * overrides; returns its stdout (caller frees) or NULL when it failed. */
static char *run_child(const char *lib, const char *mode, size_t size, char *const *env)
{
    char arg[32];
    snprintf(arg, sizeof arg, "%zu", size);
    char *argv[] = {(char *)uvmc_bench_self, "--child", (char *)mode, arg, NULL};
    size_t cap = 1 << 16;
    char *out = malloc(cap);
    if (out && uvmc_bench_run_child(argv, lib, env, out, cap) == 0)
        return out;
    fprintf(stderr, "uvmchunk-bench: child %s %s failed\n", mode, lib ? "with the library" : "without it");
    free(out);
    return NULL;
}

/* KiB as read from /proc, as a person reads it; a negative difference (memory returned) as 0. */
static struct uvmc_text kib_text(long kib)
{
    return uvmc_bytes_text(kib > 0 ? (unsigned long long)kib * 1024 : 0);
}

static int parse_steps(const char *out, size_t n[10], long peak[10], long after[10])
{
    int k, got = 0;
    for (const char *p = out; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
        size_t sz;
        long pk, af;
        if (sscanf(p, "step %d %zu %ld %ld", &k, &sz, &pk, &af) == 4 && k >= 0 && k < 10) {
            n[k] = sz;
            peak[k] = pk;
            after[k] = af;
            got++;
        }
    }
    return got;
}

int uvmc_bench_memory(const char *lib, size_t table)
{
    char *without = run_child(NULL, "memory", table, NULL), *with = run_child(lib, "memory", table, NULL);
    size_t n[10];
    long pk0[10], af0[10], pk1[10], af1[10];
    if (!without || !with || parse_steps(without, n, pk0, af0) != 10 || parse_steps(with, n, pk1, af1) != 10)
        return 1;
    size_t bound_extra = 4 * 64 * MIB + 16 * MIB; /* depth x chunk_size + 16 MiB at the defaults */
    printf("memory: managed table %s (simulated runtime; pinned allocations commit every page)\n",
           uvmc_bytes_text(table).s);
    printf("%-4s %12s %12s %14s %14s %7s %12s %12s %s\n", "step", "copy", "pinned", "peak without",
           "peak with", "ratio", "after free", "bound", "");
    int ok = 1;
    for (int k = 0; k < 10; k++) {
        double ratio = pk1[k] > 0 ? (double)pk0[k] / (double)pk1[k] : 0;
        long bound = (long)((n[k] + bound_extra) >> 10);
        int met = pk1[k] <= bound && af1[k] < 16 * 1024;
        ok &= met;
        printf("%-4d %12s %12s %14s %14s %6.2fx %12s %12s %s\n", k, uvmc_bytes_text(n[k]).s,
               uvmc_bytes_text(next_pow2(n[k])).s, kib_text(pk0[k]).s, kib_text(pk1[k]).s, ratio, kib_text(af1[k]).s,
               kib_text(bound).s, met ? "within bound" : "OVER BOUND");
    }
    printf("memory: largest copy peak ratio without/with = %.2fx (target >= 1.4x); bounds %s\n",
           pk1[9] > 0 ? (double)pk0[9] / (double)pk1[9] : 0.0, ok ? "met" : "NOT met");
    free(without);
    free(with);
    return 0;
}

static double child_seconds(const char *lib, size_t n, char *const *env)
{
    char *out = run_child(lib, "throughput", n, env);
    double s = -1;
    char verdict[16] = "";
    if (out && sscanf(out, "seconds %lf %15s", &s, verdict) == 2 && strcmp(verdict, "ok") != 0)
        s = -1;
    free(out);
    return s;
}

#define THROUGHPUT_RUNS 5

/* Each round runs the unchunked copy and every host-engine setting once, in fresh processes; a
 * ratio is taken within a round (the same moment's machine load) and the median over the rounds
 * is printed with its spread, so one disturbed run moves neither the figure nor its meaning. */
int uvmc_bench_throughput(const char *lib, size_t n)
{
    static char *const threads[] = {"UVMCHUNK_COPY_THREADS=1", "UVMCHUNK_COPY_THREADS=2", "UVMCHUNK_COPY_THREADS=4"};
    double plain[THROUGHPUT_RUNS], host[3][THROUGHPUT_RUNS], ratio[3][THROUGHPUT_RUNS];
    for (int r = 0; r < THROUGHPUT_RUNS; r++) {
        plain[r] = child_seconds(NULL, n, NULL);
        if (plain[r] <= 0)
            return 1;
        for (int i = 0; i < 3; i++) {
            char *const env[] = {"UVMCHUNK_ENGINE=host", threads[i], NULL};
            host[i][r] = child_seconds(lib, n, env);
            if (host[i][r] <= 0)
                return 1;
            ratio[i][r] = plain[r] / host[i][r];
        }
    }
    printf("throughput: %s managed -> pageable, simulated runtime; median of %d runs (runs: smallest-largest)\n",
           uvmc_bytes_text(n).s, THROUGHPUT_RUNS);
    printf("%-34s %10s %10s %18s\n", "path", "seconds", "rate", "ratio");
    double med, lo, hi;
    uvmc_bench_spread(plain, THROUGHPUT_RUNS, &med, &lo, &hi);
    printf("%-34s %10.4f %10s %18s\n", "one unchunked copy (no library)", med, uvmc_rate_text((double)n, med).s, "1");
    for (int i = 0; i < 3; i++) {
        char label[64], r[48];
        snprintf(label, sizeof label, "host engine, %s", threads[i] + strlen("UVMCHUNK_"));
        double secs, x, y;
        uvmc_bench_spread(host[i], THROUGHPUT_RUNS, &secs, &x, &y);
        uvmc_bench_spread(ratio[i], THROUGHPUT_RUNS, &med, &lo, &hi);
        snprintf(r, sizeof r, "%.2fx (%.2f-%.2f)", med, lo, hi);
        printf("%-34s %10.4f %10s %18s\n", label, secs, uvmc_rate_text((double)n, secs).s, r);
    }
    return 0;
}
