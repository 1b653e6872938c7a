// How steps share the cores (engine/src/schedule.hpp): steps nothing can run beside run on every
// lane's cores, small steps on one thread, and the ready step on the longest remaining path first.
// Observed through the runtime's report and trace, with results checked against the same graph
// compiled without elastic threads.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "test_util.hpp"
#include "tfpin/engine/runtime.hpp"
#include "tfpin/engine/version.hpp"

namespace tfpin::engine {
namespace {

std::vector<float> random_values(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

TensorId conv3x3(Graph& g, TensorId x, std::int64_t in, std::int64_t out, const std::string& name,
                 unsigned seed) {
  const TensorId w = g.constant(name + ".w", {out, in, 3, 3},
                                random_values(static_cast<std::size_t>(out * in * 9), seed));
  const TensorId b =
      g.constant(name + ".b", {out}, random_values(static_cast<std::size_t>(out), seed + 1));
  Conv2D attrs;
  attrs.padding = {1, 1, 1, 1};
  return g.relu(g.convolution(x, w, b, attrs, name), name + ".relu");
}

// stem (serial) -> three branches (a chain of three convolutions, two single ones) -> concat ->
// head convolution (serial).
Graph branchy_graph() {
  Graph g;
  const TensorId x = g.input("x", {1, 16, 40, 40});
  const TensorId stem = conv3x3(g, x, 16, 32, "stem", 1);
  // The short branches come first: readiness order alone would start them before the chain.
  const TensorId short1 = conv3x3(g, stem, 32, 16, "short1", 10);
  const TensorId short2 = conv3x3(g, stem, 32, 16, "short2", 20);
  TensorId chain = stem;
  for (int k = 0; k < 3; ++k) {
    chain =
        conv3x3(g, chain, 32, 32, "chain" + std::to_string(k), 30 + 10 * static_cast<unsigned>(k));
  }
  const TensorId joined = g.concat({short1, short2, chain}, "join");
  const TensorId head = conv3x3(g, joined, 64, 32, "head", 90);
  g.output(head, "y");
  return g;
}

unsigned allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return 1;
  return static_cast<unsigned>(CPU_COUNT(&set));
}

std::vector<std::vector<unsigned>> first_cpus(unsigned lanes) {
  cpu_set_t set;
  CPU_ZERO(&set);
  sched_getaffinity(0, sizeof set, &set);
  std::vector<std::vector<unsigned>> out;
  for (unsigned c = 0; c < CPU_SETSIZE && out.size() < lanes; ++c) {
    if (CPU_ISSET(c, &set)) out.push_back({c});
  }
  return out;
}

struct Result {
  std::vector<float> y;
  CompileReport report;
  std::vector<TraceEvent> trace;
  std::string description;  // Runtime::describe()
};

Result run(const Graph& g, CompileOptions options, int runs = 3) {
  options.trace = true;
  std::unique_ptr<Runtime> rt;
  Status s = Runtime::create(g, options, &rt);
  EXPECT_TRUE(s.ok()) << s.to_string();
  if (!s.ok()) return {};
  const std::vector<float> x = random_values(rt->inputs().at(0).elements(), 7);
  Result r;
  r.y.resize(rt->outputs().at(0).elements());
  const ExternalInput in[] = {{"x", x.data()}};
  const ExternalOutput out[] = {{"y", r.y.data()}};
  EXPECT_TRUE(rt->setup(in, out).ok());
  for (int k = 0; k < runs; ++k) EXPECT_TRUE(rt->run().ok());
  r.report = rt->report();
  r.trace = rt->take_trace();
  r.description = rt->describe();
  return r;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b,
                  float tolerance = 1e-5f) {
  ASSERT_EQ(a.size(), b.size());
  float scale = 0;
  for (float v : b) scale = std::max(scale, std::abs(v));
  for (std::size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tolerance * std::max(1.0f, scale)) << "element " << i;
  }
}

// The threads each named step ran on in the last run.
std::map<std::string, unsigned> threads_by_step(const std::vector<TraceEvent>& trace) {
  std::uint64_t last = 0;
  for (const TraceEvent& e : trace) last = std::max(last, e.run);
  std::map<std::string, unsigned> out;
  for (const TraceEvent& e : trace) {
    if (e.run == last) out[e.name] = e.threads;
  }
  return out;
}

TEST(Schedule, SerialStepsRunOnEveryLanesCores) {
  if (allowed_cpus() < 2) GTEST_SKIP() << "needs 2 cpus to pin 2 lanes";
  const Graph g = branchy_graph();
  CompileOptions options;
  options.lanes = 2;
  options.lane_cpus = first_cpus(2);
  const Result elastic = run(g, options);
  options.elastic_threads = false;
  const Result fixed = run(g, options);
  expect_close(elastic.y, fixed.y);

  // stem and head have nothing beside them; the branches do. The concat of the branches is no
  // step at all where the branches write into its output: batch 1 and a channel-outermost layout
  // (nChw16c, nChw8c or nchw, as the ISA and oneDNN's version chose; not nhwc). Otherwise it is a
  // serial step, wide like stem and head.
  const bool join_in_place = testing::channel_block_written_by(elastic.description, "short1") != 0;
  EXPECT_EQ(elastic.report.in_place_concats, join_in_place ? 1 : 0) << elastic.description;
  EXPECT_EQ(elastic.report.wide_steps, join_in_place ? 2 : 3);
  EXPECT_EQ(fixed.report.wide_steps, 0);
  const auto threads = threads_by_step(elastic.trace);
  EXPECT_EQ(threads.at("stem"), 2u);
  if (join_in_place) {
    EXPECT_EQ(threads.count("join"), 0u);
  } else {
    EXPECT_EQ(threads.at("join"), 2u);
  }
  EXPECT_EQ(threads.at("head"), 2u);
  for (const char* branch : {"short1", "short2", "chain0", "chain1", "chain2"}) {
    EXPECT_EQ(threads.at(branch), 1u) << branch;
  }
  for (const auto& [name, n] : threads_by_step(fixed.trace)) EXPECT_EQ(n, 1u) << name;
}

TensorId conv1x1(Graph& g, TensorId x, std::int64_t in, std::int64_t out, const std::string& name,
                 unsigned seed) {
  const TensorId w = g.constant(name + ".w", {out, in, 1, 1},
                                random_values(static_cast<std::size_t>(out * in), seed));
  return g.convolution(x, w, no_tensor, Conv2D{}, name);
}

// ResNet's downsampling block, stretched: a chain of four 1x1 convolutions beside one. On two lanes
// of one thread the single one would leave its lane idle for most of the chain.
Graph unbalanced_graph() {
  Graph g;
  const TensorId x = g.input("x", {1, 64, 28, 28});
  const TensorId stem = g.relu(conv1x1(g, x, 64, 64, "stem", 1));
  TensorId chain = g.relu(conv1x1(g, stem, 64, 128, "chain0", 10));
  chain = g.relu(conv1x1(g, chain, 128, 128, "chain1", 20));
  chain = g.relu(conv1x1(g, chain, 128, 256, "chain2", 30));
  chain = conv1x1(g, chain, 256, 256, "chain3", 40);
  const TensorId projection = conv1x1(g, stem, 64, 256, "projection", 50);
  const TensorId sum = g.relu(g.add(chain, projection));
  g.output(conv1x1(g, sum, 256, 64, "head", 60), "y");
  return g;
}

TEST(Schedule, UnbalancedRegionRunsWideOneStepAtATime) {
  if (allowed_cpus() < 2) GTEST_SKIP() << "needs 2 cpus to pin 2 lanes";
  CompileOptions options;
  options.lanes = 2;
  options.lane_cpus = first_cpus(2);
  const Result elastic = run(unbalanced_graph(), options, 4);
  options.elastic_threads = false;
  const Result fixed = run(unbalanced_graph(), options);
  expect_close(elastic.y, fixed.y);
  const auto threads = threads_by_step(elastic.trace);
  for (const char* step : {"stem", "chain0", "chain1", "chain2", "chain3", "projection", "head"}) {
    EXPECT_EQ(threads.at(step), 2u) << step;
  }
  // A wide step's team has every lane's cores: nothing may run beside it.
  for (const TraceEvent& a : elastic.trace) {
    for (const TraceEvent& b : elastic.trace) {
      if (&a == &b || a.run != b.run || (a.threads < 2 && b.threads < 2)) continue;
      const bool overlap =
          a.start_us < b.start_us + b.duration_us && b.start_us < a.start_us + a.duration_us;
      EXPECT_FALSE(overlap) << a.name << " and " << b.name << " ran together in run " << a.run;
    }
  }
}

TEST(Schedule, UnpinnedLanesStayNarrow) {
  // Without cores of their own, a wide team would share a core with the other lane.
  CompileOptions options;
  options.lanes = 2;
  const Result r = run(branchy_graph(), options);
  EXPECT_EQ(r.report.wide_steps, 0);
}

// Threads of this process (/proc/self/task), once the count holds for 20 ms: libgomp's pool
// threads of a thread that has ended (an earlier runtime's lanes, the compile's thread) exit on
// their own time.
int process_threads() {
  auto count = [] {
    int n = 0;
    if (DIR* d = opendir("/proc/self/task")) {
      while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
      closedir(d);
    }
    return n;
  };
  int last = count();
  for (int tries = 0; tries < 100; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const int now = count();
    if (now == last) break;
    last = now;
  }
  return last;
}

TEST(Schedule, CompilingLeavesNoOpenMpTeamOnTheCaller) {
  // libgomp keeps a thread's team after its parallel regions; the caller's, idle, would make
  // libgomp manage more threads than there are CPUs and throttle every team's spinning (each
  // step then wakes its lane's team with a system call). Compiling (its weight reorders run
  // OpenMP regions) must leave the caller as it found it: the runtime adds its lane only (unpinned
  // lanes create their team at their first run).
  Graph g;
  const TensorId x = g.input("x", {1, 256, 14, 14});
  g.output(conv3x3(g, conv3x3(g, x, 256, 256, "a", 1), 256, 256, "b", 2), "y");
  CompileOptions options;
  options.intra = 2;
  options.lanes = 1;
  int added = -1;
  Status status;
  // A thread of its own: no earlier test's team on it.
  std::thread caller([&] {
    const int before = process_threads();
    std::unique_ptr<Runtime> rt;
    status = Runtime::create(g, options, &rt);
    added = process_threads() - before;
  });
  caller.join();
  ASSERT_TRUE(status.ok()) << status.to_string();
  EXPECT_EQ(added, 1);
}

TEST(Schedule, SmallStepsRunOnOneThread) {
  Graph g;
  const TensorId x = g.input("x", {1, 16, 40, 40});
  const TensorId big = conv3x3(g, x, 16, 32, "big", 1);
  Pool2D pool;
  pool.kernel = {2, 2};
  pool.stride = {2, 2};
  const TensorId small = g.max_pool(g.max_pool(big, pool, "pool1"), pool, "pool2");
  g.output(small, "y");
  CompileOptions options;
  options.intra = 2;
  const Result elastic = run(g, options);
  options.elastic_threads = false;
  const Result fixed = run(g, options);
  expect_close(elastic.y, fixed.y);
  EXPECT_EQ(elastic.report.narrow_steps, 1);  // pool2: 8 KiB in, 2 KiB out
  const auto threads = threads_by_step(elastic.trace);
  EXPECT_EQ(threads.at("big"), 2u);
  EXPECT_EQ(threads.at("pool2"), 1u);
  EXPECT_EQ(threads_by_step(fixed.trace).at("pool2"), 2u);
}

TEST(Schedule, LongestRemainingPathStartsFirst) {
  // Two lanes, three branches ready at once: the chain (three convolutions) must be one of the
  // first two started, though both short branches were built before it.
  CompileOptions options;
  options.lanes = 2;
  options.elastic_threads = false;
  const Result r = run(branchy_graph(), options, 5);
  for (std::uint64_t run = 2; run <= 5; ++run) {
    double chain_start = -1;
    double first_short_end = 1e300;
    for (const TraceEvent& e : r.trace) {
      if (e.run != run) continue;
      if (e.name == "chain0") chain_start = e.start_us;
      if (e.name == "short1" || e.name == "short2") {
        first_short_end = std::min(first_short_end, e.start_us + e.duration_us);
      }
    }
    ASSERT_GE(chain_start, 0) << "run " << run;
    EXPECT_LT(chain_start, first_short_end) << "run " << run;
  }
}

TEST(Schedule, WinogradKernelsAndDirectAreTimedAndTheChoiceKept) {
  Graph g;
  const TensorId x = g.input("x", {1, 16, 13, 13});
  g.output(conv3x3(g, x, 16, 32, "small", 3), "y");
  CompileOptions options;
  options.intra = 2;
  std::unique_ptr<Runtime> rt;
  ASSERT_TRUE(Runtime::create(g, options, &rt).ok());
  // tfpin's own Winograd (four tile sizes) beside the compiled kernel on every ISA; oneDNN 2.6 on
  // AVX-512 adds its own two tile sizes and the direct kernel.
  EXPECT_EQ(rt->report().timed_choices, 1);
  options.winograd = false;
  const Result direct = run(g, options, 1);

  const std::vector<float> in = random_values(rt->inputs().at(0).elements(), 7);
  std::vector<float> y(rt->outputs().at(0).elements());
  const ExternalInput inputs[] = {{"x", in.data()}};
  const ExternalOutput outputs[] = {{"y", y.data()}};
  ASSERT_TRUE(rt->setup(inputs, outputs).ok());
  const std::uint64_t weights_compiled = rt->report().weight_bytes;
  std::vector<std::vector<float>> results;
  for (std::size_t k = 0; k < 3 * 7 + 2; ++k) {  // the kernels in turn, then the fastest
    ASSERT_TRUE(rt->run().ok());
    results.push_back(y);
    expect_close(y, direct.y, 3e-4f);  // F(7x7) rounds up to 1e-4 of the largest output here
  }
  const CompileReport& report = rt->report();
  ASSERT_EQ(report.kernel_choices.size(), 1U);
  const KernelChoice& choice = report.kernel_choices[0];
  const std::size_t candidates = choice.candidates.size();
  ASSERT_GE(candidates, 2U);
  EXPECT_EQ(candidates, onednn_offers_winograd() ? 7U : 5U);
  const std::vector<float>& kept = results.back();
  EXPECT_EQ(results[results.size() - 2], kept);  // the choice stays
  // Each kernel rounds differently: the first runs used one each, and the kept one is one of them.
  for (std::size_t a = 0; a < candidates; ++a) {
    for (std::size_t b = a + 1; b < candidates; ++b) EXPECT_NE(results[a], results[b]) << a << b;
  }
  const auto first_runs = results.begin() + static_cast<std::ptrdiff_t>(candidates);
  const auto chosen = std::find(results.begin(), first_runs, kept);
  ASSERT_NE(chosen, first_runs) << "the kept kernel is none of the candidates";
  // The report lists the trial: every candidate's best time, the fastest kept; it and describe()
  // name the kept kernel.
  EXPECT_EQ(choice.step, "small");
  const auto fastest =
      std::min_element(choice.candidates.begin(), choice.candidates.end(),
                       [](const auto& a, const auto& b) { return a.best_us < b.best_us; });
  EXPECT_EQ(choice.kept, fastest->kernel);
  EXPECT_EQ(fastest - choice.candidates.begin(), chosen - results.begin());
  for (const auto& c : choice.candidates) EXPECT_GT(c.best_us, 0.0) << c.kernel;
  EXPECT_EQ(report.winograd_convolutions, choice.kept.find("wino") != std::string::npos ? 1 : 0);
  EXPECT_NE(rt->describe().find(choice.kept), std::string::npos) << rt->describe();
  // The weights of the kernels not kept are freed.
  EXPECT_LT(report.weight_bytes, weights_compiled);
}

TEST(Schedule, SameShapedConvolutionsTimeEachKernelOnce) {
  // oneDNN 2.6's implementation iterator repeats kernels for descriptors of a shape it has seen:
  // the third of three alike layers must still time each kernel once.
  Graph g;
  TensorId x = g.input("x", {1, 16, 13, 13});
  for (int k = 0; k < 3; ++k) x = conv3x3(g, x, 16, 16, "alike" + std::to_string(k), 3 + k);
  g.output(x, "y");
  CompileOptions options;
  options.intra = 2;
  std::unique_ptr<Runtime> rt;
  ASSERT_TRUE(Runtime::create(g, options, &rt).ok());
  ASSERT_EQ(rt->report().timed_choices, 3);  // tfpin's Winograd at least
  const std::vector<float> in = random_values(rt->inputs().at(0).elements(), 7);
  std::vector<float> y(rt->outputs().at(0).elements());
  const ExternalInput inputs[] = {{"x", in.data()}};
  const ExternalOutput outputs[] = {{"y", y.data()}};
  ASSERT_TRUE(rt->setup(inputs, outputs).ok());
  for (int k = 0; k < 21; ++k) ASSERT_TRUE(rt->run().ok());  // 3 x 7 trial runs at most
  const std::vector<KernelChoice>& choices = rt->report().kernel_choices;
  ASSERT_EQ(choices.size(), 3U);
  for (const KernelChoice& c : choices) {
    EXPECT_EQ(c.candidates.size(), choices[0].candidates.size()) << c.step;
    for (std::size_t a = 0; a < c.candidates.size(); ++a) {
      for (std::size_t b = a + 1; b < c.candidates.size(); ++b) {
        EXPECT_NE(c.candidates[a].kernel, c.candidates[b].kernel) << c.step;
      }
    }
  }
}

// The kernel's variant follows the ISA oneDNN runs with (so DNNL_MAX_CPU_ISA=AVX2 on an AVX-512
// machine selects the AVX2 one); InnerProductBatchOne in test_ops checks its values.
TEST(Schedule, BatchOneInnerProductIsAMatrixVectorKernelOnAvx2AndAvx512) {
  Graph g;
  const TensorId x = g.input("x", {1, 256}, Layout::nc);
  const TensorId w = g.constant("w", {64, 256}, random_values(64 * 256, 5));
  g.output(g.relu(g.inner_product(x, w, no_tensor, "fc")), "y");
  CompileOptions options;
  options.intra = 2;
  std::unique_ptr<Runtime> rt;
  const Status created = Runtime::create(g, options, &rt);
  ASSERT_TRUE(created.ok()) << created.to_string();
  const std::string isa = onednn_effective_isa();
  const char* variant = isa == "avx512_core" ? "tfpin:matrix_vector:avx512"
                        : isa == "avx2"      ? "tfpin:matrix_vector:avx2"
                                             : nullptr;
  if (variant != nullptr) {
    EXPECT_NE(rt->describe().find(variant), std::string::npos) << isa << "\n" << rt->describe();
  } else {
    EXPECT_EQ(rt->describe().find("matrix_vector"), std::string::npos) << rt->describe();
  }
  options.matrix_vector = false;
  ASSERT_TRUE(Runtime::create(g, options, &rt).ok());
  EXPECT_EQ(rt->describe().find("matrix_vector"), std::string::npos);
}

}  // namespace
}  // namespace tfpin::engine
