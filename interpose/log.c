/* log.c: one-line messages on stderr, prefixed "uvmchunk: ", each written with a single write(2)
 * so lines from several threads or ranks never interleave. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "uvmc.h"

void uvmc_log(enum uvmc_log_level level, const char *fmt, ...)
{
    if (!UVMC_LOG_ON(level))
        return;
    char line[512];
    int n = snprintf(line, sizeof line, "uvmchunk: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
    if (len > sizeof line - 2)
        len = sizeof line - 2; /* truncated: keep room for the newline */
    line[len++] = '\n';
    ssize_t w = write(STDERR_FILENO, line, len);
    (void)w; /* nowhere better to report a failed diagnostic */
}
