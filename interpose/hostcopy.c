/* hostcopy.c: the host engine's memcpy: the calling thread copies one part of a block and up to
 * copy_threads - 1 pool threads the others. It never calls CUDA and never runs on a driver thread
 * (host functions may share one thread with NCCL's and FBGEMM's: cuda.h, cuLaunchHostFunc). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uvmc.h"

/* Parts smaller than this are not worth a hand-off to another thread. */
#define UVMC_PART_MIN ((size_t)1 << 20)

struct uvmc_part {
    void *dst;
    const void *src;
    size_t len;
    struct uvmc_block_sync *sync;
    struct uvmc_part *next;
};

/* Lives on the copying thread's stack while it waits for its parts. */
struct uvmc_block_sync {
    pthread_mutex_t lock;
    pthread_cond_t done;
    unsigned remaining;
};

/* One pool per process: workers wait for parts on a queue. Started at first use; after fork the
 * child has none of the parent's threads, so it starts its own (pool_pid tells). */
static pthread_mutex_t uvmc_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t uvmc_pool_work = PTHREAD_COND_INITIALIZER;
static struct uvmc_part *uvmc_pool_head;
static unsigned uvmc_pool_workers;
static unsigned uvmc_pool_cap = UVMC_COPY_THREADS_MAX; /* lowered when a thread cannot start */
static pid_t uvmc_pool_pid;

static void uvmc_part_done(struct uvmc_block_sync *s)
{
    pthread_mutex_lock(&s->lock);
    if (--s->remaining == 0)
        pthread_cond_signal(&s->done);
    pthread_mutex_unlock(&s->lock);
}

static void *uvmc_pool_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&uvmc_pool_lock);
    for (;;) {
        while (!uvmc_pool_head)
            pthread_cond_wait(&uvmc_pool_work, &uvmc_pool_lock);
        struct uvmc_part *p = uvmc_pool_head;
        uvmc_pool_head = p->next;
        pthread_mutex_unlock(&uvmc_pool_lock);
        memcpy(p->dst, p->src, p->len);
        uvmc_part_done(p->sync);
        pthread_mutex_lock(&uvmc_pool_lock);
    }
    return NULL;
}

/* Under uvmc_pool_lock: makes sure copy_threads - 1 workers exist in this process. A worker that
 * cannot start only means fewer threads share the copy. */
static unsigned uvmc_pool_ensure_locked(void)
{
    unsigned want = uvmc_cfg.copy_threads > 0 ? uvmc_cfg.copy_threads - 1 : 0;
    if (want > uvmc_pool_cap)
        want = uvmc_pool_cap;
    if (uvmc_pool_pid != getpid()) {
        uvmc_pool_pid = getpid();
        uvmc_pool_workers = 0;
        uvmc_pool_head = NULL;
    }
    while (uvmc_pool_workers < want) {
        pthread_attr_t attr;
        pthread_t th;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&th, &attr, uvmc_pool_main, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
            uvmc_log(UVMC_LOG_WARN, "cannot start host copy thread %u of %u; fewer threads copy",
                     uvmc_pool_workers + 2, want + 1);
            uvmc_pool_cap = uvmc_pool_workers; /* do not retry (and warn) for every block */
            break;
        }
        uvmc_pool_workers++;
    }
    return uvmc_pool_workers;
}

/* Held across fork() so the child never inherits it locked by a thread that does not exist. */
void uvmc_host_pool_atfork_prepare(void) { pthread_mutex_lock(&uvmc_pool_lock); }
void uvmc_host_pool_atfork_release(void) { pthread_mutex_unlock(&uvmc_pool_lock); }

void uvmc_host_memcpy(void *dst, const void *src, size_t len)
{
    unsigned parts = uvmc_cfg.copy_threads ? uvmc_cfg.copy_threads : 1;
    if (parts > len / UVMC_PART_MIN)
        parts = len / UVMC_PART_MIN ? (unsigned)(len / UVMC_PART_MIN) : 1;
    struct uvmc_part part[UVMC_COPY_THREADS_MAX];
    struct uvmc_block_sync sync = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    size_t step = len;
    if (parts > 1) {
        pthread_mutex_lock(&uvmc_pool_lock);
        unsigned workers = uvmc_pool_ensure_locked();
        if (parts > workers + 1)
            parts = workers + 1;
        step = len / parts;
        sync.remaining = parts - 1;
        for (unsigned i = 1; i < parts; i++) {
            size_t off = step * i;
            part[i] = (struct uvmc_part){(char *)dst + off, (const char *)src + off,
                                         i + 1 == parts ? len - off : step, &sync, uvmc_pool_head};
            uvmc_pool_head = &part[i];
        }
        if (parts > 1)
            pthread_cond_broadcast(&uvmc_pool_work);
        pthread_mutex_unlock(&uvmc_pool_lock);
    }
    memcpy(dst, src, parts > 1 ? step : len);
    pthread_mutex_lock(&sync.lock);
    while (sync.remaining)
        pthread_cond_wait(&sync.done, &sync.lock);
    pthread_mutex_unlock(&sync.lock);
    pthread_mutex_destroy(&sync.lock);
    pthread_cond_destroy(&sync.done);
}
