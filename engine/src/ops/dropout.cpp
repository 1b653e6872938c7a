// Dropout: the identity at inference (the compiler removes it: consumers read its input). Training:
// y = x * mask / (1 - rate), the mask drawn from the seed, the step number and the element index
// (the same for any thread count), kept as bytes for the backward.
#include <cmath>

#include "common.hpp"

namespace tfpin::engine::detail {

static Status infer_dropout(Ir& ir, int node, Dims& out) {
  TFPIN_TRY(expect_inputs(ir, node, 1, 1, "1"));
  Node& n = node_of(ir, node);
  const float rate = std::get<Dropout>(n.attrs).rate;
  if (!(rate >= 0.0f && rate < 1.0f)) {
    return graph_error(ir, node, fmt::format("rate={} is invalid: expected 0 <= rate < 1", rate));
  }
  out = value_of(ir, n.inputs[0]).dims;
  return {};
}

namespace {

// splitmix64 of (seed, run, index): independent bits for every element of every step.
static inline bool keep(std::uint64_t seed, std::uint64_t run, std::uint64_t i,
                        std::uint32_t threshold) {
  std::uint64_t z = seed ^ (run * 0xD1B54A32D192ED03ull) ^ (i * 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<std::uint32_t>(z >> 40) >= threshold;
}

// y = x * mask * scale over the buffer; with `draw`, fills the mask first.
// `first` is the global index of element 0 (data parallel: this replica's first sample's).
static Kernel masked_scale(std::size_t n, float scale, bool draw, std::uint64_t seed,
                           std::uint32_t threshold, std::uint64_t first) {
  return [=](const KernelCall& call) {
    const auto* x = static_cast<const float*>(call.data[0]);
    auto* mask = static_cast<std::uint8_t*>(call.data[1]);
    auto* y = static_cast<float*>(call.data[2]);
    const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t i = 0; i < count; ++i) {
      if (draw) mask[i] = keep(seed, call.run, first + static_cast<std::uint64_t>(i), threshold) ? 1 : 0;
      y[i] = mask[i] != 0 ? x[i] * scale : 0.0f;
    }
  };
}

}  // namespace

static void lower_dropout(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  const md_t x_md = l.value_md[static_cast<std::size_t>(x)];
  const float rate = std::get<Dropout>(n.attrs).rate;
  const std::size_t count = x_md.get_size() / sizeof(float);
  ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  r.workspace_md =
      md_t({static_cast<dnnl::memory::dim>(count)}, dnnl::memory::data_type::u8, tag::x);
  r.workspace = l.new_arena_buffer(r.workspace_md, n.name + ":mask");
  const int y = l.new_arena_buffer(x_md, n.name);
  Step step;
  step.name = n.name;
  step.op = "dropout";
  step.args.push_back(Arg::in(0, l.value_buffer[static_cast<std::size_t>(x)], x_md));
  step.args.push_back(Arg::out(0, r.workspace, r.workspace_md));
  step.args.push_back(Arg::out(0, y, x_md));
  const auto threshold = static_cast<std::uint32_t>(static_cast<double>(rate) * 16777216.0);
  // Batch is the outermost dimension in every layout: element i of sample n is n * per_sample + j.
  const auto batch = static_cast<std::uint64_t>(value_of(l.ir, x).dims.at(0));
  const std::uint64_t first = l.options.training->first_sample * (count / batch);
  step.kernel =
      masked_scale(count, 1.0f / (1.0f - rate), true, l.options.training->seed, threshold, first);
  l.add_kernel_step(std::move(step));
  l.define(n.output, x_md, y);
}

static void backward_dropout(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  if (!l.wants_gradient(x)) return;
  const ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  const md_t y_md = l.value_md[static_cast<std::size_t>(n.output)];
  const float rate = std::get<Dropout>(n.attrs).rate;
  const int dx = l.new_arena_buffer(y_md, n.name + ":diff_src");
  Step step;
  step.name = n.name + ":backward";
  step.op = "dropout_backward";
  step.args.push_back(Arg::in(0, l.gradient_as(n.output, y_md), y_md));
  step.args.push_back(Arg::in(0, r.workspace, r.workspace_md));
  step.args.push_back(Arg::out(0, dx, y_md));
  step.kernel = masked_scale(y_md.get_size() / sizeof(float), 1.0f / (1.0f - rate), false, 0, 0, 0);
  l.add_kernel_step(std::move(step));
  l.add_gradient(x, dx, y_md);
}

TFPIN_REGISTER_OP(dropout, .infer = infer_dropout, .lower = lower_dropout,
                  .backward = backward_dropout);

}  // namespace tfpin::engine::detail
