// Whole-file outputs (infer's .npy arrays, bench's --trace_file, tune's --plot), written so that a
// failed or refused run never damages what the path held: a regular file (or a path not there yet)
// is written to a new temporary file in the same directory and renamed over the path only when
// complete; a device, FIFO or socket (/dev/stdout, a named pipe) is opened once and written in
// place. Nothing this run did not create is ever removed or truncated.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace tfpin::cli {

// Why `path` cannot take an output ("" when it can), found without opening it: an early check that
// neither truncates an existing file nor opens a FIFO its reader would then see close.
std::string output_unwritable(const std::string& path);

class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  // Removes the temporary files of outputs never committed.
  ~OutputFiles();

  // Writes `bytes` for `path`: a regular file's temporary file now, a device's bytes kept for
  // commit(). Throws tfpin::Error(system) naming the path; the path itself is untouched.
  void stage(const std::string& path, std::string bytes);
  // Writes the devices, then renames every temporary file over its path. Throws
  // tfpin::Error(system) naming the path that failed.
  void commit();

 private:
  struct Staged {
    std::string path;    // as given (for messages)
    std::string target;  // what is replaced: the path, or the file a link names
    std::string temp;    // the temporary file; empty for a device written in place
    std::string bytes;   // a device's bytes
  };
  std::vector<Staged> staged_;
};

// One output on its own: stage and commit.
void write_output_file(const std::string& path, std::string bytes);

}  // namespace tfpin::cli
