/* procfs.h: one reader for the "Key:   value kB" lines of /proc/self/status and /proc/meminfo,
 * shared by the tests and the benchmarks that measure resident memory. */
#ifndef UVMC_PROCFS_H
#define UVMC_PROCFS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The value of `key` (without its colon, e.g. "VmRSS", "VmHWM", "MemAvailable") in `path`, in
 * KiB; -1 when the file or the key is missing. */
static inline long uvmc_proc_kib(const char *path, const char *key)
{
    FILE *f = fopen(path, "r");
    char line[256];
    long v = -1;
    size_t k = strlen(key);
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, k) && line[k] == ':')
            v = strtol(line + k + 1, NULL, 10);
    if (f)
        fclose(f);
    return v;
}

#endif
