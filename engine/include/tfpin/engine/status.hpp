// Status codes returned by the engine's public entry points (Runtime::create -> setup -> run), in
// the manner of XNNPACK: nothing throws across them; a failed call returns a code and a message
// that names what was wrong (the node, the tensor, the value and what would be valid).
#pragma once

#include <string>
#include <utility>

namespace tfpin::engine {

enum class StatusCode {
  ok = 0,
  invalid_argument,  // a call was given a bad value (unknown input name, null buffer, zero
                     // lanes...)
  invalid_state,     // a call out of order: run before a successful setup
  invalid_graph,     // the graph is wrong: unknown tensor, shape mismatch, bad attribute
  unsupported,       // valid, but this engine (or oneDNN on this CPU) cannot do it
  out_of_memory,     // the planned memory does not fit (or an allocation failed)
  runtime_error,     // a primitive failed while running, or a thread could not be set up
};

const char* to_string(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}
  static Status success() { return {}; }

  [[nodiscard]] bool ok() const { return code_ == StatusCode::ok; }
  [[nodiscard]] StatusCode code() const { return code_; }
  [[nodiscard]] const std::string& message() const { return message_; }
  // "invalid graph: node 'conv1' (convolution): ..."
  [[nodiscard]] std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::ok;
  std::string message_;
};

}  // namespace tfpin::engine
