// The importer's internals: the model's values as the node converters see them, and the converter
// table (operators.cpp). Errors travel as ImportError and become a Status at import_onnx.
#pragma once

#include <cstdint>
#include <array>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "onnx/onnx_pb.h"
#include "tfpin/engine/onnx.hpp"

namespace tfpin::engine::onnx_import {

using Dims = std::vector<std::int64_t>;

struct ImportError : std::runtime_error {
  ImportError(StatusCode code, const std::string& message)
      : std::runtime_error(message), code(code) {}
  StatusCode code;
};

// A value whose contents are known at import: an initializer, a Constant node's output, an input
// given in known_inputs. Floats or (shapes, axes, pads) int64.
struct ConstantData {
  Dims dims;
  std::vector<float> floats;
  std::vector<std::int64_t> ints;
  bool is_int = false;
  [[nodiscard]] std::int64_t elements() const;
};

// Zero padding waiting for the convolution that consumes it (a Pad node folded into it).
struct PendingPad {
  std::array<std::int64_t, 4> spatial{0, 0, 0, 0};  // top, left, bottom, right
};

struct ValueState {
  std::string name;
  Dims dims;                                      // ONNX shape (from shape inference)
  std::optional<TensorId> tensor;                 // the engine tensor holding it, once there is one
  std::shared_ptr<const ConstantData> constant;   // known contents
  bool graph_input = false;                       // an ONNX graph input (maybe known)
  std::string input_name;                         // ... its name (aliases keep the original's)
  int given = -1;                                 // ... its array in given_inputs
  std::optional<PendingPad> pad;                  // a Pad's output: tensor is the unpadded input
  TensorId constant_tensor = no_tensor;           // the engine constant made from `constant`
};

class Importer {
 public:
  Importer(const onnx::ModelProto& model, const OnnxImportOptions& options, std::string model_path);
  void run(ImportedModel* out);

  // For the converters.
  const onnx::NodeProto& node() const { return *node_; }
  std::int64_t opset() const { return opset_; }
  // The folder external data is relative to.
  const std::string& model_dir() const { return model_dir_; }
  Graph& graph() { return graph_; }
  [[nodiscard]] std::string where() const;  // "node 'conv1' (Conv, opset 13)"
  [[noreturn]] void unsupported(const std::string& what) const;
  [[noreturn]] void invalid(const std::string& what) const;

  // Inputs of the current node (empty names are absent optional inputs).
  [[nodiscard]] std::size_t input_count() const;
  [[nodiscard]] bool has_input(std::size_t i) const;
  ValueState& input(std::size_t i);
  // The engine tensor holding input i as data (not a constant; no pending pad). Its ONNX rank must
  // be 4 or 2, unless the consumer is `elementwise`: then other ranks are viewed as N,C,H,W or N,C
  // (same elements, same order).
  TensorId data(std::size_t i, bool elementwise = false);
  // The engine's dims of input i's data (its ONNX dims, or their elementwise view).
  [[nodiscard]] Dims engine_dims(std::size_t i);
  // Input i's known contents, or an error saying it must be a constant (`role` names it).
  const ConstantData& constant(std::size_t i, const char* role);
  // Input i as an engine constant (float), reshaped to `dims` when given.
  TensorId constant_tensor(std::size_t i, const char* role);
  TensorId make_constant(const std::string& name, Dims dims, std::vector<float> values);
  // The ONNX shape of output i (from shape inference).
  [[nodiscard]] const Dims& output_dims(std::size_t i) const;
  // Every output but the first must be absent or unused.
  void only_first_output();
  void define(std::size_t output, TensorId tensor);
  void define_alias(std::size_t output, const ValueState& source);
  void define_constant(std::size_t output, ConstantData data);
  void define_pad(std::size_t output, TensorId tensor, PendingPad pad);

  // Attributes.
  [[nodiscard]] const onnx::AttributeProto* attribute(const char* name) const;
  std::int64_t int_attribute(const char* name, std::int64_t fallback) const;
  float float_attribute(const char* name, float fallback) const;
  std::string string_attribute(const char* name, const std::string& fallback) const;
  std::vector<std::int64_t> ints_attribute(const char* name) const;
  // Refuses attributes other than `known` (a newer opset's meaning the importer does not know).
  void known_attributes(std::initializer_list<const char*> known) const;

 private:
  ValueState& value(const std::string& name);
  void load_initializers();
  void bind_inputs();
  void infer_shapes();

  const onnx::ModelProto& model_;
  onnx::ModelProto shaped_;  // the model with bound inputs and inferred shapes
  const OnnxImportOptions& options_;
  std::string model_path_;
  std::string model_dir_;
  std::int64_t opset_ = 0;
  Graph graph_;
  std::unordered_map<std::string, ValueState> values_;
  std::unordered_map<std::string, Dims> shapes_;  // inferred shapes of the nodes' outputs
  std::unordered_map<std::string, std::string> producer_op_;  // output -> its node's op_type
  std::unordered_map<std::string, int> uses_;  // node inputs + graph outputs reading each value
  const onnx::NodeProto* node_ = nullptr;
};

using Converter = void (*)(Importer&);
// The converter of `op_type` in the default domain, or null.
Converter find_converter(const std::string& op_type);
std::vector<std::string> converter_names();

// Reads a TensorProto's contents: float (1) and int64 (7), raw or typed fields, or external data
// inside model_dir. `what` names it in errors.
// "FLOAT", "DOUBLE", ... or "data type N" for a value ONNX does not define.
std::string data_type_name(int type);
ConstantData read_tensor(const onnx::TensorProto& tensor, const std::string& model_dir,
                         const std::string& what);
// Checks ONNX dims: none negative, element count representable. Throws invalid_argument.
std::int64_t checked_elements(const Dims& dims, const std::string& what);

std::string dims_text(const Dims& dims);  // "1x3x224x224", "scalar"

}  // namespace tfpin::engine::onnx_import
