/* uvmc_units.h: sizes, rates and counts as a person reads them ("1.50 GiB", "12.3 GB/s", "1 copy"),
 * shared by the library's messages, uvmchunk-config and the tools. No allocation, no locale. */
#ifndef UVMC_UNITS_H
#define UVMC_UNITS_H

/* Big enough for any value below: "1023.99 TiB", "123456789 GB/s". Returned by value, so several
 * can appear in one printf (a temporary lives until the end of the full expression, C11 6.2.4). */
struct uvmc_text {
    char s[32];
};

/* Bytes in binary units: "0 bytes", "1 byte", "512 bytes", "4 KiB", "200 MiB", "1.50 GiB", "12.3 GiB":
 * exact units print as integers, others with three significant digits. */
struct uvmc_text uvmc_bytes_text(unsigned long long n);

/* A rate in decimal gigabytes per second, as CUDA's bandwidth figures are quoted: "52.8 GB/s",
 * "0.85 GB/s"; "-" when seconds is not positive. */
struct uvmc_text uvmc_rate_text(double bytes, double seconds);

/* `one` when n is 1, else `many`: "1 copy", "2 copies", "0 copies". */
const char *uvmc_plural(unsigned long long n, const char *one, const char *many);

#endif
