// Every line the plugin logs goes through here: slurmd's log is root's, and a user's value must not
// be able to forge a line of it.
#pragma once

#include <string>
#include <string_view>

namespace tfpin::plugin {

// `text` as one printable-ASCII line (tfpin::shown_value, whole): \n and \t as such, other bytes
// below 0x20, 0x7f and bytes from 0x80 as \xNN; a backslash stays, so values the library already
// escaped are unchanged.
std::string log_safe(std::string_view text);

// One line, prefixed "tfpin: ", to the Slurm log (which reaches the user in sbatch/srun and in a
// task). report_warning also prints to the task's stderr in the remote context.
void report_error(const std::string& message);
void report_warning(const std::string& message);

}  // namespace tfpin::plugin
