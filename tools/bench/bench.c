/* bench.c: uvmchunk-bench, figures on the simulated CUDA runtime. `overhead` (the default): pass-
 * through cost (callgrind instructions per below-threshold call), classification queries and
 * chunked/unchunked throughput, extra memory and time from 64 MiB to 4 GiB; `memory` and
 * `throughput` are in memory.c. Prints tables; asserts nothing.
 *
 * The driver process re-executes itself once per measurement ("--child MODE ..."), each child in
 * a fresh process with LD_PRELOAD set (or not) by the driver, so peak RSS and first-call costs of
 * one measurement never leak into another. Figures mean the same run after run: the instruction
 * count is the library's own instructions only (the same on every run of one build), and timing
 * ratios are the median of several runs, printed with their spread. */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "bench.h"
#include "procfs.h"
#include "uvmc_config.h"
#include "uvmc_units.h"
#include "uvmsim.h"

#ifndef UVMC_VERSION
#error "compile with -DUVMC_VERSION=\"x.y.z\" (tools/bench/CMakeLists.txt passes the project's version)"
#endif

extern char **environ;

#define MIB ((size_t)1 << 20)
#define GIB ((size_t)1 << 30)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void die(const char *what, int rc)
{
    fprintf(stderr, "uvmchunk-bench: %s failed (%d)\n", what, rc);
    exit(1);
}
#define CK(call)                      \
    do {                              \
        cudaError_t e_ = (call);      \
        if (e_ != cudaSuccess)        \
            die(#call, (int)e_);      \
    } while (0)

/* ---------------------------------------------------------------- children */

/* Driver-side lookups the library may make while classifying one copy. */
static unsigned long long cuda_queries(void)
{
    static const char *const names[] = {"cuPointerGetAttributes", "cuPointerGetAttribute", "cuMemGetAddressRange",
                                        "cuMemGetAddressRange_v2", "cuCtxGetCurrent", "cuCtxGetDevice",
                                        "cuStreamIsCapturing", "cuEventCreate", "cuEventRecord",
                                        "cuEventDestroy", "cuMemPrefetchAsync_v2", "cudaPointerGetAttributes",
                                        "cudaStreamIsCapturing", "cudaGetLastError", "cudaPeekAtLastError"};
    unsigned long long n = 0;
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        n += uvmsim_calls(names[i]);
    return n;
}

static unsigned long long ptr_queries(void)
{
    return uvmsim_calls("cuPointerGetAttributes") + uvmsim_calls("cuPointerGetAttribute") +
           uvmsim_calls("cuMemGetAddressRange") + uvmsim_calls("cuMemGetAddressRange_v2") +
           uvmsim_calls("cudaPointerGetAttributes");
}

/* Copy calls of a split copy: the copy engine's blocks (the host engine makes none). */
static unsigned long long blocks_now(void)
{
    return uvmsim_calls("cudaMemcpyAsync");
}

/* The loop callgrind measures: nothing but the calls (its entry and exit delimit the measured part
 * of the profile, --dump-before/--dump-after; the warm-up before it is not counted). */
__attribute__((noinline, used)) void uvmc_bench_loop(void *dst, const void *src, size_t n, long calls,
                                                     cudaStream_t s)
{
    for (long i = 0; i < calls; i++)
        cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s);
}

/* passthrough CALLS [lazy]: below-threshold copies (4 KiB, managed to pinned) on one stream; with
 * "lazy", while a lazily pinned buffer (pinned_threshold bytes, never used) is alive elsewhere. */
static int child_passthrough(long calls, bool lazy)
{
    void *src, *dst, *idle = NULL;
    cudaStream_t s;
    if (lazy) {
        struct uvmc_config cfg;
        uvmc_config_load(&cfg, environ, NULL, NULL);
        CK(cudaHostAlloc(&idle, cfg.pinned_threshold ? cfg.pinned_threshold : MIB, cudaHostAllocDefault));
    }
    CK(cudaMallocManaged(&src, 1 * MIB, cudaMemAttachGlobal));
    CK(cudaMallocHost(&dst, 1 * MIB));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    memset(src, 1, MIB);
    /* Warm-up: lazy binding, the library's one-time init, the stream's worker. */
    CK(cudaMemcpyAsync(dst, src, 4096, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    unsigned long long q0 = cuda_queries(), c0 = uvmsim_calls("cudaMemcpyAsync");
    uvmc_bench_loop(dst, src, 4096, calls, s);
    unsigned long long q = cuda_queries() - q0, c = uvmsim_calls("cudaMemcpyAsync") - c0;
    CK(cudaStreamSynchronize(s));
    /* Whether the calls went through the library at all (else the count would be the runtime's). */
    Dl_info info;
    void *fn = dlsym(RTLD_DEFAULT, "cudaMemcpyAsync");
    int interposed = fn && dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "libuvmchunk");
    printf("passthrough calls=%ld reached=%llu queries=%llu interposed=%d\n", calls, c, q, interposed);
    return 0;
}

/* The real (simulated) runtime's cudaMemcpyAsync, past the preload: the unchunked reference. */
static __typeof__(&cudaMemcpyAsync) real_memcpy_async(void)
{
    static const char *const sonames[] = {"libcudart.so.13", "libcudart.so.12"};
    for (size_t i = 0; i < 2; i++) {
        void *h = dlopen(sonames[i], RTLD_LAZY | RTLD_NOLOAD);
        if (!h)
            continue;
        void *fn = dlvsym(h, "cudaMemcpyAsync", sonames[i]);
        if (fn)
            return (__typeof__(&cudaMemcpyAsync))fn;
    }
    die("finding the real cudaMemcpyAsync", 0);
    return NULL;
}

static void fill(uint8_t *p, size_t n)
{
    for (size_t i = 0; i < n; i += 4096)
        p[i] = (uint8_t)(i >> 12);
    memset(p, 0x5A, n < 4096 ? n : 4096);
}

static bool same(const uint8_t *a, const uint8_t *b, size_t n) { return memcmp(a, b, n) == 0; }

/* above SIZE REPS: one chunked and one unchunked copy of SIZE, alternated REPS times, one line of
 * times per repetition (the driver takes the median of their ratios), plus the pointer queries and
 * blocks of one intercepted copy. */
static int child_above(size_t size, int reps)
{
    uint8_t *src, *dst;
    cudaStream_t s;
    CK(cudaMallocManaged((void **)&src, size, cudaMemAttachGlobal));
    uvmc_bench_fbgemm_advice(src, size); /* the checkpoint of an FBGEMM table: the case the library is for */
    CK(cudaMallocHost((void **)&dst, size));
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    fill(src, size);
    memset(src, 0x3C, size); /* every page resident, as FBGEMM's zero-filled tables */
    __typeof__(&cudaMemcpyAsync) real = real_memcpy_async();
    /* The simulator's copies are host memcpy: the same split done with plain memcpy is the ceiling
     * a chunked copy can reach here (glibc copies 1 GiB at once faster than in 64 MiB pieces). */
    struct uvmc_config cfg;
    uvmc_config_load(&cfg, environ, NULL, NULL);
    unsigned long long queries = 0, blocks = 0;
    for (int r = 0; r < reps; r++) {
        memset(dst, 0, size);
        unsigned long long q0 = ptr_queries(), b0 = blocks_now();
        double t0 = now_s();
        CK(cudaMemcpyAsync(dst, src, size, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        double chunked = now_s() - t0;
        queries = ptr_queries() - q0;
        blocks = blocks_now() - b0;
        if (!same(dst, src, size))
            die("verifying the chunked copy", 0);

        memset(dst, 0, size);
        t0 = now_s();
        CK(real(dst, src, size, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        double plain = now_s() - t0;
        if (!same(dst, src, size))
            die("verifying the unchunked copy", 0);

        t0 = now_s();
        memcpy(dst, src, size);
        double whole = now_s() - t0;
        t0 = now_s();
        for (size_t off = 0; off < size; off += cfg.chunk_size)
            memcpy(dst + off, src + off, size - off < cfg.chunk_size ? size - off : cfg.chunk_size);
        double split = now_s() - t0;
        printf("rep chunked_s=%.6f plain_s=%.6f memcpy_whole_s=%.6f memcpy_split_s=%.6f\n", chunked, plain, whole,
               split);
    }
    printf("above size=%zu queries=%llu blocks=%llu\n", size, queries, blocks);
    return 0;
}

/* scale SIZE: source and destination resident first; then one intercepted copy: the peak RSS
 * above the resident set just before it, and its time. */
static int child_scale(size_t size)
{
    uint8_t *src, *dst;
    cudaStream_t s;
    CK(cudaMallocManaged((void **)&src, size, cudaMemAttachGlobal));
    uvmc_bench_fbgemm_advice(src, size); /* the checkpoint of an FBGEMM table: the case the library is for */
    CK(cudaMallocHost((void **)&dst, size));
    memset(dst, 0, size); /* resident before the copy, also when the library substituted it */
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    memset(src, 0x3C, size);
    /* Warm the library and the stream with a small copy, then reset the high-water mark. */
    CK(cudaMemcpyAsync(dst, src, 4096, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    FILE *f = fopen("/proc/self/clear_refs", "w");
    bool reset = f && fputs("5", f) >= 0;
    if (f)
        reset = fclose(f) == 0 && reset;
    long before = uvmc_proc_kib("/proc/self/status", "VmRSS");
    unsigned long long b0 = blocks_now();
    double t0 = now_s();
    CK(cudaMemcpyAsync(dst, src, size, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    double t = now_s() - t0;
    long peak = uvmc_proc_kib("/proc/self/status", "VmHWM");
    if (dst[0] != 0x3C || dst[size - 1] != 0x3C)
        die("verifying the copy", 0);
    printf("scale size=%zu blocks=%llu seconds=%.6f extra_kib=%ld hwm_reset=%d\n", size,
           blocks_now() - b0, t, reset ? peak - before : -1, (int)reset);
    return 0;
}

static int child_main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[0], "passthrough"))
        return child_passthrough(atol(argv[1]), argc >= 3 && !strcmp(argv[2], "lazy"));
    if (argc >= 3 && !strcmp(argv[0], "above"))
        return child_above((size_t)strtoull(argv[1], NULL, 10), atoi(argv[2]));
    if (argc >= 2 && !strcmp(argv[0], "scale"))
        return child_scale((size_t)strtoull(argv[1], NULL, 10));
    if (argc >= 2 && !strcmp(argv[0], "memory"))
        return uvmc_bench_child_memory((size_t)strtoull(argv[1], NULL, 10));
    if (argc >= 2 && !strcmp(argv[0], "throughput"))
        return uvmc_bench_child_throughput((size_t)strtoull(argv[1], NULL, 10));
    fprintf(stderr, "uvmchunk-bench: unknown child mode\n");
    return 2;
}

/* ---------------------------------------------------------------- driver */

const char *uvmc_bench_self;
static const char *lib_path = UVMC_BENCH_LIB;
static bool tiny;

int uvmc_bench_run_child(char *const argv[], const char *lib, char *const extra_env[], char *out, size_t outsz)
{
    int fd[2];
    if (pipe(fd))
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(fd[1], 1);
        close(fd[0]);
        close(fd[1]);
        if (lib)
            setenv("LD_PRELOAD", lib, 1);
        else
            unsetenv("LD_PRELOAD");
        setenv("UVMCHUNK_CONFIG", "", 1); /* defaults only: no /etc/uvmchunk.conf */
        for (size_t i = 0; extra_env && extra_env[i]; i++)
            putenv(extra_env[i]);
        execvp(argv[0], argv);
        _exit(127);
    }
    close(fd[1]);
    size_t len = 0;
    ssize_t r;
    while ((r = read(fd[0], out + len, outsz - 1 - len)) > 0 || (r < 0 && errno == EINTR))
        len += r > 0 ? (size_t)r : 0;
    out[len] = 0;
    close(fd[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static char *const tiny_env[] = {"UVMCHUNK_THRESHOLD=1MiB", "UVMCHUNK_CHUNK_SIZE=256KiB", NULL};

/* Instructions the calling thread ran inside libuvmchunk's cudaMemcpyAsync during the measured
 * loop, the real (simulated) runtime's own call excluded; -1 when unavailable. callgrind's
 * --toggle-collect flips collection on entering and leaving every function whose name matches
 * (cudaMemcpyAsync*: the runtime's cudaMemcpyAsync, and the library's wrapper, which callgrind
 * names with its symbol version, cudaMemcpyAsync@@libcudart.so.13: interpose/CMakeLists.txt
 * exports the runtime names once per major): on at
 * the library's wrapper, off again inside the runtime's function it forwards to, on when that
 * returns. So the count holds the library's instructions and nothing else: the runtime's enqueue
 * (malloc, a mutex, a condition variable shared with its stream thread) costs a different number
 * of instructions from run to run, by millions over 100,000 calls, and no longer enters the
 * figure. --dump-before/--dump-after on uvmc_bench_loop cut the profile at the loop, so the
 * warm-up (first call, the library's initialisation) is a part of its own. Other threads start
 * with collection off and never toggle it (the stream's worker never calls cudaMemcpyAsync). */
static long long callgrind_ir(const char *lib, long calls, bool lazy, unsigned long long *queries,
                              unsigned long long *reached)
{
    char out_file[64], calls_s[32], buf[4096];
    snprintf(out_file, sizeof out_file, "/tmp/uvmchunk-bench.%d.cg", (int)getpid());
    snprintf(calls_s, sizeof calls_s, "%ld", calls);
    char out_opt[96];
    snprintf(out_opt, sizeof out_opt, "--callgrind-out-file=%s", out_file);
    char *argv[] = {"valgrind", "--tool=callgrind", "--toggle-collect=cudaMemcpyAsync*",
                    "--dump-before=uvmc_bench_loop", "--dump-after=uvmc_bench_loop", out_opt, "--quiet",
                    (char *)uvmc_bench_self, "--child", "passthrough", calls_s, lazy ? "lazy" : NULL, NULL};
    char *plain[] = {(char *)uvmc_bench_self, "--child", "passthrough", calls_s, lazy ? "lazy" : NULL, NULL};
    int rc = uvmc_bench_run_child(tiny ? plain : argv, lib, NULL, buf, sizeof buf);
    int interposed = 0;
    if (rc != 0 || sscanf(buf, "passthrough calls=%*d reached=%llu queries=%llu interposed=%d", reached, queries,
                          &interposed) != 3)
        return -1;
    if (!interposed) {
        fprintf(stderr, "uvmchunk-bench: cudaMemcpyAsync did not resolve to %s in the child\n", lib);
        return -1;
    }
    if (tiny)
        return 0;
    /* The part dumped when the loop returned; every part file is removed. */
    long long ir = -1;
    for (int part = 0; part <= 8; part++) {
        char name[96], line[512];
        if (part)
            snprintf(name, sizeof name, "%s.%d", out_file, part);
        else
            snprintf(name, sizeof name, "%s", out_file);
        FILE *f = fopen(name, "r");
        if (!f)
            continue;
        bool loop = false;
        long long total = -1;
        while (fgets(line, sizeof line, f)) {
            static const char trigger[] = "desc: Trigger: --dump-after=uvmc_bench_loop";
            if (!strncmp(line, trigger, sizeof trigger - 1))
                loop = true;
            if (!strncmp(line, "totals:", 7) || !strncmp(line, "summary:", 8))
                total = strtoll(strchr(line, ':') + 1, NULL, 10);
        }
        fclose(f);
        unlink(name);
        if (loop)
            ir = total;
    }
    return ir;
}

static void row(const char *metric, const char *value, const char *target, const char *verdict)
{
    printf("| %-44s | %-42s | %-14s | %-5s |\n", metric, value, target, verdict);
}

static bool have_valgrind(void)
{
    return system("valgrind --version >/dev/null 2>&1") == 0;
}

static long mem_available_mib(void)
{
    return uvmc_proc_kib("/proc/meminfo", "MemAvailable") / 1024;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median, smallest and largest of v[0..n) (sorts v). */
void uvmc_bench_spread(double *v, int n, double *median, double *lo, double *hi)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
    *lo = v[0];
    *hi = v[n - 1];
}

/* A timing figure against a lower bound: met when even its smallest run meets it, not met when
 * even its largest misses it, and "noise" when the runs fall on both sides. Timing figures get a
 * verdict line of their own: on a shared machine they move with its load, while the counts and
 * memory bounds are the same on every run of one build, and so is their verdict. */
static const char *timing_verdict(double lo, double hi, double target, int *slow, int *noisy)
{
    if (lo >= target)
        return "yes";
    if (hi < target) {
        (*slow)++;
        return "NO";
    }
    (*noisy)++;
    return "noise";
}

/* `instructions [CALLS]`: the pass-through figure alone, one line (tests/hardening runs it twice and
 * wants the same line). */
static int instructions_only(long calls)
{
    if (!have_valgrind()) {
        printf("SKIP: valgrind is not installed\n");
        return 0;
    }
    unsigned long long q, reached;
    long long plain = callgrind_ir(lib_path, calls, false, &q, &reached);
    long long lazy = callgrind_ir(lib_path, calls, true, &q, &reached);
    if (plain < 0 || lazy < 0) {
        fprintf(stderr, "uvmchunk-bench: the callgrind measurement failed\n");
        return 1;
    }
    printf("added instructions per call: %.2f; with a lazy buffer alive: %.2f (%ld calls)\n",
           (double)plain / (double)calls, (double)lazy / (double)calls, calls);
    return 0;
}

#define ABOVE_REPS 5

static int driver(void)
{
    char v[96], buf[8192];
    int bad = 0, slow = 0, noisy = 0, timed = 0; /* bad: counts and memory; the rest: timing */
    printf("uvmchunk-bench %s: simulated CUDA runtime, library %s%s\n", UVMC_VERSION, lib_path,
           tiny ? " (tiny mode)" : "");
    printf("| %-44s | %-42s | %-14s | %-5s |\n", "metric", "value", "target", "met");
    printf("|%s|%s|%s|%s|\n", "----------------------------------------------",
           "--------------------------------------------", "----------------", "-------");

    /* (a) pass-through cost */
    long calls = tiny ? 1000 : 100000;
    if (tiny || have_valgrind()) {
        unsigned long long q_with = 0, reach_with = 0, q_lazy = 0, reach_lazy = 0;
        long long with = callgrind_ir(lib_path, calls, false, &q_with, &reach_with);
        long long with_lazy = callgrind_ir(lib_path, calls, true, &q_lazy, &reach_lazy);
        if (with < 0 || with_lazy < 0) {
            row("pass-through: added instructions per call", "measurement failed", "<= 50", "NO");
            bad++;
        } else if (tiny) {
            row("pass-through: added instructions per call", "(not measured in tiny mode)", "<= 50", "-");
        } else {
            double per = (double)with / (double)calls;
            snprintf(v, sizeof v, "%.1f (%lld Ir / %ld calls)", per, with, calls);
            row("pass-through: added instructions per call", v, "<= 50", per <= 50 ? "yes" : "NO");
            bad += per > 50;
            per = (double)with_lazy / (double)calls;
            snprintf(v, sizeof v, "%.1f (%lld Ir / %ld calls)", per, with_lazy, calls);
            row("  the same with a lazy buffer alive", v, "<= 50", per <= 50 ? "yes" : "NO");
            bad += per > 50;
        }
        snprintf(v, sizeof v, "%llu in %ld calls (reached %llu)", q_with, calls, reach_with);
        bool ok = q_with == 0 && reach_with == (unsigned long long)calls;
        row("pass-through: CUDA queries below threshold", v, "0", ok ? "yes" : "NO");
        bad += !ok;
    } else {
        row("pass-through: added instructions per call", "valgrind not installed", "<= 50", "-");
    }

    /* (b) above threshold, default config: ABOVE_REPS alternations, medians of the ratios */
    size_t size_b = tiny ? 4 * MIB : 1 * GIB;
    int reps = tiny ? 1 : ABOVE_REPS;
    char size_s[32], reps_s[16];
    snprintf(size_s, sizeof size_s, "%zu", size_b);
    snprintf(reps_s, sizeof reps_s, "%d", reps);
    char *argv_b[] = {(char *)uvmc_bench_self, "--child", "above", size_s, reps_s, NULL};
    unsigned long long queries = 0, blocks = 0;
    double ratio[ABOVE_REPS], ceiling[ABOVE_REPS], relative[ABOVE_REPS], gbps_c[ABOVE_REPS], gbps_p[ABOVE_REPS];
    int got = 0;
    if (uvmc_bench_run_child(argv_b, lib_path, tiny ? tiny_env : NULL, buf, sizeof buf) == 0) {
        for (const char *p = buf; p && *p && got < reps; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
            double c, pl, whole, split;
            if (sscanf(p, "rep chunked_s=%lf plain_s=%lf memcpy_whole_s=%lf memcpy_split_s=%lf", &c, &pl, &whole,
                       &split) == 4 && c > 0 && pl > 0 && split > 0) {
                ratio[got] = pl / c;
                ceiling[got] = whole / split;
                relative[got] = ratio[got] / ceiling[got];
                gbps_c[got] = (double)size_b / c / 1e9;
                gbps_p[got] = (double)size_b / pl / 1e9;
                got++;
            }
        }
        const char *tail = strstr(buf, "above size=");
        if (!tail || sscanf(tail, "above size=%*u queries=%llu blocks=%llu", &queries, &blocks) != 2)
            got = 0;
    }
    if (got == reps) {
        /* source first and last byte (the range attributes do not answer for managed memory:
         * tests/sim/README.md), then the destination; 2 where the range attributes answer */
        snprintf(v, sizeof v, "%llu (%llu copy calls)", queries, blocks);
        row("above threshold: pointer queries per copy", v, "<= 3", queries <= 3 ? "yes" : "NO");
        bad += queries > 3;
        double med, lo, hi, mc, mp, x, y;
        uvmc_bench_spread(gbps_c, got, &mc, &x, &y);
        uvmc_bench_spread(gbps_p, got, &mp, &x, &y);
        uvmc_bench_spread(ratio, got, &med, &lo, &hi);
        snprintf(v, sizeof v, "%.2f (runs %.2f-%.2f; %.2f vs %.2f GB/s)", med, lo, hi, mc, mp);
        char metric[96];
        snprintf(metric, sizeof metric, "chunked/unchunked throughput at %s", uvmc_bytes_text(size_b).s);
        row(metric, v, ">= 0.9", tiny ? "-" : timing_verdict(lo, hi, 0.9, &slow, &noisy));
        timed += !tiny;
        /* What splitting itself costs on this machine's memcpy, and the library measured against it. */
        uvmc_bench_spread(ceiling, got, &med, &lo, &hi);
        snprintf(v, sizeof v, "%.2f (runs %.2f-%.2f)", med, lo, hi);
        row("  same split with host memcpy (sim ceiling)", v, "", "-");
        uvmc_bench_spread(relative, got, &med, &lo, &hi);
        snprintf(v, sizeof v, "%.2f (runs %.2f-%.2f)", med, lo, hi);
        row("  chunked/unchunked relative to that ceiling", v, ">= 0.9",
            tiny ? "-" : timing_verdict(lo, hi, 0.9, &slow, &noisy));
        timed += !tiny;
    } else {
        row("above threshold", "measurement failed", "", "NO");
        bad++;
    }

    /* (c) scaling: fresh process per size; source + destination must fit with room to spare. */
    long avail = mem_available_mib();
    size_t sizes_full[] = {64 * MIB, 256 * MIB, 512 * MIB, 1 * GIB, 2 * GIB, 4 * GIB};
    size_t sizes_tiny[] = {2 * MIB, 8 * MIB};
    size_t *sizes = tiny ? sizes_tiny : sizes_full;
    size_t nsizes = tiny ? 2 : sizeof sizes_full / sizeof *sizes_full;
    size_t bound = (tiny ? 2 * 256 * 1024 : 4 * 64 * MIB); /* depth x chunk_size */
    double base_ns_per_byte = 0;
    for (size_t k = 0; k < nsizes; k++) {
        size_t sz = sizes[k];
        char metric[96];
        snprintf(metric, sizeof metric, "scaling %7s: extra peak RSS, time", uvmc_bytes_text(sz).s);
        if (avail > 0 && (long)(2 * sz / MIB) > avail * 2 / 3) {
            row(metric, "skipped (does not fit in RAM)", "", "-");
            continue;
        }
        snprintf(size_s, sizeof size_s, "%zu", sz);
        char *argv_c[] = {(char *)uvmc_bench_self, "--child", "scale", size_s, NULL};
        long extra = 0;
        double secs = 0;
        unsigned long long nb = 0;
        if (uvmc_bench_run_child(argv_c, lib_path, tiny ? tiny_env : NULL, buf, sizeof buf) != 0 ||
            sscanf(buf, "scale size=%*u blocks=%llu seconds=%lf extra_kib=%ld", &nb, &secs, &extra) != 3) {
            row(metric, "measurement failed", "", "NO");
            bad++;
            continue;
        }
        double ns_per_byte = secs * 1e9 / (double)sz;
        if (base_ns_per_byte == 0)
            base_ns_per_byte = ns_per_byte;
        snprintf(v, sizeof v, "%s, %.3f s (x%.2f/B), %llu %s", extra >= 0 ? uvmc_bytes_text((unsigned long long)extra * 1024).s : "?",
                 secs, ns_per_byte / base_ns_per_byte, nb, uvmc_plural(nb, "call", "calls"));
        char target[48];
        snprintf(target, sizeof target, "<= %s", uvmc_bytes_text(bound).s);
        bool ok = extra >= 0 && (size_t)extra * 1024 <= bound;
        row(metric, v, target, ok ? "yes" : "NO");
        bad += !ok;
    }
    if (!tiny)
        printf("added instructions: callgrind's count of what runs inside libuvmchunk's cudaMemcpyAsync, the "
               "runtime's own call excluded (the same on every run of one build).\n");
    printf("throughput: median of %d runs (runs: smallest-largest). time column: seconds for one copy (x = time per "
           "byte relative to the smallest size; linear time keeps it near 1); calls: copies that reached the "
           "runtime (the host engine makes none)\n", reps);
    printf("uvmchunk-bench: counts and memory: %s\n", bad ? "some targets not met" : "every target met");
    if (timed)
        printf("uvmchunk-bench: timing (medians of %d runs; they move with the machine's load): %d of %d met, "
               "%d below target in every run, %d on both sides\n", reps, timed - slow - noisy, timed, slow, noisy);
    return 0; /* figures, never a verdict on timings */
}

int main(int argc, char **argv)
{
    uvmc_bench_self = argv[0];
    if (!strchr(uvmc_bench_self, '/')) {
        static char exe[4096];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n > 0) {
            exe[n] = 0;
            uvmc_bench_self = exe;
        }
    }
    const char *mode = "overhead";
    size_t mib = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--child"))
            return child_main(argc - i - 1, argv + i + 1);
        if (!strcmp(argv[i], "--tiny"))
            tiny = true;
        else if (!strcmp(argv[i], "--lib") && i + 1 < argc)
            lib_path = argv[++i];
        else if (!strcmp(argv[i], "overhead") || !strcmp(argv[i], "memory") || !strcmp(argv[i], "throughput") ||
                 !strcmp(argv[i], "instructions") || !strcmp(argv[i], "all"))
            mode = argv[i];
        else if (argv[i][0] >= '1' && argv[i][0] <= '9')
            mib = strtoull(argv[i], NULL, 10);
        else if (!strcmp(argv[i], "--version")) {
            printf("uvmchunk-bench %s\n", UVMC_VERSION);
            return 0;
        } else {
            bool help = !strcmp(argv[i], "--help") || !strcmp(argv[i], "-h");
            fputs("usage: uvmchunk-bench [overhead|memory|throughput|all] [MiB] [--tiny] [--lib libuvmchunk.so]\n"
                  "  overhead (default): instructions the library adds per below-threshold call (callgrind), pointer\n"
                  "    queries, chunked/unchunked throughput (median of 5), extra memory from 64 MiB to 4 GiB\n"
                  "  memory: peak RSS without/with the library over the checkpoint sequence (default 2112 MiB table)\n"
                  "  throughput: host engine vs one unchunked copy (default 1024 MiB; median of 5)\n"
                  "  instructions [CALLS]: only the added instructions per call (default 100000 calls)\n"
                  "  --help, --version\n",
                  help ? stdout : stderr);
            return help ? 0 : 2;
        }
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    bool all = !strcmp(mode, "all");
    int rc = 0;
    if (all || !strcmp(mode, "overhead"))
        rc |= driver();
    if (all || !strcmp(mode, "memory"))
        rc |= uvmc_bench_memory(lib_path, (mib ? mib : 2112) * MIB);
    if (all || !strcmp(mode, "throughput"))
        rc |= uvmc_bench_throughput(lib_path, (mib ? mib : 1024) * MIB);
    if (!strcmp(mode, "instructions"))
        rc |= instructions_only(mib ? (long)mib : 100000);
    return rc;
}
