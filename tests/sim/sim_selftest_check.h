/* sim_selftest_check.h: the simulator selftests' checks; each failure prints where and counts in
 * g_fail, so one run reports every broken behaviour. */
#ifndef SIM_SELFTEST_CHECK_H
#define SIM_SELFTEST_CHECK_H

#include <stdio.h>

static int g_fail;
#define CHECK(c)                                                                                       \
    do {                                                                                               \
        if (!(c)) {                                                                                    \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c);                      \
            g_fail++;                                                                                  \
        }                                                                                              \
    } while (0)
#define EQ(a, b)                                                                                       \
    do {                                                                                               \
        long long a_ = (long long)(a), b_ = (long long)(b);                                            \
        if (a_ != b_) {                                                                                \
            fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__, __LINE__, #a, a_, #b, b_); \
            g_fail++;                                                                                  \
        }                                                                                              \
    } while (0)

#endif
