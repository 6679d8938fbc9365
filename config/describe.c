/* describe.c: uvmchunk-config: prints the configuration the library would read in this environment
 * (file, then UVMCHUNK_* variables), with the library's own parser; `python -m uvmchunk` runs it. */
#include <stdio.h>
#include <stdlib.h>

#include "uvmc_config.h"

extern char **environ;

static void diag(void *ctx, const char *line)
{
    (void)ctx;
    fprintf(stderr, "uvmchunk: %s\n", line);
}

int main(void)
{
    struct uvmc_config cfg;
    uvmc_config_load(&cfg, environ, diag, NULL);
    const char *file = getenv("UVMCHUNK_CONFIG");
    char line[512];
    uvmc_config_describe(&cfg, line, sizeof line);
    printf("config file: %s\n", file ? (*file ? file : "(none: UVMCHUNK_CONFIG is empty)") : "/etc/uvmchunk.conf if present");
    printf("configuration: %s\n", line);
    return 0;
}
