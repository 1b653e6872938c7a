// The ONNX importer (engine/onnx/): import_onnx reads the input as a model file (protobuf parsing,
// ONNX's checker and shape inference, the node converters) and returns a Status, never a crash or
// an exception: invalid_argument or unsupported with a message that starts with the file's path,
// or a graph whose tensors, nodes, inputs and outputs are consistent. The file sits alone in a
// fresh folder: external data can only name the model itself or nothing.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_util.hpp"
#include "tfpin/engine/onnx.hpp"

namespace {

namespace fs = std::filesystem;
using tfpin::engine::TensorDef;

constexpr std::int64_t max_elements = std::int64_t{1} << 36;  // the importer's bound

// A folder of its own under $TMPDIR, removed at exit.
class Scratch {
 public:
  Scratch() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern =
        (tmp != nullptr && *tmp != '\0' ? std::string(tmp) : "/tmp") + "/tfpin-fuzz-onnx.XXXXXX";
    FUZZ_CHECK(mkdtemp(pattern.data()) != nullptr);
    dir_ = pattern;
    model_ = (fs::path(dir_) / "model.onnx").string();
  }
  ~Scratch() {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  [[nodiscard]] const std::string& model() const { return model_; }

 private:
  std::string dir_;
  std::string model_;
};

std::int64_t elements(const std::vector<std::int64_t>& dims) {
  std::int64_t n = 1;
  for (const std::int64_t d : dims) {
    FUZZ_CHECK(d >= 0);
    FUZZ_CHECK(d == 0 || n <= max_elements / d);
    n *= d;
  }
  return n;
}

bool valid(const tfpin::engine::Graph& graph, tfpin::engine::TensorId id) {
  return id >= 0 && static_cast<std::size_t>(id) < graph.tensors().size();
}

void check_model(const tfpin::engine::ImportedModel& model) {
  const tfpin::engine::Graph& graph = model.graph;
  FUZZ_CHECK(model.opset >= 1);
  FUZZ_CHECK(model.nodes >= 0);
  for (const TensorDef& t : graph.tensors()) {
    if (t.kind == TensorDef::Kind::value) continue;  // dims come at compile
    const std::int64_t n = elements(t.dims);
    if (t.kind == TensorDef::Kind::constant) {
      FUZZ_CHECK(t.data != nullptr);
      FUZZ_CHECK(static_cast<std::int64_t>(t.data->size()) == n);
    }
  }
  // The builder refers only to earlier tensors: a topological order, no cycle.
  for (const auto& node : graph.nodes()) {
    FUZZ_CHECK(valid(graph, node.output));
    for (const auto input : node.inputs) {
      FUZZ_CHECK(valid(graph, input));
      FUZZ_CHECK(input < node.output);
    }
  }
  for (const auto& input : model.inputs) {
    FUZZ_CHECK(valid(graph, input.tensor));
    const TensorDef& t = graph.tensors()[static_cast<std::size_t>(input.tensor)];
    FUZZ_CHECK(t.kind == TensorDef::Kind::input);
    FUZZ_CHECK(t.dims == input.dims);
    FUZZ_CHECK(input.dims.size() == 4 || input.dims.size() == 2);
    FUZZ_CHECK(input.given == -1);  // none given here
    elements(input.dims);
  }
  FUZZ_CHECK(graph.outputs().size() == model.outputs.size());
  for (std::size_t i = 0; i < model.outputs.size(); ++i) {
    FUZZ_CHECK(valid(graph, model.outputs[i].tensor));
    FUZZ_CHECK(graph.outputs()[i].tensor == model.outputs[i].tensor);
    FUZZ_CHECK(graph.tensors()[static_cast<std::size_t>(model.outputs[i].tensor)].kind ==
               TensorDef::Kind::value);
    elements(model.outputs[i].dims);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const Scratch scratch;
  {
    std::ofstream out(scratch.model(), std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    FUZZ_CHECK(out.good());
  }
  tfpin::engine::OnnxImportOptions options;
  options.batch_size = 1;  // binds a dynamic batch dimension: the converters see more models
  tfpin::engine::ImportedModel model;
  const tfpin::engine::Status status = tfpin::engine::import_onnx(scratch.model(), options, &model);
  if (status.ok()) {
    check_model(model);
    return 0;
  }
  FUZZ_CHECK(status.code() == tfpin::engine::StatusCode::invalid_argument ||
             status.code() == tfpin::engine::StatusCode::unsupported);
  FUZZ_CHECK(status.message().starts_with(scratch.model() + ": "));
  return 0;
}
