// The node's topology cache (tfpin/topology_cache.hpp): what it stores gives the same plans as the
// hwloc load it replaces, and a file that is damaged, foreign, stale or not root's is never used.
#include <fcntl.h>
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <linux/fs.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "plan_checks.hpp"
#include "tfpin/placement.hpp"
#include "tfpin/topology_cache.hpp"

using tfpin::Topology;

namespace {

const std::vector<std::string> machines = {
    "broadwell-2x18-ht.xml", "skylake-2x20.xml", "platinum8180-2x28-ht.xml", "knl-68x4-quad.xml",
    "knl-68x4-snc4.xml",     "offline-8x2.xml",  "epyc-2x96-8numa-ht.xml"};

// Every lane, NUMA node, memory policy and warning of a plan, as one comparable text.
std::string plan_text(const tfpin::Plan& plan) {
  std::ostringstream out;
  out << plan.threads << 'x' << plan.interop << ':' << plan.intra << " mem "
      << static_cast<int>(plan.memory.kind);
  for (unsigned node : plan.memory.nodes) out << ',' << node;
  for (const auto& lane : plan.lanes) {
    out << " | numa " << lane.numa << ':';
    for (unsigned cpu : lane.cpus) out << ' ' << cpu;
  }
  for (const auto& warning : plan.warnings) out << " ! " << warning;
  return out.str();
}

// The plans of the usual requests on `topology`: whole machine, lanes, hyperthreads, a cpuset.
std::vector<std::string> plans(const Topology& topology) {
  std::vector<std::string> out;
  const unsigned cores = static_cast<unsigned>(topology.cores().size());
  for (unsigned interop : {1U, 2U, 4U, 8U}) {
    for (bool hyperthreads : {false, true}) {
      tfpin::PlacementRequest request;
      request.interop = interop;
      request.interop_is_default = true;
      request.hyperthreads =
          hyperthreads ? tfpin::HyperthreadPolicy::all : tfpin::HyperthreadPolicy::one_per_core;
      out.push_back(plan_text(tfpin::compute_plan(topology, request)));
    }
  }
  tfpin::PlacementRequest half;
  half.threads = std::max(1U, cores / 2);
  half.allowed = std::vector<unsigned>(topology.cores()[0].pus);
  for (std::size_t i = 1; i < cores; i += 2) half.allowed->push_back(topology.cores()[i].pus[0]);
  half.clamp = true;
  out.push_back(plan_text(tfpin::compute_plan(topology, half)));
  return out;
}

void expect_same_machine(const Topology& a, const Topology& b) {
  ASSERT_EQ(a.cores().size(), b.cores().size());
  for (std::size_t i = 0; i < a.cores().size(); ++i) {
    EXPECT_EQ(a.cores()[i].index, b.cores()[i].index);
    EXPECT_EQ(a.cores()[i].package, b.cores()[i].package);
    EXPECT_EQ(a.cores()[i].numa, b.cores()[i].numa);
    EXPECT_EQ(a.cores()[i].pus, b.cores()[i].pus);
  }
  ASSERT_EQ(a.numa_nodes().size(), b.numa_nodes().size());
  for (std::size_t i = 0; i < a.numa_nodes().size(); ++i) {
    EXPECT_EQ(a.numa_nodes()[i].os_index, b.numa_nodes()[i].os_index);
    EXPECT_EQ(a.numa_nodes()[i].local_memory, b.numa_nodes()[i].local_memory);
  }
  EXPECT_EQ(a.package_count(), b.package_count());
}

Topology same_threads_in_one_core(const Topology& machine) {
  tfpin::Core core = machine.cores()[0];
  for (std::size_t i = 1; i < machine.cores().size(); ++i) {
    const auto& pus = machine.cores()[i].pus;
    core.pus.insert(core.pus.end(), pus.begin(), pus.end());
  }
  return Topology({core}, machine.numa_nodes(), machine.package_count() + 1, "other");
}

std::optional<Topology> decode(const std::string& text, const std::string& key) {
  std::string why;
  std::optional<Topology> t = tfpin::decode_topology(text, key, why);
  EXPECT_EQ(t.has_value(), why.empty()) << why;
  return t;
}

}  // namespace

TEST(TopologyCache, DecodedMachinePlansLikeTheHwlocLoadOnEveryFixture) {
  for (const std::string& name : machines) {
    SCOPED_TRACE(name);
    const Topology live = Topology::xml_file(fixture(name));
    const std::optional<Topology> cached = decode(tfpin::encode_topology(live, "k"), "k");
    ASSERT_TRUE(cached);
    expect_same_machine(live, *cached);
    EXPECT_EQ(plans(live), plans(*cached));
  }
}

TEST(TopologyCache, HostKeyIsOneLineAndStable) {
  const auto key = tfpin::host_topology_key();
  ASSERT_TRUE(key);  // Linux has a boot id
  EXPECT_EQ(key->find('\n'), std::string::npos);
  EXPECT_NE(key->find("boot="), std::string::npos);
  EXPECT_NE(key->find("hwloc="), std::string::npos);
  EXPECT_EQ(key, tfpin::host_topology_key());
}

TEST(TopologyCache, DamagedOrForeignTextIsRefused) {
  const Topology machine = Topology::xml_file(fixture("platinum8180-2x28-ht.xml"));
  const std::string text = tfpin::encode_topology(machine, "boot=1");
  ASSERT_TRUE(decode(text, "boot=1"));
  std::string why;
  EXPECT_FALSE(tfpin::decode_topology(text, "boot=2", why));
  EXPECT_NE(why.find("stale or foreign"), std::string::npos) << why;
  // Every truncation, and a changed byte anywhere.
  for (std::size_t length = 0; length < text.size(); length += 7) {
    EXPECT_FALSE(tfpin::decode_topology(text.substr(0, length), "boot=1", why)) << length;
  }
  for (std::size_t at = 0; at < text.size(); at += 5) {
    std::string changed = text;
    changed[at] = changed[at] == '7' ? '8' : '7';
    EXPECT_FALSE(tfpin::decode_topology(changed, "boot=1", why)) << at;
  }
  EXPECT_FALSE(tfpin::decode_topology("", "boot=1", why));
  EXPECT_FALSE(tfpin::decode_topology(std::string(100000, '\n'), "boot=1", why));
}

// A file with a right checksum and key but inconsistent data (one not written by tfpin) is refused
// too: the checksum is not all that stands between a file and a plan.
TEST(TopologyCache, InconsistentDataIsRefusedEvenWithItsChecksum) {
  std::vector<tfpin::Core> cores = {{0, 0, 0, {0, 1}}, {1, 0, 0, {1}}};  // PU 1 twice
  const Topology twice(cores, {{0, 0}}, 1, "t");
  std::string why;
  EXPECT_FALSE(tfpin::decode_topology(tfpin::encode_topology(twice, "k"), "k", why));
  const Topology package(std::vector<tfpin::Core>{{0, 3, 0, {0}}}, {{0, 0}}, 2, "t");
  EXPECT_FALSE(tfpin::decode_topology(tfpin::encode_topology(package, "k"), "k", why));
  const Topology order(std::vector<tfpin::Core>{{1, 0, 0, {0}}, {0, 0, 0, {1}}}, {{0, 0}}, 1, "t");
  EXPECT_FALSE(tfpin::decode_topology(tfpin::encode_topology(order, "k"), "k", why));
  // Sealed by hand: a blank line does not end the data early, a stray word is not skipped.
  const std::string body = "tfpin-topology-cache 1\nkey k\npackages 1\nnuma 0 0\ncore 0 0 0 0\n";
  ASSERT_TRUE(tfpin::decode_topology(tfpin::seal_topology_text(body), "k", why)) << why;
  EXPECT_FALSE(
      tfpin::decode_topology(tfpin::seal_topology_text(body + "\ncore 1 0 0 0\n"), "k", why));
  EXPECT_EQ(why, "empty line");
  EXPECT_FALSE(tfpin::decode_topology(tfpin::seal_topology_text(body + "cpu 1\n"), "k", why));
  EXPECT_FALSE(
      tfpin::decode_topology(tfpin::seal_topology_text(body + "core 1 0 0 1 x\n"), "k", why));
  EXPECT_FALSE(tfpin::decode_topology(tfpin::seal_topology_text(body + "numa 1 0\n"), "k", why));
}

// The key names the machine's possible CPUs and NUMA nodes: a sealed body that contradicts it (a
// core on an undeclared node, a hardware thread the key does not have, one beyond any CPU tfpin
// can name) is refused.
TEST(TopologyCache, DataThatContradictsTheKeyIsRefused) {
  const std::string key = "format=1;cpus=0-3/0-3/0-3;nodes=0/0";
  const std::string head = "tfpin-topology-cache 1\nkey " + key + "\npackages 1\nnuma 0 0\n";
  std::string why;
  ASSERT_TRUE(tfpin::decode_topology(tfpin::seal_topology_text(head + "core 0 0 0 0 1\ncore 1 0 0 2 3\n"),
                                     key, why))
      << why;
  const std::vector<std::pair<std::string, std::string>> bad = {
      {"core 0 0 1 0\n", "a core on NUMA node 1, which the file does not declare"},
      {"core 0 0 0 4294967295\n", "hardware thread 4294967295"},
      {"core 0 0 0 4\n", "hardware thread 4 is not among the key's possible CPUs (0-3)"},
  };
  for (const auto& [lines, says] : bad) {
    EXPECT_FALSE(tfpin::decode_topology(tfpin::seal_topology_text(head + lines), key, why)) << lines;
    EXPECT_NE(why.find(says), std::string::npos) << why;
  }
  const std::string two_nodes = "tfpin-topology-cache 1\nkey " + key +
                                "\npackages 1\nnuma 0 0\nnuma 1 0\ncore 0 0 1 0\n";
  EXPECT_FALSE(tfpin::decode_topology(tfpin::seal_topology_text(two_nodes), key, why));
  EXPECT_NE(why.find("NUMA node 1 is not among the key's possible nodes (0)"), std::string::npos)
      << why;
  // 699,999 cores of one thread each: far more than the key's CPUs.
  std::string many = head;
  for (unsigned i = 0; i < 699999; ++i) many += fmt::format("core {} 0 0 {}\n", i, i);
  EXPECT_FALSE(tfpin::decode_topology(tfpin::seal_topology_text(many), key, why));
  // Without CPU and node lists in the key (a test's key), the thread still has to be one tfpin
  // can name.
  const std::string bare = "tfpin-topology-cache 1\nkey k\npackages 1\nnuma 0 0\n";
  EXPECT_FALSE(tfpin::decode_topology(tfpin::seal_topology_text(bare + "core 0 0 0 4294967295\n"),
                                      "k", why));
  EXPECT_FALSE(tfpin::decode_topology(tfpin::seal_topology_text(bare + "core 0 0 1 0\n"), "k", why));
}

// load_host_topology against a directory of this test's own, with a "live" load that is a fixture
// machine (hwloc's answer for this host) and a file that describes another machine: whenever the
// file must not be trusted, the result is the live machine and its plans, with one warning.
class CacheDirectory : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (files owned by another user)";
    // Not under /tmp: every directory on the way to a cache must be writable by root only.
    char templ[] = "/run/tfpin-topology-cache-XXXXXX";
    ASSERT_NE(::mkdtemp(templ), nullptr);
    dir_ = templ;
    ::chmod(dir_.c_str(), 0755);
    options_.directory = dir_;
    options_.owner = 0;
    ASSERT_TRUE(key_);
  }
  void TearDown() override {
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }
  [[nodiscard]] std::string file() const { return dir_ + "/topology.cache"; }
  // The other machine, written as a valid cache for this host (then tampered with by a test).
  void write_other_machine(const std::string& key) {
    ASSERT_EQ(tfpin::write_topology_cache(dir_, other_, key), "");
  }
  tfpin::CachedTopology load() {
    return tfpin::load_host_topology(options_, [this] {
      ++live_loads_;
      return live_;
    });
  }
  // The result is the live machine, after one warning naming `why`.
  void expect_live(const tfpin::CachedTopology& got, const std::string& why) {
    EXPECT_FALSE(got.from_cache);
    EXPECT_NE(got.warning.find(why), std::string::npos) << got.warning;
    EXPECT_EQ(got.warning.find('\n'), std::string::npos);
    EXPECT_EQ(plans(got.topology), plans(live_));
  }

  std::string dir_;
  tfpin::TopologyCacheOptions options_;
  std::optional<std::string> key_ = tfpin::host_topology_key();
  // The files are keyed by this host's CPUs and NUMA nodes, which their data must not contradict:
  // the live machine is this host's, the other one the same hardware threads in one core of one
  // more package.
  Topology live_ = Topology::host();
  Topology other_ = same_threads_in_one_core(live_);
  int live_loads_ = 0;
};

TEST_F(CacheDirectory, FirstLoadIsLiveAndWritesRootsFileThenItIsRead) {
  const tfpin::CachedTopology first = load();
  EXPECT_FALSE(first.from_cache);
  EXPECT_EQ(first.warning, "");
  struct stat st {};
  ASSERT_EQ(::stat(file().c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, 0U);
  EXPECT_EQ(st.st_mode & 07777U, 0644U);
  const tfpin::CachedTopology second = load();
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.warning, "");
  EXPECT_EQ(live_loads_, 1);
  expect_same_machine(second.topology, live_);
  EXPECT_EQ(plans(second.topology), plans(live_));
  // No temporary file is left behind.
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir_), {}), 1);
}

TEST_F(CacheDirectory, MissingDirectoryIsCreatedRootOnly) {
  options_.directory = dir_ + "/run-tfpin";
  EXPECT_EQ(load().warning, "");
  struct stat st {};
  ASSERT_EQ(::stat(options_.directory.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777U, 0755U);
  EXPECT_TRUE(load().from_cache);
}

TEST_F(CacheDirectory, DamagedFileIsIgnoredAndRewritten) {
  write_other_machine(*key_);
  {
    std::fstream f(file(), std::ios::in | std::ios::out);
    f.seekp(60);
    f.put('9');
  }
  expect_live(load(), "damaged (checksum mismatch); ignored and rewritten");
  EXPECT_TRUE(load().from_cache);
  EXPECT_EQ(live_loads_, 1);
}

TEST_F(CacheDirectory, TruncatedFileIsIgnored) {
  write_other_machine(*key_);
  std::filesystem::resize_file(file(), 100);
  expect_live(load(), "truncated");
}

TEST_F(CacheDirectory, FileOfAnotherBootOrMachineIsIgnored) {
  write_other_machine("format=1;boot=another");
  expect_live(load(), "stale or foreign");
  EXPECT_TRUE(load().from_cache);
}

TEST_F(CacheDirectory, FileOwnedByAnotherUserIsIgnored) {
  write_other_machine(*key_);
  ASSERT_EQ(::chown(file().c_str(), 65534, 65534), 0);
  expect_live(load(), "the file is owned by uid 65534, not 0");
}

TEST_F(CacheDirectory, FileWritableByOthersIsIgnored) {
  write_other_machine(*key_);
  ASSERT_EQ(::chmod(file().c_str(), 0666), 0);
  expect_live(load(), "the file is writable by group or others (mode 0666)");
}

TEST_F(CacheDirectory, UnsafeDirectoryIsNeitherReadNorWritten) {
  write_other_machine(*key_);
  ASSERT_EQ(::chmod(dir_.c_str(), 01777), 0);
  expect_live(load(), "the directory is writable by group or others (mode 1777)");
  ASSERT_EQ(::chmod(dir_.c_str(), 0755), 0);
  ASSERT_EQ(::chown(dir_.c_str(), 65534, 65534), 0);
  expect_live(load(), "the directory is owned by uid 65534, not 0");
  // Still the other machine's file: nothing was written into a directory that is not safe.
  ASSERT_EQ(::chown(dir_.c_str(), 0, 0), 0);
  EXPECT_TRUE(load().from_cache);
  expect_same_machine(load().topology, other_);
}

TEST_F(CacheDirectory, SymbolicLinkIsNotFollowed) {
  const std::string elsewhere = dir_ + "/elsewhere";
  std::filesystem::create_directory(elsewhere);
  ASSERT_EQ(tfpin::write_topology_cache(elsewhere, other_, *key_), "");
  std::filesystem::create_symlink(elsewhere + "/topology.cache", file());
  expect_live(load(), "cannot open");
}

TEST_F(CacheDirectory, HwlocEnvironmentBypassesTheCache) {
  write_other_machine(*key_);
  ASSERT_EQ(::setenv("HWLOC_XMLFILE", "/nonexistent.xml", 1), 0);
  const tfpin::CachedTopology got = load();
  ::unsetenv("HWLOC_XMLFILE");
  EXPECT_FALSE(got.from_cache);
  EXPECT_EQ(got.warning, "");
  EXPECT_EQ(plans(got.topology), plans(live_));
}

TEST_F(CacheDirectory, NoDirectoryMeansNoCache) {
  options_.directory.clear();
  EXPECT_FALSE(load().from_cache);
  EXPECT_FALSE(load().from_cache);
  EXPECT_EQ(live_loads_, 2);
}

TEST_F(CacheDirectory, OnlyTheOwnerWrites) {
  options_.owner = 65534;  // this process (root) is not the cache's owner: it only reads
  ASSERT_EQ(::chown(dir_.c_str(), 65534, 65534), 0);
  EXPECT_EQ(load().warning, "");
  EXPECT_FALSE(std::filesystem::exists(file()));
}

// Every directory on the way to the cache must be root's and writable by root only: otherwise its
// owner (or group) could exchange the cache directory for a link while root writes.
TEST_F(CacheDirectory, AncestorAnotherAccountControlsIsRefused) {
  const std::string shared = dir_ + "/shared";
  ASSERT_TRUE(std::filesystem::create_directory(shared));
  ASSERT_EQ(::chmod(shared.c_str(), 0755), 0);
  options_.directory = shared + "/cache";
  ASSERT_EQ(::chown(shared.c_str(), 65534, 65534), 0);
  expect_live(load(), shared + " is owned by uid 65534 (every directory on the way must be root's)");
  ASSERT_EQ(::chown(shared.c_str(), 0, 0), 0);
  ASSERT_EQ(::chmod(shared.c_str(), 0775), 0);
  expect_live(load(), shared + " is writable by group or others (mode 0775;");
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);  // sticky, as /tmp: a user could take the name first
  expect_live(load(), shared + " is writable by group or others (mode 1777;");
  EXPECT_FALSE(std::filesystem::exists(options_.directory));
  ASSERT_EQ(::chmod(shared.c_str(), 0755), 0);
  EXPECT_EQ(load().warning, "");
  EXPECT_TRUE(load().from_cache);
}

TEST_F(CacheDirectory, TrailingDotAndDoubleSlashNameTheSameDirectory) {
  options_.directory = dir_ + "//cache/.";
  EXPECT_EQ(load().warning, "");
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_ + "/cache/topology.cache"));
  EXPECT_TRUE(load().from_cache);
}

TEST_F(CacheDirectory, LinksOnTheWayAreFollowedOnlyFromRootsDirectories) {
  // As /var/run -> /run: a link root placed in a directory only root writes.
  ASSERT_TRUE(std::filesystem::create_directory(dir_ + "/real"));
  std::filesystem::create_directory_symlink("real", dir_ + "/link");
  options_.directory = dir_ + "/link/../link/./cache";
  EXPECT_EQ(load().warning, "");
  EXPECT_TRUE(std::filesystem::is_regular_file(dir_ + "/real/cache/topology.cache"));
  EXPECT_TRUE(load().from_cache);
  // The same link in a directory another account owns is not followed.
  const std::string shared = dir_ + "/shared";
  ASSERT_TRUE(std::filesystem::create_directory(shared));
  std::filesystem::create_directory_symlink(dir_ + "/real/cache", shared + "/cache");
  ASSERT_EQ(::chown(shared.c_str(), 65534, 65534), 0);
  options_.directory = shared + "/cache";
  expect_live(load(), shared + " is owned by uid 65534");
}

// The attack the rule above stops, as the account that owns a directory on the way would run it:
// exchange the cache directory with a link to a directory of root's, over and over, while root
// (re)writes the cache. Within 200 writes, not one file of root's may land in the link's target.
TEST_F(CacheDirectory, SwappedEntryOnTheWayNeverRedirectsRootsWrites) {
  const std::string shared = dir_ + "/shared";
  const std::string secret = dir_ + "/secret";
  ASSERT_TRUE(std::filesystem::create_directory(shared));
  ASSERT_TRUE(std::filesystem::create_directory(shared + "/cache"));
  ASSERT_TRUE(std::filesystem::create_directory(secret));
  ASSERT_EQ(::chmod(shared.c_str(), 0755), 0);
  ASSERT_EQ(::chmod((shared + "/cache").c_str(), 0755), 0);
  ASSERT_EQ(::chmod(secret.c_str(), 0700), 0);
  std::filesystem::create_directory_symlink(secret, shared + "/decoy");
  ASSERT_EQ(::lchown((shared + "/decoy").c_str(), 65534, 65534), 0);
  ASSERT_EQ(::chown(shared.c_str(), 65534, 65534), 0);
  // The real cache directory, whatever its name at a given moment: emptied after each round so
  // that every round writes.
  const int real = ::open((shared + "/cache").c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
  ASSERT_GE(real, 0);
  options_.directory = shared + "/cache";

  const pid_t attacker = ::fork();
  ASSERT_GE(attacker, 0);
  if (attacker == 0) {
    if (::setgid(65534) != 0 || ::setuid(65534) != 0) ::_exit(1);
    const std::string a = shared + "/cache";
    const std::string b = shared + "/decoy";
    for (;;) ::syscall(SYS_renameat2, AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE);
  }
  int redirected = 0;
  for (int round = 0; round < 200; ++round) {
    const tfpin::CachedTopology got = load();
    if (round == 0) {
      EXPECT_NE(got.warning.find(shared + " is owned by uid 65534"), std::string::npos)
          << got.warning;
    }
    ::unlinkat(real, "topology.cache", 0);
    redirected += static_cast<int>(std::distance(std::filesystem::directory_iterator(secret), {}));
    for (const auto& entry : std::filesystem::directory_iterator(secret)) {
      std::filesystem::remove(entry.path());
    }
  }
  // The attacker ran all along (a failed setuid would have ended it: no attack, no test).
  EXPECT_EQ(::waitpid(attacker, nullptr, WNOHANG), 0) << "the swapping process was not running";
  ::kill(attacker, SIGKILL);
  ::waitpid(attacker, nullptr, 0);
  ::close(real);
  EXPECT_EQ(redirected, 0) << "root wrote into " << secret << " through the swapped link";
  struct stat st {};
  ASSERT_EQ(::stat(secret.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777U, 0700U);
}
