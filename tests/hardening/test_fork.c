/* test_fork.c: a process that has made intercepted copies (library initialised, driver resolved,
 * copies in flight on other threads) forks; each child's copies, below and above the threshold and
 * through every entry point, must return within 5 s exactly what they return without the library.
 *
 *   test_fork            runs preloaded: computes the children's results, then re-executes itself
 *                        without LD_PRELOAD ("reference") and compares the two lines.
 *   test_fork reference  the same workload; prints the results line only.
 * A pinned buffer above pinned_threshold (lazy with the library) is queried, copied into and freed
 * in the child too. */
#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harden.h"
#include "uvmsim.h"

extern __typeof__(cudaMemcpy) cudaMemcpy_ptds;
extern __typeof__(cudaMemcpyAsync) cudaMemcpyAsync_ptsz;

#define FORKS 8
#define CHILD_SECONDS 5

static uint8_t *managed, *pinned, *lazy; /* lazy: a pinned request above pinned_threshold */
static size_t big, small;
static atomic_bool stop;
static cudaStream_t bg_stream;

/* Keeps split copies (and so the library's own calls and the simulator's locks) busy while the
 * main thread forks. */
static void *background(void *arg)
{
    uint8_t *dst = arg;
    while (!atomic_load(&stop)) {
        cudaMemcpyAsync(dst, managed, big, cudaMemcpyDeviceToHost, bg_stream);
        cudaStreamSynchronize(bg_stream);
    }
    return NULL;
}

/* In the child: every entry point, small and large; the return codes as one line on fd. */
static void child(int fd)
{
    cudaStream_t s = 0;
    char line[256];
    struct cudaPointerAttributes attr;
    unsigned flags = 0;
    int n = snprintf(line, sizeof line, "%d %d %d %d %d %d %d %d %d %d %d",
                     (int)cudaPointerGetAttributes(&attr, lazy), (int)cudaHostGetFlags(&flags, lazy),
                     (int)cudaMemcpyAsync(lazy, managed, small, cudaMemcpyDeviceToHost, 0), (int)cudaFreeHost(lazy),
                     (int)cudaMemcpyAsync(pinned, managed, small, cudaMemcpyDeviceToHost, 0),
                     (int)cudaMemcpyAsync(pinned, managed, big, cudaMemcpyDeviceToHost, 0),
                     (int)cudaMemcpyAsync(pinned, managed, big, cudaMemcpyDeviceToHost, bg_stream),
                     (int)cudaMemcpy(pinned, managed, big, cudaMemcpyDeviceToHost),
                     (int)cudaMemcpy_ptds(pinned, managed, big, cudaMemcpyDefault),
                     (int)cudaMemcpyAsync_ptsz(pinned, managed, big, cudaMemcpyDeviceToHost, s),
                     (int)cudaStreamSynchronize(0));
    ssize_t w = write(fd, line, (size_t)n);
    _exit(w == n ? 0 : 3);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Forks once; returns the child's line, or "timeout"/"crash:N" when it hung or died. */
static void fork_once(char *out, size_t outsz)
{
    int fd[2];
    if (pipe(fd)) {
        snprintf(out, outsz, "pipe failed");
        return;
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        alarm(CHILD_SECONDS * 2); /* never outlive the test, whatever happens */
        child(fd[1]);
    }
    close(fd[1]);
    double deadline = now_s() + CHILD_SECONDS;
    int st = 0;
    pid_t r;
    while ((r = waitpid(pid, &st, WNOHANG)) == 0 && now_s() < deadline)
        usleep(2000);
    if (r == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
        snprintf(out, outsz, "timeout");
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(out, outsz, "crash:%d", WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
    } else {
        ssize_t n = read(fd[0], out, outsz - 1);
        out[n > 0 ? n : 0] = 0;
    }
    close(fd[0]);
}

/* The workload: copies in the parent, background copies running, FORKS forks. Prints the
 * children's results, one line (they must all agree). */
static int workload(char *result, size_t resultsz)
{
    big = 4 * test_cfg.chunk_size + 17;
    if (big < test_cfg.threshold)
        big = test_cfg.threshold + 17;
    small = 4096;
    uint8_t *bg_dst;
    if (cudaMallocManaged((void **)&managed, big, cudaMemAttachGlobal) || cudaMallocHost((void **)&pinned, big) ||
        cudaMallocHost((void **)&lazy, (size_t)4 << 20) ||
        cudaMallocHost((void **)&bg_dst, big) || cudaStreamCreateWithFlags(&bg_stream, cudaStreamNonBlocking))
        return -1;
    for (size_t i = 0; i < big; i++)
        managed[i] = test_pattern(i);
    /* Intercepted copies in the parent first: init, resolution and events have happened. */
    if (cudaMemcpyAsync(pinned, managed, big, cudaMemcpyDeviceToHost, 0) || cudaDeviceSynchronize())
        return -1;
    pthread_t th;
    pthread_create(&th, NULL, background, bg_dst);
    char first[256] = "", line[256];
    int disagree = 0;
    bool hung = false;
    for (int k = 0; k < FORKS; k++) {
        usleep(1000 * (unsigned)(k % 3));
        fork_once(line, sizeof line);
        if (!strcmp(line, "timeout") || !strncmp(line, "crash", 5)) { /* the worst outcome is the result */
            snprintf(result, resultsz, "%s", line);
            hung = true;
            continue;
        }
        if (!*first)
            snprintf(first, sizeof first, "%s", line);
        else if (strcmp(first, line))
            disagree++, fprintf(stderr, "fork %d: child gave \"%s\", the first gave \"%s\"\n", k, line, first);
    }
    atomic_store(&stop, true);
    pthread_join(th, NULL);
    /* The parent is unharmed. */
    memset(pinned, 0, big);
    cudaError_t rc = cudaMemcpy(pinned, managed, big, cudaMemcpyDeviceToHost);
    int bad = rc != cudaSuccess || memcmp(pinned, managed, big) != 0;
    if (!hung)
        snprintf(result, resultsz, "%s", disagree ? "children disagree" : first);
    return bad ? -2 : 0;
}

int main(int argc, char **argv)
{
    bool reference = argc > 1 && !strcmp(argv[1], "reference");
    char result[256];
    if (reference) {
        test_load_config();
        int rc = workload(result, sizeof result);
        printf("%s\n", result);
        return rc ? 1 : 0;
    }
    harden_require_preload("fork");
    int rc = workload(result, sizeof result);
    CHECK(rc != -1, "setup failed");
    CHECK(rc != -2, "the parent's copy after the forks failed");
    CHECK(strcmp(result, "timeout") != 0, "a child hung for %d s", CHILD_SECONDS);
    CHECK(strncmp(result, "crash", 5) != 0, "a child died: %s", result);

    /* The same without the library. */
    char ref[256] = "", cmd[4096];
    snprintf(cmd, sizeof cmd, "env -u LD_PRELOAD '%s' reference", argv[0]);
    FILE *p = popen(cmd, "r");
    if (p && fgets(ref, sizeof ref, p))
        ref[strcspn(ref, "\n")] = 0;
    int st = p ? pclose(p) : -1;
    CHECK(st == 0, "the reference run failed (%d)", st);
    CHECK(!strcmp(result, ref), "child with the library: \"%s\", without: \"%s\"", result, ref);
    printf("fork: %d children each returned \"%s\" (without the library: \"%s\")\n", FORKS, result, ref);
    return harden_done("fork");
}
