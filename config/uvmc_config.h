/* uvmc_config.h: the immutable configuration of libuvmchunk and its parser.
 * Read once at first use (file, then UVMCHUNK_<KEY> environment overrides); never on a hot path. */
#ifndef UVMC_CONFIG_H
#define UVMC_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#define UVMC_REPORT_MAX 256 /* the report key: longest path + 1 */

enum uvmc_prefetch { UVMC_PREFETCH_NONE = 0, UVMC_PREFETCH_HOST, UVMC_PREFETCH_DEVICE };
/* notice: the package's one line per checkpoint (shown by default; log_level = warn silences it) */
enum uvmc_log_level { UVMC_LOG_ERROR = 0, UVMC_LOG_WARN, UVMC_LOG_NOTICE, UVMC_LOG_INFO, UVMC_LOG_DEBUG };
enum uvmc_engine { UVMC_ENGINE_AUTO = 0, UVMC_ENGINE_HOST, UVMC_ENGINE_COPY };
enum uvmc_async_spill { UVMC_ASYNC_SPILL_AUTO = 0, UVMC_ASYNC_SPILL_REQUIRED, UVMC_ASYNC_SPILL_OFF };
#define UVMC_SPILL_DIR_MAX 4096    /* bytes of async_spill_dir, its NUL included */

struct uvmc_config {
    bool enabled;                 /* false: every call passes through */
    size_t threshold;             /* bytes; copies of at least this size are classified */
    size_t chunk_size;            /* bytes per block of a split copy */
    unsigned depth;               /* blocks in flight at most, 1..64 */
    enum uvmc_prefetch prefetch;  /* where blocks ahead are prefetched */
    enum uvmc_log_level log_level;
    bool stats;                   /* print one summary line at exit */
    size_t pinned_threshold;      /* bytes; pinned requests this large become pageable; 0 = off */
    enum uvmc_engine engine;      /* how split blocks are copied: host memcpy or copy engine */
    unsigned copy_threads;        /* host threads per block of the host engine, 1..64 */
    bool intercept_dlsym;         /* static runtimes expected: warn when libuvmchunk-dlsym.so is missing */
    bool dcp_views;               /* the Python package's automatic zero-copy DCP views (read by Python only) */
    /* dcp.async_save's spill of managed tables to a file-backed mapping (read by Python only) */
    bool async_memory_budget_auto;        /* true: a quarter of MemAvailable at each call */
    size_t async_memory_budget;           /* bytes of managed tensors staged in memory at most */
    char async_spill_dir[UVMC_SPILL_DIR_MAX]; /* "": the checkpoint's folder, else TMPDIR */
    enum uvmc_async_spill async_spill;    /* auto, required (refuse a call that cannot spill), off */
    char report[UVMC_REPORT_MAX]; /* file the package appends one JSON line per checkpoint to; "" = none (Python only) */
    bool stock;                   /* true: everything passes through, the package only measures (uvmchunk-run --stock) */
    /* a save's record through s3fs as a concurrent multipart upload (read by Python only) */
    unsigned s3_concurrency;      /* parts in flight at most, 1..64 */
    size_t s3_part_size;          /* bytes per part, 5MiB..5GiB (S3's multipart limits) */
};

/* Built-in defaults (see config/uvmchunk.conf for the reasoning). */
#define UVMC_DEFAULT_THRESHOLD ((size_t)256 << 20)
#define UVMC_DEFAULT_CHUNK_SIZE ((size_t)64 << 20)
#define UVMC_DEFAULT_DEPTH 4u
#define UVMC_DEPTH_MAX 64u
#define UVMC_DEFAULT_PINNED_THRESHOLD ((size_t)1 << 30)
#define UVMC_DEFAULT_COPY_THREADS 4u
#define UVMC_COPY_THREADS_MAX 64u
#define UVMC_DEFAULT_S3_CONCURRENCY 8u
#define UVMC_DEFAULT_S3_PART_SIZE ((size_t)16 << 20)
#define UVMC_S3_PART_MIN ((size_t)5 << 20)  /* S3 user guide, "Amazon S3 multipart upload limits" */
#define UVMC_S3_PART_MAX ((size_t)5 << 30)

/* Receives one diagnostic: the mistake ("f.conf:3: bad value '-5M' for threshold (...)") and what the
 * library does about it when it runs anyway ("keeping 256MiB", "ignored"). Neither has a newline or
 * the "uvmchunk: " prefix; the library prints "mistake; consequence", a checker only the mistake. */
typedef void (*uvmc_diag_fn)(void *ctx, const char *mistake, const char *consequence);

void uvmc_config_defaults(struct uvmc_config *cfg);

/* Parses a size: decimal digits, optional unit K/KB/KiB/M/MB/MiB/G/GB/GiB/T/TB/TiB (case-insensitive,
 * all powers of 1024, optional blanks before the unit). Returns false on anything else or overflow. */
bool uvmc_parse_size(const char *text, size_t *out);

/* Applies one key/value pair. `where` names the origin for messages ("FILE:LINE" or the environment
 * variable name). On an unknown key or bad value, reports one diagnostic naming the key, what it
 * accepts (or the key it resembles) and the value kept, leaves cfg unchanged and returns false. */
bool uvmc_config_set(struct uvmc_config *cfg, const char *key, const char *value, const char *where,
                     uvmc_diag_fn diag, void *ctx);

/* Reads `key = value` lines from path ('#' starts a comment, blank lines ignored, blanks around key
 * and value trimmed). Returns false (with one diagnostic) when the file cannot be opened; bad lines
 * are reported and skipped. */
bool uvmc_config_parse_file(struct uvmc_config *cfg, const char *path, uvmc_diag_fn diag, void *ctx);

/* The whole load: defaults, then $UVMCHUNK_CONFIG if set (a missing file is reported) else
 * /etc/uvmchunk.conf if present (silently skipped when absent), then each UVMCHUNK_<KEY> found in
 * envp (NULL-terminated "NAME=value" array, as environ). */
void uvmc_config_load(struct uvmc_config *cfg, char *const *envp, uvmc_diag_fn diag, void *ctx);

/* Every key with its value as the example file spells it ("engine=auto threshold=256MiB ..."), one
 * line into out (truncated to outsz). */
void uvmc_config_describe(const struct uvmc_config *cfg, char *out, size_t outsz);

#endif
