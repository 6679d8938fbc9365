/* uvmsim.h: control and inspection API of the simulated CUDA runtime (tests only).
 * Exported by the simulated libcuda.so.1; never by the real driver, so only tests call it. */
#ifndef UVMSIM_H
#define UVMSIM_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Location codes used by the prefetch/advice records (same values as CUmemLocationType). */
enum uvmsim_loc { UVMSIM_LOC_INVALID = 0, UVMSIM_LOC_DEVICE = 1, UVMSIM_LOC_HOST = 2 };

struct uvmsim_prefetch {
    const void *ptr;       /* start of the prefetched range */
    size_t count;          /* bytes */
    int loc_type;          /* enum uvmsim_loc */
    int loc_id;            /* device ordinal for UVMSIM_LOC_DEVICE */
    void *stream;          /* stream handle as passed (0, 0x1, 0x2 or a created stream) */
};

/* Zero every counter, the prefetch log and every pending fault; allocations and streams stay. */
void uvmsim_reset(void);

/* Calls made so far to the named runtime or driver function ("cudaMemcpyAsync",
 * "cuMemPrefetchAsync_v2", ...), counted at entry, whether or not they failed. */
unsigned long long uvmsim_calls(const char *fn);

/* Fail the nth call (1 = the next one) of the named function, counted from now, with the given
 * error code (cudaError_t for runtime names, CUresult for driver names). The failing call does
 * nothing else. Several faults may be pending at once. */
void uvmsim_fail_nth(const char *fn, unsigned nth, int error);

/* Bytes moved by copy operations that ran to completion (every kind, every stream). */
unsigned long long uvmsim_bytes_copied(void);
/* Copy operations that ran to completion. */
unsigned long long uvmsim_copies(void);
/* Page-locked bytes currently allocated/registered, and the peak since the last reset. */
unsigned long long uvmsim_pinned_bytes(void);
unsigned long long uvmsim_pinned_peak(void);
/* Live streams and events created by the program (not counting the two default streams). */
unsigned long long uvmsim_live_streams(void);
unsigned long long uvmsim_live_events(void);

/* Copy the prefetch log (oldest first) into out[0..max); returns how many were logged in all. */
size_t uvmsim_prefetch_log(struct uvmsim_prefetch *out, size_t max);

/* Current advice on the 2 MiB-aligned managed page holding ptr: for CU_MEM_ADVISE_SET_PREFERRED_LOCATION
 * returns the location type (0 when unset); for CU_MEM_ADVISE_SET_ACCESSED_BY 1 when any device was
 * set, else 0; for CU_MEM_ADVISE_SET_READ_MOSTLY 1 or 0. Returns -1 when ptr is not managed. */
int uvmsim_advice(const void *ptr, int advice);

/* Every queued operation sleeps this many microseconds before it runs (0 = none), so a test that
 * reads a destination before synchronizing sees stale bytes. */
void uvmsim_set_op_delay_us(unsigned us);

/* Fidelity counters by name (README.md, "Behaviour switches"): "host_functions" (enqueued),
 * "max_outstanding" (most ops queued or running on one stream), "migrations_to_host",
 * "migrations_to_device" (2 MiB blocks moved), "cma_violations" (CPU touches of managed memory while
 * device work ran, with UVMSIM_CMA=0), "pinned_peak_bytes", "bytes_copied", "sticky_error",
 * "kernels_skipped", "kernels_refused" (launches that failed as not simulated; neither reset). Reset by
 * uvmsim_reset (which also clears a sticky error). Unknown names read 0. */
unsigned long long uvmsim_stat(const char *key);

/* Kernel launches that ran no device code under UVMSIM_KERNELS=noop (PyTorch's fill kernels, whose
 * value was written, included), of kernels whose demangled or mangled name contains `pattern`;
 * NULL: all of them. */
unsigned long long uvmsim_kernels_skipped(const char *pattern);

/* Where the 2 MiB block holding ptr lives: UVMSIM_LOC_HOST or UVMSIM_LOC_DEVICE; -1 when not managed. */
int uvmsim_residency(const void *ptr);

/* What a kernel that dereferences [ptr, ptr+n) would do: 0 (CUDA_SUCCESS) for device, managed, pinned
 * and registered memory (a managed block without an accessed-by mapping moves to the device); for
 * pageable memory CUDA_ERROR_ILLEGAL_ADDRESS, which stays: every later call that needs the context
 * fails with it and host functions no longer run, until uvmsim_reset. */
int uvmsim_device_access(const void *ptr, size_t n);

/* The flags the page-locked range holding ptr was allocated (cuMemHostAlloc) or registered
 * (cuMemHostRegister) with; -1 when ptr is not page-locked. */
int uvmsim_host_flags(const void *ptr);

#ifdef __cplusplus
}
#endif
#endif
