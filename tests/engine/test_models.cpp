// Whole models: the same probabilities with one and two lanes, NHWC and NCHW inputs, and without
// fusion (small batches keep this fast on two cores).
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

#include "reference.hpp"
#include "test_util.hpp"
#include "tfpin/engine/models.hpp"
#include "tfpin/engine/runtime.hpp"

namespace tfpin::engine {
namespace {

using testing::close;
using testing::random_vector;
using testing::run_engine;

class ModelTest : public ::testing::TestWithParam<Model> {};

TEST_P(ModelTest, SameOutputAcrossLanesLayoutsAndFusion) {
  const Model model = GetParam();
  const std::int64_t batch = model == Model::alexnet || model == Model::googlenet ? 2 : 1;
  const std::int64_t s = image_size(model);
  const std::vector<std::int64_t> dims{batch, 3, s, s};
  const std::vector<float> images = random_vector(static_cast<std::size_t>(batch * 3 * s * s), 99);
  const std::map<std::string, std::vector<float>> nchw_in{{"images", images}};
  const std::map<std::string, std::vector<float>> nhwc_in{
      {"images", reference::nchw_to_nhwc(images, dims)}};

  const Graph nhwc = build_model(model, batch, Layout::nhwc);
  CompileOptions one_lane;
  one_lane.lanes = 1;
  one_lane.intra = 2;
  auto base = run_engine(nhwc, nhwc_in, one_lane);
  ASSERT_TRUE(base.status.ok()) << base.status.to_string();
  const std::vector<float>& p = base.outputs.at("probabilities");
  ASSERT_EQ(p.size(), static_cast<std::size_t>(batch * num_classes));
  for (std::int64_t b = 0; b < batch; ++b) {
    auto row = p.begin() + b * num_classes;
    ASSERT_TRUE(
        std::all_of(row, row + num_classes, [](float v) { return std::isfinite(v) && v >= 0; }));
    EXPECT_NEAR(std::accumulate(row, row + num_classes, 0.0), 1.0, 1e-3);
    // Not a uniform answer: the logits carry information, so comparisons below mean something.
    EXPECT_GT(*std::max_element(row, row + num_classes), 3.0f / num_classes);
  }
  if (model == Model::inception3) {
    EXPECT_EQ(base.report.in_place_concats, 15);  // 11 blocks, 4 concats nested in Mixed_7b/7c
    // The two reduce layers of each block but Mixed_6a (one 1x1 layer): 10 blocks of 11.
    EXPECT_EQ(base.report.merged_convolutions, 20);
  }
  if (model == Model::resnet50) {
    EXPECT_EQ(base.report.fused_adds, 16);
    EXPECT_EQ(base.report.in_place_adds, 16);
    EXPECT_EQ(base.report.folded_batch_norms, 53);
  }
  // Layout conversions in a whole network: the input into the first convolution's layout and
  // the flatten into plain NCHW before the classifier (either may be none, where oneDNN's kernels
  // take the caller's layout). Between layers, only where oneDNN had no blocked kernel for a
  // convolution (AlexNet's 11x11 stride-4 first layer on AVX2 runs gemm on plain NCHW): that
  // plain output into the next layer's blocked layout. Never from one blocked layout into another,
  // and never more than such plain convolutions. Which layouts those are follows the ISA and
  // oneDNN's version, so the count is derived from the compiled steps, not fixed.
  {
    int boundary = 0;
    int between = 0;
    int plain_convolutions = 0;
    auto blocked = [](const std::string& layout) {
      return std::any_of(layout.begin(), layout.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
    };
    for (const auto& step : testing::described_steps(base.description)) {
      const std::string& name = step[1];
      const std::string& op = step[2];
      if (op.rfind("convolution", 0) == 0 && step.size() >= 6 && !blocked(step[step.size() - 2])) {
        ++plain_convolutions;
      }
      if (op != "reorder" || name.ends_with(":output")) continue;
      ASSERT_EQ(step.size(), 8U) << base.description;
      if (name == "images:reorder" || name == "flatten") {
        ++boundary;
        continue;
      }
      ++between;
      EXPECT_FALSE(blocked(step[4])) << "a reorder between two blocked layouts: " << name << "\n"
                                     << base.description;
      EXPECT_TRUE(blocked(step[6])) << name << "\n" << base.description;
    }
    EXPECT_LE(boundary, 2);
    EXPECT_LE(between, plain_convolutions) << base.description;
    EXPECT_EQ(base.report.reorders, boundary + between) << base.description;
  }
  EXPECT_LT(base.report.arena_bytes, base.report.activation_bytes);

  CompileOptions two_lanes;
  two_lanes.lanes = 2;
  two_lanes.intra = 1;
  auto lanes = run_engine(nhwc, nhwc_in, two_lanes, 2);
  ASSERT_TRUE(lanes.status.ok()) << lanes.status.to_string();
  EXPECT_TRUE(close(lanes.outputs.at("probabilities"), p, 1e-3, 1e-4)) << "2 lanes vs 1";

  const Graph nchw = build_model(model, batch, Layout::nchw);
  auto channels_first = run_engine(nchw, nchw_in, one_lane);
  ASSERT_TRUE(channels_first.status.ok()) << channels_first.status.to_string();
  EXPECT_TRUE(close(channels_first.outputs.at("probabilities"), p, 1e-3, 1e-4)) << "NCHW vs NHWC";

  CompileOptions unfused = one_lane;
  unfused.fusion = false;
  auto plain = run_engine(nhwc, nhwc_in, unfused);
  ASSERT_TRUE(plain.status.ok()) << plain.status.to_string();
  EXPECT_EQ(plain.report.fused_relus, 0);
  EXPECT_TRUE(close(plain.outputs.at("probabilities"), p, 2e-3, 2e-4)) << "unfused vs fused";

  CompileOptions direct = one_lane;
  direct.winograd = false;
  direct.blocked_layouts = false;  // oneDNN's own layout choice (NHWC brgemm kernels)
  auto other = run_engine(nhwc, nhwc_in, direct);
  ASSERT_TRUE(other.status.ok()) << other.status.to_string();
  EXPECT_TRUE(close(other.outputs.at("probabilities"), p, 2e-3, 2e-4)) << "oneDNN layouts, direct";
}

INSTANTIATE_TEST_SUITE_P(Zoo, ModelTest,
                         ::testing::Values(Model::resnet50, Model::inception3, Model::vgg16,
                                           Model::googlenet, Model::alexnet),
                         [](const ::testing::TestParamInfo<Model>& param) {
                           return std::string(to_string(param.param));
                         });

TEST(ModelZoo, NamesRoundTrip) {
  for (const std::string& name : model_names()) {
    auto m = parse_model(name);
    ASSERT_TRUE(m.has_value()) << name;
    EXPECT_EQ(name, to_string(*m));
  }
  EXPECT_FALSE(parse_model("resnet51").has_value());
  EXPECT_EQ(image_size(Model::inception3), 299);
  EXPECT_EQ(image_size(Model::resnet50), 224);
}

TEST(ModelZoo, FlopsMatchThePublishedCounts) {
  // Multiply-accumulates per image (torchvision's numbers), times 2.
  const std::pair<Model, double> expected[] = {{Model::resnet50, 4.09e9},
                                               {Model::inception3, 5.71e9},
                                               {Model::vgg16, 15.47e9},
                                               {Model::googlenet, 1.50e9},
                                               {Model::alexnet, 0.714e9}};
  // The count is the graph's: compiled without the kernels that only add candidates to time (their
  // weight transforms made this test take 35 s).
  CompileOptions options;
  options.winograd = false;
  options.channels_last = false;
  options.matrix_vector = false;
  for (const auto& [model, macs] : expected) {
    std::unique_ptr<Runtime> rt;
    ASSERT_TRUE(Runtime::create(build_model(model, 1, Layout::nchw), options, &rt).ok());
    EXPECT_NEAR(rt->report().flops / 2 / macs, 1.0, 0.03) << to_string(model);
  }
}

}  // namespace
}  // namespace tfpin::engine
