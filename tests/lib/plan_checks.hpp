// Invariants every plan must satisfy, whatever the machine: used by the placement tests.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

#include "tfpin/placement.hpp"
#include "tfpin/topology.hpp"

inline std::string fixture(const std::string& name) { return std::string(TFPIN_FIXTURE_DIR) + "/" + name; }

inline void expect_plan_invariants(const tfpin::Topology& topo, const tfpin::Plan& plan) {
  std::map<unsigned, const tfpin::Core*> core_of;
  for (const auto& core : topo.cores()) {
    for (unsigned pu : core.pus) core_of[pu] = &core;
  }
  const std::set<unsigned> allowed(plan.allowed.begin(), plan.allowed.end());
  ASSERT_EQ(plan.lanes.size(), plan.interop);
  ASSERT_EQ(plan.threads, plan.interop * plan.intra);
  std::set<unsigned> seen_pus;
  std::set<const tfpin::Core*> seen_cores;
  for (const auto& lane : plan.lanes) {
    ASSERT_EQ(lane.cpus.size(), plan.intra);
    std::set<unsigned> lane_nodes;
    for (unsigned pu : lane.cpus) {
      ASSERT_TRUE(core_of.contains(pu)) << "cpu " << pu << " is not an online PU";
      EXPECT_TRUE(allowed.contains(pu)) << "cpu " << pu << " is outside the allowed set";
      EXPECT_TRUE(seen_pus.insert(pu).second) << "cpu " << pu << " used twice";
      if (plan.hyperthreads == tfpin::HyperthreadPolicy::one_per_core) {
        EXPECT_TRUE(seen_cores.insert(core_of[pu]).second)
            << "two threads share the core of cpu " << pu;
      }
      lane_nodes.insert(core_of[pu]->numa);
    }
    EXPECT_EQ(lane_nodes, std::set<unsigned>(lane.numa_nodes.begin(), lane.numa_nodes.end()));
    EXPECT_TRUE(lane_nodes.contains(lane.numa));
  }
}
