/* harden.h: the small assert layer of the hardening suites (plain C, no Check): CHECK counts a
 * failure and says where, so one run reports every broken case; harden_done() sets the exit code. */
#ifndef UVMC_HARDEN_H
#define UVMC_HARDEN_H

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_common.h"

static atomic_int harden_failures, harden_checks;

#define CHECK(cond, ...)                                                         \
    do {                                                                         \
        atomic_fetch_add(&harden_checks, 1);                                     \
        if (!(cond)) {                                                           \
            atomic_fetch_add(&harden_failures, 1);                               \
            fprintf(stderr, "%s:%d: FAIL: %s: ", __FILE__, __LINE__, #cond);     \
            fprintf(stderr, __VA_ARGS__);                                        \
            fputc('\n', stderr);                                                 \
        }                                                                        \
    } while (0)

/* Every suite first proves the library is the one answering, else it would prove nothing. */
static inline void harden_require_preload(const char *suite)
{
    test_load_config();
    if (!test_interposed("cudaMemcpyAsync")) {
        fprintf(stderr, "%s: libuvmchunk.so is not preloaded\n", suite);
        exit(1);
    }
}

static inline int harden_done(const char *suite)
{
    int f = atomic_load(&harden_failures), c = atomic_load(&harden_checks);
    printf("%s: %d checks, %d failed\n", suite, c, f);
    return f ? 1 : 0;
}

#endif
