#pragma once

namespace tfpin::cli {

// Exit codes: the program's own for `run`; these for tfpin itself.
inline constexpr int exit_usage = 2;      // bad arguments, impossible plan
inline constexpr int exit_failure = 1;    // the system refused (binding, topology)
inline constexpr int exit_cannot_exec = 126;
inline constexpr int exit_not_found = 127;

}  // namespace tfpin::cli
