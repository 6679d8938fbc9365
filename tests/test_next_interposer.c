/* test_next_interposer.c: another interposer preloaded after libuvmchunk, in the way libfaketime
 * and most others work: its getpid() finds the real one with dlsym(RTLD_NEXT). Through our dlsym,
 * RTLD_NEXT must still mean "after this library", or getpid() would call itself forever. */
#include <dlfcn.h>
#include <sys/types.h>

__attribute__((visibility("default"))) pid_t getpid(void)
{
    pid_t (*next)(void) = (pid_t (*)(void))dlsym(RTLD_NEXT, "getpid");
    return next && next != getpid ? next() : (pid_t)-1;
}
