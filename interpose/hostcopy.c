/* hostcopy.c: the host engine's copy step: a host function, run in stream order by the driver,
 * that memcpy's one block with up to copy_threads threads. It never calls CUDA. */
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

/* Lives on the host function's stack while it waits for its parts. */
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
static atomic_uint uvmc_pool_workers; /* read by host functions without the lock */
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

/* Called by the issuing thread (never by a host function): makes sure copy_threads - 1 workers
 * exist. A worker that cannot start only means fewer threads share the copy. */
void uvmc_host_pool_start(void)
{
    unsigned want = uvmc_cfg.copy_threads > 0 ? uvmc_cfg.copy_threads - 1 : 0;
    pthread_mutex_lock(&uvmc_pool_lock);
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
            break;
        }
        uvmc_pool_workers++;
    }
    pthread_mutex_unlock(&uvmc_pool_lock);
}

/* Held across fork() so the child never inherits it locked by a thread that does not exist. */
void uvmc_host_pool_atfork_prepare(void) { pthread_mutex_lock(&uvmc_pool_lock); }
void uvmc_host_pool_atfork_release(void) { pthread_mutex_unlock(&uvmc_pool_lock); }

struct uvmc_host_job *uvmc_host_job_new(void *dst, const void *src, size_t len)
{
    struct uvmc_host_job *job = malloc(sizeof *job);
    if (job) {
        job->dst = dst;
        job->src = src;
        job->len = len;
    }
    return job;
}

/* The host function. Owns and frees its job. Part 0 is copied on this (driver) thread, the others
 * by the pool; it returns only when every part has landed, so the stream's later work sees them. */
void CUDART_CB uvmc_host_copy_fn(void *arg)
{
    struct uvmc_host_job *job = arg;
    unsigned parts = uvmc_cfg.copy_threads, workers = atomic_load(&uvmc_pool_workers);
    if (parts > workers + 1)
        parts = workers + 1;
    if (parts > job->len / UVMC_PART_MIN)
        parts = job->len / UVMC_PART_MIN ? (unsigned)(job->len / UVMC_PART_MIN) : 1;
    size_t step = job->len / parts;
    struct uvmc_part part[UVMC_COPY_THREADS_MAX];
    struct uvmc_block_sync sync = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, parts - 1};
    if (parts > 1) {
        pthread_mutex_lock(&uvmc_pool_lock);
        for (unsigned i = 1; i < parts; i++) {
            size_t off = step * i;
            part[i] = (struct uvmc_part){(char *)job->dst + off, (const char *)job->src + off,
                                         i + 1 == parts ? job->len - off : step, &sync, uvmc_pool_head};
            uvmc_pool_head = &part[i];
        }
        pthread_cond_broadcast(&uvmc_pool_work);
        pthread_mutex_unlock(&uvmc_pool_lock);
    }
    memcpy(job->dst, job->src, parts > 1 ? step : job->len);
    pthread_mutex_lock(&sync.lock);
    while (sync.remaining)
        pthread_cond_wait(&sync.done, &sync.lock);
    pthread_mutex_unlock(&sync.lock);
    pthread_mutex_destroy(&sync.lock);
    pthread_cond_destroy(&sync.done);
    free(job);
}
