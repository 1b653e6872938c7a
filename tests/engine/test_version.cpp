// The engine reports the oneDNN it runs with: checked against what oneDNN itself prints in its
// verbose mode, and against the headers meson found at configure time.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "tfpin/engine/graph.hpp"
#include "tfpin/engine/runtime.hpp"
#include "tfpin/engine/version.hpp"

// The engine's internal header (tests/engine/meson.build gives this suite the engine's sources).
#include "onednn_cache_sizes.hpp"

namespace dnnl::impl::cpu::platform {
unsigned get_per_core_cache_size(int level);  // oneDNN's, and tfpin's in its place
}  // namespace dnnl::impl::cpu::platform

extern char** environ;

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
  if (!detail::onednn_reads_amd_cache_leaf()) {
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

// tfpin answers oneDNN's cache-size query (onednn_cache_sizes.hpp): with the operating system's
// figures where oneDNN >= 3.2 would read a zeroed CPUID leaf, with oneDNN's own answer elsewhere.
bool onednn_reads_the_leaf() { return detail::onednn_reads_amd_cache_leaf(); }

// The gate itself, against the release that started reading the leaf alone (oneDNN 3.2).
TEST(OneDnnCacheSizes, GateIsOneDnnThreeTwoOrLater) {
  const LibraryVersion v = onednn_runtime_version();
  EXPECT_EQ(onednn_reads_the_leaf(), v.major > 3 || (v.major == 3 && v.minor >= 2)) << v.text();
}

TEST(OneDnnCacheSizes, SystemFiguresArePlausible) {
  for (int level : {1, 2, 3}) {
    const unsigned bytes = detail::os_cache_size(level);
    EXPECT_GE(bytes, 4096U) << "level " << level;
    EXPECT_LE(bytes, 64U << 20) << "level " << level;
  }
  EXPECT_GE(detail::os_cache_size(2), detail::os_cache_size(1));
  EXPECT_EQ(detail::os_cache_size(0), 0U);
  EXPECT_EQ(detail::os_cache_size(4), 0U);
}

TEST(OneDnnCacheSizes, ReplacesOneDnnsAnswerOnlyWhereTheLeafIsZeroed) {
  EXPECT_EQ(detail::cache_sizes_wanted(),
            onednn_reads_the_leaf() && detail::amd_cache_leaf_zeroed());
  using Query = unsigned (*)(int);
  const auto onednns = reinterpret_cast<Query>(
      dlsym(RTLD_NEXT, "_ZN4dnnl4impl3cpu8platform23get_per_core_cache_sizeEi"));
  for (int level : {1, 2, 3}) {
    const unsigned answer = dnnl::impl::cpu::platform::get_per_core_cache_size(level);
    if (detail::cache_sizes_wanted()) {
      EXPECT_EQ(answer, detail::os_cache_size(level)) << "level " << level;
    } else if (onednns != nullptr) {
      // (Safe to call here: either the leaf describes the caches, or oneDNN < 3.2 guesses.)
      EXPECT_EQ(answer, onednns(level)) << "level " << level;
    }
  }
}

// Debian's oneDNN 3.x exports the query and calls it through its PLT, and this executable exports
// tfpin's definition (engine/meson.build), so every libdnnl call of it reaches tfpin's. oneDNN 2.x
// makes no such call (it guesses where the leaf is zeroed).
TEST(OneDnnCacheSizes, LibdnnlCallsReachTfpinsDefinition) {
  const std::string why = detail::cache_sizes_not_supplied_reason();
  if (onednn_reads_the_leaf()) {
    EXPECT_EQ(why, "");
  } else {
    EXPECT_NE(why, "");
  }
}

// Where tfpin supplies the sizes, oneDNN's kernels run and compute right: a 3x3 convolution (with
// a ReLU) against a direct sum (the engine suites then check every operator and model).
TEST(OneDnnCacheSizes, ConvolutionRunsWhereItSuppliesThem) {
  if (!detail::cache_sizes_wanted())
    GTEST_SKIP() << "tfpin does not answer oneDNN's cache-size query here (oneDNN < 3.2, or CPUID "
                    "describes the caches)";
  EXPECT_EQ(onednn_unusable_reason(), "");
  constexpr int n = 2, c = 32, k = 48, h = 14, w = 14;
  std::vector<float> x(n * c * h * w), weights(k * c * 9), bias(k);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 13) / 13 - 0.5f;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    weights[i] = static_cast<float>((i * 104729) % 17) / 17 - 0.5f;
  }
  for (int i = 0; i < k; ++i) bias[i] = 0.01f * static_cast<float>(i) - 0.2f;
  Graph g;
  const TensorId in = g.input("x", {n, c, h, w});
  Conv2D attrs;
  attrs.padding = {1, 1, 1, 1};
  g.output(g.relu(g.convolution(in, g.constant("w", {k, c, 3, 3}, weights),
                                g.constant("b", {k}, bias), attrs)),
           "y");
  std::unique_ptr<Runtime> rt;
  const Status created = Runtime::create(g, CompileOptions{}, &rt);
  ASSERT_TRUE(created.ok()) << created.to_string();
  std::vector<float> y(n * k * h * w, -1.0f);
  const ExternalInput inputs[] = {{"x", x.data()}};
  const ExternalOutput outputs[] = {{"y", y.data()}};
  ASSERT_TRUE(rt->setup(inputs, outputs).ok());
  ASSERT_TRUE(rt->run().ok());
  double worst = 0;
  for (int b = 0; b < n; ++b) {
    for (int o = 0; o < k; ++o) {
      for (int i = 0; i < h; ++i) {
        for (int j = 0; j < w; ++j) {
          double sum = bias[o];
          for (int ch = 0; ch < c; ++ch) {
            for (int u = 0; u < 3; ++u) {
              for (int v = 0; v < 3; ++v) {
                const int yi = i + u - 1, xj = j + v - 1;
                if (yi < 0 || yi >= h || xj < 0 || xj >= w) continue;
                sum += double(x[((b * c + ch) * h + yi) * w + xj]) *
                       weights[((o * c + ch) * 3 + u) * 3 + v];
              }
            }
          }
          const double want = sum > 0 ? sum : 0;
          worst = std::max(worst, std::abs(want - y[((b * k + o) * h + i) * w + j]));
        }
      }
    }
  }
  EXPECT_LT(worst, 1e-3) << "largest difference from the direct sum";
}

// TFPIN_ONEDNN_CACHE_SIZES=off leaves oneDNN's answer, and the engine refuses as without tfpin's:
// checked in a child process (the setting is read once).
TEST(OneDnnCacheSizes, OffRestoresTheRefusal) {
  if (!onednn_reads_the_leaf() || !detail::amd_cache_leaf_zeroed()) {
    GTEST_SKIP() << "tfpin does not answer oneDNN's cache-size query here (oneDNN < 3.2, or CPUID "
                    "describes the caches)";
  }
  std::vector<std::string> env_strings = {"TFPIN_ONEDNN_CACHE_SIZES=off"};
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::string(*e).rfind("TFPIN_ONEDNN_CACHE_SIZES=", 0) != 0) env_strings.emplace_back(*e);
  }
  std::vector<char*> env;
  for (std::string& e : env_strings) env.push_back(e.data());
  env.push_back(nullptr);
  std::string filter = "--gtest_filter=OneDnnCacheSizesChild.DISABLED_RefusesWhenOff";
  std::string also = "--gtest_also_run_disabled_tests";
  std::string self = "/proc/self/exe";
  char* argv[] = {self.data(), filter.data(), also.data(), nullptr};
  pid_t child = 0;
  ASSERT_EQ(posix_spawn(&child, "/proc/self/exe", nullptr, nullptr, argv, env.data()), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child's refusal check failed (its output is above)";
}

// Run only by OffRestoresTheRefusal, in a child with TFPIN_ONEDNN_CACHE_SIZES=off.
TEST(OneDnnCacheSizesChild, DISABLED_RefusesWhenOff) {
  EXPECT_FALSE(detail::cache_sizes_wanted());
  const std::string why = onednn_unusable_reason();
  EXPECT_NE(why.find("TFPIN_ONEDNN_CACHE_SIZES=off"), std::string::npos) << why;
  EXPECT_NE(why.find("CPUID leaf 0x8000001D"), std::string::npos) << why;
}

}  // namespace
