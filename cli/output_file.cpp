#include "output_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "tfpin/error.hpp"

namespace tfpin::cli {
namespace {

[[noreturn]] void fail(const std::string& path, const std::string& why) {
  throw Error(ErrorKind::system, fmt::format("{}: cannot write: {}", path, why));
}

std::string directory_of(const std::string& path) {
  const std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

bool write_all(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n == 0) errno = EIO;
      return false;
    }
    bytes.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

}  // namespace

std::string output_unwritable(const std::string& path) {
  if (path.empty()) return "an empty path";
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) return std::strerror(EISDIR);
    // A regular file is replaced by a new one: its directory must take it.
    const std::string where = S_ISREG(st.st_mode) ? directory_of(path) : path;
    if (::access(where.c_str(), S_ISREG(st.st_mode) ? W_OK | X_OK : W_OK) != 0) {
      return std::strerror(errno);
    }
    return "";
  }
  if (errno != ENOENT) return std::strerror(errno);
  if (::access(directory_of(path).c_str(), W_OK | X_OK) != 0) return std::strerror(errno);
  return "";
}

OutputFiles::~OutputFiles() {
  for (const Staged& s : staged_) {
    if (!s.temp.empty()) ::unlink(s.temp.c_str());
  }
}

void OutputFiles::stage(const std::string& path, std::string bytes) {
  Staged s{path, path, "", ""};
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    if (S_ISDIR(st.st_mode)) fail(path, std::strerror(EISDIR));
    s.bytes = std::move(bytes);  // a device or FIFO: opened once, at commit
    staged_.push_back(std::move(s));
    return;
  }
  struct stat link {};
  if (::lstat(path.c_str(), &link) == 0 && S_ISLNK(link.st_mode)) {
    // Replace the file the link names, not the link.
    std::error_code ec;
    s.target = std::filesystem::weakly_canonical(path, ec).string();
    if (ec) fail(path, ec.message());
  }
  const bool existed = ::stat(s.target.c_str(), &st) == 0;
  // Created 0666 less the umask, as the file itself would be; O_EXCL: a new file of this run's.
  int fd = -1;
  for (unsigned attempt = 0; attempt < 64 && fd < 0; ++attempt) {
    struct timespec now {};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    s.temp = fmt::format("{}/.{}.tfpin-{}-{:x}", directory_of(s.target),
                         std::filesystem::path(s.target).filename().string(), ::getpid(),
                         static_cast<unsigned long>(now.tv_nsec) + attempt);
    fd = ::open(s.temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) fail(path, std::strerror(errno));
  staged_.push_back(s);  // removed by the destructor unless committed
  // A replaced file keeps its mode.
  const bool ok = write_all(fd, bytes) && (!existed || ::fchmod(fd, st.st_mode & 07777U) == 0);
  const int saved = errno;
  if (::close(fd) != 0 || !ok) fail(path, std::strerror(ok ? errno : saved));
}

void OutputFiles::commit() {
  // Devices first: a write there can fail (ENOSPC on /dev/full, a closed pipe), a rename in a
  // directory checked at stage() hardly; a failure then leaves every regular file as it was.
  for (const Staged& s : staged_) {
    if (!s.temp.empty()) continue;
    const int fd = ::open(s.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) fail(s.path, std::strerror(errno));
    const bool ok = write_all(fd, s.bytes);
    const int saved = errno;
    ::close(fd);
    if (!ok) fail(s.path, std::strerror(saved));
  }
  for (Staged& s : staged_) {
    if (s.temp.empty()) continue;
    if (::rename(s.temp.c_str(), s.target.c_str()) != 0) fail(s.path, std::strerror(errno));
    s.temp.clear();
  }
  staged_.clear();
}

void write_output_file(const std::string& path, std::string bytes) {
  OutputFiles files;
  files.stage(path, std::move(bytes));
  files.commit();
}

}  // namespace tfpin::cli
