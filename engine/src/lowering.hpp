// Lowering the IR to oneDNN: every live node becomes one primitive (plus reorders where a consumer
// needs another layout than its producer made), with its arguments pointing into buffers that the
// memory planner places afterwards.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir.hpp"
#include "onednn_compat.hpp"
#include "tfpin/engine/runtime.hpp"

namespace tfpin::engine::detail {

using md_t = dnnl::memory::desc;
using tag = dnnl::memory::format_tag;

struct AlignedFree {
  void operator()(void* p) const noexcept;
};
using AlignedBytes = std::unique_ptr<std::byte, AlignedFree>;
// 64-byte aligned (2 MiB aligned with transparent huge pages advised for big blocks); nullptr when
// the allocation fails.
AlignedBytes allocate_aligned(std::uint64_t bytes);

// Sets the calling thread's OpenMP team size (oneDNN sizes a primitive's parallelism when it is
// created) and restores it when the scope ends.
class ScopedOmpThreads {
 public:
  explicit ScopedOmpThreads(unsigned threads);
  ~ScopedOmpThreads();
  ScopedOmpThreads(const ScopedOmpThreads&) = delete;
  ScopedOmpThreads& operator=(const ScopedOmpThreads&) = delete;

 private:
  int saved_;
};

// Thrown while lowering something valid that this engine cannot do (create() reports it as
// StatusCode::unsupported).
struct Unsupported : std::runtime_error {
  using std::runtime_error::runtime_error;
};

enum class BufferKind { arena, weights, input, output };

struct Buffer {
  BufferKind kind = BufferKind::arena;
  std::uint64_t bytes = 0;
  std::uint64_t offset = 0;  // arena: placed by the planner
  int io = -1;               // input / output: index in the runtime's inputs / outputs
  AlignedBytes owned;        // weights
  std::string name;          // for describe()
  // Arena: a slice of another arena buffer (an in-place concat's input), at a byte offset; not
  // placed by the planner itself.
  int alias_of = -1;
  std::uint64_t alias_offset = 0;
};

// One argument of a step. The executor orders steps by what they read and write.
struct Arg {
  int arg = 0;  // DNNL_ARG_*
  int buffer = -1;
  md_t md;
  bool read = true;
  bool write = false;

  static Arg in(int arg, int buffer, md_t md) { return {arg, buffer, std::move(md), true, false}; }
  static Arg out(int arg, int buffer, md_t md) { return {arg, buffer, std::move(md), false, true}; }
  // Read, then written in place (an SGD update, a sum post-op into the residual's buffer).
  static Arg in_out(int arg, int buffer, md_t md) {
    return {arg, buffer, std::move(md), true, true};
  }
};

// What a custom (non-oneDNN) step sees: one data pointer per argument, in order, and the run
// number.
struct KernelCall {
  std::span<void* const> data;
  std::uint64_t run = 0;
  std::byte* scratch = nullptr;    // the lane's scratchpad: Step::scratchpad_bytes of it
  dnnl::stream* stream = nullptr;  // the lane's, for kernels that run oneDNN primitives
};
using Kernel = std::function<void(const KernelCall&)>;

// Another kernel computing the same step (Winograd's direct counterpart, oneDNN's other Winograd
// tile size, tfpin's own Winograd), on the same buffers but its own weights: the executor times
// every candidate in its first runs and keeps the fastest.
struct Alternative {
  dnnl::primitive primitive;
  Kernel kernel;  // instead of the primitive
  std::vector<Arg> args;
  std::uint64_t scratchpad_bytes = 0;
  std::string impl;
};

struct Step {
  std::string name;
  std::string op;
  std::string impl;
  dnnl::primitive primitive;
  Kernel kernel;  // instead of a primitive: loss, SGD update, running statistics, dropout
  std::vector<Arg> args;
  std::uint64_t scratchpad_bytes = 0;
  // The executor's cost model (schedule.hpp): FLOPs of the node's computation, bytes of the
  // arguments, and the OpenMP threads the primitive was created for.
  double flops = 0;
  std::uint64_t bytes = 0;
  unsigned threads = 0;  // 0 until add_step: the node's (Lowering::step_threads)
  std::vector<Alternative> alternatives;
};

bool is_plain(const md_t& md);          // no inner blocks
std::string md_string(const md_t& md);  // "nChw16c 32x64x56x56"
md_t plain_md(const Dims& dims, Layout layout);
md_t any_md(const Dims& dims);
dnnl::memory::dims to_dnnl(const Dims& dims);
// Channels per block when md is f32 nChw16c, nChw8c or nchw (4-D) or nc (2-D): the layouts in
// which a slice of whole blocks of channels is, image by image, one contiguous run laid out as a
// tensor of just those channels would be. nullopt for any other layout.
std::optional<std::int64_t> channel_sliceable_block(const md_t& md);
// The layout of that kind with `block` channels per block (1: nchw, or nc for a matrix) for dims.
md_t channel_sliceable_md(const Dims& dims, std::int64_t block);
// dst[i] = the sum over the parts (floats; at least two) of part[offset + i], for i < n. One
// thread, vectorised; the parts after the first two are added while dst is in the cache.
void sum_floats(std::span<void* const> parts, std::size_t offset, float* dst, std::size_t n);

// What a node's forward step left for its backward steps (training).
struct ForwardRecord {
  std::any pd;  // the forward primitive_desc: backward primitive descs take it as a hint
  int src = -1;
  md_t src_md;
  int weights = -1;  // the parameter's one buffer (updated in place)
  md_t weights_md;
  int bias = -1;
  int workspace = -1;  // max pooling indices, batch norm's ReLU mask, dropout mask
  md_t workspace_md;
  int mean = -1;  // batch norm: the batch statistics
  int variance = -1;
};

// A trained tensor: its buffer in the layout its primitive wants, and the momentum beside it.
struct Parameter {
  int value = -1;
  int buffer = -1;
  md_t md;
  md_t user_md;  // logical row-major
  int momentum = -1;
};

class GradientExchange;

// Data parallel: an update that waits for its gradient's bucket to be reduced.
struct DeferredUpdate {
  int parameter = -1;  // index in Lowering::parameters
  int bucket = -1;
  std::size_t offset = 0;  // floats into the bucket
  std::string name;
};

class Lowering {
 public:
  Lowering(Ir& ir, dnnl::engine engine, const CompileOptions& options, CompileReport& report);

  Ir& ir;
  dnnl::engine engine;
  const CompileOptions& options;
  dnnl::stream compile_stream;
  CompileReport& report;
  std::vector<Buffer> buffers;
  std::vector<Step> steps;
  // The threads the node being lowered is created for (schedule.hpp); its steps record it.
  unsigned step_threads = 1;
  // Inference at batch 1 (ops/pointwise_siblings.hpp): by node, the sibling 1x1 convolutions it
  // leads, to be computed as one; and the nodes so computed, whose lowering then adds nothing.
  std::vector<std::vector<int>> sibling_groups;
  std::vector<bool> computed_with_sibling;

  // The layout and buffer each value lives in once produced.
  std::vector<md_t> value_md;
  std::vector<int> value_buffer;

  int new_arena_buffer(const md_t& md, std::string name);
  // Reads value v in layout `want`: its own buffer when it already is in that layout, else the
  // buffer of a reorder into it (one reorder per value and layout, shared by every consumer).
  int read_as(int v, const md_t& want);
  // A constant reordered once at compile time from `user` (its logical row-major layout, possibly
  // reshaped, e.g. grouped weights) into `want`; returns a weights buffer.
  int constant_as(int v, const md_t& user, const md_t& want);
  int constant_values(const std::vector<float>& values, const md_t& user, const md_t& want,
                      std::string name);
  // A weights buffer of md's size, uninitialised, for a kernel's own packing to fill in place at
  // compile time (no intermediate vector: VGG16's packed weights are hundreds of MB per tile).
  struct NewConstant {
    int buffer = -1;
    float* data = nullptr;
  };
  [[nodiscard]] NewConstant new_constant(const md_t& md, std::string name);
  void define(int v, const md_t& md, int buffer);

  // Training ----------------------------------------------------------------------------------
  [[nodiscard]] bool training() const { return options.training.has_value(); }
  dnnl::prop_kind forward_kind() const {
    return training() ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  }
  std::vector<ForwardRecord> forward;  // by node
  std::vector<Parameter> parameters;
  std::map<int, int> running_stats;  // batch norm running mean/variance value -> buffer
  int labels_buffer = -1;
  int loss_buffer = -1;
  // Data parallel: the gradients go through the exchange, the updates are deferred until their
  // bucket is reduced (add_deferred_updates, after the last backward step).
  GradientExchange* exchange = nullptr;
  std::vector<DeferredUpdate> deferred_updates;
  std::vector<int> bucket_tokens;  // per bucket: orders its packing, waiting and update steps
  void add_deferred_updates();
  // The parameter `v` (a constant) in layout `want`: its one buffer, created on first use. In
  // training a parameter lives in one layout only (it is updated in place); a second layout is
  // unsupported.
  int parameter_as(int v, const md_t& user, const md_t& want);
  // A batch norm's running mean or variance (state updated each step, not trained).
  int running_statistic(int v, const md_t& md);
  // Gradients: contributions to d(loss)/d(value) from each consumer, summed on first read.
  void add_gradient(int v, int buffer, const md_t& md);
  [[nodiscard]] bool has_gradient(int v) const;
  // The contributions to v's gradient so far (buffer, layout), before any sum.
  [[nodiscard]] const std::vector<std::pair<int, md_t>>& gradient_parts(int v) const {
    return gradient_parts_.at(v);
  }
  // The gradient of value v in layout `want` (summing the contributions and reordering once).
  int gradient_as(int v, const md_t& want);
  // Gradient of node's output before its fused ReLU post-op (when it has one), in `want`.
  int gradient_before_relu(int node, const md_t& want);
  // The gradient of the ReLU-fused node producing v from its consumers' parts in one pass: their
  // sum where v > 0 (instead of a sum step, then a ReLU backward step reading it back).
  int add_masked_gradient_sum(int v, const std::string& name);
  // Does the loss depend on value v through something trainable (else no gradient is computed)?
  std::vector<bool> needs_gradient;
  // SGD with momentum for the parameter in `buffer` given its gradient.
  void add_update(int parameter_buffer, int gradient, const md_t& gradient_md,
                  const std::string& name);
  void add_kernel_step(Step step);
  // Gradient contributions to the node's inputs are only made where needed.
  [[nodiscard]] bool wants_gradient(int v) const {
    return needs_gradient[static_cast<std::size_t>(v)];
  }

  // Attributes with the node's post-ops and a user-managed scratchpad.
  dnnl::primitive_attr attributes(const Node& node) const;
  void add_step(Step step, const dnnl::primitive_desc_base& pd);
  // Adds a reorder step from (src_buffer, src_md) to (dst_buffer, dst_md).
  void add_reorder(const std::string& name, int src_buffer, const md_t& src_md, int dst_buffer,
                   const md_t& dst_md);
  // `buffer` (in `from`) in layout `to`: itself when equal, else a new buffer and a reorder step.
  int reordered(int buffer, const md_t& from, const md_t& to, const std::string& name);
  std::string op_label(const Node& node) const;

 private:
  std::map<std::pair<int, std::string>, int> reordered_;  // (value, layout key) -> buffer
  // By value: its copies, each in a layout. Compared as descriptors, not by name: oneDNN's
  // Winograd weight formats of different tile sizes print alike.
  std::map<int, std::vector<std::pair<md_t, int>>> constants_;
  std::map<int, std::vector<std::pair<int, md_t>>> gradient_parts_;
  std::map<std::pair<int, std::string>, int> gradients_;  // (value, layout key) -> buffer
};

// Training (training.cpp): the loss, every node's backward steps in reverse order, the updates.
void lower_training(Lowering& l, const std::vector<int>& order);
// Finishes a backward-data step of a convolution or inner product: the output gradient dy (in
// dy_md) and the weights reordered where the primitive wants other layouts, the input's gradient.
// `add_alternatives` may then give the step other kernels on its arguments (diff_dst, weights,
// diff_src).
void add_data_gradient(Lowering& l, int node, Step step, const dnnl::primitive_desc_base& pd,
                       int dy, const md_t& dy_md, const md_t& diff_dst, const md_t& weights,
                       const md_t& diff_src,
                       const std::function<void(Step&)>& add_alternatives = nullptr);
// Finishes a backward-weights step of a convolution or inner product (inputs: x, weights[, bias]):
// gradient buffers as its outputs, then the SGD updates. diff_bias: empty without bias.
// `add_alternatives` may give the step other kernels on its arguments (x, dy, dW[, db]).
void add_weight_gradients(Lowering& l, int node, Step step, const dnnl::primitive_desc_base& pd,
                          const md_t& diff_weights, const md_t& diff_bias,
                          const std::function<void(Step&)>& add_alternatives = nullptr);
// ReLU backward from its output y (in y_md) and output gradient dy; the input gradient, in y_md.
int add_relu_backward(Lowering& l, const std::string& name, int y, const md_t& y_md, int dy);
// The oneDNN algorithm(s) computing an activation, in order (ops/eltwise.cpp).
std::vector<onednn::EltwiseStep> eltwise_steps(const Eltwise& eltwise);

}  // namespace tfpin::engine::detail
