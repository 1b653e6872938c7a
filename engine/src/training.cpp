// Training: parameters with momentum, gradient routing and accumulation, the softmax cross-entropy
// loss, SGD updates, and the backward pass that walks the forward nodes in reverse.
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "gradient_exchange.hpp"
#include "ops/common.hpp"

namespace tfpin::engine::detail {

namespace {

// A zero-filled owned buffer beside the weights (momentum, the loss).
int zeroed_state_buffer(Lowering& l, std::uint64_t bytes, std::string name) {
  Buffer b;
  b.kind = BufferKind::weights;
  b.bytes = bytes;
  b.name = std::move(name);
  b.owned = allocate_aligned(bytes);
  if (!b.owned) throw std::bad_alloc();
  std::memset(b.owned.get(), 0, bytes);
  l.report.weight_bytes += bytes;
  l.buffers.push_back(std::move(b));
  return static_cast<int>(l.buffers.size() - 1);
}

std::size_t floats(const md_t& md) { return md.get_size() / sizeof(float); }

// Which values the loss must be differentiated by: those computed from something trainable.
std::vector<bool> values_needing_gradients(const Ir& ir, const std::vector<int>& order) {
  std::vector<bool> needs(ir.values.size(), false);
  for (int index : order) {
    const Node& n = ir.nodes[static_cast<std::size_t>(index)];
    bool trainable = find_op(n.kind)->has_parameters;
    for (int in : n.inputs) trainable = trainable || needs[static_cast<std::size_t>(in)];
    needs[static_cast<std::size_t>(n.output)] = trainable;
  }
  return needs;
}

// Mean cross-entropy of softmax probabilities against class labels, and its gradient with respect
// to the logits, (p - onehot(label)) / N.
void add_softmax_cross_entropy(Lowering& l, int softmax) {
  const Node& s = node_of(l.ir, softmax);
  const Dims& dims = value_of(l.ir, s.output).dims;
  const md_t nc = plain_md(dims, Layout::nc);
  const int probabilities = l.read_as(s.output, nc);
  const int gradient = l.new_arena_buffer(nc, s.name + ":gradient");
  l.loss_buffer = zeroed_state_buffer(l, sizeof(float), "loss");
  *reinterpret_cast<float*>(l.buffers[static_cast<std::size_t>(l.loss_buffer)].owned.get()) =
      std::numeric_limits<float>::quiet_NaN();
  const md_t labels_md({dims[0]}, dnnl::memory::data_type::f32, tag::x);
  const md_t loss_md({1}, dnnl::memory::data_type::f32, tag::x);
  const std::int64_t batch = dims[0];
  const std::int64_t classes = dims[1];
  Step step;
  step.name = "loss";
  step.op = "softmax_cross_entropy";
  step.impl = "tfpin";
  step.args.push_back(Arg::in(0, probabilities, nc));
  step.args.push_back(Arg::in(0, l.labels_buffer, labels_md));
  step.args.push_back(Arg::out(0, l.loss_buffer, loss_md));
  step.args.push_back(Arg::out(0, gradient, nc));
  step.kernel = [batch, classes](const KernelCall& call) {
    const auto* p = static_cast<const float*>(call.data[0]);
    const auto* labels = static_cast<const float*>(call.data[1]);
    auto* loss = static_cast<float*>(call.data[2]);
    auto* d = static_cast<float*>(call.data[3]);
    const float inv = 1.0f / static_cast<float>(batch);
    double total = 0;
    for (std::int64_t n = 0; n < batch; ++n) {
      // Labels outside the classes are clamped: a bad label must not write out of bounds.
      auto label = static_cast<std::int64_t>(labels[n]);
      label = std::clamp<std::int64_t>(label, 0, classes - 1);
      const float* row = p + n * classes;
      float* drow = d + n * classes;
      total -= std::log(std::max(static_cast<double>(row[label]), 1e-30));
      for (std::int64_t c = 0; c < classes; ++c) drow[c] = row[c] * inv;
      drow[label] -= inv;
    }
    *loss = static_cast<float>(total / static_cast<double>(batch));
  };
  l.add_kernel_step(std::move(step));
  l.add_gradient(s.inputs[0], gradient, nc);
}

}  // namespace

void Lowering::add_kernel_step(Step step) {
  if (step.impl.empty()) step.impl = "tfpin";
  for (const Arg& a : step.args) step.bytes += a.md.get_size();
  if (step.threads == 0) step.threads = step_threads;
  steps.push_back(std::move(step));
}

int Lowering::parameter_as(int v, const md_t& user, const md_t& want) {
  for (const Parameter& p : parameters) {
    if (p.value != v) continue;
    if (p.md == want) return p.buffer;
    throw Unsupported(fmt::format(
        "trained tensor '{}' would be needed in two layouts ({} and {}); a trained tensor is "
        "updated in place and can only have one",
        ir.values[static_cast<std::size_t>(v)].name, md_string(p.md), md_string(want)));
  }
  if (!training()) return constant_as(v, user, want);
  const Value& value = ir.values[static_cast<std::size_t>(v)];
  if (value.consumers.size() > 1) {
    throw Unsupported(
        fmt::format("trained tensor '{}' is used by {} nodes; training supports "
                    "one use per weight tensor",
                    value.name, value.consumers.size()));
  }
  Parameter p;
  p.value = v;
  p.buffer = constant_values(*value.data, user, want, value.name);
  p.md = want;
  p.user_md = user;
  p.momentum = zeroed_state_buffer(*this, want.get_size(), value.name + ":momentum");
  parameters.push_back(p);
  ++report.parameters;
  return p.buffer;
}

int Lowering::running_statistic(int v, const md_t& md) {
  if (auto it = running_stats.find(v); it != running_stats.end()) return it->second;
  const Value& value = ir.values[static_cast<std::size_t>(v)];
  const int buffer = constant_values(*value.data, md, md, value.name);
  running_stats[v] = buffer;
  parameters.push_back(Parameter{v, buffer, md, md, -1});  // readable through parameter()
  return buffer;
}

void Lowering::add_gradient(int v, int buffer, const md_t& md) {
  gradient_parts_[v].emplace_back(buffer, md);
}

bool Lowering::has_gradient(int v) const {
  auto it = gradient_parts_.find(v);
  return it != gradient_parts_.end() && !it->second.empty();
}

namespace {

// dx = the sum of the parts, where y > 0 when y is given (else everywhere), over n floats: a chunk
// at a time, so that the parts after the first two are added in the cache.
void sum_parts(const float* y, std::span<void* const> parts, float* dx, std::size_t n) {
  constexpr std::ptrdiff_t chunk = 4096;
  const auto total = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for schedule(static)
  for (std::ptrdiff_t begin = 0; begin < total; begin += chunk) {
    const std::ptrdiff_t end = std::min(total, begin + chunk);
    sum_floats(parts, static_cast<std::size_t>(begin), dx + begin,
               static_cast<std::size_t>(end - begin));
    if (y == nullptr) continue;
#pragma omp simd
    for (std::ptrdiff_t i = begin; i < end; ++i) dx[i] = y[i] > 0.0f ? dx[i] : 0.0f;
  }
}

// A step summing `srcs` (all in md, at least two) into dst, masked by the value in `mask` (> 0)
// when mask >= 0. Arguments: the mask, the parts, dst.
Step sum_step(std::string name, std::string op, int mask, const std::vector<int>& srcs, int dst,
              const md_t& md) {
  Step step;
  step.name = std::move(name);
  step.op = std::move(op);
  if (mask >= 0) step.args.push_back(Arg::in(0, mask, md));
  for (int src : srcs) step.args.push_back(Arg::in(0, src, md));
  step.args.push_back(Arg::out(0, dst, md));
  const std::size_t count = srcs.size();
  const std::size_t n = floats(md);
  const std::size_t first = mask >= 0 ? 1 : 0;
  step.kernel = [count, n, first](const KernelCall& call) {
    sum_parts(first ? static_cast<const float*>(call.data[0]) : nullptr,
              call.data.subspan(first, count), static_cast<float*>(call.data[first + count]), n);
  };
  return step;
}

}  // namespace

int Lowering::gradient_as(int v, const md_t& want) {
  auto key = std::make_pair(v, md_string(want));
  if (auto it = gradients_.find(key); it != gradients_.end()) return it->second;
  auto& parts = gradient_parts_.at(v);
  const std::string& name = ir.values[static_cast<std::size_t>(v)].name;
  int buffer = -1;
  if (parts.size() == 1) {
    buffer = reordered(parts[0].first, parts[0].second, want, name + ":gradient");
  } else {
    // Several consumers: sum their contributions once, in one layout (reordering the others). A
    // kernel of ours: oneDNN's sum ran at half the memory speed on Inception's four-part sums.
    std::vector<int> srcs;
    for (const auto& [b, md] : parts) srcs.push_back(reordered(b, md, want, name + ":gradient"));
    buffer = new_arena_buffer(want, name + ":gradient_sum");
    add_kernel_step(sum_step(name + ":gradient_sum", "sum", -1, srcs, buffer, want));
    parts = {{buffer, want}};
  }
  gradients_[key] = buffer;
  return buffer;
}

int Lowering::gradient_before_relu(int node, const md_t& want) {
  const Node& n = ir.nodes[static_cast<std::size_t>(node)];
  bool relu = false;
  for (const PostOp& p : n.post_ops) {
    relu = relu || p.kind == PostOp::Kind::relu;
    // The passes fuse no other activation when training (its backward needs the input).
    if (p.kind == PostOp::Kind::eltwise) {
      throw Unsupported(fmt::format("{}: a fused {} has no backward", ir.describe_node(node),
                                    to_string(p.eltwise.kind)));
    }
  }
  if (!relu || n.kind == OpKind::batch_norm) return gradient_as(n.output, want);
  // The ReLU was fused into the forward step: its backward needs only the output (relu' = y > 0).
  const auto out = static_cast<std::size_t>(n.output);
  const md_t& y_md = value_md[out];
  if (gradient_parts_.at(n.output).size() > 1) {
    const int dx = add_masked_gradient_sum(n.output, n.name);
    return reordered(dx, y_md, want, n.name + ":relu_gradient");
  }
  const int dy = gradient_as(n.output, y_md);
  const int dx = add_relu_backward(*this, n.name, value_buffer[out], y_md, dy);
  return reordered(dx, y_md, want, n.name + ":relu_gradient");
}

int Lowering::add_masked_gradient_sum(int v, const std::string& name) {
  const auto value = static_cast<std::size_t>(v);
  const md_t y_md = value_md[value];
  std::vector<int> srcs;
  for (const auto& [b, md] : gradient_parts_.at(v)) {
    srcs.push_back(reordered(b, md, y_md, ir.values[value].name + ":gradient"));
  }
  const int dx = new_arena_buffer(y_md, name + ":diff_src");
  Step step =
      sum_step(name + ":relu_backward", "sum+relu_backward", value_buffer[value], srcs, dx, y_md);
  add_kernel_step(std::move(step));
  return dx;
}

namespace {

// SGD with momentum in PyTorch's form on n floats: v = mu v + scale dw; w -= lr v.
void sgd_momentum(float* w, float* v, const float* dw, std::size_t n, float lr, float mu,
                  float scale) {
  const auto count = static_cast<std::ptrdiff_t>(n);
#pragma omp parallel for simd schedule(static)
  for (std::ptrdiff_t i = 0; i < count; ++i) {
    v[i] = mu * v[i] + scale * dw[i];
    w[i] -= lr * v[i];
  }
}

const md_t token_md({1}, dnnl::memory::data_type::f32, tag::x);

}  // namespace

void Lowering::add_update(int parameter_buffer, int gradient, const md_t& gradient_md,
                          const std::string& name) {
  int index = -1;
  for (std::size_t i = 0; i < parameters.size(); ++i) {
    if (parameters[i].buffer == parameter_buffer) index = static_cast<int>(i);
  }
  if (index < 0) throw Unsupported(fmt::format("'{}' is not a trained tensor", name));
  const Parameter& p = parameters[static_cast<std::size_t>(index)];
  const int g = reordered(gradient, gradient_md, p.md, name + ":gradient");
  const std::size_t n = floats(p.md);
  const float lr = options.training->learning_rate;
  const float mu = options.training->momentum;
  if (exchange != nullptr) {
    // Packed into its bucket as soon as it exists; the update waits for the bucket's reduction.
    const GradientExchange::Slot slot = exchange->place(n);
    if (static_cast<std::size_t>(slot.bucket) == bucket_tokens.size()) {
      bucket_tokens.push_back(
          zeroed_state_buffer(*this, sizeof(float), fmt::format("bucket{}", slot.bucket)));
    }
    Step step;
    step.name = name + ":pack";
    step.op = "gradient_pack";
    step.args.push_back(Arg::in(0, g, p.md));
    step.args.push_back(
        Arg::in_out(0, bucket_tokens[static_cast<std::size_t>(slot.bucket)], token_md));
    GradientExchange* ex = exchange;
    step.kernel = [ex, slot, n](const KernelCall& call) {
      std::memcpy(ex->data(slot.bucket) + slot.offset, call.data[0], n * sizeof(float));
      ex->packed(slot.bucket);
    };
    add_kernel_step(std::move(step));
    deferred_updates.push_back({index, slot.bucket, slot.offset, name});
    return;
  }
  Step step;
  step.name = name + ":sgd";
  step.op = "sgd_momentum";
  step.args.push_back(Arg::in_out(0, p.buffer, p.md));
  step.args.push_back(Arg::in_out(0, p.momentum, p.md));
  step.args.push_back(Arg::in(0, g, p.md));
  step.kernel = [n, lr, mu](const KernelCall& call) {
    sgd_momentum(static_cast<float*>(call.data[0]), static_cast<float*>(call.data[1]),
                 static_cast<const float*>(call.data[2]), n, lr, mu, 1.0f);
  };
  add_kernel_step(std::move(step));
}

void Lowering::add_deferred_updates() {
  if (exchange == nullptr) return;
  const float lr = options.training->learning_rate;
  const float mu = options.training->momentum;
  const float scale = exchange->scale();
  GradientExchange* ex = exchange;
  // Bucket by bucket, in the order they are reduced: the first updates run while later buckets
  // are still on the wire.
  for (int bucket = 0; bucket < exchange->buckets(); ++bucket) {
    const int token = bucket_tokens[static_cast<std::size_t>(bucket)];
    Step wait;
    wait.name = fmt::format("bucket{}:wait", bucket);
    wait.op = "gradient_wait";
    wait.args.push_back(Arg::in_out(0, token, token_md));
    wait.kernel = [ex, bucket](const KernelCall&) { ex->wait(bucket); };
    add_kernel_step(std::move(wait));
    for (const DeferredUpdate& u : deferred_updates) {
      if (u.bucket != bucket) continue;
      const Parameter& p = parameters[static_cast<std::size_t>(u.parameter)];
      const std::size_t n = floats(p.md);
      Step step;
      step.name = u.name + ":sgd";
      step.op = "sgd_momentum";
      step.args.push_back(Arg::in_out(0, p.buffer, p.md));
      step.args.push_back(Arg::in_out(0, p.momentum, p.md));
      step.args.push_back(Arg::in(0, token, token_md));
      const std::size_t offset = u.offset;
      step.kernel = [ex, bucket, offset, n, lr, mu, scale](const KernelCall& call) {
        sgd_momentum(static_cast<float*>(call.data[0]), static_cast<float*>(call.data[1]),
                     ex->data(bucket) + offset, n, lr, mu, scale);
      };
      add_kernel_step(std::move(step));
    }
  }
}

void add_data_gradient(Lowering& l, int node, Step step, const dnnl::primitive_desc_base& pd,
                       int dy, const md_t& dy_md, const md_t& diff_dst, const md_t& weights,
                       const md_t& diff_src, const std::function<void(Step&)>& add_alternatives) {
  const Node& n = node_of(l.ir, node);
  const ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  step.args.push_back(
      Arg::in(DNNL_ARG_DIFF_DST, l.reordered(dy, dy_md, diff_dst, n.name + ":diff_dst"), diff_dst));
  // (A per-step reorder when the backward wants the weights in another layout: they change.)
  step.args.push_back(Arg::in(DNNL_ARG_WEIGHTS,
                              l.reordered(r.weights, r.weights_md, weights, n.name + ":weights"),
                              weights));
  const int dx = l.new_arena_buffer(diff_src, n.name + ":diff_src");
  step.args.push_back(Arg::out(DNNL_ARG_DIFF_SRC, dx, diff_src));
  if (add_alternatives) add_alternatives(step);
  l.add_step(std::move(step), pd);
  l.add_gradient(n.inputs[0], dx, diff_src);
}

void add_weight_gradients(Lowering& l, int node, Step step, const dnnl::primitive_desc_base& pd,
                          const md_t& diff_weights, const md_t& diff_bias,
                          const std::function<void(Step&)>& add_alternatives) {
  const Node& n = node_of(l.ir, node);
  const ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  const int dw = l.new_arena_buffer(diff_weights, n.name + ":diff_weights");
  step.args.push_back(Arg::out(DNNL_ARG_DIFF_WEIGHTS, dw, diff_weights));
  const bool has_bias = r.bias >= 0;
  int db = -1;
  if (has_bias) {
    db = l.new_arena_buffer(diff_bias, n.name + ":diff_bias");
    step.args.push_back(Arg::out(DNNL_ARG_DIFF_BIAS, db, diff_bias));
  }
  if (add_alternatives) add_alternatives(step);
  l.add_step(std::move(step), pd);
  l.add_update(r.weights, dw, diff_weights, value_of(l.ir, n.inputs[1]).name);
  if (has_bias) l.add_update(r.bias, db, diff_bias, value_of(l.ir, n.inputs[2]).name);
}

void lower_training(Lowering& l, const std::vector<int>& order) {
  Ir& ir = l.ir;
  int softmax = -1;
  if (ir.outputs.size() == 1) {
    const int p = value_of(ir, ir.outputs[0].first).producer;
    if (p >= 0 && node_of(ir, p).kind == OpKind::softmax) softmax = p;
  }
  if (softmax < 0) {
    throw Unsupported(
        "training needs the graph's single output to be a softmax over the classes (the loss is "
        "its cross-entropy against the labels)");
  }
  const Dims& classes = value_of(ir, node_of(ir, softmax).output).dims;
  if (classes.size() != 2) {
    throw Unsupported(
        fmt::format("training needs the output softmax over classes, N x C; {} is over the "
                    "channels of {} (a per-pixel loss is not supported)",
                    ir.describe_node(softmax), dims_string(classes)));
  }
  l.needs_gradient = values_needing_gradients(ir, order);
  add_softmax_cross_entropy(l, softmax);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int node = *it;
    const Node& n = node_of(ir, node);
    if (node == softmax || !l.has_gradient(n.output)) continue;
    const OpDef* op = find_op(n.kind);
    if (op->backward == nullptr) {
      throw Unsupported(
          fmt::format("{}: training has no backward for this operator", ir.describe_node(node)));
    }
    op->backward(l, node);
  }
  l.add_deferred_updates();
}

}  // namespace tfpin::engine::detail
