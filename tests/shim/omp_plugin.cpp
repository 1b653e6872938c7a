// A library built with -fopenmp that a probe (or Python, through ctypes) dlopen()s at run time,
// like an extension module: libgomp arrives with it, after the program (and the shim) started.
#include <omp.h>

#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "probe_util.hpp"

extern "C" {
void openblas_set_num_threads(int n);
void MKL_Set_Num_Threads(int n);
void mkl_set_num_threads(const int* n);
int fakeblas_last(int which);

// Runs one region with num_threads(n) (n == 0: no clause) and writes
// {"team":T,"members":[mask,...],"master_after":mask} into out.
__attribute__((visibility("default"))) int plugin_team(int n, char* out, int len) {
  std::vector<std::vector<int>> masks;
  std::mutex mu;
  auto body = [&] {
    auto m = probe::my_allowed();
#pragma omp barrier
    std::lock_guard<std::mutex> lock(mu);
    masks.push_back(std::move(m));
  };
  probe::run_team(n, body);
  std::string s = "{\"team\":" + std::to_string(masks.size()) + ",\"members\":[";
  for (size_t i = 0; i < masks.size(); ++i) s += (i ? "," : "") + probe::json(masks[i]);
  s += "],\"master_after\":" + probe::json(probe::my_allowed()) + "}";
  std::snprintf(out, static_cast<size_t>(len), "%s", s.c_str());
  return static_cast<int>(masks.size());
}

// omp_set_num_threads(n), then a region without a clause: its team size.
__attribute__((visibility("default"))) int plugin_omp_set(int n) {
  omp_set_num_threads(n);
  int team = 0;
#pragma omp parallel
  {
#pragma omp single
    team = omp_get_num_threads();
  }
  return team;
}

// What the (locally loaded) BLAS receives when this library asks for n threads.
__attribute__((visibility("default"))) int plugin_blas(int n) {
  openblas_set_num_threads(n);
  MKL_Set_Num_Threads(n);
  return fakeblas_last(0) * 1000 + fakeblas_last(2);
}

// The same through MKL's by-reference mkl_set_num_threads(&n).
__attribute__((visibility("default"))) int plugin_mkl_ref(int n) {
  mkl_set_num_threads(&n);
  return fakeblas_last(3);
}
}
