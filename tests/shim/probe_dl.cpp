// shim-probe-dl: a program without OpenMP that loads an OpenMP library at run time.
//   shim-probe-dl PLUGIN local|global N   dlopen PLUGIN, run a region with num_threads(N)
//   shim-probe-dl absent                  call the BLAS/OpenMP hooks when no runtime is loaded
//   shim-probe-dl ctor PLUGIN             dlopen a library whose constructor waits for a thread
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>

namespace {

bool libgomp_loaded() {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("libgomp") != std::string::npos) return true;
  return false;
}

template <typename F>
F sym(void* handle, const char* name) {
  void* p = dlsym(handle, name);
  F f;
  std::memcpy(&f, &p, sizeof f);
  return f;
}

int g_calls = 0;
void count_call(void*) { ++g_calls; }

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && std::strcmp(argv[1], "absent") == 0) {
    // Whatever the shim exports must be harmless when nothing implements it.
    int n = 64;
    if (auto f = sym<void (*)(int)>(RTLD_DEFAULT, "openblas_set_num_threads")) f(64);
    if (auto f = sym<void (*)(int)>(RTLD_DEFAULT, "goto_set_num_threads")) f(64);
    if (auto f = sym<void (*)(int)>(RTLD_DEFAULT, "MKL_Set_Num_Threads")) f(64);
    if (auto f = sym<void (*)(const int*)>(RTLD_DEFAULT, "mkl_set_num_threads")) f(&n);
    if (auto f = sym<void (*)(const int*)>(RTLD_DEFAULT, "mkl_set_num_threads_")) f(&n);
    if (auto f = sym<void (*)(int)>(RTLD_DEFAULT, "omp_set_num_threads")) f(64);
    if (auto f = sym<void (*)(void*, int, int)>(RTLD_DEFAULT, "__kmpc_push_num_threads"))
      f(nullptr, 0, 64);
    int ran = -1;
    if (auto f = sym<void (*)(void (*)(void*), void*, unsigned, unsigned)>(RTLD_DEFAULT,
                                                                           "GOMP_parallel")) {
      f(count_call, nullptr, 4, 0);
      ran = g_calls;
    }
    std::printf("{\"ok\":true,\"gomp_parallel_body_runs\":%d,\"libgomp_loaded\":%s}\n", ran,
                libgomp_loaded() ? "true" : "false");
    return 0;
  }
  if (argc == 3 && std::strcmp(argv[1], "ctor") == 0) {
    // The library's constructor does its work in another thread while dlopen holds its lock.
    void* handle = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      std::fprintf(stderr, "dlopen: %s\n", dlerror());
      return 1;
    }
    auto result = sym<int (*)(int)>(handle, "ctor_result");
    std::printf("{\"ctor_team\":%d,\"ctor_blas\":%d}\n", result(0), result(1));
    return 0;
  }
  if (argc < 4) {
    std::fprintf(stderr, "usage: shim-probe-dl PLUGIN local|global N | absent\n");
    return 2;
  }
  const bool before = libgomp_loaded();
  const int flags = RTLD_NOW | (std::strcmp(argv[2], "global") == 0 ? RTLD_GLOBAL : RTLD_LOCAL);
  void* handle = dlopen(argv[1], flags);
  if (handle == nullptr) {
    std::fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  auto team = sym<int (*)(int, char*, int)>(handle, "plugin_team");
  auto omp_set = sym<int (*)(int)>(handle, "plugin_omp_set");
  auto blas = sym<int (*)(int)>(handle, "plugin_blas");
  auto mkl_ref = sym<int (*)(int)>(handle, "plugin_mkl_ref");
  auto blas_last = sym<int (*)(int)>(handle, "fakeblas_last");  // -1: never set
  static char buf[1 << 16];
  team(std::atoi(argv[3]), buf, sizeof buf);
  const int team_after_set = omp_set(64);
  blas(64);
  mkl_ref(64);
  std::printf(
      "{\"libgomp_before\":%s,\"libgomp_after\":%s,\"region\":%s,\"team_after_omp_set_64\":%d,"
      "\"openblas_got\":%d,\"mkl_got\":%d,\"mkl_ref_got\":%d}\n",
      before ? "true" : "false", libgomp_loaded() ? "true" : "false", buf, team_after_set,
      blas_last(0), blas_last(2), blas_last(3));
  return 0;
}
