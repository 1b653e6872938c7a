// System calls without libc for the shim (tfpin_shim.c, cpu_files.c): see raw_syscall.h.
#include "raw_syscall.h"

#include <errno.h>
#include <stddef.h>

long (*tf_raw_syscall_fallback)(long n, ...);

long tf_raw_syscall6(long n, long a1, long a2, long a3, long a4, long a5, long a6) {
#if defined(__x86_64__)
  long ret;
  register long r10 __asm__("r10") = a4;
  register long r8 __asm__("r8") = a5;
  register long r9 __asm__("r9") = a6;
  __asm__ volatile("syscall"
                   : "=a"(ret)
                   : "a"(n), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
                   : "rcx", "r11", "memory");
  return ret;
#elif defined(__aarch64__)
  register long x8 __asm__("x8") = n;
  register long x0 __asm__("x0") = a1;
  register long x1 __asm__("x1") = a2;
  register long x2 __asm__("x2") = a3;
  register long x3 __asm__("x3") = a4;
  register long x4 __asm__("x4") = a5;
  register long x5 __asm__("x5") = a6;
  __asm__ volatile("svc 0"
                   : "+r"(x0)
                   : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                   : "memory");
  return x0;
#else
  if (tf_raw_syscall_fallback == NULL) return -ENOSYS;
  const int saved = errno;
  long r = tf_raw_syscall_fallback(n, a1, a2, a3, a4, a5, a6);
  if (r == -1) r = -errno;
  errno = saved;
  return r;
#endif
}
