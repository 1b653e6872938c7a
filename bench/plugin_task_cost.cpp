// What tfpin.so costs each task at launch, on big machines and many-task steps (not a test).
//
// Drives the plugin's hooks through the fake spank layer of the unit tests as slurmstepd does: the
// step's slurm_spank_init and init_post_opt once, then K forked tasks released at the same moment,
// each timing its slurm_spank_task_init (CPU time of the task, and wall time, which on a machine
// with fewer cores than tasks includes waiting for one). The machine is this host, or a fixture
// topology standing in for the node:
//   cache  the node's topology cache holds the machine (written once, keyed for this host, as the
//          first step after boot leaves it); the step reads it, the tasks inherit it;
//   hwloc  what tfpin did before the cache: every task loads the topology with hwloc, here from
//          the fixture's XML (HWLOC_XMLFILE; a real discovery from /sys on such a node is slower).
// Each task asks for --tf-threads=2 --tf-interop=2 and is planned on this process's CPUs (two
// cores of the machine, as a task with 2 CPUs of a 192-core node is), bound and given its
// environment. Also: the cost of a job that does not ask for tfpin, in srun/sbatch (allocator and
// local contexts) and per task (bench/plugin_load_cost.c times loading the plugin itself); and
// hwloc's own costs (init, live load, XML load) in fresh processes against decoding the cache.
//
//     ninja -C build bench/plugin-task-cost
//     flock /tmp/tfpin-cpu.lock build/bench/plugin-task-cost [--rounds 5] [--tasks 1,16,128]
//         [MACHINE.xml ...]
#include <fmt/format.h>
#include <hwloc.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <ranges>
#include <string>
#include <string_view>
#include <vector>

#include "fake_spank.hpp"
#include "tfpin/topology.hpp"
#include "tfpin/topology_cache.hpp"

namespace {

double seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

struct Sample {
  double cpu_us = 0;
  double wall_us = 0;
  int rc = 0;
};

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const auto at = static_cast<std::size_t>(p * double(values.size() - 1) + 0.5);
  return values[at];
}

int init(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  return slurm_spank_init(fake_spank::handle(), static_cast<int>(argv.size()), argv.data());
}

void option(const char* name, const char* value) {
  for (const spank_option& opt : fake_spank::state().options) {
    if (std::string(opt.name) == name) opt.cb(opt.val, value, 1);
  }
}

// One step: init and init_post_opt in "slurmstepd" (this process), then `tasks` forked tasks that
// start their task_init together. Returns the step's own time (µs) and each task's sample.
// `prepare`: call init_post_opt, where the plugin loads the step's topology (before the cache, the
// plugin did nothing there and each task loaded its own).
double run_step(const std::vector<std::string>& config, bool prepare, int tasks,
                std::vector<Sample>& samples) {
  const double start = seconds(CLOCK_MONOTONIC);
  fake_spank::reset(S_CTX_REMOTE);
  if (init(config) != 0) {
    fmt::print(stderr, "init failed: {}\n", fmt::join(fake_spank::state().log, "; "));
    std::exit(1);
  }
  option("tf-threads", "2");
  option("tf-interop", "2");
  if (prepare) slurm_spank_init_post_opt(fake_spank::handle(), 0, nullptr);
  const double step_us = (seconds(CLOCK_MONOTONIC) - start) * 1e6;

  int go[2];
  int results[2];
  if (pipe(go) != 0 || pipe(results) != 0) std::exit(1);
  std::vector<pid_t> children;
  for (int t = 0; t < tasks; ++t) {
    const pid_t pid = fork();
    if (pid == 0) {
      close(go[1]);
      close(results[0]);
      char byte = 0;
      if (read(go[0], &byte, 1) < 0) _exit(1);  // EOF when the parent closes: all start at once
      fake_spank::state().task_id = static_cast<uint32_t>(t);
      const double cpu0 = seconds(CLOCK_THREAD_CPUTIME_ID);
      const double wall0 = seconds(CLOCK_MONOTONIC);
      Sample s;
      s.rc = slurm_spank_task_init(fake_spank::handle(), 0, nullptr);
      s.wall_us = (seconds(CLOCK_MONOTONIC) - wall0) * 1e6;
      s.cpu_us = (seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0) * 1e6;
      if (write(results[1], &s, sizeof s) != sizeof s) _exit(1);
      _exit(0);
    }
    children.push_back(pid);
  }
  close(go[0]);
  close(results[1]);
  close(go[1]);
  Sample s;
  while (read(results[0], &s, sizeof s) == sizeof s) samples.push_back(s);
  close(results[0]);
  for (pid_t pid : children) waitpid(pid, nullptr, 0);
  return step_us;
}

enum class Mode {
  hwloc_per_task,  // before the cache: each task loads the topology with hwloc
  cache_per_task,  // each task reads the node's cache file (task_init without init_post_opt)
  step,            // the step reads the cache once, the forked tasks inherit it (the plugin now)
};

const char* mode_name(Mode mode) {
  switch (mode) {
    case Mode::hwloc_per_task:
      return "hwloc load in every task (before)";
    case Mode::cache_per_task:
      return "cache file read in every task";
    case Mode::step:
      return "step reads cache, tasks inherit";
  }
  return "";
}

struct Machine {
  std::string name;
  std::string xml;  // empty: this host
};

void print_row(const std::string& what, const std::vector<double>& steps,
               const std::vector<Sample>& samples) {
  std::vector<double> cpu;
  std::vector<double> wall;
  int failed = 0;
  for (const Sample& s : samples) {
    cpu.push_back(s.cpu_us);
    wall.push_back(s.wall_us);
    failed += s.rc != 0 ? 1 : 0;
  }
  fmt::print("  {:<42} step {:7.0f}  task cpu {:6.0f} / {:6.0f}  wall {:7.0f} / {:7.0f}{}\n", what,
             percentile(steps, 0.5), percentile(cpu, 0.5), percentile(cpu, 0.9),
             percentile(wall, 0.5), percentile(wall, 0.9),
             failed != 0 ? fmt::format("  ({} tasks FAILED)", failed) : "");
}

// A job that does not ask for tfpin: what srun/sbatch (allocator, local) and a task pay.
void idle_path(int rounds) {
  fmt::print("\njob without --tf-* (activation=on-request), median of {} calls, µs:\n",
             rounds * 200);
  for (auto [context, name] :
       {std::pair{S_CTX_ALLOCATOR, "sbatch/salloc: init + init_post_opt"},
        std::pair{S_CTX_LOCAL, "srun: init + init_post_opt"},
        std::pair{S_CTX_REMOTE, "slurmstepd: init + init_post_opt + task_init"}}) {
    std::vector<double> times;
    for (int i = 0; i < rounds * 200; ++i) {
      const double t0 = seconds(CLOCK_MONOTONIC);
      fake_spank::reset(context);
      init({});
      slurm_spank_init_post_opt(fake_spank::handle(), 0, nullptr);
      if (context == S_CTX_REMOTE) slurm_spank_task_init(fake_spank::handle(), 0, nullptr);
      times.push_back((seconds(CLOCK_MONOTONIC) - t0) * 1e6);
    }
    fmt::print("  {:<46} {:6.1f}\n", name, percentile(times, 0.5));
  }
}

// Runs `body` in `runs` fresh children (forked before this process has loaded hwloc's plugins)
// and returns the median of the µs each reports.
template <typename Body>
double median_in_children(int runs, Body body) {
  std::vector<double> times;
  for (int i = 0; i < runs; ++i) {
    int out[2];
    if (pipe(out) != 0) std::exit(1);
    const pid_t pid = fork();
    if (pid == 0) {
      const double t0 = seconds(CLOCK_MONOTONIC);
      body();
      const double us = (seconds(CLOCK_MONOTONIC) - t0) * 1e6;
      if (write(out[1], &us, sizeof us) != sizeof us) _exit(1);
      _exit(0);
    }
    close(out[1]);
    double us = 0;
    if (read(out[0], &us, sizeof us) == sizeof us) times.push_back(us);
    close(out[0]);
    waitpid(pid, nullptr, 0);
  }
  return percentile(times, 0.5);
}

// Where a task's time went before the cache: hwloc's init (its plugins), a live discovery of this
// host, an XML load; against decoding the cache's text. Fresh processes, as each task was.
void hwloc_costs(const std::vector<Machine>& machines, int rounds) {
  const int runs = rounds * 8;
  fmt::print("\nhwloc in a fresh process (median of {} children), µs:\n", runs);
  fmt::print("  {:<46} {:7.0f}\n", "hwloc_topology_init + destroy", median_in_children(runs, [] {
               hwloc_topology_t t = nullptr;
               hwloc_topology_init(&t);
               hwloc_topology_destroy(t);
             }));
  for (const Machine& machine : machines) {
    const std::string what = machine.xml.empty() ? "Topology::host() (live, this host)"
                                                 : "Topology::xml_file(" + machine.name + ")";
    fmt::print("  {:<46} {:7.0f}\n", what, median_in_children(runs, [&machine] {
                 if (machine.xml.empty()) {
                   (void)tfpin::Topology::host();
                 } else {
                   (void)tfpin::Topology::xml_file(machine.xml);
                 }
               }));
  }
  fmt::print("the node's topology cache instead: decode_topology of its text, median of {}, µs:\n",
             runs);
  for (const Machine& machine : machines) {
    const tfpin::Topology t =
        machine.xml.empty() ? tfpin::Topology::host() : tfpin::Topology::xml_file(machine.xml);
    const std::string text = tfpin::encode_topology(t, "k");
    std::vector<double> times;
    std::string why;
    for (int i = 0; i < runs; ++i) {
      const double t0 = seconds(CLOCK_MONOTONIC);
      const bool ok = tfpin::decode_topology(text, "k", why).has_value();
      times.push_back(ok ? (seconds(CLOCK_MONOTONIC) - t0) * 1e6 : -1);
    }
    fmt::print("  {:<46} {:7.1f}  ({} bytes)\n", machine.name, percentile(times, 0.5), text.size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 5;
  std::vector<int> task_counts = {1, 16, 128};
  std::vector<Machine> machines = {{"this host", ""}};
  const std::string fixtures = TFPIN_FIXTURE_DIR;
  std::vector<std::string> xmls;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--rounds" && i + 1 < argc) {
      rounds = std::max(1, std::atoi(argv[++i]));
    } else if (arg == "--tasks" && i + 1 < argc) {
      task_counts.clear();
      for (const auto& part : std::views::split(std::string_view(argv[++i]), ',')) {
        task_counts.push_back(std::atoi(std::string(part.begin(), part.end()).c_str()));
      }
    } else if (arg.ends_with(".xml")) {
      xmls.push_back(arg);
    } else {
      fmt::print(stderr, "usage: {} [--rounds R] [--tasks 1,16,128] [X.xml...]\n", argv[0]);
      return 2;
    }
  }
  if (xmls.empty()) {
    for (const char* name : {"broadwell-2x18-ht.xml", "platinum8180-2x28-ht.xml",
                             "knl-68x4-snc4.xml", "epyc-2x96-8numa-ht.xml"}) {
      xmls.push_back(fixtures + "/" + name);
    }
  }
  for (const std::string& xml : xmls) {
    machines.push_back({std::filesystem::path(xml).stem().string(), xml});
  }
  hwloc_costs(machines, rounds);  // first: nothing in this process has loaded hwloc yet
  const std::optional<std::string> key = tfpin::host_topology_key();
  if (!key) {
    fmt::print(stderr, "no boot id: the topology cache cannot be used here\n");
    return 1;
  }
  char templ[] = "/tmp/tfpin-task-cost-XXXXXX";
  if (mkdtemp(templ) == nullptr) return 1;
  const std::string dir = templ;
  chmod(dir.c_str(), 0755);

  fmt::print(
      "tfpin.so per-task launch cost: --tf-threads=2 --tf-interop=2, shim=no; {} rounds, "
      "K tasks started together\n",
      rounds);
  fmt::print(
      "µs: step = slurm_spank_init + init_post_opt once per step (median); task = "
      "slurm_spank_task_init, median / p90 over all tasks of all rounds\n");
  for (const Machine& machine : machines) {
    std::string shape = "this host";
    if (!machine.xml.empty()) {
      const tfpin::Topology t = tfpin::Topology::xml_file(machine.xml);
      shape = fmt::format("{} packages, {} NUMA nodes, {} cores, {} hardware threads",
                          t.package_count(), t.numa_nodes().size(), t.cores().size(), t.pu_count());
    }
    fmt::print("\n{} ({})\n", machine.name, shape);
    for (int tasks : task_counts) {
      for (const Mode mode : {Mode::hwloc_per_task, Mode::cache_per_task, Mode::step}) {
        const bool cached = mode != Mode::hwloc_per_task;
        const std::vector<std::string> config = {
            "shim=no", "topology_cache=" + (cached ? dir : std::string("no"))};
        std::filesystem::remove(dir + "/topology.cache");
        if (cached && !machine.xml.empty()) {
          // The node's cache as the first step after boot leaves it: the machine, keyed for here.
          const std::string failed =
              tfpin::write_topology_cache(dir, tfpin::Topology::xml_file(machine.xml), *key);
          if (!failed.empty()) {
            fmt::print(stderr, "{}\n", failed);
            return 1;
          }
        }
        if (!cached && !machine.xml.empty()) {
          setenv("HWLOC_XMLFILE", machine.xml.c_str(), 1);
          setenv("HWLOC_THISSYSTEM", "1", 1);
        }
        std::vector<double> steps;
        std::vector<Sample> samples;
        if (cached && machine.xml.empty()) {
          run_step(config, true, 1, samples);  // the first step after boot writes it
          samples.clear();
        }
        for (int r = 0; r < rounds; ++r) {
          steps.push_back(run_step(config, mode == Mode::step, tasks, samples));
        }
        unsetenv("HWLOC_XMLFILE");
        unsetenv("HWLOC_THISSYSTEM");
        print_row(fmt::format("K={:<3} {}", tasks, mode_name(mode)), steps, samples);
      }
    }
  }
  idle_path(rounds);
  std::filesystem::remove_all(dir);
  return 0;
}
