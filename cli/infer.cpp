#include "infer.hpp"

#include <CLI/CLI.hpp>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <chrono>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "npy.hpp"
#include "output_file.hpp"
#include "threads.hpp"
#include "tfpin/engine/onnx.hpp"
#include "tfpin/engine/runtime.hpp"
#include "tfpin/options.hpp"
#include "workload.hpp"

namespace tfpin::cli {

namespace {

// A message as one printable line: the bytes of the model's names and of paths in it escaped.
std::string line(const std::string& message) { return shown_value(message, message.size()); }

struct Binding {
  std::string name;  // empty: by position
  std::string path;
};

Binding binding(const std::string& flag, const std::string& text) {
  if (text.empty()) usage_error(fmt::format("{} '': give FILE.npy or NAME=FILE.npy", flag));
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos) return {"", text};
  if (eq == 0 || eq + 1 == text.size()) {
    usage_error(fmt::format("{}={}: give FILE.npy or NAME=FILE.npy", flag, shown_value(text)));
  }
  return {text.substr(0, eq), text.substr(eq + 1)};
}

// Each ONNX output's file: named ones, then the unnamed in order over the outputs not named.
std::map<std::string, std::string> output_files(const std::vector<Binding>& bindings,
                                                const engine::ImportedModel& model) {
  std::map<std::string, std::string> files;
  std::vector<std::string> positional;
  for (const Binding& b : bindings) {
    if (b.name.empty()) {
      positional.push_back(b.path);
      continue;
    }
    const bool known = std::any_of(model.outputs.begin(), model.outputs.end(),
                                   [&](const auto& o) { return o.name == b.name; });
    if (!known) {
      std::vector<std::string> names;
      for (const auto& o : model.outputs) names.push_back(o.name);
      usage_error(line(fmt::format("--output {}={}: the model has no output '{}' (its outputs: {})",
                                   shown_value(b.name), shown_value(b.path), shown_value(b.name),
                                   fmt::join(names, ", "))));
    }
    if (!files.emplace(b.name, b.path).second) {
      usage_error(fmt::format("--output: output '{}' is given twice", shown_value(b.name)));
    }
  }
  std::size_t next = 0;
  for (const auto& o : model.outputs) {
    if (next < positional.size() && !files.count(o.name)) files[o.name] = positional[next++];
  }
  if (next < positional.size()) {
    usage_error(fmt::format("--output: {} files given, but the model has {} outputs",
                            bindings.size(), model.outputs.size()));
  }
  return files;
}

}  // namespace

int InferCommand::operator()() const {
  using Clock = std::chrono::steady_clock;
  if (model.empty()) usage_error("--model: give the ONNX file (--model M.onnx)");
  if (outputs.empty()) usage_error("--output: give at least one FILE.npy (or NAME=FILE.npy)");
  ThreadRequest request;
  request.intra_flag = "--threads";
  request.inter_flag = "--interop";
  if (interop_option != nullptr && interop_option->count() > 0) {
    request.inter = parse_count("--interop", interop, max_count);
  }
  if (threads_option != nullptr && threads_option->count() > 0) {
    const unsigned total = parse_count("--threads", threads, max_count);
    const unsigned lanes = request.inter.value_or(1);
    if (total % lanes != 0) {
      usage_error(fmt::format("--threads={} is not a multiple of --interop={} (each inter-op lane "
                              "gets threads/interop cores)",
                              total, lanes));
    }
    request.intra = total / lanes;
  }
  const ThreadSettings threads_used = resolve_threads(request, process_getenv);

  engine::OnnxImportOptions options;
  for (const std::string& text : inputs) {
    const Binding b = binding("--input", text);
    try {
      options.given_inputs.push_back({b.name, read_npy(b.path)});
    } catch (const Error& e) {
      // The file's own message (it names the file and what is wrong), with the option and what
      // is valid.
      usage_error(fmt::format("--input {}: {} (valid: a NumPy .npy file of float32, or of int64 "
                              "or bool for inputs that are shapes, axes or flags)",
                              shown_value(text), e.what()));
    }
  }
  std::vector<Binding> output_bindings;
  for (const std::string& text : outputs) output_bindings.push_back(binding("--output", text));

  const auto start = Clock::now();
  engine::ImportedModel imported;
  engine::Status status = engine::import_onnx(model, options, &imported);
  if (!status.ok()) {
    fmt::print(stderr, "tfpin infer: {}\n", line(status.message()));
    return status.code() == engine::StatusCode::unsupported ||
                   status.code() == engine::StatusCode::invalid_argument
               ? exit_usage
               : exit_failure;
  }
  for (const auto& input : imported.inputs) {
    if (input.given < 0) {
      usage_error(line(fmt::format("--input: the model's input '{}' ({}) is not given (--input "
                                   "{}=FILE.npy)",
                                   input.name, fmt::join(input.dims, "x"), input.name)));
    }
  }
  const std::map<std::string, std::string> files = output_files(output_bindings, imported);
  const auto imported_at = Clock::now();

  const engine::CompileOptions compile = engine_options(threads_used);
  std::unique_ptr<engine::Runtime> runtime;
  status = engine::Runtime::create(imported.graph, compile, &runtime);
  if (!status.ok()) {
    fmt::print(stderr, "tfpin infer: {}: {}\n", shown_value(model), line(status.to_string()));
    return status.code() == engine::StatusCode::out_of_memory ||
                   status.code() == engine::StatusCode::runtime_error
               ? exit_failure
               : exit_usage;
  }
  const auto compiled_at = Clock::now();

  std::vector<engine::ExternalInput> feeds;
  for (const auto& input : imported.inputs) {
    feeds.push_back({input.name,
                     options.given_inputs[static_cast<std::size_t>(input.given)].value.data.data()});
  }
  std::vector<std::vector<float>> results;
  std::vector<engine::ExternalOutput> fetches;
  for (const auto& output : imported.outputs) {
    std::size_t n = 1;
    for (std::int64_t d : output.dims) n *= static_cast<std::size_t>(d);
    results.emplace_back(n);
  }
  for (std::size_t i = 0; i < imported.outputs.size(); ++i) {
    fetches.push_back({imported.outputs[i].name, results[i].data()});
  }
  status = runtime->setup(feeds, fetches);
  if (status.ok()) status = runtime->run();
  if (!status.ok()) {
    fmt::print(stderr, "tfpin infer: {}: {}\n", shown_value(model), line(status.to_string()));
    return exit_failure;
  }
  const auto ran_at = Clock::now();

  // All the outputs or none: each is written to a temporary file first, and only when all are
  // complete are they renamed into place; a failure removes the temporary files, never a path.
  nlohmann::json written = nlohmann::json::array();
  OutputFiles staged;
  for (std::size_t i = 0; i < imported.outputs.size(); ++i) {
    const auto& output = imported.outputs[i];
    const auto file = files.find(output.name);
    if (file == files.end()) continue;
    staged.stage(file->second, format_npy(output.dims, results[i].data()));
    written.push_back({{"name", output.name}, {"dims", output.dims}, {"file", file->second}});
  }
  staged.commit();
  const auto seconds = [](Clock::duration d) { return std::chrono::duration<double>(d).count(); };
  if (json) {
    nlohmann::json in = nlohmann::json::array();
    for (const auto& input : imported.inputs) in.push_back({{"name", input.name}, {"dims", input.dims}});
    nlohmann::json out = {
        {"model", model},
        {"opset", imported.opset},
        {"producer", imported.producer},
        {"nodes", imported.nodes},
        {"inputs", in},
        {"outputs", written},
        {"inter", threads_used.lanes},
        {"intra", threads_used.intra},
        {"lanes", threads_used.lane_cpus},
        {"import_seconds", seconds(imported_at - start)},
        {"compile_seconds", seconds(compiled_at - imported_at)},
        {"run_seconds", seconds(ran_at - compiled_at)},
        {"steps", runtime->report().steps},
        {"reorders", runtime->report().reorders},
    };
    fmt::print("{}\n", out.dump(2));
  } else {
    for (const auto& w : written) {
      fmt::print("{}: {} -> {}\n", w["name"].get<std::string>(),
                 fmt::join(w["dims"].get<std::vector<std::int64_t>>(), "x"),
                 w["file"].get<std::string>());
    }
    fmt::print(stderr, "tfpin infer: {} ONNX nodes (opset {}) in {} engine steps; {} lane(s) x {} "
                       "thread(s); import {:.3f} s, compile {:.3f} s, run {:.3f} s\n",
               imported.nodes, imported.opset, runtime->report().steps, threads_used.lanes,
               threads_used.intra, seconds(imported_at - start), seconds(compiled_at - imported_at),
               seconds(ran_at - compiled_at));
  }
  return 0;
}

CLI::App* add_infer_command(CLI::App& app, InferCommand& infer) {
  CLI::App* sub = app.add_subcommand(
      "infer", "run an ONNX model once on the engine: NumPy .npy float32 arrays in and out");
  sub->add_option("--model", infer.model, "the ONNX model file")->type_name("M.onnx");
  sub->add_option("--input", infer.inputs,
                  "an input array: FILE.npy for the next model input in order, or NAME=FILE.npy "
                  "(repeat for each input)")
      ->type_name("[NAME=]FILE.npy");
  sub->add_option("--output", infer.outputs,
                  "where an output goes: FILE.npy for the next model output in order, or "
                  "NAME=FILE.npy (repeat)")
      ->type_name("[NAME=]FILE.npy");
  infer.threads_option =
      sub->add_option("--threads", infer.threads,
                      "threads in all (one per core; default: the plan's, else every core this "
                      "process may use)")
          ->type_name("N");
  infer.interop_option =
      sub->add_option("--interop", infer.interop, "inter-op lanes, each threads/interop cores "
                                                  "(default: the plan's, else 1)")
          ->type_name("M");
  sub->add_flag("--json", infer.json, "print what was run and written as JSON");
  return sub;
}

}  // namespace tfpin::cli
