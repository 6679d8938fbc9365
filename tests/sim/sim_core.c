/* sim_core.c: the simulated driver's shared state and process plumbing: the call counters and fault
 * table, the runtimes' code ranges (uncounted calls), the global lock, fork handling, the unsimulated-call stub. */
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

/* ------------------------------------------------------------------ counters and faults */

struct counter *sim_counters;
pthread_mutex_t sim_cnt_mu = PTHREAD_MUTEX_INITIALIZER;

struct counter *sim_counter_get(const char *fn) {
    struct counter *c;
    HASH_FIND_STR(sim_counters, fn, c);
    if (!c) {
        c = calloc(1, sizeof *c);
        if (!c) return NULL;
        c->name = strdup(fn);
        if (!c->name) { free(c); return NULL; }
        HASH_ADD_KEYPTR(hh, sim_counters, c->name, strlen(c->name), c);
    }
    return c;
}

/* Set in a child forked from a process that had CUDA state: like the real driver, CUDA is unusable
 * there (every call fails with CUDA_ERROR_NOT_INITIALIZED, the runtime with cudaErrorInitializationError). */
int sim_child_poisoned;

/* Count a call by its exported name; returns the injected error (0 = none). */
unsigned uvmsim_hook_enter(const char *fn) {
    unsigned err = 0;
    if (sim_child_poisoned) return CUDA_ERROR_NOT_INITIALIZED;
    pthread_mutex_lock(&sim_cnt_mu);
    struct counter *c = sim_counter_get(fn);
    if (c) {
        c->calls++;
        for (struct fault **pp = &c->faults; *pp; pp = &(*pp)->next) {
            if ((*pp)->at == c->calls) {
                struct fault *f = *pp;
                err = (unsigned)f->error;
                *pp = f->next;
                free(f);
                break;
            }
        }
    }
    pthread_mutex_unlock(&sim_cnt_mu);
    return err;
}

/* Code ranges of the simulated runtimes loaded in this process. Driver calls made from inside a
 * runtime are its private business (the real libcudart reaches the driver through private tables):
 * they are neither counted nor faulted, so counters show only what the program and a preloaded
 * library called. */
struct code_range { uintptr_t lo, hi; };
static struct code_range g_rt_ranges[16];
static atomic_int g_n_rt_ranges;
static pthread_mutex_t g_rt_mu = PTHREAD_MUTEX_INITIALIZER;

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    uintptr_t a = (uintptr_t)arg;
    int hit = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (a >= lo && a < hi) hit = 1;
    }
    if (!hit) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        int n = atomic_load(&g_n_rt_ranges);
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) || n >= 16) continue;
        g_rt_ranges[n].lo = info->dlpi_addr + ph->p_vaddr;
        g_rt_ranges[n].hi = g_rt_ranges[n].lo + ph->p_memsz;
        atomic_store(&g_n_rt_ranges, n + 1);
    }
    return 1;
}

void uvmsim_rt_register(const void *addr) {
    pthread_mutex_lock(&g_rt_mu);
    dl_iterate_phdr(phdr_cb, (void *)addr);
    pthread_mutex_unlock(&g_rt_mu);
}

int sim_from_runtime(const void *ra) {
    int n = atomic_load(&g_n_rt_ranges);
    for (int i = 0; i < n; i++)
        if ((uintptr_t)ra >= g_rt_ranges[i].lo && (uintptr_t)ra < g_rt_ranges[i].hi) return 1;
    return 0;
}

/* ------------------------------------------------------------------ global state */

pthread_mutex_t sim_mu = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t sim_cv = PTHREAD_COND_INITIALIZER;

atomic_uint sim_op_delay_us;
unsigned long long sim_bytes, sim_copies, sim_pinned, sim_pinned_peak, sim_live_streams, sim_live_events;
struct uvmsim_prefetch *sim_pf_log;
size_t sim_pf_len, sim_pf_cap;

struct sim_ctx sim_primary[SIM_MAX_DEVICES];
__thread CUcontext sim_tl_ctx;

int sim_cur_dev(void) { return sim_tl_ctx ? ((struct sim_ctx *)sim_tl_ctx)->dev : 0; }
int sim_valid_dev(int d) { return d >= 0 && d < sim_sw.devices; }

/* ------------------------------------------------------------------ process lifecycle */

static void fork_prepare(void) { pthread_mutex_lock(&sim_cnt_mu); pthread_mutex_lock(&sim_mu); }
static void fork_parent(void) { pthread_mutex_unlock(&sim_mu); pthread_mutex_unlock(&sim_cnt_mu); }
static void fork_child(void) {
    if (sim_streams_all || sim_nallocs) sim_child_poisoned = 1; /* no worker threads exist here */
    pthread_mutex_unlock(&sim_mu);
    pthread_mutex_unlock(&sim_cnt_mu);
}

__attribute__((constructor)) static void sim_driver_init(void) {
    sim_switches_load();
    for (int d = 0; d < SIM_MAX_DEVICES; d++) sim_primary[d] = (struct sim_ctx){ 0x43545831, d, 0 };
    pthread_key_create(&sim_ptds_key, sim_ptds_thread_exit);
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

/* Called by the generated stubs for every driver export not defined here (libcuda_exports.txt). */
__attribute__((visibility("hidden"))) CUresult uvmsim_drv_not_simulated(const char *name, atomic_int *once) {
    if (!atomic_exchange(once, 1)) fprintf(stderr, "uvmsim: %s is not simulated\n", name);
    if (sim_child_poisoned) return CUDA_ERROR_NOT_INITIALIZED;
    unsigned f = uvmsim_hook_enter(name);
    return f ? (CUresult)f : CUDA_ERROR_NOT_SUPPORTED;
}
