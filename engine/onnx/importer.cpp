// import_onnx: read the file, check it with ONNX's checker, bind the batch dimension, infer every
// value's shape with ONNX's shape inference, then convert node by node (operators.cpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>

#include "importer.hpp"
#include "onnx/checker.h"
#include "onnx/shape_inference/implementation.h"

namespace tfpin::engine {

namespace onnx_import {

namespace {

// The first dimension: what OnnxImportOptions::batch_size binds.
constexpr std::size_t batch_axis = 0;

bool is_default_domain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

// Whether a tensor of the main graph (initializer, Constant value) keeps its data in a file.
bool has_external_data(const onnx::GraphProto& g) {
  const auto external = [](const onnx::TensorProto& t) {
    return t.data_location() == onnx::TensorProto::EXTERNAL;
  };
  if (std::any_of(g.initializer().begin(), g.initializer().end(), external)) return true;
  for (const auto& s : g.sparse_initializer()) {
    if (external(s.values()) || external(s.indices())) return true;
  }
  for (const auto& n : g.node()) {
    for (const auto& a : n.attribute()) {
      if ((a.has_t() && external(a.t())) ||
          std::any_of(a.tensors().begin(), a.tensors().end(), external)) {
        return true;
      }
    }
  }
  return false;
}

// ONNX 1.12's shape inference trusts the shapes it computes: a convolution's weights of a higher
// rank than its input read past the input's dimensions, products of huge dimensions overflow (and
// a Reshape's then divides INT64_MIN by -1), auto_pad (any value but VALID) steps through a
// dimension one stride at a time. This registry runs each operator's inference behind checks of
// its inputs: every known shape within the importer's bounds (no negative dimension, at most 2^36
// elements, as every value must be anyway), a Conv's weights of its input's rank. A failed check
// is ONNX's own InferenceError: the model is refused like any other shape inference failure.
class CheckedSchemas final : public onnx::ISchemaRegistry {
 public:
  const onnx::OpSchema* GetSchema(const std::string& key, const int max_version,
                                  const std::string& domain) const override {
    const onnx::OpSchema* schema = onnx::OpSchemaRegistry::Schema(key, max_version, domain);
    if (schema == nullptr || !schema->has_type_and_shape_inference_function()) return schema;
    std::unique_ptr<onnx::OpSchema>& checked = checked_[schema];
    if (!checked) {
      checked = std::make_unique<onnx::OpSchema>(*schema);
      checked->TypeAndShapeInferenceFunction(
          [infer = schema->GetTypeAndShapeInferenceFunction(), key](onnx::InferenceContext& ctx) {
            check_inputs(ctx, key);
            infer(ctx);
          });
    }
    return checked.get();
  }

 private:
  static const onnx::TensorShapeProto* shape(onnx::InferenceContext& ctx, std::size_t i) {
    const onnx::TypeProto* type = i < ctx.getNumInputs() ? ctx.getInputType(i) : nullptr;
    if (type == nullptr || !type->has_tensor_type() || !type->tensor_type().has_shape()) {
      return nullptr;
    }
    return &type->tensor_type().shape();
  }

  static void check_inputs(onnx::InferenceContext& ctx, const std::string& op) {
    for (std::size_t i = 0; i < ctx.getNumInputs(); ++i) {
      const onnx::TensorShapeProto* s = shape(ctx, i);
      if (s == nullptr) continue;
      Dims known;
      for (const auto& d : s->dim()) {
        if (d.has_dim_value()) known.push_back(d.dim_value());
      }
      try {
        checked_elements(known, fmt::format("input {}", i));
      } catch (const ImportError& error) {
        fail_shape_inference(error.what());
      }
    }
    const onnx::TensorShapeProto* x = shape(ctx, 0);
    const onnx::TensorShapeProto* w = shape(ctx, 1);
    if (op == "Conv" && ctx.getAttribute("kernel_shape") == nullptr && x != nullptr &&
        w != nullptr && x->dim_size() != w->dim_size()) {
      fail_shape_inference("the weights have rank ", w->dim_size(), ", the input ", x->dim_size());
    }
    // auto_pad: ONNX counts the strides that fit in each spatial dimension one by one.
    const onnx::AttributeProto* auto_pad = ctx.getAttribute("auto_pad");
    const onnx::AttributeProto* strides = ctx.getAttribute("strides");
    // Every auto_pad but VALID takes that loop (NOTSET included, and a value ONNX does not know).
    if (x == nullptr || auto_pad == nullptr || strides == nullptr || auto_pad->s() == "VALID") {
      return;
    }
    for (int i = 0; i < strides->ints_size() && i + 2 < x->dim_size(); ++i) {
      const std::int64_t stride = strides->ints(i);
      const auto& d = x->dim(i + 2);
      if (stride > 1 && d.has_dim_value() && d.dim_value() / stride > (std::int64_t{1} << 26)) {
        fail_shape_inference("auto_pad ", auto_pad->s(), " over dimension ", i + 2, " of ",
                             d.dim_value(), " with stride ", stride,
                             ": more than the 2^26 strides the importer lets ONNX's shape "
                             "inference count one by one");
      }
    }
  }

  mutable std::map<const onnx::OpSchema*, std::unique_ptr<onnx::OpSchema>> checked_;
};

// Dims of a fully known tensor type; nullopt when any dimension (or the rank) is unknown.
std::optional<Dims> known_dims(const onnx::TypeProto& type) {
  if (!type.has_tensor_type() || !type.tensor_type().has_shape()) return std::nullopt;
  Dims dims;
  for (const auto& d : type.tensor_type().shape().dim()) {
    if (!d.has_dim_value()) return std::nullopt;
    dims.push_back(d.dim_value());
  }
  return dims;
}

}  // namespace

Importer::Importer(const onnx::ModelProto& model, const OnnxImportOptions& options,
                   std::string model_path)
    : model_(model),
      options_(options),
      model_path_(std::move(model_path)),
      model_dir_(std::filesystem::path(model_path_).parent_path().string()) {}

std::string Importer::where() const {
  if (node_ == nullptr) return "model";
  const std::string name = !node_->name().empty()       ? node_->name()
                           : node_->output_size() > 0 ? node_->output(0)
                                                      : "?";
  return fmt::format("node '{}' ({}, opset {})", name, node_->op_type(), opset_);
}

void Importer::unsupported(const std::string& what) const {
  throw ImportError(StatusCode::unsupported, fmt::format("{}: {}", where(), what));
}

void Importer::invalid(const std::string& what) const {
  throw ImportError(StatusCode::invalid_argument, fmt::format("{}: {}", where(), what));
}

ValueState& Importer::value(const std::string& name) {
  auto it = values_.find(name);
  if (it == values_.end()) {
    invalid(fmt::format("reads '{}', which no node, graph input or initializer produces (a "
                        "missing initializer, or nodes out of order: ONNX graphs are acyclic and "
                        "sorted)",
                        name));
  }
  return it->second;
}

std::size_t Importer::input_count() const { return static_cast<std::size_t>(node_->input_size()); }

bool Importer::has_input(std::size_t i) const {
  return i < input_count() && !node_->input(static_cast<int>(i)).empty();
}

ValueState& Importer::input(std::size_t i) {
  if (!has_input(i)) invalid(fmt::format("input {} is missing", i));
  return value(node_->input(static_cast<int>(i)));
}

namespace {

// The engine's view of an ONNX shape that is not N,C,H,W or N,C, for elementwise operators only:
// the same elements in the same row-major order, as N,C or N,C,H,W.
Dims elementwise_view(const Dims& dims) {
  if (dims.empty()) return {1, 1};
  if (dims.size() == 1) return {1, dims[0]};
  if (dims.size() == 2 || dims.size() == 4) return dims;
  if (dims.size() == 3) return {dims[0], dims[1], dims[2], 1};
  std::int64_t rest = 1;
  for (std::size_t i = 3; i < dims.size(); ++i) rest *= dims[i];
  return {dims[0], dims[1], dims[2], rest};
}

}  // namespace

TensorId Importer::data(std::size_t i, bool elementwise) {
  ValueState& v = input(i);
  if (v.pad) {
    unsupported(fmt::format("reads '{}', the output of a Pad; a Pad is supported only in front of "
                            "a convolution or an average pooling (it becomes their padding)",
                            v.name));
  }
  if (!elementwise && v.dims.size() != 4 && v.dims.size() != 2) {
    unsupported(fmt::format("reads '{}' of rank {} ({}); the engine computes on N,C,H,W "
                            "images and N,C matrices (other ranks only through elementwise "
                            "operators)",
                            v.name, v.dims.size(), dims_text(v.dims)));
  }
  if (v.tensor) return *v.tensor;
  if (!v.graph_input) {
    unsupported(fmt::format("reads the constant '{}' as data; the engine computes only on data "
                            "that flows from the graph inputs (no constant folding)",
                            v.name));
  }
  // The graph input itself holds the tensor, so that every alias of it shares one.
  ValueState& original = values_.at(v.input_name);
  if (!original.tensor) {
    const Dims view = elementwise_view(original.dims);
    original.tensor = graph_.input(original.name, view, view.size() == 4 ? Layout::nchw : Layout::nc);
  }
  v.tensor = original.tensor;
  return *v.tensor;
}

Dims Importer::engine_dims(std::size_t i) { return elementwise_view(input(i).dims); }

const ConstantData& Importer::constant(std::size_t i, const char* role) {
  ValueState& v = input(i);
  if (!v.constant) {
    unsupported(fmt::format("its {} '{}' is computed at run time; the engine needs it constant "
                            "(an initializer or a Constant)",
                            role, v.name));
  }
  return *v.constant;
}

TensorId Importer::constant_tensor(std::size_t i, const char* role) {
  ValueState& v = input(i);
  const ConstantData& c = constant(i, role);
  if (c.is_int) unsupported(fmt::format("its {} '{}' is int64, not float32", role, v.name));
  if (v.constant_tensor == no_tensor) {
    v.constant_tensor = graph_.constant(v.name, c.dims, c.floats);
  }
  return v.constant_tensor;
}

TensorId Importer::make_constant(const std::string& name, Dims dims, std::vector<float> values) {
  return graph_.constant(name, std::move(dims), std::move(values));
}

const Dims& Importer::output_dims(std::size_t i) const {
  const std::string& name = node_->output(static_cast<int>(i));
  if (!shapes_.count(name)) invalid(fmt::format("ONNX shape inference gave no shape for output '{}'", name));
  return shapes_.at(name);
}

void Importer::only_first_output() {
  for (int i = 1; i < node_->output_size(); ++i) {
    const std::string& name = node_->output(i);
    if (!name.empty() && uses_[name] > 0) {
      unsupported(fmt::format("its output {} ('{}') is used; the engine computes only the first",
                              i, name));
    }
  }
}

void Importer::define(std::size_t output, TensorId tensor) {
  ValueState& v = values_[node_->output(static_cast<int>(output))];
  v.name = node_->output(static_cast<int>(output));
  v.tensor = tensor;
}

void Importer::define_alias(std::size_t output, const ValueState& source) {
  const std::string name = node_->output(static_cast<int>(output));
  ValueState alias = source;  // copied first: source may live in values_
  alias.name = name;
  if (auto it = shapes_.find(name); it != shapes_.end()) alias.dims = it->second;
  values_[name] = std::move(alias);
}

void Importer::define_constant(std::size_t output, ConstantData data) {
  const std::string name = node_->output(static_cast<int>(output));
  ValueState& v = values_[name];
  v.name = name;
  v.dims = data.dims;
  v.constant = std::make_shared<const ConstantData>(std::move(data));
}

void Importer::define_pad(std::size_t output, TensorId tensor, PendingPad pad) {
  define(output, tensor);
  values_[node_->output(static_cast<int>(output))].pad = pad;
}

const onnx::AttributeProto* Importer::attribute(const char* name) const {
  for (const auto& a : node_->attribute()) {
    if (a.name() == name) return &a;
  }
  return nullptr;
}

std::int64_t Importer::int_attribute(const char* name, std::int64_t fallback) const {
  const auto* a = attribute(name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto::INT) invalid(fmt::format("attribute {} is not an int", name));
  return a->i();
}

float Importer::float_attribute(const char* name, float fallback) const {
  const auto* a = attribute(name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto::FLOAT) invalid(fmt::format("attribute {} is not a float", name));
  return a->f();
}

std::string Importer::string_attribute(const char* name, const std::string& fallback) const {
  const auto* a = attribute(name);
  if (a == nullptr) return fallback;
  if (a->type() != onnx::AttributeProto::STRING) invalid(fmt::format("attribute {} is not a string", name));
  return a->s();
}

std::vector<std::int64_t> Importer::ints_attribute(const char* name) const {
  const auto* a = attribute(name);
  if (a == nullptr) return {};
  if (a->type() != onnx::AttributeProto::INTS) invalid(fmt::format("attribute {} is not a list of ints", name));
  return {a->ints().begin(), a->ints().end()};
}

void Importer::known_attributes(std::initializer_list<const char*> known) const {
  for (const auto& a : node_->attribute()) {
    if (std::none_of(known.begin(), known.end(), [&](const char* k) { return a.name() == k; })) {
      unsupported(fmt::format("attribute {} is not supported (known here: {})", a.name(),
                              fmt::join(known, ", ")));
    }
  }
}

void Importer::bind_inputs() {
  onnx::GraphProto& g = *shaped_.mutable_graph();
  std::map<std::string, bool> initializer;
  for (const auto& t : g.initializer()) initializer[t.name()] = true;
  // Which given array each graph input gets: by name, else the next unnamed one in order.
  std::map<std::string, int> named;
  std::vector<int> positional;
  for (std::size_t i = 0; i < options_.given_inputs.size(); ++i) {
    const std::string& name = options_.given_inputs[i].name;
    if (name.empty()) {
      positional.push_back(static_cast<int>(i));
    } else if (!named.emplace(name, static_cast<int>(i)).second) {
      throw ImportError(StatusCode::invalid_argument,
                        fmt::format("input '{}' is given twice", name));
    }
  }
  std::size_t next_positional = 0;
  for (auto& input : *g.mutable_input()) {
    if (initializer.count(input.name())) continue;  // IR < 4 lists initializers as inputs too
    int given = -1;
    if (auto it = named.find(input.name()); it != named.end()) {
      given = it->second;
      named.erase(it);
    } else if (next_positional < positional.size()) {
      given = positional[next_positional++];
    }
    const HostTensor* value =
        given >= 0 ? &options_.given_inputs[static_cast<std::size_t>(given)].value : nullptr;
    const std::string what = fmt::format("graph input '{}'", input.name());
    if (!input.type().has_tensor_type()) {
      throw ImportError(StatusCode::unsupported, what + " is not a tensor");
    }
    auto* tensor_type = input.mutable_type()->mutable_tensor_type();
    const int elem_type = tensor_type->elem_type();
    const bool integer_type =
        elem_type == onnx::TensorProto::INT64 || elem_type == onnx::TensorProto::BOOL;
    if (value != nullptr && value->integer != integer_type) {
      throw ImportError(StatusCode::invalid_argument,
                        fmt::format("{} is {}, but the given array is {}", what,
                                    data_type_name(elem_type),
                                    value->integer ? "integer" : "float32"));
    }
    // Integer inputs (shapes, axes, pads, flags) are accepted when given: they are constants then.
    if (elem_type != onnx::TensorProto::FLOAT && !(integer_type && value != nullptr)) {
      throw ImportError(StatusCode::unsupported,
                        fmt::format("{} is {}; the engine computes in float32", what,
                                    data_type_name(tensor_type->elem_type())));
    }
    if (!tensor_type->has_shape()) {
      throw ImportError(StatusCode::invalid_argument, what + " has no shape (not even a rank)");
    }
    auto* shape = tensor_type->mutable_shape();
    const Dims declared = [&] {
      Dims d;
      for (const auto& dim : shape->dim()) d.push_back(dim.has_dim_value() ? dim.dim_value() : -1);
      return d;
    }();
    const std::string declared_text = fmt::format("{}", fmt::join(declared, "x"));
    if (value != nullptr && value->dims.size() != declared.size()) {
      throw ImportError(StatusCode::invalid_argument,
                        fmt::format("{} has rank {} ({}; -1 is dynamic), but the given array is {}",
                                    what, declared.size(), declared_text, dims_text(value->dims)));
    }
    Dims dims;
    for (int i = 0; i < shape->dim_size(); ++i) {
      auto* d = shape->mutable_dim(i);
      std::optional<std::int64_t> bound;
      if (value != nullptr) {
        bound = value->dims[static_cast<std::size_t>(i)];
      } else if (static_cast<std::size_t>(i) == batch_axis) {
        bound = options_.batch_size;
      }
      if (d->has_dim_value()) {
        if (bound && *bound != d->dim_value()) {
          throw ImportError(StatusCode::invalid_argument,
                            fmt::format("{} has shape {} with a fixed dimension {} of {}, but {} "
                                        "was given",
                                        what, declared_text, i, d->dim_value(), *bound));
        }
        dims.push_back(d->dim_value());
        continue;
      }
      if (!bound) {
        throw ImportError(
            StatusCode::invalid_argument,
            fmt::format("{} has a dynamic dimension {} ('{}'){}", what, i, d->dim_param(),
                        i == 0 ? ": give the batch size" : ": only the batch dimension may be "
                                                           "dynamic, or give the input"));
      }
      if (*bound < 1) {
        throw ImportError(StatusCode::invalid_argument,
                          fmt::format("{}: dimension {} bound to {}", what, i, *bound));
      }
      d->clear_dim_param();
      d->set_dim_value(*bound);
      dims.push_back(*bound);
    }
    const std::int64_t elements = checked_elements(dims, what);
    ValueState v;
    v.name = input.name();
    v.dims = dims;
    v.graph_input = true;
    v.input_name = v.name;
    v.given = given;
    if (value != nullptr) {
      const std::size_t held = value->integer ? value->ints.size() : value->data.size();
      if (static_cast<std::int64_t>(held) != elements) {
        throw ImportError(StatusCode::invalid_argument,
                          fmt::format("{}: the given array holds {} values for shape {}", what,
                                      held, dims_text(dims)));
      }
      auto c = std::make_shared<ConstantData>();
      c->dims = dims;
      c->floats = value->data;
      c->is_int = value->integer;
      c->ints = value->ints;
      if (integer_type) {
        // ONNX's shape inference sees it as an initializer, so that a Reshape's or a Squeeze's
        // output shape is known.
        onnx::TensorProto* t = g.add_initializer();
        t->set_name(input.name());
        t->set_data_type(elem_type);
        for (std::int64_t d : dims) t->add_dims(d);
        for (std::int64_t x : value->ints) {
          if (elem_type == onnx::TensorProto::BOOL) {
            t->add_int32_data(x != 0 ? 1 : 0);
          } else {
            t->add_int64_data(x);
          }
        }
        v.graph_input = false;  // never data: a constant only
      }
      v.constant = std::move(c);
    }
    values_[v.name] = std::move(v);
  }
  if (!named.empty()) {
    throw ImportError(StatusCode::invalid_argument,
                      fmt::format("the model has no input '{}'", named.begin()->first));
  }
  if (next_positional < positional.size()) {
    throw ImportError(StatusCode::invalid_argument,
                      fmt::format("{} arrays given, but the model has only {} inputs to take them",
                                  options_.given_inputs.size(),
                                  options_.given_inputs.size() - (positional.size() - next_positional)));
  }
}

void Importer::load_initializers() {
  for (const auto& t : model_.graph().initializer()) {
    ValueState v;
    v.name = t.name();
    auto data = std::make_shared<ConstantData>(
        read_tensor(t, model_dir_, fmt::format("initializer '{}'", t.name())));
    v.dims = data->dims;
    v.constant = std::move(data);
    values_[v.name] = std::move(v);  // an initializer overrides the input of the same name
  }
}

void Importer::infer_shapes() {
  try {
    onnx::ShapeInferenceOptions options(/*check_type=*/false, /*strict_mode=*/1,
                                        /*data_prop=*/false);
    const CheckedSchemas schemas;
    onnx::shape_inference::InferShapes(shaped_, &schemas, options);
  } catch (const std::exception& error) {
    throw ImportError(StatusCode::invalid_argument,
                      fmt::format("ONNX shape inference failed: {}", error.what()));
  }
  const auto record = [&](const onnx::ValueInfoProto& info) {
    if (values_.count(info.name())) return;  // inputs and initializers: their own shapes
    if (const auto dims = known_dims(info.type())) {
      checked_elements(*dims, fmt::format("value '{}'", info.name()));
      shapes_[info.name()] = *dims;
    }
  };
  for (const auto& info : shaped_.graph().value_info()) record(info);
  for (const auto& info : shaped_.graph().output()) record(info);
}

void Importer::run(ImportedModel* out) {
  for (const auto& o : model_.opset_import()) {
    if (is_default_domain(o.domain())) opset_ = o.version();
  }
  // Every operator is known before anything else is looked at: a model with an unsupported one
  // is refused for that, whatever else is wrong with it.
  for (const auto& n : model_.graph().node()) {
    node_ = &n;
    if (!is_default_domain(n.domain())) {
      unsupported(fmt::format("domain '{}' is not supported (only ai.onnx operators: {})",
                              n.domain(), fmt::join(converter_names(), ", ")));
    }
    if (find_converter(n.op_type()) == nullptr) {
      unsupported(fmt::format("operator {} is not supported (supported: {})", n.op_type(),
                              fmt::join(converter_names(), ", ")));
    }
    // ONNX's shape inference (convolution, pooling) divides by these unchecked: a zero stride
    // would end the process with SIGFPE. The converters check them too, after it.
    for (const auto& a : n.attribute()) {
      if ((a.name() == "strides" || a.name() == "dilations" || a.name() == "kernel_shape") &&
          std::any_of(a.ints().begin(), a.ints().end(), [](std::int64_t x) { return x < 1; })) {
        invalid(fmt::format("{} [{}] must be at least 1", a.name(), fmt::join(a.ints(), ", ")));
      }
      if (a.name() == "auto_pad" && a.s() != "NOTSET" && a.s() != "SAME_UPPER" &&
          a.s() != "SAME_LOWER" && a.s() != "VALID") {
        invalid(fmt::format("auto_pad '{}' is not one of NOTSET, SAME_UPPER, SAME_LOWER, VALID",
                            a.s()));
      }
    }
  }
  node_ = nullptr;
  if (opset_ == 0) {
    throw ImportError(StatusCode::invalid_argument,
                      "the model imports no opset of the default (ai.onnx) domain");
  }
  // The importer's own checks of the initializers first (sizes, types, external data that must
  // stay in the model's folder): their messages say more than the checker's about the same
  // problems, and the checker multiplies huge dimensions without an overflow check.
  load_initializers();
  try {
    // check_model(ModelProto) looks for external data files relative to the current directory;
    // check_model(path) relative to the model's folder (it parses the file again: only then).
    if (has_external_data(model_.graph())) {
      onnx::checker::check_model(model_path_);
    } else {
      onnx::checker::check_model(model_);
    }
  } catch (const std::exception& error) {
    throw ImportError(StatusCode::invalid_argument,
                      fmt::format("ONNX's checker refuses the model: {}", error.what()));
  }
  shaped_ = model_;
  bind_inputs();
  infer_shapes();

  const onnx::GraphProto& g = model_.graph();
  for (const auto& n : g.node()) {
    for (const auto& name : n.input()) ++uses_[name];
  }
  for (const auto& o : g.output()) ++uses_[o.name()];

  for (const auto& n : g.node()) {
    node_ = &n;
    const Converter convert = find_converter(n.op_type());
    for (const auto& name : n.input()) {
      if (!name.empty()) value(name);  // exists, else a clear error
    }
    // Outputs get their inferred shapes before the converter reads them.
    for (const auto& name : n.output()) {
      if (name.empty()) continue;
      if (values_.count(name)) invalid(fmt::format("output '{}' is produced twice", name));
      ValueState v;
      v.name = name;
      if (auto it = shapes_.find(name); it != shapes_.end()) v.dims = it->second;
      values_[name] = std::move(v);
    }
    convert(*this);
    for (const auto& name : n.output()) producer_op_[name] = n.op_type();
    ++out->nodes;
  }
  node_ = nullptr;

  std::map<std::string, bool> initializer;
  for (const auto& t : g.initializer()) initializer[t.name()] = true;
  for (const auto& input : g.input()) {
    if (initializer.count(input.name())) continue;
    const ValueState& v = values_.at(input.name());
    if (v.tensor) out->inputs.push_back({v.name, v.dims, *v.tensor, v.given});
  }
  for (const auto& o : g.output()) {
    auto it = values_.find(o.name());
    if (it == values_.end()) {
      throw ImportError(StatusCode::invalid_argument,
                        fmt::format("graph output '{}' is produced by no node", o.name()));
    }
    const ValueState& v = it->second;
    if (!v.tensor || v.graph_input || v.pad) {
      throw ImportError(StatusCode::unsupported,
                        fmt::format("graph output '{}' is {}; the engine's outputs are computed "
                                    "by its nodes",
                                    o.name(),
                                    v.graph_input ? "a graph input" : v.pad ? "a Pad's output" : "a constant"));
    }
    TensorId tensor = *v.tensor;
    if (options_.append_softmax) {
      if (g.output_size() != 1 || v.dims.size() != 2) {
        throw ImportError(StatusCode::unsupported,
                          fmt::format("training needs a classifier: one output of shape N x "
                                      "classes, but the model has {} output(s), '{}' of shape {}",
                                      g.output_size(), o.name(), dims_text(v.dims)));
      }
      if (producer_op_[o.name()] != "Softmax") tensor = graph_.softmax(tensor, o.name() + ":softmax");
    }
    graph_.output(tensor, o.name());
    out->outputs.push_back({o.name(), v.dims, tensor, -1});
  }
  out->opset = opset_;
  out->producer = model_.producer_version().empty()
                      ? model_.producer_name()
                      : fmt::format("{} {}", model_.producer_name(), model_.producer_version());
  out->graph = std::move(graph_);
}

}  // namespace onnx_import

Status import_onnx(const std::string& path, const OnnxImportOptions& options,
                   ImportedModel* model) {
  using namespace onnx_import;
  if (model == nullptr) return {StatusCode::invalid_argument, "import_onnx: model is null"};
  try {
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    if (ec) return {StatusCode::invalid_argument, fmt::format("{}: {}", path, ec.message())};
    if (size > options.max_model_bytes) {
      return {StatusCode::invalid_argument,
              fmt::format("{}: {} bytes, more than the {} an ONNX file may hold (put large "
                          "weights in external data)",
                          path, size, options.max_model_bytes)};
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) return {StatusCode::invalid_argument, fmt::format("{}: cannot open", path)};
    onnx::ModelProto proto;
    if (!proto.ParseFromIstream(&in)) {
      return {StatusCode::invalid_argument,
              fmt::format("{}: not an ONNX model (protobuf parsing failed: truncated or another "
                          "format)",
                          path)};
    }
    if (!proto.has_graph()) {
      return {StatusCode::invalid_argument, fmt::format("{}: an ONNX model without a graph", path)};
    }
    ImportedModel result;
    Importer importer(proto, options, path);
    importer.run(&result);
    *model = std::move(result);
    return {};
  } catch (const ImportError& error) {
    return {error.code, fmt::format("{}: {}", path, error.what())};
  } catch (const std::exception& error) {
    return {StatusCode::invalid_argument, fmt::format("{}: {}", path, error.what())};
  }
}

}  // namespace tfpin::engine
