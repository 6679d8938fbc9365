/* bench.h: what the parts of uvmchunk-bench share: the program's own path and the runner of its
 * child processes (bench.c), and the memory/throughput modes (memory.c). */
#ifndef UVMC_BENCH_H
#define UVMC_BENCH_H

#include <stddef.h>

/* This program's path, for re-executing itself as `--child MODE ...`. */
extern const char *uvmc_bench_self;

/* Runs argv with LD_PRELOAD set to lib (or removed), UVMCHUNK_CONFIG empty, the NULL-terminated
 * extra_env ("NAME=value") added, stdout captured into out (outsz bytes). Returns the exit status. */
int uvmc_bench_run_child(char *const argv[], const char *lib, char *const extra_env[], char *out, size_t outsz);

/* Median, smallest and largest of v[0..n) (sorts v): timing figures are medians of several runs. */
void uvmc_bench_spread(double *v, int n, double *median, double *lo, double *hi);

/* Children: one checkpoint sequence (sizes 1:7:33 of a `table`-byte managed table), one copy. */
/* FBGEMM's advice on its tables (torchrec#3399): preferred location CPU, accessed by the GPU. */
void uvmc_bench_fbgemm_advice(void *p, size_t n);
int uvmc_bench_child_memory(size_t table);
int uvmc_bench_child_throughput(size_t n);
/* Drivers: run the children without and with lib and print their table. 0 when all ran. */
int uvmc_bench_memory(const char *lib, size_t table);
int uvmc_bench_throughput(const char *lib, size_t n);

#endif
