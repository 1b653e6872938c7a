// Errors raised by the placement library. Callers at a C boundary (the SPANK plugin) catch them;
// the message is always complete enough to show to a user as is.
#pragma once

#include <stdexcept>
#include <string>

namespace tfpin {

enum class ErrorKind {
  invalid_request,  // a user or site value is wrong: the message names it and what is valid
  topology,         // the machine description could not be loaded
  system,           // a system call failed (binding, memory policy)
};

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  [[nodiscard]] ErrorKind kind() const noexcept { return kind_; }

 private:
  ErrorKind kind_;
};

}  // namespace tfpin
