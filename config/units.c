/* units.c: the figures a person reads (uvmc_units.h): binary sizes, decimal GB/s, plurals. */
#include "uvmc_units.h"

#include <stdio.h>

/* Three significant digits: "1.50", "12.3", "456". */
static void uvmc_three_digits(double v, const char *unit, struct uvmc_text *t)
{
    const char *fmt = v >= 99.95 ? "%.0f %s" : v >= 9.995 ? "%.1f %s" : "%.2f %s";
    snprintf(t->s, sizeof t->s, fmt, v, unit);
}

struct uvmc_text uvmc_bytes_text(unsigned long long n)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    struct uvmc_text t;
    if (n < 1024) {
        snprintf(t.s, sizeof t.s, "%llu %s", n, uvmc_plural(n, "byte", "bytes"));
        return t;
    }
    unsigned i = 0;
    while (i + 1 < sizeof units / sizeof units[0] && n >> (10 * (i + 2)) != 0)
        i++;
    unsigned shift = 10 * (i + 1);
    if ((n & ((1ull << shift) - 1)) == 0)
        snprintf(t.s, sizeof t.s, "%llu %s", n >> shift, units[i]);
    else
        uvmc_three_digits((double)n / (double)(1ull << shift), units[i], &t);
    return t;
}

struct uvmc_text uvmc_rate_text(double bytes, double seconds)
{
    struct uvmc_text t;
    if (!(seconds > 0) || !(bytes >= 0))
        snprintf(t.s, sizeof t.s, "-");
    else
        uvmc_three_digits(bytes / seconds / 1e9, "GB/s", &t);
    return t;
}

const char *uvmc_plural(unsigned long long n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}
