// The shim's CPU file view (shim/cpu_files.c) on a machine bigger than this one: a copy of the
// /sys and /proc files of the 2 x 18-core, 2-thread Broadwell fixture (tests/fixtures) is written
// under a temporary root, a plan is placed on it by tfpin's own placement, and every view is read
// back through cpu_view_open with that root, as a program under the shim would read it.
#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdarg>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "cpu_files.h"
#include "tfpin/environment.hpp"
#include "tfpin/placement.hpp"
#include "tfpin/topology.hpp"

namespace {

namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& text) {
  fs::create_directories(path.parent_path());
  std::ofstream(path) << text;
}

// The kernel's mask format: 32-bit groups of 8 hex digits, most significant first.
std::string kernel_mask(const std::set<unsigned>& cpus, unsigned possible) {
  std::string out;
  for (unsigned group = (possible + 31) / 32; group-- > 0;) {
    std::uint32_t bits = 0;
    for (unsigned b = 0; b < 32; ++b) bits |= cpus.contains(group * 32 + b) ? 1U << b : 0U;
    out += fmt::format("{}{:08x}", out.empty() ? "" : ",", bits);
  }
  return out;
}

// The kernel's list format: every run of two or more is a range ("0-1,18-19").
std::string cpulist(const std::set<unsigned>& cpus) {
  std::string out;
  for (auto it = cpus.begin(); it != cpus.end();) {
    unsigned last = *it;
    auto next = std::next(it);
    while (next != cpus.end() && *next == last + 1) last = *next++;
    out += (out.empty() ? "" : ",") +
           (last == *it ? fmt::format("{}", *it) : fmt::format("{}-{}", *it, last));
    it = next;
  }
  return out;
}

class CpuFileView : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    topology_ = std::make_unique<tfpin::Topology>(
        tfpin::Topology::load(std::string(TFPIN_FIXTURE_DIR) + "/broadwell-2x18-ht.xml"));
    root_ = fs::temp_directory_path() / fmt::format("tfpin-cpu-files-{}", getpid());
    fs::remove_all(root_);
    const fs::path cpu = root_ / "sys/devices/system/cpu";
    std::set<unsigned> all;
    std::map<unsigned, std::set<unsigned>> package_pus;
    std::map<unsigned, std::set<unsigned>> node_pus;
    for (const tfpin::Core& core : topology_->cores()) {
      for (unsigned pu : core.pus) {
        all.insert(pu);
        package_pus[core.package].insert(pu);
        node_pus[core.numa].insert(pu);
      }
    }
    possible_ = static_cast<unsigned>(all.size());
    for (const char* name : {"possible", "present", "online"})
      write_file(cpu / name, cpulist(all) + "\n");
    write_file(cpu / "offline", "\n");
    std::string cpuinfo;
    std::string stat = "cpu  0 0 0 0 0 0 0 0 0 0\n";
    unsigned core_number = 0;
    for (const tfpin::Core& core : topology_->cores()) {
      const std::set<unsigned> siblings(core.pus.begin(), core.pus.end());
      for (unsigned pu : core.pus) {
        const fs::path topo = cpu / fmt::format("cpu{}", pu) / "topology";
        write_file(topo / "thread_siblings_list", cpulist(siblings) + "\n");
        write_file(topo / "thread_siblings", kernel_mask(siblings, possible_) + "\n");
        write_file(topo / "package_cpus_list", cpulist(package_pus[core.package]) + "\n");
        write_file(topo / "package_cpus", kernel_mask(package_pus[core.package], possible_) + "\n");
        write_file(topo / "core_id", fmt::format("{}\n", core_number));
        if (pu != 0) write_file(cpu / fmt::format("cpu{}", pu) / "online", "1\n");
        pus_by_id_[pu] = {core.package, core_number};
      }
      ++core_number;
    }
    for (unsigned pu : all) {
      const auto [package, core] = pus_by_id_[pu];
      cpuinfo += fmt::format(
          "processor\t: {}\nvendor_id\t: GenuineIntel\nphysical id\t: {}\nsiblings\t: {}\n"
          "core id\t\t: {}\ncpu cores\t: {}\nflags\t\t: fpu vme de pse\n\n",
          pu, package, package_pus[package].size(), core, package_pus[package].size() / 2);
      stat += fmt::format("cpu{} {} 2 3 4 5 6 7 8 0 0\n", pu, pu + 1);
    }
    stat += "intr 1 2 3\nctxt 4\n";
    write_file(root_ / "proc/cpuinfo", cpuinfo);
    write_file(root_ / "proc/stat", stat);
    for (const auto& [node, pus] : node_pus) {
      write_file(root_ / fmt::format("sys/devices/system/node/node{}/cpulist", node),
                 cpulist(pus) + "\n");
    }
  }
  static void TearDownTestSuite() { fs::remove_all(root_); }

  // The shim's plan for a tfpin plan placed on the fixture.
  static std::unique_ptr<shim_plan> plan_for(unsigned threads, unsigned interop,
                                             std::set<unsigned>* cpus) {
    tfpin::PlacementRequest request;
    request.threads = threads;
    request.interop = interop;
    const tfpin::Plan plan = tfpin::compute_plan(*topology_, request);
    std::map<std::string, std::string> env;
    for (const tfpin::EnvVar& var : tfpin::encode_plan(plan)) env[var.name] = var.value;
    auto parsed = std::make_unique<shim_plan>();
    EXPECT_EQ(shim_parse_plan(env["TFPIN_CPUS"].c_str(), env["TFPIN_INTEROP"].c_str(),
                              env["TFPIN_INTRA"].c_str(), parsed.get()),
              nullptr);
    const auto list = plan.cpus();
    cpus->insert(list.begin(), list.end());
    return parsed;
  }

  // What a program reading `path` gets under the shim.
  static std::string view(const shim_plan& plan, const std::string& path) {
    const int fd = cpu_view_open(&plan, root_.c_str(), AT_FDCWD, path.c_str(), O_RDONLY);
    if (fd == CPU_VIEW_PASS) return "<pass>";
    if (fd < 0) return "<error>";
    std::string text;
    char chunk[4096];
    for (ssize_t n; (n = read(fd, chunk, sizeof chunk)) > 0;)
      text.append(chunk, static_cast<size_t>(n));
    EXPECT_EQ(fcntl(fd, F_GETFL) & O_ACCMODE, O_RDONLY);
    close(fd);
    return text;
  }

  static inline std::unique_ptr<tfpin::Topology> topology_;
  static inline fs::path root_;
  static inline unsigned possible_ = 0;
  static inline std::map<unsigned, std::pair<unsigned, unsigned>> pus_by_id_;  // package, core
};

TEST_F(CpuFileView, FourOfThirtySixCoresAreWhatEveryFileShows) {
  std::set<unsigned> cpus;
  const auto plan = plan_for(4, 2, &cpus);
  ASSERT_EQ(cpus.size(), 4U);
  const std::string listed = cpulist(cpus) + "\n";
  EXPECT_EQ(view(*plan, "/sys/devices/system/cpu/online"), listed);
  EXPECT_EQ(view(*plan, "/sys/devices/system/cpu/present"), listed);
  EXPECT_EQ(view(*plan, "/sys/devices/system/cpu/possible"), "<pass>");  // an upper bound: real
  std::set<unsigned> rest;
  for (unsigned pu = 0; pu < possible_; ++pu) {
    if (!cpus.contains(pu)) rest.insert(pu);
  }
  EXPECT_EQ(view(*plan, "/sys/devices/system/cpu/offline"), cpulist(rest) + "\n");

  // /proc/cpuinfo: the plan's processors under their real numbers, siblings and cores recounted.
  std::istringstream cpuinfo(view(*plan, "/proc/cpuinfo"));
  std::set<unsigned> processors;
  std::map<unsigned, unsigned> siblings_of_package;
  std::map<unsigned, std::set<unsigned>> cores_of_package;
  for (unsigned cpu : cpus) {
    ++siblings_of_package[pus_by_id_[cpu].first];
    cores_of_package[pus_by_id_[cpu].first].insert(pus_by_id_[cpu].second);
  }
  unsigned package = 0;
  for (std::string line; std::getline(cpuinfo, line);) {
    const auto value = [&line] {
      return static_cast<unsigned>(std::stoul(line.substr(line.find(':') + 1)));
    };
    if (line.starts_with("processor")) processors.insert(value());
    if (line.starts_with("physical id")) package = value();
    if (line.starts_with("siblings")) {
      EXPECT_EQ(value(), siblings_of_package[package]) << line;
    }
    if (line.starts_with("cpu cores")) {
      EXPECT_EQ(value(), cores_of_package[package].size()) << line;
    }
  }
  EXPECT_EQ(processors, cpus);

  // /proc/stat: the plan's cpuN lines; the total is their sum; other lines untouched.
  std::istringstream stat(view(*plan, "/proc/stat"));
  std::set<unsigned> stat_cpus;
  unsigned long long user_total = 0;
  unsigned long long user_sum = 0;
  std::string rest_lines;
  for (std::string line; std::getline(stat, line);) {
    std::istringstream fields(line);
    std::string name;
    unsigned long long user = 0;
    fields >> name >> user;
    if (name == "cpu") {
      user_total = user;
    } else if (name.starts_with("cpu")) {
      stat_cpus.insert(static_cast<unsigned>(std::stoul(name.substr(3))));
      user_sum += user;
    } else {
      rest_lines += line + "\n";
    }
  }
  EXPECT_EQ(stat_cpus, cpus);
  EXPECT_EQ(user_total, user_sum);
  EXPECT_EQ(rest_lines, "intr 1 2 3\nctxt 4\n");
}

TEST_F(CpuFileView, SiblingListsAndMasksKeepOnlyThePlansCpus) {
  std::set<unsigned> cpus;
  const auto plan = plan_for(4, 1, &cpus);
  const unsigned first = *cpus.begin();
  const std::string topo = fmt::format("/sys/devices/system/cpu/cpu{}/topology/", first);
  std::set<unsigned> same_package;
  for (unsigned cpu : cpus) {
    if (pus_by_id_[cpu].first == pus_by_id_[first].first) same_package.insert(cpu);
  }
  EXPECT_EQ(view(*plan, topo + "package_cpus_list"), cpulist(same_package) + "\n");
  // Same layout as the kernel's (3 groups for 72 CPUs), only the plan's bits left.
  EXPECT_EQ(view(*plan, topo + "package_cpus"), kernel_mask(same_package, possible_) + "\n");
  EXPECT_EQ(view(*plan, topo + "thread_siblings_list"),
            fmt::format("{}\n", first));  // one per core
  EXPECT_EQ(view(*plan, topo + "core_id"), "<pass>");
  EXPECT_EQ(view(*plan, "/sys/devices/system/node/node0/cpulist"), cpulist(same_package) + "\n");
  // A CPU outside the plan looks offline; its other files are the real ones.
  unsigned outside = 0;
  while (cpus.contains(outside)) ++outside;
  EXPECT_EQ(view(*plan, fmt::format("/sys/devices/system/cpu/cpu{}/online", outside)), "0\n");
  EXPECT_EQ(view(*plan, fmt::format("/sys/devices/system/cpu/cpu{}/topology/core_id", outside)),
            "<pass>");
  // Written or created files, and everything else, are never views.
  EXPECT_EQ(cpu_view_open(plan.get(), root_.c_str(), AT_FDCWD, "/sys/devices/system/cpu/online",
                          O_WRONLY),
            CPU_VIEW_PASS);
  EXPECT_EQ(view(*plan, "/etc/hostname"), "<pass>");
  EXPECT_EQ(view(*plan, "/proc/cpuinfo2"), "<pass>");
}

// A path is matched as the kernel resolves it: doubled slashes, "." and "..", a path relative to
// a directory descriptor, a link to a file of the view; O_NOFOLLOW on such a link and O_PATH get
// the real open.
// A process's own stat file is told apart by its spelling and never resolved (one openat,
// readlink and close saved per file ps or top reads); in this fake root it leads to the view's
// /proc/stat, which the kernel's never does, so only the spelling can have kept it out.
TEST_F(CpuFileView, PerProcessStatFilesAreNotResolved) {
  std::set<unsigned> cpus;
  const auto plan = plan_for(4, 2, &cpus);
  for (const char* dir : {"proc/123", "proc/self", "proc/thread-self", "proc/123/task/124",
                          "proc/12a", "proc/123/cwd"}) {
    fs::create_directories(root_ / dir);
    fs::create_symlink(fs::relative(root_ / "proc" / "stat", root_ / dir), root_ / dir / "stat");
  }
  for (const char* path : {"/proc/123/stat", "/proc/self/stat", "/proc/thread-self/stat",
                           "/proc/123/task/124/stat"}) {
    EXPECT_EQ(cpu_view_open(plan.get(), root_.c_str(), AT_FDCWD, path, O_RDONLY), CPU_VIEW_PASS)
        << path;
  }
  // Other spellings still go through the resolver (and reach the view here).
  for (const char* path : {"/proc/12a/stat", "/proc/123/cwd/stat", "/proc//123/stat"}) {
    const int fd = cpu_view_open(plan.get(), root_.c_str(), AT_FDCWD, path, O_RDONLY);
    EXPECT_GE(fd, 0) << path;
    if (fd >= 0) close(fd);
  }
}

TEST_F(CpuFileView, PathsMatchAsTheKernelResolvesThem) {
  std::set<unsigned> cpus;
  const auto plan = plan_for(4, 2, &cpus);
  const std::string listed = cpulist(cpus) + "\n";
  EXPECT_EQ(view(*plan, "/sys/devices/system/cpu//online"), listed);
  EXPECT_EQ(view(*plan, "/sys/devices/system/./cpu/online"), listed);
  EXPECT_EQ(view(*plan, "/sys/devices/system/cpu/cpu0/../online"), listed);
  const int dir = open((root_ / "sys/devices/system/cpu").c_str(), O_RDONLY | O_DIRECTORY);
  ASSERT_GE(dir, 0);
  for (const char* relative : {"online", "./online", "cpu0/../online"}) {
    const int fd = cpu_view_open(plan.get(), root_.c_str(), dir, relative, O_RDONLY);
    ASSERT_GE(fd, 0) << relative;
    char text[256] = {};
    EXPECT_GT(read(fd, text, sizeof text - 1), 0);
    EXPECT_EQ(std::string(text), listed) << relative;
    close(fd);
  }
  close(dir);
  fs::create_directories(root_ / "links");
  fs::create_symlink("../sys/devices/system/cpu/online", root_ / "links" / "online");
  EXPECT_EQ(view(*plan, "/links/online"), listed);
  EXPECT_EQ(cpu_view_open(plan.get(), root_.c_str(), AT_FDCWD, "/links/online",
                          O_RDONLY | O_NOFOLLOW),
            CPU_VIEW_PASS);  // the real open then fails with ELOOP
  EXPECT_EQ(cpu_view_open(plan.get(), root_.c_str(), AT_FDCWD, "/sys/devices/system/cpu/online",
                          O_RDONLY | O_PATH),
            CPU_VIEW_PASS);
  const int nonblocking = cpu_view_open(plan.get(), root_.c_str(), AT_FDCWD,
                                        "/sys/devices/system/cpu/online", O_RDONLY | O_NONBLOCK);
  ASSERT_GE(nonblocking, 0);
  EXPECT_NE(fcntl(nonblocking, F_GETFL) & O_NONBLOCK, 0);
  close(nonblocking);
  fs::remove_all(root_ / "links");
}

}  // namespace
