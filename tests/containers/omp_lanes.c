/* omp-lanes: the OpenMP program the container test runs inside Apptainer images, compiled there
 * with the image's own gcc and glibc. LANES threads (argv[1], default 2) each start, at the same
 * time, a parallel region asking for 64 threads (as a TensorFlow inter-op thread calling an OpenMP
 * kernel would); each member records the CPUs it may run on. Prints
 *   nprocs=N online=LIST omp_num_threads=VALUE|unset
 *   lane=I team=T masks=M0;M1;...
 * The CPU count and /sys/devices/system/cpu/online show the shim's view when it is loaded. */
#define _GNU_SOURCE
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../shim/thread_mask.h"

#define MAX_LANES 16
#define MAX_TEAM 64

static pthread_barrier_t start_together;
static char masks[MAX_LANES][MAX_TEAM][64];
static int teams[MAX_LANES];

static void* lane(void* arg) {
  const int me = (int)(long)arg;
  pthread_barrier_wait(&start_together);
#pragma omp parallel num_threads(MAX_TEAM)
  {
    const int t = omp_get_thread_num();
    if (t < MAX_TEAM) thread_allowed_list(masks[me][t], sizeof masks[me][t]);
#pragma omp single
    teams[me] = omp_get_num_threads();
  }
  return NULL;
}

int main(int argc, char** argv) {
  int lanes = argc > 1 ? atoi(argv[1]) : 2;
  if (lanes < 1 || lanes > MAX_LANES) {
    fprintf(stderr, "omp-lanes: LANES must be 1..%d, not %s\n", MAX_LANES, argv[1]);
    return 2;
  }
  char online[256] = "?";
  FILE* f = fopen("/sys/devices/system/cpu/online", "r");
  if (f) {
    if (fgets(online, sizeof online, f)) online[strcspn(online, "\n")] = '\0';
    fclose(f);
  }
  const char* omp = getenv("OMP_NUM_THREADS");
  printf("nprocs=%ld online=%s omp_num_threads=%s\n", sysconf(_SC_NPROCESSORS_ONLN), online,
         omp ? omp : "unset");
  pthread_t threads[MAX_LANES];
  pthread_barrier_init(&start_together, NULL, (unsigned)lanes);
  for (int i = 0; i < lanes; ++i) pthread_create(&threads[i], NULL, lane, (void*)(long)i);
  for (int i = 0; i < lanes; ++i) pthread_join(threads[i], NULL);
  for (int i = 0; i < lanes; ++i) {
    printf("lane=%d team=%d masks=", i, teams[i]);
    for (int t = 0; t < teams[i] && t < MAX_TEAM; ++t) printf("%s%s", t ? ";" : "", masks[i][t]);
    printf("\n");
  }
  return 0;
}
