// The public Runtime: create (compiler.cpp, then the executor's lanes) -> setup (bind the caller's
// buffers) -> run (executor.cpp). Nothing throws out of these: every failure becomes a Status.
#include "tfpin/engine/runtime.hpp"
#include "tfpin/engine/version.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <new>

#include "compiled_graph.hpp"
#include "executor.hpp"

namespace tfpin::engine {

using namespace detail;

std::size_t TensorInfo::elements() const {
  std::size_t n = 1;
  for (std::int64_t d : dims) n *= static_cast<std::size_t>(d);
  return n;
}

// Declared in this order so that the executor's lanes stop before the graph they run goes away.
struct Runtime::Impl {
  CompiledGraph graph;
  std::unique_ptr<Executor> executor;
  bool is_set_up = false;
};

namespace {

Status check_options(const CompileOptions& options) {
  if (options.lanes < 1 || options.intra < 1) {
    return {StatusCode::invalid_argument, fmt::format("lanes={} intra={}: both must be at least 1",
                                                      options.lanes, options.intra)};
  }
  if (options.training && options.training->data_parallel) {
    const DataParallelOptions& dp = *options.training->data_parallel;
    if (!dp.reducer) return {StatusCode::invalid_argument, "data_parallel has no reducer"};
    if (dp.replicas < 1) return {StatusCode::invalid_argument, "data_parallel replicas must be >= 1"};
  }
  if (options.lane_cpus.empty()) return {};
  if (options.lane_cpus.size() != options.lanes) {
    return {StatusCode::invalid_argument, fmt::format("lane_cpus has {} entries for {} lanes",
                                                      options.lane_cpus.size(), options.lanes)};
  }
  for (const auto& cpus : options.lane_cpus) {
    if (cpus.empty()) return {StatusCode::invalid_argument, "a lane has no cpus"};
  }
  return {};
}

// Puts each caller buffer (ExternalInput or ExternalOutput) at its tensor's index in `bound`;
// `kind` is "input" or "output" for the messages.
template <typename External, typename Pointer>
Status bind_by_name(std::span<const External> given, const std::vector<TensorInfo>& tensors,
                    const char* kind, std::vector<Pointer>& bound) {
  bound.assign(tensors.size(), nullptr);
  for (const External& e : given) {
    auto it = std::find_if(tensors.begin(), tensors.end(),
                           [&](const TensorInfo& t) { return t.name == e.name; });
    if (it == tensors.end()) {
      std::vector<std::string> names;
      for (const TensorInfo& t : tensors) names.push_back(t.name);
      return {StatusCode::invalid_argument, fmt::format("no graph {} is named '{}' ({}s: {})", kind,
                                                        e.name, kind, fmt::join(names, ", "))};
    }
    if (e.data == nullptr) {
      return {StatusCode::invalid_argument, fmt::format("{} '{}' has a null buffer", kind, e.name)};
    }
    bound[static_cast<std::size_t>(it - tensors.begin())] = e.data;
  }
  for (std::size_t i = 0; i < bound.size(); ++i) {
    if (bound[i] == nullptr) {
      return {StatusCode::invalid_argument,
              fmt::format("{} '{}' was not given", kind, tensors[i].name)};
    }
  }
  return {};
}

}  // namespace

Runtime::Runtime(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Runtime::~Runtime() = default;

Status Runtime::create(const Graph& graph, const CompileOptions& options,
                       std::unique_ptr<Runtime>* runtime) {
  if (runtime == nullptr) return {StatusCode::invalid_argument, "runtime pointer is null"};
  runtime->reset();
  if (Status s = check_options(options); !s.ok()) return s;
  if (std::string why = onednn_unusable_reason(); !why.empty()) {
    return {StatusCode::unsupported, std::move(why)};
  }
  auto impl = std::make_unique<Impl>();
  impl->graph.options = options;
  try {
    impl->graph.compile(graph);
    impl->executor = std::make_unique<Executor>(impl->graph);
    impl->executor->start();
    if (impl->graph.exchange) impl->graph.exchange->start();
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
  Impl& impl = *impl_;
  CompiledGraph& graph = impl.graph;
  impl.is_set_up = false;
  std::vector<const float*> in;
  std::vector<float*> out;
  if (Status s = bind_by_name(inputs, graph.inputs, "input", in); !s.ok()) return s;
  if (Status s = bind_by_name(outputs, graph.outputs, "output", out); !s.ok()) return s;
  for (auto& [memory, io] : graph.input_memories) {
    memory.set_data_handle(const_cast<float*>(in[static_cast<std::size_t>(io)]));
  }
  for (auto& [memory, io] : graph.output_memories) {
    memory.set_data_handle(out[static_cast<std::size_t>(io)]);
  }
  graph.kernel_data.assign(graph.steps.size(), {});
  graph.alternative_kernel_data.assign(graph.steps.size(), {});
  for (std::size_t s = 0; s < graph.steps.size(); ++s) {
    const Step& step = graph.steps[s];
    if (step.kernel) {
      for (const dnnl::memory& memory : graph.memories[s]) {
        graph.kernel_data[s].push_back(memory.get_data_handle());
      }
    }
    for (std::size_t k = 0; k < step.alternatives.size(); ++k) {
      auto& data = graph.alternative_kernel_data[s].emplace_back();
      if (!step.alternatives[k].kernel) continue;
      for (const dnnl::memory& memory : graph.alternative_memories[s][k]) {
        data.push_back(memory.get_data_handle());
      }
    }
  }
  impl.is_set_up = true;
  return {};
}

Status Runtime::run() {
  if (!impl_->is_set_up) {
    return {StatusCode::invalid_state,
            "run before a successful setup: bind the inputs and outputs first"};
  }
  GradientExchange* exchange = impl_->graph.exchange.get();
  if (exchange != nullptr) {
    if (std::string failure = exchange->begin_run(); !failure.empty()) {
      return {StatusCode::runtime_error,
              fmt::format("the data-parallel job cannot go on: {}", failure)};
    }
  }
  Status status = impl_->executor->run();
  // Its buckets will never all be packed: later runs would reduce out of step with the replicas.
  if (!status.ok() && exchange != nullptr) exchange->abandon(status.message());
  return status;
}

std::vector<std::string> Runtime::trained_names() const {
  const CompiledGraph& graph = impl_->graph;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < graph.parameters.size(); ++i) {
    if (graph.parameters[i].momentum >= 0) names.push_back(graph.parameter_names[i]);
  }
  return names;
}

ExchangeStats Runtime::exchange_stats() const {
  const GradientExchange* exchange = impl_->graph.exchange.get();
  return exchange != nullptr ? exchange->last_run() : ExchangeStats{};
}

float Runtime::loss() const {
  const CompiledGraph& graph = impl_->graph;
  if (graph.loss_buffer < 0) return std::numeric_limits<float>::quiet_NaN();
  return *reinterpret_cast<const float*>(
      graph.buffers[static_cast<std::size_t>(graph.loss_buffer)].owned.get());
}

Status Runtime::parameter(const std::string& name, std::vector<float>* values) const {
  const CompiledGraph& graph = impl_->graph;
  if (values == nullptr) return {StatusCode::invalid_argument, "values pointer is null"};
  for (std::size_t i = 0; i < graph.parameters.size(); ++i) {
    if (graph.parameter_names[i] != name) continue;
    const Parameter& p = graph.parameters[i];
    values->assign(p.user_md.get_size() / sizeof(float), 0.0f);
    try {
      dnnl::stream stream(graph.engine);
      void* handle = graph.buffers[static_cast<std::size_t>(p.buffer)].owned.get();
      dnnl::memory src(p.md, graph.engine, handle);
      dnnl::memory dst(p.user_md, graph.engine, values->data());
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

const std::vector<TensorInfo>& Runtime::inputs() const { return impl_->graph.inputs; }
const std::vector<TensorInfo>& Runtime::outputs() const { return impl_->graph.outputs; }
const CompileReport& Runtime::report() const { return impl_->graph.report; }
unsigned Runtime::lanes() const { return impl_->graph.options.lanes; }
unsigned Runtime::intra() const { return impl_->graph.options.intra; }

std::vector<TraceEvent> Runtime::take_trace() { return impl_->executor->take_trace(); }

std::string Runtime::describe() const {
  std::string out;
  const CompiledGraph& graph = impl_->graph;
  for (std::size_t s = 0; s < graph.steps.size(); ++s) {
    const Step& step = graph.steps[s];
    std::vector<std::string> args;
    for (const Arg& arg : step.args) {
      const Buffer& buffer = graph.buffers[static_cast<std::size_t>(arg.buffer)];
      const char* where = buffer.kind == BufferKind::arena     ? "arena"
                          : buffer.kind == BufferKind::weights ? "weights"
                          : buffer.kind == BufferKind::input   ? "input"
                                                               : "output";
      args.push_back(fmt::format("{}@{}+{}", md_string(arg.md), where, buffer.offset));
    }
    out += fmt::format("{:3} {:<28} {:<24} {:<22} {}\n", s, step.name, step.op, step.impl,
                       fmt::join(args, "  "));
  }
  return out;
}

}  // namespace tfpin::engine
