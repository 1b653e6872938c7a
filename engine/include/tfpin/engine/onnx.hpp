// ONNX import: a model file (ModelProto, read with libonnx's generated protobuf classes, validated
// by ONNX's checker, shapes by ONNX's shape inference) mapped onto the engine's Graph, which
// Runtime::create then compiles like any model of the zoo (fusion, layouts, memory plan).
//
// The engine computes in float32 on N, C, H, W images and N, C matrices; the importer refuses
// anything it cannot map exactly (another operator, attribute, data type or rank) with
// StatusCode::unsupported and a message naming the node, its operator, the opset and the supported
// list. It never maps a node approximately.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "tfpin/engine/graph.hpp"
#include "tfpin/engine/status.hpp"

namespace tfpin::engine {

// A tensor held by the caller (row-major, ONNX's dimension order): float32 data, or (integer)
// int64 or bool values for the inputs that are shapes, axes, pads or flags.
struct HostTensor {
  std::vector<std::int64_t> dims;
  std::vector<float> data;
  bool integer = false;
  std::vector<std::int64_t> ints;  // when integer
};

// An input array given before compiling (tfpin infer): by name, or (empty name) for the next
// graph input in ONNX order that has not been named.
struct GivenInput {
  std::string name;
  HostTensor value;
};

struct OnnxImportOptions {
  // Binds a dynamic first dimension of the graph inputs (dim_param or unknown); a fixed one must
  // be equal. A given input's shape binds its dynamic dimensions instead.
  std::optional<std::int64_t> batch_size;
  // Inputs whose values are known before compiling (tfpin infer gives every input). Where a node
  // needs a constant operand (weights, bias, batch-norm statistics, Gemm's B) such an input is
  // used as one; where it is data, it stays a graph input fed at run time.
  std::vector<GivenInput> given_inputs;
  // Training a classifier (tfpin bench): the model's single output must be N x classes; unless
  // the last node already is a Softmax one is appended, since the engine trains a softmax with its
  // cross-entropy.
  bool append_softmax = false;
  // Largest model file read (protobuf's own limit is 2 GiB; initializers can be external).
  std::uint64_t max_model_bytes = 2ull << 30;
};

struct OnnxTensorInfo {
  std::string name;                // the ONNX name
  std::vector<std::int64_t> dims;  // ONNX's shape, with the batch dimension bound
  TensorId tensor = no_tensor;     // in ImportedModel::graph
  int given = -1;                  // inputs: index in OnnxImportOptions::given_inputs, or -1
};

struct ImportedModel {
  Graph graph;
  std::vector<OnnxTensorInfo> inputs;   // the graph inputs the runtime needs fed, in ONNX order
  std::vector<OnnxTensorInfo> outputs;  // every ONNX graph output, in order
  std::int64_t opset = 0;               // of the default (ai.onnx) domain
  std::string producer;                 // "pytorch 1.13.1", from the model
  int nodes = 0;                        // ONNX nodes imported
};

// Reads and maps `path`. Errors: invalid_argument (unreadable, not ONNX, checker failure, bad
// shapes), unsupported (an operator, attribute or type the engine cannot compute exactly).
Status import_onnx(const std::string& path, const OnnxImportOptions& options, ImportedModel* model);

}  // namespace tfpin::engine
