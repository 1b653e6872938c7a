// Training mode: every backward operator against finite differences of the naive reference's loss
// (NCHW and NHWC inputs, fused and unfused), dropout's mask, and a small residual network trained
// a few steps (the loss falls; one and two lanes, fused and unfused agree).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <tuple>

#include "reference.hpp"
#include "test_util.hpp"
#include "tfpin/engine/graph.hpp"
#include "tfpin/engine/models.hpp"
#include "tfpin/engine/runtime.hpp"

namespace tfpin::engine {
namespace {

using ::testing::HasSubstr;
using testing::random_vector;
using Dims = std::vector<std::int64_t>;
using Values = std::map<std::string, std::vector<float>>;

constexpr std::int64_t classes = 10;

std::size_t count(const Dims& d) {
  std::size_t n = 1;
  for (auto x : d) n *= static_cast<std::size_t>(x);
  return n;
}

// Builds a network; constants named in `overrides` take those values (for finite differences).
class Net {
 public:
  Net(Layout layout, const Values& overrides) : layout_(layout), overrides_(overrides) {}

  TensorId input(const Dims& dims) {
    std::vector<float> data = random_vector(count(dims), 1000);
    batch_ = dims[0];
    inputs["x"] = layout_ == Layout::nhwc ? reference::nchw_to_nhwc(data, dims) : data;
    return g.input("x", dims, layout_);
  }
  TensorId constant(const std::string& name, const Dims& dims, float lo, float hi,
                    bool is_trained = true) {
    std::vector<float> v = random_vector(count(dims), ++seed_, lo, hi);
    if (auto it = overrides_.find(name); it != overrides_.end()) v = it->second;
    if (is_trained) trained.push_back(name);
    initial[name] = v;
    return g.constant(name, dims, std::move(v));
  }
  TensorId conv(TensorId x, std::int64_t in, std::int64_t out, std::int64_t k, std::int64_t stride,
                std::int64_t pad, bool bias, const std::string& name) {
    Conv2D a;
    a.stride = {stride, stride};
    a.padding = {pad, pad, pad, pad};
    const float s = 1.5f / std::sqrt(static_cast<float>(in * k * k));
    return g.convolution(x, constant(name + ".w", {out, in, k, k}, -s, s),
                         bias ? constant(name + ".b", {out}, -0.1f, 0.1f) : no_tensor, a, name);
  }
  TensorId bn(TensorId x, std::int64_t c, const std::string& name) {
    return g.batch_norm(x, constant(name + ".scale", {c}, 0.5f, 1.5f),
                        constant(name + ".shift", {c}, -0.2f, 0.2f),
                        constant(name + ".mean", {c}, -0.1f, 0.1f, false),
                        constant(name + ".var", {c}, 0.5f, 1.5f, false), BatchNorm{1e-3f}, name);
  }
  TensorId pool(TensorId x, bool max, std::int64_t k, std::int64_t stride, std::int64_t pad) {
    Pool2D a;
    a.kernel = {k, k};
    a.stride = {stride, stride};
    a.padding = {pad, pad, pad, pad};
    return max ? g.max_pool(x, a) : g.avg_pool(x, a);
  }
  TensorId fc(TensorId x, std::int64_t in, std::int64_t out, const std::string& name) {
    const float s = 2.0f / std::sqrt(static_cast<float>(in));
    return g.inner_product(x, constant(name + ".w", {out, in}, -s, s),
                           constant(name + ".b", {out}, -0.1f, 0.1f), name);
  }
  // Flatten, inner product to the classes, softmax: the output the loss is taken on.
  void classifier(TensorId x, std::int64_t features) {
    g.output(g.softmax(fc(g.flatten(x), features, classes, "fc")), "p");
    std::vector<float> labels;
    for (std::int64_t n = 0; n < batch_; ++n) labels.push_back(static_cast<float>(n * 7 % classes));
    inputs["labels"] = labels;
  }

  Graph g;
  Values inputs;
  Values initial;
  std::vector<std::string> trained;

 private:
  Layout layout_;
  Values overrides_;
  std::uint64_t seed_ = 0;
  std::int64_t batch_ = 1;
};

using Builder = std::function<void(Net&)>;

struct Training {
  Status status;
  std::vector<float> losses;  // one per step
  Values parameters;          // after the steps, every trained tensor
  CompileReport report;
  std::string steps;  // Runtime::describe()
};

Training train(const Net& net, CompileOptions options, int steps) {
  Training t;
  std::unique_ptr<Runtime> rt;
  t.status = Runtime::create(net.g, options, &rt);
  if (!t.status.ok()) return t;
  t.report = rt->report();
  t.steps = rt->describe();
  std::vector<ExternalInput> in;
  for (const TensorInfo& info : rt->inputs())
    in.push_back({info.name, net.inputs.at(info.name).data()});
  std::vector<float> p(rt->outputs().at(0).elements());
  const ExternalOutput out[] = {{rt->outputs().at(0).name, p.data()}};
  t.status = rt->setup(in, out);
  for (int s = 0; t.status.ok() && s < steps; ++s) {
    t.status = rt->run();
    t.losses.push_back(rt->loss());
  }
  for (const std::string& name : net.trained) {
    Status s = rt->parameter(name, &t.parameters[name]);
    if (!s.ok()) t.status = s;
  }
  return t;
}

double reference_loss(const Net& net) {
  const auto out = reference::evaluate(net.g, net.inputs, true);
  const std::vector<float>& p = out.at("p");
  const std::vector<float>& labels = net.inputs.at("labels");
  double loss = 0;
  for (std::size_t n = 0; n < labels.size(); ++n) {
    loss -= std::log(static_cast<double>(
        p[n * static_cast<std::size_t>(classes) + static_cast<std::size_t>(labels[n])]));
  }
  return loss / static_cast<double>(labels.size());
}

class TrainingOps : public ::testing::TestWithParam<std::tuple<Layout, bool>> {
 protected:
  // One engine step with learning rate 1 and no momentum gives each gradient as before - after.
  // Each is checked along a random direction d against the reference's central difference
  // (L(w + eps d) - L(w - eps d)) / 2 eps, which averages over ReLU and max-pool kinks.
  // Returns the compile report (empty when the run failed).
  CompileReport check_gradients(const Builder& build) {
    Net net(std::get<0>(GetParam()), {});
    build(net);
    CompileOptions o;
    o.fusion = std::get<1>(GetParam());
    o.training = TrainingOptions{1.0f, 0.0f, 0.1f, 1, 0, std::nullopt};
    Training t = train(net, o, 1);
    EXPECT_TRUE(t.status.ok()) << t.status.to_string();
    if (!t.status.ok()) return {};
    steps_ = t.steps;
    const double loss = reference_loss(net);
    EXPECT_NEAR(t.losses.at(0), loss, 1e-4 * std::abs(loss) + 1e-5);
    std::uint64_t seed = 77;
    for (const std::string& name : net.trained) {
      const std::vector<float>& before = net.initial.at(name);
      const std::vector<float>& after = t.parameters.at(name);
      EXPECT_EQ(before.size(), after.size()) << name;
      if (before.size() != after.size()) return {};
      const std::vector<float> d = random_vector(before.size(), ++seed);
      double analytic = 0;
      double norm = 0;
      for (std::size_t i = 0; i < d.size(); ++i) {
        const double g = static_cast<double>(before[i]) - after[i];
        analytic += g * d[i];
        norm += g * g;
      }
      // Small enough that few ReLU or max-pool kinks are crossed, large enough for float rounding.
      const float eps = 1e-4f;
      auto loss_at = [&](float sign) {
        std::vector<float> w = before;
        for (std::size_t i = 0; i < w.size(); ++i) w[i] += sign * eps * d[i];
        Net moved(std::get<0>(GetParam()), {{name, w}});
        build(moved);
        return reference_loss(moved);
      };
      const double numeric = (loss_at(1) - loss_at(-1)) / (2.0 * eps);
      EXPECT_NEAR(analytic, numeric, 0.03 * std::abs(numeric) + 2e-3 * std::sqrt(norm) + 1e-4)
          << "gradient of '" << name << "' along a random direction";
    }
    return t.report;
  }

  std::string steps_;  // the last check's compiled steps
};

TEST_P(TrainingOps, ConvolutionWithBiasAndRelu) {
  check_gradients([](Net& n) {
    TensorId x = n.input({2, 3, 9, 9});
    TensorId y = n.g.relu(n.conv(x, 3, 16, 3, 2, 1, true, "conv1"));
    y = n.conv(y, 16, 8, 3, 1, 1, true, "conv2");
    n.classifier(y, 8 * 5 * 5);
  });
}

TEST_P(TrainingOps, BatchNormWithRelu) {
  check_gradients([](Net& n) {
    TensorId x = n.input({4, 3, 6, 6});
    TensorId y = n.g.relu(n.bn(n.conv(x, 3, 16, 3, 1, 1, false, "conv"), 16, "bn"));
    y = n.bn(n.conv(y, 16, 8, 1, 1, 0, false, "conv2"), 8, "bn2");  // without ReLU
    n.classifier(y, 8 * 6 * 6);
  });
}

TEST_P(TrainingOps, MaxAndAveragePooling) {
  check_gradients([](Net& n) {
    TensorId x = n.input({2, 3, 11, 11});
    TensorId y = n.g.relu(n.conv(x, 3, 16, 3, 1, 1, true, "conv"));
    y = n.pool(y, true, 3, 2, 1);
    y = n.pool(y, false, 2, 2, 0);
    n.classifier(y, 16 * 3 * 3);
  });
}

// Conv, batch norm, ReLU and max pooling three times: windows of 3 at stride 2 in ceil mode, of 3
// at stride 1 with padding, of 2 at stride 2. `scale_low` below zero gives scales of both signs
// (a negative one makes the window's maximum its smallest input).
void bn_relu_pools(Net& n, float scale_low) {
  auto block = [&](TensorId x, std::int64_t in, const std::string& name, std::int64_t k,
                   std::int64_t stride, std::int64_t pad, bool ceil) {
    TensorId y = n.g.batch_norm(n.conv(x, in, 16, 3, 1, 1, false, name + ".conv"),
                                n.constant(name + ".scale", {16}, scale_low, 1.5f),
                                n.constant(name + ".shift", {16}, -0.3f, 0.3f),
                                n.constant(name + ".mean", {16}, -0.1f, 0.1f, false),
                                n.constant(name + ".var", {16}, 0.5f, 1.5f, false),
                                BatchNorm{1e-3f}, name + ".bn");
    Pool2D a;
    a.kernel = {k, k};
    a.stride = {stride, stride};
    a.padding = {pad, pad, pad, pad};
    a.ceil_mode = ceil;
    return n.g.max_pool(n.g.relu(y), a);
  };
  TensorId x = n.input({3, 3, 12, 12});
  TensorId y = block(x, 3, "a", 3, 2, 0, true);  // 12 -> 6 (ceil mode pads the bottom)
  y = block(y, 16, "b", 3, 1, 1, false);         // 6 -> 6
  y = block(y, 16, "c", 2, 2, 0, false);         // 6 -> 3
  n.classifier(y, 16 * 3 * 3);
}

bool has_batch_norm_pool_kernels() {
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
}

// Fusion computes each batch norm + ReLU + max pooling as one step each way (with AVX2 or
// AVX-512). Positive scales: finite differences cross too many kinks where a negative scale
// zeroes most of a channel (the fused and unfused steps agree there: TrainingGraph below).
TEST_P(TrainingOps, BatchNormReluMaxPool) {
  const CompileReport report = check_gradients([](Net& n) { bn_relu_pools(n, 0.5f); });
  const bool fused = std::get<1>(GetParam()) && has_batch_norm_pool_kernels();
  EXPECT_EQ(report.fused_pools, fused ? 3 : 0);
}

// Max pooling of a concat (GoogLeNet's maxpool3 and maxpool4): fusion pools each part, then
// concatenates, and the parts from batch norm + ReLU take their pooling into one step.
TEST_P(TrainingOps, MaxPoolOfAConcat) {
  const CompileReport report = check_gradients([](Net& n) {
    TensorId x = n.input({3, 3, 10, 10});
    TensorId a = n.g.relu(n.bn(n.conv(x, 3, 16, 3, 1, 1, false, "a"), 16, "a.bn"));
    TensorId b = n.g.relu(n.bn(n.conv(x, 3, 32, 1, 1, 0, false, "b"), 32, "b.bn"));
    TensorId c = n.conv(x, 3, 8, 3, 1, 1, true, "c");  // no batch norm: pooled alone
    Pool2D p;
    p.kernel = {3, 3};
    p.stride = {2, 2};
    p.ceil_mode = true;  // 10 -> 5 (the last window clipped)
    n.classifier(n.g.max_pool(n.g.concat({a, b, c}), p), 56 * 5 * 5);
  });
  const bool fused = std::get<1>(GetParam());
  EXPECT_EQ(report.max_pools_before_concats, fused ? 1 : 0);
  EXPECT_EQ(report.fused_pools, fused && has_batch_norm_pool_kernels() ? 2 : 0);
}

// Average pooling before a 1x1 convolution (Inception v3's branch_pool): fusion moves the pooling
// after the convolution (it commutes). Counting the padding with a bias would not commute: left.
// (So are a widening convolution and one whose ReLU would stop fusing.)
TEST_P(TrainingOps, AveragePoolBeforePointwiseConvolution) {
  const CompileReport report = check_gradients([](Net& n) {
    TensorId x = n.input({2, 3, 7, 7});
    TensorId a = n.g.relu(n.conv(x, 3, 24, 3, 1, 1, true, "stem"));
    Pool2D counted;
    counted.kernel = {3, 3};
    counted.padding = {1, 1, 1, 1};
    Pool2D valid_only = counted;
    valid_only.count_include_pad = false;
    TensorId b = n.conv(n.g.avg_pool(a, counted), 24, 16, 1, 1, 0, false, "counted");
    TensorId c = n.conv(n.g.avg_pool(a, valid_only), 24, 16, 1, 1, 0, true, "valid_only");
    TensorId d = n.conv(n.g.avg_pool(a, counted), 24, 16, 1, 1, 0, true, "counted_bias");
    // Left too: more channels out than in, and a ReLU that would no longer fuse.
    TensorId e = n.conv(n.g.avg_pool(a, counted), 24, 32, 1, 1, 0, false, "widening");
    TensorId f = n.g.relu(n.conv(n.g.avg_pool(a, counted), 24, 8, 1, 1, 0, false, "relu_after"));
    TensorId y = n.g.concat({n.g.relu(n.bn(b, 16, "bn")), c, d, e, f});
    n.classifier(y, 88 * 7 * 7);
  });
  EXPECT_EQ(report.moved_average_pools, std::get<1>(GetParam()) ? 2 : 0);
}

TEST_P(TrainingOps, ResidualAddWithRelu) {
  check_gradients([](Net& n) {
    TensorId x = n.input({2, 3, 6, 6});
    TensorId a = n.g.relu(n.conv(x, 3, 16, 3, 1, 1, true, "stem"));
    TensorId b = n.g.relu(n.conv(a, 16, 16, 1, 1, 0, true, "branch1"));
    b = n.conv(b, 16, 16, 3, 1, 1, true, "branch2");
    n.classifier(n.g.relu(n.g.add(b, a)), 16 * 6 * 6);
  });
}

// The stem's fused ReLU has three readers: their gradients are summed and masked in one step.
TEST_P(TrainingOps, ReluOutputWithThreeReaders) {
  check_gradients([](Net& n) {
    TensorId x = n.input({2, 3, 6, 6});
    TensorId a = n.g.relu(n.conv(x, 3, 16, 3, 1, 1, true, "stem"));
    TensorId b = n.conv(a, 16, 16, 1, 1, 0, true, "left");
    TensorId c = n.conv(a, 16, 16, 3, 1, 1, true, "right");
    n.classifier(n.g.add(n.g.add(b, c), a), 16 * 6 * 6);
  });
}

// Read by two convolutions: the gradient's two parts are summed whole, then sliced.
TEST_P(TrainingOps, ConcatOfUnevenChannels) {
  check_gradients([](Net& n) {
    TensorId x = n.input({2, 3, 5, 5});
    TensorId a = n.g.relu(n.conv(x, 3, 16, 3, 1, 1, true, "a"));
    TensorId b = n.g.relu(n.conv(x, 3, 8, 1, 1, 0, true, "b"));
    TensorId c = n.conv(a, 16, 24, 1, 1, 0, false, "c");
    TensorId y = n.g.concat({a, b, c});  // 16 + 8 + 24 channels: slices off the 16-blocks
    n.classifier(
        n.g.add(n.conv(y, 48, 8, 3, 1, 1, true, "d"), n.conv(y, 48, 8, 1, 1, 0, true, "e")),
        8 * 5 * 5);
  });
}

// A concat read by three branches, like Inception's blocks: its gradient arrives in three parts,
// and each input's gradient is summed from the parts' slices in one step (the slices are whole
// channel blocks).
TEST_P(TrainingOps, ConcatReadByBranches) {
  check_gradients([](Net& n) {
    TensorId x = n.input({2, 3, 5, 5});
    TensorId a = n.g.relu(n.conv(x, 3, 16, 3, 1, 1, true, "a"));
    TensorId b = n.conv(x, 3, 32, 1, 1, 0, true, "b");
    TensorId y = n.g.concat({a, b});
    TensorId c = n.g.relu(n.conv(y, 48, 16, 1, 1, 0, true, "c"));
    TensorId d = n.g.relu(n.conv(y, 48, 16, 3, 1, 1, true, "d"));
    TensorId e = n.pool(y, false, 3, 1, 1);  // (a max would tie among the ReLU's zeros)
    n.classifier(n.g.concat({c, d, e}), 80 * 5 * 5);
  });
  EXPECT_THAT(steps_, HasSubstr("sum+concat_backward"));
}

TEST_P(TrainingOps, InnerProductsWithRelu) {
  check_gradients([](Net& n) {
    TensorId x = n.input({3, 4, 3, 3});
    TensorId y = n.g.relu(n.conv(x, 4, 16, 3, 1, 1, false, "conv"));
    y = n.g.relu(n.fc(n.g.flatten(y), 16 * 9, 32, "fc1"));
    n.g.output(n.g.softmax(n.fc(y, 32, classes, "fc")), "p");
    n.inputs["labels"] = {1, 5, 9};
  });
}

Eltwise activation(EltwiseKind kind, float alpha = 0.0f, float beta = 0.0f) {
  return Eltwise{kind, alpha, beta};
}

TEST_P(TrainingOps, ActivationsOtherThanRelu) {
  check_gradients([](Net& n) {
    TensorId x = n.input({2, 3, 6, 6});
    TensorId y =
        n.g.eltwise(n.conv(x, 3, 16, 3, 1, 1, true, "conv1"), activation(EltwiseKind::hard_swish));
    y = n.g.eltwise(n.conv(y, 16, 16, 1, 1, 0, true, "conv2"),
                    activation(EltwiseKind::clip, -0.5f, 0.5f));
    y = n.g.eltwise(n.conv(y, 16, 16, 1, 1, 0, true, "conv3"),
                    activation(EltwiseKind::hard_sigmoid, 0.2f, 0.5f));
    n.classifier(y, 16 * 6 * 6);
  });
}

TEST_P(TrainingOps, SmoothActivations) {
  check_gradients([](Net& n) {
    TensorId x = n.input({2, 3, 5, 5});
    TensorId y =
        n.g.eltwise(n.conv(x, 3, 16, 3, 1, 1, true, "conv1"), activation(EltwiseKind::sigmoid));
    y = n.g.eltwise(n.conv(y, 16, 8, 3, 1, 1, true, "conv2"), activation(EltwiseKind::tanh));
    y = n.g.eltwise(n.fc(n.g.flatten(y), 8 * 25, 32, "fc1"),
                    activation(EltwiseKind::leaky_relu, 0.1f));
    n.g.output(n.g.softmax(n.fc(y, 32, classes, "fc")), "p");
    n.inputs["labels"] = {4, 7};
  });
}

TEST_P(TrainingOps, BroadcastAddAndMultiply) {
  check_gradients([](Net& n) {
    TensorId x = n.input({2, 3, 6, 6});
    TensorId stem = n.conv(x, 3, 16, 3, 1, 1, true, "stem");
    // A squeeze-and-excitation gate: b computed, N, C, 1, 1 (its gradient summed over H, W).
    TensorId s = n.pool(stem, false, 6, 6, 0);
    s = n.g.eltwise(n.conv(s, 16, 16, 1, 1, 0, true, "excite"), activation(EltwiseKind::sigmoid));
    TensorId y = n.g.binary(BinaryKind::mul, stem, s);
    // Constant per-channel scale and shift, a constant scalar.
    y = n.g.binary(BinaryKind::mul, y, n.constant("scale", {16, 1, 1}, 0.5f, 1.5f, false));
    y = n.g.binary(BinaryKind::add, y, n.constant("shift", {1, 16, 1, 1}, -0.5f, 0.5f, false));
    y = n.g.binary(BinaryKind::mul, y, n.constant("two", {}, 2.0f, 2.0f, false));
    // Both operands computed, same shape; then a square (a and b the same tensor).
    TensorId other = n.conv(x, 3, 16, 3, 1, 1, false, "other");
    y = n.g.binary(BinaryKind::add, y, other);
    y = n.g.binary(BinaryKind::mul, y, y);
    // b computed, N, 1, H, W: a per-pixel shift (its gradient summed over the channels).
    TensorId map = n.conv(x, 3, 1, 1, 1, 0, true, "map");
    y = n.g.binary(BinaryKind::add, y, map);
    n.classifier(y, 16 * 6 * 6);
  });
}

TEST_P(TrainingOps, MatrixBroadcastAgainstAnImage) {
  check_gradients([](Net& n) {
    // b an N, K matrix against an N, C, H, W image with H = N, W = K: right-aligned, its gradient
    // is summed over the image's batch and channels.
    TensorId x = n.input({2, 3, 2, 6});
    TensorId a = n.conv(x, 3, 8, 1, 1, 0, true, "conv");
    TensorId b = n.fc(n.g.flatten(x), 3 * 2 * 6, 6, "fc_b");
    n.classifier(n.g.binary(BinaryKind::mul, a, b), 8 * 2 * 6);
  });
}

TEST_P(TrainingOps, DilatedConvolutions) {
  check_gradients([](Net& n) {
    TensorId x = n.input({2, 3, 9, 9});
    Conv2D a;
    a.dilation = {2, 2};
    a.padding = {2, 2, 2, 2};
    TensorId y = n.g.relu(n.g.convolution(x, n.constant("atrous.w", {16, 3, 3, 3}, -0.5f, 0.5f),
                                          n.constant("atrous.b", {16}, -0.1f, 0.1f), a, "atrous"));
    Conv2D b;
    b.dilation = {3, 2};
    b.stride = {2, 2};
    b.padding = {1, 2, 2, 1};
    b.groups = 2;
    y = n.g.convolution(y, n.constant("grouped.w", {8, 8, 3, 3}, -0.3f, 0.3f), no_tensor, b,
                        "grouped");
    n.classifier(y, 8 * 3 * 4);  // 9 + 3 padded, spans 7 (H) and 5 (W), stride 2
  });
}

INSTANTIATE_TEST_SUITE_P(Layouts, TrainingOps,
                         ::testing::Combine(::testing::Values(Layout::nchw, Layout::nhwc),
                                            ::testing::Bool()),
                         [](const auto& param_info) {
                           return std::string(to_string(std::get<0>(param_info.param))) +
                                  (std::get<1>(param_info.param) ? "_fused" : "_unfused");
                         });

// A residual network small enough to train in a moment: conv-bn-relu, max pool, a residual block,
// average pool, inner product.
void small_resnet(Net& n) {
  TensorId x = n.input({8, 3, 16, 16});
  TensorId y = n.g.relu(n.bn(n.conv(x, 3, 16, 3, 1, 1, false, "conv1"), 16, "bn1"));
  y = n.pool(y, true, 3, 2, 1);
  TensorId b = n.g.relu(n.bn(n.conv(y, 16, 16, 3, 1, 1, false, "block.conv1"), 16, "block.bn1"));
  b = n.bn(n.conv(b, 16, 16, 3, 1, 1, false, "block.conv2"), 16, "block.bn2");
  y = n.g.relu(n.g.add(b, y));
  y = n.pool(y, false, 8, 8, 0);
  n.classifier(y, 16);
}

TEST(TrainingGraph, LossFallsAndLanesAndFusionAgree) {
  Net net(Layout::nhwc, {});
  small_resnet(net);
  CompileOptions o;
  o.training = TrainingOptions{0.05f, 0.9f, 0.1f, 1, 0, std::nullopt};
  const Training one = train(net, o, 8);
  ASSERT_TRUE(one.status.ok()) << one.status.to_string();
  for (float l : one.losses) EXPECT_TRUE(std::isfinite(l));
  EXPECT_LT(one.losses.back(), 0.7 * one.losses.front())
      << "loss " << one.losses.front() << " -> " << one.losses.back();
  EXPECT_GT(one.report.parameters, 10);

  CompileOptions two_lanes = o;
  two_lanes.lanes = 2;
  CompileOptions unfused = o;
  unfused.fusion = false;
  for (const CompileOptions& other : {two_lanes, unfused}) {
    const Training t = train(net, other, 8);
    ASSERT_TRUE(t.status.ok()) << t.status.to_string();
    for (std::size_t s = 0; s < t.losses.size(); ++s) {
      EXPECT_NEAR(t.losses[s], one.losses[s], 1e-3 * one.losses[s]) << "step " << s;
    }
    for (const auto& [name, values] : one.parameters) {
      EXPECT_TRUE(testing::close(t.parameters.at(name), values, 1e-3, 1e-3))
          << name << " with lanes=" << other.lanes << " fusion=" << other.fusion;
    }
  }
}

// The fused batch norm + ReLU + max pooling steps against oneDNN's three, scales of both signs:
// losses and every trained tensor after a few steps.
TEST(TrainingGraph, FusedBatchNormPoolingMatchesUnfused) {
  for (Layout layout : {Layout::nchw, Layout::nhwc}) {
    Net net(layout, {});
    bn_relu_pools(net, -1.5f);
    CompileOptions o;
    o.training = TrainingOptions{0.05f, 0.9f, 0.1f, 1, 0, std::nullopt};
    const Training fused = train(net, o, 3);
    ASSERT_TRUE(fused.status.ok()) << fused.status.to_string();
    EXPECT_EQ(fused.report.fused_pools, has_batch_norm_pool_kernels() ? 3 : 0);
    CompileOptions separate = o;
    separate.fusion = false;
    const Training unfused = train(net, separate, 3);
    ASSERT_TRUE(unfused.status.ok()) << unfused.status.to_string();
    EXPECT_EQ(unfused.report.fused_pools, 0);
    for (std::size_t s = 0; s < fused.losses.size(); ++s) {
      EXPECT_NEAR(fused.losses[s], unfused.losses[s], 1e-4 * unfused.losses[s]) << "step " << s;
    }
    for (const auto& [name, values] : unfused.parameters) {
      EXPECT_TRUE(testing::close(fused.parameters.at(name), values, 1e-4, 1e-4))
          << name << " (" << to_string(layout) << ")";
    }
  }
}

TEST(TrainingGraph, BatchNormUpdatesItsRunningStatistics) {
  Net net(Layout::nchw, {});
  small_resnet(net);
  CompileOptions o;
  o.training = TrainingOptions{0.0f, 0.0f,        0.25f, 1,
                               0,    std::nullopt};  // learning rate 0: the batch stays the same
  std::unique_ptr<Runtime> rt;
  ASSERT_TRUE(Runtime::create(net.g, o, &rt).ok());
  std::vector<ExternalInput> in;
  for (const TensorInfo& i : rt->inputs()) in.push_back({i.name, net.inputs.at(i.name).data()});
  std::vector<float> p(rt->outputs()[0].elements());
  const ExternalOutput out[] = {{"p", p.data()}};
  ASSERT_TRUE(rt->setup(in, out).ok());
  ASSERT_TRUE(rt->run().ok());
  // conv1's output statistics from the reference: mean over N, H, W of each channel.
  Graph g;
  TensorId x = g.input("x", {8, 3, 16, 16}, Layout::nchw);
  Conv2D a;
  a.padding = {1, 1, 1, 1};
  g.output(
      g.convolution(x, g.constant("w", {16, 3, 3, 3}, net.initial.at("conv1.w")), no_tensor, a),
      "y");
  const std::vector<float> y = reference::evaluate(g, net.inputs).at("y");
  std::vector<float> running_mean;
  std::vector<float> running_variance;
  ASSERT_TRUE(rt->parameter("bn1.mean", &running_mean).ok());
  ASSERT_TRUE(rt->parameter("bn1.var", &running_variance).ok());
  for (std::size_t c = 0; c < 16; ++c) {
    double sum = 0;
    for (std::size_t n = 0; n < 8; ++n)
      for (std::size_t k = 0; k < 256; ++k) sum += y[(n * 16 + c) * 256 + k];
    const double want = 0.75 * net.initial.at("bn1.mean")[c] + 0.25 * sum / (8 * 256);
    EXPECT_NEAR(running_mean[c], want, 1e-4) << "channel " << c;
    // The variance PyTorch keeps: unbiased.
    double squares = 0;
    for (std::size_t n = 0; n < 8; ++n) {
      for (std::size_t k = 0; k < 256; ++k) {
        const double d = y[(n * 16 + c) * 256 + k] - sum / (8 * 256);
        squares += d * d;
      }
    }
    const double want_var = 0.75 * net.initial.at("bn1.var")[c] + 0.25 * squares / (8 * 256 - 1);
    EXPECT_NEAR(running_variance[c], want_var, 1e-4 * want_var) << "channel " << c;
  }
  std::vector<float> ignored;
  EXPECT_EQ(rt->parameter("nope", &ignored).code(), StatusCode::invalid_argument);
}

TEST(TrainingGraph, DropoutDrawsAMaskAndScales) {
  Graph g;
  TensorId x = g.input("x", {1, 64}, Layout::nc);
  std::vector<float> w(64 * 64, 0.0f);
  for (std::size_t i = 0; i < 64; ++i) w[i * 64 + i] = 1.0f;
  TensorId y = g.dropout(g.inner_product(x, g.constant("fc0.w", {64, 64}, w), no_tensor, "fc0"),
                         Dropout{0.5f});
  g.output(g.softmax(g.inner_product(y, g.constant("fc.w", {10, 64}, random_vector(640, 3)),
                                     no_tensor, "fc")),
           "p");
  std::vector<float> images(64, 1.0f);
  std::vector<float> labels{3};
  CompileOptions o;
  o.training = TrainingOptions{0.01f, 0.0f, 0.1f, 42, 0, std::nullopt};
  std::unique_ptr<Runtime> rt;
  ASSERT_TRUE(Runtime::create(g, o, &rt).ok());
  std::vector<float> p(10);
  const ExternalInput in[] = {{"x", images.data()}, {"labels", labels.data()}};
  const ExternalOutput out[] = {{"p", p.data()}};
  ASSERT_TRUE(rt->setup(in, out).ok());
  ASSERT_TRUE(rt->run().ok());
  // Row i of fc0.w's gradient is d(loss)/d(unit i) = mask[i] * 2 * (fc.w^T (p - onehot))[i]: it
  // changes exactly for the units the mask kept.
  std::vector<float> fc0;
  ASSERT_TRUE(rt->parameter("fc0.w", &fc0).ok());
  int kept = 0;
  for (std::size_t i = 0; i < 64; ++i) {
    bool changed = false;
    for (std::size_t j = 0; j < 64; ++j) changed = changed || fc0[i * 64 + j] != w[i * 64 + j];
    kept += changed ? 1 : 0;
  }
  // About half: a real mask, neither all units nor none.
  EXPECT_GT(kept, 16);
  EXPECT_LT(kept, 48);
  EXPECT_TRUE(std::isfinite(rt->loss()));
  // The next step draws another mask.
  ASSERT_TRUE(rt->run().ok());
  std::vector<float> fc0_next;
  ASSERT_TRUE(rt->parameter("fc0.w", &fc0_next).ok());
  int changed_again = 0;
  for (std::size_t i = 0; i < 64; ++i) changed_again += fc0_next[i * 64] != fc0[i * 64] ? 1 : 0;
  EXPECT_GT(changed_again, 16);
}

// Every model of the zoo at a tiny batch: a training step runs, the loss is finite (and of the
// order of ln(1000) for random weights), the weights move.
class ModelTraining : public ::testing::TestWithParam<Model> {};

TEST_P(ModelTraining, OneStepAtBatchTwo) {
  const Graph g = build_model(GetParam(), 2, Layout::nhwc);
  CompileOptions o;
  o.intra = 2;
  o.training = TrainingOptions{};
  std::unique_ptr<Runtime> rt;
  Status s = Runtime::create(g, o, &rt);
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_GT(rt->report().parameters, 10);
  const TensorInfo& images = rt->inputs().at(0);
  std::vector<float> x = random_vector(images.elements(), 5);
  std::vector<float> labels{3, 917};
  std::vector<float> p(rt->outputs().at(0).elements());
  const ExternalInput in[] = {{images.name, x.data()}, {"labels", labels.data()}};
  const ExternalOutput out[] = {{"probabilities", p.data()}};
  ASSERT_TRUE(rt->setup(in, out).ok());
  // The first trained tensor of each model (the first convolution's weights).
  const std::string first = to_string(GetParam()) == std::string("resnet50") ? "conv1.weight"
                            : GetParam() == Model::inception3 ? "Conv2d_1a_3x3.conv.weight"
                            : GetParam() == Model::googlenet  ? "conv1.conv.weight"
                                                              : "features.0.weight";
  std::vector<float> before;
  ASSERT_TRUE(rt->parameter(first, &before).ok());
  s = rt->run();
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_TRUE(std::isfinite(rt->loss()));
  EXPECT_GT(rt->loss(), 1.0);  // random weights: about ln(1000), more without batch norm
  EXPECT_LT(rt->loss(), 30.0);
  std::vector<float> after;
  ASSERT_TRUE(rt->parameter(first, &after).ok());
  std::size_t changed = 0;
  for (std::size_t i = 0; i < after.size(); ++i) changed += after[i] != before[i] ? 1 : 0;
  EXPECT_GT(changed, after.size() / 2) << first;
  ASSERT_TRUE(rt->run().ok());
  EXPECT_TRUE(std::isfinite(rt->loss()));
}

INSTANTIATE_TEST_SUITE_P(Zoo, ModelTraining,
                         ::testing::Values(Model::resnet50, Model::inception3, Model::vgg16,
                                           Model::googlenet, Model::alexnet),
                         [](const auto& param_info) { return to_string(param_info.param); });

TEST(TrainingErrors, RefusedWithClearMessages) {
  Graph g;
  TensorId x = g.input("x", {1, 4, 5, 5});
  g.output(g.relu(x), "y");
  CompileOptions o;
  o.training = TrainingOptions{};
  std::unique_ptr<Runtime> rt;
  Status s = Runtime::create(g, o, &rt);
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_THAT(s.message(), HasSubstr("single output to be a softmax"));

  Graph lrn;
  x = lrn.input("x", {1, 4, 5, 5});
  lrn.output(lrn.softmax(lrn.flatten(lrn.lrn(x, {}, "norm"))), "p");
  s = Runtime::create(lrn, o, &rt);
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_THAT(s.message(), HasSubstr("node 'norm' (lrn)"));

  Graph pixels;  // a softmax over the channels of each pixel: no per-pixel loss
  x = pixels.input("x", {1, 4, 5, 5});
  Conv2D same;
  same.padding = {1, 1, 1, 1};
  TensorId c = pixels.convolution(x, pixels.constant("w", {3, 4, 3, 3}, random_vector(108, 1)),
                                  no_tensor, same, "conv");
  pixels.output(pixels.softmax(c, "segment"), "p");
  s = Runtime::create(pixels, o, &rt);
  EXPECT_EQ(s.code(), StatusCode::unsupported);
  EXPECT_THAT(s.message(),
              HasSubstr("node 'segment' (softmax) is over the channels of [1, 3, 5, 5]"));
}

TEST(TrainingErrors, ImpossibleBatchIsOutOfMemory) {
  Net net(Layout::nchw, {});
  small_resnet(net);
  CompileOptions o;
  o.training = TrainingOptions{};
  o.memory_limit_bytes = 64u << 10;
  std::unique_ptr<Runtime> rt;
  Status s = Runtime::create(net.g, o, &rt);
  EXPECT_EQ(s.code(), StatusCode::out_of_memory);
  EXPECT_THAT(s.message(), HasSubstr("reduce the batch size"));
}

}  // namespace
}  // namespace tfpin::engine
