// A runtime that sizes its pool from the CPU files, as inference runtimes do with Debian's
// libcpuinfo (which reads /sys/devices/system/cpu/{possible,present}, cpuN/topology and
// /proc/cpuinfo, never sysconf): one worker per processor cpuinfo reports. Prints
// {"processors": P, "cores": C, "pool": threads started}.
#include <cpuinfo.h>
#include <pthread.h>
#include <stdio.h>

static void* worker(void* arg) { return arg; }

int main(void) {
  if (!cpuinfo_initialize()) {
    fprintf(stderr, "cpuinfo_initialize failed\n");
    return 1;
  }
  const unsigned processors = cpuinfo_get_processors_count();
  unsigned pool = 0;
  pthread_t threads[1024];
  for (unsigned i = 0; i < processors && i < 1024; ++i) {
    if (pthread_create(&threads[i], NULL, worker, NULL) == 0) ++pool;
  }
  for (unsigned i = 0; i < pool; ++i) pthread_join(threads[i], NULL);
  printf("{\"processors\": %u, \"cores\": %u, \"pool\": %u}\n", processors,
         cpuinfo_get_cores_count(), pool);
  return 0;
}
