// Another LD_PRELOAD interposer (a profiler, a tracer) in front of the BLAS/OpenMP entry points
// the shim hooks: each wrapper forwards to the next definition. How it finds it is chosen with
// INTERPOSER_FIND (read at every call):
//   next     dlsym(RTLD_NEXT), the usual way; placed before the shim, that is the shim
//   default  dlsym(RTLD_DEFAULT), RTLD_NEXT only when that is itself; placed after the shim, that
//            is the shim again (the loop the shim's recursion guard must stop)
// Like a profiler, each wrapper does its bookkeeping after the call (so it is no tail call and the
// next definition sees the wrapper as its caller). At exit it writes "interposer: forwarded=N"
// (calls that came back) to stderr, so a test sees it was in the path.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

static unsigned forwarded;  // the tests call the wrappers from one thread

// Is `p` in this library? (Its own exported names may be bound elsewhere: not -Bsymbolic.)
static int in_this_object(void* p) {
  Dl_info a, b;
  return dladdr(p, &a) != 0 && dladdr((void*)&forwarded, &b) != 0 && a.dli_fbase == b.dli_fbase;
}

static void* next_of(const char* name) {
  const char* how = getenv("INTERPOSER_FIND");
  void* p = dlsym(how != NULL && strcmp(how, "default") == 0 ? RTLD_DEFAULT : RTLD_NEXT, name);
  if (p != NULL && in_this_object(p)) p = dlsym(RTLD_NEXT, name);
  return p;
}

// ISO C has no conversion from void* to function pointers; POSIX guarantees it works.
#define NEXT(var, name)               \
  do {                                \
    void* p_ = next_of(name);         \
    memcpy(&(var), &p_, sizeof(var)); \
  } while (0)

// A wrapper of `name` taking `params`, forwarding `args` to the next definition.
#define WRAP(name, params, args) \
  EXPORT void name params;       \
  EXPORT void name params {      \
    void(*next) params;          \
    NEXT(next, #name);           \
    if (next != NULL) next args; \
    ++forwarded;                 \
  }

WRAP(mkl_set_num_threads, (const int* n), (n))
WRAP(openblas_set_num_threads, (int n), (n))
WRAP(omp_set_num_threads, (int n), (n))
WRAP(GOMP_parallel, (void (*fn)(void*), void* data, unsigned num_threads, unsigned flags),
     (fn, data, num_threads, flags))

__attribute__((destructor)) static void report(void) {
  char line[64] = "interposer: forwarded=";
  size_t n = strlen(line);
  char digits[16];
  int k = 0;
  unsigned v = forwarded;
  do {
    digits[k++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (k > 0) line[n++] = digits[--k];
  line[n++] = '\n';
  if (write(2, line, n) < 0) return;
}
