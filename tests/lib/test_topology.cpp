#include <gtest/gtest.h>

#include "plan_checks.hpp"
#include "tfpin/error.hpp"
#include "tfpin/topology.hpp"

using tfpin::Topology;

TEST(Topology, HostHasCoresAndTheProcessAffinityIsInside) {
  const Topology host = Topology::host();
  ASSERT_FALSE(host.cores().empty());
  std::set<unsigned> pus;
  for (const auto& core : host.cores()) pus.insert(core.pus.begin(), core.pus.end());
  for (unsigned cpu : tfpin::current_affinity()) EXPECT_TRUE(pus.contains(cpu)) << cpu;
}

TEST(Topology, SyntheticWithLinuxStyleHyperthreadNumbering) {
  const Topology t = Topology::load(fixture("broadwell-2x18-ht.xml"));
  ASSERT_EQ(t.cores().size(), 36U);
  EXPECT_EQ(t.pu_count(), 72U);
  EXPECT_EQ(t.package_count(), 2U);
  ASSERT_EQ(t.numa_nodes().size(), 2U);
  EXPECT_EQ(t.cores()[0].pus, (std::vector<unsigned>{0, 36}));
  EXPECT_EQ(t.cores()[17].numa, 0U);
  EXPECT_EQ(t.cores()[18].pus, (std::vector<unsigned>{18, 54}));
  EXPECT_EQ(t.cores()[18].numa, 1U);
  EXPECT_EQ(t.cores()[18].package, 1U);
}

TEST(Topology, KnlSnc4HasUnevenNodes) {
  const Topology t = Topology::load(fixture("knl-68x4-snc4.xml"));
  ASSERT_EQ(t.cores().size(), 68U);
  EXPECT_EQ(t.pu_count(), 272U);
  std::map<unsigned, int> cores_per_node;
  for (const auto& core : t.cores()) ++cores_per_node[core.numa];
  EXPECT_EQ(cores_per_node, (std::map<unsigned, int>{{0, 18}, {1, 18}, {2, 16}, {3, 16}}));
  EXPECT_EQ(t.cores()[40].pus, (std::vector<unsigned>{40, 108, 176, 244}));
}

TEST(Topology, OfflinePusAreAbsent) {
  const Topology t = Topology::load(fixture("offline-8x2.xml"));
  ASSERT_EQ(t.cores().size(), 7U);
  EXPECT_EQ(t.pu_count(), 13U);
  EXPECT_EQ(t.cores()[5].pus, (std::vector<unsigned>{5}));
}

TEST(Topology, SyntheticDescriptionString) {
  const Topology t = Topology::load("package:2 numa:1 core:20 pu:1");
  EXPECT_EQ(t.cores().size(), 40U);
  EXPECT_EQ(t.numa_nodes().size(), 2U);
  EXPECT_EQ(t.source(), "synthetic:package:2 numa:1 core:20 pu:1");
}

TEST(Topology, BadDescriptionNamesTheValue) {
  try {
    Topology::load("no-such-file-or-description");
    FAIL() << "loaded nonsense";
  } catch (const tfpin::Error& e) {
    EXPECT_EQ(e.kind(), tfpin::ErrorKind::topology);
    EXPECT_NE(std::string(e.what()).find("'no-such-file-or-description'"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("synthetic"), std::string::npos);
  }
}
