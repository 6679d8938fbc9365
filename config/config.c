/* config.c: turns uvmchunk.conf and UVMCHUNK_<KEY> environment overrides into struct uvmc_config.
 * Owns the key table, the value syntax (sizes, booleans, enums) and the one-line diagnostics. */
#include "uvmc_config.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define UVMC_LINE_MAX 4095u          /* longest accepted line, without its line ending */
#define UVMC_SHOWN_VALUE_MAX 80      /* a bad value is quoted up to this many characters */
#define UVMC_CHUNK_MIN ((size_t)4096)
#define UVMC_CHUNK_MAX ((size_t)1 << 40)
/* The UVM driver's VA block (open-gpu-kernel-modules, uvm_va_block_types.h: 2MiB), also the huge
 * page size (Documentation/admin-guide/mm/transhuge.rst). A chunk_size that is a multiple of it or
 * divides it keeps every block of a split copy from a 2MiB-aligned managed allocation on whole 2MiB
 * units, so no unit is migrated, prefetched or faulted in by two blocks (interpose/engine.c). */
#define UVMC_CHUNK_UNIT ((size_t)2 << 20)
#define UVMC_ENV_PREFIX "UVMCHUNK_"
#define UVMC_ENV_CONFIG "UVMCHUNK_CONFIG"
#define UVMC_ENV_LIB "UVMCHUNK_LIB" /* read by uvmchunk-run, not a key */
#define UVMC_FILE_MAX ((off_t)1 << 20) /* a config file is a few lines; refuse megabytes */
#define UVMC_SYSTEM_CONFIG "/etc/uvmchunk.conf"

enum uvmc_key_kind { UVMC_KEY_BOOL, UVMC_KEY_SIZE, UVMC_KEY_COUNT, UVMC_KEY_PREFETCH, UVMC_KEY_LOG_LEVEL, UVMC_KEY_ENGINE, UVMC_KEY_PATH };

enum uvmc_key_id {
    UVMC_K_ENABLED,
    UVMC_K_THRESHOLD,
    UVMC_K_CHUNK_SIZE,
    UVMC_K_DEPTH,
    UVMC_K_PREFETCH,
    UVMC_K_LOG_LEVEL,
    UVMC_K_STATS,
    UVMC_K_PINNED_THRESHOLD,
    UVMC_K_ENGINE,
    UVMC_K_COPY_THREADS,
    UVMC_K_INTERCEPT_DLSYM,
    UVMC_K_DCP_VIEWS,
    UVMC_K_ASYNC_MEMORY_BUDGET,
    UVMC_K_ASYNC_SPILL_DIR,
    UVMC_K_ASYNC_SPILL,
    UVMC_K_REPORT,
    UVMC_K_STOCK,
    UVMC_K_S3_CONCURRENCY,
    UVMC_K_S3_PART_SIZE,
};

struct uvmc_key {
    const char *name;
    enum uvmc_key_id id;
    enum uvmc_key_kind kind;
    const char *hint; /* appended to a bad-value message, "" for none */
};

static const struct uvmc_key uvmc_keys[] = {
    {"enabled", UVMC_K_ENABLED, UVMC_KEY_BOOL, " (on|off)"},
    {"threshold", UVMC_K_THRESHOLD, UVMC_KEY_SIZE, " (a whole number of bytes or of a unit, at least 1 byte, e.g. 256MiB or 1536M)"},
    {"chunk_size", UVMC_K_CHUNK_SIZE, UVMC_KEY_SIZE, " (a whole number of bytes or of a unit in 4KiB..1TiB, e.g. 64MiB)"},
    {"depth", UVMC_K_DEPTH, UVMC_KEY_COUNT, " (1..64)"},
    {"prefetch", UVMC_K_PREFETCH, UVMC_KEY_PREFETCH, " (none|host|device)"},
    {"log_level", UVMC_K_LOG_LEVEL, UVMC_KEY_LOG_LEVEL, " (error|warn|notice|info|debug)"},
    {"stats", UVMC_K_STATS, UVMC_KEY_BOOL, " (on|off)"},
    {"pinned_threshold", UVMC_K_PINNED_THRESHOLD, UVMC_KEY_SIZE, " (a whole number of bytes or of a unit, e.g. 1GiB or 1536M; 0 = off)"},
    {"engine", UVMC_K_ENGINE, UVMC_KEY_ENGINE, " (auto|host|copy)"},
    {"copy_threads", UVMC_K_COPY_THREADS, UVMC_KEY_COUNT, " (1..64)"},
    {"intercept_dlsym", UVMC_K_INTERCEPT_DLSYM, UVMC_KEY_BOOL, " (on|off)"},
    {"dcp_views", UVMC_K_DCP_VIEWS, UVMC_KEY_BOOL, " (on|off)"},
    /* read by the Python package; parsed by uvmc_set_async (the kind is unused) */
    {"async_memory_budget", UVMC_K_ASYNC_MEMORY_BUDGET, UVMC_KEY_SIZE, " (auto or a size, e.g. 8GiB)"},
    {"async_spill_dir", UVMC_K_ASYNC_SPILL_DIR, UVMC_KEY_SIZE, " (a folder, at most 4095 bytes, no control characters; empty: automatic)"},
    {"async_spill", UVMC_K_ASYNC_SPILL, UVMC_KEY_SIZE, " (auto|required|off)"},
    {"report", UVMC_K_REPORT, UVMC_KEY_PATH, " (a file path without blanks, at most 255 bytes; empty = none)"},
    {"stock", UVMC_K_STOCK, UVMC_KEY_BOOL, " (on|off)"},
    /* read by the Python package: a save's concurrent multipart upload through s3fs */
    {"s3_concurrency", UVMC_K_S3_CONCURRENCY, UVMC_KEY_COUNT, " (1..64)"},
    {"s3_part_size", UVMC_K_S3_PART_SIZE, UVMC_KEY_SIZE, " (a whole number of bytes or of a unit in 5MiB..5GiB, e.g. 16MiB)"},
};

static const char *const uvmc_prefetch_names[] = {"none", "host", "device"};
static const char *const uvmc_log_level_names[] = {"error", "warn", "notice", "info", "debug"};
static const char *const uvmc_engine_names[] = {"auto", "host", "copy"};
static const char *const uvmc_async_spill_names[] = {"auto", "required", "off"};

/* ---- diagnostics ---------------------------------------------------------------------------- */

/* One diagnostic: the mistake (formatted) and what the library does about it (`consequence`). */
__attribute__((format(printf, 4, 5))) static void uvmc_diagf(uvmc_diag_fn diag, void *ctx, const char *consequence,
                                                              const char *fmt, ...)
{
    if (diag == NULL)
        return;
    char small[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if ((size_t)n < sizeof small) {
        diag(ctx, small, consequence);
        return;
    }
    char *big = malloc((size_t)n + 1);
    if (big == NULL) {
        diag(ctx, small, consequence); /* truncated, but still one line */
        return;
    }
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    diag(ctx, big, consequence);
    free(big);
}

/* "enabled, threshold, ...": every key, for a message about a name that resembles none. */
static const char *uvmc_key_list(char *list, size_t len)
{
    size_t used = 0;
    list[0] = '\0';
    for (size_t k = 0; k < sizeof uvmc_keys / sizeof uvmc_keys[0] && used < len; k++) {
        int n = snprintf(list + used, len - used, "%s%s", k ? ", " : "", uvmc_keys[k].name);
        if (n < 0)
            break;
        used += (size_t)n;
    }
    return list;
}

/* The key a misspelt name most likely meant: edit distance at most 2, case ignored; NULL if none. */
static const char *uvmc_closest_key(const char *name, size_t n)
{
    enum { LONGEST = 32 };
    if (n == 0 || n > LONGEST)
        return NULL;
    const char *best = NULL;
    size_t best_d = 3;
    for (size_t k = 0; k < sizeof uvmc_keys / sizeof uvmc_keys[0]; k++) {
        const char *key = uvmc_keys[k].name;
        size_t m = strlen(key);
        size_t row[LONGEST + 1];
        if (m > LONGEST)
            continue;
        for (size_t j = 0; j <= m; j++)
            row[j] = j;
        for (size_t i = 1; i <= n; i++) {
            size_t diag = row[0];
            row[0] = i;
            for (size_t j = 1; j <= m; j++) {
                char a = name[i - 1], b = key[j - 1];
                a = (a >= 'A' && a <= 'Z') ? (char)(a - 'A' + 'a') : a;
                size_t sub = diag + (a != b), up = row[j] + 1, left = row[j - 1] + 1;
                diag = row[j];
                row[j] = sub < up ? (sub < left ? sub : left) : (up < left ? up : left);
            }
        }
        if (row[m] < best_d) {
            best_d = row[m];
            best = key;
        }
    }
    return best;
}

/* Writes a size as "256MiB" when a unit divides it exactly, else as plain bytes. */
static void uvmc_format_size(size_t v, char *buf, size_t len)
{
    static const char *const units[] = {"TiB", "GiB", "MiB", "KiB"};
    static const unsigned shifts[] = {40, 30, 20, 10};
    if (v != 0) {
        for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
            if (shifts[i] >= sizeof(size_t) * 8)
                continue;
            size_t unit = (size_t)1 << shifts[i];
            if (v % unit == 0) {
                snprintf(buf, len, "%zu%s", v / unit, units[i]);
                return;
            }
        }
    }
    snprintf(buf, len, "%zu", v);
}

static void uvmc_format_current(const struct uvmc_config *cfg, enum uvmc_key_id id, char *buf, size_t len)
{
    switch (id) {
    case UVMC_K_ENABLED:
        snprintf(buf, len, "%s", cfg->enabled ? "on" : "off");
        break;
    case UVMC_K_STATS:
        snprintf(buf, len, "%s", cfg->stats ? "on" : "off");
        break;
    case UVMC_K_THRESHOLD:
        uvmc_format_size(cfg->threshold, buf, len);
        break;
    case UVMC_K_CHUNK_SIZE:
        uvmc_format_size(cfg->chunk_size, buf, len);
        break;
    case UVMC_K_DEPTH:
        snprintf(buf, len, "%u", cfg->depth);
        break;
    case UVMC_K_PREFETCH:
        snprintf(buf, len, "%s",
                 (unsigned)cfg->prefetch < 3 ? uvmc_prefetch_names[cfg->prefetch] : "?");
        break;
    case UVMC_K_LOG_LEVEL:
        snprintf(buf, len, "%s",
                 (unsigned)cfg->log_level < 5 ? uvmc_log_level_names[cfg->log_level] : "?");
        break;
    case UVMC_K_PINNED_THRESHOLD:
        uvmc_format_size(cfg->pinned_threshold, buf, len);
        break;
    case UVMC_K_ENGINE:
        snprintf(buf, len, "%s", (unsigned)cfg->engine < 3 ? uvmc_engine_names[cfg->engine] : "?");
        break;
    case UVMC_K_COPY_THREADS:
        snprintf(buf, len, "%u", cfg->copy_threads);
        break;
    case UVMC_K_INTERCEPT_DLSYM:
        snprintf(buf, len, "%s", cfg->intercept_dlsym ? "on" : "off");
        break;
    case UVMC_K_DCP_VIEWS:
        snprintf(buf, len, "%s", cfg->dcp_views ? "on" : "off");
        break;
    case UVMC_K_STOCK:
        snprintf(buf, len, "%s", cfg->stock ? "on" : "off");
        break;
    case UVMC_K_S3_CONCURRENCY:
        snprintf(buf, len, "%u", cfg->s3_concurrency);
        break;
    case UVMC_K_S3_PART_SIZE:
        uvmc_format_size(cfg->s3_part_size, buf, len);
        break;
    case UVMC_K_ASYNC_MEMORY_BUDGET:
        if (cfg->async_memory_budget_auto)
            snprintf(buf, len, "auto");
        else
            uvmc_format_size(cfg->async_memory_budget, buf, len);
        break;
    case UVMC_K_ASYNC_SPILL_DIR: {
        /* One word for `uvmchunk-config`'s line: blanks, '#', '%' and other bytes outside
         * '!'..'~' are written %XX (python/uvmchunk/_spill.py reads it back). */
        size_t used = 0;
        if (len)
            buf[0] = '\0';
        for (const unsigned char *p = (const unsigned char *)cfg->async_spill_dir; *p && used + 4 <= len; p++) {
            bool plain = *p > ' ' && *p < 0x7f && *p != '%' && *p != '#';
            used += (size_t)snprintf(buf + used, len - used, plain ? "%c" : "%%%02X", *p);
        }
        break;
    }
    case UVMC_K_ASYNC_SPILL:
        snprintf(buf, len, "%s", (unsigned)cfg->async_spill < 3 ? uvmc_async_spill_names[cfg->async_spill] : "?");
        break;
    case UVMC_K_REPORT:
        snprintf(buf, len, "%s", cfg->report);
        break;
    }
}

/* ---- value syntax (all on a counted, already trimmed string) -------------------------------- */

static bool uvmc_is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\v' || c == '\f';
}

static bool uvmc_word_eq(const char *s, size_t n, const char *word)
{
    return strlen(word) == n && strncasecmp(s, word, n) == 0;
}

static bool uvmc_parse_size_n(const char *s, size_t n, size_t *out)
{
    size_t i = 0, v = 0;
    if (n == 0 || s[0] < '0' || s[0] > '9')
        return false;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
        size_t d = (size_t)(s[i] - '0');
        if (v > (SIZE_MAX - d) / 10)
            return false;
        v = v * 10 + d;
        i++;
    }
    if (i == n) {
        *out = v;
        return true;
    }
    while (i < n && (s[i] == ' ' || s[i] == '\t'))
        i++;
    if (i == n)
        return false; /* blanks but no unit */
    unsigned shift;
    switch (s[i]) {
    case 'k': case 'K': shift = 10; break;
    case 'm': case 'M': shift = 20; break;
    case 'g': case 'G': shift = 30; break;
    case 't': case 'T': shift = 40; break;
    default: return false;
    }
    const char *suffix = s + i + 1;
    size_t sn = n - i - 1;
    if (!(sn == 0 || uvmc_word_eq(suffix, sn, "b") || uvmc_word_eq(suffix, sn, "ib")))
        return false;
    if (shift >= sizeof(size_t) * 8) {
        if (v != 0)
            return false;
    } else if (v > (SIZE_MAX >> shift)) {
        return false;
    } else {
        v <<= shift;
    }
    *out = v;
    return true;
}

bool uvmc_parse_size(const char *text, size_t *out)
{
    size_t v;
    if (text == NULL || out == NULL || !uvmc_parse_size_n(text, strlen(text), &v))
        return false;
    *out = v;
    return true;
}

static bool uvmc_parse_bool_n(const char *s, size_t n, bool *out)
{
    static const char *const yes[] = {"on", "true", "yes", "1"};
    static const char *const no[] = {"off", "false", "no", "0"};
    for (size_t i = 0; i < 4; i++) {
        if (uvmc_word_eq(s, n, yes[i])) {
            *out = true;
            return true;
        }
        if (uvmc_word_eq(s, n, no[i])) {
            *out = false;
            return true;
        }
    }
    return false;
}

/* A count in 1..64 (depth, copy_threads). */
_Static_assert(UVMC_DEPTH_MAX == UVMC_COPY_THREADS_MAX, "one range serves both counts");
static bool uvmc_parse_count_n(const char *s, size_t n, unsigned *out)
{
    unsigned v = 0;
    if (n == 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        v = v * 10 + (unsigned)(s[i] - '0');
        if (v > UVMC_DEPTH_MAX)
            return false;
    }
    if (v < 1)
        return false;
    *out = v;
    return true;
}

static bool uvmc_parse_name_n(const char *s, size_t n, const char *const *names, size_t count,
                              unsigned *out)
{
    for (size_t i = 0; i < count; i++) {
        if (uvmc_word_eq(s, n, names[i])) {
            *out = (unsigned)i;
            return true;
        }
    }
    return false;
}

static const struct uvmc_key *uvmc_find_key(const char *name)
{
    for (size_t i = 0; i < sizeof uvmc_keys / sizeof uvmc_keys[0]; i++)
        if (strcmp(uvmc_keys[i].name, name) == 0)
            return &uvmc_keys[i];
    return NULL;
}

/* The async_save keys (their value syntax differs from the table's kinds): `s`/`n` the trimmed value. */
static bool uvmc_set_async(struct uvmc_config *cfg, const struct uvmc_key *k, const char *s, size_t n,
                           const char *where, uvmc_diag_fn diag, void *ctx)
{
    bool ok = false;
    size_t sz = 0;
    unsigned u = 0;
    switch (k->id) {
    case UVMC_K_ASYNC_MEMORY_BUDGET:
        if (uvmc_word_eq(s, n, "auto")) {
            cfg->async_memory_budget_auto = true;
            cfg->async_memory_budget = 0;
            return true;
        }
        ok = uvmc_parse_size_n(s, n, &sz);
        if (ok) {
            cfg->async_memory_budget_auto = false;
            cfg->async_memory_budget = sz;
        }
        break;
    case UVMC_K_ASYNC_SPILL_DIR:
        ok = n < UVMC_SPILL_DIR_MAX;
        for (size_t i = 0; ok && i < n; i++)
            ok = (unsigned char)s[i] >= ' ' && s[i] != 0x7f;
        if (ok) {
            memcpy(cfg->async_spill_dir, s, n);
            cfg->async_spill_dir[n] = '\0';
        }
        break;
    case UVMC_K_ASYNC_SPILL:
        ok = uvmc_parse_name_n(s, n, uvmc_async_spill_names, 3, &u);
        if (ok)
            cfg->async_spill = (enum uvmc_async_spill)u;
        break;
    default:
        break;
    }
    if (!ok) {
        char kept[3 * UVMC_SPILL_DIR_MAX], consequence[sizeof kept + 16];
        uvmc_format_current(cfg, k->id, kept, sizeof kept);
        snprintf(consequence, sizeof consequence, "keeping %s", *kept ? kept : "the automatic choice");
        int shown = n > UVMC_SHOWN_VALUE_MAX ? UVMC_SHOWN_VALUE_MAX : (int)n;
        uvmc_diagf(diag, ctx, consequence, "%s: bad value '%.*s%s' for %s%s", where, shown, s,
                   n > UVMC_SHOWN_VALUE_MAX ? "..." : "", k->name, k->hint);
    }
    return ok;
}

/* ---- public API ----------------------------------------------------------------------------- */

void uvmc_config_defaults(struct uvmc_config *cfg)
{
    if (cfg == NULL)
        return;
    cfg->enabled = true;
    cfg->threshold = UVMC_DEFAULT_THRESHOLD;
    cfg->chunk_size = UVMC_DEFAULT_CHUNK_SIZE;
    cfg->depth = UVMC_DEFAULT_DEPTH;
    cfg->prefetch = UVMC_PREFETCH_NONE;
    cfg->log_level = UVMC_LOG_NOTICE;
    cfg->stats = false;
    cfg->pinned_threshold = UVMC_DEFAULT_PINNED_THRESHOLD;
    cfg->engine = UVMC_ENGINE_AUTO;
    cfg->copy_threads = UVMC_DEFAULT_COPY_THREADS;
    cfg->intercept_dlsym = false;
    cfg->dcp_views = true;
    cfg->async_memory_budget_auto = true;
    cfg->async_memory_budget = 0;
    cfg->async_spill_dir[0] = '\0';
    cfg->async_spill = UVMC_ASYNC_SPILL_AUTO;
    cfg->report[0] = '\0';
    cfg->stock = false;
    cfg->s3_concurrency = UVMC_DEFAULT_S3_CONCURRENCY;
    cfg->s3_part_size = UVMC_DEFAULT_S3_PART_SIZE;
}

/* A chunk_size in 4KiB..1TiB that whole 2MiB units either hold or are made of. */
static bool uvmc_chunk_fits(size_t sz)
{
    return sz % UVMC_CHUNK_UNIT == 0 || (sz < UVMC_CHUNK_UNIT && (sz & (sz - 1)) == 0);
}

/* Says why a chunk_size in range does not fit 2MiB units and the valid values either side of it. */
static bool uvmc_chunk_refuse(const struct uvmc_config *cfg, const char *s, size_t n, size_t sz, const char *where,
                              uvmc_diag_fn diag, void *ctx)
{
    size_t lo, hi;
    if (sz > UVMC_CHUNK_UNIT) {
        lo = sz - sz % UVMC_CHUNK_UNIT;
        hi = lo + UVMC_CHUNK_UNIT; /* <= 1TiB: UVMC_CHUNK_MAX is a multiple of the unit */
    } else {
        for (lo = UVMC_CHUNK_MIN; lo * 2 <= sz; lo *= 2)
            ;
        hi = lo * 2;
    }
    char kept[32], consequence[48], below[32], above[32];
    uvmc_format_current(cfg, UVMC_K_CHUNK_SIZE, kept, sizeof kept);
    snprintf(consequence, sizeof consequence, "keeping %s", kept);
    uvmc_format_size(lo, below, sizeof below);
    uvmc_format_size(hi, above, sizeof above);
    int shown = n > UVMC_SHOWN_VALUE_MAX ? UVMC_SHOWN_VALUE_MAX : (int)n;
    uvmc_diagf(diag, ctx, consequence,
               "%s: bad value '%.*s' for chunk_size: must be a multiple of 2MiB or a power of two up to 1MiB "
               "(nearest: %s or %s)",
               where, shown, s, below, above);
    return false;
}

bool uvmc_config_set(struct uvmc_config *cfg, const char *key, const char *value, const char *where,
                     uvmc_diag_fn diag, void *ctx)
{
    if (cfg == NULL || key == NULL || value == NULL)
        return false;
    if (where == NULL)
        where = "config";

    const struct uvmc_key *k = uvmc_find_key(key);
    if (k == NULL) {
        const char *near = uvmc_closest_key(key, strlen(key));
        char keys[256];
        uvmc_diagf(diag, ctx, "ignored", "%s: unknown key '%.*s%s' (%s%s%s)", where, UVMC_SHOWN_VALUE_MAX, key,
                   strlen(key) > UVMC_SHOWN_VALUE_MAX ? "..." : "", near ? "did you mean '" : "known keys: ",
                   near ? near : uvmc_key_list(keys, sizeof keys), near ? "'?" : "");
        return false;
    }

    /* Trim the value. */
    const char *s = value;
    size_t n = strlen(s);
    while (n > 0 && uvmc_is_blank(*s)) {
        s++;
        n--;
    }
    while (n > 0 && uvmc_is_blank(s[n - 1]))
        n--;

    if (k->id == UVMC_K_ASYNC_MEMORY_BUDGET || k->id == UVMC_K_ASYNC_SPILL_DIR || k->id == UVMC_K_ASYNC_SPILL)
        return uvmc_set_async(cfg, k, s, n, where, diag, ctx);

    bool ok = false, b = false;
    size_t sz = 0;
    unsigned u = 0;
    switch (k->kind) {
    case UVMC_KEY_BOOL:
        ok = uvmc_parse_bool_n(s, n, &b);
        break;
    case UVMC_KEY_SIZE:
        ok = uvmc_parse_size_n(s, n, &sz);
        if (ok && k->id == UVMC_K_THRESHOLD)
            ok = sz >= 1;
        if (ok && k->id == UVMC_K_CHUNK_SIZE) {
            ok = sz >= UVMC_CHUNK_MIN && sz <= UVMC_CHUNK_MAX;
            if (ok && !uvmc_chunk_fits(sz))
                return uvmc_chunk_refuse(cfg, s, n, sz, where, diag, ctx);
        }
        if (ok && k->id == UVMC_K_S3_PART_SIZE)
            ok = sz >= UVMC_S3_PART_MIN && sz <= UVMC_S3_PART_MAX;
        break;
    case UVMC_KEY_COUNT:
        ok = uvmc_parse_count_n(s, n, &u);
        break;
    case UVMC_KEY_PREFETCH:
        ok = uvmc_parse_name_n(s, n, uvmc_prefetch_names, 3, &u);
        break;
    case UVMC_KEY_LOG_LEVEL:
        ok = uvmc_parse_name_n(s, n, uvmc_log_level_names, 5, &u);
        break;
    case UVMC_KEY_ENGINE:
        ok = uvmc_parse_name_n(s, n, uvmc_engine_names, 3, &u);
        break;
    case UVMC_KEY_PATH: /* one word: `uvmchunk-config` prints the configuration as blank-separated key=value */
        ok = n < UVMC_REPORT_MAX;
        for (size_t i = 0; ok && i < n; i++)
            ok = !uvmc_is_blank(s[i]) && s[i] != '\0';
        break;
    }

    if (!ok) {
        char kept[UVMC_REPORT_MAX], consequence[UVMC_REPORT_MAX + 16];
        uvmc_format_current(cfg, k->id, kept, sizeof kept);
        /* An empty value (report's default) kept is said as "none", the key's own word for it. */
        snprintf(consequence, sizeof consequence, "keeping %s", *kept ? kept : "none");
        int shown = n > UVMC_SHOWN_VALUE_MAX ? UVMC_SHOWN_VALUE_MAX : (int)n;
        uvmc_diagf(diag, ctx, consequence, "%s: bad value '%.*s%s' for %s%s", where, shown, s,
                   n > UVMC_SHOWN_VALUE_MAX ? "..." : "", k->name, k->hint);
        return false;
    }

    switch (k->id) {
    case UVMC_K_ENABLED: cfg->enabled = b; break;
    case UVMC_K_STATS: cfg->stats = b; break;
    case UVMC_K_THRESHOLD: cfg->threshold = sz; break;
    case UVMC_K_CHUNK_SIZE: cfg->chunk_size = sz; break;
    case UVMC_K_DEPTH: cfg->depth = u; break;
    case UVMC_K_PREFETCH: cfg->prefetch = (enum uvmc_prefetch)u; break;
    case UVMC_K_LOG_LEVEL: cfg->log_level = (enum uvmc_log_level)u; break;
    case UVMC_K_PINNED_THRESHOLD: cfg->pinned_threshold = sz; break;
    case UVMC_K_ENGINE: cfg->engine = (enum uvmc_engine)u; break;
    case UVMC_K_COPY_THREADS: cfg->copy_threads = u; break;
    case UVMC_K_INTERCEPT_DLSYM: cfg->intercept_dlsym = b; break;
    case UVMC_K_DCP_VIEWS: cfg->dcp_views = b; break;
    case UVMC_K_STOCK: cfg->stock = b; break;
    case UVMC_K_S3_CONCURRENCY: cfg->s3_concurrency = u; break;
    case UVMC_K_S3_PART_SIZE: cfg->s3_part_size = sz; break;
    case UVMC_K_ASYNC_MEMORY_BUDGET: /* uvmc_set_async */
    case UVMC_K_ASYNC_SPILL_DIR:
    case UVMC_K_ASYNC_SPILL:
        break;
    case UVMC_K_REPORT: memcpy(cfg->report, s, n); cfg->report[n] = '\0'; break;
    }
    return true;
}

/* Handles one line (line ending already removed; NUL-terminated at len, may be modified). */
static void uvmc_parse_line(struct uvmc_config *cfg, char *line, size_t len, const char *where,
                            uvmc_diag_fn diag, void *ctx)
{
    if (memchr(line, '\0', len) != NULL) {
        uvmc_diagf(diag, ctx, "line ignored", "%s: expected 'key = value'", where);
        return;
    }
    char *hash = strchr(line, '#');
    if (hash != NULL)
        *hash = '\0';

    char *start = line;
    while (uvmc_is_blank(*start))
        start++;
    if (*start == '\0')
        return; /* blank or comment-only line */

    char *eq = strchr(start, '=');
    if (eq == NULL) {
        uvmc_diagf(diag, ctx, "line ignored", "%s: expected 'key = value'", where);
        return;
    }
    char *key_end = eq;
    while (key_end > start && uvmc_is_blank(key_end[-1]))
        key_end--;
    if (key_end == start) {
        uvmc_diagf(diag, ctx, "line ignored", "%s: expected 'key = value'", where);
        return;
    }
    *key_end = '\0';
    uvmc_config_set(cfg, start, eq + 1, where, diag, ctx); /* set trims the value */
}

static bool uvmc_parse_file_impl(struct uvmc_config *cfg, const char *path, bool quiet_if_absent,
                                 uvmc_diag_fn diag, void *ctx)
{
    /* Non-blocking open: a FIFO must not hang the first CUDA call. Only regular files are read. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int err = errno;
        if (!(quiet_if_absent && err == ENOENT))
            uvmc_diagf(diag, ctx, "using the defaults", "cannot open config %s: %s", path, strerror(err));
        return false;
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > UVMC_FILE_MAX) {
        uvmc_diagf(diag, ctx, "using the defaults", "cannot read config %s: %s", path,
                   S_ISREG(st.st_mode) ? "larger than 1MiB" : "not a regular file");
        close(fd);
        return false;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE *f = fdopen(fd, "r");
    if (f == NULL) {
        uvmc_diagf(diag, ctx, "using the defaults", "cannot read config %s: %s", path, strerror(errno));
        close(fd);
        return false;
    }

    size_t where_len = strlen(path) + 32;
    char *where = malloc(where_len);
    char *line = NULL;
    size_t cap = 0;
    unsigned long lineno = 0;
    ssize_t got;
    bool ok = true;

    if (where == NULL) {
        uvmc_diagf(diag, ctx, "using the defaults", "cannot read config %s: %s", path, strerror(ENOMEM));
        fclose(f);
        return false;
    }
    errno = 0;
    while ((got = getline(&line, &cap, f)) != -1) {
        size_t len = (size_t)got;
        lineno++;
        snprintf(where, where_len, "%s:%lu", path, lineno);
        if (len > 0 && line[len - 1] == '\n')
            line[--len] = '\0';
        if (len > 0 && line[len - 1] == '\r')
            line[--len] = '\0';
        if (len > UVMC_LINE_MAX) {
            uvmc_diagf(diag, ctx, "line ignored", "%s: line too long (%zu characters, at most %u)", where, len,
                       UVMC_LINE_MAX);
            continue;
        }
        uvmc_parse_line(cfg, line, len, where, diag, ctx);
    }
    if (ferror(f)) {
        uvmc_diagf(diag, ctx, "the rest of the file ignored", "cannot read config %s: %s", path,
                   strerror(errno ? errno : EIO));
        ok = false;
    }
    free(line);
    free(where);
    fclose(f);
    return ok;
}

bool uvmc_config_parse_file(struct uvmc_config *cfg, const char *path, uvmc_diag_fn diag, void *ctx)
{
    if (cfg == NULL || path == NULL)
        return false;
    return uvmc_parse_file_impl(cfg, path, false, diag, ctx);
}

/* Applies one UVMCHUNK_<KEY>=value entry; `entry` is the whole "NAME=value" string. */
static void uvmc_apply_env(struct uvmc_config *cfg, const char *entry, uvmc_diag_fn diag, void *ctx)
{
    const char *eq = strchr(entry, '=');
    if (eq == NULL)
        return;
    size_t name_len = (size_t)(eq - entry);
    const char *suffix = entry + strlen(UVMC_ENV_PREFIX);
    size_t suffix_len = name_len - strlen(UVMC_ENV_PREFIX);

    /* Names are "UVMCHUNK_" + the key uppercased; anything else keeps its spelling and is unknown. */
    char key[64], where[64 + sizeof UVMC_ENV_PREFIX];
    bool upper = true;
    for (size_t i = 0; i < suffix_len; i++)
        if (suffix[i] >= 'a' && suffix[i] <= 'z')
            upper = false;
    if (upper && suffix_len < sizeof key) {
        for (size_t i = 0; i < suffix_len; i++) {
            char c = suffix[i];
            key[i] = (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
        }
        key[suffix_len] = '\0';
        if (uvmc_find_key(key) != NULL) {
            memcpy(where, entry, name_len);
            where[name_len] = '\0';
            uvmc_config_set(cfg, key, eq + 1, where, diag, ctx);
            return;
        }
    }
    const char *near = uvmc_closest_key(suffix, suffix_len);
    char meant[64] = "";
    for (size_t i = 0; near != NULL && near[i] != '\0' && i + 1 < sizeof meant; i++)
        meant[i] = (near[i] >= 'a' && near[i] <= 'z') ? (char)(near[i] - 'a' + 'A') : near[i];
    int shown = suffix_len > UVMC_SHOWN_VALUE_MAX ? UVMC_SHOWN_VALUE_MAX : (int)suffix_len;
    char keys[256];
    uvmc_diagf(diag, ctx, "ignored", "%.*s%s: unknown variable (%s%s%s)", (int)strlen(UVMC_ENV_PREFIX) + shown, entry,
               shown < (int)suffix_len ? "..." : "",
               near ? "did you mean " UVMC_ENV_PREFIX : "a variable is " UVMC_ENV_PREFIX " + a key in capitals; known keys: ",
               near ? meant : uvmc_key_list(keys, sizeof keys), near ? "?" : "");
}

static bool uvmc_is_env_var(const char *entry, const char *name)
{
    size_t n = strlen(name);
    return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

static bool uvmc_is_env_config(const char *entry)
{
    return uvmc_is_env_var(entry, UVMC_ENV_CONFIG);
}

void uvmc_config_load(struct uvmc_config *cfg, char *const *envp, uvmc_diag_fn diag, void *ctx)
{
    if (cfg == NULL)
        return;
    uvmc_config_defaults(cfg);

    const char *explicit_path = NULL;
    if (envp != NULL) {
        for (char *const *e = envp; *e != NULL; e++) {
            if (uvmc_is_env_config(*e)) {
                explicit_path = *e + strlen(UVMC_ENV_CONFIG) + 1;
                break;
            }
        }
    }

    if (explicit_path != NULL) {
        if (explicit_path[0] != '\0') /* UVMCHUNK_CONFIG= (empty) reads no file at all */
            uvmc_parse_file_impl(cfg, explicit_path, false, diag, ctx);
    } else {
        uvmc_parse_file_impl(cfg, UVMC_SYSTEM_CONFIG, true, diag, ctx);
    }

    if (envp == NULL)
        return;
    for (char *const *e = envp; *e != NULL; e++) {
        if (strncmp(*e, UVMC_ENV_PREFIX, strlen(UVMC_ENV_PREFIX)) != 0 || uvmc_is_env_config(*e) ||
            uvmc_is_env_var(*e, UVMC_ENV_LIB))
            continue;
        uvmc_apply_env(cfg, *e, diag, ctx);
    }
}

void uvmc_config_describe(const struct uvmc_config *cfg, char *out, size_t outsz)
{
    size_t used = 0;
    if (outsz)
        out[0] = '\0';
    for (size_t i = 0; i < sizeof uvmc_keys / sizeof uvmc_keys[0] && used < outsz; i++) {
        char v[3 * UVMC_SPILL_DIR_MAX]; /* async_spill_dir, escaped */
        uvmc_format_current(cfg, uvmc_keys[i].id, v, sizeof v);
        int n = snprintf(out + used, outsz - used, "%s%s=%s", used ? " " : "", uvmc_keys[i].name, v);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}
