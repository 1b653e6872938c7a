// The oversubscription workload of bench/shim_bench.py: M inter-op std::threads, each running
// many short OpenMP regions of real compute (matrix-vector products: each region runs LOOPS
// worksharing loops over ROWS x 256 floats; ~200-250 us per region on one core for
// ROWS x LOOPS = 2048). Team sizes come from the environment (OMP_NUM_THREADS) or the shim.
//
//   shim_bench_workload [--lanes M] [--regions R] [--rows ROWS] [--loops LOOPS] [--pin CPU,...]
// --pin: inter-op thread i pins itself to the i-th CPU by hand (the "well-configured" baseline).
// Prints: wall_s=<seconds> region_us=<mean per region per lane> checksum=<...>
#include <omp.h>
#include <pthread.h>
#include <sched.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

int kRows = 1024, kCols = 256, kRepsPerRegion = 2;

double lane(int id, int regions) {
  std::vector<float> a(static_cast<size_t>(kRows) * kCols), x(kCols), y(kRows);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>((i * 7 + id) % 13) * 0.01f;
  for (int j = 0; j < kCols; ++j) x[j] = 1.0f / static_cast<float>(j + 1);
  double sum = 0;
  for (int r = 0; r < regions; ++r) {
#pragma omp parallel
    {
      for (int rep = 0; rep < kRepsPerRegion; ++rep) {
#pragma omp for schedule(static)
        for (int i = 0; i < kRows; ++i) {
          const float* row = &a[static_cast<size_t>(i) * kCols];
          float acc = 0;
#pragma omp simd reduction(+ : acc)
          for (int j = 0; j < kCols; ++j) acc += row[j] * x[j];
          y[i] = acc;
        }
      }
    }
    // Feed the result back so no region can be skipped.
    for (int j = 0; j < kCols; ++j) x[j] = 0.5f * x[j] + 1e-4f * y[(j * 4) % kRows];
    sum += y[r % kRows];
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  int lanes = 2, regions = 2000;
  std::vector<int> pin;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--lanes") && i + 1 < argc)
      lanes = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--regions") && i + 1 < argc)
      regions = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--rows") && i + 1 < argc)
      kRows = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--loops") && i + 1 < argc)
      kRepsPerRegion = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--pin") && i + 1 < argc) {
      std::string list = argv[++i];
      for (size_t p = 0; p != std::string::npos;) {
        const size_t comma = list.find(',', p);
        pin.push_back(std::atoi(list.substr(p, comma - p).c_str()));
        p = comma == std::string::npos ? comma : comma + 1;
      }
    }
  }
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<double> sums(lanes);
  std::vector<std::thread> threads;
  for (int l = 0; l < lanes; ++l) {
    threads.emplace_back([&, l] {
      if (!pin.empty()) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(pin[static_cast<size_t>(l) % pin.size()], &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
      }
      lane(l, 3);  // warm-up: runtime start, pools created, caches warm
      ready.fetch_add(1);
      while (!go.load()) std::this_thread::yield();
      sums[l] = lane(l, regions);
    });
  }
  while (ready.load() < lanes) std::this_thread::yield();
  const auto t0 = std::chrono::steady_clock::now();
  go.store(true);
  for (auto& t : threads) t.join();
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  double checksum = 0;
  for (double s : sums) checksum += s;
  std::printf("wall_s=%.6f region_us=%.1f checksum=%.6g\n", wall, wall * 1e6 / regions, checksum);
  return 0;
}
