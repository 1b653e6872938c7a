#include "executor.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <new>

#include "tfpin/thread_affinity.hpp"

namespace tfpin::engine::detail {

namespace {

int linux_tid() { return static_cast<int>(syscall(SYS_gettid)); }

}  // namespace

bool pin_current_thread(const std::vector<unsigned>& cpus, std::string* error) {
  if (const int rc = set_thread_affinity(pthread_self(), cpus); rc != 0) {
    *error = fmt::format("cannot pin to cpus {}: {}", fmt::join(cpus, ","), std::strerror(rc));
    return false;
  }
  return true;
}

Executor::Executor(CompiledGraph& graph) : graph_(graph), ready_(LowerRank{&graph.ranks}) {}

Executor::~Executor() {
  {
    std::lock_guard lock(mutex_);
    shutdown_ = true;
  }
  work_cv_.notify_all();
  for (auto& lane : lanes_) {
    if (lane->thread.joinable()) lane->thread.join();
  }
}

std::unique_ptr<Executor::Lane> Executor::make_lane(unsigned index) {
  const CompileOptions& options = graph_.options;
  auto lane = std::make_unique<Lane>();
  lane->index = index;
  if (!options.lane_cpus.empty()) lane->cpus = options.lane_cpus[index];
  if (graph_.scratchpad_bytes > 0) {
    lane->scratch = allocate_aligned(graph_.scratchpad_bytes);
    if (!lane->scratch) throw std::bad_alloc();
  }
  const std::vector<Step>& steps = graph_.steps;
  lane->args.resize(steps.size());
  for (std::size_t s = 0; s < steps.size(); ++s) {
    auto& args = lane->args[s];
    for (std::size_t a = 0; a < steps[s].args.size(); ++a) {
      args.push_back({steps[s].args[a].arg, graph_.memories[s][a].get()});
    }
    auto add_scratchpad = [&](std::vector<dnnl_exec_arg_t>& to, std::uint64_t bytes) {
      if (bytes == 0) return;
      md_t md({static_cast<dnnl::memory::dim>(bytes)}, dnnl::memory::data_type::u8, tag::x);
      lane->scratchpads.emplace_back(md, graph_.engine, lane->scratch.get());
      to.push_back({DNNL_ARG_SCRATCHPAD, lane->scratchpads.back().get()});
    };
    add_scratchpad(args, steps[s].scratchpad_bytes);
    auto& alternatives = lane->alternative_args.emplace_back();
    for (std::size_t k = 0; k < steps[s].alternatives.size(); ++k) {
      const Alternative& alt = steps[s].alternatives[k];
      auto& alt_args = alternatives.emplace_back();
      for (std::size_t a = 0; a < alt.args.size(); ++a) {
        alt_args.push_back({alt.args[a].arg, graph_.alternative_memories[s][k][a].get()});
      }
      add_scratchpad(alt_args, alt.scratchpad_bytes);
    }
  }
  return lane;
}

void Executor::start() {
  const std::size_t n = graph_.steps.size();
  kernel_choice_.assign(n, 0);
  step_us_.assign(n, 0.0);
  best_trial_us_.assign(n, {});
  std::size_t most_candidates = 1;
  bool forced = false;
  const std::string& force = graph_.options.force_kernel;
  for (std::size_t s = 0; s < n; ++s) {
    Step& step = graph_.steps[s];
    const std::size_t candidates = 1 + step.alternatives.size();
    if (!force.empty() && candidates > 1) {
      for (std::size_t k = 0; k < candidates; ++k) {
        const std::string& impl = k == 0 ? step.impl : step.alternatives[k - 1].impl;
        if (impl.rfind(force, 0) != 0) continue;
        keep_kernel(s, k);
        forced = true;
        ++graph_.report.forced_choices;
        break;
      }
      if (kernel_choice_[s] != 0 || step.impl.rfind(force, 0) == 0) {
        best_trial_us_[s].assign(1, 0.0);  // not timed
        continue;
      }
    }
    best_trial_us_[s].assign(candidates, 1e300);
    most_candidates = std::max(most_candidates, candidates);
  }
  trial_runs_ = most_candidates > 1 ? 3 * most_candidates : 0;
  if (forced && trial_runs_ == 0) release_unkept_weights();
  graph_.report.trial_runs = static_cast<unsigned>(trial_runs_);
  for (unsigned i = 0; i < graph_.options.lanes; ++i) lanes_.push_back(make_lane(i));
  for (auto& lane : lanes_) {
    Lane* self = lane.get();
    self->thread = std::thread([this, self] { lane_main(*self); });
  }
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return lanes_started_ == lanes_.size(); });
  if (!start_error_.empty()) throw Failure({StatusCode::runtime_error, start_error_});
}

Status Executor::run() {
  {
    std::lock_guard lock(mutex_);
    ++generation_;
    if (generation_ <= trial_runs_) {
      for (std::size_t s = 0; s < graph_.steps.size(); ++s) {
        const std::size_t candidates = best_trial_us_[s].size();
        if (candidates > 1) kernel_choice_[s] = (generation_ - 1) % candidates;
      }
    }
    failed_ = false;
    failure_.clear();
    lanes_finished_ = 0;
    pending_ = graph_.predecessor_counts;
    remaining_ = graph_.steps.size();
    running_ = 0;
    wide_running_ = false;
    ready_ = decltype(ready_)(LowerRank{&graph_.ranks});
    for (std::size_t s = 0; s < graph_.steps.size(); ++s) {
      if (pending_[s] == 0) ready_.push(static_cast<int>(s));
    }
  }
  work_cv_.notify_all();
  std::unique_lock lock(mutex_);
  done_cv_.wait(lock, [&] { return lanes_finished_ == lanes_.size(); });
  if (failed_) return {StatusCode::runtime_error, failure_};
  choose_kernels(generation_);
  return {};
}

void Executor::choose_kernels(std::uint64_t run) {
  if (run > trial_runs_) return;
  for (std::size_t s = 0; s < graph_.steps.size(); ++s) {
    Step& step = graph_.steps[s];
    std::vector<double>& best = best_trial_us_[s];
    if (best.size() < 2) continue;
    if (run > best.size()) {  // each candidate has run once: this one was warm
      best[kernel_choice_[s]] = std::min(best[kernel_choice_[s]], step_us_[s]);
    }
    if (run < trial_runs_) continue;
    KernelChoice& record = graph_.report.kernel_choices.emplace_back();
    record.step = step.name;
    for (std::size_t k = 0; k < best.size(); ++k) {
      record.candidates.push_back({k == 0 ? step.impl : step.alternatives[k - 1].impl, best[k]});
    }
    const auto fastest =
        static_cast<std::size_t>(std::min_element(best.begin(), best.end()) - best.begin());
    record.kept = record.candidates[fastest].kernel;
    keep_kernel(s, fastest);
  }
  if (run == trial_runs_) release_unkept_weights();
}

void Executor::keep_kernel(std::size_t s, std::size_t k) {
  kernel_choice_[s] = k;
  if (k == 0) return;
  // The kept kernel becomes the step's: describe() and the report say what runs.
  Step& step = graph_.steps[s];
  const bool was_winograd = step.impl.find("wino") != std::string::npos;
  std::swap(step.impl, step.alternatives[k - 1].impl);
  const bool is_winograd = step.impl.find("wino") != std::string::npos;
  graph_.report.winograd_convolutions += int(is_winograd) - int(was_winograd);
}

void Executor::release_unkept_weights() {
  // The kernels not kept never run again. Their weights (oneDNN's 4x4-tile Winograd layout is 4x
  // the plain one) go, unless a kept kernel reads the same buffer.
  std::vector<char> kept(graph_.buffers.size(), 0);
  std::vector<char> unkept(graph_.buffers.size(), 0);
  auto mark = [](std::vector<char>& marks, const std::vector<Arg>& args) {
    for (const Arg& a : args) marks[static_cast<std::size_t>(a.buffer)] = 1;
  };
  for (std::size_t s = 0; s < graph_.steps.size(); ++s) {
    const Step& step = graph_.steps[s];
    mark(kernel_choice_[s] == 0 ? kept : unkept, step.args);
    for (std::size_t k = 0; k < step.alternatives.size(); ++k) {
      mark(kernel_choice_[s] == k + 1 ? kept : unkept, step.alternatives[k].args);
    }
  }
  for (std::size_t b = 0; b < graph_.buffers.size(); ++b) {
    Buffer& buffer = graph_.buffers[b];
    if (unkept[b] == 0 || kept[b] != 0 || buffer.kind != BufferKind::weights || !buffer.owned) {
      continue;
    }
    buffer.owned.reset();
    graph_.report.weight_bytes -= buffer.bytes;
  }
}

void Executor::fail(const std::string& message) {
  {
    std::lock_guard lock(mutex_);
    if (!failed_) {
      failed_ = true;
      failure_ = message;  // the first failure wins; later ones are consequences
    }
  }
  ready_cv_.notify_all();
}

void Executor::execute(Lane& lane, int index, std::uint64_t run) {
  const auto i = static_cast<std::size_t>(index);
  Step& step = graph_.steps[i];
  const auto start = Clock::now();
  const unsigned intra = graph_.options.intra;
  // The team size the primitive was created for (reorders and simple kernels size their parallel
  // region by it when they run).
  if (step.threads != intra) omp_set_num_threads(static_cast<int>(step.threads));
  try {
    const std::size_t choice = kernel_choice_[i];
    const Kernel* alternative_kernel =
        choice != 0 && step.alternatives[choice - 1].kernel ? &step.alternatives[choice - 1].kernel
                                                            : nullptr;
    if (alternative_kernel != nullptr) {
      (*alternative_kernel)(KernelCall{graph_.alternative_kernel_data[i][choice - 1], run,
                                       lane.scratch.get(), &lane.stream});
    } else if (step.kernel) {
      step.kernel(KernelCall{graph_.kernel_data[i], run, lane.scratch.get(), &lane.stream});
    } else {
      // The C API with the arguments built at start-up: primitive::execute would rebuild them from
      // a map on every call.
      const std::vector<dnnl_exec_arg_t>& args =
          choice != 0 ? lane.alternative_args[i][choice - 1] : lane.args[i];
      const dnnl::primitive& primitive =
          choice != 0 ? step.alternatives[choice - 1].primitive : step.primitive;
      dnnl::error::wrap_c_api(dnnl_primitive_execute(primitive.get(), lane.stream.get(),
                                                     static_cast<int>(args.size()), args.data()),
                              "could not execute a primitive");
      lane.stream.wait();
    }
  } catch (const std::exception& e) {
    if (step.threads != intra) omp_set_num_threads(static_cast<int>(intra));
    fail(fmt::format("step '{}' ({}) failed on lane {}: {}", step.name, step.op, lane.index,
                     e.what()));
    return;
  } catch (...) {
    if (step.threads != intra) omp_set_num_threads(static_cast<int>(intra));
    fail(fmt::format("step '{}' ({}) failed on lane {}", step.name, step.op, lane.index));
    return;
  }
  if (step.threads != intra) omp_set_num_threads(static_cast<int>(intra));
  const auto end = Clock::now();
  step_us_[i] = std::chrono::duration<double, std::micro>(end - start).count();
  if (graph_.options.trace) {
    TraceEvent event;
    event.name = step.name;
    event.op = step.op;
    event.lane = lane.index;
    event.thread = lane.tid;
    event.threads = step.threads;
    event.run = run;
    event.start_us = std::chrono::duration<double, std::micro>(start - epoch_).count();
    event.duration_us = std::chrono::duration<double, std::micro>(end - start).count();
    lane.trace.push_back(std::move(event));
  }
}

std::string Executor::prepare_lane_thread(Lane& lane) {
  lane.tid = linux_tid();
  try {
    lane.stream = dnnl::stream(graph_.engine);
  } catch (const dnnl::error& e) {
    return e.what();
  }
  const int intra = static_cast<int>(graph_.options.intra);
  omp_set_num_threads(intra);
  if (lane.cpus.empty()) return {};
  std::string error;
  if (!pin_current_thread(lane.cpus, &error)) return error;
  // One OpenMP thread per core: the team is created here and each member pins itself; libgomp
  // keeps the team for the lane's later regions, member k on the same pool thread. The first
  // `intra` members are the lane's cores; a wide step's further members take the other lanes'
  // cores, idle while it runs.
  std::vector<unsigned> other_cpus;
  for (const auto& cpus : graph_.options.lane_cpus) {
    if (&cpus == &graph_.options.lane_cpus[lane.index]) continue;
    other_cpus.insert(other_cpus.end(), cpus.begin(), cpus.end());
  }
  const int team = std::max(intra, static_cast<int>(graph_.max_step_threads));
  std::vector<std::string> errors(static_cast<std::size_t>(team));
#pragma omp parallel num_threads(team)
  {
    const auto member = static_cast<std::size_t>(omp_get_thread_num());
    const auto width = static_cast<std::size_t>(intra);
    const unsigned cpu = member < width || other_cpus.empty()
                             ? lane.cpus[member % lane.cpus.size()]
                             : other_cpus[(member - width) % other_cpus.size()];
    pin_current_thread({cpu}, &errors[member]);
  }
  for (const std::string& e : errors) {
    if (!e.empty()) return e;
  }
  return {};
}

void Executor::run_in_order(Lane& lane, std::uint64_t run) {
  for (std::size_t s = 0; s < graph_.steps.size(); ++s) {
    execute(lane, static_cast<int>(s), run);
    if (failed_) break;  // only this thread writes it while a single lane runs
  }
}

bool Executor::is_wide(int step) const {
  return graph_.steps[static_cast<std::size_t>(step)].threads > graph_.options.intra;
}

bool Executor::may_start(int step) const { return is_wide(step) ? running_ == 0 : !wide_running_; }

void Executor::run_when_ready(Lane& lane, std::uint64_t run) {
  for (;;) {
    int step = -1;
    {
      std::unique_lock lock(mutex_);
      // The most urgent step waits for its cores rather than let a less urgent one overtake it.
      ready_cv_.wait(lock, [&] {
        return failed_ || remaining_ == 0 || (!ready_.empty() && may_start(ready_.top()));
      });
      if (failed_ || remaining_ == 0) return;
      step = ready_.top();
      ready_.pop();
      ++running_;
      wide_running_ = is_wide(step);
    }
    execute(lane, step, run);
    {
      std::lock_guard lock(mutex_);
      --running_;
      if (is_wide(step)) wide_running_ = false;
      for (int successor : graph_.successors[static_cast<std::size_t>(step)]) {
        if (--pending_[static_cast<std::size_t>(successor)] == 0) ready_.push(successor);
      }
      --remaining_;
    }
    ready_cv_.notify_all();
  }
}

void Executor::lane_main(Lane& lane) {
  const std::string error = prepare_lane_thread(lane);
  {
    std::lock_guard lock(mutex_);
    ++lanes_started_;
    if (!error.empty() && start_error_.empty()) {
      start_error_ = fmt::format("lane {}: {}", lane.index, error);
    }
  }
  done_cv_.notify_all();

  std::uint64_t seen = 0;
  const bool single = lanes_.size() == 1;
  for (;;) {
    {
      std::unique_lock lock(mutex_);
      work_cv_.wait(lock, [&] { return shutdown_ || generation_ != seen; });
      if (shutdown_) return;
      seen = generation_;
    }
    if (single) {
      run_in_order(lane, seen);
    } else {
      run_when_ready(lane, seen);
    }
    {
      std::lock_guard lock(mutex_);
      ++lanes_finished_;
    }
    done_cv_.notify_all();
  }
}

std::vector<TraceEvent> Executor::take_trace() {
  std::vector<TraceEvent> all;
  std::lock_guard lock(mutex_);
  for (auto& lane : lanes_) {
    all.insert(all.end(), std::make_move_iterator(lane->trace.begin()),
               std::make_move_iterator(lane->trace.end()));
    lane->trace.clear();
  }
  std::sort(all.begin(), all.end(),
            [](const TraceEvent& a, const TraceEvent& b) { return a.start_us < b.start_us; });
  return all;
}

}  // namespace tfpin::engine::detail
