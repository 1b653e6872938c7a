// Runtime::create (compile) and the executor: lanes of pinned threads, each with its own OpenMP
// team, stream and scratchpad, running the steps of the compiled graph as their inputs become
// ready.
#include "tfpin/engine/runtime.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <limits>
#include <mutex>
#include <new>
#include <queue>
#include <thread>

#include "ir.hpp"
#include "lowering.hpp"
#include "memory_planner.hpp"

namespace tfpin::engine {

using namespace detail;

std::size_t TensorInfo::elements() const {
  std::size_t n = 1;
  for (std::int64_t d : dims) n *= static_cast<std::size_t>(d);
  return n;
}

namespace {

using Clock = std::chrono::steady_clock;

std::string human_bytes(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024.0 && u < 6) {
    v /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{} B", bytes) : fmt::format("{:.1f} {}", v, units[u]);
}

std::uint64_t physical_memory() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long size = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || size <= 0) return ~std::uint64_t{0};
  return static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(size);
}

int linux_tid() { return static_cast<int>(syscall(SYS_gettid)); }

bool pin_current_thread(const std::vector<unsigned>& cpus, std::string* error) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (unsigned c : cpus) {
    if (c >= CPU_SETSIZE) {
      *error = fmt::format("cpu {} is beyond CPU_SETSIZE", c);
      return false;
    }
    CPU_SET(c, &set);
  }
  int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc != 0) {
    *error = fmt::format("cannot pin to cpus {}: {}", fmt::join(cpus, ","), std::strerror(rc));
    return false;
  }
  return true;
}

// Restores the calling thread's OpenMP team size when compilation ends.
class OmpThreads {
 public:
  explicit OmpThreads(int n) : saved_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~OmpThreads() { omp_set_num_threads(saved_); }
  OmpThreads(const OmpThreads&) = delete;
  OmpThreads& operator=(const OmpThreads&) = delete;

 private:
  int saved_;
};

// Live nodes in a topological order that also respects sum post-ops (a fused residual add makes the
// convolution depend on the residual's producer, which the builder may have created later), staying
// as close to the builder's order as possible.
std::vector<int> lowering_order(const Ir& ir) {
  const std::size_t n = ir.nodes.size();
  std::vector<int> indegree(n, 0);
  std::vector<std::vector<int>> users(n);
  for (std::size_t i = 0; i < n; ++i) {
    const Node& node = ir.nodes[i];
    if (node.dead) continue;
    auto depend = [&](int value) {
      int p = ir.values[static_cast<std::size_t>(value)].producer;
      if (p < 0) return;
      users[static_cast<std::size_t>(p)].push_back(static_cast<int>(i));
      ++indegree[i];
    };
    for (int in : node.inputs) depend(in);
    for (const PostOp& post : node.post_ops) {
      if (post.kind == PostOp::Kind::sum) depend(post.value);
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (!ir.nodes[i].dead && indegree[i] == 0) ready.push(static_cast<int>(i));
  }
  std::vector<int> order;
  while (!ready.empty()) {
    int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[static_cast<std::size_t>(i)]) {
      if (--indegree[static_cast<std::size_t>(u)] == 0) ready.push(u);
    }
  }
  return order;
}

struct Failure : std::exception {
  explicit Failure(Status s) : status(std::move(s)) {}
  Status status;
  const char* what() const noexcept override { return status.message().c_str(); }
};

}  // namespace

struct Runtime::Impl {
  CompileOptions options;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  CompileReport report;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  std::vector<Parameter> parameters;  // training: trained tensors and running statistics
  std::vector<std::string> parameter_names;
  int loss_buffer = -1;
  std::vector<std::vector<int>> successors;
  std::vector<int> predecessors;  // counts
  AlignedBytes arena;
  std::uint64_t scratchpad_bytes = 0;
  // Memory objects of every step argument; the io ones get their handle at setup.
  std::vector<std::vector<dnnl::memory>> memories;
  std::vector<std::pair<dnnl::memory, int>> input_memories;   // (memory, input index)
  std::vector<std::pair<dnnl::memory, int>> output_memories;  // (memory, output index)
  // Kernel steps: their arguments' data pointers, refreshed at setup (inputs and outputs move).
  std::vector<std::vector<void*>> kernel_data;
  bool is_set_up = false;
  Clock::time_point epoch = Clock::now();

  struct Lane {
    unsigned index = 0;
    std::vector<unsigned> cpus;
    std::thread thread;
    int tid = 0;
    dnnl::stream stream;
    AlignedBytes scratch;
    std::vector<dnnl::memory> scratchpads;           // views of `scratch`, one per step using it
    std::vector<std::vector<dnnl_exec_arg_t>> args;  // per step, built once
    std::vector<TraceEvent> trace;
  };
  std::vector<std::unique_ptr<Lane>> lanes;

  // Scheduling state, guarded by mutex.
  std::mutex mutex;
  std::condition_variable work_cv;
  std::condition_variable ready_cv;
  std::condition_variable done_cv;
  std::uint64_t generation = 0;
  bool shutdown = false;
  unsigned lanes_started = 0;
  unsigned lanes_finished = 0;
  std::string start_error;
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  std::vector<int> pending;
  std::size_t remaining = 0;
  std::atomic<bool> failed = false;
  std::string failure;

  ~Impl() {
    {
      std::lock_guard lock(mutex);
      shutdown = true;
    }
    work_cv.notify_all();
    for (auto& lane : lanes) {
      if (lane->thread.joinable()) lane->thread.join();
    }
  }

  void compile(const Graph& graph);
  void build_dependencies();
  void plan();
  void build_arguments();
  void start_lanes();
  void lane_main(Lane& lane);
  void execute(Lane& lane, int step, std::uint64_t run);
  void fail(const std::string& message);
};

void Runtime::Impl::compile(const Graph& graph) {
  Ir ir;
  Status s = build_ir(graph, ir);
  if (!s.ok()) throw Failure(s);

  const std::uint64_t limit = options.memory_limit_bytes.value_or(physical_memory());
  for (const Value& v : ir.values) {
    if (v.kind != ValueKind::activation || v.dims.empty()) continue;
    const auto bytes = static_cast<std::uint64_t>(element_count(v.dims)) * sizeof(float);
    if (bytes > limit) {
      throw Failure(
          {StatusCode::out_of_memory,
           fmt::format("tensor '{}' {} alone needs {}, more than the {} available: the "
                       "memory cannot be planned (reduce the batch size)",
                       v.name, dims_string(v.dims), human_bytes(bytes), human_bytes(limit))});
    }
  }

  const bool training = options.training.has_value();
  if (training) {
    for (std::size_t i = 0; i < ir.nodes.size(); ++i) {
      const Node& n = ir.nodes[i];
      if (!n.dead && n.kind == OpKind::lrn) {
        throw Failure(
            {StatusCode::unsupported, fmt::format("{}: training has no backward for local response "
                                                  "normalisation (inference only)",
                                                  ir.describe_node(static_cast<int>(i)))});
      }
    }
    // Batch norm keeps its own step (batch statistics); residual adds stay adds (their gradient is
    // routed to both operands). ReLUs still fuse: their backward reads the output.
    if (options.fusion) report.fused_relus = fuse_relus(ir);
  } else {
    drop_identities(ir);
  }
  if (options.fusion && !training) {
    report.folded_batch_norms = fold_batch_norms(ir);
    // Residual adds first: a ReLU after the add then becomes the convolution's last post-op.
    report.fused_adds = fuse_residual_adds(ir);
    report.fused_relus = fuse_relus(ir);
    // (A flatten before an inner product stays: reading the blocked image directly forces
    // oneDNN's slower gemm path, 4x slower on VGG16's fc6 than a reorder plus its brgemm kernel.)
  }

  OmpThreads omp_threads(static_cast<int>(options.intra));
  Lowering l(ir, engine, options, report);
  for (std::size_t i = 0; i < ir.values.size(); ++i) {
    const Value& v = ir.values[i];
    if (v.kind != ValueKind::input) continue;
    TensorInfo info{v.name, v.dims, v.layout};
    Buffer b;
    b.kind = BufferKind::input;
    b.io = static_cast<int>(inputs.size());
    b.name = v.name;
    md_t md = plain_md(v.dims, v.layout);
    b.bytes = md.get_size();
    l.buffers.push_back(std::move(b));
    l.define(static_cast<int>(i), md, static_cast<int>(l.buffers.size() - 1));
    inputs.push_back(std::move(info));
  }
  if (training) {
    // The labels of a training step: class indices (as floats), one per image.
    const Value& out = ir.values[static_cast<std::size_t>(ir.outputs.front().first)];
    TensorInfo info{"labels", {out.dims.front()}, Layout::nc};
    Buffer b;
    b.kind = BufferKind::input;
    b.io = static_cast<int>(inputs.size());
    b.name = info.name;
    b.bytes = static_cast<std::uint64_t>(out.dims.front()) * sizeof(float);
    l.buffers.push_back(std::move(b));
    l.labels_buffer = static_cast<int>(l.buffers.size() - 1);
    inputs.push_back(std::move(info));
  }
  const std::vector<int> order = lowering_order(ir);
  for (int node_index : order) {
    const auto i = static_cast<std::size_t>(node_index);
    const Node& n = ir.nodes[i];
    try {
      const int node = static_cast<int>(i);
      switch (n.kind) {
        case OpKind::convolution:
          lower_convolution(l, node);
          break;
        case OpKind::batch_norm:
          lower_batch_norm(l, node);
          break;
        case OpKind::relu:
          lower_relu(l, node);
          break;
        case OpKind::max_pool:
        case OpKind::avg_pool:
          lower_pooling(l, node);
          break;
        case OpKind::lrn:
          lower_lrn(l, node);
          break;
        case OpKind::concat:
          lower_concat(l, node);
          break;
        case OpKind::add:
          lower_add(l, node);
          break;
        case OpKind::inner_product:
          lower_inner_product(l, node);
          break;
        case OpKind::softmax:
          lower_softmax(l, node);
          break;
        case OpKind::flatten:
          lower_flatten(l, node);
          break;
        case OpKind::dropout:
          lower_dropout(l, node);  // training only: inference removed it (drop_identities)
          break;
      }
    } catch (const dnnl::error& e) {
      throw Failure({StatusCode::unsupported,
                     fmt::format("{}: oneDNN cannot build it on this machine: {} (status {})",
                                 ir.describe_node(static_cast<int>(i)), e.what(),
                                 static_cast<int>(e.status))});
    } catch (const Unsupported& e) {
      throw Failure({StatusCode::unsupported,
                     fmt::format("{}: {}", ir.describe_node(static_cast<int>(i)), e.what())});
    }
  }
  if (training) {
    try {
      lower_training(l, order);
    } catch (const dnnl::error& e) {
      throw Failure({StatusCode::unsupported,
                     fmt::format("training: oneDNN cannot build a backward step on this machine: "
                                 "{} (status {})",
                                 e.what(), static_cast<int>(e.status))});
    } catch (const Unsupported& e) {
      throw Failure({StatusCode::unsupported, e.what()});
    }
  }
  for (const auto& [v, def] : ir.outputs) {
    const Value& value = ir.values[static_cast<std::size_t>(v)];
    TensorInfo info{def.name, value.dims, *def.layout};
    Buffer b;
    b.kind = BufferKind::output;
    b.io = static_cast<int>(outputs.size());
    b.name = def.name;
    md_t md = plain_md(value.dims, *def.layout);
    b.bytes = md.get_size();
    l.buffers.push_back(std::move(b));
    const auto vi = static_cast<std::size_t>(v);
    l.add_reorder(def.name + ":output", l.value_buffer[vi], l.value_md[vi],
                  static_cast<int>(l.buffers.size() - 1), md);
    --report.reorders;  // delivering the result is not a layout conversion between layers
    outputs.push_back(std::move(info));
  }
  parameters = std::move(l.parameters);
  for (const Parameter& p : parameters) {
    parameter_names.push_back(ir.values[static_cast<std::size_t>(p.value)].name);
  }
  loss_buffer = l.loss_buffer;
  buffers = std::move(l.buffers);
  steps = std::move(l.steps);
  report.steps = static_cast<int>(steps.size());
}

void Runtime::Impl::build_dependencies() {
  const std::size_t n = steps.size();
  successors.assign(n, {});
  predecessors.assign(n, 0);
  std::vector<int> last_writer(buffers.size(), -1);
  std::vector<std::vector<int>> readers(buffers.size());
  std::vector<std::vector<int>> deps(n);
  for (std::size_t s = 0; s < n; ++s) {
    const int self = static_cast<int>(s);
    for (const Arg& a : steps[s].args) {
      auto b = static_cast<std::size_t>(a.buffer);
      if (last_writer[b] >= 0 && last_writer[b] != self) deps[s].push_back(last_writer[b]);
      if (a.write) {
        for (int r : readers[b]) {
          if (r != self) deps[s].push_back(r);
        }
      }
    }
    for (const Arg& a : steps[s].args) {
      auto b = static_cast<std::size_t>(a.buffer);
      if (a.write) {
        last_writer[b] = self;
        readers[b].clear();
      } else {
        readers[b].push_back(self);
      }
    }
    std::sort(deps[s].begin(), deps[s].end());
    deps[s].erase(std::unique(deps[s].begin(), deps[s].end()), deps[s].end());
    predecessors[s] = static_cast<int>(deps[s].size());
    for (int d : deps[s]) successors[static_cast<std::size_t>(d)].push_back(self);
  }
}

void Runtime::Impl::plan() {
  const std::size_t n = steps.size();
  std::vector<std::vector<int>> accessors(buffers.size());
  for (std::size_t s = 0; s < n; ++s) {
    for (const Arg& a : steps[s].args) {
      auto& acc = accessors[static_cast<std::size_t>(a.buffer)];
      if (acc.empty() || acc.back() != static_cast<int>(s)) acc.push_back(static_cast<int>(s));
    }
  }
  MemoryPlan mp;
  if (options.lanes <= 1) {
    mp = plan_memory(buffers, accessors, [](int a, int b) { return a < b; });
  } else {
    // reach[a] has bit b when b depends (transitively) on a. Steps are in topological order.
    const std::size_t words = (n + 63) / 64;
    std::vector<std::uint64_t> reach(n * words, 0);
    for (std::size_t s = n; s-- > 0;) {
      std::uint64_t* row = &reach[s * words];
      for (int succ : successors[s]) {
        auto t = static_cast<std::size_t>(succ);
        row[t / 64] |= std::uint64_t{1} << (t % 64);
        const std::uint64_t* other = &reach[t * words];
        for (std::size_t w = 0; w < words; ++w) row[w] |= other[w];
      }
    }
    mp = plan_memory(buffers, accessors, [&](int a, int b) {
      auto bi = static_cast<std::size_t>(b);
      return (reach[static_cast<std::size_t>(a) * words + bi / 64] >> (bi % 64)) & 1u;
    });
  }
  report.arena_bytes = mp.arena_bytes;
  report.activation_bytes = mp.unshared_bytes;
  for (const Step& s : steps) scratchpad_bytes = std::max(scratchpad_bytes, s.scratchpad_bytes);
  report.scratchpad_bytes = scratchpad_bytes;

  const std::uint64_t limit = options.memory_limit_bytes.value_or(physical_memory());
  const std::uint64_t total =
      mp.arena_bytes + report.weight_bytes + scratchpad_bytes * std::max(1u, options.lanes);
  if (total > limit) {
    throw Failure({StatusCode::out_of_memory,
                   fmt::format("the graph needs {} (activations after reuse {}, weights {}, "
                               "scratchpads {} x {} lanes), more than the {} available: the memory "
                               "cannot be planned (reduce the batch size)",
                               human_bytes(total), human_bytes(mp.arena_bytes),
                               human_bytes(report.weight_bytes), human_bytes(scratchpad_bytes),
                               options.lanes, human_bytes(limit))});
  }
  arena = allocate_aligned(mp.arena_bytes);
  if (!arena) {
    throw Failure({StatusCode::out_of_memory, fmt::format("cannot allocate the {} activation arena",
                                                          human_bytes(mp.arena_bytes))});
  }
}

void Runtime::Impl::build_arguments() {
  memories.assign(steps.size(), {});
  for (std::size_t s = 0; s < steps.size(); ++s) {
    for (const Arg& a : steps[s].args) {
      const Buffer& b = buffers[static_cast<std::size_t>(a.buffer)];
      void* handle = DNNL_MEMORY_NONE;
      if (b.kind == BufferKind::arena) handle = arena.get() + b.offset;
      if (b.kind == BufferKind::weights) handle = b.owned.get();
      dnnl::memory m(a.md, engine, handle);
      if (b.kind == BufferKind::input) input_memories.emplace_back(m, b.io);
      if (b.kind == BufferKind::output) output_memories.emplace_back(m, b.io);
      memories[s].push_back(m);
    }
  }
}

void Runtime::Impl::fail(const std::string& message) {
  {
    std::lock_guard lock(mutex);
    if (!failed) {
      failed = true;
      failure = message;  // the first failure wins; later ones are consequences
    }
  }
  ready_cv.notify_all();
}

void Runtime::Impl::execute(Lane& lane, int index, std::uint64_t run) {
  Step& step = steps[static_cast<std::size_t>(index)];
  const auto t0 = Clock::now();
  try {
    if (step.kernel) {
      step.kernel(KernelCall{kernel_data[static_cast<std::size_t>(index)], run});
    } else {
      // The C API with the arguments built at start-up: primitive::execute would rebuild them from
      // a map on every call.
      const std::vector<dnnl_exec_arg_t>& args = lane.args[static_cast<std::size_t>(index)];
      dnnl::error::wrap_c_api(dnnl_primitive_execute(step.primitive.get(), lane.stream.get(),
                                                     static_cast<int>(args.size()), args.data()),
                              "could not execute a primitive");
      lane.stream.wait();
    }
  } catch (const std::exception& e) {
    fail(fmt::format("step '{}' ({}) failed on lane {}: {}", step.name, step.op, lane.index,
                     e.what()));
    return;
  } catch (...) {
    fail(fmt::format("step '{}' ({}) failed on lane {}", step.name, step.op, lane.index));
    return;
  }
  if (options.trace) {
    const auto t1 = Clock::now();
    TraceEvent e;
    e.name = step.name;
    e.op = step.op;
    e.lane = lane.index;
    e.thread = lane.tid;
    e.run = run;
    e.start_us = std::chrono::duration<double, std::micro>(t0 - epoch).count();
    e.duration_us = std::chrono::duration<double, std::micro>(t1 - t0).count();
    lane.trace.push_back(std::move(e));
  }
}

void Runtime::Impl::lane_main(Lane& lane) {
  lane.tid = linux_tid();
  std::string error;
  bool ok = true;
  try {
    lane.stream = dnnl::stream(engine);
  } catch (const dnnl::error& e) {
    ok = false;
    error = e.what();
  }
  if (ok && !lane.cpus.empty()) ok = pin_current_thread(lane.cpus, &error);
  const int intra = static_cast<int>(options.intra);
  omp_set_num_threads(intra);
  if (ok && !lane.cpus.empty()) {
    // One OpenMP thread per core of the lane: the team is created here (workers inherit the lane's
    // cpus) and each member pins itself; libgomp keeps this team for the lane's later regions.
    std::vector<std::string> errors(static_cast<std::size_t>(intra));
#pragma omp parallel num_threads(intra)
    {
      const auto t = static_cast<std::size_t>(omp_get_thread_num());
      pin_current_thread({lane.cpus[t % lane.cpus.size()]}, &errors[t]);
    }
    for (const std::string& e : errors) {
      if (!e.empty()) {
        ok = false;
        error = e;
      }
    }
  }
  {
    std::lock_guard lock(mutex);
    ++lanes_started;
    if (!ok && start_error.empty()) start_error = fmt::format("lane {}: {}", lane.index, error);
  }
  done_cv.notify_all();

  std::uint64_t seen = 0;
  const bool single = lanes.size() == 1;
  for (;;) {
    {
      std::unique_lock lock(mutex);
      work_cv.wait(lock, [&] { return shutdown || generation != seen; });
      if (shutdown) return;
      seen = generation;
    }
    if (single) {
      for (std::size_t s = 0; s < steps.size(); ++s) {
        execute(lane, static_cast<int>(s), seen);
        if (failed) break;  // only this thread writes it while a single lane runs
      }
    } else {
      for (;;) {
        int s = -1;
        {
          std::unique_lock lock(mutex);
          ready_cv.wait(lock, [&] { return failed || remaining == 0 || !ready.empty(); });
          if (failed || remaining == 0) break;
          s = ready.top();
          ready.pop();
        }
        execute(lane, s, seen);
        {
          std::lock_guard lock(mutex);
          for (int succ : successors[static_cast<std::size_t>(s)]) {
            if (--pending[static_cast<std::size_t>(succ)] == 0) ready.push(succ);
          }
          --remaining;
        }
        ready_cv.notify_all();
      }
    }
    {
      std::lock_guard lock(mutex);
      ++lanes_finished;
    }
    done_cv.notify_all();
  }
}

void Runtime::Impl::start_lanes() {
  for (unsigned i = 0; i < options.lanes; ++i) {
    auto lane = std::make_unique<Lane>();
    lane->index = i;
    if (!options.lane_cpus.empty()) lane->cpus = options.lane_cpus[i];
    if (scratchpad_bytes > 0) {
      lane->scratch = allocate_aligned(scratchpad_bytes);
      if (!lane->scratch) throw std::bad_alloc();
    }
    lane->args.resize(steps.size());
    for (std::size_t s = 0; s < steps.size(); ++s) {
      auto& args = lane->args[s];
      for (std::size_t a = 0; a < steps[s].args.size(); ++a) {
        args.push_back({steps[s].args[a].arg, memories[s][a].get()});
      }
      if (steps[s].scratchpad_bytes > 0) {
        md_t md({static_cast<dnnl::memory::dim>(steps[s].scratchpad_bytes)},
                dnnl::memory::data_type::u8, tag::x);
        lane->scratchpads.emplace_back(md, engine, lane->scratch.get());
        args.push_back({DNNL_ARG_SCRATCHPAD, lane->scratchpads.back().get()});
      }
    }
    lanes.push_back(std::move(lane));
  }
  for (auto& lane : lanes) {
    Lane* l = lane.get();
    l->thread = std::thread([this, l] { lane_main(*l); });
  }
  std::unique_lock lock(mutex);
  done_cv.wait(lock, [&] { return lanes_started == lanes.size(); });
  if (!start_error.empty()) throw Failure({StatusCode::runtime_error, start_error});
}

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

Status Runtime::create(const Graph& graph, const CompileOptions& options,
                       std::unique_ptr<Runtime>* runtime) {
  if (runtime == nullptr) return {StatusCode::invalid_argument, "runtime pointer is null"};
  runtime->reset();
  if (options.lanes < 1 || options.intra < 1) {
    return {StatusCode::invalid_argument, fmt::format("lanes={} intra={}: both must be at least 1",
                                                      options.lanes, options.intra)};
  }
  if (!options.lane_cpus.empty()) {
    if (options.lane_cpus.size() != options.lanes) {
      return {StatusCode::invalid_argument, fmt::format("lane_cpus has {} entries for {} lanes",
                                                        options.lane_cpus.size(), options.lanes)};
    }
    for (const auto& cpus : options.lane_cpus) {
      if (cpus.empty()) return {StatusCode::invalid_argument, "a lane has no cpus"};
    }
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  try {
    impl->compile(graph);
    impl->build_dependencies();
    impl->plan();
    impl->build_arguments();
    impl->start_lanes();
  } catch (const Failure& f) {
    return f.status;
  } catch (const std::bad_alloc&) {
    return {StatusCode::out_of_memory, "out of memory while compiling the graph"};
  } catch (const dnnl::error& e) {
    return {StatusCode::unsupported, fmt::format("oneDNN: {}", e.what())};
  } catch (const std::exception& e) {
    return {StatusCode::runtime_error, e.what()};
  }
  *runtime = std::unique_ptr<Runtime>(new Runtime(std::move(impl)));
  return {};
}

Status Runtime::setup(std::span<const ExternalInput> inputs,
                      std::span<const ExternalOutput> outputs) {
  Impl& m = *impl_;
  m.is_set_up = false;
  std::vector<const float*> in(m.inputs.size(), nullptr);
  std::vector<float*> out(m.outputs.size(), nullptr);
  auto names = [](const std::vector<TensorInfo>& infos) {
    std::vector<std::string> v;
    for (const auto& i : infos) v.push_back(i.name);
    return fmt::format("{}", fmt::join(v, ", "));
  };
  for (const ExternalInput& e : inputs) {
    auto it =
        std::find_if(m.inputs.begin(), m.inputs.end(), [&](auto& t) { return t.name == e.name; });
    if (it == m.inputs.end()) {
      return {StatusCode::invalid_argument,
              fmt::format("no graph input is named '{}' (inputs: {})", e.name, names(m.inputs))};
    }
    if (e.data == nullptr) {
      return {StatusCode::invalid_argument, fmt::format("input '{}' has a null buffer", e.name)};
    }
    in[static_cast<std::size_t>(it - m.inputs.begin())] = e.data;
  }
  for (const ExternalOutput& e : outputs) {
    auto it =
        std::find_if(m.outputs.begin(), m.outputs.end(), [&](auto& t) { return t.name == e.name; });
    if (it == m.outputs.end()) {
      return {StatusCode::invalid_argument,
              fmt::format("no graph output is named '{}' (outputs: {})", e.name, names(m.outputs))};
    }
    if (e.data == nullptr) {
      return {StatusCode::invalid_argument, fmt::format("output '{}' has a null buffer", e.name)};
    }
    out[static_cast<std::size_t>(it - m.outputs.begin())] = e.data;
  }
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] == nullptr) {
      return {StatusCode::invalid_argument,
              fmt::format("input '{}' was not given", m.inputs[i].name)};
    }
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (out[i] == nullptr) {
      return {StatusCode::invalid_argument,
              fmt::format("output '{}' was not given", m.outputs[i].name)};
    }
  }
  for (auto& [mem, io] : m.input_memories) {
    mem.set_data_handle(const_cast<float*>(in[static_cast<std::size_t>(io)]));
  }
  for (auto& [mem, io] : m.output_memories) mem.set_data_handle(out[static_cast<std::size_t>(io)]);
  m.kernel_data.assign(m.steps.size(), {});
  for (std::size_t s = 0; s < m.steps.size(); ++s) {
    if (!m.steps[s].kernel) continue;
    for (const dnnl::memory& mem : m.memories[s]) m.kernel_data[s].push_back(mem.get_data_handle());
  }
  m.is_set_up = true;
  return {};
}

Status Runtime::run() {
  Impl& m = *impl_;
  if (!m.is_set_up) {
    return {StatusCode::invalid_argument,
            "run before a successful setup: bind the inputs and outputs first"};
  }
  {
    std::lock_guard lock(m.mutex);
    ++m.generation;
    m.failed = false;
    m.failure.clear();
    m.lanes_finished = 0;
    m.pending = m.predecessors;
    m.remaining = m.steps.size();
    m.ready = {};
    for (std::size_t s = 0; s < m.steps.size(); ++s) {
      if (m.pending[s] == 0) m.ready.push(static_cast<int>(s));
    }
  }
  m.work_cv.notify_all();
  std::unique_lock lock(m.mutex);
  m.done_cv.wait(lock, [&] { return m.lanes_finished == m.lanes.size(); });
  if (m.failed) return {StatusCode::runtime_error, m.failure};
  return {};
}

float Runtime::loss() const {
  const Impl& m = *impl_;
  if (m.loss_buffer < 0) return std::numeric_limits<float>::quiet_NaN();
  return *reinterpret_cast<const float*>(
      m.buffers[static_cast<std::size_t>(m.loss_buffer)].owned.get());
}

Status Runtime::parameter(const std::string& name, std::vector<float>* values) const {
  const Impl& m = *impl_;
  if (values == nullptr) return {StatusCode::invalid_argument, "values pointer is null"};
  for (std::size_t i = 0; i < m.parameters.size(); ++i) {
    if (m.parameter_names[i] != name) continue;
    const Parameter& p = m.parameters[i];
    values->assign(p.user_md.get_size() / sizeof(float), 0.0f);
    try {
      dnnl::stream stream(m.engine);
      void* handle = m.buffers[static_cast<std::size_t>(p.buffer)].owned.get();
      dnnl::memory src(p.md, m.engine, handle);
      dnnl::memory dst(p.user_md, m.engine, values->data());
      dnnl::reorder(src, dst).execute(stream, src, dst);
      stream.wait();
    } catch (const dnnl::error& e) {
      return {StatusCode::runtime_error, fmt::format("reading '{}': {}", name, e.what())};
    }
    return {};
  }
  return {StatusCode::invalid_argument,
          fmt::format("no trained tensor is named '{}' (training mode only)", name)};
}

const std::vector<TensorInfo>& Runtime::inputs() const { return impl_->inputs; }
const std::vector<TensorInfo>& Runtime::outputs() const { return impl_->outputs; }
const CompileReport& Runtime::report() const { return impl_->report; }
unsigned Runtime::lanes() const { return impl_->options.lanes; }
unsigned Runtime::intra() const { return impl_->options.intra; }

std::vector<TraceEvent> Runtime::take_trace() {
  std::vector<TraceEvent> all;
  std::lock_guard lock(impl_->mutex);
  for (auto& lane : impl_->lanes) {
    all.insert(all.end(), std::make_move_iterator(lane->trace.begin()),
               std::make_move_iterator(lane->trace.end()));
    lane->trace.clear();
  }
  std::sort(all.begin(), all.end(),
            [](const TraceEvent& a, const TraceEvent& b) { return a.start_us < b.start_us; });
  return all;
}

std::string Runtime::describe() const {
  std::string out;
  const Impl& m = *impl_;
  for (std::size_t s = 0; s < m.steps.size(); ++s) {
    const Step& step = m.steps[s];
    std::vector<std::string> args;
    for (const Arg& a : step.args) {
      const Buffer& b = m.buffers[static_cast<std::size_t>(a.buffer)];
      const char* where = b.kind == BufferKind::arena     ? "arena"
                          : b.kind == BufferKind::weights ? "weights"
                          : b.kind == BufferKind::input   ? "input"
                                                          : "output";
      args.push_back(fmt::format("{}@{}+{}", md_string(a.md), where, b.offset));
    }
    out += fmt::format("{:3} {:<28} {:<24} {:<22} {}\n", s, step.name, step.op, step.impl,
                       fmt::join(args, "  "));
  }
  return out;
}

std::string chrome_trace_json(const std::vector<TraceEvent>& events) {
  std::string out = "{\"traceEvents\":[\n";
  // Name each lane thread once (Chrome/Perfetto show "lane 0", "lane 1" instead of bare ids).
  std::vector<std::pair<int, unsigned>> threads;
  for (const TraceEvent& e : events) {
    if (std::find(threads.begin(), threads.end(), std::make_pair(e.thread, e.lane)) ==
        threads.end()) {
      threads.emplace_back(e.thread, e.lane);
    }
  }
  for (const auto& [tid, lane] : threads) {
    out += fmt::format(
        "{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{},\"args\":{{\"name\":\"lane "
        "{}\"}}}},\n",
        tid, lane);
  }
  auto escape = [](const std::string& s) {
    std::string r;
    for (char c : s) {
      if (c == '"' || c == '\\') r += '\\';
      if (static_cast<unsigned char>(c) < 0x20) continue;
      r += c;
    }
    return r;
  };
  for (std::size_t i = 0; i < events.size(); ++i) {
    const TraceEvent& e = events[i];
    out += fmt::format(
        "{{\"name\":\"{}\",\"cat\":\"{}\",\"ph\":\"X\",\"ts\":{:.3f},\"dur\":{:.3f},\"pid\":1,"
        "\"tid\":{},\"args\":{{\"lane\":{},\"thread\":{},\"run\":{}}}}}{}\n",
        escape(e.name), escape(e.op), e.start_us, e.duration_us, e.thread, e.lane, e.thread, e.run,
        i + 1 < events.size() ? "," : "");
  }
  out += "],\"displayTimeUnit\":\"ms\"}\n";
  return out;
}

}  // namespace tfpin::engine
