// Invalid graphs, impossible requests and misuse of the API fail with clear errors, not crashes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>

#include "test_util.hpp"
#include "tfpin/engine/models.hpp"
#include "tfpin/engine/runtime.hpp"

namespace tfpin::engine {
namespace {

using ::testing::HasSubstr;

Status compile(const Graph& g, const CompileOptions& options = {}) {
  std::unique_ptr<Runtime> rt;
  Status s = Runtime::create(g, options, &rt);
  EXPECT_EQ(s.ok(), rt != nullptr);
  return s;
}

TensorId weights(Graph& g, std::vector<std::int64_t> dims) {
  std::size_t n = 1;
  for (auto d : dims) n *= static_cast<std::size_t>(d);
  return g.constant("w", std::move(dims), std::vector<float>(n, 0.1f));
}

TEST(InvalidGraph, UnknownInputTensor) {
  Graph g;
  TensorId x = g.input("x", {1, 4, 5, 5});
  g.output(g.relu(x), "y");
  g.output(g.relu(999, "broken"), "z");
  Status s = compile(g);
  EXPECT_EQ(s.code(), StatusCode::invalid_graph);
  EXPECT_THAT(s.message(), HasSubstr("node 'broken' (relu)"));
  EXPECT_THAT(s.message(), HasSubstr("tensor 999, which does not exist"));
}

TEST(InvalidGraph, ConvolutionChannelMismatch) {
  Graph g;
  TensorId x = g.input("x", {1, 4, 5, 5});
  g.output(g.convolution(x, weights(g, {8, 3, 3, 3}), no_tensor, {}, "conv"), "y");
  Status s = compile(g);
  EXPECT_EQ(s.code(), StatusCode::invalid_graph);
  EXPECT_THAT(s.message(), HasSubstr("node 'conv' (convolution)"));
  EXPECT_THAT(s.message(), HasSubstr("has 4 channels but weights 'w' [8, 3, 3, 3] expect 3"));
}

TEST(InvalidGraph, AddShapeMismatch) {
  Graph g;
  TensorId a = g.input("a", {1, 4, 5, 5});
  TensorId b = g.input("b", {1, 4, 5, 6});
  g.output(g.add(a, b, "sum"), "y");
  Status s = compile(g);
  EXPECT_EQ(s.code(), StatusCode::invalid_graph);
  EXPECT_THAT(s.message(),
              HasSubstr("shape mismatch: 'a' is [1, 4, 5, 5] but 'b' is [1, 4, 5, 6]"));
}

TEST(InvalidGraph, ConcatMismatch) {
  Graph g;
  TensorId a = g.input("a", {1, 4, 5, 5});
  TensorId b = g.input("b", {1, 4, 6, 6});
  g.output(g.concat({a, b}, "cat"), "y");
  Status s = compile(g);
  EXPECT_EQ(s.code(), StatusCode::invalid_graph);
  EXPECT_THAT(s.message(), HasSubstr("all but the channels must match"));
}

TEST(InvalidGraph, InnerProductFeatureMismatch) {
  Graph g;
  TensorId x = g.input("x", {2, 3, 4, 4});
  g.output(g.inner_product(x, weights(g, {10, 40}), no_tensor, "fc"), "y");
  Status s = compile(g);
  EXPECT_EQ(s.code(), StatusCode::invalid_graph);
  EXPECT_THAT(s.message(), HasSubstr("has 48 features but weights 'w' [10, 40] expect 40"));
}

TEST(InvalidGraph, BadAttributes) {
  struct Case {
    const char* what;
    std::function<void(Graph&, TensorId)> build;
  };
  const Case cases[] = {
      {"strides must be at least 1",
       [](Graph& g, TensorId x) {
         Conv2D a;
         a.stride = {0, 1};
         g.output(g.convolution(x, weights(g, {4, 4, 3, 3}), no_tensor, a), "y");
       }},
      {"padding must be 0 or more",
       [](Graph& g, TensorId x) {
         Conv2D a;
         a.padding = {-1, 0, 0, 0};
         g.output(g.convolution(x, weights(g, {4, 4, 3, 3}), no_tensor, a), "y");
       }},
      {"groups=3 is invalid",
       [](Graph& g, TensorId x) {
         Conv2D a;
         a.groups = 3;
         g.output(g.convolution(x, weights(g, {6, 1, 3, 3}), no_tensor, a), "y");
       }},
      {"kernel 9x9 does not fit the padded input 8x8",
       [](Graph& g, TensorId x) {
         g.output(g.convolution(x, weights(g, {4, 4, 9, 9}), no_tensor, {}), "y");
       }},
      {"smaller than the kernel",
       [](Graph& g, TensorId x) {
         Pool2D p;
         p.kernel = {2, 2};
         p.padding = {2, 2, 2, 2};
         g.output(g.max_pool(x, p), "y");
       }},
      {"size=4 is invalid",
       [](Graph& g, TensorId x) {
         g.output(g.lrn(x, Lrn{4, 1e-4f, 0.75f, 1.0f}), "y");
       }},
      {"rate=1.5 is invalid",
       [](Graph& g, TensorId x) { g.output(g.dropout(x, Dropout{1.5f}), "y"); }},
      {"variances cannot be negative",
       [](Graph& g, TensorId x) {
         auto v = [&](float value) { return g.constant("p", {4}, std::vector<float>(4, value)); };
         g.output(g.batch_norm(x, v(1), v(0), v(0), v(-1)), "y");
       }},
      {"(16 values) but 3 values were given",
       [](Graph& g, TensorId x) {
         g.output(g.convolution(x, g.constant("w", {1, 4, 2, 2}, {1, 2, 3}), no_tensor, {}), "y");
       }},
      {"dilations must be at least 1",
       [](Graph& g, TensorId x) {
         Conv2D a;
         a.dilation = {1, 0};
         g.output(g.convolution(x, weights(g, {4, 4, 3, 3}), no_tensor, a), "y");
       }},
  };
  for (const Case& c : cases) {
    Graph g;
    TensorId x = g.input("x", {1, 4, 8, 8});
    c.build(g, x);
    Status s = compile(g);
    EXPECT_FALSE(s.ok()) << c.what;
    EXPECT_THAT(s.message(), HasSubstr(c.what));
  }
}

TEST(InvalidGraph, StructuralProblems) {
  {
    Graph g;
    g.input("x", {1, 4, 8, 8});
    EXPECT_THAT(compile(g).message(), HasSubstr("the graph has no outputs"));
  }
  {
    Graph g;
    TensorId a = g.input("x", {1, 4, 8, 8});
    TensorId b = g.input("x", {1, 4, 8, 8});
    g.output(g.add(a, b), "y");
    EXPECT_THAT(compile(g).message(), HasSubstr("two graph inputs are named 'x'"));
  }
  {
    Graph g;
    TensorId a = g.input("x", {1, 4, 8, 8}, Layout::nc);
    g.output(g.relu(a), "y");
    EXPECT_THAT(compile(g).message(), HasSubstr("images are NCHW or NHWC"));
  }
  {
    Graph g;
    TensorId a = g.input("x", {1, 0, 8, 8});
    g.output(g.relu(a), "y");
    EXPECT_THAT(compile(g).message(), HasSubstr("every dimension must be at least 1"));
  }
}

TEST(ImpossibleRequest, BatchTooLargeToPlan) {
  // A billion images of 224x224: the input alone is 600 TB.
  Graph g = build_model(Model::alexnet, std::int64_t{1} << 30, Layout::nhwc);
  Status s = compile(g);
  EXPECT_EQ(s.code(), StatusCode::out_of_memory);
  EXPECT_THAT(s.message(), HasSubstr("cannot be planned (reduce the batch size)"));
}

TEST(ImpossibleRequest, DimensionsBeyondAnyMachine) {
  Graph g;
  TensorId x = g.input("x", {std::int64_t{1} << 40, 1024, 1024, 1024});
  g.output(g.relu(x), "y");
  Status s = compile(g);
  EXPECT_EQ(s.code(), StatusCode::out_of_memory);
  EXPECT_THAT(s.message(), HasSubstr("more than 2^48 elements"));
}

TEST(ImpossibleRequest, PlannedMemoryAboveTheLimit) {
  Graph g = build_model(Model::googlenet, 8, Layout::nchw);
  CompileOptions o;
  o.memory_limit_bytes = 32u << 20;  // weights alone are 26 MiB, activations about as much
  Status s = compile(g, o);
  EXPECT_EQ(s.code(), StatusCode::out_of_memory);
  EXPECT_THAT(s.message(), HasSubstr("activations after reuse"));
  EXPECT_THAT(s.message(), HasSubstr("32.0 MiB available"));
}

TEST(Misuse, BadOptions) {
  Graph g;
  TensorId x = g.input("x", {1, 4, 8, 8});
  g.output(g.relu(x), "y");
  CompileOptions o;
  o.lanes = 0;
  EXPECT_EQ(compile(g, o).code(), StatusCode::invalid_argument);
  o.lanes = 2;
  o.lane_cpus = {{0}};
  EXPECT_THAT(compile(g, o).message(), HasSubstr("lane_cpus has 1 entries for 2 lanes"));
  EXPECT_EQ(Runtime::create(g, {}, nullptr).code(), StatusCode::invalid_argument);
}

TEST(Misuse, LaneThatCannotBePinnedFailsAtCreate) {
  Graph g;
  TensorId x = g.input("x", {1, 4, 8, 8});
  g.output(g.relu(x), "y");
  CompileOptions o;
  o.lane_cpus = {{1000}};  // no such cpu
  Status s = compile(g, o);
  EXPECT_EQ(s.code(), StatusCode::runtime_error);
  EXPECT_THAT(s.message(), HasSubstr("lane 0: cannot pin to cpus 1000"));
}

TEST(Misuse, SetupAndRun) {
  Graph g;
  TensorId x = g.input("x", {1, 4, 8, 8});
  g.output(g.relu(x), "y");
  std::unique_ptr<Runtime> rt;
  ASSERT_TRUE(Runtime::create(g, {}, &rt).ok());
  EXPECT_EQ(rt->run().code(), StatusCode::invalid_state);  // before setup
  std::vector<float> in(256, 1.0f), out(256, 0.0f);
  const ExternalInput good_in[] = {{"x", in.data()}};
  const ExternalOutput good_out[] = {{"y", out.data()}};
  const ExternalInput unknown[] = {{"images", in.data()}};
  EXPECT_THAT(rt->setup(unknown, good_out).message(),
              HasSubstr("no graph input is named 'images' (inputs: x)"));
  const ExternalInput null_in[] = {{"x", nullptr}};
  EXPECT_THAT(rt->setup(null_in, good_out).message(), HasSubstr("input 'x' has a null buffer"));
  EXPECT_THAT(rt->setup(good_in, {}).message(), HasSubstr("output 'y' was not given"));
  EXPECT_EQ(rt->run().code(), StatusCode::invalid_state);  // the failed setup unbinds
  ASSERT_TRUE(rt->setup(good_in, good_out).ok());
  ASSERT_TRUE(rt->run().ok());
  EXPECT_EQ(out[0], 1.0f);
}

}  // namespace
}  // namespace tfpin::engine
