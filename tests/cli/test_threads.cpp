// Thread settings: flags > TF_NUM_*_THREADS / OMP_NUM_THREADS > the TFPIN_* plan > computed.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "tfpin/error.hpp"
#include "tfpin/topology.hpp"
#include "threads.hpp"

namespace tfpin::cli {
namespace {

using ::testing::HasSubstr;

EnvGetter env(std::map<std::string, std::string> vars) {
  return [vars](const std::string& name) -> std::optional<std::string> {
    auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

unsigned cores() { return static_cast<unsigned>(current_affinity().size()); }

TEST(Threads, DefaultIsOneLaneOverEveryCore) {
  ThreadSettings s = resolve_threads({}, env({}));
  EXPECT_EQ(s.lanes, 1u);
  EXPECT_EQ(s.intra, cores());
  ASSERT_EQ(s.lane_cpus.size(), 1u);
  EXPECT_EQ(s.lane_cpus[0].size(), cores());
  EXPECT_EQ(s.cpus_source, "computed");
}

TEST(Threads, FlagsWinOverEnvironment) {
  ThreadRequest r;
  r.intra = 1;
  r.inter = 1;
  ThreadSettings s = resolve_threads(r, env({{"TF_NUM_INTRAOP_THREADS", "2"},
                                             {"OMP_NUM_THREADS", "2"},
                                             {"TF_NUM_INTEROP_THREADS", "2"}}));
  EXPECT_EQ(s.intra, 1u);
  EXPECT_EQ(s.lanes, 1u);
  EXPECT_EQ(s.intra_source, "--num_intra_threads");
}

TEST(Threads, TensorFlowVariablesWinOverOpenMP) {
  ThreadSettings s =
      resolve_threads({}, env({{"TF_NUM_INTRAOP_THREADS", "1"}, {"OMP_NUM_THREADS", "2"}}));
  EXPECT_EQ(s.intra, 1u);
  EXPECT_EQ(s.intra_source, "TF_NUM_INTRAOP_THREADS");
  s = resolve_threads({}, env({{"OMP_NUM_THREADS", "1,1"}}));
  EXPECT_EQ(s.intra, 1u);
  EXPECT_EQ(s.intra_source, "OMP_NUM_THREADS");
  s = resolve_threads({}, env({{"TF_NUM_INTRAOP_THREADS", "0"}}));  // 0: let tfpin choose
  EXPECT_EQ(s.intra_source, "default");
}

TEST(Threads, PlanFromTfpinIsUsed) {
  if (cores() < 2) GTEST_SKIP() << "needs 2 cores";
  const auto cpus = current_affinity();
  const std::string list = std::to_string(cpus[1]) + "," + std::to_string(cpus[0]);
  ThreadSettings s = resolve_threads(
      {}, env({{"TFPIN_CPUS", list}, {"TFPIN_INTEROP", "2"}, {"TFPIN_INTRA", "1"}}));
  EXPECT_EQ(s.lanes, 2u);
  EXPECT_EQ(s.intra, 1u);
  EXPECT_EQ(s.cpus_source, "TFPIN_CPUS");
  ASSERT_EQ(s.lane_cpus.size(), 2u);
  EXPECT_EQ(s.lane_cpus[0], std::vector<unsigned>{cpus[1]});  // the plan's lane order is kept
  EXPECT_EQ(s.lane_cpus[1], std::vector<unsigned>{cpus[0]});
  // A flag that disagrees with the plan: lanes are recomputed inside the plan's cpus.
  ThreadRequest r;
  r.inter = 1;
  s = resolve_threads(r, env({{"TFPIN_CPUS", list}, {"TFPIN_INTEROP", "2"}, {"TFPIN_INTRA", "1"}}));
  EXPECT_EQ(s.lanes, 1u);
  EXPECT_EQ(s.intra, 2u);
  EXPECT_EQ(s.cpus_source, "computed");
}

TEST(Threads, MoreThreadsThanCoresIsRefused) {
  ThreadRequest r;
  r.intra = cores() + 1;
  try {
    resolve_threads(r, env({}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_request);
    EXPECT_THAT(e.what(), HasSubstr("--num_intra_threads=" + std::to_string(cores() + 1)));
    EXPECT_THAT(e.what(), HasSubstr("more than the " + std::to_string(cores()) + " cores allowed"));
  }
}

TEST(Threads, BadEnvironmentValueNamesTheVariable) {
  try {
    resolve_threads({}, env({{"TF_NUM_INTEROP_THREADS", "two"}}));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("TF_NUM_INTEROP_THREADS=two is not a whole number"));
  }
}

}  // namespace
}  // namespace tfpin::cli
