// Placement on the machines of the seed material (XML fixtures from tests/fixtures/generate.py)
// and on synthetic descriptions.
#include <gtest/gtest.h>

#include "plan_checks.hpp"
#include "tfpin/cpulist.hpp"
#include "tfpin/error.hpp"
#include "tfpin/placement.hpp"

using tfpin::HyperthreadPolicy;
using tfpin::MemoryPolicyKind;
using tfpin::PlacementRequest;
using tfpin::Topology;

namespace {

PlacementRequest request(std::optional<unsigned> threads, unsigned interop = 1) {
  PlacementRequest r;
  r.threads = threads;
  r.interop = interop;
  return r;
}

tfpin::Plan plan_for(const Topology& topo, const PlacementRequest& r) {
  tfpin::Plan plan = tfpin::compute_plan(topo, r);
  expect_plan_invariants(topo, plan);
  return plan;
}

std::vector<unsigned> cpus(const char* list) { return tfpin::parse_cpulist(list); }

// Each lane's CPUs as cpulists ("0-9"), to compare a whole plan in one line.
std::vector<std::string> lane_lists(const tfpin::Plan& plan) {
  std::vector<std::string> lists;
  for (const auto& lane : plan.lanes) lists.push_back(tfpin::format_cpulist(lane.cpus));
  return lists;
}

std::string error_of(const Topology& topo, const PlacementRequest& r,
                     tfpin::ErrorKind kind = tfpin::ErrorKind::invalid_request) {
  try {
    tfpin::compute_plan(topo, r);
  } catch (const tfpin::Error& e) {
    EXPECT_EQ(e.kind(), kind) << e.what();
    return e.what();
  }
  ADD_FAILURE() << "request accepted";
  return "";
}

class Placement : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    broadwell = new Topology(Topology::load(fixture("broadwell-2x18-ht.xml")));
    skylake = new Topology(Topology::load(fixture("skylake-2x20.xml")));
    platinum = new Topology(Topology::load(fixture("platinum8180-2x28-ht.xml")));
    knl_quad = new Topology(Topology::load(fixture("knl-68x4-quad.xml")));
    knl_snc4 = new Topology(Topology::load(fixture("knl-68x4-snc4.xml")));
  }
  static void TearDownTestSuite() {
    for (Topology* t : {broadwell, skylake, platinum, knl_quad, knl_snc4}) delete t;
  }
  static inline Topology* broadwell = nullptr;
  static inline Topology* skylake = nullptr;
  static inline Topology* platinum = nullptr;
  static inline Topology* knl_quad = nullptr;
  static inline Topology* knl_snc4 = nullptr;
};

}  // namespace

TEST_F(Placement, DefaultIsOneThreadPerAllowedCore) {
  const auto plan = plan_for(*broadwell, request(std::nullopt));
  EXPECT_EQ(plan.threads, 36U);
  EXPECT_EQ(plan.interop, 1U);
  EXPECT_EQ(plan.intra, 36U);
  // 36 threads on a 2x18 machine must straddle: first node whole, then the second.
  EXPECT_EQ(plan.lanes[0].cpus, cpus("0-35"));
  EXPECT_EQ(plan.lanes[0].numa_nodes, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(plan.memory.kind, MemoryPolicyKind::local);
}

TEST_F(Placement, BroadwellTwoLanesOnePerSocket) {
  const auto plan = plan_for(*broadwell, request(36, 2));
  EXPECT_EQ(plan.lanes[0].cpus, cpus("0-17"));
  EXPECT_EQ(plan.lanes[0].numa, 0U);
  EXPECT_EQ(plan.lanes[1].cpus, cpus("18-35"));
  EXPECT_EQ(plan.lanes[1].numa, 1U);
  EXPECT_EQ(plan.memory.kind, MemoryPolicyKind::local);
  EXPECT_EQ(plan.memory.nodes, (std::vector<unsigned>{0, 1}));
}

TEST_F(Placement, SmallLanesSpreadOverSocketsBeforeDoublingUp) {
  const auto plan = plan_for(*broadwell, request(8, 4));
  ASSERT_EQ(plan.lanes.size(), 4U);
  EXPECT_EQ(plan.lanes[0].cpus, cpus("0,1"));
  EXPECT_EQ(plan.lanes[1].cpus, cpus("18,19"));
  EXPECT_EQ(plan.lanes[2].cpus, cpus("2,3"));
  EXPECT_EQ(plan.lanes[3].cpus, cpus("20,21"));
}

TEST_F(Placement, OneLaneOnOneSocketPrefersMemoryThere) {
  const auto plan = plan_for(*broadwell, request(18, 1));
  EXPECT_EQ(plan.lanes[0].cpus, cpus("0-17"));
  EXPECT_EQ(plan.memory.kind, MemoryPolicyKind::preferred);
  EXPECT_EQ(plan.memory.nodes, (std::vector<unsigned>{0}));
}

TEST_F(Placement, HyperthreadsFillSiblingsCompactly) {
  PlacementRequest r = request(std::nullopt, 4);
  r.hyperthreads = HyperthreadPolicy::all;
  const auto plan = plan_for(*broadwell, r);
  EXPECT_EQ(plan.threads, 72U);
  EXPECT_EQ(plan.intra, 18U);
  // Lane 0: cores 0-8 of socket 0 with both their hardware threads.
  EXPECT_EQ(plan.lanes[0].cpus, cpus("0,36,1,37,2,38,3,39,4,40,5,41,6,42,7,43,8,44"));
  EXPECT_EQ(plan.lanes[1].numa, 1U);
  EXPECT_EQ(plan.lanes[1].cpus.front(), 18U);
  EXPECT_EQ(plan.lanes[2].cpus.front(), 9U);
  EXPECT_EQ(plan.lanes[3].cpus.front(), 27U);
}

// With hyperthreads, lanes take whole cores while there are enough, so they never share one.
TEST(PlacementHyperthreads, LanesDoNotShareCoresWhenThereAreEnough) {
  const Topology t = Topology::load("package:1 numa:1 core:4 pu:2");  // core c = PUs 2c, 2c+1
  PlacementRequest r = request(2, 2);
  r.hyperthreads = HyperthreadPolicy::all;
  auto plan = plan_for(t, r);
  EXPECT_EQ(plan.lanes[0].cpus, cpus("0"));
  EXPECT_EQ(plan.lanes[1].cpus, cpus("2"));
  r.threads = 6;
  plan = plan_for(t, r);
  EXPECT_EQ(plan.lanes[0].cpus, cpus("0-2"));
  EXPECT_EQ(plan.lanes[1].cpus, cpus("4-6"));
  r.threads = 8;
  r.interop = 8;  // eight lanes on four cores: sharing is unavoidable, every thread still placed
  plan = plan_for(t, r);
  EXPECT_EQ(plan.cpus(), cpus("0-7"));
}

TEST_F(Placement, HyperthreadLanesOnDistinctCoresAcrossSockets) {
  PlacementRequest r = request(8, 8);
  r.hyperthreads = HyperthreadPolicy::all;
  const auto plan = plan_for(*broadwell, r);
  std::set<unsigned> cores;
  for (const auto& lane : plan.lanes) cores.insert(lane.cpus[0] % 36);  // sibling of c is c + 36
  EXPECT_EQ(cores.size(), 8U);
  EXPECT_EQ(plan.lanes[0].numa, 0U);
  EXPECT_EQ(plan.lanes[1].numa, 1U);
}

TEST_F(Placement, PartialHyperthreadSiblingsCountOncePerCore) {
  PlacementRequest r = request(std::nullopt);
  r.allowed = cpus("0-3,40-43");  // cores 0-3 (first threads) and cores 4-7 (second threads only)
  const auto plan = plan_for(*broadwell, r);
  EXPECT_EQ(plan.threads, 8U);
  EXPECT_EQ(plan.lanes[0].cpus, cpus("0-3,40-43"));
  r.allowed = cpus("0-3,36-39");  // the same four cores, both threads each
  EXPECT_EQ(plan_for(*broadwell, r).threads, 4U);
}

TEST_F(Placement, SkylakeFourLanes) {
  const auto plan = plan_for(*skylake, request(40, 4));
  EXPECT_EQ(lane_lists(plan), (std::vector<std::string>{"0-9", "20-29", "10-19", "30-39"}));
  EXPECT_EQ((std::vector<unsigned>{plan.lanes[0].numa, plan.lanes[1].numa, plan.lanes[2].numa,
                                   plan.lanes[3].numa}),
            (std::vector<unsigned>{0, 1, 0, 1}));
}

TEST_F(Placement, PlatinumWithHyperthreadsPresentButUnused) {
  const auto plan = plan_for(*platinum, request(56, 2));
  EXPECT_EQ(plan.lanes[0].cpus, cpus("0-27"));
  EXPECT_EQ(plan.lanes[1].cpus, cpus("28-55"));
  EXPECT_EQ(plan.lanes[1].numa, 1U);
  // Asking for more than the 56 cores without --hyperthreads is refused, not silently doubled up.
  EXPECT_NE(error_of(*platinum, request(112, 2)).find("more than the 56 cores"), std::string::npos);
}

TEST_F(Placement, KnlQuadOneNode) {
  const auto plan = plan_for(*knl_quad, request(68, 4));
  EXPECT_EQ(plan.lanes[0].cpus, cpus("0-16"));
  EXPECT_EQ(plan.lanes[3].cpus, cpus("51-67"));
  EXPECT_EQ(plan.memory.kind, MemoryPolicyKind::local);  // one node: nothing to bind
}

TEST_F(Placement, KnlSnc4LanesFitTheirNodes) {
  const auto plan = plan_for(*knl_snc4, request(64, 4));
  EXPECT_EQ(lane_lists(plan), (std::vector<std::string>{"0-15", "18-33", "36-51", "52-67"}));
  for (unsigned i = 0; i < 4; ++i) {
    EXPECT_EQ(plan.lanes[i].numa, i);
    EXPECT_EQ(plan.lanes[i].numa_nodes.size(), 1U);
  }
}

TEST_F(Placement, KnlSnc4StraddlingLanesTouchFewNodes) {
  // 17-core lanes cannot fit the two 16-core nodes: each of those lanes borrows one core, and only
  // one.
  const auto plan = plan_for(*knl_snc4, request(68, 4));
  EXPECT_EQ(plan.lanes[0].numa_nodes.size(), 1U);
  EXPECT_EQ(plan.lanes[1].numa_nodes.size(), 1U);
  EXPECT_EQ(plan.lanes[2].numa_nodes.size(), 2U);
  EXPECT_EQ(plan.lanes[2].numa, 2U);
  EXPECT_EQ(plan.lanes[3].numa_nodes.size(), 2U);
  EXPECT_EQ(plan.lanes[3].numa, 3U);
}

TEST_F(Placement, KnlSnc4SingleNodePrefersItsMemory) {
  PlacementRequest r = request(std::nullopt);
  r.allowed = cpus("52-67");
  const auto plan = plan_for(*knl_snc4, r);
  EXPECT_EQ(plan.threads, 16U);
  EXPECT_EQ(plan.memory.kind, MemoryPolicyKind::preferred);
  EXPECT_EQ(plan.memory.nodes, (std::vector<unsigned>{3}));
}

TEST(PlacementSynthetic, OneCoreMachine) {
  const Topology one = Topology::load("core:1 pu:1");
  const auto plan = plan_for(one, request(std::nullopt));
  EXPECT_EQ(plan.threads, 1U);
  EXPECT_EQ(plan.lanes[0].cpus, cpus("0"));
  EXPECT_NE(error_of(one, request(2)).find("more than the 1 cores allowed"), std::string::npos);
  EXPECT_NE(error_of(one, request(std::nullopt, 2)).find("--interop=2 needs at least 2 cores"),
            std::string::npos);
}

TEST(PlacementSynthetic, AllowedSetWithHoles) {
  const Topology t = Topology::load("package:1 numa:1 core:16 pu:1");
  PlacementRequest r = request(8, 2);
  r.allowed = cpus("0-3,8-11");
  const auto plan = plan_for(t, r);
  EXPECT_EQ(plan.lanes[0].cpus, cpus("0-3"));
  EXPECT_EQ(plan.lanes[1].cpus, cpus("8-11"));
  r.threads = 10;
  EXPECT_NE(error_of(t, r).find("more than the 8 cores allowed (CPUs 0-3,8-11)"),
            std::string::npos);
}

TEST(PlacementSynthetic, OfflinePusAreIgnoredWithAWarning) {
  const Topology t = Topology::load(fixture("offline-8x2.xml"));
  EXPECT_EQ(plan_for(t, request(std::nullopt)).threads, 7U);
  PlacementRequest r = request(std::nullopt);
  r.allowed = cpus("8-15");  // second threads only; 13 and 15 are offline
  const auto plan = plan_for(t, r);
  EXPECT_EQ(plan.lanes[0].cpus, cpus("8-12,14"));
  ASSERT_EQ(plan.warnings.size(), 1U);
  EXPECT_NE(plan.warnings[0].find("13,15"), std::string::npos) << plan.warnings[0];
  // From the kernel, an allowed set hwloc does not know is the machine's fault (a site may
  // tolerate it); from --cpuset, the user's.
  r.allowed = cpus("7,15");
  EXPECT_EQ(error_of(t, r, tfpin::ErrorKind::topology),
            "hwloc and the kernel disagree: the CPUs this process may use (7,15) are not online in "
            "hwloc's topology (online: 0-6,8-12,14)");
  r.allowed_by_user = true;
  EXPECT_EQ(
      error_of(t, r),
      "--cpuset=7,15: the allowed CPU set contains no online CPU of this topology (valid: CPUs "
      "within 0-6,8-12,14)");
}

TEST(PlacementErrors, NameTheOptionValueAndValidChoices) {
  const Topology t = Topology::load("package:2 numa:1 core:18 pu:1");
  PlacementRequest r = request(3, 2);
  r.names = {"--tf-threads", "--tf-interop"};
  EXPECT_EQ(error_of(t, r),
            "--tf-threads=3 is not a multiple of --tf-interop=2: every inter-op lane gets the same "
            "number of cores (valid --tf-threads with --tf-interop=2: 2, 4, 6, ..., 36)");
  r = request(0);
  EXPECT_EQ(error_of(t, r),
            "--threads=0 is not valid: use a positive multiple of --interop=1 up to 36 (valid: 1, "
            "2, 3, ..., 36)");
  r = request(4, 0);
  EXPECT_EQ(
      error_of(t, r),
      "--interop=0 is not valid: the number of inter-op lanes must be at least 1 (valid: 1..36)");
  r = request(40, 2);
  EXPECT_EQ(
      error_of(t, r),
      "--threads=40 is more than the 36 cores allowed (CPUs 0-35); valid with --interop=2: 2, "
      "4, 6, ..., 36");
}

TEST(PlacementErrors, MultipleCheckWithoutKnownCores) {
  EXPECT_NO_THROW(tfpin::check_multiple({}, 4, 2));
  try {
    tfpin::check_multiple({"--tf-threads", "--tf-interop"}, 3, 2);
    ADD_FAILURE() << "3 accepted as a multiple of 2";
  } catch (const tfpin::Error& e) {
    EXPECT_STREQ(e.what(),
                 "--tf-threads=3 is not a multiple of --tf-interop=2: every inter-op lane gets the "
                 "same number of cores (valid --tf-threads with --tf-interop=2: 2, 4, 6, ...)");
  }
}

// The shim pins CPU ids 0..4095 only: a plan that needs a higher one is refused where it is made.
TEST(PlacementErrors, CpuIdsBeyondTheShimsLimitAreRefused) {
  const Topology t = Topology::load("package:1 numa:1 core:5000 pu:1");
  EXPECT_EQ(plan_for(t, request(4)).cpus(), cpus("0-3"));
  // The machine's numbering, not the user's request: a site may tolerate it (on_error=warn).
  EXPECT_EQ(error_of(t, request(std::nullopt), tfpin::ErrorKind::topology),
            "--threads=5000 would use CPUs 4096-4999, outside the CPU ids tfpin's shim can pin to "
            "(valid: allowed CPUs within 0-4095)");
  PlacementRequest r = request(2);
  r.allowed = std::vector<unsigned>{4095, 4096, 4097};
  r.allowed_by_user = true;
  EXPECT_EQ(error_of(t, r),
            "--threads=2 would use CPUs 4096, outside the CPU ids tfpin's shim can pin to (valid: "
            "allowed CPUs within 0-4095)");
}

TEST(PlacementErrors, ClampShrinksToTheLargestValidCount) {
  const Topology t = Topology::load("package:1 numa:1 core:10 pu:1");
  PlacementRequest r = request(16, 4);
  r.clamp = true;
  const auto plan = plan_for(t, r);
  EXPECT_EQ(plan.threads, 8U);
  EXPECT_EQ(plan.intra, 2U);
  ASSERT_EQ(plan.warnings.size(), 1U);
  EXPECT_NE(plan.warnings[0].find("using 8"), std::string::npos);
}

// Property check over many shapes: invariants hold and lanes straddle only when unavoidable.
TEST(PlacementProperty, LanesStraddleOnlyWhenNoNodeHasRoom) {
  const Topology t = Topology::load("package:2 numa:2 core:6 pu:2");  // 4 nodes x 6 cores
  for (unsigned interop = 1; interop <= 24; ++interop) {
    for (unsigned threads = interop; threads <= 24; threads += interop) {
      const auto plan = plan_for(t, request(threads, interop));
      const unsigned lane = threads / interop;
      const unsigned fitting = std::min(interop, 4 * (6 / lane));
      unsigned straddling = 0;
      for (const auto& l : plan.lanes) straddling += l.numa_nodes.size() > 1 ? 1 : 0;
      EXPECT_EQ(straddling, interop - fitting) << threads << "/" << interop;
    }
  }
}
