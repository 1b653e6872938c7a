// The CPU files read the way programs read them, at every point of a process's life: in a
// constructor (before main, as a library sizing its pool at load does), from many threads at once,
// in a forked child. Prints one JSON object:
//   {"ctor_online": "...", "online": "...", "present": "...", "processors": N, "stat_cpus": N,
//    "cpu_dirs": N, "threads_agree": true|false, "fork_online": "..."}
#define _GNU_SOURCE
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// A small file's first line (open/read: what C runtimes do), without the newline.
static void first_line(const char* path, char* out, size_t size) {
  out[0] = '\0';
  const int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    snprintf(out, size, "error");
    return;
  }
  const ssize_t n = read(fd, out, size - 1);
  close(fd);
  out[n > 0 ? n : 0] = '\0';
  out[strcspn(out, "\n")] = '\0';
}

// Lines of `path` that start with `prefix` (fopen/fgets: what C++ and scripting runtimes do).
static int count_lines(const char* path, const char* prefix, bool cpu_number) {
  FILE* f = fopen(path, "re");
  if (f == NULL) return -1;
  char line[4096];
  int count = 0;
  const size_t n = strlen(prefix);
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, prefix, n) == 0 && (!cpu_number || isdigit((unsigned char)line[n]))) ++count;
  }
  fclose(f);
  return count;
}

static int count_cpu_dirs(void) {
  DIR* d = opendir("/sys/devices/system/cpu");
  if (d == NULL) return -1;
  int count = 0;
  for (struct dirent* e; (e = readdir(d)) != NULL;) {
    if (strncmp(e->d_name, "cpu", 3) == 0 && isdigit((unsigned char)e->d_name[3])) ++count;
  }
  closedir(d);
  return count;
}

static char g_ctor_online[256];
__attribute__((constructor)) static void read_before_main(void) {
  first_line("/sys/devices/system/cpu/online", g_ctor_online, sizeof g_ctor_online);
}

static char g_online[256];
static int g_processors;
static bool g_threads_agree = true;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void* reader(void* unused) {
  (void)unused;
  for (int i = 0; i < 50; ++i) {
    char online[256];
    first_line("/sys/devices/system/cpu/online", online, sizeof online);
    const int processors = count_lines("/proc/cpuinfo", "processor", false);
    if (strcmp(online, g_online) != 0 || processors != g_processors) {
      pthread_mutex_lock(&g_lock);
      g_threads_agree = false;
      pthread_mutex_unlock(&g_lock);
    }
  }
  return NULL;
}

int main(void) {
  first_line("/sys/devices/system/cpu/online", g_online, sizeof g_online);
  char present[256];
  first_line("/sys/devices/system/cpu/present", present, sizeof present);
  g_processors = count_lines("/proc/cpuinfo", "processor", false);
  pthread_t threads[8];
  for (int i = 0; i < 8; ++i) pthread_create(&threads[i], NULL, reader, NULL);
  for (int i = 0; i < 8; ++i) pthread_join(threads[i], NULL);

  int pipe_fds[2];
  char fork_online[256] = "error";
  if (pipe(pipe_fds) == 0) {
    const pid_t child = fork();
    if (child == 0) {
      char online[256];
      first_line("/sys/devices/system/cpu/online", online, sizeof online);
      if (write(pipe_fds[1], online, strlen(online) + 1) < 0) _exit(1);
      _exit(0);
    }
    close(pipe_fds[1]);
    const ssize_t n = read(pipe_fds[0], fork_online, sizeof fork_online - 1);
    fork_online[n > 0 ? n : 0] = '\0';
    close(pipe_fds[0]);
    waitpid(child, NULL, 0);
  }
  printf(
      "{\"ctor_online\": \"%s\", \"online\": \"%s\", \"present\": \"%s\", \"processors\": %d, "
      "\"stat_cpus\": %d, \"cpu_dirs\": %d, \"threads_agree\": %s, \"fork_online\": \"%s\"}\n",
      g_ctor_online, g_online, present, g_processors, count_lines("/proc/stat", "cpu", true),
      count_cpu_dirs(), g_threads_agree ? "true" : "false", fork_online);
  return 0;
}
