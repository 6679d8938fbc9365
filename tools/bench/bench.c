/* bench.c: uvmchunk-bench, figures on the simulated CUDA runtime. `overhead` (the default): pass-
 * through cost (callgrind instructions per below-threshold call), classification queries and
 * chunked/unchunked throughput, extra memory and time from 64 MiB to 4 GiB; `memory` and
 * `throughput` are in memory.c. Prints tables; asserts nothing.
 *
 * The driver process re-executes itself once per measurement ("--child MODE ..."), each child in
 * a fresh process with LD_PRELOAD set (or not) by the driver, so peak RSS and first-call costs of
 * one measurement never leak into another. */
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
#include "uvmsim.h"

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

/* The loop callgrind measures (--toggle-collect): nothing but the calls. */
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
    printf("passthrough calls=%ld reached=%llu queries=%llu\n", calls, c, q);
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

/* above SIZE REPS: one chunked and one unchunked copy of SIZE, alternated REPS times (best time
 * of each), plus the pointer queries and blocks of one intercepted copy. */
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
    double best_memcpy_whole = 1e30, best_memcpy_split = 1e30;
    double best_chunked = 1e30, best_plain = 1e30;
    unsigned long long queries = 0, blocks = 0;
    for (int r = 0; r < reps; r++) {
        memset(dst, 0, size);
        unsigned long long q0 = ptr_queries(), b0 = blocks_now();
        double t0 = now_s();
        CK(cudaMemcpyAsync(dst, src, size, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        double t = now_s() - t0;
        queries = ptr_queries() - q0;
        blocks = blocks_now() - b0;
        if (!same(dst, src, size))
            die("verifying the chunked copy", 0);
        best_chunked = t < best_chunked ? t : best_chunked;

        memset(dst, 0, size);
        t0 = now_s();
        CK(real(dst, src, size, cudaMemcpyDeviceToHost, s));
        CK(cudaStreamSynchronize(s));
        t = now_s() - t0;
        if (!same(dst, src, size))
            die("verifying the unchunked copy", 0);
        best_plain = t < best_plain ? t : best_plain;

        t0 = now_s();
        memcpy(dst, src, size);
        t = now_s() - t0;
        best_memcpy_whole = t < best_memcpy_whole ? t : best_memcpy_whole;
        t0 = now_s();
        for (size_t off = 0; off < size; off += cfg.chunk_size)
            memcpy(dst + off, src + off, size - off < cfg.chunk_size ? size - off : cfg.chunk_size);
        t = now_s() - t0;
        best_memcpy_split = t < best_memcpy_split ? t : best_memcpy_split;
    }
    printf("above size=%zu queries=%llu blocks=%llu chunked_s=%.6f plain_s=%.6f memcpy_whole_s=%.6f "
           "memcpy_split_s=%.6f\n",
           size, queries, blocks, best_chunked, best_plain, best_memcpy_whole, best_memcpy_split);
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

/* Total instructions callgrind counted inside uvmc_bench_loop; -1 when unavailable. */
static long long callgrind_ir(const char *lib, long calls, bool lazy, unsigned long long *queries,
                              unsigned long long *reached)
{
    char out_file[64], calls_s[32], buf[4096];
    snprintf(out_file, sizeof out_file, "/tmp/uvmchunk-bench.%d.cg", (int)getpid());
    snprintf(calls_s, sizeof calls_s, "%ld", calls);
    char out_opt[96];
    snprintf(out_opt, sizeof out_opt, "--callgrind-out-file=%s", out_file);
    char *argv[] = {"valgrind", "--tool=callgrind", "--toggle-collect=uvmc_bench_loop", out_opt,
                    "--quiet", (char *)uvmc_bench_self, "--child", "passthrough", calls_s,
                    lazy ? "lazy" : NULL, NULL};
    char *plain[] = {(char *)uvmc_bench_self, "--child", "passthrough", calls_s, lazy ? "lazy" : NULL, NULL};
    int rc = uvmc_bench_run_child(tiny ? plain : argv, lib, NULL, buf, sizeof buf);
    if (rc != 0)
        return -1;
    if (sscanf(buf, "passthrough calls=%*d reached=%llu queries=%llu", reached, queries) != 2)
        return -1;
    if (tiny)
        return 0;
    FILE *f = fopen(out_file, "r");
    long long ir = -1;
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "totals:", 7) || !strncmp(line, "summary:", 8))
            ir = strtoll(strchr(line, ':') + 1, NULL, 10);
    if (f)
        fclose(f);
    unlink(out_file);
    return ir;
}

static void row(const char *metric, const char *value, const char *target, const char *verdict)
{
    printf("| %-44s | %-38s | %-14s | %-4s |\n", metric, value, target, verdict);
}

static bool have_valgrind(void)
{
    return system("valgrind --version >/dev/null 2>&1") == 0;
}

static long mem_available_mib(void)
{
    return uvmc_proc_kib("/proc/meminfo", "MemAvailable") / 1024;
}

static int driver(void)
{
    char v[96], buf[4096];
    int bad = 0;
    printf("uvmchunk-bench: simulated CUDA runtime, library %s%s\n", lib_path, tiny ? " (tiny mode)" : "");
    printf("| %-44s | %-38s | %-14s | %-4s |\n", "metric", "value", "target", "met");
    printf("|%s|%s|%s|%s|\n", "----------------------------------------------",
           "----------------------------------------", "----------------", "------");

    /* (a) pass-through cost */
    long calls = tiny ? 1000 : 100000;
    if (tiny || have_valgrind()) {
        unsigned long long q_with = 0, q_without = 0, reach_with = 0, reach_without = 0;
        unsigned long long q_lazy = 0, reach_lazy = 0;
        long long with = callgrind_ir(lib_path, calls, false, &q_with, &reach_with);
        long long with_lazy = callgrind_ir(lib_path, calls, true, &q_lazy, &reach_lazy);
        long long without = callgrind_ir(NULL, calls, false, &q_without, &reach_without);
        if (with < 0 || with_lazy < 0 || without < 0) {
            row("pass-through: added instructions per call", "measurement failed", "<= 50", "NO");
            bad++;
        } else if (tiny) {
            row("pass-through: added instructions per call", "(not measured in tiny mode)", "<= 50", "-");
        } else {
            double per = (double)(with - without) / (double)calls;
            snprintf(v, sizeof v, "%.1f (%lld - %lld Ir)/%ld", per, with, without, calls);
            row("pass-through: added instructions per call", v, "<= 50", per <= 50 ? "yes" : "NO");
            bad += per > 50;
            per = (double)(with_lazy - without) / (double)calls;
            snprintf(v, sizeof v, "%.1f (%lld - %lld Ir)/%ld", per, with_lazy, without, calls);
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

    /* (b) above threshold, default config */
    size_t size_b = tiny ? 4 * MIB : 1 * GIB;
    char size_s[32], reps_s[16];
    snprintf(size_s, sizeof size_s, "%zu", size_b);
    snprintf(reps_s, sizeof reps_s, "%d", tiny ? 1 : 3);
    char *argv_b[] = {(char *)uvmc_bench_self, "--child", "above", size_s, reps_s, NULL};
    unsigned long long queries = 0, blocks = 0;
    double chunked = 0, plain = 0, mc_whole = 0, mc_split = 0;
    if (uvmc_bench_run_child(argv_b, lib_path, tiny ? tiny_env : NULL, buf, sizeof buf) == 0 &&
        sscanf(buf, "above size=%*u queries=%llu blocks=%llu chunked_s=%lf plain_s=%lf memcpy_whole_s=%lf "
                    "memcpy_split_s=%lf",
               &queries, &blocks, &chunked, &plain, &mc_whole, &mc_split) == 6) {
        /* source first and last byte (no range attributes for managed memory, BRIEF §8), then the
         * destination; 2 where the range attributes answer */
        snprintf(v, sizeof v, "%llu (%llu copy calls)", queries, blocks);
        row("above threshold: pointer queries per copy", v, "<= 3", queries <= 3 ? "yes" : "NO");
        bad += queries > 3;
        double ratio = plain / chunked;
        snprintf(v, sizeof v, "%.3f (%.2f vs %.2f GB/s)", ratio, (double)size_b / chunked / 1e9,
                 (double)size_b / plain / 1e9);
        char metric[64];
        snprintf(metric, sizeof metric, "chunked/unchunked throughput at %zu MiB", size_b / MIB);
        row(metric, v, ">= 0.9", tiny ? "-" : ratio >= 0.9 ? "yes" : "NO");
        bad += !tiny && ratio < 0.9;
        /* What splitting itself costs on this machine's memcpy, and the library measured against it. */
        double ceiling = mc_whole / mc_split;
        snprintf(v, sizeof v, "%.3f", ceiling);
        row("  same split with host memcpy (sim ceiling)", v, "", "-");
        snprintf(v, sizeof v, "%.3f", ratio / ceiling);
        row("  chunked/unchunked relative to that ceiling", v, ">= 0.9",
            tiny ? "-" : ratio / ceiling >= 0.9 ? "yes" : "NO");
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
    size_t bound_kib = tiny ? 2 * 256 : 4 * 64 * 1024; /* depth x chunk_size, KiB */
    double base_ns_per_byte = 0;
    for (size_t k = 0; k < nsizes; k++) {
        size_t sz = sizes[k];
        char metric[64];
        snprintf(metric, sizeof metric, "scaling %5zu MiB: extra peak RSS, time", sz / MIB);
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
        snprintf(v, sizeof v, "%ld KiB, %.3f s (x%.2f/B), %llu calls", extra, secs, ns_per_byte / base_ns_per_byte, nb);
        char target[32];
        snprintf(target, sizeof target, "<= %zu KiB", bound_kib);
        bool ok = extra >= 0 && (size_t)extra <= bound_kib;
        row(metric, v, target, ok ? "yes" : "NO");
        bad += !ok;
    }
    printf("time column: seconds for one copy (x = time per byte relative to the smallest size; linear "
           "time keeps it near 1); calls: copies that reached the runtime (the host engine makes none)\n");
    printf("uvmchunk-bench: %s\n", bad ? "some targets not met" : "every target met");
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
                 !strcmp(argv[i], "all"))
            mode = argv[i];
        else if (argv[i][0] >= '1' && argv[i][0] <= '9')
            mib = strtoull(argv[i], NULL, 10);
        else {
            fprintf(stderr, "usage: uvmchunk-bench [overhead|memory|throughput|all] [MiB] [--tiny] [--lib libuvmchunk.so]\n"
                            "  memory: peak RSS without/with the library over the checkpoint sequence (default 2112 MiB table)\n"
                            "  throughput: host engine vs one unchunked copy (default 1024 MiB)\n");
            return 2;
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
    return rc;
}
