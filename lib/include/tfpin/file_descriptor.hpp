// A descriptor closed on scope exit, and a path split into its components: what code that walks a
// path one component at a time with *at calls needs (topology cache, ONNX external data).
// Header-only: the engine uses it without linking tfpin's core library.
#pragma once

#include <unistd.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tfpin {

class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0) ::close(fd_);
  }
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  FileDescriptor& operator=(FileDescriptor&& other) noexcept {
    if (this != &other) {
      if (fd_ >= 0) ::close(fd_);
      fd_ = std::exchange(other.fd_, -1);
    }
    return *this;
  }
  [[nodiscard]] int get() const { return fd_; }

 private:
  int fd_;
};

// Appends the components of `path` to `todo` in reverse order, so that the next one to walk is
// todo.back() (a link's target is pushed the same way, in front of what remained). Empty and "."
// components name nothing and are left out: the last one pushed is the last one walked.
inline void push_path_components(std::string_view path, std::vector<std::string>& todo) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    const std::string_view part = path.substr(start, end - start);
    if (!part.empty() && part != ".") parts.emplace_back(part);
    start = end + 1;
  }
  todo.insert(todo.end(), parts.rbegin(), parts.rend());
}

}  // namespace tfpin
