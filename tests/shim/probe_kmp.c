/* shim-probe-kmp: LLVM/Intel OpenMP (libomp, built with clang -fopenmp): num_threads(N) becomes
 * __kmpc_push_num_threads; N == 0: omp_set_num_threads(64) and a region without a clause.
 * Prints {"team":T,"members":[[cpus],...]} with each member's Cpus_allowed_list. */
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "thread_mask.h"

static char masks[256][128];
static int team;

static void body(void) {
  int me = omp_get_thread_num();
  if (me < 256) thread_allowed_list(masks[me], sizeof masks[me]);
#pragma omp barrier
#pragma omp single
  team = omp_get_num_threads();
}

int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 64;
  if (n > 0) {
#pragma omp parallel num_threads(n)
    body();
  } else {
    omp_set_num_threads(64);
#pragma omp parallel
    body();
  }
  printf("{\"team\":%d,\"members\":[", team);
  for (int i = 0; i < team && i < 256; ++i) printf("%s\"%s\"", i ? "," : "", masks[i]);
  printf("]}\n");
  return 0;
}
