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

// Data-parallel training (Horovod's model): every replica (an MPI rank) runs the same graph on its
// own shard of the global batch, and the gradients are summed over the replicas before each update.
// The runtime packs the weight gradients into fused buckets as backward produces them and hands
// each full bucket to the reducer on its communication thread, so the reduction overlaps the rest
// of backward; the updates wait for their bucket. Batch norm keeps per-replica batch statistics
// (no synchronised batch norm, as Horovod without SyncBatchNorm).
class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  // Replaces `data` with its element-wise sum over all replicas. Called on the runtime's
  // communication thread, once per bucket per step, buckets in the same order (and of the same
  // sizes) on every replica. A failure ends this and every later run of the runtime.
  virtual Status sum(std::span<float> data) = 0;
};

struct DataParallelOptions {
  std::shared_ptr<GradientReducer> reducer;
  unsigned replicas = 1;  // the summed gradients are divided by this
  // A bucket is closed once it holds at least this much (HOROVOD_FUSION_THRESHOLD's meaning; a
  // gradient larger than it gets a bucket of its own). 0: one bucket per trained tensor.
  std::uint64_t fusion_threshold_bytes = 64ull << 20;
  // Where the communication thread runs (OS cpu indices); empty: where the creating thread may.
  std::vector<unsigned> communication_cpus;
};

// What the communication did in the last run.
struct ExchangeStats {
  int buckets = 0;
  std::uint64_t bytes = 0;     // gradient bytes reduced per step (this replica's share sent)
  double reduce_seconds = 0;   // inside GradientReducer::sum
  double exposed_seconds = 0;  // steps waited for a reduction (the rest was hidden)
};

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
  // This replica's first sample in the global batch: dropout masks are drawn per global sample, so
  // N replicas of batch B/N draw what one process of batch B draws.
  std::uint64_t first_sample = 0;
  std::optional<DataParallelOptions> data_parallel;  // unset: this process alone
};

struct CompileOptions {
  unsigned lanes = 1;  // inter-op lanes (M)
  unsigned intra = 1;  // OpenMP threads per lane
  // Cores of each lane (OS cpu indices); empty = do not pin. When given: one entry per lane.
  std::vector<std::vector<unsigned>> lane_cpus;
  bool fusion = true;  // fold batch norm, fuse bias/ReLU/residual add into convolutions
  // Winograd for 3x3 and 5x5 stride-1 convolutions: tfpin's own F(4x4, 3x3), F(6x6, 3x3),
  // F(7x7, 3x3) and F(4x4, 5x5) (AVX2,
  // AVX-512; inference, and training's forward, backward data and backward weights steps) and
  // oneDNN's (2.x on AVX-512, inference), timed against the direct kernel in the first runs. Fewer
  // multiplications, a larger rounding error (at most 1e-5, the 8x8 tiles 3e-5, of the sum of |x w|
  // per output, tested; about 1e-4 relative).
  bool winograd = true;
  // Where a step's candidate kernels include one whose name starts with this (e.g.
  // "tfpin_wino_6x3", "jit:avx2"), that one runs, untimed; other steps time theirs as usual. For
  // comparing kernels on whole models. Empty: the fastest of each step's candidates.
  std::string force_kernel;
  // Convolutions in the blocked layout of oneDNN's direct kernels for the effective ISA (nChw16c
  // with AVX-512, nChw8c with AVX2); false lets oneDNN choose (2.6 then mostly picks its brgemm
  // kernels on NHWC).
  bool blocked_layouts = true;
  // Inference: a node that nothing else can run beside (a network's stem, most of a chain-like
  // network) runs on the cores of every lane instead of one lane's; a node too small to repay an
  // OpenMP team (modelled from its FLOPs and bytes) runs on one thread. Off: every step runs on
  // its lane's `intra` threads.
  bool elastic_threads = true;
  // Inference at batch 1: inner products as tfpin's matrix-vector kernel on AVX-512 or AVX2 (as
  // oneDNN's effective ISA allows; weights packed for one sequential stream per thread) instead
  // of oneDNN's.
  bool matrix_vector = true;
  // Inference at batch 1: a concat's inputs are written straight into their slices of its output
  // (channel-outermost layouts, whole blocks of channels) and the concat step disappears.
  bool in_place_concat = true;
  // Inference at batch 1: sibling 1x1 convolutions (the same input, stride and activation; the
  // reduce layers of Inception blocks) run as one convolution, each writing whole channel blocks
  // of its output.
  bool merge_siblings = true;
  // Inference: a convolution that no Winograd kernel covers (strided, 7x7, 1x7) also times
  // oneDNN's brgemm kernel on channels-last copies of its input and output, where oneDNN has one
  // (2.6: AVX-512) and the layer has enough FLOPs per copied byte.
  bool channels_last = true;
  // Inference: 1x1 convolutions also time tfpin's own kernel (AVX2, AVX-512) on the blocked
  // layouts around them, kept where faster than oneDNN's.
  bool own_pointwise = true;
  bool trace = false;  // record one event per step and run (see Runtime::trace)
  // Planned activations + weights + scratchpads above this fail with out_of_memory.
  // Unset: the machine's physical memory.
  std::optional<std::uint64_t> memory_limit_bytes;
  std::optional<TrainingOptions> training;  // unset: inference
};

// A step whose kernel the executor chose by timing each candidate in its first runs.
struct KernelChoice {
  struct Candidate {
    std::string kernel;  // oneDNN implementation ("jit_wino_4x3:avx512_core")
    double best_us = 0;  // fastest of its timed runs
  };
  std::string step;
  std::string kept;                   // the fastest candidate's kernel
  std::vector<Candidate> candidates;  // the compiled kernel first
};

struct CompileReport {
  std::uint64_t arena_bytes = 0;       // peak activation memory after reuse (the planned arena)
  std::uint64_t activation_bytes = 0;  // what the activations would take without reuse
  // Constants in the layouts the primitives want; once the timed runs are over, less the weights
  // of the kernels not kept.
  std::uint64_t weight_bytes = 0;
  std::uint64_t scratchpad_bytes = 0;  // per lane
  double flops = 0;      // forward pass: 2 x multiply-accumulates of convs and inner products
  int steps = 0;         // primitives executed per run
  int reorders = 0;      // of which layout conversions
  int wide_steps = 0;    // nodes run on every lane's cores (CompileOptions::elastic_threads)
  int narrow_steps = 0;  // nodes run on one thread though the lane has more
  // 3x3 convolutions whose kernel (tfpin's Winograd, oneDNN's Winograd tile sizes, direct) is
  // chosen by timing each in the first runs, and the convolutions that run Winograd (after those
  // runs: the kernels kept).
  int timed_choices = 0;
  // The first runs that time those candidates (3 x the most candidates of a step; 0 without
  // timed choices): a benchmark warms up at least this long.
  unsigned trial_runs = 0;
  // Steps where CompileOptions::force_kernel named one of the candidates: they run it, untimed
  // (and are not in kernel_choices).
  int forced_choices = 0;
  int winograd_convolutions = 0;
  std::vector<KernelChoice> kernel_choices;  // filled when the timed runs are over
  int folded_batch_norms = 0;
  int fused_relus = 0;
  int fused_pools = 0;          // training: batch norm + ReLU + max pooling computed as one step
  int moved_average_pools = 0;  // training: average pooling moved after the 1x1 convolution
  int max_pools_before_concats = 0;  // training: a concat's max pooling split over its parts
  int fused_eltwises = 0;            // inference: other activations made post-ops (Graph::eltwise)
  int fused_adds = 0;                // residual adds turned into sum post-ops
  int in_place_adds = 0;             // ... of which write straight into the residual's buffer
  int in_place_concats = 0;          // concats removed: their inputs write into their output
  int merged_convolutions = 0;       // 1x1 convolutions computed in one step with their siblings
  int parameters = 0;                // training: trained tensors (each with its momentum buffer)
  int gradient_buckets = 0;          // data parallel: fused buckets reduced per step
  std::uint64_t gradient_bytes = 0;  // ... and the bytes they hold
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
  int thread = 0;        // Linux thread id of the lane thread
  unsigned threads = 1;  // OpenMP threads the step ran on
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
  // Training: the names of the trained tensors (compile order), without batch norm's running
  // statistics (which parameter() also reads; in data-parallel training they differ per replica).
  [[nodiscard]] std::vector<std::string> trained_names() const;
  // Data parallel: what the gradient exchange did in the last run (zeros otherwise).
  [[nodiscard]] ExchangeStats exchange_stats() const;

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
