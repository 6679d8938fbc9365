/* fuzz_config.c: libFuzzer target for the config parser (config/uvmc_config.h). One input is
 * used three ways: as a config file (uvmc_config_parse_file through a temp file), line by line as
 * `key=value` pairs (uvmc_config_set) and as UVMCHUNK_<KEY>=value environment entries
 * (uvmc_config_load), plus every line through uvmc_parse_size. Properties checked, beyond "no
 * crash, no leak, no UB" (the sanitizers): uvmc_config_set reports exactly one diagnostic when it
 * fails and none when it succeeds, and leaves cfg unchanged on failure; a file gets at most one
 * diagnostic per line; every diagnostic is one non-empty line; the result is always in range.
 *
 * Built with clang -fsanitize=fuzzer (UVMC_LIBFUZZER) by run_sanitizers.sh; without it, main()
 * replays the files named on the command line (the seed corpus, as a CTest). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uvmc_config.h"

struct diags {
    unsigned count;
    int bad; /* an empty or multi-line diagnostic */
};

static void on_diag(void *ctx, const char *line, const char *consequence)
{
    struct diags *d = ctx;
    d->count++;
    if (!line || !*line || strchr(line, '\n') || !consequence || !*consequence || strchr(consequence, '\n'))
        d->bad = 1;
}

static void fail(const char *why)
{
    fprintf(stderr, "fuzz_config: property violated: %s\n", why);
    abort();
}

static void check_range(const struct uvmc_config *c)
{
    if (c->depth < 1 || c->depth > UVMC_DEPTH_MAX)
        fail("depth out of 1..64");
    if (c->chunk_size < 4096 || c->chunk_size > ((size_t)1 << 40))
        fail("chunk_size out of 4 KiB..1 TiB");
    if ((unsigned)c->prefetch > UVMC_PREFETCH_DEVICE || (unsigned)c->log_level > UVMC_LOG_DEBUG)
        fail("enum out of range");
}

static void one_set(const char *key, const char *value)
{
    struct uvmc_config before, cfg;
    uvmc_config_defaults(&cfg);
    before = cfg;
    struct diags d = {0};
    bool ok = uvmc_config_set(&cfg, key, value, "fuzz:1", on_diag, &d);
    if (d.bad)
        fail("malformed diagnostic from uvmc_config_set");
    if (ok && d.count != 0)
        fail("uvmc_config_set succeeded but reported");
    if (!ok && d.count != 1)
        fail("uvmc_config_set failed without exactly one diagnostic");
    if (!ok && memcmp(&before, &cfg, sizeof cfg) != 0)
        fail("uvmc_config_set failed but changed the config");
    check_range(&cfg);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 1 << 16)
        return 0;
    /* 1. As a file. */
    char path[] = "/tmp/uvmc_fuzz_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0)
        return 0;
    if (write(fd, data, size) != (ssize_t)size) {
        close(fd);
        unlink(path);
        return 0;
    }
    close(fd);
    unsigned lines = 1;
    for (size_t i = 0; i < size; i++)
        lines += data[i] == '\n';
    struct uvmc_config cfg;
    uvmc_config_defaults(&cfg);
    struct diags d = {0};
    if (!uvmc_config_parse_file(&cfg, path, on_diag, &d))
        fail("an existing file could not be parsed");
    if (d.bad)
        fail("malformed diagnostic from parse_file");
    if (d.count > lines)
        fail("more diagnostics than lines");
    check_range(&cfg);

    /* 2. Line by line: key=value through uvmc_config_set; the line through uvmc_parse_size. 3. The
     * same lines as UVMCHUNK_ environment entries (UVMCHUNK_CONFIG pinned to our own file, so the
     * input never names a file to open). */
    char *text = malloc(size + 1);
    char **envp = calloc(lines + 2, sizeof *envp);
    char **owned = calloc(lines + 1, sizeof *owned);
    size_t nenv = 0;
    if (!text || !envp || !owned)
        goto out;
    memcpy(text, data, size);
    text[size] = 0;
    char cfgvar[64];
    snprintf(cfgvar, sizeof cfgvar, "UVMCHUNK_CONFIG=%s", path);
    envp[nenv++] = cfgvar;
    for (char *line = text, *next; line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = 0;
        size_t ignored;
        (void)uvmc_parse_size(line, &ignored);
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        size_t klen = (size_t)(eq - line);
        char *key = strndup(line, klen);
        if (key) {
            one_set(key, eq + 1);
            free(key);
        }
        if (klen == 6 && !strncasecmp(line, "CONFIG", 6))
            continue;
        char *e = malloc(strlen(line) + 10);
        if (!e)
            continue;
        sprintf(e, "UVMCHUNK_%s", line);
        owned[nenv - 1] = e;
        envp[nenv++] = e;
    }
    envp[nenv] = NULL;
    uvmc_config_load(&cfg, envp, on_diag, &d);
    check_range(&cfg);
    for (size_t i = 0; i + 1 < nenv; i++)
        free(owned[i]);
out:
    free(owned);
    free(envp);
    free(text);
    unlink(path);
    return 0;
}

#ifndef UVMC_LIBFUZZER
/* Replays each file named on the command line (CTest runs the seed corpus this way). */
int main(int argc, char **argv)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            fprintf(stderr, "fuzz_config: cannot open %s\n", argv[i]);
            return 1;
        }
        static uint8_t buf[1 << 16];
        size_t len = fread(buf, 1, sizeof buf, f);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, len);
        n++;
    }
    printf("fuzz_config: %d inputs replayed, every property held\n", n);
    return 0;
}
#endif
