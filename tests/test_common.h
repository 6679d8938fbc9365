/* test_common.h: helpers shared by the tests that run under LD_PRELOAD=libuvmchunk.so on the
 * simulated runtime: the library's configuration as the test sees it, and preload checks. */
#ifndef UVMC_TEST_COMMON_H
#define UVMC_TEST_COMMON_H

#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "uvmc_config.h"

/* The configuration the preloaded library reads, parsed from the same environment with the
 * library's own parser, so expectations follow whatever CTest sets. */
static struct uvmc_config test_cfg;

static void test_diag(void *ctx, const char *mistake, const char *consequence)
{
    (void)ctx;
    fprintf(stderr, "test config: %s; %s\n", mistake, consequence);
}

extern char **environ;

static inline void test_load_config(void)
{
    uvmc_config_load(&test_cfg, environ, test_diag, NULL);
}

static inline size_t test_blocks(size_t n)
{
    return n / test_cfg.chunk_size + (n % test_cfg.chunk_size != 0);
}

/* True when `name` as the program sees it is defined by libuvmchunk.so: a test of the library
 * that ran without it would prove nothing, so every suite checks this first. */
static inline bool test_interposed(const char *name)
{
    void *fn = dlsym(RTLD_DEFAULT, name);
    Dl_info info;
    return fn && dladdr(fn, &info) && info.dli_fname && strstr(info.dli_fname, "libuvmchunk.so");
}

/* Blocks of an asynchronous split copy into pinned memory on the copy engine, which returns without
 * waiting: at most min(4 x depth, 24), each a whole number of chunks (engine.c). */
static inline size_t test_queued_blocks(size_t n)
{
    size_t most = 4 * (size_t)test_cfg.depth < 24 ? 4 * (size_t)test_cfg.depth : 24;
    size_t chunk = test_cfg.chunk_size * ((test_blocks(n) + most - 1) / most);
    return n / chunk + (n % chunk != 0);
}

/* A host function that holds its stream until the test opens the gate. */
struct test_gate {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int open;
};
#define TEST_GATE_INIT {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0}

static inline void test_gate_wait(void *arg)
{
    struct test_gate *g = arg;
    pthread_mutex_lock(&g->lock);
    while (!g->open)
        pthread_cond_wait(&g->cond, &g->lock);
    pthread_mutex_unlock(&g->lock);
}

static inline void test_gate_open(struct test_gate *g)
{
    pthread_mutex_lock(&g->lock);
    g->open = 1;
    pthread_cond_broadcast(&g->cond);
    pthread_mutex_unlock(&g->lock);
}

/* Watchdog for a call that must return on its own while the stream behind it waits at a gate
 * the test opens only afterwards: fn(arg) runs on a thread given `seconds`; then the gate opens
 * (a hung call then ends) and the thread is joined. True when fn returned before the deadline. */
struct test_watch {
    void *(*fn)(void *);
    void *arg;
    atomic_int done;
};

static inline void *test_watch_main(void *arg)
{
    struct test_watch *w = arg;
    w->fn(w->arg);
    atomic_store(&w->done, 1);
    return NULL;
}

static inline bool test_returns_before_gate(void *(*fn)(void *), void *arg, double seconds, struct test_gate *gate)
{
    struct test_watch w = {.fn = fn, .arg = arg};
    pthread_t th;
    if (pthread_create(&th, NULL, test_watch_main, &w) != 0)
        return false;
    for (double t = 0; t < seconds && !atomic_load(&w.done); t += 0.01) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    bool returned = atomic_load(&w.done);
    if (gate)
        test_gate_open(gate);
    pthread_join(th, NULL);
    return returned;
}

static inline uint8_t test_pattern(size_t i)
{
    return (uint8_t)((i * 2654435761u) >> 13);
}

#endif
