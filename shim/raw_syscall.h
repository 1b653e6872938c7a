// System calls without libc (raw_syscall.c): no hook, no errno, no libc state. The shim hooks
// libc's syscall(), open() and fopen() itself, so its own calls must not go through them.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// Returns the kernel's result: >= 0, or -errno.
long tf_raw_syscall6(long n, long a1, long a2, long a3, long a4, long a5, long a6);

// On architectures without the inline system call (not x86-64 or aarch64): libc's real syscall(),
// which the shim sets once it has resolved it; until then every call returns -ENOSYS.
extern long (*tf_raw_syscall_fallback)(long n, ...);

#ifdef __cplusplus
}
#endif
