// The executor: M inter-op lanes, each a thread pinned to its lane's cores with its own OpenMP
// team, oneDNN stream and scratchpad, running the compiled steps as their inputs become ready,
// the step on the longest remaining path first. A wide step (schedule.hpp) runs on a team that
// spans every lane's cores: nothing else can run beside it. The first failure of a run is kept
// (later ones are its consequences) and the run stops.
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "compiled_graph.hpp"

namespace tfpin::engine::detail {

// Pins the calling thread to `cpus`; false with the reason in `error`.
bool pin_current_thread(const std::vector<unsigned>& cpus, std::string* error);

class Executor {
 public:
  explicit Executor(CompiledGraph& graph);
  ~Executor();  // stops and joins the lanes
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;

  // Starts the lanes and waits until each is pinned and ready. Throws Failure (runtime_error) when
  // a lane cannot be set up, std::bad_alloc when a scratchpad cannot be allocated.
  void start();
  // Runs every step once (one inference or one training step).
  Status run();
  // Events recorded so far (CompileOptions::trace), sorted by start time; clears them.
  std::vector<TraceEvent> take_trace();

 private:
  using Clock = std::chrono::steady_clock;

  struct Lane {
    unsigned index = 0;
    std::vector<unsigned> cpus;
    std::thread thread;
    int tid = 0;
    dnnl::stream stream;
    AlignedBytes scratch;
    std::vector<dnnl::memory> scratchpads;           // views of `scratch`, one per step using it
    std::vector<std::vector<dnnl_exec_arg_t>> args;  // per step, built once
    // By step, by alternative kernel (Step::alternatives).
    std::vector<std::vector<std::vector<dnnl_exec_arg_t>>> alternative_args;
    std::vector<TraceEvent> trace;
  };

  std::unique_ptr<Lane> make_lane(unsigned index);
  // The lane thread's prologue: its stream, its pinning and its pinned OpenMP team. Returns an
  // error message, empty on success.
  std::string prepare_lane_thread(Lane& lane);
  void lane_main(Lane& lane);
  void run_in_order(Lane& lane, std::uint64_t run);  // the only lane: no scheduling needed
  void run_when_ready(Lane& lane, std::uint64_t run);
  void execute(Lane& lane, int step, std::uint64_t run);
  void fail(const std::string& message);

  CompiledGraph& graph_;
  const Clock::time_point epoch_ = Clock::now();
  std::vector<std::unique_ptr<Lane>> lanes_;

  // Scheduling state, guarded by mutex_.
  std::mutex mutex_;
  std::condition_variable work_cv_;   // a new run, or shutdown
  std::condition_variable ready_cv_;  // steps became ready, a run finished, or it failed
  std::condition_variable done_cv_;   // lanes started, or finished a run
  std::uint64_t generation_ = 0;      // run number
  bool shutdown_ = false;
  unsigned lanes_started_ = 0;
  unsigned lanes_finished_ = 0;
  std::string start_error_;
  // Ready steps, the highest critical-path rank first (the longest remaining chain starts early);
  // ties go to the earlier step.
  struct LowerRank {
    const std::vector<double>* ranks;
    bool operator()(int a, int b) const {
      const double ra = (*ranks)[static_cast<std::size_t>(a)];
      const double rb = (*ranks)[static_cast<std::size_t>(b)];
      return ra != rb ? ra < rb : a > b;
    }
  };
  std::priority_queue<int, std::vector<int>, LowerRank> ready_;
  std::vector<int> pending_;  // per step: predecessors not yet done in this run
  std::size_t remaining_ = 0;
  // A wide step's team takes every lane's cores: it starts only when no step runs, and no step
  // starts while it runs.
  unsigned running_ = 0;
  bool wide_running_ = false;
  [[nodiscard]] bool is_wide(int step) const;
  [[nodiscard]] bool may_start(int step) const;  // under mutex_
  std::atomic<bool> failed_ = false;
  std::string failure_;

  // Steps with alternatives: a step of n candidate kernels runs them in turn, the first n runs
  // warming each up, the later ones (to `trial_runs_`, 3 x the most candidates of any step) timing
  // them; then the fastest is kept. Changed only between runs.
  std::uint64_t trial_runs_ = 0;
  std::vector<std::size_t> kernel_choice_;          // by step: 0 the primary, k its alternative k-1
  std::vector<double> step_us_;                     // by step: its time in the last run
  std::vector<std::vector<double>> best_trial_us_;  // by step, by candidate
  void choose_kernels(std::uint64_t run);           // after run `run` completed
  // Step s runs candidate k from now on (0 its compiled kernel, k its alternative k - 1).
  void keep_kernel(std::size_t s, std::size_t k);
  void release_unkept_weights();                    // once every choice is made
};

}  // namespace tfpin::engine::detail
