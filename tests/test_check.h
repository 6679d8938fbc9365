/* test_check.h: what the Check suites run under LD_PRELOAD=libuvmchunk.so share: the preload check,
 * a test case with its fixture, and running the suite in this process. */
#ifndef UVMC_TEST_CHECK_H
#define UVMC_TEST_CHECK_H

#include <check.h>

#include "test_common.h"

/* False, after saying so, unless every name of the NULL-terminated list is libuvmchunk's: a test of
 * the library that ran without it would prove nothing. */
static inline bool test_require_preload(const char *prog, const char *const names[])
{
    for (size_t i = 0; names[i]; i++)
        if (!test_interposed(names[i])) {
            fprintf(stderr, "%s: libuvmchunk.so is not preloaded (%s is not its); these tests would prove nothing\n",
                    prog, names[i]);
            return false;
        }
    return true;
}

/* A test case with a checked fixture and a 120 s timeout per test. */
static inline TCase *test_case(const char *name, void (*setup)(void), void (*teardown)(void))
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    return tc;
}

/* Runs the one case as a suite of its name, in this process (the simulator's stream threads do not
 * survive fork); the exit status. */
static inline int test_run(TCase *tc, const char *name)
{
    Suite *s = suite_create(name);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}

#endif
