// Whole-file outputs (infer's .npy arrays, bench's --trace_file, tune's --plot), written so that a
// failed or refused run never damages what the path held: a regular file of the user's (or a path
// not there yet) is written to a new temporary file beside the file the path names and renamed
// over it only when complete. Written in place instead, opened once: the file this process's
// stdout or stderr is (/dev/stdout, or the file a shell redirected into: through that very
// descriptor), devices and FIFOs, paths through /dev or /proc, and regular files whose owner or
// hard links must stay. Nothing this run did not create is ever removed.
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
    std::string target;  // what is replaced: the file the path names through its links
    std::string temp;    // the temporary file; empty for an output written in place
    std::string bytes;   // in place: the bytes, written at commit
    int fd = -1;         // in place: stdout or stderr itself; -1: open the path
    bool truncate = false;  // in place: a regular file
  };
  std::vector<Staged> staged_;
};

// One output on its own: stage and commit.
void write_output_file(const std::string& path, std::string bytes);

}  // namespace tfpin::cli
