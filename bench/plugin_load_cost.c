/* What loading tfpin.so costs srun, sbatch and slurmstepd before any hook runs: dlopen() of the
 * plugin and every library it links (libstdc++, hwloc, libudev, libnuma, fmt), in a fresh child
 * process each time, whose only library is libc (as in srun, which loads no C++ runtime).
 * The spank_* and slurm_* functions Slurm gives a plugin are stubs here (the plugin is linked
 * with BIND_NOW). Not a test: prints the median and 90th percentile.
 *     ninja -C build bench/plugin-load-cost
 *     flock /tmp/tfpin-cpu.lock build/bench/plugin-load-cost build/plugin/tfpin.so [RUNS] */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Stubs of what the loading process provides (never called here). */
int spank_context(void) { return 0; }
int spank_get_item(void* s, int item, ...) {
  (void)s;
  (void)item;
  return 1;
}
int spank_getenv(void* s, const char* v, char* b, int l) {
  (void)s;
  (void)v;
  (void)b;
  (void)l;
  return 1;
}
int spank_setenv(void* s, const char* v, const char* x, int o) {
  (void)s;
  (void)v;
  (void)x;
  (void)o;
  return 1;
}
int spank_unsetenv(void* s, const char* v) {
  (void)s;
  (void)v;
  return 1;
}
int spank_option_register(void* s, void* o) {
  (void)s;
  (void)o;
  return 1;
}
void slurm_error(const char* f, ...) { (void)f; }
void slurm_info(const char* f, ...) { (void)f; }

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec * 1e-3;
}

static int by_value(const void* a, const void* b) {
  const double x = *(const double*)a, y = *(const double*)b;
  return (x > y) - (x < y);
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s PLUGIN.so [RUNS]\n", argv[0]);
    return 2;
  }
  const int runs = argc > 2 ? atoi(argv[2]) : 40;
  double* times = calloc((size_t)(runs > 0 ? runs : 1), sizeof *times);
  int n = 0;
  for (int i = 0; i < runs; ++i) {
    int out[2];
    if (pipe(out) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      const double t0 = now_us();
      void* handle = dlopen(argv[1], RTLD_LAZY | RTLD_LOCAL);
      double us = now_us() - t0;
      if (handle == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        us = -1;
      }
      if (write(out[1], &us, sizeof us) != sizeof us) _exit(1);
      _exit(0);
    }
    close(out[1]);
    double us = -1;
    if (read(out[0], &us, sizeof us) != sizeof us) us = -1;
    close(out[0]);
    waitpid(pid, NULL, 0);
    if (us < 0) return 1;
    times[n++] = us;
  }
  qsort(times, (size_t)n, sizeof *times, by_value);
  printf("dlopen(%s) in a fresh process: median %.0f us, p90 %.0f us (%d runs)\n", argv[1],
         times[n / 2], times[(n * 9) / 10 < n ? (n * 9) / 10 : n - 1], n);
  free(times);
  return 0;
}
