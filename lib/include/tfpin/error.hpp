// Errors raised by the placement library. Callers at a C boundary (the SPANK plugin) catch them;
// the message is always complete enough to show to a user as is.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

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

// A user's value as a message shows it: control and non-ASCII bytes escaped (\n, \t, \xff), so
// that a value cannot forge a line of a log, and at most `max_bytes` of it, so that a 100 KB list
// does not flood one ("...(98001 bytes)"). A backslash stays: text escaped once stays as it is.
std::string shown_value(std::string_view value, std::size_t max_bytes = 96);

}  // namespace tfpin
