// The engine reports the oneDNN it runs with: checked against what oneDNN itself prints in its
// verbose mode, and against the headers meson found at configure time.
#include <gtest/gtest.h>

#include <cstdlib>
#include <regex>
#include <string>

#include "tfpin/engine/graph.hpp"
#include "tfpin/engine/runtime.hpp"
#include "tfpin/engine/version.hpp"

namespace {

using namespace tfpin::engine;

TEST(OneDnnVersion, BuildVersionIsTheOneMesonFound) {
  EXPECT_EQ(onednn_build_version().text(), TFPIN_EXPECTED_ONEDNN_VERSION);
  EXPECT_EQ(onednn_build_version().runtime, "OpenMP");
}

TEST(OneDnnVersion, RuntimeVersionIsTheOneOneDnnPrints) {
  if (const std::string why = onednn_unusable_reason(); !why.empty()) GTEST_SKIP() << why;
  // oneDNN reads ONEDNN_VERBOSE once, at its first use: this test runs in a process of its own
  // (meson runs each gtest binary separately) and uses oneDNN nowhere before this line.
  // Level 2 prints at primitive creation, which Runtime::create does (both 2.x and 3.x).
  ASSERT_EQ(setenv("ONEDNN_VERBOSE", "2", 1), 0);
  ::testing::internal::CaptureStdout();
  Graph g;
  TensorId x = g.input("x", {1, 16, 4, 4});
  g.output(g.relu(x), "y");
  std::unique_ptr<Runtime> rt;
  const Status created = Runtime::create(g, CompileOptions{}, &rt);
  const std::string printed = ::testing::internal::GetCapturedStdout();
  ASSERT_TRUE(created.ok()) << created.message();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(printed, m, std::regex(R"(oneDNN v(\d+\.\d+\.\d+))"))) << printed;
  const LibraryVersion v = onednn_runtime_version();
  EXPECT_EQ(v.text(), m[1].str());
  EXPECT_EQ(v.runtime, "OpenMP");
  // A library of another major version than the headers would not even share the soname.
  EXPECT_EQ(v.major, onednn_build_version().major);
}

// Where oneDNN cannot run on this CPU the engine refuses with the reason instead of crashing in
// (or computing garbage with) oneDNN's kernels; elsewhere the reason is empty and it runs.
TEST(OneDnnUsable, RuntimeRefusesWhereOneDnnCannotRun) {
  Graph g;
  TensorId x = g.input("x", {1, 16, 4, 4});
  g.output(g.relu(x), "y");
  std::unique_ptr<Runtime> rt;
  const Status created = Runtime::create(g, CompileOptions{}, &rt);
  const std::string why = onednn_unusable_reason();
  const LibraryVersion v = onednn_runtime_version();
  if (v.major < 3 || (v.major == 3 && v.minor < 2)) {
    EXPECT_EQ(why, "") << "oneDNN " << v.text() << " guesses cache sizes where CPUID has none";
  }
  if (why.empty()) {
    EXPECT_TRUE(created.ok()) << created.to_string();
    EXPECT_NE(rt, nullptr);
  } else {
    EXPECT_EQ(created.code(), StatusCode::unsupported);
    EXPECT_EQ(created.message(), why);
    EXPECT_NE(why.find("CPUID leaf 0x8000001D"), std::string::npos) << why;
    EXPECT_NE(why.find(v.text()), std::string::npos) << why;
    EXPECT_EQ(rt, nullptr);
    EXPECT_FALSE(onednn_offers_winograd());
  }
}

}  // namespace
