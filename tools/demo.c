/* demo.c: uvmchunk-demo, the main job in miniature: what a checkpoint save does to one managed
 * tensor (PyTorch's to("cpu", non_blocking=True), torchrec#3399), verified byte for byte. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "demo.h"
#include "procfs.h"
#include "uvmc_units.h"

#ifndef UVMC_VERSION
#error "compile with -DUVMC_VERSION=\"x.y.z\" (tools/CMakeLists.txt passes the project's version)"
#endif

static const char usage[] =
    "usage: uvmchunk-demo [--compare] [--size BYTES[K|M|G]] (default 1536M)\n"
    "\n"
    "What a checkpoint save does to one managed tensor (cudaMallocManaged with FBGEMM's advice, a\n"
    "pinned destination of the power-of-two size, cudaMemcpyAsync device to host, event synchronize),\n"
    "verified byte for byte. --compare runs it without and with libuvmchunk, side by side.\n"
    "  --help, --version\n";

#define CHECK(call)                                                                          \
    do {                                                                                     \
        cudaError_t e_ = (call);                                                             \
        if (e_ != cudaSuccess) {                                                             \
            fprintf(stderr, "uvmchunk-demo: %s failed: %s (%d)\n", #call, cudaGetErrorString(e_), \
                    (int)e_);                                                                \
            return 1;                                                                        \
        }                                                                                    \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Digits with an optional K, M or G suffix; 0 for anything else. */
static size_t parse_size(const char *s)
{
    char *end;
    if (*s < '0' || *s > '9')
        return 0;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 0;
    switch (*end) {
    case 'G': case 'g': shift = 30; end++; break;
    case 'M': case 'm': shift = 20; end++; break;
    case 'K': case 'k': shift = 10; end++; break;
    default: break;
    }
    if (*end != '\0' || v > (~0ull >> shift))
        return 0;
    return (size_t)(v << shift);
}

size_t uvmc_next_pow2(size_t n)
{
    size_t p = 1;
    while (p < n)
        p <<= 1;
    return p;
}

static uint64_t pattern(size_t i) { return (uint64_t)i * 0x9E3779B97F4A7C15ull ^ 0x5555AAAA5555AAAAull; }

/* Resets VmHWM to the current RSS, so the next reading is the peak from here on. */
static void reset_hwm(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (f) {
        fputs("5", f);
        fclose(f);
    }
}

/* No driver (or no device): say how to run on the simulated runtime instead. */
static void no_gpu_hint(cudaError_t e)
{
    if (e != cudaErrorInsufficientDriver && e != cudaErrorNoDevice)
        return;
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    self[n > 0 ? n : 0] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    fprintf(stderr,
            "uvmchunk-demo: no CUDA driver or GPU here. To run on the simulated runtime built with the tests:\n"
            "  LD_LIBRARY_PATH=%s/sim %s/uvmchunk-run -- %s/uvmchunk-demo\n"
            "or simply: bash tools/demo.sh\n",
            self, self, self);
}

static int preloaded(void)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    int found = 0;
    while (f && !found && fgets(line, sizeof line, f))
        found = strstr(line, "libuvmchunk.so") != NULL;
    if (f)
        fclose(f);
    return found;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* lines reach a pipe before the library's exit summary */
    /* 1.5 GiB: PyTorch pins 2 GiB for it, at the default pinned_threshold (1 GiB) */
    size_t size = (size_t)3 << 29;
    const char *size_arg = "1536M";
    int compare = 0, report = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--size") && i + 1 < argc) {
            size_arg = argv[++i];
            size = parse_size(size_arg);
            if (size < 8) {
                fprintf(stderr, "uvmchunk-demo: bad --size '%s' (want e.g. 512M, 4G, at least 8 bytes)\n", argv[i]);
                return 2;
            }
        } else if (!strcmp(argv[i], "--compare")) {
            compare = 1;
        } else if (!strcmp(argv[i], "--report")) { /* a child of --compare: one machine-readable line */
            report = 1;
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("uvmchunk-demo %s\n", UVMC_VERSION);
            return 0;
        } else {
            fputs(usage, stderr);
            return 2;
        }
    }
    size &= ~(size_t)7; /* the pattern is written in 8-byte words */
    if (compare)
        return uvmc_demo_compare(size_arg, size);

    int count = 0;
    cudaError_t e0 = cudaGetDeviceCount(&count);
    if (e0 != cudaSuccess) {
        fprintf(stderr, "uvmchunk-demo: cudaGetDeviceCount failed: %s (%d)\n", cudaGetErrorString(e0), (int)e0);
        no_gpu_hint(e0);
        return 1;
    }
    struct cudaDeviceProp prop;
    CHECK(cudaGetDeviceProperties(&prop, 0));
    CHECK(cudaSetDevice(0));
    int simulated = strstr(prop.name, "simulated") != NULL;
    if (simulated)
        printf("runtime: simulated CUDA runtime (no GPU found): %s\n", prop.name);
    else
        printf("runtime: real GPU: %s\n", prop.name);
    printf("libuvmchunk: %s\n", preloaded() ? "preloaded" : "NOT loaded (copy runs unsplit)");

    /* The managed tensor, with FBGEMM's advice (torchrec#3399): preferred location CPU, accessed by GPU. */
    uint64_t *src = NULL;
    CHECK(cudaMallocManaged((void **)&src, size, cudaMemAttachGlobal));
    struct cudaMemLocation cpu = {.type = cudaMemLocationTypeHost, .id = 0};
    struct cudaMemLocation gpu = {.type = cudaMemLocationTypeDevice, .id = 0};
    CHECK(cudaMemAdvise(src, size, cudaMemAdviseSetPreferredLocation, cpu));
    CHECK(cudaMemAdvise(src, size, cudaMemAdviseSetAccessedBy, gpu));
    size_t words = size / 8;
    for (size_t i = 0; i < words; i++)
        src[i] = pattern(i);

    /* The pinned destination PyTorch would allocate: rounded up to a power of two. Host memory is
     * measured from here: what the checkpoint costs on top of the table. */
    reset_hwm();
    long rss0 = uvmc_proc_kib("/proc/self/status", "VmRSS");
    uint64_t *dst = NULL;
    CHECK(cudaHostAlloc((void **)&dst, uvmc_next_pow2(size), cudaHostAllocDefault));
    memset(dst, 0xAB, size);
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));

    unsigned long long (*sim_calls)(const char *) =
        (unsigned long long (*)(const char *))dlsym(RTLD_DEFAULT, "uvmsim_calls");
    /* On the simulator, count the copies that reached the runtime: the copy engine's blocks (none
     * when the host engine copied; the library's stats line at exit gives the blocks either way). */
    unsigned long long calls0 = sim_calls ? sim_calls("cudaMemcpyAsync") : 0;

    double t0 = now_s();
    CHECK(cudaMemcpyAsync(dst, src, size, cudaMemcpyDeviceToHost, stream));
    CHECK(cudaEventRecord(done, stream));
    CHECK(cudaEventSynchronize(done));
    double secs = now_s() - t0;
    long extra_kib = uvmc_proc_kib("/proc/self/status", "VmHWM") - rss0;
    unsigned long long (*sim_locked)(void) = (unsigned long long (*)(void))dlsym(RTLD_DEFAULT, "uvmsim_pinned_peak");

    size_t bad = 0;
    uint64_t sum = 0; /* hash_combine over 64-bit words: every bit of every word reaches the sum */
    for (size_t i = 0; i < words; i++) {
        bad += dst[i] != pattern(i);
        sum ^= dst[i] + 0x9E3779B97F4A7C15ull + (sum << 6) + (sum >> 2);
    }
    if (report) {
        printf("REPORT extra_kib=%ld locked=%lld seconds=%.6f verified=%d\n", extra_kib,
               sim_locked ? (long long)sim_locked() : -1LL, secs, !bad);
        return bad ? 1 : 0;
    }
    printf("size: %s (pinned destination %s)\n", uvmc_bytes_text(size).s, uvmc_bytes_text(uvmc_next_pow2(size)).s);
    if (sim_calls)
        printf("cudaMemcpyAsync calls the simulated runtime received: %llu (the host engine makes none)\n",
               sim_calls("cudaMemcpyAsync") - calls0);
    printf("blocks: see the 'uvmchunk: stats' line at exit\n");
    printf("seconds: %.3f\nrate: %s\n", secs, uvmc_rate_text((double)size, secs).s);
    printf("peak host memory above the table: %s\n", uvmc_bytes_text((unsigned long long)(extra_kib > 0 ? extra_kib : 0) * 1024).s);
    printf("checksum: %016" PRIx64 " %s\n", sum, bad ? "MISMATCH" : "verified");
    if (bad)
        fprintf(stderr, "uvmchunk-demo: %zu of %zu words differ from the source\n", bad, words);

    cudaEventDestroy(done);
    cudaStreamDestroy(stream);
    cudaFreeHost(dst);
    cudaFree(src);
    return bad ? 1 : 0;
}
