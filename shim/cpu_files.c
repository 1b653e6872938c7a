#define _GNU_SOURCE
#include "cpu_files.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/memfd.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "raw_syscall.h"

// ---------------------------------------------------------------------------------------------
// System calls without libc (errno untouched; the shim hooks open, fopen and syscall itself).
static long sys3(long n, long a1, long a2, long a3) {
  return tf_raw_syscall6(n, a1, a2, a3, 0, 0, 0);
}
static int sys_openat(int dirfd, const char* path, int flags) {
  return (int)sys3(SYS_openat, dirfd, (long)(uintptr_t)path, flags);
}
static void sys_close(int fd) { (void)sys3(SYS_close, fd, 0, 0); }

// Growable buffers in anonymous memory: the hooks never malloc.
typedef struct {
  char* data;
  size_t size, capacity;
} buffer;

enum { BUFFER_MAX = 64 << 20 };  // /proc/cpuinfo of the largest machines is a few MB

static bool buffer_reserve(buffer* b, size_t more) {
  if (b->size + more <= b->capacity) return true;
  size_t capacity = b->capacity == 0 ? 64 * 1024 : b->capacity;
  while (capacity < b->size + more) capacity *= 2;
  if (capacity > BUFFER_MAX) return false;
  long p;
  if (b->data == NULL) {
    p = tf_raw_syscall6(SYS_mmap, 0, (long)capacity, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  } else {
    p = tf_raw_syscall6(SYS_mremap, (long)(uintptr_t)b->data, (long)b->capacity, (long)capacity,
                        MREMAP_MAYMOVE, 0, 0);
  }
  if (p < 0 && p > -4096) return false;
  b->data = (char*)(uintptr_t)p;
  b->capacity = capacity;
  return true;
}
static void buffer_free(buffer* b) {
  if (b->data != NULL) (void)sys3(SYS_munmap, (long)(uintptr_t)b->data, (long)b->capacity, 0);
  b->data = NULL;
}
static bool put(buffer* b, const char* s, size_t n) {
  if (!buffer_reserve(b, n)) return false;
  memcpy(b->data + b->size, s, n);
  b->size += n;
  return true;
}
static bool put_str(buffer* b, const char* s) { return put(b, s, strlen(s)); }
static bool put_u64(buffer* b, unsigned long long v) {
  char digits[24];
  size_t n = 0;
  do {
    digits[sizeof digits - 1 - n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  return put(b, digits + sizeof digits - n, n);
}

// fsroot + path in full (1024 bytes); false when it does not fit.
static bool under_root(const char* fsroot, const char* path, char* full) {
  const size_t root_length = strlen(fsroot);
  const size_t path_length = strlen(path);
  if (root_length + path_length + 1 > 1024) return false;
  memcpy(full, fsroot, root_length);
  memcpy(full + root_length, path, path_length + 1);
  return true;
}

// The whole real file, fsroot + path (procfs and sysfs files report no size: read until the end).
static bool read_real(const char* fsroot, const char* path, buffer* out) {
  char full[1024];
  if (!under_root(fsroot, path, full)) return false;
  const int fd = sys_openat(AT_FDCWD, full, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = true;
  for (;;) {
    if (!buffer_reserve(out, 16 * 1024)) {
      ok = false;
      break;
    }
    const long n = sys3(SYS_read, fd, (long)(uintptr_t)(out->data + out->size),
                        (long)(out->capacity - out->size));
    if (n == -EINTR) continue;
    if (n < 0) ok = false;
    if (n <= 0) break;
    out->size += (size_t)n;
  }
  sys_close(fd);
  return ok;
}

// ---------------------------------------------------------------------------------------------
// Which file a path is.
typedef enum {
  VIEW_PASS,
  VIEW_CPU_OFFLINE,  // cpuN/online of a CPU outside the plan: "0"
  VIEW_PLAN_LIST,    // online, present: the plan's CPUs
  VIEW_OFFLINE,      // offline: possible minus the plan
  VIEW_LIST,         // a CPU list (..._list, cpulist): intersected with the plan
  VIEW_MASK,         // a CPU mask (thread_siblings, shared_cpu_map, cpumap, ...): intersected
  VIEW_CPUINFO,
  VIEW_STAT,
} view_kind;

static const char k_cpu_dir[] = "/sys/devices/system/cpu";
static const char k_node_dir[] = "/sys/devices/system/node/node";

static bool starts_with(const char* s, const char* prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}
static bool ends_with(const char* s, const char* suffix) {
  const size_t n = strlen(s);
  const size_t m = strlen(suffix);
  return n >= m && strcmp(s + n - m, suffix) == 0;
}
static const char* base_name(const char* path) {
  const char* slash = strrchr(path, '/');
  return slash != NULL ? slash + 1 : path;
}

// "cpu<digits>" at s, ended by '/' or the end: its number (or TFPIN_MAX_CPUS when too big) in
// *cpu and the rest of the path; NULL when s is not such a name.
static const char* cpu_dir_name(const char* s, unsigned* cpu) {
  if (!starts_with(s, "cpu") || s[3] < '0' || s[3] > '9') return NULL;
  unsigned long v = 0;
  const char* p = s + 3;
  for (; *p >= '0' && *p <= '9'; ++p) {
    if (v < TFPIN_MAX_CPUS) v = v * 10 + (unsigned long)(*p - '0');
  }
  if (*p != '/' && *p != '\0') return NULL;
  *cpu = v < TFPIN_MAX_CPUS ? (unsigned)v : TFPIN_MAX_CPUS;
  return p;
}

static bool in_plan(const shim_plan* plan, unsigned cpu) {
  return cpu < TFPIN_MAX_CPUS && mask_has(&plan->mask, cpu);
}

static bool is_mask_name(const char* name) {
  static const char* const masks[] = {
      "core_siblings", "thread_siblings", "core_cpus",       "package_cpus",   "die_cpus",
      "cluster_cpus",  "book_siblings",   "drawer_siblings", "shared_cpu_map", "cpumap"};
  for (size_t i = 0; i < sizeof masks / sizeof masks[0]; ++i) {
    if (strcmp(name, masks[i]) == 0) return true;
  }
  return false;
}

static view_kind classify(const shim_plan* plan, const char* path) {
  if (strcmp(path, "/proc/cpuinfo") == 0) return VIEW_CPUINFO;
  if (strcmp(path, "/proc/stat") == 0) return VIEW_STAT;
  if (starts_with(path, k_node_dir)) {
    const char* name = base_name(path);
    if (strcmp(name, "cpulist") == 0) return VIEW_LIST;
    if (strcmp(name, "cpumap") == 0) return VIEW_MASK;
    return VIEW_PASS;
  }
  if (!starts_with(path, k_cpu_dir) || path[sizeof k_cpu_dir - 1] != '/') return VIEW_PASS;
  const char* rest = path + sizeof k_cpu_dir;
  if (strcmp(rest, "online") == 0 || strcmp(rest, "present") == 0) return VIEW_PLAN_LIST;
  if (strcmp(rest, "offline") == 0) return VIEW_OFFLINE;
  unsigned cpu = 0;
  const char* inside = cpu_dir_name(rest, &cpu);
  if (inside == NULL) return VIEW_PASS;
  if (!in_plan(plan, cpu)) return strcmp(inside, "/online") == 0 ? VIEW_CPU_OFFLINE : VIEW_PASS;
  const char* name = base_name(inside);
  if (ends_with(name, "_list")) return VIEW_LIST;
  if (is_mask_name(name)) return VIEW_MASK;
  return VIEW_PASS;
}

// Past "<digits>/" at *p; false (and *p unspecified) when *p does not start so.
static bool skip_number_dir(const char** p) {
  const char* digits = *p;
  while (**p >= '0' && **p <= '9') ++*p;
  if (*p == digits || **p != '/') return false;
  ++*p;
  return true;
}

// "/proc/<pid|self|thread-self>/[task/<tid>/]stat": a process's own stat file, which ps, top and
// psutil open for every process; never /proc/stat, so no need to resolve it.
static bool per_process_stat(const char* path) {
  static const char proc[] = "/proc/";
  if (strncmp(path, proc, sizeof proc - 1) != 0) return false;
  const char* p = path + sizeof proc - 1;
  const char* const names[] = {"self/", "thread-self/"};
  bool named = false;
  for (size_t i = 0; i < sizeof names / sizeof names[0] && !named; ++i) {
    const size_t n = strlen(names[i]);
    if (strncmp(p, names[i], n) == 0) {
      p += n;
      named = true;
    }
  }
  if (!named && !skip_number_dir(&p)) return false;
  static const char task[] = "task/";
  if (strncmp(p, task, sizeof task - 1) == 0) {
    p += sizeof task - 1;
    if (!skip_number_dir(&p)) return false;
  }
  return strcmp(p, "stat") == 0;
}

// A relative path can only be a file of the view by one of these names: the directory it is
// relative to is looked up (one readlink) only then, so other openat calls cost nothing more.
static bool may_be_in_view(const char* path) {
  if (per_process_stat(path)) return false;
  unsigned cpu = 0;
  if (cpu_dir_name(path, &cpu) != NULL) return true;
  const char* name = base_name(path);
  return strcmp(name, "online") == 0 || strcmp(name, "present") == 0 ||
         strcmp(name, "offline") == 0 || strcmp(name, "cpuinfo") == 0 ||
         strcmp(name, "stat") == 0 || strcmp(name, "cpulist") == 0 || ends_with(name, "_list") ||
         is_mask_name(name);
}

// "/proc/self/fd/<fd>" in link (40 bytes), without snprintf.
static void fd_link(int fd, char* link) {
  static const char prefix[] = "/proc/self/fd/";
  memcpy(link, prefix, sizeof prefix);
  char digits[12];
  size_t n = 0;
  unsigned v = (unsigned)fd;
  do {
    digits[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  size_t at = sizeof prefix - 1;
  while (n > 0) link[at++] = digits[--n];
  link[at] = '\0';
}

// A path whose spelling alone says which file of the view it is: absolute, under a directory of
// the view, without "//", "/./" or "/../" (classify's string comparison is then the kernel's
// answer, at no cost).
// Only the shapes the views' files have, through no link: cpu/{online,present,offline},
// cpu/cpuN/online, cpu/cpuN/topology/NAME, cpu/cpuN/cache/indexM/NAME, node/nodeN/NAME.
// (cpuN/node0, cpuN/subsystem and cpuN/cpufreq are links: a path through them is resolved.)
static bool digits_then(const char* s, const char** rest) {
  if (*s < '0' || *s > '9') return false;
  while (*s >= '0' && *s <= '9') ++s;
  *rest = s;
  return true;
}
static bool one_name(const char* s) {  // a non-empty last component, not "." or ".."
  return *s != '\0' && strchr(s, '/') == NULL && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}
static bool plain_view_path(const char* path) {
  if (strcmp(path, "/proc/cpuinfo") == 0 || strcmp(path, "/proc/stat") == 0) return true;
  const char* rest = NULL;
  if (starts_with(path, k_node_dir)) {
    return digits_then(path + sizeof k_node_dir - 1, &rest) && rest[0] == '/' && one_name(rest + 1);
  }
  if (!starts_with(path, k_cpu_dir) || path[sizeof k_cpu_dir - 1] != '/') return false;
  const char* name = path + sizeof k_cpu_dir;
  if (strcmp(name, "online") == 0 || strcmp(name, "present") == 0 || strcmp(name, "offline") == 0)
    return true;
  if (!starts_with(name, "cpu") || !digits_then(name + 3, &rest) || rest[0] != '/') return false;
  rest += 1;
  if (strcmp(rest, "online") == 0) return true;
  if (starts_with(rest, "topology/")) return one_name(rest + 9);
  if (starts_with(rest, "cache/index") && digits_then(rest + 11, &rest) && rest[0] == '/')
    return one_name(rest + 1);
  return false;
}

// The file `path` (relative to dirfd) names as the kernel resolves it, every "..", "//" and link
// included (/proc/self/root/sys/..., /proc/self/task/../../cpuinfo, ./online in the CPU
// directory), in out relative to fsroot: one O_PATH open and one readlink. false when it does not
// resolve (the real open then says why), does not fit, or lies outside fsroot.
static bool resolved_path(const char* fsroot, int dirfd, const char* path, int flags, char* out,
                          size_t size) {
  char full[1024];
  const char* target = path;
  const size_t root = strlen(fsroot);
  if (path[0] == '/' && root > 0) {
    if (!under_root(fsroot, path, full)) return false;
    target = full;
  }
  const int fd = sys_openat(dirfd, target, O_PATH | O_CLOEXEC | (flags & O_NOFOLLOW));
  if (fd < 0) return false;
  char link[40];
  fd_link(fd, link);
  const long len = tf_raw_syscall6(SYS_readlinkat, AT_FDCWD, (long)(uintptr_t)link,
                                   (long)(uintptr_t)out, (long)size - 1, 0, 0);
  sys_close(fd);
  if (len <= 0 || out[0] != '/') return false;
  out[len] = '\0';
  if (root > 0) {
    if (strncmp(out, fsroot, root) != 0 || out[root] != '/') return false;
    memmove(out, out + root, (size_t)len - root + 1);
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// The views.
static bool put_cpulist(buffer* b, const tf_mask* cpus) {
  bool first = true;
  for (unsigned cpu = 0; cpu < TFPIN_MAX_CPUS; ++cpu) {
    if (!mask_has(cpus, cpu)) continue;
    unsigned last = cpu;
    while (last + 1 < TFPIN_MAX_CPUS && mask_has(cpus, last + 1)) ++last;
    if (!first && !put(b, ",", 1)) return false;
    if (!put_u64(b, cpu)) return false;
    if (last > cpu && (!put(b, "-", 1) || !put_u64(b, last))) return false;
    first = false;
    cpu = last;
  }
  return put(b, "\n", 1);
}

// A kernel CPU list ("0-3,8\n", possibly empty) into a mask; ids beyond the shim's limit are
// dropped (they cannot be in a plan).
static bool parse_kernel_cpulist(const char* s, size_t n, tf_mask* out) {
  memset(out, 0, sizeof *out);
  size_t i = 0;
  while (i < n && s[i] != '\n') {
    unsigned long first = 0;
    unsigned long last = 0;
    if (s[i] < '0' || s[i] > '9') return false;
    while (i < n && s[i] >= '0' && s[i] <= '9') first = first * 10 + (unsigned long)(s[i++] - '0');
    last = first;
    if (i < n && s[i] == '-') {
      ++i;
      last = 0;
      while (i < n && s[i] >= '0' && s[i] <= '9') last = last * 10 + (unsigned long)(s[i++] - '0');
    }
    for (unsigned long cpu = first; cpu <= last && cpu < TFPIN_MAX_CPUS; ++cpu) {
      mask_set(out, (unsigned)cpu);
    }
    if (i < n && s[i] == ',') ++i;
  }
  return true;
}

static void mask_and(tf_mask* m, const tf_mask* with) {
  for (unsigned i = 0; i < TF_MASK_WORDS; ++i) m->w[i] &= with->w[i];
}

static int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// A kernel CPU mask ("ff,ffffffff\n": 32-bit groups, most significant first) with the CPUs
// outside the plan cleared, in the same layout (each group keeps its number of digits).
static bool view_mask(const shim_plan* plan, const buffer* real, buffer* out) {
  size_t end = real->size;
  while (end > 0 && (real->data[end - 1] == '\n' || real->data[end - 1] == ' ')) --end;
  unsigned group = 1;
  for (size_t i = 0; i < end; ++i) group += real->data[i] == ',' ? 1u : 0u;
  for (size_t i = 0;;) {
    --group;  // the first group printed holds the highest CPUs
    size_t stop = i;
    while (stop < end && real->data[stop] != ',') ++stop;
    const size_t digits = stop - i;
    if (!buffer_reserve(out, digits + 2)) return false;
    for (size_t d = 0; d < digits; ++d) {  // d = 0: the group's lowest four CPUs
      const int v = hex_value(real->data[stop - 1 - d]);
      if (v < 0) return false;
      unsigned kept = 0;
      for (unsigned b = 0; b < 4; ++b) {
        const unsigned long cpu = (unsigned long)group * 32 + d * 4 + b;
        if (((unsigned)v >> b & 1u) && cpu < TFPIN_MAX_CPUS && in_plan(plan, (unsigned)cpu))
          kept |= 1u << b;
      }
      out->data[out->size + digits - 1 - d] = "0123456789abcdef"[kept];
    }
    out->size += digits;
    if (group == 0 || stop >= end) break;
    out->data[out->size++] = ',';
    i = stop + 1;
  }
  return put(out, "\n", 1);
}

// The value after "name\t...: " on a /proc/cpuinfo line, or NULL.
static const char* field_value(const char* line, const char* line_end, const char* name) {
  const size_t n = strlen(name);
  if ((size_t)(line_end - line) < n || memcmp(line, name, n) != 0) return NULL;
  const char* p = line + n;
  while (p < line_end && (*p == ' ' || *p == '\t')) ++p;
  if (p >= line_end || *p != ':') return NULL;
  ++p;
  while (p < line_end && *p == ' ') ++p;
  return p;
}
static long parse_number(const char* p, const char* end) {
  if (p == NULL || p >= end || *p < '0' || *p > '9') return -1;
  long v = 0;
  while (p < end && *p >= '0' && *p <= '9' && v < (1L << 40)) v = v * 10 + (*p++ - '0');
  return v;
}

// One /proc/cpuinfo block ("processor : N" ... up to a blank line).
typedef struct {
  const char* begin;
  const char* end;  // after the blank line (or the end of the file)
  long processor, package, core;
} cpuinfo_block;

static const char* next_block(const char* p, const char* end, cpuinfo_block* block) {
  block->begin = p;
  block->processor = block->package = block->core = -1;
  while (p < end) {
    const char* eol = memchr(p, '\n', (size_t)(end - p));
    const char* line_end = eol != NULL ? eol : end;
    const char* next = eol != NULL ? eol + 1 : end;
    if (line_end == p) {  // the blank line ends the block
      block->end = next;
      return next;
    }
    const char* v;
    if ((v = field_value(p, line_end, "processor")) != NULL)
      block->processor = parse_number(v, line_end);
    if ((v = field_value(p, line_end, "physical id")) != NULL)
      block->package = parse_number(v, line_end);
    if ((v = field_value(p, line_end, "core id")) != NULL) block->core = parse_number(v, line_end);
    p = next;
  }
  block->end = end;
  return end;
}

// What the plan keeps of one package: its processors ("siblings") and distinct cores ("cpu
// cores").
typedef struct {
  long processor, package, core;
  long siblings, cores;
  bool first_of_core;
} kept_processor;

// Only the plan's processors, under their real numbers (readers match "processor" with the cpuN
// directories and with sched_setaffinity ids). "siblings" and "cpu cores" count what the plan
// keeps of each package, as they do on a machine with CPUs offline.
static bool view_cpuinfo(const shim_plan* plan, const buffer* real, buffer* out) {
  const char* const end = real->data + real->size;
  buffer scratch = {0};
  cpuinfo_block block;
  size_t kept = 0;
  for (const char* p = real->data; p < end;) {
    p = next_block(p, end, &block);
    if (block.processor < 0 || !in_plan(plan, (unsigned)block.processor)) continue;
    const kept_processor k = {block.processor, block.package, block.core, 0, 0, false};
    if (!put(&scratch, (const char*)&k, sizeof k)) {
      buffer_free(&scratch);
      return false;
    }
    ++kept;
  }
  kept_processor* all = (kept_processor*)(void*)scratch.data;
  for (size_t j = 0; j < kept; ++j) {  // the first processor of each core stands for it
    all[j].first_of_core = true;
    for (size_t k = 0; k < j && all[j].first_of_core; ++k) {
      all[j].first_of_core = !(all[k].package == all[j].package && all[k].core == all[j].core);
    }
  }
  for (size_t i = 0; i < kept; ++i) {
    for (size_t j = 0; j < kept; ++j) {
      if (all[j].package != all[i].package) continue;
      ++all[i].siblings;
      if (all[j].first_of_core) ++all[i].cores;
    }
  }
  bool ok = true;
  for (const char* p = real->data; p < end && ok;) {
    p = next_block(p, end, &block);
    const kept_processor* mine = NULL;
    if (block.processor >= 0) {
      if (!in_plan(plan, (unsigned)block.processor)) continue;
      for (size_t i = 0; i < kept && mine == NULL; ++i) {
        if (all[i].processor == block.processor) mine = &all[i];
      }
    }
    for (const char* line = block.begin; line < block.end && ok;) {
      const char* eol = memchr(line, '\n', (size_t)(block.end - line));
      const char* next = eol != NULL ? eol + 1 : block.end;
      const char* line_end = eol != NULL ? eol : block.end;
      const char* v = NULL;
      long replacement = -1;
      if (mine != NULL && mine->package >= 0) {
        if ((v = field_value(line, line_end, "siblings")) != NULL) {
          replacement = mine->siblings;
        } else if ((v = field_value(line, line_end, "cpu cores")) != NULL) {
          replacement = mine->cores;
        }
      }
      if (replacement >= 0) {
        ok = put(out, line, (size_t)(v - line)) && put_u64(out, (unsigned long long)replacement) &&
             put(out, "\n", 1);
      } else {
        ok = put(out, line, (size_t)(next - line));
      }
      line = next;
    }
  }
  buffer_free(&scratch);
  return ok;
}

// /proc/stat without the cpuN lines of CPUs outside the plan; the "cpu" total is the sum of the
// lines kept, so that per-CPU averages computed from it stay right. One pass: the lines kept go to
// a scratch buffer while the plan's cpuN lines are summed, and the total, which the kernel writes
// first, is written before them once the sum is known.
enum { STAT_FIELDS = 16 };
static bool view_stat(const shim_plan* plan, const buffer* real, buffer* out) {
  const char* const end = real->data + real->size;
  unsigned long long total[STAT_FIELDS] = {0};
  unsigned fields = 0;
  const char* total_line = NULL;  // the kernel's own, kept as it is if no cpuN line has fields
  size_t total_size = 0;
  buffer rest = {0};
  bool ok = true;
  for (const char* line = real->data; ok && line < end;) {
    const char* eol = memchr(line, '\n', (size_t)(end - line));
    const char* next = eol != NULL ? eol + 1 : end;
    unsigned cpu = 0;
    char name[16] = {0};
    size_t n = 0;
    while (line + n < next && line[n] != ' ' && n < sizeof name - 1) {
      name[n] = line[n];
      ++n;
    }
    if (strcmp(name, "cpu") == 0) {
      total_line = line;
      total_size = (size_t)(next - line);
    } else if (cpu_dir_name(name, &cpu) == NULL) {
      ok = put(&rest, line, (size_t)(next - line));
    } else if (in_plan(plan, cpu)) {
      unsigned f = 0;
      for (const char* p = line + n; p < next && f < STAT_FIELDS;) {
        while (p < next && *p == ' ') ++p;
        if (p >= next || *p < '0' || *p > '9') break;
        unsigned long long v = 0;
        while (p < next && *p >= '0' && *p <= '9') v = v * 10 + (unsigned long long)(*p++ - '0');
        total[f++] += v;
      }
      if (f > fields) fields = f;
      ok = put(&rest, line, (size_t)(next - line));
    }
    line = next;
  }
  if (ok && total_line != NULL) {
    if (fields > 0) {
      ok = put_str(out, "cpu ");
      for (unsigned f = 0; ok && f < fields; ++f) ok = put(out, " ", 1) && put_u64(out, total[f]);
      ok = ok && put(out, "\n", 1);
    } else {
      ok = put(out, total_line, total_size);
    }
  }
  ok = ok && (rest.size == 0 || put(out, rest.data, rest.size));
  buffer_free(&rest);
  return ok;
}

static bool build_view(const shim_plan* plan, const char* fsroot, view_kind kind, const char* path,
                       buffer* out) {
  if (kind == VIEW_PLAN_LIST) return put_cpulist(out, &plan->mask);
  if (kind == VIEW_CPU_OFFLINE) return put(out, "0\n", 2);
  buffer real = {0};
  bool ok = false;
  if (kind == VIEW_OFFLINE) {
    tf_mask possible;
    if (read_real(fsroot, "/sys/devices/system/cpu/possible", &real) &&
        parse_kernel_cpulist(real.data, real.size, &possible)) {
      for (unsigned i = 0; i < TF_MASK_WORDS; ++i) possible.w[i] &= ~plan->mask.w[i];
      ok = put_cpulist(out, &possible);
    }
  } else if (read_real(fsroot, path, &real)) {
    if (kind == VIEW_LIST) {
      tf_mask cpus;
      if (parse_kernel_cpulist(real.data, real.size, &cpus)) {
        mask_and(&cpus, &plan->mask);
        ok = put_cpulist(out, &cpus);
      }
    } else if (kind == VIEW_MASK) {
      ok = view_mask(plan, &real, out);
    } else if (kind == VIEW_CPUINFO) {
      ok = view_cpuinfo(plan, &real, out);
    } else if (kind == VIEW_STAT) {
      ok = view_stat(plan, &real, out);
    }
  }
  buffer_free(&real);
  return ok;
}

// The view in a memfd, sealed, and handed out as a fresh read-only open of it (its own offset, the
// O_RDONLY access mode readers may check).
static int serve(const buffer* content, int flags) {
  const int memfd = (int)sys3(SYS_memfd_create, (long)(uintptr_t) "tfpin-cpu-view",
                              MFD_CLOEXEC | MFD_ALLOW_SEALING, 0);
  if (memfd < 0) return memfd;
  size_t written = 0;
  while (written < content->size) {
    const long n = sys3(SYS_write, memfd, (long)(uintptr_t)(content->data + written),
                        (long)(content->size - written));
    if (n == -EINTR) continue;
    if (n <= 0) {
      sys_close(memfd);
      return n < 0 ? (int)n : -EIO;
    }
    written += (size_t)n;
  }
  (void)sys3(SYS_fcntl, memfd, F_ADD_SEALS,
             F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL);
  char link[40];
  fd_link(memfd, link);
  // The caller's O_CLOEXEC and O_NONBLOCK (status flags a reader may rely on) are kept.
  const int fd = sys_openat(AT_FDCWD, link, O_RDONLY | (flags & (O_CLOEXEC | O_NONBLOCK)));
  sys_close(memfd);
  return fd;
}

// Does the real file behind a view exist? (The plan's own lists, and a CPU outside it, need none.)
static bool real_file_exists(const char* fsroot, view_kind kind, const char* path) {
  if (kind == VIEW_PLAN_LIST || kind == VIEW_CPU_OFFLINE) return true;
  char full[1024];
  if (!under_root(fsroot, path, full)) return true;
  struct stat st;
  return tf_raw_syscall6(SYS_newfstatat, AT_FDCWD, (long)(uintptr_t)full, (long)(uintptr_t)&st, 0,
                         0, 0) != -ENOENT;
}

int cpu_view_open(const shim_plan* plan, const char* fsroot, int dirfd, const char* path,
                  int flags) {
  // O_PATH is a handle, not a read: the real file's. Written or created files are never views.
  if (path == NULL || (flags & O_PATH) != 0 || (flags & O_ACCMODE) != O_RDONLY ||
      (flags & (O_CREAT | O_TRUNC)) != 0)
    return CPU_VIEW_PASS;
  char resolved[1024];
  const char* where = path;
  if (!plain_view_path(path)) {
    if (!may_be_in_view(path) ||
        !resolved_path(fsroot, dirfd, path, flags, resolved, sizeof resolved))
      return CPU_VIEW_PASS;
    where = resolved;
  }
  const view_kind kind = classify(plan, where);
  if (kind == VIEW_PASS) return CPU_VIEW_PASS;
  if ((flags & O_DIRECTORY) != 0) return CPU_VIEW_PASS;  // a file of the view is not a directory
  buffer content = {0};
  int fd = -EIO;
  if (build_view(plan, fsroot, kind, where, &content)) fd = serve(&content, flags);
  buffer_free(&content);
  if (fd >= 0) return fd;
  // A file of the view that is not there (die_cpus_list on an older kernel): the real open says
  // so. Any other view that cannot be built (memfd_create denied, no descriptor free) must not
  // break the program: the real file then, counted.
  if (!real_file_exists(fsroot, kind, where)) return CPU_VIEW_PASS;
  return CPU_VIEW_FALLBACK;
}

bool cpu_view_hides_entry(const shim_plan* plan, int dirfd, const char* name) {
  unsigned cpu = 0;
  const char* rest = cpu_dir_name(name, &cpu);
  if (rest == NULL || *rest != '\0' || in_plan(plan, cpu)) return false;
  // Only in /sys/devices/system/cpu itself (compared by device and inode, one fstat per hidden
  // candidate).
  struct stat dir;
  struct stat cpu_dir;
  if (tf_raw_syscall6(SYS_newfstatat, dirfd, (long)(uintptr_t) "", (long)(uintptr_t)&dir,
                      AT_EMPTY_PATH, 0, 0) != 0)
    return false;
  if (tf_raw_syscall6(SYS_newfstatat, AT_FDCWD, (long)(uintptr_t)k_cpu_dir,
                      (long)(uintptr_t)&cpu_dir, 0, 0, 0) != 0)
    return false;
  return dir.st_dev == cpu_dir.st_dev && dir.st_ino == cpu_dir.st_ino;
}
