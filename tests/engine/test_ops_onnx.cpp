// The operators ONNX models need beyond the zoo's: activations (alone and fused into the
// convolution or inner product before them), broadcasting add and multiply, dilated convolutions
// and softmax over the channels of an image. Each against the naive reference, NCHW and NHWC, fused
// and unfused, one lane and two; then the graphs they must refuse.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "reference.hpp"
#include "op_fixture.hpp"
#include "test_util.hpp"
#include "tfpin/engine/graph.hpp"
#include "tfpin/engine/runtime.hpp"

namespace tfpin::engine {
namespace {

using testing::close;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::random_vector;
using testing::run_engine;
using Dims = std::vector<std::int64_t>;

Eltwise act(EltwiseKind kind, float alpha = 0.0f, float beta = 0.0f) {
  return Eltwise{kind, alpha, beta};
}

class OnnxOpTest : public testing::OpFixture {
 protected:
  TensorId conv(TensorId x, std::int64_t in, std::int64_t out, std::int64_t k, const Conv2D& a,
                const std::string& name, bool bias = true) {
    return g.convolution(x, constant(name + ".w", {out, in / a.groups, k, k}),
                         bias ? constant(name + ".b", {out}) : no_tensor, a, name);
  }

  // check(), then the steps the compiler chose (Runtime::describe()).
  void check(double rtol = 1e-4, double atol = 1e-4) {
    OpFixture::check(rtol, atol);
    CompileOptions o;
    o.fusion = fusion();
    std::unique_ptr<Runtime> rt;
    ASSERT_TRUE(Runtime::create(g, o, &rt).ok());
    steps = rt->describe();
  }

  std::string steps;  // Runtime::describe() of the graph
};

// ---------------------------------------------------------------------------------- activations

TEST_P(OnnxOpTest, EveryActivationOnImagesAndMatrices) {
  // Inputs in [-8, 8]: past every bend (hard sigmoid 0 and 1 at -2.5 and 2.5, hard swish at +-3).
  TensorId x = input("x", {2, 7, 5, 3}, 8.0f);
  TensorId m = input("m", {3, 33}, 8.0f);
  const std::pair<const char*, Eltwise> cases[] = {
      {"leaky_relu", act(EltwiseKind::leaky_relu, 0.1f)},
      {"relu6", act(EltwiseKind::clip, 0.0f, 6.0f)},
      {"clip", act(EltwiseKind::clip, -0.5f, 0.25f)},
      {"clip_open_below", act(EltwiseKind::clip, -std::numeric_limits<float>::infinity(), 1.0f)},
      {"sigmoid", act(EltwiseKind::sigmoid)},
      {"hard_sigmoid", act(EltwiseKind::hard_sigmoid, 0.2f, 0.5f)},
      {"hard_sigmoid_steep", act(EltwiseKind::hard_sigmoid, 1.0f / 6.0f, 0.25f)},
      {"hard_swish", act(EltwiseKind::hard_swish)},
      {"tanh", act(EltwiseKind::tanh)},
  };
  for (const auto& [name, a] : cases) {
    g.output(g.eltwise(x, a, std::string(name) + "_image"), std::string(name) + "_image");
    g.output(g.eltwise(m, a, std::string(name) + "_matrix"), std::string(name) + "_matrix");
  }
  check();
  EXPECT_EQ(last.fused_eltwises, 0);  // nothing to fuse into
}

TEST_P(OnnxOpTest, ActivationOfABlockedTensor) {
  // A convolution's blocked output read by two activations (so neither is fused) and returned.
  TensorId x = input("x", {2, 16, 6, 6}, 2.0f);
  Conv2D a;
  a.padding = {1, 1, 1, 1};
  TensorId y = conv(x, 16, 20, 3, a, "conv");
  g.output(g.eltwise(y, act(EltwiseKind::hard_swish), "hs"), "hs");
  g.output(g.eltwise(y, act(EltwiseKind::hard_sigmoid, 0.2f, 0.5f), "hsig"), "hsig");
  check();
  EXPECT_EQ(last.fused_eltwises, 0);
}

// The activation after a convolution or inner product becomes its post-op (MobileNet's ReLU6 and
// hard swish, a sigmoid gate): the numbers agree and the compile report and steps say so.
TEST_P(OnnxOpTest, ActivationsFuseIntoConvolutionsAndInnerProducts) {
  // Inputs in [-4, 4]: the convolutions' outputs reach past 6 (ReLU6's top) and +-3.
  TensorId x = input("x", {2, 16, 7, 7}, 4.0f);
  Conv2D same;
  same.padding = {1, 1, 1, 1};
  TensorId y = g.eltwise(conv(x, 16, 32, 3, same, "c1"), act(EltwiseKind::clip, 0.0f, 6.0f));
  y = g.eltwise(conv(y, 32, 32, 1, {}, "c2"), act(EltwiseKind::hard_swish));
  Conv2D dw = same;
  dw.groups = 32;
  y = g.eltwise(conv(y, 32, 32, 3, dw, "dw"), act(EltwiseKind::hard_sigmoid, 0.2f, 0.5f));
  y = g.eltwise(conv(y, 32, 16, 1, {}, "c3"), act(EltwiseKind::leaky_relu, 0.2f));
  g.output(y, "y");
  TensorId f = g.flatten(g.eltwise(conv(x, 16, 8, 1, {}, "c4"), act(EltwiseKind::sigmoid)));
  TensorId p = g.inner_product(f, constant("fc.w", {10, 8 * 49}), constant("fc.b", {10}), "fc");
  g.output(g.eltwise(p, act(EltwiseKind::tanh)), "z");
  check(2e-4, 2e-4);
  if (fusion()) {
    EXPECT_EQ(last.fused_eltwises, 6);
    EXPECT_THAT(steps, HasSubstr("convolution+clip"));
    EXPECT_THAT(steps, HasSubstr("convolution+hard_swish"));
    EXPECT_THAT(steps, HasSubstr("convolution+hard_sigmoid"));
    EXPECT_THAT(steps, HasSubstr("convolution+leaky_relu"));
    EXPECT_THAT(steps, HasSubstr("convolution+sigmoid"));
    EXPECT_THAT(steps, HasSubstr("inner_product+tanh"));
  } else {
    EXPECT_EQ(last.fused_eltwises, 0);
    EXPECT_THAT(steps, Not(HasSubstr("convolution+")));
  }
}

TEST_P(OnnxOpTest, ActivationAfterAResidualSumIsItsLastPostOp) {
  TensorId x = input("x", {1, 16, 6, 6}, 3.0f);
  Conv2D same;
  same.padding = {1, 1, 1, 1};
  TensorId r = conv(x, 16, 16, 1, {}, "stem");
  TensorId y = conv(r, 16, 16, 3, same, "branch");
  g.output(g.eltwise(g.add(y, r), act(EltwiseKind::clip, 0.0f, 6.0f), "relu6"), "y");
  check();
  if (fusion()) {
    EXPECT_EQ(last.fused_adds, 1);
    EXPECT_EQ(last.fused_eltwises, 1);
    EXPECT_THAT(steps, HasSubstr("convolution+sum+clip"));
  }
}

// An importer's Add of two same-shaped activations is the residual sum Graph::add makes: fused into
// the convolution (in place), while a broadcast or constant operand stays a binary step.
TEST_P(OnnxOpTest, AddOfTwoActivationsIsTheResidualSum) {
  TensorId x = input("x", {1, 16, 6, 6}, 3.0f);
  Conv2D same;
  same.padding = {1, 1, 1, 1};
  TensorId r = g.relu(conv(x, 16, 32, 1, {}, "stem"));
  TensorId y = conv(g.relu(conv(r, 32, 16, 1, {}, "c1")), 16, 32, 3, same, "c2");
  TensorId sum = g.binary(BinaryKind::add, y, r, "sum");
  g.output(g.binary(BinaryKind::add, sum, constant("shift", {1, 32, 1, 1}, 0.5f), "shift"), "y");
  check();
  if (fusion()) {
    EXPECT_EQ(last.fused_adds, 1);
    EXPECT_EQ(last.in_place_adds, 1);
    EXPECT_THAT(steps, HasSubstr("convolution+sum"));
  } else {
    EXPECT_EQ(last.fused_adds, 0);
  }
  EXPECT_THAT(steps, HasSubstr("binary_add"));
}

TEST_P(OnnxOpTest, ActivationIsNotFusedWhenTheConvolutionOutputIsReadElsewhere) {
  TensorId x = input("x", {1, 16, 5, 5}, 3.0f);
  TensorId c = conv(x, 16, 16, 1, {}, "c");
  g.output(g.eltwise(c, act(EltwiseKind::clip, 0.0f, 6.0f), "relu6"), "y");
  g.output(c, "pre_activation");  // must keep the values before the clip
  TensorId d = conv(x, 16, 16, 1, {}, "d");
  TensorId s = g.eltwise(d, act(EltwiseKind::sigmoid), "gate");
  g.output(g.binary(BinaryKind::mul, d, s, "swish"), "swish");  // d read twice
  check();
  EXPECT_EQ(last.fused_eltwises, 0);
  EXPECT_THAT(steps, Not(HasSubstr("convolution+clip")));
  EXPECT_THAT(steps, Not(HasSubstr("convolution+sigmoid")));
}

// ------------------------------------------------------------------------------- add, multiply

TEST_P(OnnxOpTest, BroadcastConstantsAgainstImages) {
  TensorId x = input("x", {2, 16, 5, 5});
  const std::pair<const char*, Dims> shapes[] = {
      {"c11", {16, 1, 1}}, {"nc11", {1, 16, 1, 1}}, {"scalar", {}},          {"one", {1}},
      {"hw", {5, 5}},      {"chw", {16, 5, 5}},     {"full", {2, 16, 5, 5}}, {"n111", {2, 1, 1, 1}},
      {"w", {1, 1, 1, 5}},
  };
  for (const auto& [name, dims] : shapes) {
    const std::string n = name;
    g.output(g.binary(BinaryKind::mul, x, constant(n + ".scale", dims, 2.0f), "mul_" + n),
             "mul_" + n);
    g.output(g.binary(BinaryKind::add, x, constant(n + ".shift", dims, 2.0f), "add_" + n),
             "add_" + n);
  }
  check();
}

TEST_P(OnnxOpTest, BroadcastAgainstABlockedConvolutionOutput) {
  // Odd channels (padded blocks) and 32: per-channel scale and shift, scalar, spatial map.
  for (std::int64_t c : {20, 32}) {
    const std::string p = "c" + std::to_string(c);
    TensorId x = input(p + ".x", {2, 16, 6, 6});
    TensorId y = conv(x, 16, c, 1, {}, p + ".conv");
    TensorId s = g.binary(BinaryKind::mul, y, constant(p + ".scale", {c, 1, 1}), p + ".mul");
    s = g.binary(BinaryKind::add, s, constant(p + ".shift", {1, c, 1, 1}), p + ".add");
    s = g.binary(BinaryKind::mul, s, g.constant(p + ".two", {}, {2.0f}), p + ".double");
    s = g.binary(BinaryKind::add, s, constant(p + ".map", {6, 6}), p + ".map_add");
    g.output(s, p);
  }
  check();
}

TEST_P(OnnxOpTest, SqueezeAndExcitationGate) {
  // x * sigmoid(fc(avgpool(x))) as 1x1 convolutions: b is computed, N, C, 1, 1.
  TensorId x = input("x", {2, 32, 7, 7}, 2.0f);
  Pool2D global;
  global.kernel = {7, 7};
  TensorId s = g.avg_pool(x, global);
  s = g.eltwise(conv(s, 32, 8, 1, {}, "squeeze"), act(EltwiseKind::clip, 0.0f, 6.0f));
  s = g.eltwise(conv(s, 8, 32, 1, {}, "excite"), act(EltwiseKind::hard_sigmoid, 1.0f / 6.0f, 0.5f));
  g.output(g.binary(BinaryKind::mul, x, s, "scale"), "y");
  check();
  if (fusion()) {
    EXPECT_EQ(last.fused_eltwises, 2);
  }
}

TEST_P(OnnxOpTest, BroadcastOperandsThatAreInputs) {
  TensorId a = input("a", {2, 3, 4, 5});
  TensorId hw = input("hw", {4, 5});  // a matrix against an image: H, W
  TensorId per_n = input("per_n", {2, 3, 1, 1});
  TensorId same = input("same", {2, 3, 4, 5});
  g.output(g.binary(BinaryKind::mul, a, hw, "mul_hw"), "mul_hw");
  g.output(g.binary(BinaryKind::add, a, per_n, "add_per_n"), "add_per_n");
  g.output(g.binary(BinaryKind::add, a, same, "add_same"), "add_same");
  g.output(g.binary(BinaryKind::mul, a, a, "square"), "square");
  check();
}

TEST_P(OnnxOpTest, BroadcastAgainstMatrices) {
  TensorId m = input("m", {3, 10});
  TensorId other = input("other", {3, 10});
  TensorId column = input("column", {3, 1});
  g.output(g.binary(BinaryKind::add, m, constant("bias", {10}), "add_vector"), "add_vector");
  g.output(g.binary(BinaryKind::mul, m, constant("row_scale", {3, 1}), "mul_rows"), "mul_rows");
  g.output(g.binary(BinaryKind::mul, m, g.constant("half", {}, {0.5f}), "mul_scalar"),
           "mul_scalar");
  g.output(g.binary(BinaryKind::add, m, other, "add_same"), "add_same");
  g.output(g.binary(BinaryKind::mul, m, column, "mul_column"), "mul_column");
  // Inner product output (oneDNN's own layout) times a per-feature scale.
  TensorId p = g.inner_product(m, constant("w", {6, 10}), no_tensor, "fc");
  g.output(g.binary(BinaryKind::mul, p, constant("scale", {6}), "scaled_fc"), "scaled_fc");
  check();
}

// ---------------------------------------------------------------------------- dilated convolution

TEST_P(OnnxOpTest, DilatedConvolutions) {
  TensorId x = input("x", {2, 16, 13, 12});
  Conv2D same;  // DeepLab's atrous 3x3: padding = dilation keeps the size
  same.dilation = {2, 2};
  same.padding = {2, 2, 2, 2};
  g.output(conv(x, 16, 32, 3, same, "atrous"), "same");
  Conv2D strided;
  strided.dilation = {2, 3};
  strided.stride = {2, 2};
  strided.padding = {1, 0, 2, 1};
  g.output(conv(x, 16, 16, 3, strided, "strided", false), "strided");
  Conv2D grouped;
  grouped.dilation = {3, 2};
  grouped.groups = 4;
  grouped.padding = {3, 2, 3, 2};
  g.output(conv(x, 16, 32, 3, grouped, "grouped"), "grouped");
  Conv2D depthwise;
  depthwise.dilation = {4, 4};
  depthwise.groups = 16;
  depthwise.padding = {4, 4, 4, 4};
  g.output(
      g.eltwise(conv(x, 16, 16, 3, depthwise, "depthwise"), act(EltwiseKind::clip, 0.0f, 6.0f)),
      "depthwise_relu6");
  Conv2D wide;  // 5x5 dilated by 2 spans 9 of 13 rows, no padding
  wide.dilation = {2, 2};
  g.output(conv(x, 16, 8, 5, wide, "wide"), "wide");
  check();
  if (fusion()) {
    EXPECT_EQ(last.fused_eltwises, 1);
  }
}

TEST_P(OnnxOpTest, DilatedConvolutionOnThreeChannels) {
  TensorId x = input("x", {1, 3, 11, 11});
  Conv2D a;
  a.dilation = {2, 2};
  a.padding = {2, 2, 2, 2};
  a.stride = {2, 2};
  g.output(g.relu(conv(x, 3, 16, 3, a, "conv")), "y");
  check();
  if (fusion()) {
    EXPECT_EQ(last.fused_relus, 1);
  }
}

// ---------------------------------------------------------------------------------------- softmax

TEST_P(OnnxOpTest, SoftmaxOverTheChannelsOfAnImage) {
  TensorId x = input("x", {2, 5, 3, 4}, 3.0f);
  g.output(g.softmax(x, "plain"), "plain");
  // After a convolution: a blocked layout with padded channels (21 of 32).
  TensorId c = conv(input("y", {2, 16, 4, 4}), 16, 21, 1, {}, "conv");
  g.output(g.softmax(c, "blocked"), "blocked");
  TensorId m = input("m", {3, 7}, 3.0f);
  g.output(g.softmax(m, "matrix"), "matrix");
  check();
}

INSTANTIATE_TEST_SUITE_P(Engine, OnnxOpTest,
                         ::testing::Combine(::testing::Values(Layout::nchw, Layout::nhwc),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<OnnxOpTest::ParamType>& param) {
                           return std::string(to_string(std::get<0>(param.param))) +
                                  (std::get<1>(param.param) ? "_fused" : "_unfused");
                         });

// ----------------------------------------------------------------------------------- refusals

Status compile(const Graph& g, const CompileOptions& options = {}) {
  std::unique_ptr<Runtime> rt;
  return Runtime::create(g, options, &rt);
}

TensorId filled(Graph& g, const std::string& name, Dims dims) {
  return g.constant(name, dims, std::vector<float>(testing::element_count(dims), 0.5f));
}

TEST(OnnxOpErrors, BinaryShapesThatDoNotBroadcast) {
  struct Case {
    Dims a;
    Dims b;
    const char* shapes;
  };
  const Case cases[] = {
      {{2, 16, 5, 5}, {3, 1, 1}, "b 'b' [3, 1, 1] does not broadcast to a 'a' [2, 16, 5, 5]"},
      {{2, 16, 5, 5}, {16, 5}, "b 'b' [16, 5] does not broadcast to a 'a' [2, 16, 5, 5]"},
      {{2, 16, 5, 5}, {1, 2, 16, 5, 5}, "b 'b' [1, 2, 16, 5, 5] does not broadcast"},
      {{2, 16, 5, 5}, {3, 16, 5, 5}, "b 'b' [3, 16, 5, 5] does not broadcast"},
      {{3, 10}, {3}, "b 'b' [3] does not broadcast to a 'a' [3, 10]"},
      {{3, 10}, {1, 3, 10}, "b 'b' [1, 3, 10] does not broadcast to a 'a' [3, 10]"},
  };
  for (const Case& c : cases) {
    Graph g;
    TensorId a = g.input("a", c.a, c.a.size() == 4 ? Layout::nchw : Layout::nc);
    g.output(g.binary(BinaryKind::mul, a, filled(g, "b", c.b), "scale"), "y");
    const Status s = compile(g);
    EXPECT_EQ(s.code(), StatusCode::invalid_graph) << c.shapes;
    EXPECT_THAT(s.message(), HasSubstr("node 'scale' (binary)"));
    EXPECT_THAT(s.message(), HasSubstr(c.shapes));
  }
  // An input b of the wrong shape, not only constants.
  Graph g;
  TensorId a = g.input("a", {2, 16, 5, 5});
  TensorId b = g.input("b", {2, 8, 1, 1});
  g.output(g.binary(BinaryKind::add, a, b, "gate"), "y");
  const Status s = compile(g);
  EXPECT_EQ(s.code(), StatusCode::invalid_graph);
  EXPECT_THAT(s.message(),
              HasSubstr("node 'gate' (binary): b 'b' [2, 8, 1, 1] does not broadcast to a 'a' "
                        "[2, 16, 5, 5]"));
}

TEST(OnnxOpErrors, ConstantAsTheFirstOperand) {
  Graph g;
  TensorId x = g.input("x", {1, 4, 3, 3});
  g.output(g.binary(BinaryKind::mul, filled(g, "scale", {4, 1, 1}), x, "mul"), "y");
  const Status s = compile(g);
  EXPECT_EQ(s.code(), StatusCode::invalid_graph);
  EXPECT_THAT(s.message(), HasSubstr("node 'mul' (binary): a 'scale' [4, 1, 1] is a constant"));
  EXPECT_THAT(s.message(), HasSubstr("only b may be one"));
}

TEST(OnnxOpErrors, ScalarConstantsAreValidOnlyWhereAnOperatorTakesThem) {
  {
    Graph g;  // a 0-d constant as b: fine
    TensorId x = g.input("x", {1, 4, 3, 3});
    g.output(g.binary(BinaryKind::add, x, g.constant("one", {}, {1.0f})), "y");
    EXPECT_TRUE(compile(g).ok()) << compile(g).to_string();
  }
  {
    Graph g;  // as a convolution's weights: refused by the convolution
    TensorId x = g.input("x", {1, 4, 3, 3});
    g.output(g.convolution(x, g.constant("w", {}, {1.0f}), no_tensor, {}, "conv"), "y");
    const Status s = compile(g);
    EXPECT_EQ(s.code(), StatusCode::invalid_graph);
    EXPECT_THAT(s.message(), HasSubstr("weights 'w' has dimensions [], expected 4 dimensions"));
  }
  {
    Graph g;  // a scalar still needs its one value
    TensorId x = g.input("x", {1, 4, 3, 3});
    g.output(g.binary(BinaryKind::add, x, g.constant("one", {}, {})), "y");
    EXPECT_THAT(compile(g).message(), HasSubstr("(1 values) but 0 values were given"));
  }
}

TEST(OnnxOpErrors, BadDilation) {
  struct Case {
    std::array<std::int64_t, 2> dilation;
    std::int64_t kernel;
    const char* what;
  };
  const Case cases[] = {
      {{0, 1}, 3, "dilation 0x1 is invalid: dilations must be at least 1"},
      {{2, -1}, 3, "dilation 2x-1 is invalid"},
      {{4, 4}, 3, "kernel 3x3 (dilation 4x4: spans 9x9) does not fit the padded input 8x8"},
      {{1, 3}, 4, "kernel 4x4 (dilation 1x3: spans 4x10) does not fit the padded input 8x8"},
  };
  for (const Case& c : cases) {
    Graph g;
    TensorId x = g.input("x", {1, 4, 8, 8});
    Conv2D a;
    a.dilation = c.dilation;
    g.output(g.convolution(x, filled(g, "w", {4, 4, c.kernel, c.kernel}), no_tensor, a, "atrous"),
             "y");
    const Status s = compile(g);
    EXPECT_EQ(s.code(), StatusCode::invalid_graph) << c.what;
    EXPECT_THAT(s.message(), HasSubstr("node 'atrous' (convolution)"));
    EXPECT_THAT(s.message(), HasSubstr(c.what));
  }
}

TEST(OnnxOpErrors, BadActivations) {
  struct Case {
    Eltwise attrs;
    const char* what;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const Case cases[] = {
      {act(EltwiseKind::clip, 6.0f, 0.0f), "clip bounds min (alpha)=6 max (beta)=0 are invalid"},
      {act(EltwiseKind::clip, nan, 1.0f), "clip bounds min (alpha)=nan"},
      {act(EltwiseKind::leaky_relu, inf), "leaky_relu alpha=inf is invalid"},
      {act(EltwiseKind::hard_sigmoid, 0.2f, nan), "hard_sigmoid alpha=0.2 beta=nan are invalid"},
      {act(static_cast<EltwiseKind>(99)), "activation kind 99 is unknown"},
  };
  for (const Case& c : cases) {
    Graph g;
    TensorId x = g.input("x", {1, 4, 8, 8});
    g.output(g.eltwise(x, c.attrs, "act"), "y");
    const Status s = compile(g);
    EXPECT_EQ(s.code(), StatusCode::invalid_graph) << c.what;
    EXPECT_THAT(s.message(), HasSubstr("node 'act' (eltwise)"));
    EXPECT_THAT(s.message(), HasSubstr(c.what));
  }
  Graph g;  // of a constant
  TensorId x = g.input("x", {1, 4, 8, 8});
  TensorId k = filled(g, "k", {1, 4, 8, 8});
  g.output(g.binary(BinaryKind::add, x, g.eltwise(k, act(EltwiseKind::sigmoid), "act")), "y");
  EXPECT_THAT(compile(g).message(), HasSubstr("node 'act' (eltwise): input 'k' is a constant"));
}

TEST(OnnxOpErrors, BuilderNamesAfterTheOperation) {
  Graph g;
  TensorId x = g.input("x", {1, 4, 8, 8});
  TensorId y = g.eltwise(x, act(EltwiseKind::hard_swish));
  TensorId z = g.binary(BinaryKind::mul, y, x);
  EXPECT_EQ(g.nodes().at(0).name, "hard_swish_0");
  EXPECT_EQ(g.nodes().at(1).name, "mul_1");
  EXPECT_EQ(g.tensors().at(static_cast<std::size_t>(z)).name, "mul_1");
  EXPECT_STREQ(to_string(EltwiseKind::leaky_relu), "leaky_relu");
  EXPECT_STREQ(to_string(EltwiseKind::clip), "clip");
  EXPECT_STREQ(to_string(EltwiseKind::sigmoid), "sigmoid");
  EXPECT_STREQ(to_string(EltwiseKind::hard_sigmoid), "hard_sigmoid");
  EXPECT_STREQ(to_string(EltwiseKind::tanh), "tanh");
  EXPECT_STREQ(to_string(BinaryKind::add), "add");
  EXPECT_STREQ(to_string(BinaryKind::mul), "mul");
  EXPECT_STREQ(to_string(OpKind::eltwise), "eltwise");
  EXPECT_STREQ(to_string(OpKind::binary), "binary");
}

}  // namespace
}  // namespace tfpin::engine
