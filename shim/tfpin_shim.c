// libtfpin-shim.so: applies a tfpin plan inside a process (LD_PRELOAD).
//
// The plan arrives in the environment (docs/design.md "The plan"):
//   TFPIN_CPUS     the task's CPUs in lane order ("0-17,18-35", "18,19,0,1"; A-B may descend)
//   TFPIN_INTEROP  M lanes;  TFPIN_INTRA  threads per lane;  lane i = entries [i*intra,
//   (i+1)*intra) TFPIN_REPORT   optional: "stderr" or a file path for a one-line summary at exit
// No TFPIN_CPUS: the shim forwards every call untouched and prints nothing. An inconsistent plan
// (bad syntax, duplicates, len(cpus) != M*intra): the same, plus one line if TFPIN_REPORT is set.
//
// What it enforces (docs/design.md "How the shim enforces it"), and how:
//  * CPU count: sysconf(_SC_NPROCESSORS_ONLN) and get_nprocs() return N = len(TFPIN_CPUS);
//    sched_getaffinity / pthread_getaffinity_np on any thread of this process report the plan set.
//    The "configured" count (_SC_NPROCESSORS_CONF, get_nprocs_conf) stays the machine's: programs
//    size per-CPU arrays with it and index them with sched_getcpu(), so it bounds CPU ids, and is
//    never below the highest plan CPU + 1.
//  * OpenMP team sizes <= intra: omp_set_num_threads, GOMP_parallel* (num_threads argument; 0 =
//    nthreads-var, checked with the runtime's own omp_get_max_threads), __kmpc_push_num_threads;
//    BLAS setters MKL_Set_Num_Threads / mkl_set_num_threads(_) (by reference: MKL's lowercase
//    symbols are the Fortran entry points) / openblas_set_num_threads / goto_set_num_threads.
//  * Lanes: a thread that starts OpenMP regions (GOMP_parallel*, __kmpc_push_num_threads, or
//    creating a thread whose start routine lies in libgomp/libomp/libiomp5, found by address
//    among the loaded objects)
//    becomes a team master: it gets the least-loaded lane (round-robin among equals) and is pinned
//    to the least-occupied core of that lane (core 0 for the first master). The threads it creates
//    with an OpenMP start routine are its workers: each is pinned to the least-occupied core of
//    the same lane, so a team of intra threads lies one per core; extra/nested workers wrap.
//  * Every other thread created with pthread_create is explicitly given the full plan set (or the
//    plan set intersected with an affinity its pthread_attr asked for), so nothing inherits a
//    master's single core.
//  * sched_setaffinity / pthread_setaffinity_np on this process's threads are intersected with the
//    plan set. An empty intersection is replaced by the full plan set and the call succeeds
//    ("escape refused"): fail-open, the program keeps running inside its cores. When an OpenMP
//    runtime re-binds a thread the shim put on a lane (libomp/libiomp5 reset every worker to their
//    "full mask" as it starts; KMP_AFFINITY / OMP_PROC_BIND places), the lane pin is kept.
//  * libc's syscall() for SYS_sched_getaffinity / SYS_sched_setaffinity gets the same treatment:
//    LLVM and Intel OpenMP read and set masks through it, not through the wrappers.
//  * fork: the child's counters, lanes and core occupancy start over (pthread_atfork); exec: the
//    plan travels in the environment and the new image's shim binds its initial thread to it.
//
// House rules: typed dlsym(RTLD_NEXT) pointers resolved once (an atomic once of the shim's own:
// pthread_once is intercepted by sanitizers that call sysconf before they are ready); hooks take no locks
// of their own, never the loader lock after start (no dlsym/dladdr/dlopen), never malloc and never
// use stdio; thread-local state uses the initial-exec TLS model (no
// __tls_get_addr, async-signal-safe); anything unexpected degrades to plain forwarding. The
// library depends on libc only, exports only the hooked symbols and a marker (tfpin-shim.map) and
// is linked with -z nodelete because threads keep running its trampoline.
//
// Files: this one is the policy (plan, hooks); forwarded_symbols.def lists every function the
// shim forwards; elf_lookup.c finds definitions among the loaded objects (mechanism only);
// plan_parser.c reads the TFPIN_* hand-over.
#define _GNU_SOURCE
// The shim defines open and open64, fopen and fopen64, ... each under its own name: without this,
// the headers would rename the first of each pair to the second (meson builds with
// -D_FILE_OFFSET_BITS=64; on 64-bit targets both are the same calls).
#undef _FILE_OFFSET_BITS
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysinfo.h>
#include <time.h>
#include <unistd.h>

#include "cpu_files.h"
#include "elf_lookup.h"

// The glibc floor: the shim must load into images whose C library is as old as glibc 2.17 (CentOS
// 7), so it binds no symbol version newer than that (tests/shim Build checks the ELF's needs).
// dlsym is taken at its first version, which libdl.so.2 defines before glibc 2.34 and libc.so.6
// since; weak, so that where no libdl is loaded (an old glibc, a program that never linked it) it
// is NULL and the shim's own ELF lookup finds the definitions. The thread functions that moved
// from libpthread into libc in 2.34 (new versions there) are looked up at start instead.
#if defined(__x86_64__)
__asm__(".symver dlsym,dlsym@GLIBC_2.2.5");
#elif defined(__aarch64__)
__asm__(".symver dlsym,dlsym@GLIBC_2.17");
#else
#error "the glibc floor needs dlsym's first symbol version on this architecture"
#endif
#pragma weak dlsym
#include "plan_parser.h"
#include "raw_syscall.h"
#include "tfpin/plan_contract.h"

#define EXPORT __attribute__((visibility("default")))
#define TLS_IE __attribute__((tls_model("initial-exec")))
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define RA() __builtin_return_address(0)

// glibc's own symbols, weak: a program of another C library (musl, in an Alpine image that got
// the shim through a container bind) must still start with the shim preloaded. musl's loader
// refuses a preloaded library with an unresolved strong reference, and the program never runs.
// There they are NULL and the shim stays inactive (glibc_present).
// __sysconf: glibc's internal sysconf, usable while our own pointers are being resolved.
extern long __sysconf(int name) __attribute__((weak));
// What pthread_atfork (a libc_nonshared.a wrapper) calls; __dso_handle names this object.
extern int __register_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void),
                             void* dso_handle) __attribute__((weak));
extern void* __dso_handle __attribute__((visibility("hidden")));
extern const char* gnu_get_libc_version(void) __attribute__((weak));

// glibc's _FORTIFY_SOURCE forms of open (programs built with it call these), declared by
// <bits/fcntl2.h> only when the shim itself is fortified, which it is not.
extern int __open_2(const char* path, int flags);
extern int __open64_2(const char* path, int flags);
extern int __openat_2(int dirfd, const char* path, int flags);
extern int __openat64_2(int dirfd, const char* path, int flags);

static bool glibc_present(void) { return gnu_get_libc_version != NULL && __sysconf != NULL; }

// sysconf before the real one is resolved (glibc's internal name; -1 elsewhere).
static long early_sysconf(int name) {
  if (__sysconf != NULL) return __sysconf(name);
  errno = EINVAL;
  return -1;
}

// ---------------------------------------------------------------------------------------------
// CPU masks (tf_mask, mask_set, mask_has: plan_parser.h).
static bool mask_empty(const tf_mask* m) {
  for (unsigned i = 0; i < TF_MASK_WORDS; ++i)
    if (m->w[i]) return false;
  return true;
}
static bool mask_equal(const tf_mask* a, const tf_mask* b) { return memcmp(a, b, sizeof *a) == 0; }
// Copies a caller's cpu_set_t of `size` bytes into a tf_mask (bits beyond TFPIN_MAX_CPUS dropped).
static void mask_from_user(tf_mask* m, size_t size, const void* set) {
  memset(m, 0, sizeof *m);
  if (set != NULL) memcpy(m, set, size < sizeof *m ? size : sizeof *m);
}

// ---------------------------------------------------------------------------------------------
// The plan (written once in init_once, read-only afterwards).
static bool g_active;
static shim_plan g_plan;
static bool g_cpu_files = true;  // serve the plan's view of the CPU files (TFPIN_CPU_FILES)
static char g_cpus_text[256];  // for the report (truncated)
enum { REPORT_NONE, REPORT_STDERR, REPORT_FILE };
static int g_report;
static char g_report_path[4096];
// With TFPIN_REPORT=stderr, a copy of fd 2 taken at start: coreutils (cat, grep, nproc, ...) close
// stderr in an atexit handler, before this library's destructor writes the report. The copy's
// device and inode tell a still-open copy from a number the program closed and reused.
static int g_report_fd = -1;
static dev_t g_report_dev;
static ino_t g_report_ino;

// Real C library functions (real_pthread_create, ...), resolved once in init_once.
#define SHIM_LIBC(name) static __typeof__(name)* real_##name;
#include "forwarded_symbols.def"
// Not hooked, looked up at start (in libpthread before glibc 2.34, libc since: see the floor).
static __typeof__(pthread_attr_getaffinity_np)* lib_pthread_attr_getaffinity_np;
static __typeof__(pthread_key_create)* lib_pthread_key_create;
static __typeof__(pthread_setspecific)* lib_pthread_setspecific;
static pthread_key_t g_release_key;
static bool g_release_key_ok;

// dlsym returns void*; ISO C has no conversion to function pointers, POSIX guarantees it works.
static void* next_definition(const char* name);
static void* find_late_definition(const char* name);
static void resolve_late_thread_functions(void);
#define LOAD_NEXT(var, name)            \
  do {                                  \
    void* sym_ = next_definition(name); \
    memcpy(&(var), &sym_, sizeof(var)); \
  } while (0)
#define AS_FN(var, ptr)               \
  do {                                \
    void* p_ = (ptr);                 \
    memcpy(&(var), &p_, sizeof(var)); \
  } while (0)

// Per-thread state. Initial-exec TLS: the shim is loaded at startup, so its TLS is static.
enum { ROLE_NONE, ROLE_MASTER, ROLE_WORKER };
static _Thread_local int tl_in_init TLS_IE;  // this thread is running init_once
static _Thread_local int tl_in_hook TLS_IE;  // recursion guard for the non-trivial hooks
static _Thread_local int tl_role TLS_IE;     // ROLE_*
static _Thread_local int tl_lane TLS_IE;     // valid when tl_role != ROLE_NONE
static _Thread_local int tl_cpu TLS_IE;      // plan index this thread is pinned to (same)

// Per-process counters (reset in a forked child).
// threads_created is not a counter of its own: it is workers + others + unpinned.
static atomic_ullong c_workers, c_others, c_unpinned, c_masters, c_teams_clamped,
    c_setters_clamped, c_clipped, c_escapes, c_runtime_kept, c_cpu_views, c_cpu_view_fallbacks;
static atomic_int g_occupancy[TFPIN_MAX_CPUS];      // live pinned threads per plan index
static atomic_int g_lane_masters[TFPIN_MAX_LANES];  // live masters per lane
static atomic_uchar g_lane_used[TFPIN_MAX_LANES];
static atomic_uint g_lane_rr;

static atomic_int g_ready;
static void init_once(void);
static void run_init_once(void);

// true once the plan is parsed and the real functions resolved. false only for calls that
// re-enter from inside init_once on the same thread (e.g. dlsym -> malloc -> a hook): those
// must use raw syscalls / glibc internals.
static inline bool ready(void) {
  if (atomic_load_explicit(&g_ready, memory_order_acquire)) return true;
  if (tl_in_init) return false;
  run_init_once();
  return atomic_load_explicit(&g_ready, memory_order_acquire) != 0;
}
static inline bool active(void) { return ready() && g_active; }

static inline void count(atomic_ullong* c) {
  atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

// ---------------------------------------------------------------------------------------------
// Raw helpers (no hooks, no libc state, no errno; raw_syscall.c): the shim hooks syscall() itself.
static long raw_syscall(long n, long a1, long a2, long a3) {
  return tf_raw_syscall6(n, a1, a2, a3, 0, 0, 0);
}
static int raw_setaffinity(pid_t tid, const tf_mask* m) {
  return (int)raw_syscall(SYS_sched_setaffinity, tid, (long)sizeof *m, (long)(uintptr_t)m);
}
static int raw_getaffinity(pid_t tid, tf_mask* m) {
  memset(m, 0, sizeof *m);
  return raw_syscall(SYS_sched_getaffinity, tid, (long)sizeof *m, (long)(uintptr_t)m) < 0 ? -1 : 0;
}
static pid_t raw_gettid(void) { return (pid_t)raw_syscall(SYS_gettid, 0, 0, 0); }
static pid_t raw_getpid(void) { return (pid_t)raw_syscall(SYS_getpid, 0, 0, 0); }

// The once behind ready(): compare-and-swap plus futex, calling nothing another library can
// interpose (ThreadSanitizer's pthread_once needs TSan initialised, and TSan's own start-up calls
// sysconf). A forked child that inherits "running" from a parent thread which does not exist in
// it starts over.
enum { INIT_NONE, INIT_RUNNING, INIT_DONE };
static atomic_int g_init_state;
static atomic_int g_init_pid;  // the process whose thread runs init_once
static void run_init_once(void) {
  // Called from a library's start-up before libc's own (ThreadSanitizer initialises in _dl_init,
  // before libc sets environ): getenv sees nothing yet, so answer this call as if there were no
  // shim and initialise on a later one.
  if (environ == NULL) return;
  for (;;) {
    int state = atomic_load_explicit(&g_init_state, memory_order_acquire);
    if (state == INIT_DONE) return;
    if (state == INIT_NONE) {
      if (!atomic_compare_exchange_strong(&g_init_state, &state, INIT_RUNNING)) continue;
      atomic_store_explicit(&g_init_pid, (int)raw_getpid(), memory_order_relaxed);
      init_once();
      atomic_store_explicit(&g_init_state, INIT_DONE, memory_order_release);
      raw_syscall(SYS_futex, (long)(uintptr_t)&g_init_state, FUTEX_WAKE_PRIVATE, INT_MAX);
      return;
    }
    const int owner = atomic_load_explicit(&g_init_pid, memory_order_relaxed);
    if (owner != 0 && owner != (int)raw_getpid()) {
      int running = INIT_RUNNING;
      atomic_compare_exchange_strong(&g_init_state, &running, INIT_NONE);
      continue;
    }
    // Bounded wait: the pid is stored just after the swap, so a fork in between is seen later.
    const struct timespec wait = {0, 1000000};
    tf_raw_syscall6(SYS_futex, (long)(uintptr_t)&g_init_state, FUTEX_WAIT_PRIVATE, INIT_RUNNING,
                 (long)(uintptr_t)&wait, 0, 0);
  }
}
// Is `pid` this process or one of its threads? tgkill with signal 0 only checks existence.
static bool own_thread(pid_t pid) {
  if (pid == 0) return true;
  const pid_t self = (pid_t)raw_syscall(SYS_getpid, 0, 0, 0);
  return pid == self || raw_syscall(SYS_tgkill, self, pid, 0) == 0;
}
static bool is_calling_thread(pid_t pid) { return pid == 0 || pid == raw_gettid(); }
// Sets the calling thread's mask unless it already is `m` (reading it is much cheaper than a
// redundant sched_setaffinity). A failure (cpus outside the cgroup) leaves the thread as it was.
static void set_own_mask(const tf_mask* m) {
  tf_mask now;
  if (raw_getaffinity(0, &now) == 0 && mask_equal(&now, m)) return;
  (void)raw_setaffinity(0, m);
}
static void pin_to_index(unsigned index) {
  tf_mask m;
  memset(&m, 0, sizeof m);
  mask_set(&m, g_plan.cpus[index]);
  set_own_mask(&m);
}
static void pin_to_plan(void) { set_own_mask(&g_plan.mask); }


// ---------------------------------------------------------------------------------------------
// Output without stdio.
typedef struct {
  char b[1024];
  size_t n;
} outbuf;
static void ob_str(outbuf* o, const char* s) {
  while (*s && o->n < sizeof o->b - 1) o->b[o->n++] = *s++;
}
static void ob_u64(outbuf* o, unsigned long long v) {
  char t[24];
  int i = 0;
  do {
    t[i++] = (char)('0' + v % 10);
    v /= 10;
  } while (v);
  while (i > 0 && o->n < sizeof o->b - 1) o->b[o->n++] = t[--i];
}
// fstat through the real syscall(): glibc's fstat symbol is 2.33's, newer than the C libraries
// the shim must load into (the kernel's struct stat is glibc's on x86-64).
static int file_identity(int fd, dev_t* dev, ino_t* ino) {
  struct stat st;
  if (real_syscall == NULL || real_syscall(SYS_fstat, fd, &st) != 0) return -1;
  *dev = st.st_dev;
  *ino = st.st_ino;
  return 0;
}

// A copy of stderr above the numbers programs use (fd 3, 4, ... are often assumed free), close on
// exec; kept only if it is a copy of an open stderr.
static void keep_stderr_for_report(void) {
  static const int lowest[] = {1000, 100, 10};
  for (size_t i = 0; i < sizeof lowest / sizeof lowest[0]; ++i) {
    const int fd = fcntl(2, F_DUPFD_CLOEXEC, lowest[i]);
    if (fd < 0) {
      if (errno == EINVAL || errno == EMFILE) continue;  // above the fd limit: try lower
      return;  // stderr closed already
    }
    if (file_identity(fd, &g_report_dev, &g_report_ino) != 0) {
      close(fd);
      return;
    }
    g_report_fd = fd;
    return;
  }
}

// The copy of stderr if it is still that file, else fd 2 as it is now.
static int report_stderr_fd(void) {
  dev_t dev;
  ino_t ino;
  if (g_report_fd >= 0 && file_identity(g_report_fd, &dev, &ino) == 0 && dev == g_report_dev &&
      ino == g_report_ino)
    return g_report_fd;
  return 2;
}

static void emit(const outbuf* o) {
  if (g_report == REPORT_NONE) return;
  const int saved = errno;
  int fd = g_report == REPORT_STDERR ? report_stderr_fd() : 2;
  if (g_report == REPORT_FILE) {
    fd = open(g_report_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) {
      errno = saved;
      return;
    }
  }
  size_t done = 0;
  while (done < o->n) {
    ssize_t w = write(fd, o->b + done, o->n - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    done += (size_t)w;
  }
  if (g_report == REPORT_FILE) close(fd);
  errno = saved;
}
static void ob_prefix(outbuf* o) {
  ob_str(o, "tfpin-shim[");
  ob_u64(o, (unsigned long long)getpid());
  ob_str(o, "]: ");
}

// ---------------------------------------------------------------------------------------------
// Lanes and cores.

// The lane with the fewest live masters, ties broken round-robin; its master count is taken.
static unsigned pick_lane(void) {
  const unsigned start = atomic_fetch_add_explicit(&g_lane_rr, 1, memory_order_relaxed) % g_plan.interop;
  for (;;) {
    unsigned best = start;
    int best_v = atomic_load_explicit(&g_lane_masters[start], memory_order_relaxed);
    for (unsigned i = 1; i < g_plan.interop; ++i) {
      const unsigned lane = (start + i) % g_plan.interop;
      const int v = atomic_load_explicit(&g_lane_masters[lane], memory_order_relaxed);
      if (v < best_v) {
        best = lane;
        best_v = v;
      }
    }
    if (atomic_compare_exchange_weak_explicit(&g_lane_masters[best], &best_v, best_v + 1,
                                              memory_order_relaxed, memory_order_relaxed))
      return best;
  }
}

// The least-occupied core of `lane`, scanning from lane core `start_k`; returns its plan index
// and counts the new occupant.
static unsigned pick_core(unsigned lane, unsigned start_k) {
  const unsigned base = lane * g_plan.intra;
  for (;;) {
    unsigned best = base + start_k % g_plan.intra;
    int best_v = atomic_load_explicit(&g_occupancy[best], memory_order_relaxed);
    for (unsigned i = 1; i < g_plan.intra; ++i) {
      const unsigned idx = base + (start_k + i) % g_plan.intra;
      const int v = atomic_load_explicit(&g_occupancy[idx], memory_order_relaxed);
      if (v < best_v) {
        best = idx;
        best_v = v;
      }
    }
    if (atomic_compare_exchange_weak_explicit(&g_occupancy[best], &best_v, best_v + 1,
                                              memory_order_relaxed, memory_order_relaxed))
      return best;
  }
}

// The calling thread is about to lead an OpenMP team: give it a lane and pin it there, once.
static void become_master(void) {
  if (tl_role != ROLE_NONE) return;
  const unsigned lane = pick_lane();
  const unsigned index = pick_core(lane, 0);
  tl_lane = (int)lane;
  tl_cpu = (int)index;
  tl_role = ROLE_MASTER;
  atomic_store_explicit(&g_lane_used[lane], 1, memory_order_relaxed);
  pin_to_index(index);
  count(&c_masters);
}

// Runs when a thread the shim created ends (return, pthread_exit, cancellation).
static void release_thread_state(void* unused) {
  (void)unused;
  if (tl_role != ROLE_NONE && g_active) {
    atomic_fetch_sub_explicit(&g_occupancy[tl_cpu], 1, memory_order_relaxed);
    if (tl_role == ROLE_MASTER)
      atomic_fetch_sub_explicit(&g_lane_masters[tl_lane], 1, memory_order_relaxed);
  }
  tl_role = ROLE_NONE;
}

// ---------------------------------------------------------------------------------------------
// Thread start trampoline. The creator fills a slot (no malloc: a fixed pool, claimed with a CAS,
// released by the new thread as soon as it has copied it).
enum { NSLOTS = 4096 };
typedef struct {
  atomic_int state;  // 0 free, 1 claimed
  void* (*start)(void*);
  void* arg;
  int index;  // plan index for an OpenMP worker, -1 otherwise
  int lane;
  bool attr_affinity;  // the creator's pthread_attr carried an explicit affinity
} start_slot;
static start_slot g_slots[NSLOTS];
static atomic_uint g_slot_hint;

static start_slot* claim_slot(void) {
  const unsigned start = atomic_fetch_add_explicit(&g_slot_hint, 1, memory_order_relaxed);
  for (unsigned i = 0; i < NSLOTS; ++i) {
    start_slot* s = &g_slots[(start + i) % NSLOTS];
    int expected = 0;
    if (atomic_compare_exchange_strong_explicit(&s->state, &expected, 1, memory_order_acquire,
                                                memory_order_relaxed))
      return s;
  }
  return NULL;
}
static void free_slot(start_slot* s) { atomic_store_explicit(&s->state, 0, memory_order_release); }

static void* tf_thread_start(void* p) {
  start_slot* s = p;
  void* (*start)(void*) = s->start;
  void* arg = s->arg;
  const int index = s->index;
  const int lane = s->lane;
  const bool attr_affinity = s->attr_affinity;
  free_slot(s);

  if (index >= 0) {
    tl_role = ROLE_WORKER;
    tl_lane = lane;
    tl_cpu = index;
    pin_to_index((unsigned)index);
  } else if (attr_affinity) {
    // glibc already applied the attr's mask: keep its part inside the plan.
    tf_mask m;
    if (raw_getaffinity(0, &m) == 0) {
      for (unsigned i = 0; i < TF_MASK_WORDS; ++i) m.w[i] &= g_plan.mask.w[i];
      if (mask_empty(&m)) {
        count(&c_escapes);
        pin_to_plan();
      } else {
        set_own_mask(&m);
      }
    } else {
      pin_to_plan();
    }
  } else {
    pin_to_plan();
  }

  // The key's destructor releases the lane and core when this thread ends (any non-NULL value).
  if (g_release_key_ok) (void)lib_pthread_setspecific(g_release_key, (void*)1);
  return start(arg);
}

// Is `addr` code inside an OpenMP runtime (libgomp*, libomp*, libiomp*)? Walks the loaded objects
// with dl_iterate_phdr rather than dladdr: dladdr takes the loader lock that dlopen holds while
// it runs constructors, and a constructor waiting for a thread that creates threads would then
// deadlock; dl_iterate_phdr only takes the short-held lock of the object list.
typedef struct {
  uintptr_t addr;
  uintptr_t base;
  bool found, openmp;
} object_query;
static bool is_openmp_runtime_name(const char* path) {
  if (path == NULL) return false;
  const char* base = elf_base_name(path);
  return strncmp(base, "libgomp", 7) == 0 || strncmp(base, "libomp", 6) == 0 ||
         strncmp(base, "libiomp", 7) == 0;
}
static int find_object_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  object_query* q = data;
  if (!elf_contains(info, q->addr)) return 0;
  q->found = true;
  q->base = (uintptr_t)info->dlpi_addr;
  q->openmp = is_openmp_runtime_name(info->dlpi_name);
  return 1;
}
static bool addr_in_openmp_runtime(const void* addr) {
  object_query q = {.addr = (uintptr_t)addr, .found = false, .openmp = false};
  dl_iterate_phdr(find_object_cb, &q);
  return q.found && q.openmp;
}
static bool in_openmp_runtime(void* (*fn)(void*)) {
  void* addr;
  memcpy(&addr, &fn, sizeof addr);
  return addr_in_openmp_runtime(addr);
}

// Does the attr carry an explicit cpu set? glibc reports "none" as all ones.
static bool attr_has_affinity(const pthread_attr_t* attr) {
  if (attr == NULL) return false;
  tf_mask m;
  if (lib_pthread_attr_getaffinity_np == NULL ||
      lib_pthread_attr_getaffinity_np(attr, sizeof m, (cpu_set_t*)&m) != 0)
    return false;
  for (unsigned i = 0; i < TF_MASK_WORDS; ++i)
    if (m.w[i] != UINT64_MAX) return true;
  return false;
}

EXPORT int pthread_create(pthread_t* thread, const pthread_attr_t* attr, void* (*start)(void*),
                          void* arg) {
  if (UNLIKELY(!ready())) return EAGAIN;  // only while init_once runs on this very thread
  if (UNLIKELY(real_pthread_create == NULL)) {
    // Before glibc 2.34 pthread_create is libpthread's, which a single-threaded program loads
    // only when it dlopen()s something that needs it: found then, without the loader lock.
    resolve_late_thread_functions();
    if (real_pthread_create == NULL) return EAGAIN;
  }
  if (!g_active || tl_in_hook) return real_pthread_create(thread, attr, start, arg);

  tl_in_hook = 1;
  const int saved = errno;
  int index = -1;
  bool attr_affinity = false;
  if (in_openmp_runtime(start)) {
    // The creating thread leads the team this worker joins (libgomp and libomp both create a
    // master's workers from the master itself).
    become_master();
    const unsigned lane = (unsigned)tl_lane;
    const unsigned own_k = (unsigned)tl_cpu - lane * g_plan.intra;
    index = (int)pick_core(lane, own_k + 1);
  } else {
    attr_affinity = attr_has_affinity(attr);
  }
  start_slot* slot = claim_slot();
  errno = saved;
  int rc;
  if (slot != NULL) {
    slot->start = start;
    slot->arg = arg;
    slot->index = index;
    slot->lane = tl_lane;
    slot->attr_affinity = attr_affinity;
    rc = real_pthread_create(thread, attr, tf_thread_start, slot);
    if (rc != 0) free_slot(slot);
  } else {
    rc = real_pthread_create(thread, attr, start, arg);  // pool exhausted: unpinned, counted
    if (rc == 0) count(&c_unpinned);
  }
  if (index >= 0 && (rc != 0 || slot == NULL))
    atomic_fetch_sub_explicit(&g_occupancy[index], 1, memory_order_relaxed);
  if (rc == 0 && slot != NULL) count(index >= 0 ? &c_workers : &c_others);
  tl_in_hook = 0;
  return rc;
}

// ---------------------------------------------------------------------------------------------
// CPU count.
// The configured count bounds CPU ids: the machine's, and at least the highest plan CPU + 1.
static long configured_cpus(long real) {
  return real > (long)g_plan.max_cpu ? real : (long)g_plan.max_cpu + 1;
}

EXPORT long sysconf(int name) {
  if (name == _SC_NPROCESSORS_ONLN && active()) return (long)g_plan.ncpus;
  const long real =
      UNLIKELY(!ready()) || real_sysconf == NULL ? early_sysconf(name) : real_sysconf(name);
  if (name == _SC_NPROCESSORS_CONF && active()) return configured_cpus(real);
  return real;
}

EXPORT int get_nprocs(void) {
  if (active()) return (int)g_plan.ncpus;
  if (UNLIKELY(!ready()) || real_get_nprocs == NULL) {
    return (int)early_sysconf(_SC_NPROCESSORS_ONLN);
  }
  return real_get_nprocs();
}

EXPORT int get_nprocs_conf(void) {
  const int real = UNLIKELY(!ready()) || real_get_nprocs_conf == NULL
                       ? (int)early_sysconf(_SC_NPROCESSORS_CONF)
                       : real_get_nprocs_conf();
  return active() ? (int)configured_cpus(real) : real;
}

// ---------------------------------------------------------------------------------------------
// The CPU files (cpu_files.c): open, openat, fopen and their 64-bit and fortified forms serve the
// plan's view of /sys/devices/system/cpu, /proc/cpuinfo and /proc/stat; readdir skips the cpuN
// directories of CPUs outside the plan. Everything else is forwarded.
static bool cpu_files_on(void) { return active() && g_cpu_files && !tl_in_init; }

// A view for openat(dirfd, path, flags): a descriptor, -1 (errno set), or CPU_VIEW_PASS.
static int open_view(int dirfd, const char* path, int flags) {
  if (!cpu_files_on()) return CPU_VIEW_PASS;
  const int saved = errno;
  const int fd = cpu_view_open(&g_plan, "", dirfd, path, flags);
  if (fd == CPU_VIEW_FALLBACK) {
    count(&c_cpu_view_fallbacks);
    errno = saved;
    return CPU_VIEW_PASS;
  }
  if (fd >= 0) {
    count(&c_cpu_views);
    errno = saved;
  }
  return fd;
}

static mode_t open_mode(int flags, va_list ap) {
  return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

// The real openat when the C library's own is not resolved yet (a call before init).
static int forward_openat(int (*real)(int, const char*, int, ...), int dirfd, const char* path,
                          int flags, mode_t mode) {
  if (real != NULL) return real(dirfd, path, flags, mode);
  const long r = tf_raw_syscall6(SYS_openat, dirfd, (long)(uintptr_t)path, flags, mode, 0, 0);
  if (r < 0) {
    errno = (int)-r;
    return -1;
  }
  return (int)r;
}

#define OPEN_HOOK(name)                                                       \
  EXPORT int name(const char* path, int flags, ...) {                          \
    va_list ap;                                                               \
    va_start(ap, flags);                                                      \
    const mode_t mode = open_mode(flags, ap);                                 \
    va_end(ap);                                                               \
    const int fd = open_view(AT_FDCWD, path, flags);                          \
    if (fd != CPU_VIEW_PASS) return fd;                                       \
    if (real_##name != NULL) return real_##name(path, flags, mode);           \
    return forward_openat(NULL, AT_FDCWD, path, flags, mode);                 \
  }
#define OPENAT_HOOK(name)                                                     \
  EXPORT int name(int dirfd, const char* path, int flags, ...) {               \
    va_list ap;                                                               \
    va_start(ap, flags);                                                      \
    const mode_t mode = open_mode(flags, ap);                                 \
    va_end(ap);                                                               \
    const int fd = open_view(dirfd, path, flags);                             \
    if (fd != CPU_VIEW_PASS) return fd;                                       \
    return forward_openat(real_##name, dirfd, path, flags, mode);             \
  }
OPEN_HOOK(open)
OPEN_HOOK(open64)
OPENAT_HOOK(openat)
OPENAT_HOOK(openat64)

// _FORTIFY_SOURCE's checked forms (no mode: they are only used without O_CREAT).
EXPORT int __open_2(const char* path, int flags) {
  const int fd = open_view(AT_FDCWD, path, flags);
  if (fd != CPU_VIEW_PASS) return fd;
  return real___open_2 != NULL ? real___open_2(path, flags)
                               : forward_openat(NULL, AT_FDCWD, path, flags, 0);
}
EXPORT int __open64_2(const char* path, int flags) {
  const int fd = open_view(AT_FDCWD, path, flags);
  if (fd != CPU_VIEW_PASS) return fd;
  return real___open64_2 != NULL ? real___open64_2(path, flags)
                                 : forward_openat(NULL, AT_FDCWD, path, flags, 0);
}
EXPORT int __openat_2(int dirfd, const char* path, int flags) {
  const int fd = open_view(dirfd, path, flags);
  if (fd != CPU_VIEW_PASS) return fd;
  return real___openat_2 != NULL ? real___openat_2(dirfd, path, flags)
                                 : forward_openat(NULL, dirfd, path, flags, 0);
}
EXPORT int __openat64_2(int dirfd, const char* path, int flags) {
  const int fd = open_view(dirfd, path, flags);
  if (fd != CPU_VIEW_PASS) return fd;
  return real___openat64_2 != NULL ? real___openat64_2(dirfd, path, flags)
                                   : forward_openat(NULL, dirfd, path, flags, 0);
}

// A hook called before init_once resolved its real function: constructors of the program's own
// libraries run before the shim's. Initialise now; where that cannot run yet (before libc set
// environ, or inside init_once on this thread) look up this one function alone.
#define ENSURE_REAL(name)                                                      \
  do {                                                                         \
    if (UNLIKELY(real_##name == NULL)) {                                       \
      (void)ready();                                                           \
      if (real_##name == NULL && !tl_in_init) LOAD_NEXT(real_##name, #name);   \
    }                                                                          \
  } while (0)

// fopen's own open is internal to the C library: the view is opened here and wrapped.
static FILE* fopen_view(const char* path, const char* mode, bool* served) {
  *served = false;
  if (mode == NULL || mode[0] != 'r' || strchr(mode, '+') != NULL) return NULL;
  const int fd = open_view(AT_FDCWD, path, O_RDONLY | (strchr(mode, 'e') != NULL ? O_CLOEXEC : 0));
  if (fd == CPU_VIEW_PASS) return NULL;
  *served = true;
  if (fd < 0) return NULL;
  FILE* f = fdopen(fd, mode);
  if (f == NULL) close(fd);
  return f;
}
EXPORT FILE* fopen(const char* path, const char* mode) {
  bool served;
  FILE* f = fopen_view(path, mode, &served);
  if (served) return f;
  ENSURE_REAL(fopen);
  if (real_fopen == NULL) {
    errno = ENOSYS;
    return NULL;
  }
  return real_fopen(path, mode);
}
EXPORT FILE* fopen64(const char* path, const char* mode) {
  bool served;
  FILE* f = fopen_view(path, mode, &served);
  if (served) return f;
  ENSURE_REAL(fopen64);
  if (real_fopen64 == NULL) {
    errno = ENOSYS;
    return NULL;
  }
  return real_fopen64(path, mode);
}

// Listings of /sys/devices/system/cpu skip the cpuN entries of CPUs outside the plan.
EXPORT struct dirent* readdir(DIR* dir) {
  ENSURE_REAL(readdir);
  if (real_readdir == NULL) {
    errno = ENOSYS;
    return NULL;
  }
  struct dirent* entry;
  do {
    entry = real_readdir(dir);
  } while (entry != NULL && cpu_files_on() &&
           cpu_view_hides_entry(&g_plan, dirfd(dir), entry->d_name));
  return entry;
}
EXPORT struct dirent64* readdir64(DIR* dir) {
  ENSURE_REAL(readdir64);
  if (real_readdir64 == NULL) {
    errno = ENOSYS;
    return NULL;
  }
  struct dirent64* entry;
  do {
    entry = real_readdir64(dir);
  } while (entry != NULL && cpu_files_on() &&
           cpu_view_hides_entry(&g_plan, dirfd(dir), entry->d_name));
  return entry;
}

// Overwrites a successful query's result with the plan set (bits that fit in `size`).
static void fill_plan(size_t size, cpu_set_t* set) {
  const size_t n = size < sizeof g_plan.mask ? size : sizeof g_plan.mask;
  memcpy(set, &g_plan.mask, n);
  memset((char*)set + n, 0, size - n);
}

EXPORT int sched_getaffinity(pid_t pid, size_t size, cpu_set_t* set) {
  int rc;
  if (UNLIKELY(!ready()) || real_sched_getaffinity == NULL) {
    long n = raw_syscall(SYS_sched_getaffinity, pid, (long)size, (long)(uintptr_t)set);
    if (n < 0) {
      errno = (int)-n;
      return -1;
    }
    if ((size_t)n < size) memset((char*)set + n, 0, size - (size_t)n);
    return 0;
  }
  rc = real_sched_getaffinity(pid, size, set);
  if (rc == 0 && g_active && own_thread(pid)) fill_plan(size, set);
  return rc;
}

EXPORT int pthread_getaffinity_np(pthread_t thread, size_t size, cpu_set_t* set) {
  if (UNLIKELY(!ready()) || real_pthread_getaffinity_np == NULL) {
    if (!pthread_equal(thread, pthread_self())) return ENOSYS;
    long n = raw_syscall(SYS_sched_getaffinity, 0, (long)size, (long)(uintptr_t)set);
    if (n < 0) return (int)-n;
    if ((size_t)n < size) memset((char*)set + n, 0, size - (size_t)n);
    return 0;
  }
  const int rc = real_pthread_getaffinity_np(thread, size, set);
  if (rc == 0 && g_active) fill_plan(size, set);
  return rc;
}

// The mask a thread of this process may have instead of `req`: req ∩ plan, or the whole plan
// when that is empty (fail-open: the call succeeds and the thread stays inside its cores).
static void clip_request(size_t size, const cpu_set_t* req, tf_mask* out) {
  tf_mask asked;
  mask_from_user(&asked, size, req);
  for (unsigned i = 0; i < TF_MASK_WORDS; ++i) out->w[i] = asked.w[i] & g_plan.mask.w[i];
  if (mask_empty(out)) {
    *out = g_plan.mask;
    count(&c_escapes);
  } else if (!mask_equal(out, &asked)) {
    count(&c_clipped);
  }
}

// An OpenMP runtime re-binding a thread the shim put on a lane (libomp/libiomp5 set every
// worker to their "full mask" as it starts, KMP_AFFINITY/OMP_PROC_BIND places): the lane wins.
static bool keep_lane_pin(bool calling_thread, const void* ra) {
  if (!calling_thread || tl_role == ROLE_NONE || !addr_in_openmp_runtime(ra)) return false;
  count(&c_runtime_kept);
  return true;
}

EXPORT int sched_setaffinity(pid_t pid, size_t size, const cpu_set_t* set) {
  if (UNLIKELY(!ready()) || real_sched_setaffinity == NULL) {
    const long r = raw_syscall(SYS_sched_setaffinity, pid, (long)size, (long)(uintptr_t)set);
    if (r < 0) {
      errno = (int)-r;
      return -1;
    }
    return 0;
  }
  if (!g_active || set == NULL || !own_thread(pid)) return real_sched_setaffinity(pid, size, set);
  if (keep_lane_pin(is_calling_thread(pid), RA())) return 0;
  tf_mask m;
  clip_request(size, set, &m);
  return real_sched_setaffinity(pid, sizeof m, (const cpu_set_t*)&m);
}

EXPORT int pthread_setaffinity_np(pthread_t thread, size_t size, const cpu_set_t* set) {
  if (UNLIKELY(!ready()) || real_pthread_setaffinity_np == NULL) {
    if (!pthread_equal(thread, pthread_self())) return ENOSYS;
    const long r = raw_syscall(SYS_sched_setaffinity, 0, (long)size, (long)(uintptr_t)set);
    return r < 0 ? (int)-r : 0;
  }
  // glibc declares `set` nonnull; a broken caller still must not make the shim read NULL.
  const void* given = set;
  __asm__("" : "+r"(given));
  if (!g_active || given == NULL) return real_pthread_setaffinity_np(thread, size, set);
  if (keep_lane_pin(pthread_equal(thread, pthread_self()) != 0, RA())) return 0;
  tf_mask m;
  clip_request(size, set, &m);
  return real_pthread_setaffinity_np(thread, sizeof m, (const cpu_set_t*)&m);
}

// libc's syscall(): LLVM/Intel OpenMP query and set affinity through it rather than through the
// wrappers above; the same rules apply. Everything else passes straight through.
EXPORT long syscall(long number, ...) {
  va_list ap;
  va_start(ap, number);
  const long a1 = va_arg(ap, long), a2 = va_arg(ap, long), a3 = va_arg(ap, long),
             a4 = va_arg(ap, long), a5 = va_arg(ap, long), a6 = va_arg(ap, long);
  va_end(ap);
  if (UNLIKELY(number == SYS_sched_setaffinity || number == SYS_sched_getaffinity) && active() &&
      real_syscall != NULL && !tl_in_hook && own_thread((pid_t)a1)) {
    if (number == SYS_sched_getaffinity) {
      const long n = real_syscall(number, a1, a2, a3);
      if (n > 0 && a3 != 0) fill_plan((size_t)n, (cpu_set_t*)(uintptr_t)a3);
      return n;
    }
    if (a3 != 0) {
      if (keep_lane_pin(is_calling_thread((pid_t)a1), RA())) return 0;
      tf_mask m;
      clip_request((size_t)a2, (const cpu_set_t*)(uintptr_t)a3, &m);
      return real_syscall(number, a1, (long)sizeof m, (long)(uintptr_t)&m);
    }
  }
  if (UNLIKELY(real_syscall == NULL)) {  // only while init_once resolves on this thread
    const long r = tf_raw_syscall6(number, a1, a2, a3, a4, a5, a6);
    if (r < 0 && r > -4096) {
      errno = (int)-r;
      return -1;
    }
    return r;
  }
  return real_syscall(number, a1, a2, a3, a4, a5, a6);
}

// ---------------------------------------------------------------------------------------------
// Forwarded runtime entry points (OpenMP, BLAS). The real definition is looked up like the
// dynamic linker would have bound the caller without us: first the global scope after the shim
// (RTLD_NEXT at start, cached for good), else the caller's own scope — a library dlopen()ed with
// RTLD_LOCAL (a Python extension) brings its libgomp/libopenblas along without putting it in the
// global scope. Those lookups read the objects' symbol tables (elf_lookup.c, no loader lock), are
// cached per call site and dropped when any object is unloaded. Never the answer: an object
// loaded before the shim (an interposer earlier in LD_PRELOAD reaches us through its own
// RTLD_NEXT) and any copy of the shim (it exports the marker): both would call us again.
enum fwd_id {
#define SHIM_FORWARD(name, kind) F_##name,
#include "forwarded_symbols.def"
  F_COUNT
};
static const char* const fwd_names[F_COUNT] = {
#define SHIM_FORWARD(name, kind) #name,
#include "forwarded_symbols.def"
};
static _Atomic(void*) g_fwd_global[F_COUNT];

// Per-call-site cache (seqlock per entry: odd = being written).
enum { FWD_CACHE = 64 };
typedef struct {
  atomic_uint seq;
  _Atomic(const void*) ra;
  atomic_int id;
  atomic_ullong subs;
  _Atomic(void*) fn;
} fwd_entry;
static fwd_entry g_fwd_cache[FWD_CACHE];

static uintptr_t g_self_base;  // our own load address (never forward to ourselves)

// Every copy of the shim exports the marker; nothing calls it.
#define SHIM_MARKER(name)   \
  EXPORT void name(void);   \
  EXPORT void name(void) {} \
  static const char* const k_marker = #name;
#include "forwarded_symbols.def"

static int self_base_cb(struct dl_phdr_info* info, size_t size, void* data) {
  (void)size;
  if (!elf_contains(info, *(const uintptr_t*)data)) return 0;
  g_self_base = (uintptr_t)info->dlpi_addr;
  return 1;
}

// Are `a` and `b` in the same loaded object?
static bool same_object(const void* a, uintptr_t b) {
  object_query qa = {.addr = (uintptr_t)a, .found = false, .openmp = false};
  object_query qb = {.addr = b, .found = false, .openmp = false};
  dl_iterate_phdr(find_object_cb, &qa);
  dl_iterate_phdr(find_object_cb, &qb);
  return qa.found && qb.found && qa.base == qb.base;
}

// The forward in progress on this thread (F_* + 1 and its target; saved and restored around each
// call). The same entry point called again from that target is a loop through something the
// lookup cannot see forwards back (it finds "the" definition with RTLD_DEFAULT, an older shim
// without the marker): that call gets no definition, i.e. the fail-open default.
static _Thread_local int tl_fwd_id TLS_IE;
static _Thread_local uintptr_t tl_fwd_fn TLS_IE;
typedef struct {
  int id;
  uintptr_t fn;
} fwd_mark;
static inline fwd_mark fwd_begin(enum fwd_id id, uintptr_t fn) {
  const fwd_mark was = {tl_fwd_id, tl_fwd_fn};
  tl_fwd_id = (int)id + 1;
  tl_fwd_fn = fn;
  return was;
}
static inline void fwd_end(fwd_mark was) {
  tl_fwd_id = was.id;
  tl_fwd_fn = was.fn;
}
// Calls `real` (resolved for F_<name>) with the parenthesised `args` as the forward in progress.
#define CALL_REAL(name, real, args)                               \
  do {                                                            \
    const fwd_mark was_ = fwd_begin(F_##name, (uintptr_t)(real)); \
    (real) args;                                                  \
    fwd_end(was_);                                                \
  } while (0)

// The real definition of a forwarded entry point for the call at `ra`. Objects loaded at start
// were resolved in init_once (dlsym(RTLD_NEXT): the global scope after the shim); anything else is
// looked up per call site and cached until an object is unloaded.
static void* resolve_fwd(enum fwd_id id, const void* ra) {
  if (UNLIKELY(tl_fwd_id == (int)id + 1) && same_object(ra, tl_fwd_fn)) return NULL;
  if (UNLIKELY(!ready()) || g_self_base == 0) return NULL;  // re-entered from init_once
  void* p = atomic_load_explicit(&g_fwd_global[id], memory_order_acquire);
  if (p != NULL) return p;

  const unsigned long long gen = elf_unload_generation();
  fwd_entry* e = &g_fwd_cache[(((uintptr_t)ra >> 2) ^ ((uintptr_t)id * 0x9e37u)) % FWD_CACHE];
  const unsigned s1 = atomic_load_explicit(&e->seq, memory_order_acquire);
  if ((s1 & 1u) == 0 && atomic_load_explicit(&e->ra, memory_order_relaxed) == ra &&
      atomic_load_explicit(&e->id, memory_order_relaxed) == (int)id &&
      atomic_load_explicit(&e->subs, memory_order_relaxed) == gen) {
    p = atomic_load_explicit(&e->fn, memory_order_relaxed);
    atomic_thread_fence(memory_order_acquire);
    if (atomic_load_explicit(&e->seq, memory_order_relaxed) == s1 && p != NULL) return p;
  }

  p = elf_find_definition(fwd_names[id], ra, g_self_base, k_marker);
  if (p != NULL) {
    unsigned s = atomic_load_explicit(&e->seq, memory_order_relaxed);
    if ((s & 1u) == 0 && atomic_compare_exchange_strong_explicit(
                             &e->seq, &s, s + 1, memory_order_acquire, memory_order_relaxed)) {
      atomic_store_explicit(&e->ra, ra, memory_order_relaxed);
      atomic_store_explicit(&e->id, (int)id, memory_order_relaxed);
      atomic_store_explicit(&e->subs, gen, memory_order_relaxed);
      atomic_store_explicit(&e->fn, p, memory_order_relaxed);
      atomic_store_explicit(&e->seq, s + 2, memory_order_release);
    }
  }
  return p;
}

// The team size to ask for instead of `n`; makes the caller a lane master.
static unsigned clamp_team(unsigned n, const void* ra) {
  if (!active() || tl_in_hook) return n;
  become_master();
  if (n > g_plan.intra) {
    count(&c_teams_clamped);
    return g_plan.intra;
  }
  if (n == 0) {  // the runtime's default: nthreads-var, which OMP_NUM_THREADS or a direct call set
    int (*max_threads)(void);
    AS_FN(max_threads, resolve_fwd(F_omp_get_max_threads, ra));
    if (max_threads != NULL && max_threads() > (int)g_plan.intra) {
      count(&c_teams_clamped);
      return g_plan.intra;
    }
  }
  return n;
}
static int clamp_setter(int n) {
  if (active() && n > (int)g_plan.intra) {
    count(&c_setters_clamped);
    return (int)g_plan.intra;
  }
  return n;
}

typedef void (*omp_fn)(void*);

EXPORT void GOMP_parallel(omp_fn fn, void* data, unsigned num_threads, unsigned flags) {
  const void* ra = RA();
  __typeof__(GOMP_parallel)* real;
  AS_FN(real, resolve_fwd(F_GOMP_parallel, ra));
  if (real == NULL) {  // no runtime to be found: a team of one is still a correct execution
    fn(data);
    return;
  }
  CALL_REAL(GOMP_parallel, real, (fn, data, clamp_team(num_threads, ra), flags));
}

EXPORT unsigned GOMP_parallel_reductions(omp_fn fn, void* data, unsigned num_threads,
                                         unsigned flags) {
  const void* ra = RA();
  __typeof__(GOMP_parallel_reductions)* real;
  AS_FN(real, resolve_fwd(F_GOMP_parallel_reductions, ra));
  if (real == NULL) {
    fn(data);
    return 1;
  }
  const unsigned team = clamp_team(num_threads, ra);
  const fwd_mark was = fwd_begin(F_GOMP_parallel_reductions, (uintptr_t)real);
  const unsigned ret = real(fn, data, team, flags);
  fwd_end(was);
  return ret;
}

EXPORT void GOMP_parallel_start(omp_fn fn, void* data, unsigned num_threads) {
  const void* ra = RA();
  __typeof__(GOMP_parallel_start)* real;
  AS_FN(real, resolve_fwd(F_GOMP_parallel_start, ra));
  if (real != NULL) CALL_REAL(GOMP_parallel_start, real, (fn, data, clamp_team(num_threads, ra)));
}

#define GOMP_LOOP4(name)                                                                         \
  EXPORT void name(omp_fn fn, void* data, unsigned num_threads, long start, long end, long incr, \
                   long chunk, unsigned flags) {                                                 \
    const void* ra = RA();                                                                       \
    __typeof__(name)* real;                                                                      \
    AS_FN(real, resolve_fwd(F_##name, ra));                                                      \
    if (real != NULL)                                                                            \
      CALL_REAL(name, real,                                                                      \
                (fn, data, clamp_team(num_threads, ra), start, end, incr, chunk, flags));        \
  }
#define GOMP_LOOP3(name)                                                                         \
  EXPORT void name(omp_fn fn, void* data, unsigned num_threads, long start, long end, long incr, \
                   unsigned flags) {                                                             \
    const void* ra = RA();                                                                       \
    __typeof__(name)* real;                                                                      \
    AS_FN(real, resolve_fwd(F_##name, ra));                                                      \
    if (real != NULL)                                                                            \
      CALL_REAL(name, real, (fn, data, clamp_team(num_threads, ra), start, end, incr, flags));   \
  }
#define GOMP_LOOP4_START(name)                                                                   \
  EXPORT void name(omp_fn fn, void* data, unsigned num_threads, long start, long end, long incr, \
                   long chunk) {                                                                 \
    const void* ra = RA();                                                                       \
    __typeof__(name)* real;                                                                      \
    AS_FN(real, resolve_fwd(F_##name, ra));                                                      \
    if (real != NULL)                                                                            \
      CALL_REAL(name, real, (fn, data, clamp_team(num_threads, ra), start, end, incr, chunk));   \
  }

// Combined parallel loops (a runtime that lacks one is never called for it: the compiler only
// emits the ones the linked runtime has, and a NULL lookup means no runtime at all).
GOMP_LOOP4(GOMP_parallel_loop_static)
GOMP_LOOP4(GOMP_parallel_loop_dynamic)
GOMP_LOOP4(GOMP_parallel_loop_guided)
GOMP_LOOP3(GOMP_parallel_loop_runtime)
GOMP_LOOP4(GOMP_parallel_loop_nonmonotonic_dynamic)
GOMP_LOOP4(GOMP_parallel_loop_nonmonotonic_guided)
GOMP_LOOP3(GOMP_parallel_loop_nonmonotonic_runtime)
GOMP_LOOP3(GOMP_parallel_loop_maybe_nonmonotonic_runtime)
GOMP_LOOP4_START(GOMP_parallel_loop_static_start)
GOMP_LOOP4_START(GOMP_parallel_loop_dynamic_start)
GOMP_LOOP4_START(GOMP_parallel_loop_guided_start)

EXPORT void GOMP_parallel_loop_runtime_start(omp_fn fn, void* data, unsigned num_threads,
                                             long start, long end, long incr) {
  const void* ra = RA();
  __typeof__(GOMP_parallel_loop_runtime_start)* real;
  AS_FN(real, resolve_fwd(F_GOMP_parallel_loop_runtime_start, ra));
  if (real != NULL)
    CALL_REAL(GOMP_parallel_loop_runtime_start, real,
              (fn, data, clamp_team(num_threads, ra), start, end, incr));
}

EXPORT void GOMP_parallel_sections(omp_fn fn, void* data, unsigned num_threads, unsigned count_,
                                   unsigned flags) {
  const void* ra = RA();
  __typeof__(GOMP_parallel_sections)* real;
  AS_FN(real, resolve_fwd(F_GOMP_parallel_sections, ra));
  if (real != NULL)
    CALL_REAL(GOMP_parallel_sections, real, (fn, data, clamp_team(num_threads, ra), count_, flags));
}

EXPORT void GOMP_parallel_sections_start(omp_fn fn, void* data, unsigned num_threads,
                                         unsigned count_) {
  const void* ra = RA();
  __typeof__(GOMP_parallel_sections_start)* real;
  AS_FN(real, resolve_fwd(F_GOMP_parallel_sections_start, ra));
  if (real != NULL)
    CALL_REAL(GOMP_parallel_sections_start, real, (fn, data, clamp_team(num_threads, ra), count_));
}

EXPORT void omp_set_num_threads(int n) {
  __typeof__(omp_set_num_threads)* real;
  AS_FN(real, resolve_fwd(F_omp_set_num_threads, RA()));
  if (real != NULL) CALL_REAL(omp_set_num_threads, real, (clamp_setter(n)));
}

// Intel/LLVM OpenMP: the num_threads clause becomes a push before __kmpc_fork_call.
EXPORT void __kmpc_push_num_threads(void* loc, int32_t gtid, int32_t num_threads) {
  const void* ra = RA();
  __typeof__(__kmpc_push_num_threads)* real;
  AS_FN(real, resolve_fwd(F___kmpc_push_num_threads, ra));
  if (real == NULL) return;
  if (num_threads > 0) num_threads = (int32_t)clamp_team((unsigned)num_threads, ra);
  CALL_REAL(__kmpc_push_num_threads, real, (loc, gtid, num_threads));
}

// MKL: MKL_Set_Num_Threads(int) is what mkl.h's mkl_set_num_threads macro calls; the exported
// lowercase mkl_set_num_threads / mkl_set_num_threads_ are Fortran entry points taking int*.
EXPORT void MKL_Set_Num_Threads(int n) {
  __typeof__(MKL_Set_Num_Threads)* real;
  AS_FN(real, resolve_fwd(F_MKL_Set_Num_Threads, RA()));
  if (real != NULL) CALL_REAL(MKL_Set_Num_Threads, real, (clamp_setter(n)));
}
/* MKL's Fortran entry points take the count by pointer: pass a clamped copy, never write the
 * caller's int. */
static void forward_clamped_by_pointer(enum fwd_id id, void (*real)(const int*), const int* n) {
  if (real == NULL) return;
  int clamped = 0;
  if (n != NULL) clamped = clamp_setter(*n);
  const fwd_mark was = fwd_begin(id, (uintptr_t)real);
  real(n != NULL ? &clamped : NULL);
  fwd_end(was);
}
EXPORT void mkl_set_num_threads(const int* n) {
  __typeof__(mkl_set_num_threads)* real;
  AS_FN(real, resolve_fwd(F_mkl_set_num_threads, RA()));
  forward_clamped_by_pointer(F_mkl_set_num_threads, real, n);
}
EXPORT void mkl_set_num_threads_(const int* n) {
  __typeof__(mkl_set_num_threads_)* real;
  AS_FN(real, resolve_fwd(F_mkl_set_num_threads_, RA()));
  forward_clamped_by_pointer(F_mkl_set_num_threads_, real, n);
}
EXPORT void openblas_set_num_threads(int n) {
  __typeof__(openblas_set_num_threads)* real;
  AS_FN(real, resolve_fwd(F_openblas_set_num_threads, RA()));
  if (real != NULL) CALL_REAL(openblas_set_num_threads, real, (clamp_setter(n)));
}
EXPORT void goto_set_num_threads(int n) {
  __typeof__(goto_set_num_threads)* real;
  AS_FN(real, resolve_fwd(F_goto_set_num_threads, RA()));
  if (real != NULL) CALL_REAL(goto_set_num_threads, real, (clamp_setter(n)));
}

// ---------------------------------------------------------------------------------------------
// Process life cycle.

// fork: the child has one thread (the caller); counters, lanes and occupancy start over, keeping
// what that thread holds. Async-signal-safe (plain stores).
static void atfork_child(void) {
  atomic_ullong* counters[] = {&c_workers,       &c_others,          &c_unpinned, &c_masters,
                               &c_teams_clamped, &c_setters_clamped, &c_clipped,  &c_escapes,
                               &c_runtime_kept,  &c_cpu_views,       &c_cpu_view_fallbacks};
  for (size_t i = 0; i < sizeof counters / sizeof counters[0]; ++i)
    atomic_store_explicit(counters[i], 0, memory_order_relaxed);
  for (unsigned i = 0; i < g_plan.ncpus; ++i)
    atomic_store_explicit(&g_occupancy[i], 0, memory_order_relaxed);
  for (unsigned i = 0; i < g_plan.interop; ++i) {
    atomic_store_explicit(&g_lane_masters[i], 0, memory_order_relaxed);
    atomic_store_explicit(&g_lane_used[i], 0, memory_order_relaxed);
  }
  for (unsigned i = 0; i < NSLOTS; ++i)
    atomic_store_explicit(&g_slots[i].state, 0, memory_order_relaxed);
  // A parent thread may have been mid-write on an entry: forget its call site too, so the child
  // never takes a half-written entry (new ra, old fn) for a valid one.
  for (unsigned i = 0; i < FWD_CACHE; ++i) {
    atomic_store_explicit(&g_fwd_cache[i].ra, NULL, memory_order_relaxed);
    atomic_store_explicit(&g_fwd_cache[i].seq, 0, memory_order_relaxed);
  }
  atomic_store_explicit(&g_lane_rr, 0, memory_order_relaxed);
  if (tl_role != ROLE_NONE) {
    atomic_store_explicit(&g_occupancy[tl_cpu], 1, memory_order_relaxed);
    if (tl_role == ROLE_MASTER) {
      atomic_store_explicit(&g_lane_masters[tl_lane], 1, memory_order_relaxed);
      atomic_store_explicit(&g_lane_used[tl_lane], 1, memory_order_relaxed);
      atomic_store_explicit(&g_lane_rr, (unsigned)tl_lane + 1, memory_order_relaxed);
    }
  }
}

// dlsym(RTLD_NEXT), past any copy of the shim (LD_PRELOAD=copy:shim): the first definition after
// us in load order that is no copy. Only in init_once (dlsym takes the loader lock).
static void* next_definition(const char* name) {
  void* p = dlsym != NULL ? dlsym(RTLD_NEXT, name) : NULL;
  if (p == NULL || elf_object_defines(p, k_marker))
    p = elf_find_definition(name, NULL, g_self_base, k_marker);
  return p;
}

// A definition loaded after start (no dlsym: the loader lock), past any copy of the shim.
static void* find_late_definition(const char* name) {
  return elf_find_definition(name, NULL, g_self_base, k_marker);
}

// The release key of the threads the shim starts: created once, by whoever gets here first.
static void create_release_key(void) {
  static atomic_int state;  // 0 not yet, 1 being created, 2 done
  int expected = 0;
  if (!atomic_compare_exchange_strong(&state, &expected, 1)) return;
  g_release_key_ok = lib_pthread_key_create != NULL && lib_pthread_setspecific != NULL &&
                     lib_pthread_key_create(&g_release_key, release_thread_state) == 0;
  atomic_store(&state, 2);
}

// libpthread's functions, when it came after start (a single-threaded program on glibc < 2.34
// that dlopen()s a threaded library): everything the thread hooks use, without the loader lock.
static void resolve_late_thread_functions(void) {
#define LATE(var, name)                                            \
  do {                                                             \
    if (var == NULL) AS_FN(var, find_late_definition(name));       \
  } while (0)
  LATE(lib_pthread_attr_getaffinity_np, "pthread_attr_getaffinity_np");
  LATE(lib_pthread_key_create, "pthread_key_create");
  LATE(lib_pthread_setspecific, "pthread_setspecific");
  LATE(real_pthread_getaffinity_np, "pthread_getaffinity_np");
  LATE(real_pthread_setaffinity_np, "pthread_setaffinity_np");
  LATE(real_pthread_create, "pthread_create");
#undef LATE
  create_release_key();
}

static void init_once(void) {
  tl_in_init = 1;
  {
    void (*self_fn)(void) = init_once;
    uintptr_t here;
    memcpy(&here, &self_fn, sizeof here);
    dl_iterate_phdr(self_base_cb, &here);
  }
  // Two copies (LD_PRELOAD of two paths): calls bind to the first, which applies the plan; this
  // one, if second, only forwards (applying it too would count, pin and report twice).
  const bool shadowed = elf_defined_before(k_marker, g_self_base);
#define SHIM_LIBC(name) LOAD_NEXT(real_##name, #name);
#include "forwarded_symbols.def"
  tf_raw_syscall_fallback = real_syscall;
  LOAD_NEXT(lib_pthread_attr_getaffinity_np, "pthread_attr_getaffinity_np");
  LOAD_NEXT(lib_pthread_key_create, "pthread_key_create");
  LOAD_NEXT(lib_pthread_setspecific, "pthread_setspecific");
  // Releases a shim-made thread's lane and core when it ends, however it ends (return,
  // pthread_exit, cancellation): a key destructor, where pthread_cleanup_push would bind glibc
  // 2.34's cancellation symbols. (Without libpthread yet: created when it comes.)
  if (lib_pthread_key_create != NULL) create_release_key();
  // Runtimes loaded with the program are resolved now, at start: dlsym takes the loader lock,
  // which the hooks never do afterwards (see "Symbol lookup without the loader lock"). A copy of
  // the shim is left to the per-call-site lookup, which skips it.
  for (int id = 0; id < F_COUNT; ++id) {
    void* p = dlsym != NULL ? dlsym(RTLD_NEXT, fwd_names[id])
                            : elf_find_definition(fwd_names[id], NULL, g_self_base, k_marker);
    if (p != NULL && !elf_object_defines(p, k_marker))
      atomic_store_explicit(&g_fwd_global[id], p, memory_order_release);
  }

  const char* cpus = shadowed ? NULL : secure_getenv(TFPIN_VAR_CPUS);
  if (cpus != NULL) {
    const char* report = secure_getenv(TFPIN_VAR_REPORT);
    if (report != NULL && report[0] != '\0') {
      if (strcmp(report, TFPIN_REPORT_STDERR) == 0) {
        g_report = REPORT_STDERR;
        keep_stderr_for_report();
      } else if (strlen(report) < sizeof g_report_path) {
        memcpy(g_report_path, report, strlen(report) + 1);
        g_report = REPORT_FILE;
      }
    }
    const char* why = shim_parse_plan(cpus, secure_getenv(TFPIN_VAR_INTEROP),
                                      secure_getenv(TFPIN_VAR_INTRA), &g_plan);
    const char* cpu_files = secure_getenv(TFPIN_VAR_CPU_FILES);
    g_cpu_files = cpu_files == NULL || strcmp(cpu_files, "0") != 0;
    // (pthread_create may be missing: a single-threaded program on glibc < 2.34, see its hook)
    if (why == NULL && (real_sched_setaffinity == NULL ||
                        real_sched_getaffinity == NULL))
      why = "cannot resolve the C library's functions";
    if (!glibc_present()) {
      outbuf o = {.n = 0};
      ob_prefix(&o);
      ob_str(&o, "the program's C library is not glibc (musl?); the shim is inactive\n");
      emit(&o);
      g_plan.ncpus = 0;
    } else if (why != NULL) {
      outbuf o = {.n = 0};
      ob_prefix(&o);
      ob_str(&o, "invalid plan (");
      ob_str(&o, why);
      ob_str(&o, "); the shim is inactive\n");
      emit(&o);
      g_plan.ncpus = 0;
    } else {
      size_t len = strlen(cpus);
      if (len >= sizeof g_cpus_text) len = sizeof g_cpus_text - 1;
      memcpy(g_cpus_text, cpus, len);
      g_cpus_text[len] = '\0';
      g_active = true;
      __register_atfork(NULL, NULL, atfork_child, __dso_handle);
      // The initial thread belongs to the task as a whole, like every thread not yet in a lane.
      pin_to_plan();
    }
  }
  atomic_store_explicit(&g_ready, 1, memory_order_release);
  tl_in_init = 0;
}

__attribute__((constructor)) static void tfpin_shim_init(void) { (void)ready(); }

__attribute__((destructor)) static void tfpin_shim_report(void) {
  if (!atomic_load_explicit(&g_ready, memory_order_acquire) || !g_active || g_report == REPORT_NONE)
    return;
  unsigned lanes = 0;
  for (unsigned i = 0; i < g_plan.interop; ++i)
    lanes += atomic_load_explicit(&g_lane_used[i], memory_order_relaxed) ? 1u : 0u;
  outbuf o = {.n = 0};
  ob_prefix(&o);
  ob_str(&o, "cpus=");
  ob_str(&o, g_cpus_text);
  ob_str(&o, " interop=");
  ob_u64(&o, g_plan.interop);
  ob_str(&o, " intra=");
  ob_u64(&o, g_plan.intra);
  ob_str(&o, " threads_created=");
  ob_u64(&o, atomic_load_explicit(&c_workers, memory_order_relaxed) +
                 atomic_load_explicit(&c_others, memory_order_relaxed) +
                 atomic_load_explicit(&c_unpinned, memory_order_relaxed));
  const struct {
    const char* name;
    atomic_ullong* value;
  } fields[] = {
      {" omp_workers_pinned=", &c_workers},
      {" other_threads_pinned=", &c_others},
      {" threads_unpinned=", &c_unpinned},
      {" masters_pinned=", &c_masters},
      {" teams_clamped=", &c_teams_clamped},
      {" num_threads_clamped=", &c_setters_clamped},
      {" affinity_clipped=", &c_clipped},
      {" escapes_refused=", &c_escapes},
      {" runtime_binds_kept=", &c_runtime_kept},
      {" cpu_file_views=", &c_cpu_views},
      {" cpu_file_view_fallbacks=", &c_cpu_view_fallbacks},
  };
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; ++i) {
    ob_str(&o, fields[i].name);
    ob_u64(&o, atomic_load_explicit(fields[i].value, memory_order_relaxed));
  }
  ob_str(&o, " lanes_used=");
  ob_u64(&o, lanes);
  ob_str(&o, "/");
  ob_u64(&o, g_plan.interop);
  ob_str(&o, "\n");
  emit(&o);
}
