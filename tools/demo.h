/* demo.h: what uvmchunk-demo's two files share. */
#ifndef UVMC_DEMO_H
#define UVMC_DEMO_H

#include <stddef.h>

/* The caching host allocator rounds every request up to a power of two (aten/src/ATen/core/CachingHostAllocator.h). */
size_t uvmc_next_pow2(size_t n);
/* --compare: runs this program with --report without and with the library; prints the table. */
int uvmc_demo_compare(const char *size_arg, size_t size);

#endif
