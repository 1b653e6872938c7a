// Compiling and running a graph: Runtime::create (validate, fuse, choose layouts, create oneDNN
// primitives, plan memory, start the lanes) -> setup (bind the caller's input and output buffers)
// -> run (one inference, or one training step), each returning a Status.
//
// Execution: M inter-op lanes. Each lane is a thread pinned to its lane's cores that runs an OpenMP
// team of `intra` threads (one per core); nodes whose inputs are ready run concurrently on
// whichever lane is free. Primitives are shared by the lanes: every primitive uses a user-managed
// scratchpad and each lane brings its own.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "tfpin/engine/graph.hpp"
#include "tfpin/engine/status.hpp"

namespace tfpin::engine {

// Training mode: every run is one SGD step. The graph's single output must be a softmax over
// classes (the classifier); the loss is its cross-entropy against the extra input "labels" (N
// class indices stored as floats). Constants that are weights or biases of convolutions and inner
// products, and batch-norm scales and shifts, are trained; batch norm uses the batch statistics and
// updates its running mean and variance; dropout draws a mask from `seed` and the step number.
struct TrainingOptions {
  float learning_rate = 0.01f;
  float momentum = 0.9f;     // SGD momentum (PyTorch's form: v = m v + g; w -= lr v)
  float bn_momentum = 0.1f;  // running = (1 - m) running + m batch (unbiased variance)
  std::uint64_t seed = 1;    // dropout masks
};

struct CompileOptions {
  unsigned lanes = 1;  // inter-op lanes (M)
  unsigned intra = 1;  // OpenMP threads per lane
  // Cores of each lane (OS cpu indices); empty = do not pin. When given: one entry per lane.
  std::vector<std::vector<unsigned>> lane_cpus;
  bool fusion = true;  // fold batch norm, fuse bias/ReLU/residual add into convolutions
  // Let oneDNN use Winograd (F(4x4, 3x3)) for 3x3 stride-1 convolutions where its heuristics say it
  // is faster than direct convolution (oneDNN's convolution_auto). Fewer multiplications, slightly
  // larger rounding error (about 1e-4 relative).
  bool winograd = true;
  // Convolutions in oneDNN's blocked nChw16c layout (its direct AVX-512 kernels); false lets oneDNN
  // choose (2.6 then mostly picks its brgemm kernels on NHWC).
  bool blocked_layouts = true;
  bool trace = false;  // record one event per step and run (see Runtime::trace)
  // Planned activations + weights + scratchpads above this fail with out_of_memory.
  // Unset: the machine's physical memory.
  std::optional<std::uint64_t> memory_limit_bytes;
  std::optional<TrainingOptions> training;  // unset: inference
};

struct CompileReport {
  std::uint64_t arena_bytes = 0;       // peak activation memory after reuse (the planned arena)
  std::uint64_t activation_bytes = 0;  // what the activations would take without reuse
  std::uint64_t weight_bytes = 0;      // constants in the layouts the primitives want
  std::uint64_t scratchpad_bytes = 0;  // per lane
  double flops = 0;  // forward pass: 2 x multiply-accumulates of convs and inner products
  int steps = 0;     // primitives executed per run
  int reorders = 0;  // of which layout conversions
  int folded_batch_norms = 0;
  int fused_relus = 0;
  int fused_adds = 0;     // residual adds turned into sum post-ops
  int in_place_adds = 0;  // ... of which write straight into the residual's buffer
  int parameters = 0;     // training: trained tensors (each with its momentum buffer)
};

struct TensorInfo {
  std::string name;
  std::vector<std::int64_t> dims;  // logical order
  Layout layout = Layout::nchw;    // memory order the caller uses
  [[nodiscard]] std::size_t elements() const;
};

struct TraceEvent {
  std::string name;  // node name (reorders: "<tensor>:reorder")
  std::string op;    // operator, with fused post-ops ("convolution+sum+relu")
  unsigned lane = 0;
  int thread = 0;  // Linux thread id of the lane thread
  std::uint64_t run = 0;
  double start_us = 0;  // since the runtime was created
  double duration_us = 0;
};

struct ExternalInput {
  std::string name;
  const float* data = nullptr;
};
struct ExternalOutput {
  std::string name;
  float* data = nullptr;
};

class Runtime {
 public:
  static Status create(const Graph& graph, const CompileOptions& options,
                       std::unique_ptr<Runtime>* runtime);
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // Every input and output of the graph must be given, by name; the buffers must stay valid until
  // the next setup. Inputs are only read.
  Status setup(std::span<const ExternalInput> inputs, std::span<const ExternalOutput> outputs);
  Status run();

  // Training: the mean cross-entropy of the last run (NaN before the first).
  [[nodiscard]] float loss() const;
  // Training: a trained tensor (or a batch norm's running statistic), by its constant's name, in
  // logical row-major order. invalid_argument for an unknown name.
  Status parameter(const std::string& name, std::vector<float>* values) const;

  [[nodiscard]] const std::vector<TensorInfo>& inputs() const;
  [[nodiscard]] const std::vector<TensorInfo>& outputs() const;
  [[nodiscard]] const CompileReport& report() const;
  // One line per step: name, op, oneDNN implementation, layouts. For --verbose and debugging.
  [[nodiscard]] std::string describe() const;
  // Events recorded so far (CompileOptions::trace), and clears them.
  std::vector<TraceEvent> take_trace();
  [[nodiscard]] unsigned lanes() const;
  [[nodiscard]] unsigned intra() const;

  struct Impl;

 private:
  explicit Runtime(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Chrome trace JSON (chrome://tracing, Perfetto): one complete event per step, pid 1, tid = lane
// thread, args {lane, thread, run}.
std::string chrome_trace_json(const std::vector<TraceEvent>& events);

}  // namespace tfpin::engine
