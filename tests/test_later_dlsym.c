/* test_later_dlsym.c: stands in for an object loaded after libuvmchunk that exports its own dlsym,
 * as HAMi-core's libvgpu.so does through /etc/ld.so.preload to enforce GPU memory limits. It answers
 * one name of its own (so its answer reaching a program proves its dlsym was called) and forwards
 * every other lookup to glibc's. */
#include <dlfcn.h>
#include <string.h>

__attribute__((visibility("default"))) void *dlsym(void *handle, const char *name)
{
    static int marker;
    static void *(*real)(void *, const char *);
    if (!strcmp(name, "uvmchunk_later_dlsym_marker"))
        return &marker;
    if (!real)
        *(void **)&real = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (!real)
        *(void **)&real = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
    return real ? real(handle, name) : NULL;
}
