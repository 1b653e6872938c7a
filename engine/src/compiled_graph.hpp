// What Runtime::create compiles a graph into (compiler.cpp): steps whose arguments are bound to
// buffers in one planned arena, the dependencies between the steps, and the graph's inputs and
// outputs. The executor (executor.hpp) runs it; Runtime::setup binds the caller's buffers to it.
#pragma once

#include <cstdint>
#include <exception>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "gradient_exchange.hpp"
#include "lowering.hpp"
#include "tfpin/engine/runtime.hpp"

namespace tfpin::engine::detail {

// Inference: removes each concat step whose inputs can be written in place into its output
// (in_place_concat.cpp), making their buffers aliases of the output's; counts them in `report`
// (in_place_concats, and no longer as wide or narrow steps of a lane of `intra` threads).
void place_concats_in_place(std::vector<Buffer>& buffers, std::vector<Step>& steps, unsigned intra,
                            CompileReport& report);

// Carries the Status that Runtime::create returns out of the compiler and the lanes' start-up.
struct Failure : std::exception {
  explicit Failure(Status s) : status(std::move(s)) {}
  Status status;
  const char* what() const noexcept override { return status.message().c_str(); }
};

struct CompiledGraph {
  CompileOptions options;
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  CompileReport report;
  std::vector<TensorInfo> inputs;
  std::vector<TensorInfo> outputs;
  std::vector<Buffer> buffers;
  std::vector<Step> steps;            // in an order that respects their dependencies
  std::vector<Parameter> parameters;  // training: trained tensors and running statistics
  std::vector<std::string> parameter_names;
  int loss_buffer = -1;
  std::unique_ptr<GradientExchange> exchange;  // data parallel only
  std::vector<std::vector<int>> successors;    // by step
  std::vector<int> predecessor_counts;         // by step
  std::vector<double> ranks;                   // by step: critical-path priority (schedule.hpp)
  unsigned max_step_threads = 1;               // the widest step's OpenMP threads
  AlignedBytes arena;
  std::uint64_t scratchpad_bytes = 0;  // the largest step's; each lane brings its own
  // Memory objects of every step argument; the input and output ones get their handle at setup.
  std::vector<std::vector<dnnl::memory>> memories;
  // By step, by alternative kernel (Step::alternatives), by argument.
  std::vector<std::vector<std::vector<dnnl::memory>>> alternative_memories;
  std::vector<std::pair<dnnl::memory, int>> input_memories;   // (memory, input index)
  std::vector<std::pair<dnnl::memory, int>> output_memories;  // (memory, output index)
  // Kernel steps: their arguments' data pointers, refreshed at setup (inputs and outputs move).
  std::vector<std::vector<void*>> kernel_data;
  // By step, by alternative: the same for alternatives that are kernels.
  std::vector<std::vector<std::vector<void*>>> alternative_kernel_data;

  // Validates, fuses, lowers to oneDNN, plans memory and binds every argument. Throws Failure
  // (and lets std::bad_alloc and dnnl::error through).
  void compile(const Graph& graph);

 private:
  void lower(const Graph& graph);
  void build_dependencies();
  void place_buffers();  // arena offsets from the memory planner; allocates the arena
  void bind_arguments();
};

}  // namespace tfpin::engine::detail
