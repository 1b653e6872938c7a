#include "tfpin/topology_cache.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <hwloc.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <set>
#include <utility>
#include <vector>

#include "tfpin/cpulist.hpp"
#include "tfpin/error.hpp"
#include "tfpin/file_descriptor.hpp"

extern char** environ;  // NOLINT

namespace tfpin {
namespace {

// Bumped whenever the format or what from_hwloc derives (numa of a core, online PUs) changes.
constexpr int format_version = 1;
constexpr std::string_view header = "tfpin-topology-cache 1";
// 4096 cores of 8 threads are about 300 KB; anything far larger is not a cache we wrote.
constexpr std::size_t max_file_bytes = 16U << 20U;

std::uint64_t fnv1a(std::string_view text) {
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : text) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return hash;
}


// The whole of a small file; nullopt when it cannot be read.
std::optional<std::string> read_all(int fd, std::size_t limit) {
  std::string text;
  char buffer[8192];
  while (true) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return std::nullopt;
    if (n == 0) return text;
    text.append(buffer, static_cast<std::size_t>(n));
    if (text.size() > limit) return std::nullopt;
  }
}

// A one-line system file (boot id, CPU lists), trimmed; nullopt when missing.
std::optional<std::string> read_line(const char* path) {
  const FileDescriptor fd(::open(path, O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) return std::nullopt;
  std::optional<std::string> text = read_all(fd.get(), 65536);
  if (!text) return std::nullopt;
  while (!text->empty() && (text->back() == '\n' || text->back() == ' ')) text->pop_back();
  return text;
}

// `text` with each of `bad` replaced by '_'.
std::string replaced(std::string_view text, std::string_view bad) {
  std::string out(text);
  for (char& c : out) {
    if (bad.find(c) != std::string_view::npos) c = '_';
  }
  return out;
}

// The key is one line of ';'-separated parts: nothing of the machine may add a line or a part.
std::string key_part(std::string_view text) { return replaced(text, ";\n\r"); }
std::string one_line(std::string_view text) { return replaced(text, "\n\r"); }

bool hwloc_environment() {
  for (char** var = environ; var != nullptr && *var != nullptr; ++var) {
    if (std::strncmp(*var, "HWLOC_", 6) == 0) return true;
  }
  return false;
}

// Parses lines of space-separated unsigned numbers after a keyword.
class Lines {
 public:
  explicit Lines(std::string_view text) : rest_(text) {}
  bool next(std::string_view& line) {
    if (rest_.empty()) return false;
    const auto end = rest_.find('\n');
    if (end == std::string_view::npos) return false;  // every line ends with a newline
    line = rest_.substr(0, end);
    rest_.remove_prefix(end + 1);
    return true;
  }

 private:
  std::string_view rest_;
};

bool split_word(std::string_view& line, std::string_view& word) {
  if (line.empty()) return false;
  const auto space = line.find(' ');
  word = line.substr(0, space);
  line = space == std::string_view::npos ? std::string_view() : line.substr(space + 1);
  return !word.empty();
}

template <typename Number>
bool number(std::string_view& line, Number& value) {
  std::string_view word;
  if (!split_word(line, word)) return false;
  const auto [ptr, ec] = std::from_chars(word.data(), word.data() + word.size(), value);
  return ec == std::errc{} && ptr == word.data() + word.size();
}

// The first list of the key's part `name` ("cpus=0-3/0-3/0-3": the possible CPUs), or nullopt
// when the key has no such part or it is not a list (a test's key, "?" where sysfs had none).
std::optional<std::vector<unsigned>> key_list(std::string_view key, std::string_view name) {
  std::size_t at = 0;
  while (at <= key.size()) {
    std::size_t end = key.find(';', at);
    if (end == std::string_view::npos) end = key.size();
    const std::string_view part = key.substr(at, end - at);
    if (part.starts_with(name) && part.size() > name.size() && part[name.size()] == '=') {
      const std::string_view lists = part.substr(name.size() + 1);
      try {
        return parse_cpulist(lists.substr(0, lists.find('/')));
      } catch (const Error&) {
        return std::nullopt;
      }
    }
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<Topology> decode_body(std::string_view body, std::string_view key, std::string& why) {
  Lines lines(body);
  std::string_view line;
  if (!lines.next(line) || line != header) {
    why = "not a tfpin topology cache of this version";
    return std::nullopt;
  }
  if (!lines.next(line) || !line.starts_with("key ")) {
    why = "no key";
    return std::nullopt;
  }
  if (line.substr(4) != key) {
    why = "written for another boot, kernel, hwloc or CPU set (stale or foreign)";
    return std::nullopt;
  }
  unsigned packages = 0;
  std::string_view word;
  if (!lines.next(line) || !split_word(line, word) || word != "packages" ||
      !number(line, packages) || !line.empty() || packages == 0) {
    why = "bad package count";
    return std::nullopt;
  }
  // What the key says the machine may have: the data must not contradict it.
  const std::optional<std::vector<unsigned>> key_cpus = key_list(key, "cpus");
  const std::optional<std::vector<unsigned>> key_nodes = key_list(key, "nodes");
  const std::set<unsigned> possible_cpus = key_cpus ? std::set<unsigned>(key_cpus->begin(), key_cpus->end())
                                                    : std::set<unsigned>{};
  const std::set<unsigned> possible_nodes =
      key_nodes ? std::set<unsigned>(key_nodes->begin(), key_nodes->end()) : std::set<unsigned>{};
  std::vector<NumaNode> numa_nodes;
  std::vector<Core> cores;
  std::set<unsigned> numa_ids;
  std::set<unsigned> pus;
  while (lines.next(line)) {
    if (!split_word(line, word)) {
      why = "empty line";
      return std::nullopt;
    }
    if (word == "numa") {
      NumaNode node;
      if (!cores.empty() || !number(line, node.os_index) || !number(line, node.local_memory) ||
          !line.empty() || !numa_ids.insert(node.os_index).second) {
        why = "bad NUMA node line";
        return std::nullopt;
      }
      if (key_nodes && possible_nodes.count(node.os_index) == 0) {
        why = fmt::format("NUMA node {} is not among the key's possible nodes ({})", node.os_index,
                          format_cpulist(*key_nodes));
        return std::nullopt;
      }
      numa_nodes.push_back(node);
    } else if (word == "core") {
      Core core;
      if (!number(line, core.index) || !number(line, core.package) || !number(line, core.numa) ||
          core.package >= packages || (!cores.empty() && core.index <= cores.back().index)) {
        why = "bad core line";
        return std::nullopt;
      }
      if (numa_ids.count(core.numa) == 0) {
        why = fmt::format("a core on NUMA node {}, which the file does not declare", core.numa);
        return std::nullopt;
      }
      while (!line.empty()) {
        unsigned pu = 0;
        if (!number(line, pu) || !pus.insert(pu).second) {
          why = "bad hardware thread list";
          return std::nullopt;
        }
        if (pu > max_cpu_index) {
          why = fmt::format("hardware thread {} is beyond the CPUs tfpin can name (0-{})", pu,
                            max_cpu_index);
          return std::nullopt;
        }
        if (key_cpus && possible_cpus.count(pu) == 0) {
          why = fmt::format("hardware thread {} is not among the key's possible CPUs ({})", pu,
                            format_cpulist(*key_cpus));
          return std::nullopt;
        }
        core.pus.push_back(pu);
      }
      if (core.pus.empty()) {
        why = "a core without hardware threads";
        return std::nullopt;
      }
      cores.push_back(std::move(core));
    } else {
      why = "unknown line";
      return std::nullopt;
    }
  }
  if (cores.empty() || numa_nodes.empty()) {
    why = "no cores or no NUMA nodes";
    return std::nullopt;
  }
  return Topology(std::move(cores), std::move(numa_nodes), packages, "host");
}

std::string describe_owner(const struct stat& st, uid_t owner, std::string_view what) {
  if (st.st_uid != owner)
    return fmt::format("{} is owned by uid {}, not {}", what, st.st_uid, owner);
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fmt::format("{} is writable by group or others (mode {:04o})", what,
                       st.st_mode & 07777U);
  }
  return "";
}

// A directory on the way to the cache: root's (or the owner's), and no one else may add, remove
// or exchange its entries. A sticky directory (/tmp) does not qualify: any user could take the
// cache directory's name in it first.
std::string describe_ancestor(const struct stat& st, uid_t owner, const std::string& shown) {
  if (st.st_uid != 0 && st.st_uid != owner) {
    return fmt::format("{} is owned by uid {} (every directory on the way must be root's)", shown,
                       st.st_uid);
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    return fmt::format("{} is writable by group or others (mode {:04o}; every directory on the way "
                       "must be writable by root only)",
                       shown, st.st_mode & 07777U);
  }
  return "";
}

// The cache directory, reached from "/" one component at a time with *at calls on descriptors:
// no step resolves a path the kernel could walk through an entry swapped after it was checked.
struct CacheDirectory {
  enum class State { opened, missing, missing_parent, refused };
  State state = State::refused;
  FileDescriptor parent;  // opened, missing: the directory holding it (O_PATH)
  FileDescriptor fd;      // opened: the directory itself (O_PATH)
  std::string name;       // opened, missing: its name in `parent`
  std::string why;        // missing_parent, refused: what is wrong
};

std::string joined(const std::vector<std::string>& names) {
  std::string path;
  for (const std::string& name : names) path += "/" + name;
  return path.empty() ? "/" : path;
}


// Every directory passed through (and "/") must pass describe_ancestor; the last one must belong
// to `owner` exactly (describe_owner). Symbolic links are followed only from such directories
// (e.g. /var/run -> /run), since then only root could have placed them; at most 16.
CacheDirectory open_cache_directory(const std::string& path, uid_t owner) {
  CacheDirectory out;
  if (path.empty() || path.front() != '/') {
    out.why = "not an absolute path";
    return out;
  }
  std::vector<FileDescriptor> chain;  // "/", then each directory walked into
  std::vector<std::string> names;     // their names (for messages)
  struct stat st {};
  chain.emplace_back(::open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
  if (chain.back().get() < 0 || ::fstat(chain.back().get(), &st) != 0) {
    out.why = fmt::format("cannot open /: {}", std::strerror(errno));
    return out;
  }
  if (out.why = describe_ancestor(st, owner, "/"); !out.why.empty()) return out;

  std::vector<std::string> todo;
  push_path_components(path, todo);
  int links = 0;
  while (!todo.empty()) {
    std::string part = std::move(todo.back());
    todo.pop_back();
    if (part == "..") {
      if (chain.size() > 1) {
        chain.pop_back();
        names.pop_back();
      }
      continue;
    }
    const bool last = todo.empty();
    names.push_back(part);
    const int at = chain.back().get();
    if (::fstatat(at, part.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno == ENOENT && last) {
        out.state = CacheDirectory::State::missing;
        out.parent = std::move(chain.back());
        out.name = std::move(part);
      } else if (errno == ENOENT) {
        out.state = CacheDirectory::State::missing_parent;
        out.why = fmt::format("{} does not exist", joined(names));
      } else {
        out.why = fmt::format("cannot open {}: {}", joined(names), std::strerror(errno));
      }
      return out;
    }
    if (S_ISLNK(st.st_mode)) {
      char target[4096];
      const ssize_t n = ::readlinkat(at, part.c_str(), target, sizeof target);
      if (++links > 16 || n <= 0 || static_cast<std::size_t>(n) == sizeof target) {
        out.why = fmt::format("{}: too many or too long symbolic links", joined(names));
        return out;
      }
      names.pop_back();
      if (target[0] == '/') {
        chain.resize(1);
        names.clear();
      }
      push_path_components(std::string_view(target, static_cast<std::size_t>(n)), todo);
      continue;
    }
    FileDescriptor next(::openat(at, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC));
    if (next.get() < 0 || ::fstat(next.get(), &st) != 0) {
      out.why = fmt::format("cannot open {}: {}", joined(names), std::strerror(errno));
      return out;
    }
    if (last) {
      if (out.why = describe_owner(st, owner, "the directory"); !out.why.empty()) return out;
      out.state = CacheDirectory::State::opened;
      out.parent = std::move(chain.back());
      out.fd = std::move(next);
      out.name = std::move(part);
      return out;
    }
    if (out.why = describe_ancestor(st, owner, joined(names)); !out.why.empty()) return out;
    chain.push_back(std::move(next));
  }
  out.why = "names no directory";  // "/", or a path ending in ".."
  return out;
}

struct ReadResult {
  std::optional<Topology> topology;
  std::string why;  // set when the file exists and is not used
};

ReadResult read_cache(int dir, uid_t owner, std::string_view key) {
  ReadResult result;
  const std::string name(topology_cache_file);
  const FileDescriptor file(
      ::openat(dir, name.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK));
  if (file.get() < 0) {
    if (errno != ENOENT) result.why = fmt::format("cannot open: {}", std::strerror(errno));
    return result;
  }
  struct stat st {};
  if (::fstat(file.get(), &st) != 0 || !S_ISREG(st.st_mode)) {
    result.why = "not a regular file";
    return result;
  }
  if (std::string unsafe = describe_owner(st, owner, "the file"); !unsafe.empty()) {
    result.why = std::move(unsafe);
    return result;
  }
  const std::optional<std::string> text = read_all(file.get(), max_file_bytes);
  if (!text) {
    result.why = "unreadable or too large";
    return result;
  }
  result.topology = decode_topology(*text, key, result.why);
  return result;
}

// A name no other writer of this directory picks at the same time (O_EXCL settles the rest).
std::string temporary_name() {
  static std::atomic<unsigned> counter{0};
  struct timespec now {};
  ::clock_gettime(CLOCK_MONOTONIC, &now);
  return fmt::format(".{}.{}.{}.{:x}", topology_cache_file, ::getpid(), counter++,
                     static_cast<unsigned long>(now.tv_nsec));
}

// Temporary file in `dir`, written, fsync'ed, mode 0644, renamed over the cache file: readers see
// the old file or the new one, never a part.
std::string write_cache_file(int dir, const std::string& directory, const std::string& text) {
  std::string temp;
  FileDescriptor file;
  for (int attempt = 0; attempt < 16 && file.get() < 0; ++attempt) {
    temp = temporary_name();
    file = FileDescriptor(
        ::openat(dir, temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600));
    if (file.get() < 0 && errno != EEXIST) break;
  }
  if (file.get() < 0) {
    return fmt::format("cannot create a file in {}: {}", directory, std::strerror(errno));
  }
  const std::string name(topology_cache_file);
  std::size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(file.get(), text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const std::string why =
          fmt::format("cannot write {}/{}: {}", directory, temp, std::strerror(errno));
      ::unlinkat(dir, temp.c_str(), 0);
      return why;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::fchmod(file.get(), 0644) != 0 || ::fsync(file.get()) != 0 ||
      ::renameat(dir, temp.c_str(), dir, name.c_str()) != 0) {
    const std::string why =
        fmt::format("cannot write {}/{}: {}", directory, name, std::strerror(errno));
    ::unlinkat(dir, temp.c_str(), 0);
    return why;
  }
  return "";
}

}  // namespace

std::optional<std::string> host_topology_key() {
  const std::optional<std::string> boot = read_line("/proc/sys/kernel/random/boot_id");
  struct utsname uts {};
  if (!boot || boot->empty() || ::uname(&uts) != 0) return std::nullopt;
  auto sys = [](const char* path) { return key_part(read_line(path).value_or("?")); };
  return fmt::format(
      "format={};hwloc={:#x};kernel={} {} {} {};node={};boot={};cpus={}/{}/{};nodes={}/{}",
      format_version, hwloc_get_api_version(), key_part(uts.sysname), key_part(uts.release),
      key_part(uts.version), key_part(uts.machine), key_part(uts.nodename), key_part(*boot),
      sys("/sys/devices/system/cpu/possible"), sys("/sys/devices/system/cpu/present"),
      sys("/sys/devices/system/cpu/online"), sys("/sys/devices/system/node/possible"),
      sys("/sys/devices/system/node/online"));
}

std::string encode_topology(const Topology& topology, std::string_view key) {
  std::string text =
      fmt::format("{}\nkey {}\npackages {}\n", header, one_line(key), topology.package_count());
  for (const NumaNode& node : topology.numa_nodes()) {
    text += fmt::format("numa {} {}\n", node.os_index, node.local_memory);
  }
  for (const Core& core : topology.cores()) {
    text += fmt::format("core {} {} {}", core.index, core.package, core.numa);
    for (unsigned pu : core.pus) text += fmt::format(" {}", pu);
    text += '\n';
  }
  return seal_topology_text(text);
}

std::string seal_topology_text(std::string_view body) {
  return fmt::format("{}checksum {:016x}\n", body, fnv1a(body));
}

std::optional<Topology> decode_topology(std::string_view text, std::string_view key,
                                        std::string& why) {
  // The last line is "checksum <16 hex digits>" over everything before it.
  constexpr std::string_view tag = "checksum ";
  const std::size_t tail = tag.size() + 16 + 1;
  if (text.size() < tail || text.substr(text.size() - tail, tag.size()) != tag ||
      text.back() != '\n') {
    why = "truncated (no checksum line)";
    return std::nullopt;
  }
  const std::string_view body = text.substr(0, text.size() - tail);
  if (!body.empty() && body.back() != '\n') {
    why = "truncated (no checksum line)";
    return std::nullopt;
  }
  std::uint64_t stored = 0;
  const char* digits = text.data() + text.size() - 17;
  const auto [ptr, ec] = std::from_chars(digits, digits + 16, stored, 16);
  if (ec != std::errc{} || ptr != digits + 16 || stored != fnv1a(body)) {
    why = "damaged (checksum mismatch)";
    return std::nullopt;
  }
  return decode_body(body, one_line(key), why);
}

std::string write_topology_cache(const std::string& directory, const Topology& topology,
                                 std::string_view key) {
  const CacheDirectory dir = open_cache_directory(directory, ::geteuid());
  if (dir.state != CacheDirectory::State::opened) {
    return fmt::format("cannot write into {}: {}", directory,
                       dir.why.empty() ? "it does not exist" : dir.why);
  }
  return write_cache_file(dir.fd.get(), directory, encode_topology(topology, key));
}

CachedTopology load_host_topology(const TopologyCacheOptions& options,
                                  const std::function<Topology()>& live) {
  std::optional<std::string> key;
  if (!options.directory.empty() && !hwloc_environment()) key = host_topology_key();
  if (!key) return {live(), false, ""};

  const std::string path = options.directory + "/" + std::string(topology_cache_file);
  using State = CacheDirectory::State;
  CacheDirectory dir = open_cache_directory(options.directory, options.owner);
  ReadResult read;
  if (dir.state == State::refused) read.why = dir.why;
  if (dir.state == State::opened) read = read_cache(dir.fd.get(), options.owner, *key);
  if (read.topology) return {std::move(*read.topology), true, ""};

  CachedTopology result{live(), false, ""};
  std::string problem;
  if (!read.why.empty()) problem = fmt::format("topology cache {}: {}; ignored", path, read.why);
  const bool may_write = options.write && ::geteuid() == options.owner;
  if (may_write && dir.state == State::missing_parent) {
    problem = fmt::format("topology cache {}: cannot create the directory: {}", options.directory,
                          dir.why);
  }
  if (may_write && dir.state == State::missing) {
    // No directory yet (/run is emptied at boot): make it, root's and not writable by others. Its
    // parent was checked: no one else can have replaced the new entry.
    if (::mkdirat(dir.parent.get(), dir.name.c_str(), 0755) == 0) {
      // 0755 whatever the umask: the job's tasks read the file
      if (::fchmodat(dir.parent.get(), dir.name.c_str(), 0755, 0) != 0) {
        problem = fmt::format("topology cache {}: cannot make the directory 0755: {}",
                              options.directory, std::strerror(errno));
      }
    } else if (errno != EEXIST) {
      problem = fmt::format("topology cache {}: cannot create the directory: {}",
                            options.directory, std::strerror(errno));
    }
    if (problem.empty()) {
      dir = open_cache_directory(options.directory, options.owner);
      if (dir.state == State::refused) {
        problem = fmt::format("topology cache {}: {}; ignored", path, dir.why);
      }
    }
  }
  if (may_write && dir.state == State::opened) {
    if (std::string failed =
            write_cache_file(dir.fd.get(), options.directory, encode_topology(result.topology, *key));
        !failed.empty()) {
      problem += fmt::format("{}topology cache: {}", problem.empty() ? "" : "; ", failed);
    } else if (!problem.empty()) {
      problem += " and rewritten";
    }
  }
  if (!problem.empty()) {
    result.warning = problem + " (the topology was loaded from the machine)";
  }
  return result;
}

}  // namespace tfpin
