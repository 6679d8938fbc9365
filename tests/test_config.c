/* test_config.c: Check unit tests of the config parser (config/config.c).
 * Covers size syntax, every key, file syntax and diagnostics, environment overrides and the shipped example. */
#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "uvmc_config.h"
#include "uvmc_units.h"

#ifndef UVMC_EXAMPLE_CONF
#error "compile with -DUVMC_EXAMPLE_CONF=\"/path/to/config/uvmchunk.conf\""
#endif

/* ---- helpers -------------------------------------------------------------------------------- */

#define KEYS                                                                                             \
    "enabled, threshold, chunk_size, depth, prefetch, log_level, stats, pinned_threshold, engine, "      \
    "copy_threads, intercept_dlsym, dcp_views, async_memory_budget, async_spill_dir, async_spill, report, stock, s3_concurrency, s3_part_size"

#define DIAG_KEEP 16
struct diag_log {
    int n;
    char line[DIAG_KEEP][1024];
};

/* Keeps each diagnostic as the library prints it: "mistake; consequence". */
static void collect(void *ctx, const char *mistake, const char *consequence)
{
    struct diag_log *log = ctx;
    ck_assert_ptr_nonnull(mistake);
    ck_assert_ptr_nonnull(consequence);
    ck_assert_ptr_null(strchr(mistake, '\n'));
    ck_assert_ptr_null(strchr(consequence, '\n'));
    ck_assert(*consequence != '\0');
    if (log->n < DIAG_KEEP)
        snprintf(log->line[log->n], sizeof log->line[0], "%s; %s", mistake, consequence);
    log->n++;
}

/* Writes `text` (length len) to a fresh temp file; its path goes to path[64]. */
static void write_temp_n(char path[64], const char *text, size_t len)
{
    snprintf(path, 64, "/tmp/uvmc_test_XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq((long)write(fd, text, len), (long)len);
    close(fd);
}

static void write_temp(char path[64], const char *text)
{
    write_temp_n(path, text, strlen(text));
}

static void parse_text(struct uvmc_config *cfg, struct diag_log *log, const char *text, char path[64])
{
    write_temp(path, text);
    ck_assert(uvmc_config_parse_file(cfg, path, collect, log));
    unlink(path);
}

static void assert_default(const struct uvmc_config *c)
{
    ck_assert(c->enabled);
    ck_assert_uint_eq(c->threshold, UVMC_DEFAULT_THRESHOLD);
    ck_assert_uint_eq(c->chunk_size, UVMC_DEFAULT_CHUNK_SIZE);
    ck_assert_uint_eq(c->depth, UVMC_DEFAULT_DEPTH);
    ck_assert_int_eq(c->prefetch, UVMC_PREFETCH_NONE);
    ck_assert_int_eq(c->log_level, UVMC_LOG_NOTICE);
    ck_assert_str_eq(c->report, "");
    ck_assert(!c->stats);
    ck_assert_uint_eq(c->s3_concurrency, UVMC_DEFAULT_S3_CONCURRENCY);
    ck_assert_uint_eq(c->s3_part_size, UVMC_DEFAULT_S3_PART_SIZE);
}

static void assert_same(const struct uvmc_config *a, const struct uvmc_config *b)
{
    ck_assert_int_eq(a->enabled, b->enabled);
    ck_assert_uint_eq(a->threshold, b->threshold);
    ck_assert_uint_eq(a->chunk_size, b->chunk_size);
    ck_assert_uint_eq(a->depth, b->depth);
    ck_assert_int_eq(a->prefetch, b->prefetch);
    ck_assert_int_eq(a->log_level, b->log_level);
    ck_assert_int_eq(a->stats, b->stats);
    ck_assert_str_eq(a->report, b->report);
    ck_assert_uint_eq(a->s3_concurrency, b->s3_concurrency);
    ck_assert_uint_eq(a->s3_part_size, b->s3_part_size);
}

/* ---- sizes ---------------------------------------------------------------------------------- */

static const struct {
    const char *text;
    size_t value;
} good_sizes[] = {
    {"0", 0},
    {"1", 1},
    {"4096", 4096},
    {"512K", (size_t)512 << 10},
    {"512k", (size_t)512 << 10},
    {"512KB", (size_t)512 << 10},
    {"512KiB", (size_t)512 << 10},
    {"64M", (size_t)64 << 20},
    {"64MB", (size_t)64 << 20},
    {"64MiB", (size_t)64 << 20},
    {"64mib", (size_t)64 << 20},
    {"64MIB", (size_t)64 << 20},
    {"64 MiB", (size_t)64 << 20}, /* the header allows blanks before the unit */
    {"64\tM", (size_t)64 << 20},
    {"2GiB", (size_t)2 << 30},
    {"2g", (size_t)2 << 30},
    {"256MiB", (size_t)256 << 20},
    {"1TiB", (size_t)1 << 40},
    {"1t", (size_t)1 << 40},
    {"007", 7},
    {"18446744073709551615", SIZE_MAX},
    {"16777215TiB", (size_t)16777215 << 40},
};

static const char *const bad_sizes[] = {
    "",
    "-1",
    "+1",
    "1.5G",
    "99999999999999999999",
    "18446744073709551616",
    "16777216TiB",
    "17179869184G",
    "abc",
    "MiB",
    "0x10",
    "64X",
    "64B",
    "64iB",
    "64MiBs",
    "64Mi",
    "64 ",
    " 64",
    "64 MiB ",
    "6 4",
    "1e3",
};

START_TEST(size_good)
{
    size_t v = 12345;
    ck_assert_msg(uvmc_parse_size(good_sizes[_i].text, &v), "rejected '%s'", good_sizes[_i].text);
    ck_assert_uint_eq(v, good_sizes[_i].value);
}
END_TEST

START_TEST(size_bad)
{
    size_t v = 12345;
    ck_assert_msg(!uvmc_parse_size(bad_sizes[_i], &v), "accepted '%s'", bad_sizes[_i]);
    ck_assert_uint_eq(v, 12345); /* output untouched on failure */
}
END_TEST

START_TEST(size_null)
{
    size_t v = 1;
    ck_assert(!uvmc_parse_size(NULL, &v));
    ck_assert(!uvmc_parse_size("1", NULL));
    ck_assert_uint_eq(v, 1);
}
END_TEST

/* ---- keys ----------------------------------------------------------------------------------- */

START_TEST(defaults)
{
    struct uvmc_config c;
    memset(&c, 0xab, sizeof c);
    uvmc_config_defaults(&c);
    assert_default(&c);
    uvmc_config_defaults(NULL); /* no crash */
}
END_TEST

static const struct {
    const char *key, *value;
} good_values[] = {
    {"enabled", "off"}, {"enabled", "on"}, {"enabled", "true"}, {"enabled", "false"},
    {"enabled", "yes"}, {"enabled", "no"}, {"enabled", "1"}, {"enabled", "0"},
    {"enabled", "OFF"}, {"threshold", "1"}, {"threshold", "1TiB"}, {"threshold", " 4K "},
    {"chunk_size", "4096"}, {"chunk_size", "4K"}, {"chunk_size", "1TiB"}, {"chunk_size", "2MiB"},
    {"chunk_size", "1MiB"}, {"chunk_size", "8K"}, {"chunk_size", "6MiB"}, {"chunk_size", "1022GiB"},
    {"depth", "1"}, {"depth", "64"}, {"depth", "8"}, {"prefetch", "none"},
    {"pinned_threshold", "0"}, {"pinned_threshold", "1GiB"}, {"pinned_threshold", "3"},
    {"engine", "auto"}, {"engine", "HOST"}, {"engine", "copy"}, {"copy_threads", "1"}, {"copy_threads", "64"},
    {"prefetch", "host"}, {"prefetch", "device"}, {"log_level", "error"}, {"log_level", "warn"},
    {"log_level", "info"}, {"log_level", "debug"}, {"log_level", "notice"}, {"stats", "on"}, {"stats", "off"},
    {"report", "/tmp/uvmchunk-report.jsonl"}, {"report", ""}, {"report", " rel/r.jsonl "},
    {"s3_concurrency", "1"}, {"s3_concurrency", "64"}, {"s3_part_size", "5MiB"}, {"s3_part_size", "5GiB"},
    {"s3_part_size", "16MiB"}, {"s3_part_size", "5242880"},
};

static const struct {
    const char *key, *value;
} bad_values[] = {
    {"enabled", "maybe"}, {"enabled", ""}, {"enabled", "2"}, {"enabled", "onn"},
    {"threshold", "0"}, {"threshold", "abc"}, {"threshold", "-1"}, {"threshold", "1.5G"},
    {"threshold", ""}, {"threshold", "99999999999999999999"}, {"chunk_size", "4095"},
    {"chunk_size", "0"}, {"chunk_size", "1025G"}, {"chunk_size", "2TiB"}, {"chunk_size", "x"},
    {"chunk_size", "3MiB"}, {"chunk_size", "12K"}, {"chunk_size", "1025M"}, {"chunk_size", "1536K"},
    {"pinned_threshold", "-1"}, {"pinned_threshold", "1 GiBs"}, {"engine", "gpu"}, {"engine", ""},
    {"copy_threads", "0"}, {"copy_threads", "65"}, {"copy_threads", "two"}, {"intercept_dlsym", "maybe"}, {"dcp_views", "auto"},
    {"depth", "0"}, {"depth", "65"}, {"depth", "-1"}, {"depth", "4.0"}, {"depth", ""},
    {"depth", "99999999999999999999"}, {"depth", "4K"}, {"prefetch", "gpu"}, {"prefetch", ""},
    {"prefetch", "hostdevice"}, {"log_level", "verbose"}, {"log_level", "3"}, {"log_level", ""},
    {"stats", "sometimes"}, {"stats", ""}, {"report", "/tmp/a b.jsonl"},
    {"s3_concurrency", "0"}, {"s3_concurrency", "65"}, {"s3_part_size", "5242879"}, {"s3_part_size", "4MiB"},
    {"s3_part_size", "5121MiB"}, {"s3_part_size", "6GiB"}, {"s3_part_size", "x"},
};

START_TEST(key_good)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    uvmc_config_defaults(&c);
    ck_assert_msg(uvmc_config_set(&c, good_values[_i].key, good_values[_i].value, "t", collect, &log),
                  "%s = '%s' rejected", good_values[_i].key, good_values[_i].value);
    ck_assert_int_eq(log.n, 0);
}
END_TEST

START_TEST(key_bad)
{
    struct uvmc_config c, before;
    struct diag_log log = {0};
    uvmc_config_defaults(&c);
    /* Non-default values, so "unchanged" cannot be mistaken for "reset to defaults". */
    c.enabled = false;
    c.threshold = 1000;
    c.chunk_size = (size_t)6 << 20;
    c.depth = 7;
    c.prefetch = UVMC_PREFETCH_HOST;
    c.log_level = UVMC_LOG_DEBUG;
    c.stats = true;
    before = c;
    ck_assert_msg(!uvmc_config_set(&c, bad_values[_i].key, bad_values[_i].value, "t", collect, &log),
                  "%s = '%s' accepted", bad_values[_i].key, bad_values[_i].value);
    ck_assert_int_eq(log.n, 1);
    ck_assert_ptr_nonnull(strstr(log.line[0], "bad value"));
    ck_assert_ptr_nonnull(strstr(log.line[0], bad_values[_i].key));
    assert_same(&c, &before);
}
END_TEST

START_TEST(key_effects)
{
    struct uvmc_config c;
    uvmc_config_defaults(&c);
    ck_assert(uvmc_config_set(&c, "enabled", "no", "t", NULL, NULL));
    ck_assert(!c.enabled);
    ck_assert(uvmc_config_set(&c, "enabled", "Yes", "t", NULL, NULL));
    ck_assert(c.enabled);
    ck_assert(uvmc_config_set(&c, "threshold", "512K", "t", NULL, NULL));
    ck_assert_uint_eq(c.threshold, (size_t)512 << 10);
    ck_assert(uvmc_config_set(&c, "chunk_size", "2GiB", "t", NULL, NULL));
    ck_assert_uint_eq(c.chunk_size, (size_t)2 << 30);
    ck_assert(uvmc_config_set(&c, "depth", "16", "t", NULL, NULL));
    ck_assert_uint_eq(c.depth, 16);
    ck_assert(uvmc_config_set(&c, "prefetch", "device", "t", NULL, NULL));
    ck_assert_int_eq(c.prefetch, UVMC_PREFETCH_DEVICE);
    ck_assert(uvmc_config_set(&c, "prefetch", "host", "t", NULL, NULL));
    ck_assert_int_eq(c.prefetch, UVMC_PREFETCH_HOST);
    ck_assert(uvmc_config_set(&c, "log_level", "debug", "t", NULL, NULL));
    ck_assert_int_eq(c.log_level, UVMC_LOG_DEBUG);
    ck_assert(uvmc_config_set(&c, "log_level", "error", "t", NULL, NULL));
    ck_assert_int_eq(c.log_level, UVMC_LOG_ERROR);
    ck_assert(uvmc_config_set(&c, "stats", "true", "t", NULL, NULL));
    ck_assert(c.stats);
    ck_assert_uint_eq(c.pinned_threshold, UVMC_DEFAULT_PINNED_THRESHOLD);
    ck_assert(uvmc_config_set(&c, "pinned_threshold", "0", "t", NULL, NULL));
    ck_assert_uint_eq(c.pinned_threshold, 0);
    ck_assert_int_eq(c.engine, UVMC_ENGINE_AUTO);
    ck_assert(uvmc_config_set(&c, "engine", "copy", "t", NULL, NULL));
    ck_assert_int_eq(c.engine, UVMC_ENGINE_COPY);
    ck_assert(uvmc_config_set(&c, "engine", "host", "t", NULL, NULL));
    ck_assert_int_eq(c.engine, UVMC_ENGINE_HOST);
    ck_assert_uint_eq(c.copy_threads, UVMC_DEFAULT_COPY_THREADS);
    ck_assert(uvmc_config_set(&c, "copy_threads", "2", "t", NULL, NULL));
    ck_assert_uint_eq(c.copy_threads, 2);
    ck_assert(!c.intercept_dlsym);
    ck_assert(uvmc_config_set(&c, "intercept_dlsym", "on", "t", NULL, NULL));
    ck_assert(c.intercept_dlsym);
    ck_assert(c.dcp_views);
    ck_assert(uvmc_config_set(&c, "dcp_views", "off", "t", NULL, NULL));
    ck_assert(!c.dcp_views);
    ck_assert(!c.stock);
    ck_assert(uvmc_config_set(&c, "stock", "1", "t", NULL, NULL)); /* UVMCHUNK_STOCK=1, as uvmchunk-run --stock sets it */
    ck_assert(c.stock);
    /* A bad value with no diag callback is still rejected quietly. */
    ck_assert(!uvmc_config_set(&c, "depth", "0", "t", NULL, NULL));
    ck_assert_uint_eq(c.depth, 16);
}
END_TEST

/* The async_save keys, read by the Python package (python/uvmchunk/_spill.py): their values,
 * their mistakes, and the describe line that carries a folder with blanks as one word. */
START_TEST(async_keys)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    char line[512 + 3 * UVMC_SPILL_DIR_MAX];
    uvmc_config_defaults(&c);
    ck_assert(c.async_memory_budget_auto);
    ck_assert_str_eq(c.async_spill_dir, "");
    ck_assert_int_eq(c.async_spill, UVMC_ASYNC_SPILL_AUTO);
    uvmc_config_describe(&c, line, sizeof line);
    ck_assert_ptr_nonnull(strstr(line, " async_memory_budget=auto async_spill_dir= async_spill=auto"));
    ck_assert(uvmc_config_set(&c, "async_memory_budget", "128MiB", "t", collect, &log));
    ck_assert(!c.async_memory_budget_auto);
    ck_assert_uint_eq(c.async_memory_budget, (size_t)128 << 20);
    ck_assert(uvmc_config_set(&c, "async_memory_budget", "0", "t", collect, &log));
    ck_assert_uint_eq(c.async_memory_budget, 0);
    ck_assert(uvmc_config_set(&c, "async_spill_dir", " /scratch/my spill%#1 ", "t", collect, &log));
    ck_assert_str_eq(c.async_spill_dir, "/scratch/my spill%#1");
    ck_assert(uvmc_config_set(&c, "async_spill", "REQUIRED", "t", collect, &log));
    ck_assert_int_eq(c.async_spill, UVMC_ASYNC_SPILL_REQUIRED);
    ck_assert_int_eq(log.n, 0);
    uvmc_config_describe(&c, line, sizeof line);
    ck_assert_ptr_nonnull(strstr(line, " async_memory_budget=0 async_spill_dir=/scratch/my%20spill%25%231 async_spill=required"));
    ck_assert(!uvmc_config_set(&c, "async_memory_budget", "lots", "f.conf:2", collect, &log));
    ck_assert_str_eq(log.line[0], "f.conf:2: bad value 'lots' for async_memory_budget (auto or a size, e.g. 8GiB); keeping 0");
    ck_assert(!uvmc_config_set(&c, "async_spill", "maybe", "UVMCHUNK_ASYNC_SPILL", collect, &log));
    ck_assert_str_eq(log.line[1], "UVMCHUNK_ASYNC_SPILL: bad value 'maybe' for async_spill (auto|required|off); keeping required");
    ck_assert(!uvmc_config_set(&c, "async_spill_dir", "a\tb", "t", collect, &log));
    ck_assert_int_eq(log.n, 3);
    ck_assert_str_eq(c.async_spill_dir, "/scratch/my spill%#1");
    ck_assert(uvmc_config_set(&c, "async_memory_budget", "Auto", "t", collect, &log));
    ck_assert(c.async_memory_budget_auto);
    ck_assert(uvmc_config_set(&c, "async_spill_dir", "", "t", collect, &log));
    ck_assert_str_eq(c.async_spill_dir, "");
    /* through the environment, as uvmchunk-run checks it */
    char *envp[] = {"UVMCHUNK_CONFIG=", "UVMCHUNK_ASYNC_MEMORY_BUDGET=1G", "UVMCHUNK_ASYNC_SPILL_DIR=/var/tmp",
                    "UVMCHUNK_ASYNC_SPILL=off", NULL};
    uvmc_config_load(&c, envp, collect, &log);
    ck_assert_int_eq(log.n, 3);
    ck_assert_uint_eq(c.async_memory_budget, (size_t)1 << 30);
    ck_assert_str_eq(c.async_spill_dir, "/var/tmp");
    ck_assert_int_eq(c.async_spill, UVMC_ASYNC_SPILL_OFF);
}
END_TEST

START_TEST(messages)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    uvmc_config_defaults(&c);
    ck_assert(!uvmc_config_set(&c, "threshold", "abc", "f.conf:3", collect, &log));
    ck_assert_str_eq(log.line[0], "f.conf:3: bad value 'abc' for threshold (a whole number of bytes or of a unit, at least 1 byte, e.g. 256MiB or 1536M); keeping 256MiB");
    ck_assert(!uvmc_config_set(&c, "depth", "0", "UVMCHUNK_DEPTH", collect, &log));
    ck_assert_str_eq(log.line[1], "UVMCHUNK_DEPTH: bad value '0' for depth (1..64); keeping 4");
    ck_assert(!uvmc_config_set(&c, "treshold", "1", "f.conf:4", collect, &log));
    ck_assert_str_eq(log.line[2], "f.conf:4: unknown key 'treshold' (did you mean 'threshold'?); ignored");
    /* Kept sizes: a unit when exact, else bytes. */
    c.threshold = 1000;
    ck_assert(!uvmc_config_set(&c, "threshold", "0", "w", collect, &log));
    ck_assert_str_eq(log.line[3], "w: bad value '0' for threshold (a whole number of bytes or of a unit, at least 1 byte, e.g. 256MiB or 1536M); keeping 1000");
    c.threshold = (size_t)1536 << 10;
    ck_assert(!uvmc_config_set(&c, "threshold", "x", "w", collect, &log));
    ck_assert_str_eq(log.line[4], "w: bad value 'x' for threshold (a whole number of bytes or of a unit, at least 1 byte, e.g. 256MiB or 1536M); keeping 1536KiB");
    c.chunk_size = (size_t)3 << 30;
    ck_assert(!uvmc_config_set(&c, "chunk_size", "1", "w", collect, &log));
    ck_assert_str_eq(log.line[5], "w: bad value '1' for chunk_size (a whole number of bytes or of a unit in 4KiB..1TiB, e.g. 64MiB); keeping 3GiB");
    ck_assert(!uvmc_config_set(&c, "prefetch", "gpu", "w", collect, &log));
    ck_assert_str_eq(log.line[6], "w: bad value 'gpu' for prefetch (none|host|device); keeping none");
    ck_assert(!uvmc_config_set(&c, "enabled", "nah", "w", collect, &log));
    ck_assert_str_eq(log.line[7], "w: bad value 'nah' for enabled (on|off); keeping on");
    ck_assert(!uvmc_config_set(&c, "log_level", "loud", "w", collect, &log));
    ck_assert_str_eq(log.line[8], "w: bad value 'loud' for log_level (error|warn|notice|info|debug); keeping notice");
    ck_assert(!uvmc_config_set(&c, "stats", "maybe", "w", collect, &log));
    ck_assert_str_eq(log.line[9], "w: bad value 'maybe' for stats (on|off); keeping off");
    /* The quoted value is trimmed. */
    ck_assert(!uvmc_config_set(&c, "depth", "  99 \t", "w", collect, &log));
    ck_assert_str_eq(log.line[10], "w: bad value '99' for depth (1..64); keeping 4");
    /* An empty value kept is said, not left blank after "keeping". */
    ck_assert(!uvmc_config_set(&c, "report", "/tmp/a b", "w", collect, &log));
    ck_assert_str_eq(log.line[11], "w: bad value '/tmp/a b' for report (a file path without blanks, at most 255 bytes; "
                                   "empty = none); keeping none");
    ck_assert(uvmc_config_set(&c, "report", "/tmp/r.jsonl", "w", collect, &log));
    ck_assert(!uvmc_config_set(&c, "report", "/tmp/a b", "w", collect, &log));
    ck_assert_str_eq(log.line[12], "w: bad value '/tmp/a b' for report (a file path without blanks, at most 255 bytes; "
                                   "empty = none); keeping /tmp/r.jsonl");
    /* A chunk_size off the 2MiB grid: the rule and the valid values either side (config/config.c). */
    ck_assert(!uvmc_config_set(&c, "chunk_size", "3MiB", "UVMCHUNK_CHUNK_SIZE", collect, &log));
    ck_assert_str_eq(log.line[13], "UVMCHUNK_CHUNK_SIZE: bad value '3MiB' for chunk_size: must be a multiple of 2MiB "
                                   "or a power of two up to 1MiB (nearest: 2MiB or 4MiB); keeping 3GiB");
    ck_assert(!uvmc_config_set(&c, "chunk_size", "768K", "w", collect, &log));
    ck_assert_str_eq(log.line[14], "w: bad value '768K' for chunk_size: must be a multiple of 2MiB "
                                   "or a power of two up to 1MiB (nearest: 512KiB or 1MiB); keeping 3GiB");
    ck_assert(!uvmc_config_set(&c, "chunk_size", "3000000", "w", collect, &log));
    ck_assert_str_eq(log.line[15], "w: bad value '3000000' for chunk_size: must be a multiple of 2MiB "
                                   "or a power of two up to 1MiB (nearest: 2MiB or 4MiB); keeping 3GiB");
    ck_assert_uint_eq(c.chunk_size, (size_t)3 << 30);
    ck_assert_int_eq(log.n, 16);
}
END_TEST

START_TEST(set_null)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    uvmc_config_defaults(&c);
    ck_assert(!uvmc_config_set(NULL, "depth", "2", "w", collect, &log));
    ck_assert(!uvmc_config_set(&c, NULL, "2", "w", collect, &log));
    ck_assert(!uvmc_config_set(&c, "depth", NULL, "w", collect, &log));
    ck_assert(uvmc_config_set(&c, "depth", "2", NULL, collect, &log));
    ck_assert_uint_eq(c.depth, 2);
    ck_assert(!uvmc_config_parse_file(NULL, UVMC_EXAMPLE_CONF, collect, &log));
    ck_assert(!uvmc_config_parse_file(&c, NULL, collect, &log));
    uvmc_config_load(NULL, NULL, collect, &log);
    ck_assert_int_eq(log.n, 0);
}
END_TEST

/* ---- files ---------------------------------------------------------------------------------- */

START_TEST(file_syntax)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    char path[64];
    uvmc_config_defaults(&c);
    parse_text(&c, &log,
               "# comment\n"
               "\n"
               "   \t  \n"
               "   # indented comment\n"
               "enabled = off\r\n"
               "threshold=1MiB   # trailing comment\r\n"
               "\tchunk_size\t=\t8M\t\n"
               "depth = 16# no blank before the comment\n"
               "prefetch = host\r\n"
               "log_level = debug\n"
               "stats = yes", /* no final newline */
               path);
    ck_assert_int_eq(log.n, 0);
    ck_assert(!c.enabled);
    ck_assert_uint_eq(c.threshold, (size_t)1 << 20);
    ck_assert_uint_eq(c.chunk_size, (size_t)8 << 20);
    ck_assert_uint_eq(c.depth, 16);
    ck_assert_int_eq(c.prefetch, UVMC_PREFETCH_HOST);
    ck_assert_int_eq(c.log_level, UVMC_LOG_DEBUG);
    ck_assert(c.stats);
}
END_TEST

START_TEST(file_one_diag_per_bad_line)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    char path[64], expect[256];
    uvmc_config_defaults(&c);
    parse_text(&c, &log,
               "depth = 8\n"           /* 1 good */
               "treshold = 1G\n"       /* 2 unknown key */
               "threshold = abc\n"     /* 3 bad value */
               "just some words\n"     /* 4 no '=' */
               "= 5\n"                 /* 5 no key */
               "depth =\n"             /* 6 empty value */
               "chunk_size = 1.5G\r\n" /* 7 bad value, CRLF */
               "stats = on\n",         /* 8 good */
               path);
    ck_assert_int_eq(log.n, 6);
    snprintf(expect, sizeof expect, "%s:2: unknown key 'treshold' (did you mean 'threshold'?); ignored", path);
    ck_assert_str_eq(log.line[0], expect);
    snprintf(expect, sizeof expect, "%s:3: bad value 'abc' for threshold (a whole number of bytes or of a unit, at least 1 byte, e.g. 256MiB or 1536M); keeping 256MiB", path);
    ck_assert_str_eq(log.line[1], expect);
    snprintf(expect, sizeof expect, "%s:4: expected 'key = value'; line ignored", path);
    ck_assert_str_eq(log.line[2], expect);
    snprintf(expect, sizeof expect, "%s:5: expected 'key = value'; line ignored", path);
    ck_assert_str_eq(log.line[3], expect);
    snprintf(expect, sizeof expect, "%s:6: bad value '' for depth (1..64); keeping 8", path);
    ck_assert_str_eq(log.line[4], expect);
    snprintf(expect, sizeof expect, "%s:7: bad value '1.5G' for chunk_size (a whole number of bytes or of a unit in 4KiB..1TiB, e.g. 64MiB); keeping 64MiB",
             path);
    ck_assert_str_eq(log.line[5], expect);
    ck_assert_uint_eq(c.depth, 8);
    ck_assert_uint_eq(c.threshold, UVMC_DEFAULT_THRESHOLD);
    ck_assert_uint_eq(c.chunk_size, UVMC_DEFAULT_CHUNK_SIZE);
    ck_assert(c.stats);
}
END_TEST

START_TEST(file_long_line)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    char path[64], expect[128];
    size_t cap = 20000, len = 0;
    char *text = malloc(cap);
    ck_assert_ptr_nonnull(text);
    /* Line 1: exactly 4095 characters (a comment): accepted. */
    text[len++] = '#';
    while (len < 4095)
        text[len++] = 'a';
    text[len++] = '\n';
    /* Line 2: 4096 characters, a value that would otherwise be good: skipped. */
    memcpy(text + len, "depth = 9", 9);
    len += 9;
    for (size_t i = 9; i < 4096; i++)
        text[len++] = ' ';
    text[len++] = '\n';
    /* Line 3: 10000 characters. */
    for (size_t i = 0; i < 10000; i++)
        text[len++] = 'x';
    text[len++] = '\n';
    /* Line 4: parsing goes on. */
    memcpy(text + len, "depth = 2\n", 10);
    len += 10;
    write_temp_n(path, text, len);
    free(text);
    uvmc_config_defaults(&c);
    ck_assert(uvmc_config_parse_file(&c, path, collect, &log));
    unlink(path);
    ck_assert_int_eq(log.n, 2);
    snprintf(expect, sizeof expect, "%s:2: line too long", path);
    ck_assert_ptr_eq(strstr(log.line[0], expect), log.line[0]);
    snprintf(expect, sizeof expect, "%s:3: line too long", path);
    ck_assert_ptr_eq(strstr(log.line[1], expect), log.line[1]);
    ck_assert_uint_eq(c.depth, 2);
}
END_TEST

START_TEST(file_missing)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    uvmc_config_defaults(&c);
    ck_assert(!uvmc_config_parse_file(&c, "/nonexistent/uvmchunk.conf", collect, &log));
    ck_assert_int_eq(log.n, 1);
    ck_assert_str_eq(log.line[0], "cannot open config /nonexistent/uvmchunk.conf: No such file or directory; using the defaults");
    assert_default(&c);
}
END_TEST

START_TEST(example_file)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    uvmc_config_defaults(&c);
    ck_assert(uvmc_config_parse_file(&c, UVMC_EXAMPLE_CONF, collect, &log));
    ck_assert_msg(log.n == 0, "example config: %s", log.line[0]);
    assert_default(&c); /* the shipped example documents the defaults */

    /* Every key appears in it, uncommented. */
    static const char *const keys[] = {"enabled", "threshold", "chunk_size", "depth",
                                       "prefetch", "log_level", "stats"};
    FILE *f = fopen(UVMC_EXAMPLE_CONF, "r");
    ck_assert_ptr_nonnull(f);
    char line[4096];
    unsigned seen = 0;
    while (fgets(line, sizeof line, f) != NULL)
        for (unsigned i = 0; i < 7; i++)
            if (strncmp(line, keys[i], strlen(keys[i])) == 0 && line[strlen(keys[i])] == ' ')
                seen |= 1u << i;
    fclose(f);
    ck_assert_uint_eq(seen, 0x7f);
}
END_TEST

/* ---- load ----------------------------------------------------------------------------------- */

START_TEST(load_missing_explicit)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    char *envp[] = {"PATH=/usr/bin", "UVMCHUNK_CONFIG=/nonexistent/x.conf", NULL};
    memset(&c, 0, sizeof c);
    uvmc_config_load(&c, envp, collect, &log);
    ck_assert_int_eq(log.n, 1);
    ck_assert_str_eq(log.line[0], "cannot open config /nonexistent/x.conf: No such file or directory; using the defaults");
    assert_default(&c);
}
END_TEST

START_TEST(load_env_wins)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    char path[64], cfgvar[96];
    write_temp(path, "depth = 8\nthreshold = 1MiB\nprefetch = host\nstats = on\n");
    snprintf(cfgvar, sizeof cfgvar, "UVMCHUNK_CONFIG=%s", path);
    char *envp[] = {"HOME=/root", "UVMCHUNK_DEPTH=12", cfgvar, "UVMCHUNK_CHUNK_SIZE= 2MiB ",
                    "UVMCHUNK_LOG_LEVEL=info", "UVMCHUNK_ENABLED=off", NULL};
    uvmc_config_load(&c, envp, collect, &log);
    unlink(path);
    ck_assert_int_eq(log.n, 0);
    ck_assert_uint_eq(c.depth, 12);                      /* env over file */
    ck_assert_uint_eq(c.threshold, (size_t)1 << 20);     /* file only */
    ck_assert_int_eq(c.prefetch, UVMC_PREFETCH_HOST);    /* file only */
    ck_assert(c.stats);                                  /* file only */
    ck_assert_uint_eq(c.chunk_size, (size_t)2 << 20);    /* env, trimmed */
    ck_assert_int_eq(c.log_level, UVMC_LOG_INFO);        /* env only */
    ck_assert(!c.enabled);                               /* env only */
}
END_TEST

START_TEST(load_env_bad_and_unknown)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    char path[64], cfgvar[96];
    write_temp(path, "depth = 8\n");
    snprintf(cfgvar, sizeof cfgvar, "UVMCHUNK_CONFIG=%s", path);
    char *envp[] = {cfgvar, "UVMCHUNK_FOO=1", "UVMCHUNK_DEPTH=0", "UVMCHUNKX=1", "UVMCHUNK_threshold=1",
                    "NOT_UVMCHUNK_DEPTH=3", NULL};
    uvmc_config_load(&c, envp, collect, &log);
    unlink(path);
    ck_assert_int_eq(log.n, 3);
    ck_assert_str_eq(log.line[0], "UVMCHUNK_FOO: unknown variable (a variable is UVMCHUNK_ + a key in capitals; known keys: " KEYS "); ignored");
    ck_assert_str_eq(log.line[1], "UVMCHUNK_DEPTH: bad value '0' for depth (1..64); keeping 8");
    ck_assert_str_eq(log.line[2], "UVMCHUNK_threshold: unknown variable (did you mean UVMCHUNK_THRESHOLD?); ignored");
    ck_assert_uint_eq(c.threshold, UVMC_DEFAULT_THRESHOLD); /* names are UVMCHUNK_ + key uppercased */
    ck_assert_uint_eq(c.depth, 8);
    ck_assert_uint_eq(c.threshold, UVMC_DEFAULT_THRESHOLD);
}
END_TEST

START_TEST(load_env_long_name)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    char var[300];
    memcpy(var, "UVMCHUNK_", 9);
    memset(var + 9, 'Z', 200);
    memcpy(var + 209, "=1", 3);
    char *envp[] = {"UVMCHUNK_CONFIG=", var, NULL};
    uvmc_config_load(&c, envp, collect, &log);
    ck_assert_int_eq(log.n, 1);
    ck_assert_ptr_nonnull(strstr(log.line[0], "UVMCHUNK_ZZZZ"));
    ck_assert_ptr_nonnull(strstr(log.line[0], "ZZZ...: unknown variable ("));
    ck_assert_ptr_nonnull(strstr(log.line[0], "); ignored"));
    assert_default(&c);
}
END_TEST

START_TEST(load_no_env)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    char *empty[] = {NULL};
    char *nofile[] = {"UVMCHUNK_CONFIG=", NULL}; /* empty: read no file at all */
    uvmc_config_load(&c, nofile, collect, &log);
    ck_assert_int_eq(log.n, 0);
    assert_default(&c);
    if (access("/etc/uvmchunk.conf", F_OK) != 0 && errno == ENOENT) {
        uvmc_config_load(&c, empty, collect, &log); /* absent system file: silent */
        ck_assert_int_eq(log.n, 0);
        assert_default(&c);
        uvmc_config_load(&c, NULL, collect, &log);
        ck_assert_int_eq(log.n, 0);
        assert_default(&c);
    }
}
END_TEST

START_TEST(non_regular_config_files_are_refused)
{
    /* A FIFO would block the open, /dev/zero would grow a line forever: one message each. */
    char dir[] = "/tmp/uvmc_cfg_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char fifo[64];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    const char *paths[] = {fifo, "/dev/zero", dir};
    for (size_t i = 0; i < 3; i++) {
        struct uvmc_config c;
        struct diag_log log = {0};
        uvmc_config_defaults(&c);
        ck_assert(!uvmc_config_parse_file(&c, paths[i], collect, &log));
        ck_assert_int_eq(log.n, 1);
        ck_assert_ptr_nonnull(strstr(log.line[0], paths[i]));
    }
    unlink(fifo);
    rmdir(dir);
}
END_TEST

START_TEST(launcher_variable_is_not_a_key)
{
    char *envp[] = {"UVMCHUNK_CONFIG=", "UVMCHUNK_LIB=/opt/libuvmchunk.so", NULL};
    struct uvmc_config c;
    struct diag_log log = {0};
    uvmc_config_load(&c, envp, collect, &log);
    ck_assert_int_eq(log.n, 0);
}
END_TEST

START_TEST(mistakes_a_newcomer_makes)
{
    struct uvmc_config c;
    struct diag_log log = {0};
    uvmc_config_defaults(&c);
    /* a negative size, a misspelt key (case too), a key that resembles nothing, a misspelt variable */
    ck_assert(!uvmc_config_set(&c, "threshold", "-5M", "f.conf:1", collect, &log));
    ck_assert_str_eq(log.line[0], "f.conf:1: bad value '-5M' for threshold (a whole number of bytes or of a unit, at least 1 byte, e.g. "
                                  "256MiB or 1536M); keeping 256MiB");
    ck_assert(!uvmc_config_set(&c, "Chunk_Sise", "1M", "f.conf:2", collect, &log));
    ck_assert_str_eq(log.line[1], "f.conf:2: unknown key 'Chunk_Sise' (did you mean 'chunk_size'?); ignored");
    ck_assert(!uvmc_config_set(&c, "colour", "red", "f.conf:3", collect, &log));
    ck_assert_str_eq(log.line[2], "f.conf:3: unknown key 'colour' (known keys: " KEYS "); ignored");
    char *envp[] = {"UVMCHUNK_CONFIG=", "UVMCHUNK_TRESHOLD=1M", "UVMCHUNK_THRESHOLD=abc", NULL};
    uvmc_config_load(&c, envp, collect, &log);
    ck_assert_str_eq(log.line[3], "UVMCHUNK_TRESHOLD: unknown variable (did you mean UVMCHUNK_THRESHOLD?); ignored");
    ck_assert_str_eq(log.line[4], "UVMCHUNK_THRESHOLD: bad value 'abc' for threshold (a whole number of bytes or of a "
                                  "unit, at least 1 byte, e.g. 256MiB or 1536M); keeping 256MiB");
    ck_assert_int_eq(log.n, 5);
    ck_assert_uint_eq(c.threshold, UVMC_DEFAULT_THRESHOLD);
}
END_TEST

/* ---- figures a person reads (config/units.c) ------------------------------------------------ */

START_TEST(units_bytes)
{
    static const struct {
        unsigned long long n;
        const char *text;
    } cases[] = {
        {0, "0 bytes"}, {1, "1 byte"}, {1023, "1023 bytes"}, {1024, "1 KiB"}, {1536, "1.50 KiB"},
        {(1ull << 20) - 1, "1024 KiB"}, {64ull << 20, "64 MiB"}, {67108865, "64.0 MiB"},
        {1610612736, "1.50 GiB"}, {200ull << 20, "200 MiB"}, {123456789, "118 MiB"}, {10ull << 30, "10 GiB"},
        {(10ull << 30) + 1, "10.0 GiB"}, {3ull << 40, "3 TiB"}, {~0ull, "16.0 EiB"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        ck_assert_str_eq(uvmc_bytes_text(cases[i].n).s, cases[i].text);
}
END_TEST

START_TEST(units_rates_and_plurals)
{
    ck_assert_str_eq(uvmc_rate_text(52.8e9, 1.0).s, "52.8 GB/s");
    ck_assert_str_eq(uvmc_rate_text(1e9, 2.0).s, "0.50 GB/s");
    ck_assert_str_eq(uvmc_rate_text(3e11, 1.0).s, "300 GB/s");
    ck_assert_str_eq(uvmc_rate_text(1e9, 0.0).s, "-");
    ck_assert_str_eq(uvmc_plural(1, "copy", "copies"), "copy");
    ck_assert_str_eq(uvmc_plural(0, "copy", "copies"), "copies");
    ck_assert_str_eq(uvmc_plural(2, "copy", "copies"), "copies");
    /* several in one call: each a temporary of its own */
    char line[96];
    snprintf(line, sizeof line, "%s of %s", uvmc_bytes_text(1).s, uvmc_bytes_text(2048).s);
    ck_assert_str_eq(line, "1 byte of 2 KiB");
}
END_TEST

/* ---- runner --------------------------------------------------------------------------------- */

static Suite *config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("size");
    tcase_add_loop_test(tc, size_good, 0, (int)(sizeof good_sizes / sizeof good_sizes[0]));
    tcase_add_loop_test(tc, size_bad, 0, (int)(sizeof bad_sizes / sizeof bad_sizes[0]));
    tcase_add_test(tc, size_null);
    suite_add_tcase(s, tc);

    tc = tcase_create("keys");
    tcase_add_test(tc, defaults);
    tcase_add_loop_test(tc, key_good, 0, (int)(sizeof good_values / sizeof good_values[0]));
    tcase_add_loop_test(tc, key_bad, 0, (int)(sizeof bad_values / sizeof bad_values[0]));
    tcase_add_test(tc, key_effects);
    tcase_add_test(tc, messages);
    tcase_add_test(tc, async_keys);
    tcase_add_test(tc, set_null);
    suite_add_tcase(s, tc);

    tc = tcase_create("file");
    tcase_add_test(tc, file_syntax);
    tcase_add_test(tc, file_one_diag_per_bad_line);
    tcase_add_test(tc, file_long_line);
    tcase_add_test(tc, file_missing);
    tcase_add_test(tc, example_file);
    suite_add_tcase(s, tc);

    tc = tcase_create("load");
    tcase_add_test(tc, load_missing_explicit);
    tcase_add_test(tc, load_env_wins);
    tcase_add_test(tc, load_env_bad_and_unknown);
    tcase_add_test(tc, load_env_long_name);
    tcase_add_test(tc, load_no_env);
    tcase_add_test(tc, non_regular_config_files_are_refused);
    tcase_add_test(tc, launcher_variable_is_not_a_key);
    tcase_add_test(tc, mistakes_a_newcomer_makes);
    suite_add_tcase(s, tc);

    tc = tcase_create("units");
    tcase_add_test(tc, units_bytes);
    tcase_add_test(tc, units_rates_and_plurals);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(config_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
