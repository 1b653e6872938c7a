// A runtime that sizes its pool from the CPU files, as inference runtimes do with Debian's
// libcpuinfo (which reads /sys/devices/system/cpu/{possible,present}, cpuN/topology and
// /proc/cpuinfo, never sysconf): one worker per processor cpuinfo reports. Prints
// {"processors": P, "cores": C, "pool": threads started, "core_of": {"linux id": core index}}.
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
  // Which core libcpuinfo puts each processor in (by Linux CPU number): it decodes cores from the
  // APIC ids and CPUID's topology, so a VM whose CPUID claims SMT makes two Linux cores one.
  printf("{\"processors\": %u, \"cores\": %u, \"pool\": %u, \"core_of\": {", processors,
         cpuinfo_get_cores_count(), pool);
  const struct cpuinfo_core* first_core = cpuinfo_get_core(0);
  for (unsigned i = 0; i < processors; ++i) {
    const struct cpuinfo_processor* p = cpuinfo_get_processor(i);
    printf("%s\"%d\": %ld", i ? ", " : "", p->linux_id, (long)(p->core - first_core));
  }
  printf("}}\n");
  return 0;
}
