// A library whose constructor starts a thread and waits for it, while dlopen() holds the loader
// lock. That thread creates a thread, leads its first OpenMP region and calls a BLAS setter: if
// any hook took the loader lock (dlsym, dladdr, dlopen) the program would deadlock.
#include <omp.h>

#include <thread>

extern "C" {
void openblas_set_num_threads(int n);
int fakeblas_last(int which);
}

namespace {
int g_team = -1, g_blas = -1;

__attribute__((constructor)) void start_and_wait() {
  std::thread t([] {
    std::thread inner([] {});
    inner.join();
    int team = 0;
#pragma omp parallel num_threads(64)
    {
#pragma omp single
      team = omp_get_num_threads();
    }
    g_team = team;
    openblas_set_num_threads(64);
    g_blas = fakeblas_last(0);
  });
  t.join();
}
}  // namespace

extern "C" __attribute__((visibility("default"))) int ctor_result(int which) {
  return which == 0 ? g_team : g_blas;
}
