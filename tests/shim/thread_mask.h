/* The calling thread's Cpus_allowed_list from /proc ("0-3,8"), the kernel's word: the shim serves
 * its own view of sched_getaffinity (and of syscall()), not of this file. "?" when unreadable. */
#ifndef TFPIN_TESTS_THREAD_MASK_H
#define TFPIN_TESTS_THREAD_MASK_H
#include <stdio.h>
#include <string.h>

static void thread_allowed_list(char* out, size_t len) {
  FILE* f = fopen("/proc/thread-self/status", "r");
  char line[4096];
  snprintf(out, len, "?");
  if (!f) return;
  while (fgets(line, sizeof line, f)) {
    if (strncmp(line, "Cpus_allowed_list:", 18) == 0) {
      char* v = line + 18;
      while (*v == ' ' || *v == '\t') ++v;
      v[strcspn(v, "\n")] = '\0';
      snprintf(out, len, "%s", v);
    }
  }
  fclose(f);
}

#endif
