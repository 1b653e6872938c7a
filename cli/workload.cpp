// The workload options of `tfpin bench` and `tfpin tune`, checked, and the graph they name.
#include "workload.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "commands.hpp"
#include "tfpin/cpulist.hpp"
#ifdef TFPIN_HAVE_ONNX
#include "tfpin/engine/onnx.hpp"
#endif
#include "tfpin/error.hpp"
#include "tfpin/options.hpp"

namespace tfpin::cli {

ModelChoice model_option(const std::string& text) {
  if (text.ends_with(".onnx")) {
#ifdef TFPIN_HAVE_ONNX
    std::ifstream file(text, std::ios::binary);
    if (!file || std::filesystem::is_directory(text)) {
      usage_error(
          fmt::format("--model={}: cannot read the ONNX file ({}) (valid: a model of the "
                      "zoo, or a readable .onnx file)",
                      shown_value(text), std::strerror(errno)));
    }
    return {std::nullopt, text};
#else
    usage_error(
        fmt::format("--model={}: this tfpin was built without ONNX import (libonnx-dev "
                    "was not found at build time) (valid: {})",
                    shown_value(text), fmt::join(engine::model_names(), ", ")));
#endif
  }
  const auto model = engine::parse_model(text);
  if (!model) {
    usage_error(
        fmt::format("--model={} is not a model of the zoo (valid: {}) nor an ONNX file "
                    "(a name ending in .onnx)",
                    shown_value(text), fmt::join(engine::model_names(), ", ")));
  }
  return {*model, {}};
}

engine::Graph workload_graph(const ModelChoice& model, unsigned batch, engine::Layout layout,
                             bool training) {
  if (model.zoo) return engine::build_model(*model.zoo, batch, layout);
#ifdef TFPIN_HAVE_ONNX
  engine::OnnxImportOptions options;
  options.batch_size = batch;
  options.append_softmax = training;
  engine::ImportedModel imported;
  const engine::Status status = engine::import_onnx(model.onnx, options, &imported);
  if (!status.ok()) {
    // The model's names and ONNX's messages escaped: one printable line.
    usage_error(fmt::format("--model={} (--batch_size={}{}): {}", shown_value(model.onnx), batch,
                            training ? ", training" : ", --forward_only",
                            shown_value(status.message(), status.message().size())));
  }
  if (imported.inputs.size() != 1 || imported.outputs.size() != 1) {
    usage_error(
        fmt::format("--model={}: bench feeds one input (synthetic images) and reads one "
                    "output, but the model has {} input(s) and {} output(s)",
                    model.onnx, imported.inputs.size(), imported.outputs.size()));
  }
  return std::move(imported.graph);
#else
  (void)batch;
  (void)layout;
  (void)training;
  usage_error("--model: built without ONNX import");
#endif
}

engine::Layout data_format_option(const std::string& text) {
  const auto layout = engine::parse_layout(text);
  if (!layout) {
    usage_error(
        fmt::format("--data_format={} is not a layout (valid: NHWC, NCHW)", shown_value(text)));
  }
  return *layout;
}

std::string lanes_text(const std::vector<std::vector<unsigned>>& lanes) {
  std::vector<std::string> texts;
  for (const auto& cpus : lanes) texts.push_back(format_cpulist(cpus));
  return fmt::format("{}", fmt::join(texts, " | "));
}

void add_workload_options(CLI::App& sub, WorkloadOptions& workload) {
  sub.add_option("--model", workload.model,
                 fmt::format("{}, or an ONNX file M.onnx", fmt::join(engine::model_names(), "|")))
      ->type_name("NAME|M.onnx");
  sub.add_option("--data_format", workload.data_format, "layout of the input images: NHWC|NCHW")
      ->type_name("NHWC|NCHW");
  sub.add_flag("--forward_only", workload.forward_only,
               "inference only (default: training steps: forward, backward, SGD update)");
}

engine::CompileOptions engine_options(const ThreadSettings& threads) {
  engine::CompileOptions options;
  options.lanes = threads.lanes;
  options.intra = threads.intra;
  options.lane_cpus = threads.lane_cpus;
  return options;
}

}  // namespace tfpin::cli
