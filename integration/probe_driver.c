/* probe_driver.c: uvmchunk-probe, one driver fact per sub-command (those the simulator's strict
 * switches stand in for, each with its public source in tests/sim/README.md), measured on the CUDA runtime
 * the process links dynamically (a real GPU, or the simulator through LD_LIBRARY_PATH). Each
 * sub-command runs in its own child under a watchdog, so a hang costs seconds; the parent makes no
 * CUDA call. Prints one table row per fact: | fact | value | note |.
 * Usage: uvmchunk-probe [all|ranges|capacity|hostfn|attrs|pageable|prefetch|residency|throughput] */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <pthread.h>

#define MIB ((size_t)1 << 20)
#define WATCHDOG_S 50

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void row(const char *fact, const char *value, const char *note)
{
    printf("| %s | %s | %s |\n", fact, value, note);
    fflush(stdout);
}

static void rowf(const char *fact, const char *note, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void rowf(const char *fact, const char *note, const char *fmt, ...)
{
    char v[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    row(fact, v, note);
}

#define CK(call)                                                                                       \
    do {                                                                                               \
        cudaError_t e_ = (call);                                                                       \
        if (e_ != cudaSuccess) {                                                                       \
            fprintf(stderr, "uvmchunk-probe: %s failed: %s (%d)\n", #call, cudaGetErrorString(e_), (int)e_); \
            exit(1);                                                                                   \
        }                                                                                              \
    } while (0)

static void fbgemm_advice(void *p, size_t n)
{
    struct cudaMemLocation cpu = {.type = cudaMemLocationTypeHost, .id = 0};
    struct cudaMemLocation gpu = {.type = cudaMemLocationTypeDevice, .id = 0};
    CK(cudaMemAdvise(p, n, cudaMemAdviseSetPreferredLocation, cpu));
    CK(cudaMemAdvise(p, n, cudaMemAdviseSetAccessedBy, gpu));
}

/* ---- ranges: which pointer-attribute queries answer for managed memory (each combination alone:
 * a driver may fail a whole query for one attribute it does not answer), do the range attributes
 * answer, are buffer ids per allocation? */
static void ask(const char *what, const char *note, const CUpointer_attribute *at, unsigned n, CUdeviceptr p)
{
    unsigned int managed = 0;
    unsigned long long id = 0;
    CUdeviceptr start = 0;
    size_t size = 0;
    void *data[4];
    for (unsigned i = 0; i < n; i++)
        data[i] = at[i] == CU_POINTER_ATTRIBUTE_IS_MANAGED  ? (void *)&managed
                  : at[i] == CU_POINTER_ATTRIBUTE_BUFFER_ID ? (void *)&id
                  : at[i] == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR ? (void *)&start
                                                                   : (void *)&size;
    CUresult r = cuPointerGetAttributes(n, (CUpointer_attribute *)at, data, p);
    char fact[96];
    snprintf(fact, sizeof fact, "managed: cuPointerGetAttributes {%s}", what);
    rowf(fact, note, "CUresult %d, is_managed %u, id %s, start %s, size %zu",
         (int)r, managed, id ? "set" : "0", start ? "set" : "0", size);
}

static int probe_ranges(void)
{
    char *a, *b;
    CK(cudaMallocManaged((void **)&a, 64 * MIB, cudaMemAttachGlobal));
    CK(cudaMallocManaged((void **)&b, 64 * MIB, cudaMemAttachGlobal));
    CUdeviceptr in = (CUdeviceptr)(uintptr_t)(a + 5 * MIB);
    const CUpointer_attribute m = CU_POINTER_ATTRIBUTE_IS_MANAGED, id = CU_POINTER_ATTRIBUTE_BUFFER_ID,
                              rs = CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, rz = CU_POINTER_ATTRIBUTE_RANGE_SIZE;
    ask("IS_MANAGED", "", (CUpointer_attribute[]){m}, 1, in);
    ask("BUFFER_ID", "", (CUpointer_attribute[]){id}, 1, in);
    ask("IS_MANAGED, BUFFER_ID", "what the library asks of a copy's source (first and last byte)",
        (CUpointer_attribute[]){m, id}, 2, in);
    ask("RANGE_START, RANGE_SIZE", "", (CUpointer_attribute[]){rs, rz}, 2, in);
    ask("IS_MANAGED, BUFFER_ID, RANGE_START, RANGE_SIZE", "what the library asked before issue 16",
        (CUpointer_attribute[]){m, id, rs, rz}, 4, in);
    CUdeviceptr start = 0;
    size_t size = 0;
    CUresult r = cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, in);
    CUresult r2 = cuPointerGetAttribute(&size, CU_POINTER_ATTRIBUTE_RANGE_SIZE, in);
    rowf("managed: RANGE_START/RANGE_SIZE of an interior pointer", "0 or an error: not answered for managed memory",
         "CUresult %d/%d, start %s, size %zu", (int)r, (int)r2,
         start == (CUdeviceptr)(uintptr_t)a ? "= base" : start ? "other" : "0", size);
    CUdeviceptr base = 0;
    size_t bsize = 0;
    r = cuMemGetAddressRange(&base, &bsize, in);
    rowf("managed: cuMemGetAddressRange", "", "CUresult %d, size %zu", (int)r, bsize);
    unsigned long long id0 = 0, id1 = 0, id2 = 0;
    cuPointerGetAttribute(&id0, CU_POINTER_ATTRIBUTE_BUFFER_ID, in);
    cuPointerGetAttribute(&id1, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)(uintptr_t)(a + 64 * MIB - 1));
    cuPointerGetAttribute(&id2, CU_POINTER_ATTRIBUTE_BUFFER_ID, (CUdeviceptr)(uintptr_t)b);
    rowf("managed: BUFFER_ID first/last byte equal, other allocation distinct", "the library's containment test",
         "%s / %s", id0 && id0 == id1 ? "yes" : "NO", id2 && id2 != id0 ? "yes" : "NO");
    rowf("managed: second allocation right after the first", "", "%s", b == a + 64 * MIB ? "yes" : "no");
    return 0;
}

/* ---- capacity: how many operations a stream holds, behind a blocked host function, before an
 * enqueue blocks */
static atomic_int gate_open;
static atomic_long queued;
static void CUDART_CB gate_fn(void *arg)
{
    (void)arg;
    while (!atomic_load(&gate_open))
        usleep(1000);
}
static void CUDART_CB nop_fn(void *arg) { (void)arg; }

struct filler {
    cudaStream_t s;
    void *dev;
    int hostfn;
    long limit;
};
static void *fill_main(void *arg)
{
    struct filler *f = arg;
    for (long i = 0; i < f->limit; i++) {
        cudaError_t e = f->hostfn ? cudaLaunchHostFunc(f->s, nop_fn, NULL) : cudaMemsetAsync(f->dev, (int)i, 4096, f->s);
        if (e != cudaSuccess)
            break;
        atomic_fetch_add(&queued, 1);
    }
    return NULL;
}

static long capacity(int hostfn)
{
    cudaStream_t s;
    void *dev;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaMalloc(&dev, 4096));
    atomic_store(&gate_open, 0);
    atomic_store(&queued, 0);
    CK(cudaLaunchHostFunc(s, gate_fn, NULL));
    struct filler f = {s, dev, hostfn, 4096};
    pthread_t th;
    pthread_create(&th, NULL, fill_main, &f);
    long last = -1, n;
    double since = now_ms();
    for (;;) { /* stalled for 1 s, or all queued */
        usleep(50000);
        n = atomic_load(&queued);
        if (n != last) {
            last = n;
            since = now_ms();
        }
        if (n >= f.limit || now_ms() - since > 1000)
            break;
    }
    atomic_store(&gate_open, 1);
    pthread_join(th, NULL);
    CK(cudaStreamSynchronize(s));
    cudaFree(dev);
    cudaStreamDestroy(s);
    return n;
}

static int probe_capacity(void)
{
    long h = capacity(1), c = capacity(0);
    rowf("stream capacity: host functions queued behind a blocked one", "4096 = no limit reached", "%ld", h);
    rowf("stream capacity: memsets queued behind a blocked host function", "4096 = no limit reached", "%ld", c);
    return 0;
}

/* ---- hostfn: are two streams' host functions serialised on one thread? */
static double stamp_ms;
static pthread_t stamp_th, sleep_th;
static void CUDART_CB sleep_fn(void *arg) { (void)arg; sleep_th = pthread_self(); usleep(200000); }
static void CUDART_CB stamp_fn(void *arg) { (void)arg; stamp_ms = now_ms(); stamp_th = pthread_self(); }

static int probe_hostfn(void)
{
    cudaStream_t a, b;
    CK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    double t0 = now_ms();
    CK(cudaLaunchHostFunc(a, sleep_fn, NULL));
    usleep(20000);
    CK(cudaLaunchHostFunc(b, stamp_fn, NULL));
    CK(cudaStreamSynchronize(b));
    CK(cudaStreamSynchronize(a));
    rowf("host functions of two streams serialised", "a 200 ms host function on stream A, one on B 20 ms later",
         "%s (B ran at %.0f ms, %s thread)", stamp_ms - t0 >= 190 ? "yes" : "no", stamp_ms - t0,
         pthread_equal(stamp_th, sleep_th) ? "same" : "another");
    return 0;
}

/* ---- attrs: concurrent and pageable managed access */
static int probe_attrs(void)
{
    static const struct {
        enum cudaDeviceAttr a;
        const char *name;
    } as[] = {{cudaDevAttrConcurrentManagedAccess, "concurrentManagedAccess"},
              {cudaDevAttrPageableMemoryAccess, "pageableMemoryAccess"},
              {cudaDevAttrPageableMemoryAccessUsesHostPageTables, "pageableMemoryAccessUsesHostPageTables"},
              {cudaDevAttrDirectManagedMemAccessFromHost, "directManagedMemAccessFromHost"}};
    for (size_t i = 0; i < sizeof as / sizeof *as; i++) {
        int v = -1;
        cudaError_t e = cudaDeviceGetAttribute(&v, as[i].a, 0);
        rowf(as[i].name, "", e == cudaSuccess ? "%d" : "error %d", e == cudaSuccess ? v : (int)e);
    }
    return 0;
}

/* ---- pageable: does an asynchronous device-to-host copy into pageable memory return early? */
static int probe_pageable(void)
{
    size_t n = 256 * MIB;
    char *dev, *host = malloc(n);
    if (!host)
        return 1;
    memset(host, 0, n);
    CK(cudaMalloc((void **)&dev, n));
    CK(cudaMemset(dev, 0x5A, n));
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CK(cudaLaunchHostFunc(s, sleep_fn, NULL)); /* 200 ms of queued work ahead of the copy */
    double t0 = now_ms();
    CK(cudaMemcpyAsync(host, dev, n, cudaMemcpyDeviceToHost, s));
    double ret = now_ms() - t0;
    int landed = host[n - 1] == 0x5A;
    CK(cudaStreamSynchronize(s));
    rowf("pageable D2H cudaMemcpyAsync behind 200 ms of work", "returned early: the 12.2+ 'might be synchronous'",
         "returned after %.0f ms, %s", ret, landed ? "landed (synchronous)" : "NOT landed (returned early)");
    cudaFree(dev);
    free(host);
    return 0;
}

/* ---- prefetch: host-side cost of a 256 MiB prefetch call, idle and busy stream */
static int probe_prefetch(void)
{
    size_t n = 256 * MIB;
    char *m;
    CK(cudaMallocManaged((void **)&m, n, cudaMemAttachGlobal));
    memset(m, 1, n);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    struct cudaMemLocation gpu = {.type = cudaMemLocationTypeDevice, .id = 0};
    struct cudaMemLocation cpu = {.type = cudaMemLocationTypeHost, .id = 0};
    double t0 = now_ms();
    cudaError_t e = cudaMemPrefetchAsync(m, n, gpu, 0, s);
    double idle = now_ms() - t0;
    CK(cudaStreamSynchronize(s));
    double done = now_ms() - t0;
    CK(cudaLaunchHostFunc(s, sleep_fn, NULL));
    t0 = now_ms();
    cudaError_t e2 = cudaMemPrefetchAsync(m, n, cpu, 0, s);
    double busy = now_ms() - t0;
    CK(cudaStreamSynchronize(s));
    rowf("prefetch 256 MiB to device: call on idle stream / until done", "", "%.3f ms / %.1f ms (%s)", idle, done,
         e == cudaSuccess ? "ok" : cudaGetErrorString(e));
    rowf("prefetch 256 MiB to host: call on busy stream", "", "%.3f ms (%s)", busy,
         e2 == cudaSuccess ? "ok" : cudaGetErrorString(e2));
    cudaFree(m);
    return 0;
}

/* ---- residency and throughput of a checkpoint-style copy of an FBGEMM-advised table */
static double copy_gbs(void *dst, const void *src, size_t n, cudaStream_t s)
{
    double t0 = now_ms();
    CK(cudaMemcpyAsync(dst, src, n, cudaMemcpyDeviceToHost, s));
    CK(cudaStreamSynchronize(s));
    return (double)n / ((now_ms() - t0) / 1e3) / 1e9;
}

static int probe_table(int throughput)
{
    size_t n = (throughput ? 1024 : 256) * MIB, freeb = 0, total = 0;
    CK(cudaMemGetInfo(&freeb, &total));
    if (n > freeb / 2)
        n = freeb / 2 / (2 * MIB) * (2 * MIB);
    char *m, *pinned, *pageable = malloc(n);
    CK(cudaMallocManaged((void **)&m, n, cudaMemAttachGlobal));
    fbgemm_advice(m, n);
    memset(m, 3, n);
    CK(cudaMallocHost((void **)&pinned, n));
    memset(pinned, 0, n);
    memset(pageable, 0, n);
    cudaStream_t s;
    CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    if (throughput) {
        double p = copy_gbs(pinned, m, n, s), q = copy_gbs(pageable, m, n, s);
        rowf("FBGEMM table -> pinned, GB/s", "", "%.2f (%zu MiB)", p, n / MIB);
        rowf("FBGEMM table -> pageable, GB/s", "", "%.2f (%zu MiB)", q, n / MIB);
    } else {
        copy_gbs(pinned, m, n, s);
        int loc = 99;
        cudaMemRangeGetAttribute(&loc, sizeof loc, cudaMemRangeAttributeLastPrefetchLocation, m, n);
        double t0 = now_ms();
        volatile unsigned long sum = 0;
        for (size_t i = 0; i < n; i += 4096)
            sum += (unsigned char)m[i];
        rowf("FBGEMM table after a checkpoint copy: last prefetch location, CPU re-read", "-1 = CPU; slow re-read = pages had moved",
             "%d, %.1f ms for %zu MiB", loc, now_ms() - t0, n / MIB);
    }
    cudaFree(m);
    cudaFreeHost(pinned);
    free(pageable);
    return 0;
}

static const struct {
    const char *name;
    int (*fn)(void);
} probes[] = {
    {"ranges", probe_ranges},     {"capacity", probe_capacity}, {"hostfn", probe_hostfn},
    {"attrs", probe_attrs},       {"pageable", probe_pageable}, {"prefetch", probe_prefetch},
};

static int run_one(const char *name)
{
    for (size_t i = 0; i < sizeof probes / sizeof *probes; i++)
        if (!strcmp(name, probes[i].name))
            return probes[i].fn();
    if (!strcmp(name, "residency"))
        return probe_table(0);
    if (!strcmp(name, "throughput"))
        return probe_table(1);
    fprintf(stderr, "usage: uvmchunk-probe [all|ranges|capacity|hostfn|attrs|pageable|prefetch|residency|throughput]\n");
    return 2;
}

/* Each sub-command in a child with a watchdog: the parent never initialises CUDA. */
static int run_child(const char *name)
{
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        alarm(WATCHDOG_S);
        _exit(run_one(name));
    }
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0)
        return 1;
    if (WIFSIGNALED(st)) {
        rowf(name, "the watchdog or a fault ended it", "killed by signal %d%s", WTERMSIG(st),
             WTERMSIG(st) == SIGALRM ? " (hung)" : "");
        return 1;
    }
    return WEXITSTATUS(st);
}

int main(int argc, char **argv)
{
    const char *what = argc > 1 ? argv[1] : "all";
    printf("| fact | value | note |\n|---|---|---|\n");
    rowf("libuvmchunk", "", "%s", getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "libuvmchunk") ? "preloaded" : "not loaded");
    if (strcmp(what, "all"))
        return run_child(what);
    static const char *const all[] = {"attrs", "ranges", "capacity", "hostfn", "pageable", "prefetch", "residency", "throughput"};
    int rc = 0;
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        rc |= run_child(all[i]) != 0;
    return rc;
}
