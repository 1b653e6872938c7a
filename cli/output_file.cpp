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

// How `path` takes an output.
//  - descriptor: the same file as this process's stdout or stderr (/dev/stdout, /proc/self/fd/1,
//    or the name of the file a shell redirected into): written to that descriptor at its offset,
//    so `> log` and `>> log` keep working and nothing is replaced;
//  - in_place: not a regular file (a device, a FIFO), a path through /dev or /proc, or a regular
//    file whose owner, mode and links must stay (another user's, or one with other hard links):
//    opened once and written (a regular one truncated first);
//  - replace: a regular file of this user's, or a new path: a temporary file beside the file the
//    path names (through its links), renamed over it when complete.
struct Decision {
  enum class How { descriptor, in_place, replace } how = How::replace;
  int fd = -1;         // descriptor
  bool truncate = false;  // in_place: a regular file
  std::string target;  // replace: the file the path names
  bool existed = false;   // replace: that file exists (its mode is kept)
  mode_t mode = 0;
};

bool same_file(const struct stat& a, int fd) {
  struct stat b {};
  return ::fstat(fd, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

// The file `path` names, through any chain of links, even a dangling one (whose target is then
// created): never the link itself.
std::string through_links(const std::string& path) {
  std::filesystem::path at = path;
  for (int depth = 0; depth < 40; ++depth) {
    struct stat link {};
    if (::lstat(at.c_str(), &link) != 0 || !S_ISLNK(link.st_mode)) return at.string();
    std::error_code ec;
    const std::filesystem::path to = std::filesystem::read_symlink(at, ec);
    if (ec) fail(path, ec.message());
    at = to.is_absolute() ? to : at.parent_path() / to;
  }
  fail(path, std::strerror(ELOOP));
}

Decision decide(const std::string& path) {
  Decision d;
  struct stat st {};
  const bool exists = ::stat(path.c_str(), &st) == 0;
  if (!exists && errno != ENOENT) fail(path, std::strerror(errno));
  if (exists && S_ISDIR(st.st_mode)) fail(path, std::strerror(EISDIR));
  if (exists && (same_file(st, STDOUT_FILENO) || same_file(st, STDERR_FILENO))) {
    d.how = Decision::How::descriptor;
    d.fd = same_file(st, STDOUT_FILENO) ? STDOUT_FILENO : STDERR_FILENO;
    return d;
  }
  const bool special_tree = path.starts_with("/dev/") || path.starts_with("/proc/");
  if (exists && (!S_ISREG(st.st_mode) || special_tree || st.st_uid != ::geteuid() ||
                 st.st_nlink > 1)) {
    if (::access(path.c_str(), W_OK) != 0) fail(path, std::strerror(errno));
    d.how = Decision::How::in_place;
    d.truncate = S_ISREG(st.st_mode);
    return d;
  }
  d.target = through_links(path);
  d.existed = exists;
  d.mode = st.st_mode & 07777U;
  // The file is replaced by a new one: its directory must take it, and a file the user may not
  // write is not theirs to replace.
  if (::access(directory_of(d.target).c_str(), W_OK | X_OK) != 0 ||
      (exists && ::access(d.target.c_str(), W_OK) != 0)) {
    fail(path, std::strerror(errno));
  }
  return d;
}

}  // namespace

std::string output_unwritable(const std::string& path) {
  if (path.empty()) return "an empty path";
  try {
    (void)decide(path);
  } catch (const Error& e) {
    // "PATH: cannot write: WHY" -> WHY
    const std::string what = e.what();
    const auto colon = what.rfind(": ");
    return colon == std::string::npos ? what : what.substr(colon + 2);
  }
  return "";
}

OutputFiles::~OutputFiles() {
  for (const Staged& s : staged_) {
    if (!s.temp.empty()) ::unlink(s.temp.c_str());
  }
}

void OutputFiles::stage(const std::string& path, std::string bytes) {
  const Decision d = decide(path);
  Staged s{path, path, "", ""};
  if (d.how != Decision::How::replace) {
    // Written at commit: a descriptor, or the path opened once.
    s.fd = d.fd;
    s.truncate = d.truncate;
    s.bytes = std::move(bytes);
    staged_.push_back(std::move(s));
    return;
  }
  s.target = d.target;
  // O_EXCL: a new file of this run's. A replaced file's temporary is 0600 until it gets the old
  // file's mode (no one else reads the new contents meanwhile); a new file is created 0666 less
  // the umask, as the path itself would be.
  int fd = -1;
  for (unsigned attempt = 0; attempt < 64 && fd < 0; ++attempt) {
    struct timespec now {};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    s.temp = fmt::format("{}/.{}.tfpin-{}-{:x}", directory_of(s.target),
                         std::filesystem::path(s.target).filename().string(), ::getpid(),
                         static_cast<unsigned long>(now.tv_nsec) + attempt);
    fd = ::open(s.temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                d.existed ? 0600 : 0666);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) fail(path, std::strerror(errno));
  staged_.push_back(s);  // removed by the destructor unless committed
  const bool ok = write_all(fd, bytes) && (!d.existed || ::fchmod(fd, d.mode) == 0);
  const int saved = errno;
  if (::close(fd) != 0 || !ok) fail(path, std::strerror(ok ? errno : saved));
}

void OutputFiles::commit() {
  // Written in place first: a write there can fail (ENOSPC on /dev/full, a closed pipe), a rename
  // in a directory checked at stage() hardly; a failure then leaves every replaced file as it was.
  for (const Staged& s : staged_) {
    if (!s.temp.empty()) continue;
    const int fd = s.fd >= 0 ? s.fd
                             : ::open(s.path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY |
                                                          (s.truncate ? O_TRUNC : 0));
    if (fd < 0) fail(s.path, std::strerror(errno));
    const bool ok = write_all(fd, s.bytes);
    const int saved = errno;
    if (s.fd < 0) ::close(fd);
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
