// Micro-costs for bench/shim_bench.py: pthread_create+join of a trivial thread, and an empty
// OpenMP parallel region of 2 threads (the GOMP_parallel hook's per-region cost).
// Prints: create_join_ns=<median> omp_region_ns=<median>
#include <omp.h>
#include <pthread.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {
void* nothing(void*) { return nullptr; }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 20000;
  using clock = std::chrono::steady_clock;
  std::vector<double> create(n), region(n);
  for (int i = 0; i < 200; ++i) {  // warm-up
    pthread_t t;
    pthread_create(&t, nullptr, nothing, nullptr);
    pthread_join(t, nullptr);
  }
  for (int i = 0; i < n; ++i) {
    pthread_t t;
    const auto t0 = clock::now();
    pthread_create(&t, nullptr, nothing, nullptr);
    pthread_join(t, nullptr);
    create[i] = std::chrono::duration<double, std::nano>(clock::now() - t0).count();
  }
  volatile int sink = 0;
  for (int i = 0; i < 200; ++i) {
#pragma omp parallel num_threads(2)
    sink = sink + 1;
  }
  for (int i = 0; i < n; ++i) {
    const auto t0 = clock::now();
#pragma omp parallel num_threads(2)
    sink = sink + 1;
    region[i] = std::chrono::duration<double, std::nano>(clock::now() - t0).count();
  }
  std::printf("create_join_ns=%.0f omp_region_ns=%.0f\n", median(create), median(region));
  return 0;
}
