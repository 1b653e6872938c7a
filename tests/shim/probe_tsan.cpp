// Built with -fsanitize=thread: ThreadSanitizer's start-up calls sysconf before it can intercept
// anything, which crashed every such program under a shim whose first call took pthread_once.
#include <unistd.h>

#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

int main() {
  std::mutex mutex;
  long started = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&] {
      std::lock_guard lock(mutex);
      ++started;
    });
  }
  for (std::thread& t : threads) t.join();
  std::printf("{\"threads\":%ld,\"online\":%ld}\n", started, sysconf(_SC_NPROCESSORS_ONLN));
  return 0;
}
