// `tfpin infer`: run an ONNX model once on the engine, NumPy arrays in and out, under the thread
// plan (flags, TF_*/OMP_* variables, the TFPIN_* plan handed over, or this process's cores).
#pragma once

#include <string>
#include <vector>

#include "cli_fwd.hpp"

namespace tfpin::cli {

struct InferCommand {
  std::string model;
  std::vector<std::string> inputs;   // "FILE.npy" (the next input in ONNX order) or "NAME=FILE.npy"
  std::vector<std::string> outputs;  // the same for the outputs
  std::string threads;               // total threads (the plan's --threads meaning)
  std::string interop;               // lanes
  CLI::Option* threads_option = nullptr;
  CLI::Option* interop_option = nullptr;
  bool json = false;
  int operator()() const;
};

CLI::App* add_infer_command(CLI::App& app, InferCommand& infer);

}  // namespace tfpin::cli
