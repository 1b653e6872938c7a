// Every operator against the naive reference, on small shapes, with NCHW and NHWC inputs, with and
// without fusion, on one lane and on two.
#include <gtest/gtest.h>
#include <oneapi/dnnl/dnnl_version.h>

#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <tuple>

#include "op_fixture.hpp"
#include "reference.hpp"
#include "test_util.hpp"
#include "tfpin/engine/graph.hpp"
#include "tfpin/engine/runtime.hpp"
#include "tfpin/engine/version.hpp"

namespace tfpin::engine {
namespace {

using testing::close;
using testing::random_vector;
using testing::run_engine;
using Dims = std::vector<std::int64_t>;

class OpTest : public testing::OpFixture {
 protected:
  TensorId positive(const std::string& name, const Dims& dims, float lo, float hi) {
    return g.constant(name, dims, random_vector(testing::element_count(dims), ++seed, lo, hi));
  }
  TensorId conv(TensorId x, std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride,
                std::int64_t pad, bool bias, const std::string& name, std::int64_t groups = 1) {
    Conv2D a;
    a.stride = {stride, stride};
    a.padding = {pad, pad, pad, pad};
    a.groups = groups;
    return g.convolution(x, constant(name + ".w", {out, in / groups, k, k}),
                         bias ? constant(name + ".b", {out}) : no_tensor, a, name);
  }
  TensorId bn(TensorId x, std::int64_t c, const std::string& name) {
    return g.batch_norm(x, positive(name + ".scale", {c}, 0.5f, 1.5f),
                        constant(name + ".shift", {c}), constant(name + ".mean", {c}),
                        positive(name + ".var", {c}, 0.5f, 2.0f), BatchNorm{1e-3f}, name);
  }
};

TEST_P(OpTest, Convolution3x3WithBias) {
  TensorId x = input("x", {2, 16, 9, 9});
  g.output(conv(x, 16, 32, 3, 1, 1, true, "conv"), "y");
  check();
}

TEST_P(OpTest, ConvolutionStrideAndAsymmetricPadding) {
  TensorId x = input("x", {1, 8, 10, 11});
  Conv2D a;
  a.stride = {2, 3};
  a.padding = {1, 0, 2, 1};
  g.output(g.convolution(x, constant("w", {16, 8, 3, 3}), no_tensor, a, "conv"), "y");
  check();
}

TEST_P(OpTest, FirstLayerConvolutionWithThreeChannels) {
  TensorId x = input("x", {2, 3, 17, 17});
  g.output(g.relu(conv(x, 3, 16, 7, 2, 3, true, "conv1")), "y");
  check();
  if (fusion()) {
    EXPECT_EQ(last.fused_relus, 1);
  }
}

TEST_P(OpTest, GroupedAndDepthwiseConvolution) {
  TensorId x = input("x", {1, 32, 8, 8});
  TensorId y = conv(x, 32, 32, 3, 1, 1, true, "grouped", 2);
  y = conv(y, 32, 32, 3, 2, 1, false, "depthwise", 32);
  g.output(y, "y");
  check();
}

TEST_P(OpTest, ChannelsThatAreNotMultiplesOfSixteen) {
  TensorId x = input("x", {1, 24, 7, 7});
  TensorId y = conv(x, 24, 40, 1, 1, 0, true, "a");
  y = conv(y, 40, 24, 3, 1, 1, true, "b");
  g.output(y, "y");
  check();
}

// Whether oneDNN itself has a brgemm kernel for a 3x3 stride-2 convolution on NHWC tensors (2.6:
// AVX-512 only), asked directly rather than through the engine under test.
bool onednn_has_nhwc_brgemm_convolution() {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  const dnnl::memory::desc src({2, 128, 28, 28}, dt::f32, tag::nhwc);
  const dnnl::memory::desc weights({128, 128, 3, 3}, dt::f32, tag::any);
  const dnnl::memory::desc bias({128}, dt::f32, tag::x);
  const dnnl::memory::desc dst({2, 128, 14, 14}, dt::f32, tag::nhwc);
  const auto inference = dnnl::prop_kind::forward_inference;
  const auto direct = dnnl::algorithm::convolution_direct;
  try {
#if DNNL_VERSION_MAJOR >= 3
    const dnnl::convolution_forward::primitive_desc pd(e, inference, direct, src, weights, bias,
                                                       dst, {2, 2}, {1, 1}, {1, 1});
#else
    const dnnl::convolution_forward::primitive_desc pd(
        {inference, direct, src, weights, bias, dst, {2, 2}, {1, 1}, {1, 1}}, e);
#endif
    return std::string(pd.impl_info_str()).find("brg") != std::string::npos;
  } catch (const dnnl::error&) {
    return false;
  }
}

// oneDNN's brgemm kernel on channels-last copies of a convolution's input and output
// (engine/src/ops/channels_last.hpp), forced on a strided 3x3 layer (ResNet-50's downsampling),
// a 1x7 and a 7x1 (Inception v3's), with bias and ReLU, against the reference. The engine must
// offer it exactly where oneDNN has that kernel (not under the AVX2 cap with oneDNN 2.6).
TEST_P(OpTest, ChannelsLastAlternativeMatchesTheReference) {
  TensorId x = input("x", {2, 128, 28, 28});
  TensorId y = g.relu(conv(x, 128, 128, 3, 2, 1, true, "down"));
  Conv2D row;
  row.padding = {0, 3, 0, 3};
  const TensorId row_w = constant("row.w", {128, 128, 1, 7});
  y = g.relu(g.convolution(y, row_w, constant("row.b", {128}), row, "row"));
  Conv2D column;
  column.padding = {3, 0, 3, 0};
  g.output(g.convolution(y, constant("column.w", {128, 128, 7, 1}), no_tensor, column, "column"),
           "y");
  check();
  CompileOptions forced;
  forced.fusion = fusion();
  forced.intra = 2;
  forced.force_kernel = "nhwc_";
  const auto got = run_engine(g, inputs, forced);
  ASSERT_TRUE(got.status.ok()) << got.status.to_string();
  // The strided layer is the one asked of oneDNN above (the others depend on what oneDNN has for
  // 1x7 and 7x1 on this ISA and version).
  std::string strided_kernel;
  for (const auto& step : testing::described_steps(got.description)) {
    if (step[1] == "down") strided_kernel = step[3];
  }
  EXPECT_EQ(strided_kernel.rfind("nhwc_brg", 0) == 0, onednn_has_nhwc_brgemm_convolution())
      << got.description;
  const auto want = reference::evaluate(g, inputs);
  EXPECT_TRUE(close(got.outputs.at("y"), want.at("y"), 1e-4, 1e-4));
  forced.channels_last = false;
  const auto off = run_engine(g, inputs, forced);
  ASSERT_TRUE(off.status.ok()) << off.status.to_string();
  EXPECT_EQ(off.description.find("nhwc_brg"), std::string::npos) << off.description;
}

TEST_P(OpTest, ConvolutionBatchNormReluIsFolded) {
  TensorId x = input("x", {2, 16, 6, 6});
  TensorId y = g.relu(bn(conv(x, 16, 32, 3, 1, 1, false, "conv"), 32, "bn"));
  g.output(y, "y");
  check();
  if (fusion()) {
    EXPECT_EQ(last.folded_batch_norms, 1);
    EXPECT_EQ(last.fused_relus, 1);
  } else {
    EXPECT_EQ(last.folded_batch_norms, 0);
  }
}

TEST_P(OpTest, IdentityResidualIsAddedInPlace) {
  TensorId x = input("x", {1, 16, 8, 8});
  TensorId r = g.relu(conv(x, 16, 32, 1, 1, 0, true, "stem"));
  TensorId y = g.relu(conv(r, 32, 16, 1, 1, 0, true, "c1"));
  y = conv(y, 16, 32, 3, 1, 1, true, "c2");
  g.output(g.relu(g.add(y, r)), "y");
  check();
  if (fusion()) {
    EXPECT_EQ(last.fused_adds, 1);
    EXPECT_EQ(last.in_place_adds, 1);
  }
}

TEST_P(OpTest, ResidualReadByTheSameConvolutionIsCopied) {
  TensorId x = input("x", {1, 16, 8, 8});
  TensorId r = conv(x, 16, 16, 1, 1, 0, true, "stem");
  TensorId y = conv(r, 16, 16, 3, 1, 1, true, "c");  // reads r and would overwrite it
  g.output(g.add(y, r), "y");
  check();
  if (fusion()) {
    EXPECT_EQ(last.fused_adds, 1);
    EXPECT_EQ(last.in_place_adds, 0);
  }
}

TEST_P(OpTest, ResidualUsedAfterTheAddIsNotOverwritten) {
  TensorId x = input("x", {1, 16, 6, 6});
  TensorId r = conv(x, 16, 16, 1, 1, 0, true, "stem");
  TensorId y = conv(x, 16, 16, 3, 1, 1, true, "branch");
  TensorId s = g.add(y, r);
  g.output(g.concat({s, r}), "y");
  check();
  if (fusion()) {
    EXPECT_EQ(last.in_place_adds, 0);
  }
}

TEST_P(OpTest, ResidualThatIsAGraphInput) {
  TensorId x = input("x", {1, 16, 5, 5});
  g.output(g.relu(g.add(x, conv(x, 16, 16, 3, 1, 1, true, "c"))), "y");
  check();
}

TEST_P(OpTest, StandaloneBatchNorm) {
  TensorId x = input("x", {2, 5, 4, 3});
  g.output(bn(x, 5, "bn"), "y");
  check();
}

TEST_P(OpTest, BatchNormWithRelu) {
  TensorId x = input("x", {1, 16, 4, 4});
  g.output(g.relu(bn(x, 16, "bn")), "y");
  check();
}

TEST_P(OpTest, StandaloneRelu) {
  TensorId x = input("x", {2, 7, 3, 5});
  g.output(g.relu(x), "y");
  check();
}

TEST_P(OpTest, MaxPooling) {
  TensorId x = input("x", {2, 16, 11, 11});
  Pool2D a;
  a.kernel = {3, 3};
  a.stride = {2, 2};
  a.padding = {1, 1, 1, 1};
  g.output(g.max_pool(conv(x, 16, 16, 1, 1, 0, true, "c"), a), "y");
  Pool2D b;
  b.kernel = {2, 2};
  b.stride = {2, 2};
  g.output(g.max_pool(x, b), "z");
  check();
}

// tfpin's max pooling kernel (a timed alternative to oneDNN's in inference), forced: GoogLeNet's
// windows (3x3 at stride 1 with padding, 3x3 at stride 2 in ceil mode) and VGG's 2x2, at batch 1
// where each plane's rows are split between the threads, and at batch 3.
TEST_P(OpTest, MaxPoolingByTfpinKernel) {
  for (std::int64_t batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    g = Graph();
    inputs.clear();
    TensorId x = input("x", {batch, 32, 13, 13});
    Pool2D branch;
    branch.kernel = {3, 3};
    branch.padding = {1, 1, 1, 1};
    branch.ceil_mode = true;
    Pool2D reduce;
    reduce.kernel = {3, 3};
    reduce.stride = {2, 2};
    reduce.ceil_mode = true;
    Pool2D halve;
    halve.kernel = {2, 2};
    halve.stride = {2, 2};
    const TensorId c = g.relu(conv(x, 32, 32, 1, 1, 0, true, "c"));
    g.output(g.max_pool(g.max_pool(c, branch, "branch"), reduce, "reduce"), "y");
    g.output(g.max_pool(c, halve, "halve"), "z");
    check();
    CompileOptions forced;
    forced.fusion = fusion();
    forced.intra = 2;
    forced.force_kernel = "tfpin_max_pool";
    const auto got = run_engine(g, inputs, forced);
    ASSERT_TRUE(got.status.ok()) << got.status.to_string();
    int pools = 0;
    for (const auto& step : testing::described_steps(got.description)) {
      if (step[2] != "max_pool") continue;
      ++pools;
      // Offered wherever the CPU has AVX2 (every CPU the engine's tests run on).
      if (__builtin_cpu_supports("avx2")) {
        EXPECT_EQ(step[3].rfind("tfpin_max_pool", 0), 0u) << got.description;
      }
    }
    EXPECT_EQ(pools, 3) << got.description;
    const auto want = reference::evaluate(g, inputs);
    EXPECT_TRUE(close(got.outputs.at("y"), want.at("y"), 1e-6, 1e-6));
    EXPECT_TRUE(close(got.outputs.at("z"), want.at("z"), 1e-6, 1e-6));
  }
}

TEST_P(OpTest, MaxPoolingCeilMode) {
  TensorId x = input("x", {1, 16, 10, 10});
  Pool2D a;
  a.kernel = {3, 3};
  a.stride = {2, 2};
  a.ceil_mode = true;  // 10 -> 5 (floor would give 4)
  g.output(g.max_pool(x, a), "y");
  Pool2D same;
  same.kernel = {3, 3};
  same.padding = {1, 1, 1, 1};
  same.ceil_mode = true;
  g.output(g.max_pool(x, same), "z");
  check();
}

TEST_P(OpTest, AveragePooling) {
  TensorId x = input("x", {2, 16, 7, 7});
  Pool2D a;
  a.kernel = {3, 3};
  a.padding = {1, 1, 1, 1};
  g.output(g.avg_pool(x, a), "include");
  a.count_include_pad = false;
  g.output(g.avg_pool(x, a), "exclude");
  Pool2D global;
  global.kernel = {7, 7};
  g.output(g.avg_pool(conv(x, 16, 32, 1, 1, 0, true, "c"), global), "global");
  check();
}

TEST_P(OpTest, LocalResponseNormalisation) {
  TensorId x = input("x", {2, 16, 6, 6});
  Lrn a;
  a.size = 5;
  a.alpha = 0.5f;  // large enough that the normalisation matters on values in [-1, 1]
  a.beta = 0.75f;
  a.k = 2.0f;
  g.output(g.lrn(conv(x, 16, 32, 3, 1, 1, true, "c"), a), "y");
  g.output(g.lrn(x, a), "z");
  check();
}

TEST_P(OpTest, ConcatOfBranches) {
  TensorId x = input("x", {2, 16, 5, 5});
  TensorId a = conv(x, 16, 16, 1, 1, 0, true, "a");
  TensorId b = conv(x, 16, 32, 3, 1, 1, true, "b");
  Pool2D p;
  p.kernel = {3, 3};
  p.padding = {1, 1, 1, 1};
  TensorId c = g.max_pool(x, p);
  g.output(g.concat({a, b, c}), "y");
  TensorId y = input("y_in", {2, 8, 5, 5});
  g.output(g.concat({x, y}), "z");
  check();
}

// Batch 1: concats whose inputs can be written straight into their slices disappear
// (in_place_concat.cpp); the others still copy. Every output against the reference, 1 and 2 lanes.
TEST_P(OpTest, ConcatInPlaceAtBatchOne) {
  TensorId x = input("x", {1, 16, 6, 6});
  TensorId a = g.relu(conv(x, 16, 16, 1, 1, 0, true, "a"));
  TensorId b = g.relu(conv(x, 16, 32, 3, 1, 1, true, "b"));
  TensorId c = conv(x, 16, 16, 1, 1, 0, true, "c");
  TensorId inner = g.concat({a, b});         // in place
  g.output(g.concat({inner, c}), "nested");  // in place, and so the slices inside `inner`
  Pool2D p;
  p.kernel = {3, 3};
  p.padding = {1, 1, 1, 1};
  g.output(g.max_pool(a, p), "reads_a_slice");      // another reader of a slice
  g.output(g.concat({c, c}), "same_value_twice");   // c is a slice already: copies
  TensorId d = conv(x, 16, 8, 1, 1, 0, true, "d");  // 8 channels: not whole blocks
  g.output(g.concat({d, conv(x, 16, 16, 1, 1, 0, true, "e")}), "partial_block");
  g.output(g.concat({x, conv(x, 16, 16, 3, 1, 1, true, "f")}), "graph_input");
  check();
  if (fusion()) {
    // Whole blocks: which concats qualify follows the blocked layout the ISA's convolutions write
    // (nChw16c with AVX-512, nChw8c with AVX2): `partial_block` slices 8 channels, a whole block
    // of nChw8c but half of one of nChw16c. Plain nchw qualifies too; nhwc never does.
    const std::int64_t block = testing::channel_block_written_by(last_description, "d");
    ASSERT_EQ(testing::channel_block_written_by(last_description, "e"), block) << last_description;
    const int expected = block == 0 ? 0 : 2 + (8 % block == 0 ? 1 : 0);
    EXPECT_EQ(last.in_place_concats, expected) << "channels per block " << block << "\n"
                                               << last_description;
  }

  // The in-place residual writes into `r` after the concat read it: `r` has two writers, so the
  // concat must copy (an alias would see the sum).
  g = Graph();
  inputs.clear();
  TensorId y = input("y", {1, 64, 7, 7});
  TensorId q = conv(y, 64, 32, 1, 1, 0, true, "q");
  TensorId r = conv(y, 64, 64, 1, 1, 0, true, "r");
  TensorId cat = g.concat({q, r});
  g.output(g.relu(g.add(conv(cat, 96, 64, 1, 1, 0, true, "proj"), r)), "sum");
  g.output(cat, "cat");
  check();
  if (fusion()) {
    EXPECT_EQ(last.in_place_adds, 1);
    EXPECT_EQ(last.in_place_concats, 0);
  }

  // At batch 2 a slice is strided by the image: never in place.
  g = Graph();
  inputs.clear();
  TensorId z = input("z", {2, 16, 4, 4});
  g.output(g.concat({conv(z, 16, 16, 1, 1, 0, true, "s"), conv(z, 16, 32, 1, 1, 0, true, "t")}),
           "batch_two");
  check();
  EXPECT_EQ(last.in_place_concats, 0);
}

// Batch 1: sibling 1x1 convolutions on one input (the same stride and activation) run as one
// convolution, each member's output a slice of its output (pointwise_siblings.cpp), read by 3x3
// convolutions, pooling and a 1x1. Every output against the reference, 1 and 2 lanes.
TEST_P(OpTest, SiblingPointwiseConvolutionsAtBatchOne) {
  TensorId x = input("x", {1, 32, 6, 6});
  TensorId a = g.relu(conv(x, 32, 16, 1, 1, 0, true, "a"));
  TensorId b = g.relu(conv(x, 32, 32, 1, 1, 0, true, "b"));
  TensorId c = g.relu(conv(x, 32, 24, 1, 1, 0, true, "c"));  // splits a block of 16: last
  TensorId d = g.relu(conv(x, 32, 40, 1, 1, 0, true, "d"));  // ... and so would this one
  TensorId e = conv(x, 32, 16, 1, 1, 0, true, "e");           // no ReLU: a group of its own
  TensorId f = conv(x, 32, 32, 1, 1, 0, false, "f");          // with f, which has no bias
  TensorId s = g.relu(conv(x, 32, 16, 1, 2, 0, true, "s"));  // stride 2: with t only
  TensorId t = g.relu(conv(x, 32, 16, 1, 2, 0, true, "t"));
  TensorId h = g.relu(conv(x, 32, 16, 1, 1, 0, true, "h"));  // writes into the concat instead
  Pool2D p;
  p.kernel = {3, 3};
  p.padding = {1, 1, 1, 1};
  g.output(conv(a, 16, 16, 3, 1, 1, true, "a3"), "a3");
  g.output(g.max_pool(b, p), "b_pool");
  g.output(conv(c, 24, 16, 3, 1, 1, true, "c3"), "c3");
  g.output(conv(d, 40, 16, 1, 1, 0, true, "d1"), "d1");
  g.output(conv(e, 16, 16, 3, 1, 1, true, "e3"), "e3");
  g.output(g.max_pool(f, p), "f_pool");
  g.output(g.max_pool(s, p), "s_pool");
  g.output(conv(t, 16, 16, 3, 1, 1, true, "t3"), "t3");
  g.output(g.concat({h, conv(x, 32, 16, 3, 1, 1, true, "k")}), "cat");
  check();
  if (fusion()) {
    // Which members join follows the ISA's block: 24 and 40 channels are whole blocks of nChw8c
    // (AVX2) but not of nChw16c (AVX-512), where only the first of them joins, last.
    const std::int64_t block = testing::channel_block_written_by(last_description, "e+f");
    ASSERT_TRUE(block == 8 || block == 16) << last_description;
    const std::string relus = block == 16 ? "a+b+c" : "a+b+c+d";
    EXPECT_EQ(testing::channel_block_written_by(last_description, relus), block)
        << last_description;
    EXPECT_EQ(testing::channel_block_written_by(last_description, "s+t"), block)
        << last_description;
    EXPECT_EQ(last.merged_convolutions, (block == 16 ? 3 : 4) + 2 + 2) << last_description;
    EXPECT_EQ(last.in_place_concats, 1) << last_description;

    CompileOptions separate;
    separate.merge_siblings = false;
    const auto got = testing::run_engine(g, inputs, separate, 2);
    ASSERT_TRUE(got.status.ok()) << got.status.to_string();
    EXPECT_EQ(got.report.merged_convolutions, 0);
  }

  // At batch 2 a slice is strided by the image: never merged.
  g = Graph();
  inputs.clear();
  TensorId z = input("z", {2, 16, 4, 4});
  g.output(conv(g.relu(conv(z, 16, 16, 1, 1, 0, true, "u")), 16, 16, 3, 1, 1, true, "u3"), "u3");
  g.output(conv(g.relu(conv(z, 16, 32, 1, 1, 0, true, "v")), 32, 16, 3, 1, 1, true, "v3"), "v3");
  check();
  EXPECT_EQ(last.merged_convolutions, 0);
}

TEST_P(OpTest, ElementwiseAdd) {
  TensorId a = input("a", {2, 16, 4, 4});
  TensorId b = input("b", {2, 16, 4, 4});
  g.output(g.relu(g.add(a, b)), "y");
  TensorId m = input("m", {3, 10});
  TensorId n = input("n", {3, 10});
  g.output(g.add(m, n), "z");
  check();
}

TEST_P(OpTest, InnerProductOnMatrices) {
  TensorId x = input("x", {4, 50});
  TensorId y = g.relu(g.inner_product(x, constant("w1", {20, 50}), constant("b1", {20})));
  y = g.inner_product(y, constant("w2", {7, 20}), no_tensor);
  g.output(y, "y");
  check();
}

TEST_P(OpTest, InnerProductAfterFlatten) {
  TensorId x = input("x", {2, 16, 3, 3});
  TensorId f = g.flatten(conv(x, 16, 32, 3, 1, 1, true, "c"));
  g.output(g.softmax(g.inner_product(f, constant("w", {10, 288}), constant("b", {10}))), "y");
  check();
}

TEST_P(OpTest, InnerProductOnImages) {
  TensorId x = input("x", {2, 16, 3, 3});
  TensorId c = conv(x, 16, 32, 3, 1, 1, true, "c");  // blocked layout
  g.output(g.inner_product(c, constant("w", {10, 288}), constant("b", {10})), "y");
  g.output(g.relu(g.inner_product(x, constant("v", {5, 144}), no_tensor)), "z");  // caller's layout
  check();
}

// Batch 1 at inference: tfpin's matrix-vector kernel (AVX-512 or AVX2) where the shapes allow,
// oneDNN elsewhere (10 outputs are not whole blocks of 4).
TEST_P(OpTest, InnerProductBatchOne) {
  TensorId x = input("x", {1, 16, 3, 3});
  TensorId f = g.flatten(conv(x, 16, 32, 3, 1, 1, true, "c"));
  TensorId h = g.relu(g.inner_product(f, constant("w1", {64, 288}), constant("b1", {64})));
  g.output(g.inner_product(h, constant("w2", {10, 64}), constant("b2", {10})), "y");
  g.output(g.inner_product(x, constant("v", {8, 144}), no_tensor), "z");  // an image, no bias
  // 1040 inputs: two whole tiles of 512 and a short one of 16. 136 outputs: 34 row blocks, two
  // whole chunks of 16 and a short one of 2, shared by 2 threads.
  TensorId u = input("u", {1, 1040}, 2.0f);
  g.output(g.relu(g.inner_product(u, constant("wu", {136, 1040}), constant("bu", {136}))), "v");
  check();
  const std::string isa = onednn_effective_isa();
  if (isa == "avx512_core" || isa == "avx2") {
    std::size_t kernels = 0;
    for (std::size_t at = last_description.find("tfpin:matrix_vector"); at != std::string::npos;
         at = last_description.find("tfpin:matrix_vector", at + 1)) {
      ++kernels;
    }
    EXPECT_EQ(kernels, 3U) << "fc w1, v and wu on the matrix-vector kernel\n" << last_description;
  }
}

TEST_P(OpTest, FlattenAsOutput) {
  TensorId x = input("x", {2, 16, 3, 3});
  g.output(g.flatten(conv(x, 16, 32, 1, 1, 0, true, "c")), "y");
  g.output(g.flatten(x), "z");
  check();
}

TEST_P(OpTest, Softmax) {
  TensorId x = input("x", {3, 1000});
  g.output(g.softmax(x), "y");
  check();
}

TEST_P(OpTest, DropoutIsIdentity) {
  TensorId x = input("x", {2, 16, 4, 4});
  g.output(g.relu(g.dropout(conv(x, 16, 16, 3, 1, 1, true, "c"), Dropout{0.5f})), "y");
  g.output(g.dropout(x), "z");
  check();
}

TEST_P(OpTest, InceptionLikeBlockWithResidual) {
  TensorId x = input("x", {2, 32, 7, 7});
  TensorId stem = g.relu(bn(conv(x, 32, 32, 1, 1, 0, false, "stem"), 32, "stem.bn"));
  TensorId b1 = g.relu(conv(stem, 32, 16, 1, 1, 0, true, "b1"));
  TensorId b2 =
      g.relu(conv(g.relu(conv(stem, 32, 16, 1, 1, 0, true, "b2a")), 16, 32, 3, 1, 1, true, "b2b"));
  Pool2D p;
  p.kernel = {3, 3};
  p.padding = {1, 1, 1, 1};
  TensorId b3 = conv(g.avg_pool(stem, p), 32, 16, 1, 1, 0, true, "b3");
  TensorId cat = g.concat({b1, b2, b3});
  TensorId proj = conv(cat, 64, 32, 1, 1, 0, false, "proj");
  TensorId out = g.relu(g.add(proj, stem));
  g.output(out, "y");
  check();
}

TEST_P(OpTest, WinogradConvolution) {
  // Batch 4, 64 channels, 3x3 stride 1: oneDNN picks its Winograd kernel here (when allowed).
  TensorId x = input("x", {4, 64, 14, 14});
  g.output(g.relu(conv(x, 64, 64, 3, 1, 1, true, "conv")), "y");
  check(1e-3, 1e-4);
  CompileOptions o;
  o.fusion = fusion();
  std::unique_ptr<Runtime> rt;
  ASSERT_TRUE(Runtime::create(g, o, &rt).ok());
  // oneDNN 3 dropped its f32 Winograd kernels: then the option must change nothing.
  EXPECT_EQ(rt->describe().find("wino") != std::string::npos, onednn_offers_winograd())
      << rt->describe();
  o.winograd = false;
  ASSERT_TRUE(Runtime::create(g, o, &rt).ok());
  EXPECT_EQ(rt->describe().find("wino"), std::string::npos) << rt->describe();
}

TEST(Pooling, PlainInputRunsAVectorisedKernel) {
  // A max pooling straight on a plain NCHW image (as after AlexNet's gemm first layer on AVX2):
  // oneDNN 2.6's kernel for plain layouts on AVX2 is unvectorised (simple_nchw), so the input is
  // reordered into the blocked layout and a jit kernel pools it. (With AVX-512 oneDNN has a jit
  // kernel for plain layouts too: the AVX2-capped run is the one that can fail.)
  Graph g;
  const TensorId x = g.input("x", {2, 32, 21, 21});
  Pool2D p;
  p.kernel = {3, 3};
  p.stride = {2, 2};
  g.output(g.max_pool(x, p), "y");
  const std::map<std::string, std::vector<float>> in{{"x", random_vector(2 * 32 * 21 * 21, 4)}};
  CompileOptions o;
  auto r = run_engine(g, in, o);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  bool pooled = false;
  for (const auto& step : testing::described_steps(r.description)) {
    if (step[2] != "max_pool") continue;
    pooled = true;
    EXPECT_NE(step[3].find("jit"), std::string::npos) << r.description;
  }
  EXPECT_TRUE(pooled) << r.description;
  const auto want = reference::evaluate(g, in);
  EXPECT_TRUE(close(r.outputs.at("y"), want.at("y"), 1e-6, 1e-6));
  // oneDNN's choice when asked not to use blocked layouts.
  o.blocked_layouts = false;
  r = run_engine(g, in, o);
  ASSERT_TRUE(r.status.ok()) << r.status.to_string();
  EXPECT_TRUE(close(r.outputs.at("y"), want.at("y"), 1e-6, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Engine, OpTest,
                         ::testing::Combine(::testing::Values(Layout::nchw, Layout::nhwc),
                                            ::testing::Bool()),
                         [](const ::testing::TestParamInfo<OpTest::ParamType>& param) {
                           return std::string(to_string(std::get<0>(param.param))) +
                                  (std::get<1>(param.param) ? "_fused" : "_unfused");
                         });

}  // namespace
}  // namespace tfpin::engine
