// The compiler behind Runtime::create: the IR passes, lowering every node through the operator
// registry, the step dependencies, the memory plan and the arguments bound to it.
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <functional>
#include <queue>
#include <system_error>
#include <thread>

#include "compiled_graph.hpp"
#include "memory_planner.hpp"
#include "op_registry.hpp"
#include "ops/batch_norm_pool.hpp"
#include "ops/pointwise_siblings.hpp"
#include "schedule.hpp"

namespace tfpin::engine::detail {

namespace {

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

}  // namespace

void CompiledGraph::compile(const Graph& graph) {
  // On a thread of its own, which ends here: compiling runs OpenMP regions (weight reorders and
  // transforms), and libgomp keeps the calling thread's team alive afterwards. With those idle
  // members it manages more threads than the process has CPUs, and then every team spins only
  // 100 times before sleeping (its throttled spin count, whatever GOMP_SPINCOUNT says), so each
  // step's parallel region had to wake the lane's members with a system call. ResNet-50 at batch 1
  // on 2 cores of Zen 4: best step 31.0-32.3 -> 33.8-34.1 img/s.
  auto body = [&] {
    lower(graph);
    build_dependencies();
    place_buffers();
    bind_arguments();
  };
  std::exception_ptr failure;
  std::thread compiler;
  try {
    compiler = std::thread([&] {
      try {
        body();
      } catch (...) {
        failure = std::current_exception();
      }
    });
  } catch (const std::system_error&) {
    body();  // no thread to be had (a thread limit): here, at the cost above
    return;
  }
  compiler.join();
  if (failure) std::rethrow_exception(failure);
}

namespace {

// No single activation may exceed the memory limit, whatever the planner later shares.
void check_activation_sizes(const Ir& ir, std::uint64_t limit) {
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
}

// Training needs every operator between the inputs and the loss to have a backward.
void check_trainable(const Ir& ir) {
  for (std::size_t i = 0; i < ir.nodes.size(); ++i) {
    const Node& n = ir.nodes[i];
    if (n.dead || find_op(n.kind)->backward != nullptr) continue;
    const bool is_output = std::any_of(ir.outputs.begin(), ir.outputs.end(),
                                       [&](const auto& out) { return out.first == n.output; });
    if (is_output) continue;  // the loss differentiates the classifier's softmax itself
    throw Failure({StatusCode::unsupported,
                   fmt::format("{}: training has no backward for this operator (inference only)",
                               ir.describe_node(static_cast<int>(i)))});
  }
}

// The graph-level passes (ir.hpp), as far as the options and the mode allow.
void run_passes(Ir& ir, const CompileOptions& options, CompileReport& report) {
  if (options.training) {
    // Batch norm keeps its own step (batch statistics); residual adds stay adds (their gradient is
    // routed to both operands). ReLUs still fuse: their backward reads the output; the other
    // activations do not (theirs reads the input, which a fused step never writes).
    if (options.fusion) {
      report.moved_average_pools = move_average_pools(ir);
      report.fused_relus = fuse_relus(ir);
      report.max_pools_before_concats = max_pools_before_concats(ir);
      if (batch_norm_pool_available()) report.fused_pools = fuse_batch_norm_max_pools(ir);
    }
    return;
  }
  drop_identities(ir);
  if (!options.fusion) return;
  report.folded_batch_norms = fold_batch_norms(ir);
  // Residual adds first: a ReLU after the add then becomes the convolution's last post-op.
  report.fused_adds = fuse_residual_adds(ir);
  report.fused_relus = fuse_relus(ir);
  report.fused_eltwises = fuse_eltwises(ir);
  // (A flatten before an inner product stays: reading the blocked image directly forces
  // oneDNN's slower gemm path, 4x slower on VGG16's fc6 than a reorder plus its brgemm kernel.)
}

// A caller-bound buffer (graph input or output) of `bytes`, recorded in `infos`.
int add_io_buffer(Lowering& lowering, BufferKind kind, TensorInfo info, std::uint64_t bytes,
                  std::vector<TensorInfo>& infos) {
  Buffer b;
  b.kind = kind;
  b.io = static_cast<int>(infos.size());
  b.name = info.name;
  b.bytes = bytes;
  lowering.buffers.push_back(std::move(b));
  infos.push_back(std::move(info));
  return static_cast<int>(lowering.buffers.size() - 1);
}

void lower_node(Lowering& lowering, int node) {
  const Ir& ir = lowering.ir;
  try {
    find_op(ir.nodes[static_cast<std::size_t>(node)].kind)->lower(lowering, node);
  } catch (const dnnl::error& e) {
    throw Failure({StatusCode::unsupported,
                   fmt::format("{}: oneDNN cannot build it on this machine: {} (status {})",
                               ir.describe_node(node), e.what(), static_cast<int>(e.status))});
  } catch (const Unsupported& e) {
    throw Failure(
        {StatusCode::unsupported, fmt::format("{}: {}", ir.describe_node(node), e.what())});
  }
}

void lower_backward(Lowering& lowering, const std::vector<int>& order) {
  try {
    lower_training(lowering, order);
  } catch (const dnnl::error& e) {
    throw Failure({StatusCode::unsupported,
                   fmt::format("training: oneDNN cannot build a backward step on this machine: "
                               "{} (status {})",
                               e.what(), static_cast<int>(e.status))});
  } catch (const Unsupported& e) {
    throw Failure({StatusCode::unsupported, e.what()});
  }
}

}  // namespace

void CompiledGraph::lower(const Graph& graph) {
  Ir ir;
  Status s = build_ir(graph, ir);
  if (!s.ok()) throw Failure(s);
  check_activation_sizes(ir, options.memory_limit_bytes.value_or(physical_memory()));
  if (options.training) check_trainable(ir);
  run_passes(ir, options, report);

  const ScopedOmpThreads lane_threads(options.intra);
  Lowering lowering(ir, engine, options, report);
  lowering.step_threads = options.intra;
  if (options.training && options.training->data_parallel) {
    exchange = std::make_unique<GradientExchange>(*options.training->data_parallel);
    lowering.exchange = exchange.get();
  }
  for (std::size_t i = 0; i < ir.values.size(); ++i) {
    const Value& v = ir.values[i];
    if (v.kind != ValueKind::input) continue;
    const md_t md = plain_md(v.dims, v.layout);
    const int buffer = add_io_buffer(lowering, BufferKind::input, {v.name, v.dims, v.layout},
                                     md.get_size(), inputs);
    lowering.define(static_cast<int>(i), md, buffer);
  }
  if (options.training) {
    // The labels of a training step: class indices (as floats), one per image.
    const std::int64_t batch =
        ir.values[static_cast<std::size_t>(ir.outputs.front().first)].dims[0];
    lowering.labels_buffer =
        add_io_buffer(lowering, BufferKind::input, {"labels", {batch}, Layout::nc},
                      static_cast<std::uint64_t>(batch) * sizeof(float), inputs);
  }
  const std::vector<int> order = topological_order(ir);
  const std::vector<unsigned> threads = node_threads(ir, order, options);
  if (!options.training && options.merge_siblings) {
    lowering.sibling_groups = pointwise_sibling_groups(ir, order, onednn::native_channel_block());
  }
  for (int node : order) {
    const std::size_t first = lowering.steps.size();
    const auto n = static_cast<std::size_t>(node);
    if (lowering.computed_with_sibling[n]) continue;  // by the group's first node
    // A merged group (pointwise_siblings.hpp) runs on its widest member's threads.
    unsigned node_threads = threads[n];
    for (int m : lowering.sibling_groups[n]) {
      node_threads = std::max(node_threads, threads[static_cast<std::size_t>(m)]);
    }
    lowering.step_threads = node_threads;
    {
      const ScopedOmpThreads node_threads_scope(node_threads);
      lower_node(lowering, node);
    }
    lowering.step_threads = options.intra;
    // The node's computation is its first step that is not an input's reorder.
    double flops = node_cost(ir, node).flops;
    if (lowering.computed_with_sibling[n]) {
      flops = 0;
      for (int m : lowering.sibling_groups[n]) flops += node_cost(ir, m).flops;
    }
    for (std::size_t k = first; k < lowering.steps.size(); ++k) {
      if (lowering.steps[k].op == "reorder") continue;
      lowering.steps[k].flops = flops;
      break;
    }
    if (node_threads > options.intra) ++report.wide_steps;
    if (node_threads < options.intra) ++report.narrow_steps;
  }
  if (options.training) lower_backward(lowering, order);
  for (const auto& [v, def] : ir.outputs) {
    const Value& value = ir.values[static_cast<std::size_t>(v)];
    const md_t md = plain_md(value.dims, *def.layout);
    const int buffer = add_io_buffer(lowering, BufferKind::output,
                                     {def.name, value.dims, *def.layout}, md.get_size(), outputs);
    const auto vi = static_cast<std::size_t>(v);
    lowering.add_reorder(def.name + ":output", lowering.value_buffer[vi], lowering.value_md[vi],
                         buffer, md);
    --report.reorders;  // delivering the result is not a layout conversion between layers
  }
  parameters = std::move(lowering.parameters);
  for (const Parameter& p : parameters) {
    parameter_names.push_back(ir.values[static_cast<std::size_t>(p.value)].name);
  }
  loss_buffer = lowering.loss_buffer;
  if (exchange) {
    exchange->allocate();
    report.gradient_buckets = exchange->buckets();
    report.gradient_bytes = exchange->bytes();
    report.weight_bytes += exchange->bytes();
  }
  buffers = std::move(lowering.buffers);
  steps = std::move(lowering.steps);
  if (!options.training && options.in_place_concat) {
    place_concats_in_place(buffers, steps, options.intra, report);
  }
  report.steps = static_cast<int>(steps.size());
  for (const Step& step : steps) max_step_threads = std::max(max_step_threads, step.threads);
}

void CompiledGraph::build_dependencies() {
  const std::size_t n = steps.size();
  successors.assign(n, {});
  predecessor_counts.assign(n, 0);
  // What an access touches: its buffer and every alias lying inside it (in_place_concat.cpp). The
  // slices of a concat tile its output, so two accesses overlap exactly when they share one of
  // these, and the slices of one concat stay independent of each other.
  std::vector<std::vector<int>> touched(buffers.size());
  for (std::size_t b = 0; b < buffers.size(); ++b) touched[b].push_back(static_cast<int>(b));
  for (std::size_t a = 0; a < buffers.size(); ++a) {
    const Buffer& inner = buffers[a];
    if (inner.alias_of < 0) continue;
    const auto root = static_cast<std::size_t>(inner.alias_of);
    touched[root].push_back(static_cast<int>(a));
    for (std::size_t b = 0; b < buffers.size(); ++b) {
      const Buffer& outer = buffers[b];
      if (b == a || outer.alias_of != inner.alias_of) continue;
      if (outer.alias_offset <= inner.alias_offset &&
          inner.alias_offset + inner.bytes <= outer.alias_offset + outer.bytes) {
        touched[b].push_back(static_cast<int>(a));
      }
    }
  }
  std::vector<int> last_writer(buffers.size(), -1);
  std::vector<std::vector<int>> readers(buffers.size());
  std::vector<std::vector<int>> deps(n);
  for (std::size_t s = 0; s < n; ++s) {
    const int self = static_cast<int>(s);
    for (const Arg& a : steps[s].args) {
      for (int t : touched[static_cast<std::size_t>(a.buffer)]) {
        auto b = static_cast<std::size_t>(t);
        if (last_writer[b] >= 0 && last_writer[b] != self) deps[s].push_back(last_writer[b]);
        if (a.write) {
          for (int r : readers[b]) {
            if (r != self) deps[s].push_back(r);
          }
        }
      }
    }
    for (const Arg& a : steps[s].args) {
      for (int t : touched[static_cast<std::size_t>(a.buffer)]) {
        auto b = static_cast<std::size_t>(t);
        if (a.write) {
          last_writer[b] = self;
          readers[b].clear();
        } else {
          readers[b].push_back(self);
        }
      }
    }
    std::sort(deps[s].begin(), deps[s].end());
    deps[s].erase(std::unique(deps[s].begin(), deps[s].end()), deps[s].end());
    predecessor_counts[s] = static_cast<int>(deps[s].size());
    for (int d : deps[s]) successors[static_cast<std::size_t>(d)].push_back(self);
  }
  ranks = critical_path_ranks(steps, successors);
}

void CompiledGraph::place_buffers() {
  const std::size_t n = steps.size();
  std::vector<std::vector<int>> accessors(buffers.size());
  for (std::size_t s = 0; s < n; ++s) {
    for (const Arg& a : steps[s].args) {
      // An alias lives as long as any access to the buffer it is a slice of.
      const int owner = buffers[static_cast<std::size_t>(a.buffer)].alias_of >= 0
                            ? buffers[static_cast<std::size_t>(a.buffer)].alias_of
                            : a.buffer;
      auto& acc = accessors[static_cast<std::size_t>(owner)];
      if (acc.empty() || acc.back() != static_cast<int>(s)) acc.push_back(static_cast<int>(s));
    }
  }
  MemoryPlan memory_plan;
  if (options.lanes <= 1) {
    memory_plan = plan_memory(buffers, accessors, [](int a, int b) { return a < b; });
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
    memory_plan = plan_memory(buffers, accessors, [&](int a, int b) {
      auto bi = static_cast<std::size_t>(b);
      return (reach[static_cast<std::size_t>(a) * words + bi / 64] >> (bi % 64)) & 1u;
    });
  }
  for (Buffer& b : buffers) {
    if (b.alias_of >= 0)
      b.offset = buffers[static_cast<std::size_t>(b.alias_of)].offset + b.alias_offset;
  }
  report.arena_bytes = memory_plan.arena_bytes;
  report.activation_bytes = memory_plan.unshared_bytes;
  auto largest_scratchpad = [&] {
    std::uint64_t bytes = 0;
    for (const Step& step : steps) {
      bytes = std::max(bytes, step.scratchpad_bytes);
      for (const Alternative& alt : step.alternatives)
        bytes = std::max(bytes, alt.scratchpad_bytes);
    }
    return bytes;
  };
  scratchpad_bytes = largest_scratchpad();
  const std::uint64_t limit = options.memory_limit_bytes.value_or(physical_memory());
  auto needed = [&] {
    return memory_plan.arena_bytes + report.weight_bytes +
           scratchpad_bytes * std::max(1u, options.lanes);
  };
  if (needed() > limit) {
    // The timed kernels' own weights (Winograd's are 4 to 7 times the plain ones) are a luxury:
    // without them every step runs its compiled kernel, untimed.
    std::vector<char> used(buffers.size(), 0);
    for (const Step& step : steps) {
      for (const Arg& a : step.args) used[static_cast<std::size_t>(a.buffer)] = 1;
    }
    for (Step& step : steps) {
      for (const Alternative& alt : step.alternatives) {
        for (const Arg& a : alt.args) {
          Buffer& b = buffers[static_cast<std::size_t>(a.buffer)];
          if (used[static_cast<std::size_t>(a.buffer)] == 0 && b.owned) {
            b.owned.reset();
            report.weight_bytes -= b.bytes;
          }
        }
      }
      step.alternatives.clear();
    }
    report.timed_choices = 0;
    scratchpad_bytes = largest_scratchpad();
  }
  report.scratchpad_bytes = scratchpad_bytes;
  const std::uint64_t total = needed();
  if (total > limit) {
    throw Failure({StatusCode::out_of_memory,
                   fmt::format("the graph needs {} (activations after reuse {}, weights {}, "
                               "scratchpads {} x {} lanes), more than the {} available: the memory "
                               "cannot be planned (reduce the batch size)",
                               human_bytes(total), human_bytes(memory_plan.arena_bytes),
                               human_bytes(report.weight_bytes), human_bytes(scratchpad_bytes),
                               options.lanes, human_bytes(limit))});
  }
  arena = allocate_aligned(memory_plan.arena_bytes);
  if (!arena) {
    throw Failure({StatusCode::out_of_memory, fmt::format("cannot allocate the {} activation arena",
                                                          human_bytes(memory_plan.arena_bytes))});
  }
}

void CompiledGraph::bind_arguments() {
  memories.assign(steps.size(), {});
  alternative_memories.assign(steps.size(), {});
  auto bind = [&](const Arg& arg) {
    const Buffer& buffer = buffers[static_cast<std::size_t>(arg.buffer)];
    void* handle = DNNL_MEMORY_NONE;  // inputs and outputs: bound at setup
    if (buffer.kind == BufferKind::arena) handle = arena.get() + buffer.offset;
    if (buffer.kind == BufferKind::weights) handle = buffer.owned.get();
    dnnl::memory memory(arg.md, engine, handle);
    if (buffer.kind == BufferKind::input) input_memories.emplace_back(memory, buffer.io);
    if (buffer.kind == BufferKind::output) output_memories.emplace_back(memory, buffer.io);
    return memory;
  };
  for (std::size_t step = 0; step < steps.size(); ++step) {
    for (const Arg& arg : steps[step].args) memories[step].push_back(bind(arg));
    for (const Alternative& alt : steps[step].alternatives) {
      auto& memories_of = alternative_memories[step].emplace_back();
      for (const Arg& arg : alt.args) memories_of.push_back(bind(arg));
    }
  }
}

}  // namespace tfpin::engine::detail
