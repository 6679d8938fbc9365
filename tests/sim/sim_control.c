/* sim_control.c: the test control API of uvmsim.h: call counters and injected faults, reset, byte,
 * copy, pinned and object counts, the prefetch log, advice lookups and the per-op delay. */
#include <stdlib.h>

#include "sim_internal.h"

unsigned long long uvmsim_calls(const char *fn) {
    unsigned long long n = 0;
    pthread_mutex_lock(&sim_cnt_mu);
    struct counter *c;
    HASH_FIND_STR(sim_counters, fn, c);
    if (c) n = c->calls;
    pthread_mutex_unlock(&sim_cnt_mu);
    return n;
}

void uvmsim_fail_nth(const char *fn, unsigned nth, int error) {
    if (!fn || nth == 0) return;
    pthread_mutex_lock(&sim_cnt_mu);
    struct counter *c = sim_counter_get(fn);
    struct fault *f = c ? malloc(sizeof *f) : NULL;
    if (f) {
        f->at = c->calls + nth;
        f->error = error;
        f->next = c->faults;
        c->faults = f;
    }
    pthread_mutex_unlock(&sim_cnt_mu);
}

void uvmsim_reset(void) {
    pthread_mutex_lock(&sim_cnt_mu);
    struct counter *c, *tmp;
    HASH_ITER(hh, sim_counters, c, tmp) {
        c->calls = 0;
        while (c->faults) {
            struct fault *f = c->faults;
            c->faults = f->next;
            free(f);
        }
    }
    pthread_mutex_unlock(&sim_cnt_mu);
    pthread_mutex_lock(&sim_mu);
    sim_bytes = sim_copies = 0;
    sim_pf_len = 0;
    sim_pinned_peak = sim_pinned;
    sim_hostfns = sim_max_outstanding = 0;
    atomic_store(&sim_mig_to_host, 0);
    atomic_store(&sim_mig_to_device, 0);
    atomic_store(&sim_cma_violations, 0);
    atomic_store(&sim_sticky, 0);
    pthread_mutex_unlock(&sim_mu);
}

#define GETTER(fn, var)                                                                                \
    unsigned long long fn(void) {                                                                      \
        pthread_mutex_lock(&sim_mu);                                                                     \
        unsigned long long v_ = var;                                                                   \
        pthread_mutex_unlock(&sim_mu);                                                                   \
        return v_;                                                                                     \
    }
GETTER(uvmsim_bytes_copied, sim_bytes)
GETTER(uvmsim_copies, sim_copies)
GETTER(uvmsim_pinned_bytes, sim_pinned)
GETTER(uvmsim_pinned_peak, sim_pinned_peak)
GETTER(uvmsim_live_streams, sim_live_streams)
GETTER(uvmsim_live_events, sim_live_events)

size_t uvmsim_prefetch_log(struct uvmsim_prefetch *out, size_t max) {
    pthread_mutex_lock(&sim_mu);
    size_t n = sim_pf_len;
    for (size_t i = 0; i < n && i < max && out; i++) out[i] = sim_pf_log[i];
    pthread_mutex_unlock(&sim_mu);
    return n;
}

int uvmsim_advice(const void *ptr, int advice) {
    int r = -1;
    pthread_mutex_lock(&sim_mu);
    struct alloc *a = sim_find_alloc_locked((uintptr_t)ptr);
    if (a && a->kind == A_MANAGED) {
        struct page_advice *pa = &a->adv[ADV_FIRST(a, ptr)];
        switch (advice) {
        case CU_MEM_ADVISE_SET_PREFERRED_LOCATION: r = pa->pref_type; break;
        case CU_MEM_ADVISE_SET_ACCESSED_BY: r = pa->accessed_by != 0; break;
        case CU_MEM_ADVISE_SET_READ_MOSTLY: r = pa->read_mostly; break;
        default: r = -1; break;
        }
    }
    pthread_mutex_unlock(&sim_mu);
    return r;
}

void uvmsim_set_op_delay_us(unsigned us) { atomic_store(&sim_op_delay_us, us); }
