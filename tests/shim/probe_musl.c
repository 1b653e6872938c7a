/* probe-musl: a program of another C library (built with musl-gcc by test_musl.py) that starts
 * threads, reads its affinity, CPU count and /sys/devices/system/cpu/online, and forks; under the
 * glibc-built shim it must run exactly as without it. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <unistd.h>
static void* work(void* arg) { (void)arg; return NULL; }
int main(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; ++i) pthread_create(&t[i], NULL, work, NULL);
  for (int i = 0; i < 4; ++i) pthread_join(t[i], NULL);
  cpu_set_t set; CPU_ZERO(&set); sched_getaffinity(0, sizeof set, &set);
  FILE* f = fopen("/sys/devices/system/cpu/online", "r"); char line[64] = "?";
  if (f) { fgets(line, sizeof line, f); fclose(f); }
  if (fork() == 0) _exit(0);
  printf("threads=4 affinity=%d nprocs=%ld online=%s", CPU_COUNT(&set), sysconf(_SC_NPROCESSORS_ONLN), line);
  return 0;
}
