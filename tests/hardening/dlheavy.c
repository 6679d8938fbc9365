/* dlheavy.c: a program with no CUDA that calls dlopen/dlsym/dlvsym/dladdr heavily from several
 * threads, including lookups of the CUDA names the library exports. Run under LD_PRELOAD by
 * test_nocuda_more.sh: must exit 0, print nothing on stderr, and never get libcuda loaded. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

static const char *const libs[] = {"libm.so.6", "libdl.so.2", "libpthread.so.0", "libc.so.6"};
static const char *const names[] = {"cos", "sin", "dlopen", "pthread_create", "printf", "cudaMemcpy",
                                    "cudaMemcpyAsync", "cuGetProcAddress", "cuMemcpyDtoH_v2", "malloc"};

static void *work(void *arg)
{
    long bad = 0, iters = (long)(size_t)arg;
    for (long i = 0; i < iters; i++) {
        void *h = dlopen(libs[i % 4], RTLD_NOW | (i % 2 ? RTLD_LOCAL : RTLD_GLOBAL));
        if (!h) {
            bad++;
            continue;
        }
        void *f = dlsym(h, names[i % 10]);
        if (f) {
            Dl_info info;
            bad += !dladdr(f, &info);
        }
        (void)dlsym(RTLD_NEXT, names[(i + 3) % 10]);
        (void)dlsym(RTLD_DEFAULT, names[(i + 5) % 10]);
        (void)dlvsym(h, "memcpy", "GLIBC_2.14");
        dlclose(h);
        /* Asking for a CUDA library that is not loaded must not load one. */
        if (dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD) || dlopen("libcudart.so.13", RTLD_LAZY | RTLD_NOLOAD))
            bad++;
    }
    return (void *)(size_t)bad;
}

int main(void)
{
    pthread_t th[4];
    for (int t = 0; t < 4; t++)
        pthread_create(&th[t], NULL, work, (void *)(size_t)20000);
    long bad = 0;
    for (int t = 0; t < 4; t++) {
        void *r;
        pthread_join(th[t], &r);
        bad += (long)(size_t)r;
    }
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "libcuda") || strstr(line, "libcudart"))
            bad++;
    if (f)
        fclose(f);
    printf("dlheavy: %ld problems\n", bad);
    return bad ? 1 : 0;
}
