// Status and its codes as text (tfpin/engine/status.hpp): every public entry point returns one.
#include "tfpin/engine/status.hpp"

#include <fmt/format.h>

namespace tfpin::engine {

const char* to_string(StatusCode code) {
  switch (code) {
    case StatusCode::ok:
      return "ok";
    case StatusCode::invalid_argument:
      return "invalid argument";
    case StatusCode::invalid_state:
      return "invalid state";
    case StatusCode::invalid_graph:
      return "invalid graph";
    case StatusCode::unsupported:
      return "unsupported";
    case StatusCode::out_of_memory:
      return "out of memory";
    case StatusCode::runtime_error:
      return "runtime error";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return fmt::format("{}: {}", engine::to_string(code_), message_);
}

}  // namespace tfpin::engine
