/* describe.c: uvmchunk-config: the configuration the library would read in this environment (file,
 * then UVMCHUNK_* variables), by the library's own parser. `python -m uvmchunk` runs it to show the
 * settings; uvmchunk-run runs it with --check to refuse a mistake before the command starts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "uvmc_config.h"

#ifndef UVMC_VERSION
#error "compile with -DUVMC_VERSION=\"x.y.z\" (config/CMakeLists.txt passes the project's version)"
#endif

extern char **environ;

static const char usage[] =
    "usage: uvmchunk-config [--check] [--config FILE]\n"
    "\n"
    "Prints the configuration libuvmchunk would use in this environment: FILE, else $UVMCHUNK_CONFIG,\n"
    "else /etc/uvmchunk.conf when present, then each UVMCHUNK_<KEY> variable. Every mistake (unknown\n"
    "key or variable, bad value, unreadable file) is one 'uvmchunk:' line on stderr, and the exit\n"
    "status is then 1.\n"
    "\n"
    "  --check        print nothing but the mistakes; exit 2 when there is one (uvmchunk-run runs this)\n"
    "  --config FILE  read FILE instead (as UVMCHUNK_CONFIG=FILE would)\n"
    "  --help         this text\n"
    "  --version      the version\n";

struct diags {
    unsigned count;
    int check; /* --check: the mistake only; nothing will run with it */
};

static void diag(void *ctx, const char *mistake, const char *consequence)
{
    struct diags *d = ctx;
    d->count++;
    if (d->check)
        fprintf(stderr, "uvmchunk: %s\n", mistake);
    else
        fprintf(stderr, "uvmchunk: %s; %s\n", mistake, consequence);
}

int main(int argc, char **argv)
{
    struct diags d = {0, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--check")) {
            d.check = 1;
        } else if (!strcmp(argv[i], "--config") && i + 1 < argc) {
            setenv("UVMCHUNK_CONFIG", argv[++i], 1);
        } else if (!strncmp(argv[i], "--config=", 9)) {
            setenv("UVMCHUNK_CONFIG", argv[i] + 9, 1);
        } else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        } else if (!strcmp(argv[i], "--version")) {
            printf("uvmchunk-config %s\n", UVMC_VERSION);
            return 0;
        } else {
            fprintf(stderr, "uvmchunk: uvmchunk-config: unknown argument '%s' (--help lists the options)\n", argv[i]);
            return 2;
        }
    }

    struct uvmc_config cfg;
    uvmc_config_load(&cfg, environ, diag, &d);
    if (d.check)
        return d.count ? 2 : 0;

    const char *file = getenv("UVMCHUNK_CONFIG");
    char line[1024 + 3 * UVMC_SPILL_DIR_MAX]; /* every key, async_spill_dir escaped and the report path included */
    uvmc_config_describe(&cfg, line, sizeof line);
    if (file == NULL)
        printf("config file: /etc/uvmchunk.conf (%s)\n",
               access("/etc/uvmchunk.conf", F_OK) == 0 ? "present" : "absent: built-in defaults");
    else
        printf("config file: %s\n", *file ? file : "none (UVMCHUNK_CONFIG is empty)");
    printf("configuration: %s\n", line);
    return d.count ? 1 : 0;
}
