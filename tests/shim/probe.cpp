// shim-probe: a real OpenMP + std::thread program run by test_shim.py with and without
// libtfpin-shim.so preloaded. Each mode prints one JSON object on stdout describing what the
// threads saw (counts through libc, masks through /proc and raw syscalls).
//
//   counts                      CPU counts as every API reports them
//   omp N [R]                   R regions with num_threads(N) (N=0: no clause); team and masks
//   pool                        hardware_concurrency() std::threads and their masks
//   constructs N                parallel for (every schedule), parallel sections and the old-ABI
//                               GOMP_parallel*_start entry points, all with num_threads(N)
//   interop R N                 two std::threads running R concurrent regions each (num_threads(N))
//   after                       a std::thread created after the main thread led a region
//   setaff all|cpu C|pall|pcpu C  sched_setaffinity / pthread_setaffinity_np, then the real mask
//   forkexec PROG ARGS...       fork, the child execs PROG; the parent waits
//   fork                        fork; the child creates a thread and prints what it saw
//   churn N [A]                 N short-lived threads (A alive at a time, 100), masks collected
//   storm SIGNALS               SIGUSR1 storm at threads creating threads; the handler queries
//                               sysconf / get_nprocs / sched_getaffinity
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <latch>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "probe_util.hpp"

using probe::json;

namespace {

int cpuset_count(const cpu_set_t& set) { return CPU_COUNT(&set); }

std::vector<int> cpuset_list(const cpu_set_t& set) {
  std::vector<int> out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

int mode_counts() {
  cpu_set_t proc, thr;
  CPU_ZERO(&proc);
  CPU_ZERO(&thr);
  const int rc1 = sched_getaffinity(0, sizeof proc, &proc);
  const int rc2 = pthread_getaffinity_np(pthread_self(), sizeof thr, &thr);
  cpu_set_t by_tid;
  CPU_ZERO(&by_tid);
  sched_getaffinity(static_cast<pid_t>(probe::gettid_raw()), sizeof by_tid, &by_tid);
  std::printf(
      "{\"sysconf_onln\":%ld,\"sysconf_conf\":%ld,\"get_nprocs\":%d,\"get_nprocs_conf\":%d,"
      "\"sched_getaffinity\":%d,\"sched_getaffinity_rc\":%d,\"sched_getaffinity_cpus\":%s,"
      "\"sched_getaffinity_tid\":%d,\"pthread_getaffinity\":%d,\"pthread_getaffinity_rc\":%d,"
      "\"hardware_concurrency\":%u,\"omp_get_num_procs\":%d,\"omp_get_max_threads\":%d,"
      "\"page_size\":%ld,\"real_mask\":%s}\n",
      sysconf(_SC_NPROCESSORS_ONLN), sysconf(_SC_NPROCESSORS_CONF), get_nprocs(), get_nprocs_conf(),
      cpuset_count(proc), rc1, json(cpuset_list(proc)).c_str(), cpuset_count(by_tid),
      cpuset_count(thr), rc2, std::thread::hardware_concurrency(), omp_get_num_procs(),
      omp_get_max_threads(), sysconf(_SC_PAGESIZE), json(probe::raw_affinity()).c_str());
  return 0;
}

// A program that sizes a per-CPU array with the configured CPU count and indexes it with the CPU
// it runs on (as allocators and per-CPU statistics do); .at() makes an out-of-range index abort.
int mode_percpu() {
  const long configured = sysconf(_SC_NPROCESSORS_CONF);
  std::vector<long> per_cpu(static_cast<std::size_t>(configured > 0 ? configured : 0));
  int cpu = -1;
  for (int i = 0; i < 1000; ++i) {
    cpu = sched_getcpu();
    ++per_cpu.at(static_cast<std::size_t>(cpu));
  }
  std::printf("{\"configured\":%ld,\"cpu\":%d}\n", configured, cpu);
  return 0;
}

struct Member {
  int num;
  std::vector<int> allowed;
  int cpu;
};

// One region; every member reports its own mask while all of them are alive.
std::vector<Member> run_region(int n, int spin_us) {
  std::vector<Member> members;
  std::mutex mu;
  auto body = [&] {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(spin_us)) {
    }
    Member m{omp_get_thread_num(), probe::my_allowed(), sched_getcpu()};
#pragma omp barrier
    std::lock_guard<std::mutex> lock(mu);
    members.push_back(m);
  };
  probe::run_team(n, body);
  std::sort(members.begin(), members.end(),
            [](const Member& a, const Member& b) { return a.num < b.num; });
  return members;
}

std::string members_json(const std::vector<Member>& members) {
  std::string s = "[";
  for (size_t i = 0; i < members.size(); ++i) {
    s += (i ? "," : "");
    s += "{\"num\":" + std::to_string(members[i].num) + ",\"allowed\":" + json(members[i].allowed) +
         "}";
  }
  return s + "]";
}

int mode_omp(int n, int regions) {
  std::vector<Member> members;
  for (int r = 0; r < regions; ++r) members = run_region(n, 0);
  std::printf("{\"team\":%zu,\"members\":%s,\"main_after\":%s,\"tasks\":%s}\n", members.size(),
              members_json(members).c_str(), json(probe::my_allowed()).c_str(),
              probe::task_snapshot().c_str());
  return 0;
}

// --- combined constructs and the old (GCC < 4.9) ABI entry points ---
extern "C" {
void GOMP_parallel_start(void (*fn)(void*), void* data, unsigned num_threads);
void GOMP_parallel_end(void);
void GOMP_parallel_loop_dynamic_start(void (*fn)(void*), void* data, unsigned num_threads,
                                      long start, long end, long incr, long chunk);
bool GOMP_loop_dynamic_next(long* istart, long* iend);
void GOMP_loop_end_nowait(void);
void GOMP_parallel_sections_start(void (*fn)(void*), void* data, unsigned num_threads,
                                  unsigned count);
unsigned GOMP_sections_next(void);
void GOMP_sections_end_nowait(void);
}

struct Team {
  std::mutex mu;
  int size = 0;
  std::map<int, std::vector<int>> masks;  // thread num -> mask
  void record() {
    auto m = probe::my_allowed();
    std::lock_guard<std::mutex> lock(mu);
    size = omp_get_num_threads();
    masks.emplace(omp_get_thread_num(), std::move(m));
  }
  std::string json_text() const {
    std::string s = "{\"team\":" + std::to_string(size) + ",\"masks\":[";
    size_t k = 0;
    for (const auto& [num, m] : masks) s += (k++ ? "," : "") + json(m);
    return s + "]}";
  }
};

void spin_us(int us) {
  const auto t0 = std::chrono::steady_clock::now();
  while (std::chrono::steady_clock::now() - t0 < std::chrono::microseconds(us)) {
  }
}

void old_parallel_body(void* p) { static_cast<Team*>(p)->record(); }
void old_loop_body(void* p) {
  long s = 0, e = 0;
  while (GOMP_loop_dynamic_next(&s, &e)) {
    static_cast<Team*>(p)->record();
    spin_us(50);
  }
  GOMP_loop_end_nowait();
}
void old_sections_body(void* p) {
  for (unsigned i = GOMP_sections_next(); i != 0; i = GOMP_sections_next()) {
    static_cast<Team*>(p)->record();
    spin_us(50);
  }
  GOMP_sections_end_nowait();
}

int mode_constructs(int n) {
  std::map<std::string, Team> teams;
  auto body = [&](const char* name) {
    teams[name].record();
    spin_us(50);
  };
  teams["parallel_for_static"];
  teams["parallel_for_dynamic"];
  teams["parallel_for_guided"];
  teams["parallel_for_runtime"];
  teams["parallel_for_nonmonotonic"];
  teams["parallel_sections"];
  teams["old_parallel_start"];
  teams["old_parallel_loop_dynamic_start"];
  teams["old_parallel_sections_start"];
#pragma omp parallel for num_threads(n) schedule(static, 1)
  for (int i = 0; i < 64; ++i) body("parallel_for_static");
#pragma omp parallel for num_threads(n) schedule(dynamic, 1)
  for (int i = 0; i < 64; ++i) body("parallel_for_dynamic");
#pragma omp parallel for num_threads(n) schedule(guided, 1)
  for (int i = 0; i < 64; ++i) body("parallel_for_guided");
#pragma omp parallel for num_threads(n) schedule(runtime)
  for (int i = 0; i < 64; ++i) body("parallel_for_runtime");
#pragma omp parallel for num_threads(n) schedule(nonmonotonic : dynamic, 1)
  for (int i = 0; i < 64; ++i) body("parallel_for_nonmonotonic");
#pragma omp parallel sections num_threads(n)
  {
#pragma omp section
    body("parallel_sections");
#pragma omp section
    body("parallel_sections");
#pragma omp section
    body("parallel_sections");
#pragma omp section
    body("parallel_sections");
  }
  Team* t = &teams["old_parallel_start"];
  GOMP_parallel_start(old_parallel_body, t, static_cast<unsigned>(n));
  old_parallel_body(t);
  GOMP_parallel_end();
  t = &teams["old_parallel_loop_dynamic_start"];
  GOMP_parallel_loop_dynamic_start(old_loop_body, t, static_cast<unsigned>(n), 0, 64, 1, 1);
  old_loop_body(t);
  GOMP_parallel_end();
  t = &teams["old_parallel_sections_start"];
  GOMP_parallel_sections_start(old_sections_body, t, static_cast<unsigned>(n), 16);
  old_sections_body(t);
  GOMP_parallel_end();
  std::string out = "{";
  size_t k = 0;
  for (const auto& [name, team] : teams)
    out += (k++ ? ",\"" : "\"") + name + "\":" + team.json_text();
  std::printf("%s}\n", out.c_str());
  return 0;
}

int mode_pool() {
  const unsigned n = std::thread::hardware_concurrency();
  std::vector<std::vector<int>> seen(n);
  std::atomic<unsigned> arrived{0};
  std::vector<std::thread> pool;
  for (unsigned i = 0; i < n; ++i) {
    pool.emplace_back([&, i] {
      seen[i] = probe::my_allowed();
      arrived.fetch_add(1);
      while (arrived.load() < n) std::this_thread::yield();  // all alive together
    });
  }
  for (auto& t : pool) t.join();
  std::string threads = "[";
  for (unsigned i = 0; i < n; ++i) threads += (i ? "," : "") + json(seen[i]);
  threads += "]";
  std::printf("{\"hardware_concurrency\":%u,\"threads\":%s}\n", n, threads.c_str());
  return 0;
}

int mode_interop(int regions, int n) {
  struct Seen {
    std::set<int> allowed_union, cpus;
    std::set<std::vector<int>> member_masks;
    size_t team_max = 0;
  };
  Seen seen[2];
  std::atomic<int> ready{0};
  auto inter_op = [&](int which) {
    ready.fetch_add(1);
    while (ready.load() < 2) std::this_thread::yield();
    for (int r = 0; r < regions; ++r) {
      const auto members = run_region(n, 200);
      seen[which].team_max = std::max(seen[which].team_max, members.size());
      for (const auto& m : members) {
        seen[which].allowed_union.insert(m.allowed.begin(), m.allowed.end());
        seen[which].member_masks.insert(m.allowed);
        seen[which].cpus.insert(m.cpu);
      }
    }
  };
  std::thread a(inter_op, 0), b(inter_op, 1);
  a.join();
  b.join();
  std::string out = "{";
  for (int i = 0; i < 2; ++i) {
    std::string masks = "[";
    size_t k = 0;
    for (const auto& m : seen[i].member_masks) masks += (k++ ? "," : "") + json(m);
    masks += "]";
    out += std::string(i ? "," : "") + "\"" + (i ? "B" : "A") +
           "\":{\"team_max\":" + std::to_string(seen[i].team_max) +
           ",\"allowed_union\":" + json(seen[i].allowed_union) + ",\"member_masks\":" + masks +
           ",\"cpus_run_on\":" + json(seen[i].cpus) + "}";
  }
  out += "}";
  std::printf("%s\n", out.c_str());
  return 0;
}

int mode_after() {
  const auto members = run_region(0, 0);
  std::vector<int> thread_mask, thread_raw;
  std::thread t([&] {
    thread_mask = probe::my_allowed();
    thread_raw = probe::raw_affinity();
  });
  t.join();
  std::printf("{\"team\":%zu,\"main_after_region\":%s,\"thread\":%s,\"thread_raw\":%s}\n",
              members.size(), json(probe::my_allowed()).c_str(), json(thread_mask).c_str(),
              json(thread_raw).c_str());
  return 0;
}

int mode_setaff(const std::string& how, int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (how == "all" || how == "pall") {
    for (int c = 0; c < CPU_SETSIZE; ++c) CPU_SET(c, &set);
  } else {
    CPU_SET(cpu, &set);
  }
  int rc, err;
  if (how[0] == 'p') {
    rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
    err = rc;
  } else {
    rc = sched_setaffinity(0, sizeof set, &set);
    err = rc == 0 ? 0 : errno;
  }
  // A thread created afterwards, and the process view through libc.
  std::vector<int> child;
  std::thread t([&] { child = probe::my_allowed(); });
  t.join();
  std::printf("{\"rc\":%d,\"errno\":%d,\"allowed\":%s,\"raw\":%s,\"child\":%s}\n", rc, err,
              json(probe::my_allowed()).c_str(), json(probe::raw_affinity()).c_str(),
              json(child).c_str());
  return 0;
}

int mode_forkexec(char** argv) {
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    execv(argv[0], argv);
    _exit(127);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int mode_fork() {
  // The parent first leads a region (so it is a pinned master) and creates a thread.
  const auto members = run_region(0, 0);
  std::thread([] {}).join();
  std::fflush(stdout);
  const pid_t pid = fork();
  if (pid == 0) {
    std::vector<int> mask;
    std::thread t([&] { mask = probe::my_allowed(); });
    t.join();
    std::printf("{\"who\":\"child\",\"sysconf\":%ld,\"thread\":%s,\"self\":%s}\n",
                sysconf(_SC_NPROCESSORS_ONLN), json(mask).c_str(),
                json(probe::my_allowed()).c_str());
    std::fflush(stdout);
    std::exit(0);  // exit(), not _exit(): the child's own report must be written
  }
  int status = 0;
  waitpid(pid, &status, 0);
  std::printf("{\"who\":\"parent\",\"team\":%zu,\"child_status\":%d}\n", members.size(),
              WIFEXITED(status) ? WEXITSTATUS(status) : 128);
  return 0;
}

// n threads, `alive` of them at a time; with alive == n every thread waits until all exist.
int mode_churn(int n, int alive) {
  std::mutex mu;
  std::set<std::vector<int>> masks;
  int created = 0;
  while (created < n) {
    std::vector<std::thread> batch;
    const int size = std::min(alive, n - created);
    std::latch all_alive(size);
    for (int i = 0; i < size; ++i, ++created) {
      batch.emplace_back([&] {
        auto m = probe::raw_affinity();
        {
          std::lock_guard<std::mutex> lock(mu);
          masks.insert(std::move(m));
        }
        all_alive.arrive_and_wait();
      });
    }
    for (auto& t : batch) t.join();
  }
  std::string out = "[";
  size_t k = 0;
  for (const auto& m : masks) out += (k++ ? "," : "") + json(m);
  std::printf("{\"created\":%d,\"distinct_masks\":%s]}\n", created, out.c_str());
  return 0;
}

// --- signal storm ---
std::atomic<long> g_handled{0}, g_bad{0};
long g_expect = -1;
void on_usr1(int) {
  const int saved = errno;
  cpu_set_t set;
  CPU_ZERO(&set);
  const long a = sysconf(_SC_NPROCESSORS_ONLN);
  const long b = get_nprocs();
  const int rc = sched_getaffinity(0, sizeof set, &set);
  if (a != g_expect || b != g_expect || rc != 0 || CPU_COUNT(&set) != g_expect) g_bad.fetch_add(1);
  g_handled.fetch_add(1);
  errno = saved;
}

int mode_storm(long signals) {
  g_expect = sysconf(_SC_NPROCESSORS_ONLN);
  struct sigaction sa {};
  sa.sa_handler = on_usr1;
  sa.sa_flags = SA_RESTART;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGUSR1, &sa, nullptr);

  std::atomic<bool> stop{false};
  std::atomic<long> spawned{0}, omp_regions{0};
  constexpr int kTargets = 4;
  std::vector<pthread_t> targets(kTargets);
  std::vector<std::thread> workers;
  std::atomic<int> started{0};
  for (int i = 0; i < kTargets; ++i) {
    workers.emplace_back([&, i] {
      targets[i] = pthread_self();
      started.fetch_add(1);
      while (!stop.load()) {
        std::thread inner([] {
          cpu_set_t set;
          sched_getaffinity(0, sizeof set, &set);
          (void)get_nprocs();
        });
        inner.join();
        spawned.fetch_add(1);
        if (i == 0) {  // one target also leads OpenMP regions (pthread_create from libgomp)
#pragma omp parallel num_threads(8)
          { (void)sysconf(_SC_NPROCESSORS_ONLN); }
          omp_regions.fetch_add(1);
        }
      }
    });
  }
  while (started.load() < kTargets) std::this_thread::yield();
  for (long s = 0; s < signals; ++s) {
    pthread_kill(targets[s % kTargets], SIGUSR1);
    // Let it land (pending signals of one kind coalesce) while the targets keep running.
    if (s % 4 == 3) std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  // Let the last signals land (pending ones coalesce), then stop.
  for (long before = -1; before != g_handled.load();) {
    before = g_handled.load();
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  stop.store(true);
  for (auto& t : workers) t.join();
  std::printf(
      "{\"cpus\":%ld,\"signals_sent\":%ld,\"handled\":%ld,\"bad_values\":%ld,"
      "\"threads_spawned\":%ld,\"omp_regions\":%ld}\n",
      g_expect, signals, g_handled.load(), g_bad.load(), spawned.load(), omp_regions.load());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: shim-probe MODE [ARGS]\n");
    return 2;
  }
  const std::string mode = argv[1];
  auto arg = [&](int i, int dflt) { return argc > i ? std::atoi(argv[i]) : dflt; };
  if (mode == "counts") return mode_counts();
  if (mode == "percpu") return mode_percpu();
  if (mode == "omp") return mode_omp(arg(2, 0), arg(3, 1));
  if (mode == "pool") return mode_pool();
  if (mode == "constructs") return mode_constructs(arg(2, 64));
  if (mode == "interop") return mode_interop(arg(2, 50), arg(3, 64));
  if (mode == "after") return mode_after();
  if (mode == "setaff" && argc >= 3) return mode_setaff(argv[2], arg(3, 0));
  if (mode == "forkexec" && argc >= 3) return mode_forkexec(argv + 2);
  if (mode == "fork") return mode_fork();
  if (mode == "churn") return mode_churn(arg(2, 1000), arg(3, 100));
  if (mode == "storm") return mode_storm(arg(2, 20000));
  std::fprintf(stderr, "shim-probe: unknown mode %s\n", mode.c_str());
  return 2;
}
