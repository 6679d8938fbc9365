/* demo_compare.c: uvmchunk-demo --compare: the checkpoint sequence run twice in child processes,
 * without and with libuvmchunk, and one side-by-side table of host memory, page-locked bytes and
 * seconds. Each child is this program with --report; the parent makes no CUDA call. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "demo.h"
#include "uvmc_units.h"

struct report {
    int ran;
    long extra_kib;   /* peak resident host memory above the state before the destination */
    long long locked; /* page-locked bytes at peak (simulator), -1 where not measurable */
    double seconds;
    int verified;
    char said[1024]; /* the library's own 'uvmchunk:' lines (the stats line): shown after the table */
};

/* LD_PRELOAD as a list (colon- or blank-separated), without libuvmchunk, and with it first when
 * `with` is set (the copy next to this program). */
static void preload_for(int with, const char *self, char *out, size_t outsz)
{
    const char *cur = getenv("LD_PRELOAD");
    char list[4096] = "", lib[PATH_MAX + 32] = "";
    if (with) {
        const char *slash = strrchr(self, '/');
        snprintf(lib, sizeof lib, "%.*s/libuvmchunk.so", slash ? (int)(slash - self) : 1, slash ? self : ".");
    }
    if (cur) {
        char copy[4096];
        snprintf(copy, sizeof copy, "%s", cur);
        for (char *save = NULL, *tok = strtok_r(copy, ": \t", &save); tok; tok = strtok_r(NULL, ": \t", &save))
            if (!strstr(tok, "libuvmchunk")) {
                size_t len = strlen(list);
                snprintf(list + len, sizeof list - len, "%s%s", len ? " " : "", tok);
            }
    }
    snprintf(out, outsz, "%s%s%s", lib, *lib && *list ? " " : "", list);
}

static struct report run_child(const char *self, const char *size_arg, int with)
{
    struct report r = {0};
    int fd[2];
    if (pipe(fd) != 0)
        return r;
    pid_t pid = fork();
    if (pid == 0) {
        char preload[8192];
        preload_for(with, self, preload, sizeof preload);
        if (*preload)
            setenv("LD_PRELOAD", preload, 1);
        else
            unsetenv("LD_PRELOAD");
        dup2(fd[1], STDOUT_FILENO);
        dup2(fd[1], STDERR_FILENO); /* the library's lines too: they belong after the table */
        close(fd[0]);
        close(fd[1]);
        execl(self, self, "--size", size_arg, "--report", (char *)NULL);
        _exit(127);
    }
    close(fd[1]);
    char buf[16384];
    size_t n = 0;
    ssize_t k;
    while (pid > 0 && n + 1 < sizeof buf && (k = read(fd[0], buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)k;
    buf[n] = '\0';
    close(fd[0]);
    int st = 0;
    if (pid < 0 || waitpid(pid, &st, 0) < 0)
        return r;
    const char *line = strstr(buf, "REPORT ");
    r.ran = line && sscanf(line, "REPORT extra_kib=%ld locked=%lld seconds=%lf verified=%d", &r.extra_kib, &r.locked,
                           &r.seconds, &r.verified) == 4;
    if (!r.ran || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fprintf(stderr, "uvmchunk-demo: the run %s the library failed:\n%s\n", with ? "with" : "without", buf);
    for (char *save = NULL, *l = strtok_r(buf, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        if (strncmp(l, "uvmchunk: ", 10) == 0) {
            size_t used = strlen(r.said);
            snprintf(r.said + used, sizeof r.said - used, "%s\n", l);
        }
    return r;
}

static void mib(char *out, size_t outsz, long long bytes)
{
    if (bytes < 0)
        snprintf(out, outsz, "n/a (GPU)");
    else
        snprintf(out, outsz, "%s", uvmc_bytes_text((unsigned long long)bytes).s);
}

int uvmc_demo_compare(const char *size_arg, size_t size)
{
    char self[PATH_MAX];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0)
        return 1;
    self[len] = '\0';
    printf("comparing the checkpoint sequence of a %s managed table (pinned destination %s), "
           "without and with libuvmchunk, each in its own process\n",
           uvmc_bytes_text(size).s, uvmc_bytes_text(uvmc_next_pow2(size)).s);
    struct report r[2] = {run_child(self, size_arg, 0), run_child(self, size_arg, 1)};
    if (!r[0].ran || !r[1].ran)
        return 1;
    char a[32], b[32];
    printf("| %-34s | %-20s | %-20s |\n", "", "without libuvmchunk", "with libuvmchunk");
    printf("|%s|%s|%s|\n", "------------------------------------", "----------------------", "----------------------");
    mib(a, sizeof a, r[0].extra_kib > 0 ? (long long)r[0].extra_kib * 1024 : 0);
    mib(b, sizeof b, r[1].extra_kib > 0 ? (long long)r[1].extra_kib * 1024 : 0);
    printf("| %-34s | %-20s | %-20s |\n", "peak host memory above the table", a, b);
    mib(a, sizeof a, r[0].locked);
    mib(b, sizeof b, r[1].locked);
    printf("| %-34s | %-20s | %-20s |\n", "page-locked memory at peak", a, b);
    snprintf(a, sizeof a, "%.3f", r[0].seconds);
    snprintf(b, sizeof b, "%.3f", r[1].seconds);
    printf("| %-34s | %-20s | %-20s |\n", "seconds of the copy", a, b);
    printf("| %-34s | %-20s | %-20s |\n", "every byte verified", r[0].verified ? "yes" : "NO",
           r[1].verified ? "yes" : "NO");
    if (r[1].extra_kib > 0)
        printf("host memory ratio without/with: %.2fx\n", (double)r[0].extra_kib / (double)r[1].extra_kib);
    fputs(r[0].said, stdout);
    fputs(r[1].said, stdout);
    return r[0].verified && r[1].verified ? 0 : 1;
}
