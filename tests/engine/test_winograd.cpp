// tfpin's own Winograd F(4x4, 3x3), F(6x6, 3x3) and F(7x7, 3x3) convolutions
// (engine/src/ops/winograd.cpp), seen through the runtime: they are timed alternatives, so the
// executor's trial runs use each candidate kernel in turn (run r uses candidate (r - 1) mod n) and
// every trial run's output is checked.
//
// Error bound: F(4x4, 3x3) in float computes each output with an error of at most
// winograd_error_bound times sum |x| |w| over the output's 3x3xC window (its transforms scale the
// input by up to 10 and the weights by up to 1/4 per row and column before the sum, and 36
// products replace 9). Checked per output against a double-precision naive convolution, for the
// direct candidates too.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "test_util.hpp"
#include "tfpin/engine/models.hpp"
#include "tfpin/engine/runtime.hpp"
#include "tfpin/engine/version.hpp"

namespace tfpin::engine {
namespace {

using testing::close;
using testing::random_vector;

constexpr double winograd_error_bound = 1e-5;
// F(6x6, 3x3) and F(4x4, 5x5) (8x8 tiles) round more (their transforms scale by up to 21/4 and
// 32; worst seen 3.7e-6 and 2.1e-6).
constexpr double winograd_8x8_error_bound = 3e-5;
// One-dimensional F(4, 7) (1x7 and 7x1 layers): 10 points, up to 3/2 and 1/2, in one dimension
// (worst seen per window of one channel 3e-5, far less over many channels).
constexpr double winograd_1d_ten_point_error_bound = 3e-5;
// F(7x7, 3x3): 9x9 tiles, 9 points per dimension (up to 2 and down to 1/4): worst seen 6.7e-5
// on 16 input channels, mean per window about 5x F(6x6, 3x3)'s.
constexpr double winograd_9x9_error_bound = 2e-4;

bool is_tfpin_winograd(const std::string& kernel) { return kernel.rfind("tfpin_wino", 0) == 0; }

struct Layer {
  std::int64_t n, c, h, w, k;
  std::array<std::int64_t, 4> padding;  // top, left, bottom, right
  bool bias;
  bool residual;  // + a residual input of the output's shape, fused as a sum post-op
  bool relu;
  std::int64_t r = 3;       // kernel height: 3 or 5, or 1, 3 or 7 with a different width
  std::int64_t rw = 0;      // its width, when not r (1x7, 7x1, 1x3, 3x1)
  std::int64_t stride = 1;  // 2: 3x3 only
  [[nodiscard]] std::int64_t kh() const { return r; }
  [[nodiscard]] std::int64_t kw() const { return rw != 0 ? rw : r; }
  [[nodiscard]] std::int64_t out_height() const {
    return (h + padding[0] + padding[2] - kh()) / stride + 1;
  }
  [[nodiscard]] std::int64_t out_width() const {
    return (w + padding[1] + padding[3] - kw()) / stride + 1;
  }
};

std::string describe(const Layer& l) {
  return fmt::format("{}x{}x{}x{} -> {} {}x{} stride {} pad [{}] bias={} residual={} relu={}", l.n,
                     l.c, l.h, l.w, l.k, l.kh(), l.kw(), l.stride, fmt::join(l.padding, ","),
                     l.bias, l.residual, l.relu);
}

// The naive convolution in double, with bias, residual and ReLU, and per output the sum of
// |x| |w| over its window (the scale of the rounding error).
struct Expected {
  std::vector<double> y;
  std::vector<double> magnitude;
};

Expected naive(const Layer& l, std::int64_t oh, std::int64_t ow, const std::vector<float>& x,
               const std::vector<float>& w, const std::vector<float>& b,
               const std::vector<float>& residual) {
  Expected e;
  e.y.assign(static_cast<std::size_t>(l.n * l.k * oh * ow), 0);
  e.magnitude.assign(e.y.size(), 0);
  for (std::int64_t n = 0; n < l.n; ++n) {
    for (std::int64_t k = 0; k < l.k; ++k) {
      for (std::int64_t y = 0; y < oh; ++y) {
        for (std::int64_t xo = 0; xo < ow; ++xo) {
          double sum = l.bias ? b[static_cast<std::size_t>(k)] : 0.0;
          double mag = l.bias ? std::abs(b[static_cast<std::size_t>(k)]) : 0.0;
          for (std::int64_t c = 0; c < l.c; ++c) {
            for (std::int64_t i = 0; i < l.kh(); ++i) {
              const std::int64_t iy = y * l.stride + i - l.padding[0];
              if (iy < 0 || iy >= l.h) continue;
              for (std::int64_t j = 0; j < l.kw(); ++j) {
                const std::int64_t ix = xo * l.stride + j - l.padding[1];
                if (ix < 0 || ix >= l.w) continue;
                const double xv =
                    x[static_cast<std::size_t>(((n * l.c + c) * l.h + iy) * l.w + ix)];
                const double wv =
                    w[static_cast<std::size_t>(((k * l.c + c) * l.kh() + i) * l.kw() + j)];
                sum += xv * wv;
                mag += std::abs(xv * wv);
              }
            }
          }
          const auto at = static_cast<std::size_t>(((n * l.k + k) * oh + y) * ow + xo);
          if (l.residual) {
            sum += residual[at];
            mag += std::abs(residual[at]);
          }
          e.y[at] = l.relu ? std::max(sum, 0.0) : sum;
          e.magnitude[at] = mag;
        }
      }
    }
  }
  return e;
}

::testing::AssertionResult within_bound(const std::vector<float>& got, const Expected& want,
                                        double bound) {
  std::size_t bad = 0;
  std::size_t worst = 0;
  double worst_ratio = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double error = std::abs(got[i] - want.y[i]);
    const double ratio = error / (want.magnitude[i] + 1e-30);
    if (!(ratio <= bound)) ++bad;
    if (!(ratio <= worst_ratio)) {
      worst_ratio = ratio;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess() << "worst error/magnitude " << worst_ratio;
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " outputs beyond the bound; worst at " << worst
         << ": got " << got[worst] << ", want " << want.y[worst] << " (error / sum|x||w| "
         << worst_ratio << ")";
}

// Every trial run's output (one per candidate kernel, then the kept one), and the candidates.
struct Trials {
  std::vector<std::vector<float>> outputs;  // by run
  std::vector<KernelChoice> choices;
};

Trials run_trials(const Graph& g, const std::map<std::string, std::vector<float>>& inputs,
                  unsigned intra, int runs, bool winograd = true, const std::string& force = {}) {
  CompileOptions options;
  options.lanes = 1;
  options.intra = intra;
  options.winograd = winograd;
  options.force_kernel = force;
  std::unique_ptr<Runtime> rt;
  const Status created = Runtime::create(g, options, &rt);
  EXPECT_TRUE(created.ok()) << created.to_string();
  Trials t;
  if (!created.ok()) return t;
  std::vector<ExternalInput> in;
  for (const TensorInfo& info : rt->inputs())
    in.push_back({info.name, inputs.at(info.name).data()});
  std::vector<float> y(rt->outputs().at(0).elements());
  const ExternalOutput out[] = {{rt->outputs().at(0).name, y.data()}};
  EXPECT_TRUE(rt->setup(in, out).ok());
  for (int r = 0; r < runs; ++r) {
    std::fill(y.begin(), y.end(), std::nanf(""));
    const Status s = rt->run();
    EXPECT_TRUE(s.ok()) << s.to_string();
    t.outputs.push_back(y);
  }
  t.choices = rt->report().kernel_choices;
  return t;
}

// Each candidate's trial run (run r uses candidate r mod n) within its bound, and the kept kernel's
// output a candidate's, bit for bit.
void expect_candidates_within(const Trials& t, const Expected& want,
                              const std::function<double(const std::string&)>& bound) {
  const auto& candidates = t.choices.at(0).candidates;
  ASSERT_LE(3 * candidates.size(), t.outputs.size());
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    EXPECT_TRUE(within_bound(t.outputs[k], want, bound(candidates[k].kernel)))
        << candidates[k].kernel;
  }
  EXPECT_TRUE(std::any_of(t.outputs.begin(), t.outputs.begin() + candidates.size(),
                          [&](const auto& o) { return o == t.outputs.back(); }));
}

// A layer's graph (convolution, then the residual add and the ReLU it asks for), its inputs and
// the naive output.
struct LayerCase {
  Graph g;
  std::map<std::string, std::vector<float>> inputs;
  Expected want;
};

LayerCase layer_case(const Layer& l) {
  const std::int64_t oh = l.out_height();
  const std::int64_t ow = l.out_width();
  const auto x = random_vector(static_cast<std::size_t>(l.n * l.c * l.h * l.w), 1);
  const auto w =
      random_vector(static_cast<std::size_t>(l.k * l.c * l.kh() * l.kw()), 2, -0.5f, 0.5f);
  const auto b = random_vector(static_cast<std::size_t>(l.k), 3);
  const auto r = random_vector(static_cast<std::size_t>(l.n * l.k * oh * ow), 4);
  LayerCase c;
  Graph& g = c.g;
  const TensorId input = g.input("x", {l.n, l.c, l.h, l.w});
  const TensorId weights = g.constant("w", {l.k, l.c, l.kh(), l.kw()}, w);
  const TensorId bias = l.bias ? g.constant("b", {l.k}, b) : no_tensor;
  Conv2D attrs;
  attrs.padding = l.padding;
  attrs.stride = {l.stride, l.stride};
  TensorId y = g.convolution(input, weights, bias, attrs, "conv");
  c.inputs["x"] = x;
  if (l.residual) {
    y = g.add(y, g.input("residual", {l.n, l.k, oh, ow}));
    c.inputs["residual"] = r;
  }
  if (l.relu) y = g.relu(y);
  g.output(y, "y");
  c.want = naive(l, oh, ow, x, w, b, r);
  return c;
}

class WinogradLayerTest : public ::testing::TestWithParam<Layer> {};

TEST_P(WinogradLayerTest, EveryCandidateWithinTheBound) {
  const Layer l = GetParam();
  const auto [g, inputs, want] = layer_case(l);

  for (unsigned intra : {1u, 2u}) {
    SCOPED_TRACE(describe(l) + fmt::format(", {} threads", intra));
    const Trials t = run_trials(g, inputs, intra, 3 * 7 + 2);
    ASSERT_EQ(t.choices.size(), 1U) << "the convolution is a timed choice";
    const auto& candidates = t.choices[0].candidates;
    // F(4x4, 3x3), F(6x6, 3x3), F(7x7, 3x3) and F(2x2, 3x3); F(4x4, 5x5); F(4, r) along the row
    // or column;
    // at stride 2, the polyphase F(4x4) and F(2x2).
    const bool one_dimensional = l.kh() != l.kw();
    ASSERT_EQ(std::count_if(candidates.begin(), candidates.end(),
                            [](const auto& c) { return is_tfpin_winograd(c.kernel); }),
              l.r != 3 || one_dimensional ? 1
              : l.stride == 2             ? 2
                                          : 4)
        << "tfpin's Winograd kernels are not among the candidates";
    if (l.stride == 2) {
      for (const char* expected : {"tfpin_wino_s2_4x3", "tfpin_wino_s2_2x3"}) {
        EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(), [&](const auto& c) {
          return c.kernel.rfind(expected, 0) == 0;
        })) << expected;
      }
    }
    if (one_dimensional) {
      const std::string expected = l.kh() == 1 ? fmt::format("tfpin_wino_1x4_1x{}", l.kw())
                                               : fmt::format("tfpin_wino_4x1_{}x1", l.kh());
      EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(), [&](const auto& c) {
        return c.kernel.rfind(expected, 0) == 0;
      })) << expected;
    }
    expect_candidates_within(t, want, [](const std::string& kernel) {
      // F(6x6, 3x3) and F(4x4, 5x5) share their 8x8 transforms; F(4, 7) has 10 points.
      const bool eight =
          kernel.find("6x3") != std::string::npos || kernel.find("4x5") != std::string::npos;
      const bool ten =
          kernel.find("_1x7") != std::string::npos || kernel.find("_7x1") != std::string::npos;
      const bool nine = kernel.find("wino_7x3") != std::string::npos;
      return nine    ? winograd_9x9_error_bound
             : ten   ? winograd_1d_ten_point_error_bound
             : eight ? winograd_8x8_error_bound
                     : winograd_error_bound;
    });
  }
}

// Channels are whole vectors of either ISA (16 floats); the output-channel counts give the AVX-512
// micro-kernel's full block (64), its 1-3 vector tails and AVX2's blocks of 16.
INSTANTIATE_TEST_SUITE_P(
    Shapes, WinogradLayerTest,
    ::testing::Values(Layer{2, 16, 14, 14, 32, {1, 1, 1, 1}, true, false, true},
                      Layer{1, 32, 13, 9, 48, {1, 1, 1, 1}, false, false, false},
                      Layer{3, 16, 12, 12, 16, {0, 0, 0, 0}, true, true, true},
                      Layer{1, 64, 7, 7, 96, {1, 1, 1, 1}, true, true, false},
                      Layer{2, 16, 9, 11, 80, {1, 0, 2, 1}, true, false, true},
                      Layer{1, 16, 3, 3, 16, {1, 1, 1, 1}, false, false, true},
                      Layer{4, 128, 17, 17, 128, {1, 1, 1, 1}, true, true, true},
                      // 5x5: AlexNet's conv2 (pad 2), Inception v3's branches.
                      Layer{2, 16, 15, 15, 32, {2, 2, 2, 2}, true, false, true, 5},
                      Layer{1, 48, 9, 11, 64, {1, 2, 0, 3}, false, true, false, 5},
                      Layer{3, 32, 5, 5, 16, {2, 2, 2, 2}, true, true, true, 5},
                      // 1x7 and 7x1 (Inception v3's 17x17 blocks), 1x3 and 3x1 (its 8x8 ones),
                      // with widths that leave partial tiles of 1-3 outputs, and odd padding.
                      Layer{2, 32, 17, 17, 48, {0, 3, 0, 3}, true, false, true, 1, 7},
                      Layer{1, 16, 17, 17, 80, {3, 0, 3, 0}, true, true, true, 7, 1},
                      Layer{2, 16, 6, 9, 16, {0, 2, 0, 4}, false, true, false, 1, 7},
                      Layer{1, 32, 10, 5, 32, {1, 0, 5, 0}, true, false, false, 7, 1},
                      Layer{2, 48, 8, 8, 32, {0, 1, 0, 1}, true, false, true, 1, 3},
                      Layer{1, 16, 7, 8, 16, {1, 0, 1, 0}, false, true, true, 3, 1},
                      // 3x3 at stride 2: ResNet-50's (pad 1, even sizes), Inception v3's (no
                      // padding, odd sizes), and sizes that leave partial tiles on either side.
                      Layer{2, 32, 28, 28, 48, {1, 1, 1, 1}, true, false, true, 3, 0, 2},
                      Layer{1, 16, 14, 14, 80, {1, 1, 1, 1}, true, true, true, 3, 0, 2},
                      Layer{2, 48, 17, 17, 32, {0, 0, 0, 0}, false, false, true, 3, 0, 2},
                      Layer{1, 32, 15, 9, 16, {0, 1, 1, 0}, true, true, false, 3, 0, 2},
                      Layer{3, 16, 7, 12, 64, {1, 0, 1, 2}, false, false, false, 3, 0, 2},
                      Layer{1, 16, 4, 4, 16, {1, 1, 1, 1}, true, false, true, 3, 0, 2}),
    [](const ::testing::TestParamInfo<Layer>& p) { return fmt::format("shape{}", p.index); });

// tfpin's own 1x1 kernel (engine/src/ops/pointwise.cpp), a timed alternative beside oneDNN's:
// every trial run's output within the rounding of a direct convolution. Output-channel counts
// give the AVX-512 micro-kernel's full block (64) and its 1-3 vector tails, AVX2's blocks of 16;
// batch 2 with 99 pixels an image puts rows of one call in two images; 512 input channels take
// several passes over the channels (partial sums in the output, the residual added in the first
// pass, the ReLU in the last); stride 2 reads every other pixel.
constexpr double pointwise_error_bound = 1e-5;

class PointwiseLayerTest : public ::testing::TestWithParam<Layer> {};

bool is_tfpin_1x1(const KernelChoice::Candidate& c) { return c.kernel.rfind("tfpin_1x1", 0) == 0; }

// A layer where tfpin's kernel `prefix` applies when its channels are whole blocks of the ISA's
// vector: offered then (and only then) among at most `most_candidates`, every trial run within
// its bound, and the kernel forced alone from the first run in a new runtime (an output it failed
// to write would not be left over from another candidate's trial run).
void expect_own_kernel_within(const Layer& l, const std::string& prefix, int most_candidates) {
  const auto [g, inputs, want] = layer_case(l);
  const std::int64_t block = onednn_effective_isa().rfind("avx512", 0) == 0 ? 16 : 8;
  const bool offered = l.c % block == 0 && l.k % block == 0;
  for (unsigned intra : {1u, 2u}) {
    SCOPED_TRACE(describe(l) + fmt::format(", {} threads, block {}", intra, block));
    const Trials t = run_trials(g, inputs, intra, 3 * most_candidates + 2);
    const auto count = [&] {
      if (t.choices.empty()) return std::ptrdiff_t{0};
      const auto& c = t.choices[0].candidates;
      return std::count_if(c.begin(), c.end(),
                           [&](const auto& k) { return k.kernel.rfind(prefix, 0) == 0; });
    }();
    ASSERT_EQ(count, offered ? 1 : 0) << prefix << " among the candidates";
    if (offered) {
      ASSERT_EQ(t.choices.size(), 1U) << "the convolution is a timed choice";
      expect_candidates_within(t, want, [](const std::string& kernel) {
        return is_tfpin_winograd(kernel) ? winograd_error_bound : pointwise_error_bound;
      });
    }
    const Trials forced = run_trials(g, inputs, intra, 1, true, prefix);
    EXPECT_TRUE(within_bound(forced.outputs.at(0), want, pointwise_error_bound));
  }
}

TEST_P(PointwiseLayerTest, OwnKernelWithinTheBound) {
  expect_own_kernel_within(GetParam(), "tfpin_1x1", 2);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PointwiseLayerTest,
    ::testing::Values(Layer{1, 16, 7, 7, 48, {0, 0, 0, 0}, true, false, true, 1},
                      Layer{2, 32, 9, 11, 80, {0, 0, 0, 0}, true, true, true, 1},
                      Layer{1, 64, 14, 14, 256, {0, 0, 0, 0}, false, true, false, 1},
                      Layer{1, 128, 8, 8, 96, {0, 0, 0, 0}, true, false, false, 1},
                      Layer{1, 512, 7, 7, 64, {0, 0, 0, 0}, true, true, true, 1},
                      Layer{3, 48, 5, 3, 16, {0, 0, 0, 0}, false, false, true, 1},
                      // AVX2 only (8-channel blocks): a last block of one vector
                      Layer{1, 24, 6, 6, 40, {0, 0, 0, 0}, true, true, true, 1},
                      // stride 2: ResNet-50's downsampling layers, and odd sizes
                      Layer{1, 32, 14, 14, 64, {0, 0, 0, 0}, true, true, true, 1, 0, 2},
                      Layer{2, 16, 9, 9, 32, {0, 0, 0, 0}, false, false, true, 1, 0, 2}),
    [](const ::testing::TestParamInfo<Layer>& p) { return fmt::format("shape{}", p.index); });

// The same kernel for larger kernels (tfpin_direct): a sum of 1x1 convolutions, one per tap, over
// a zero-bordered copy of the input where the layer pads. Offered at stride 2 and where no
// Winograd applies (2x2 kernels here). 80 and 128 input channels make passes over the (tap,
// channel) rows that end inside a tap (passes of 96 rows with AVX-512's 64-channel blocks, 384
// and 768 with AVX2's 16 and 8); 80 output channels the micro-kernel's tails; batch 2 rows of one
// call in two images; asymmetric padding the borders on one side only; a 2x2 input padded to
// 4x4 a kernel wider than the input.
// (The bound: pointwise_error_bound, a direct convolution's rounding.)
class DirectLayerTest : public ::testing::TestWithParam<Layer> {};

TEST_P(DirectLayerTest, OwnKernelWithinTheBound) {
  // oneDNN's direct and channels-last kernels, tfpin's two stride-2 Winograd kernels and this one
  expect_own_kernel_within(GetParam(), "tfpin_direct", 5);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, DirectLayerTest,
    ::testing::Values(
        // ResNet-50's 3x3 stride 2 (pad 1, even sizes), Inception v3's (no padding, odd sizes)
        Layer{1, 32, 14, 14, 64, {1, 1, 1, 1}, true, false, true, 3, 0, 2},
        Layer{2, 48, 17, 17, 80, {0, 0, 0, 0}, false, true, true, 3, 0, 2},
        Layer{1, 128, 8, 8, 64, {1, 1, 1, 1}, true, true, false, 3, 0, 2},
        Layer{1, 16, 15, 9, 16, {0, 1, 1, 0}, true, false, false, 3, 0, 2},
        // 5x5 and 1x3 at stride 2; 2x2 at stride 1 (no Winograd), padded on one side
        Layer{1, 32, 11, 11, 32, {2, 2, 2, 2}, true, false, true, 5, 0, 2},
        Layer{1, 16, 9, 12, 48, {0, 1, 0, 1}, false, false, true, 1, 3, 2},
        Layer{2, 32, 7, 7, 32, {0, 0, 1, 1}, true, true, true, 2, 0, 1},
        // AVX2 only (8-channel blocks): a last block of one vector
        Layer{1, 24, 10, 10, 40, {1, 1, 1, 1}, true, false, true, 3, 0, 2},
        // passes ending inside taps on both ISAs, with full blocks and with one-vector ones
        Layer{1, 80, 9, 9, 64, {1, 1, 1, 1}, true, true, true, 3, 0, 2},
        Layer{2, 80, 6, 6, 16, {1, 1, 1, 1}, false, true, true, 3, 0, 2},
        Layer{1, 32, 2, 2, 32, {1, 1, 1, 1}, true, false, true, 3, 0, 2}),
    [](const ::testing::TestParamInfo<Layer>& p) { return fmt::format("shape{}", p.index); });

// tfpin_direct where it applies (3x3 stride 2, a 2x2 kernel at stride 1), and not where it does
// not: dilation, groups, an activation other than ReLU, channels that are not whole blocks, and a
// 3x3 stride-1 layer (Winograd's).
TEST(Direct, OfferedOnlyWhereItApplies) {
  struct Case {
    const char* what;
    std::int64_t k;
    std::int64_t kernel;
    std::int64_t stride;
    std::int64_t groups;
    std::int64_t dilation;
    bool sigmoid;
    bool offered;
  };
  for (const Case& c : {Case{"3x3 stride 2", 32, 3, 2, 1, 1, false, true},
                        Case{"2x2 stride 1", 32, 2, 1, 1, 1, false, true},
                        Case{"3x3 stride 1", 32, 3, 1, 1, 1, false, false},
                        Case{"dilation 2", 32, 3, 2, 1, 2, false, false},
                        Case{"2 groups", 32, 3, 2, 2, 1, false, false},
                        Case{"sigmoid", 32, 3, 2, 1, 1, true, false},
                        Case{"20 output channels", 20, 3, 2, 1, 1, false, false}}) {
    SCOPED_TRACE(c.what);
    Graph g;
    Conv2D attrs;
    attrs.groups = c.groups;
    attrs.stride = {c.stride, c.stride};
    attrs.dilation = {c.dilation, c.dilation};
    attrs.padding = {1, 1, 1, 1};
    const std::int64_t weights = c.k * 32 / c.groups * c.kernel * c.kernel;
    TensorId y = g.convolution(g.input("x", {1, 32, 9, 9}),
                               g.constant("w", {c.k, 32 / c.groups, c.kernel, c.kernel},
                                          random_vector(static_cast<std::size_t>(weights), 2)),
                               no_tensor, attrs, "conv");
    if (c.sigmoid) y = g.eltwise(y, Eltwise{EltwiseKind::sigmoid});
    g.output(y, "y");
    const Trials t = run_trials(g, {{"x", random_vector(32 * 81, 1)}}, 2, 3 * 8 + 2);
    const bool offered = std::any_of(t.choices.begin(), t.choices.end(), [](const auto& choice) {
      return std::any_of(choice.candidates.begin(), choice.candidates.end(),
                         [](const auto& k) { return k.kernel.rfind("tfpin_direct", 0) == 0; });
    });
    EXPECT_EQ(offered, c.offered);
  }
}

// Not offered where the kernel does not apply: padding, groups, an activation other than ReLU,
// channels that are not whole blocks.
TEST(Pointwise, OfferedOnlyWhereItApplies) {
  struct Case {
    const char* what;
    std::int64_t k;
    std::int64_t groups;
    std::int64_t pad;
    bool sigmoid;
  };
  for (const Case& c :
       {Case{"padding 1", 32, 1, 1, false}, Case{"2 groups", 32, 2, 0, false},
        Case{"sigmoid", 32, 1, 0, true}, Case{"20 output channels", 20, 1, 0, false}}) {
    SCOPED_TRACE(c.what);
    Graph g;
    Conv2D attrs;
    attrs.groups = c.groups;
    attrs.padding = {c.pad, c.pad, c.pad, c.pad};
    TensorId y =
        g.convolution(g.input("x", {1, 32, 7, 7}),
                      g.constant("w", {c.k, 32 / c.groups, 1, 1},
                                 random_vector(static_cast<std::size_t>(c.k * 32 / c.groups), 2)),
                      no_tensor, attrs, "conv");
    if (c.sigmoid) y = g.eltwise(y, Eltwise{EltwiseKind::sigmoid});
    g.output(y, "y");
    const Trials t = run_trials(g, {{"x", random_vector(32 * 49, 1)}}, 2, 8);
    for (const auto& choice : t.choices) {
      EXPECT_TRUE(std::none_of(choice.candidates.begin(), choice.candidates.end(), is_tfpin_1x1));
    }
  }
}

// A ReLU between the convolution and a residual add: the add is not fused into the convolution
// (its operand is the ReLU's output), so the kernel runs conv + bias + ReLU and the add follows;
// every trial run gives the ReLU's output plus the residual.
TEST(Pointwise, ReluBeforeTheResidualAdd) {
  const Layer l{1, 32, 6, 6, 32, {0, 0, 0, 0}, true, false, false, 1};
  const auto x = random_vector(32 * 36, 1);
  const auto w = random_vector(32 * 32, 2, -0.5f, 0.5f);
  const auto b = random_vector(32, 3);
  const auto r = random_vector(32 * 36, 4);
  Graph g;
  const TensorId conv =
      g.convolution(g.input("x", {1, 32, 6, 6}), g.constant("w", {32, 32, 1, 1}, w),
                    g.constant("b", {32}, b), Conv2D{}, "conv");
  g.output(g.add(g.relu(conv), g.input("residual", {1, 32, 6, 6})), "y");
  Expected want = naive(l, 6, 6, x, w, b, r);
  for (std::size_t i = 0; i < want.y.size(); ++i) {
    want.y[i] = std::max(want.y[i], 0.0) + r[i];
    want.magnitude[i] += std::abs(r[i]);
  }
  const Trials t = run_trials(g, {{"x", x}, {"residual", r}}, 2, 8);
  ASSERT_EQ(t.choices.size(), 1U);
  EXPECT_TRUE(std::any_of(t.choices[0].candidates.begin(), t.choices[0].candidates.end(),
                          [](const auto& c) { return c.kernel.rfind("tfpin_1x1", 0) == 0; }));
  for (const auto& o : t.outputs) EXPECT_TRUE(within_bound(o, want, pointwise_error_bound));
}

TEST(Winograd, OfferedOnlyWhereItApplies) {
  auto layer = [](std::int64_t c, std::int64_t kernel, std::int64_t stride, std::int64_t groups,
                  std::int64_t kernel_width = 0) {
    const std::int64_t kw = kernel_width != 0 ? kernel_width : kernel;
    Graph g;
    const TensorId x = g.input("x", {1, c, 12, 12});
    Conv2D attrs;
    attrs.stride = {stride, stride};
    attrs.padding = {kernel / 2, kw / 2, kernel / 2, kw / 2};
    attrs.groups = groups;
    const auto weights = random_vector(static_cast<std::size_t>(32 * c / groups * kernel * kw), 5);
    g.output(g.convolution(x, g.constant("w", {32, c / groups, kernel, kw}, weights), no_tensor,
                           attrs, "conv"),
             "y");
    return g;
  };
  auto offered = [](const Graph& g, bool winograd) {
    const std::int64_t c = g.tensors().front().dims[1];
    std::map<std::string, std::vector<float>> inputs{
        {"x", random_vector(static_cast<std::size_t>(12 * 12 * c), 6)}};
    for (const KernelChoice& choice : run_trials(g, inputs, 2, 3 * 7 + 2, winograd).choices) {
      for (const auto& candidate : choice.candidates) {
        if (is_tfpin_winograd(candidate.kernel)) return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(offered(layer(16, 3, 1, 1), true));
  EXPECT_FALSE(offered(layer(16, 3, 1, 1), false)) << "the option turns it off";
  EXPECT_TRUE(offered(layer(16, 3, 2, 1), true)) << "3x3 stride 2";
  EXPECT_FALSE(offered(layer(16, 3, 2, 1), false)) << "3x3 stride 2, the option off";
  EXPECT_FALSE(offered(layer(16, 3, 3, 1), true)) << "3x3 stride 3";
  EXPECT_FALSE(offered(layer(16, 3, 2, 2), true)) << "3x3 stride 2, groups";
  EXPECT_TRUE(offered(layer(16, 5, 1, 1), true)) << "5x5";
  EXPECT_FALSE(offered(layer(16, 7, 1, 1), true)) << "7x7";
  EXPECT_FALSE(offered(layer(16, 5, 2, 1), true)) << "5x5 stride 2";
  EXPECT_FALSE(offered(layer(16, 3, 1, 2), true)) << "groups";
  EXPECT_FALSE(offered(layer(12, 3, 1, 1), true)) << "channels in no whole vector";
  EXPECT_TRUE(offered(layer(16, 1, 1, 1, 7), true)) << "1x7";
  EXPECT_TRUE(offered(layer(16, 7, 1, 1, 1), true)) << "7x1";
  EXPECT_TRUE(offered(layer(16, 3, 1, 1, 1), true)) << "3x1";
  EXPECT_FALSE(offered(layer(16, 1, 1, 1, 7), false)) << "1x7, the option off";
  EXPECT_FALSE(offered(layer(16, 1, 1, 1, 5), true)) << "1x5";
  EXPECT_FALSE(offered(layer(16, 7, 2, 1, 1), true)) << "7x1 stride 2";
  EXPECT_FALSE(offered(layer(16, 3, 1, 1, 7), true)) << "3x7";
}

TEST(Winograd, CandidatesGiveWayToAMemoryLimit) {
  // Winograd weights are 4x (F(4x4)) and 7.1x (F(6x6)) the plain ones: a memory limit that fits
  // the compiled kernels but not the candidates compiles without the candidates, untimed.
  Graph g;
  const TensorId x = g.input("x", {1, 64, 28, 28});
  const auto w = random_vector(64 * 64 * 9, 8, -0.1f, 0.1f);
  Conv2D attrs;
  attrs.padding = {1, 1, 1, 1};
  g.output(g.convolution(x, g.constant("w", {64, 64, 3, 3}, w), no_tensor, attrs, "conv"), "y");
  const std::map<std::string, std::vector<float>> inputs{{"x", random_vector(64 * 28 * 28, 9)}};
  CompileOptions options;
  options.intra = 2;
  const auto full = testing::run_engine(g, inputs, options);
  ASSERT_TRUE(full.status.ok()) << full.status.to_string();
  ASSERT_GE(full.report.timed_choices, 1);
  const std::uint64_t needed = full.report.arena_bytes + full.report.weight_bytes +
                               full.report.scratchpad_bytes * options.lanes;
  options.memory_limit_bytes = needed - 1;
  const auto tight = testing::run_engine(g, inputs, options, 20);
  ASSERT_TRUE(tight.status.ok()) << tight.status.to_string();
  EXPECT_EQ(tight.report.timed_choices, 0);
  EXPECT_LT(tight.report.weight_bytes, full.report.weight_bytes);
  EXPECT_LE(tight.report.arena_bytes + tight.report.weight_bytes +
                tight.report.scratchpad_bytes * options.lanes,
            needed - 1);
  EXPECT_TRUE(close(tight.outputs.at("y"), full.outputs.at("y"), 1e-3, 1e-4));
}

class WinogradModelTest : public ::testing::TestWithParam<Model> {};

// A whole model with every layer that has tfpin's Winograd as a candidate running it
// (CompileOptions::force_kernel), against the compiled kernels (the first run's), per tile size.
TEST_P(WinogradModelTest, SameOutputWithEveryThreeByThreeLayerOnTfpinWinograd) {
  const Model model = GetParam();
  const std::int64_t batch = model == Model::alexnet || model == Model::googlenet ? 2 : 1;
  const std::int64_t s = image_size(model);
  const std::vector<std::int64_t> dims{batch, 3, s, s};
  const std::map<std::string, std::vector<float>> inputs{
      {"images", reference::nchw_to_nhwc(
                     random_vector(static_cast<std::size_t>(batch * 3 * s * s), 99), dims)}};
  const Graph g = build_model(model, batch, Layout::nhwc);
  CompileOptions options;
  options.intra = 2;
  const auto compiled = testing::run_engine(g, inputs, options);
  ASSERT_TRUE(compiled.status.ok()) << compiled.status.to_string();
  const std::vector<float>& p = compiled.outputs.at("probabilities");
  // AlexNet's conv2, Inception v3's 5x5 branches; none in ResNet-50 and VGG16, nor in
  // torchvision's GoogLeNet (its "5x5" branches are 3x3).
  const bool has_five = model == Model::alexnet || model == Model::inception3;
  const bool inception = model == Model::inception3;
  struct Forced {
    const char* tile;
    bool applies;
    int min_layers;
  };
  // ResNet-50's 13 3x3 stride-1 layers, Inception's, VGG's, GoogLeNet's; AlexNet's three 3x3
  // layers at 13x13. 5x5: AlexNet's one, Inception's three. One-dimensional F(4, r): Inception's
  // 13 1x7 and 4 1x3 layers along rows, its 13 7x1 and 4 3x1 along columns. 3x3 at stride 2:
  // ResNet-50's 3, Inception's 4 (Mixed_6a, Mixed_7a; its first layer has 3 channels).
  const bool resnet = model == Model::resnet50;
  const Forced kernels[] = {
      {"tfpin_wino_4x3", true, 3},
      {"tfpin_wino_6x3", true, 3},
      {"tfpin_wino_7x3", true, 3},
      {"tfpin_wino_2x3", true, 3},
      {"tfpin_wino_4x5", has_five, 1},
      {"tfpin_wino_1x4_", inception, 17},
      {"tfpin_wino_4x1_", inception, 17},
      {"tfpin_wino_s2_4x3", resnet, 3},
      {"tfpin_wino_s2_4x3", inception, 4},
      {"tfpin_wino_s2_2x3", resnet || inception, 3},
      // tfpin's 1x1 kernel: ResNet-50's 36 1x1 layers (residual sums, stride 2), GoogLeNet's
      // at batch 2 (no sibling merging), Inception v3's at batch 1 (merged siblings too).
      {"tfpin_1x1", resnet, 36},
      {"tfpin_1x1", model == Model::googlenet, 30},
      {"tfpin_1x1", inception, 20},
      // Its direct kernel of larger kernels: the 3x3 stride-2 layers (ResNet-50's 3, Inception
      // v3's 4).
      {"tfpin_direct", resnet, 3},
      {"tfpin_direct", inception, 4},
  };
  for (const auto& [tile, applies, min_layers] : kernels) {
    if (!applies) continue;
    SCOPED_TRACE(tile);
    options.force_kernel = tile;
    const auto forced = testing::run_engine(g, inputs, options);
    ASSERT_TRUE(forced.status.ok()) << forced.status.to_string();
    // (Steps without it, e.g. GoogLeNet's 24- and 48-channel 3x3 layers on AVX-512, still time
    // theirs: the first run, checked here, runs their compiled kernel.)
    int layers = 0;
    for (const auto& step : testing::described_steps(forced.description)) {
      layers += step[3].rfind(tile, 0) == 0;
    }
    EXPECT_GE(layers, min_layers) << forced.description;
    // (plus oneDNN's Winograd where tfpin's does not apply: VGG16's first layer, 3 channels)
    const bool winograd = std::string(tile).rfind("tfpin_wino", 0) == 0;
    if (winograd) {
      EXPECT_GE(forced.report.winograd_convolutions, layers);
    }
    const std::vector<float>& q = forced.outputs.at("probabilities");
    EXPECT_TRUE(close(q, p, 2e-3, 2e-4)) << layers << " layers on " << tile;
    EXPECT_NE(q, p);
    for (const float v : q) ASSERT_TRUE(std::isfinite(v));
  }
}

// A small trainable graph and its trained tensors' initial values: convolutions with bias, then
// average pooling over the whole image, an inner product to 10 classes and the softmax "p".
struct TrainedGraph {
  Graph g;
  std::map<std::string, std::vector<float>> initial;
  std::uint64_t seed;  // of the last tensor drawn

  explicit TrainedGraph(std::uint64_t first_seed) : seed(first_seed) {}

  TensorId conv(TensorId x, std::int64_t c, std::int64_t k, std::array<std::int64_t, 2> kernel,
                std::array<std::int64_t, 4> pad, std::int64_t stride, const std::string& name) {
    const auto [r, s] = kernel;
    const float scale = 1.5f / std::sqrt(static_cast<float>(c * r * s));
    initial[name + ".w"] =
        random_vector(static_cast<std::size_t>(k * c * r * s), ++seed, -scale, scale);
    initial[name + ".b"] = random_vector(static_cast<std::size_t>(k), ++seed, -0.1f, 0.1f);
    Conv2D a;
    a.padding = pad;
    a.stride = {stride, stride};
    return g.convolution(x, g.constant(name + ".w", {k, c, r, s}, initial[name + ".w"]),
                         g.constant(name + ".b", {k}, initial[name + ".b"]), a, name);
  }

  // y: 16 channels of height x width.
  void classify(TensorId y, std::int64_t height, std::int64_t width) {
    Pool2D pool;
    pool.kernel = {height, width};
    pool.stride = {1, 1};
    y = g.flatten(g.avg_pool(y, pool));
    initial["fc.w"] = random_vector(16 * 10, ++seed, -0.5f, 0.5f);
    initial["fc.b"] = random_vector(10, ++seed, -0.1f, 0.1f);
    g.output(g.softmax(g.inner_product(y, g.constant("fc.w", {10, 16}, initial["fc.w"]),
                                       g.constant("fc.b", {10}, initial["fc.b"]), "fc")),
             "p");
  }
};

// The gradient of every trained tensor of `net` after one SGD step of
// learning rate 1 on `inputs`, and the runtime's description of its steps.
std::map<std::string, std::vector<float>> one_step_gradients(
    const TrainedGraph& net, const std::map<std::string, std::vector<float>>& inputs,
    CompileOptions options, std::string* description) {
  const Graph& g = net.g;
  const auto& initial = net.initial;
  options.training = TrainingOptions{1.0f, 0.0f, 0.1f, 1, 0, std::nullopt};
  std::map<std::string, std::vector<float>> result;
  std::unique_ptr<Runtime> rt;
  const Status created = Runtime::create(g, options, &rt);
  EXPECT_TRUE(created.ok()) << created.to_string();
  if (!created.ok()) return result;
  if (description != nullptr) *description = rt->describe();
  std::vector<ExternalInput> in;
  for (const TensorInfo& info : rt->inputs())
    in.push_back({info.name, inputs.at(info.name).data()});
  std::vector<float> p(rt->outputs().at(0).elements());
  const ExternalOutput out[] = {{rt->outputs().at(0).name, p.data()}};
  EXPECT_TRUE(rt->setup(in, out).ok());
  const Status ran = rt->run();
  EXPECT_TRUE(ran.ok()) << ran.to_string();
  for (const auto& [name, before] : initial) {
    std::vector<float> after;
    EXPECT_TRUE(rt->parameter(name, &after).ok()) << name;
    if (after.size() != before.size()) continue;
    for (std::size_t i = 0; i < after.size(); ++i) after[i] = before[i] - after[i];
    result[name] = after;
  }
  return result;
}

// Training: tfpin's Winograd runs the forward steps, the backward data steps (a convolution of
// the output gradient by the kernel transposed and flipped), reading the trained weights in
// oneDNN's layout and transforming them every step, and the backward weights steps (the
// transpose of the forward, bias gradient included). One SGD step of learning rate 1 from the same
// start gives every gradient as before - after: per tile size they must match oneDNN's direct
// kernels' (without Winograd) to Winograd's rounding. conv2 and conv3 have padding other than 1,
// so their backward data pads differently from their forward. 26x26 images make conv1's 196
// tiles of 4x4 more than one weight gradient tile block for a thread (What read and added to).
TEST(Winograd, TrainingGradientsMatchTheDirectKernels) {
  TrainedGraph net(500);
  Graph& g = net.g;
  const std::int64_t batch = 4;
  const std::int64_t side = 26;
  TensorId y = g.relu(
      net.conv(g.input("x", {batch, 16, side, side}), 16, 32, {3, 3}, {1, 1, 1, 1}, 1, "conv1"));
  y = g.relu(net.conv(y, 32, 32, {3, 3}, {0, 1, 1, 2}, 1, "conv2"));  // side - 1 x side + 1
  y = g.relu(net.conv(y, 32, 16, {3, 3}, {2, 2, 2, 2}, 1, "conv3"));  // side + 1 x side + 3
  y = net.conv(y, 16, 16, {5, 5}, {1, 3, 3, 1}, 1, "conv4");          // the same, 5x5
  net.classify(y, side + 1, side + 3);
  std::map<std::string, std::vector<float>> inputs{
      {"x", random_vector(static_cast<std::size_t>(batch * 16 * side * side), 7)},
      {"labels", {1, 5, 9, 3}}};

  for (unsigned intra : {1u, 2u}) {
    CompileOptions options;
    options.intra = intra;
    options.winograd = false;
    const auto direct = one_step_gradients(net, inputs, options, nullptr);
    ASSERT_EQ(direct.size(), net.initial.size());
    options.winograd = true;
    for (const char* tile :
         {"tfpin_wino_4x3", "tfpin_wino_6x3", "tfpin_wino_7x3", "tfpin_wino_4x5"}) {
      SCOPED_TRACE(fmt::format("{}, {} threads", tile, intra));
      const bool five = std::string(tile) == "tfpin_wino_4x5";
      options.force_kernel = tile;
      std::string description;
      const auto winograd = one_step_gradients(net, inputs, options, &description);
      ASSERT_EQ(winograd.size(), net.initial.size());
      int forward = 0;
      int backward_data = 0;
      int backward_weights = 0;
      for (const auto& step : testing::described_steps(description)) {
        if (step[3].rfind(tile, 0) != 0) continue;
        if (step[1].find(":backward_data") != std::string::npos) {
          ++backward_data;
        } else if (step[1].find(":backward_weights") != std::string::npos) {
          ++backward_weights;
        } else {
          ++forward;
        }
      }
      // conv1 needs no backward data: x is not trained. The backward steps' layouts are
      // oneDNN's choice (a step on other layouts has no tfpin Winograd), the forward's tfpin's.
      // (conv4, the one 5x5 layer, may have none on its backward steps.)
      EXPECT_EQ(forward, five ? 1 : 3) << description;
      EXPECT_GE(backward_data, five ? 0 : 1) << description;
      EXPECT_GE(backward_weights, five ? 0 : 1) << description;
      for (const auto& [name, want] : direct) {
        EXPECT_TRUE(close(winograd.at(name), want, 1e-4, 1e-3)) << name;
      }
      EXPECT_NE(winograd.at("conv1.w"), direct.at("conv1.w"));
    }
  }
}

// Training on tfpin's stride-2 and one-dimensional Winograd: the forward steps, the backward data
// steps (a stride-2 layer's is the polyphase transposed convolution, _transposed) and the backward
// weights steps of all. With them forced, one SGD step gives the gradients of oneDNN's direct
// kernels to Winograd's rounding. The 1x3 and 3x1 layers pad one side only, so their backward
// data pads the other. Odd sizes leave partial tiles at the edges, and 3 images of 13 rows of 3
// tiles (the 1x7 and 1x3 layers) a block whose tiles are not whole rows of the micro-kernel. The
// stride-2 layers' inputs are odd (25 x 21) and even (13 x 11), and the second pads 0 above and 1
// left: its data gradient's first row is an even sample of the padded input, its first column
// an odd one.
TEST(Winograd, TrainingOnStrideTwoAndOneDimensionalTiles) {
  TrainedGraph net(900);
  Graph& g = net.g;
  const std::int64_t batch = 3;
  // (x is not trained: "first" gives the stride-2 layer a data gradient.)
  TensorId y = g.relu(
      net.conv(g.input("x", {batch, 16, 25, 21}), 16, 16, {3, 3}, {1, 1, 1, 1}, 1, "first"));
  y = g.relu(net.conv(y, 16, 32, {3, 3}, {1, 1, 1, 1}, 2, "strided"));              // 13 x 11
  y = g.relu(net.conv(y, 32, 32, {1, 7}, {0, 3, 0, 3}, 1, "row"));                  // 13 x 11
  y = g.relu(net.conv(y, 32, 16, {7, 1}, {3, 0, 3, 0}, 1, "column"));               // 13 x 11
  y = g.relu(net.conv(y, 16, 16, {1, 3}, {0, 0, 0, 2}, 1, "short_row"));            // 13 x 11
  y = g.relu(net.conv(y, 16, 16, {3, 1}, {2, 0, 0, 0}, 1, "short_column"));         // 13 x 11
  y = g.relu(net.conv(y, 16, 16, {3, 3}, {0, 1, 1, 0}, 2, "strided_uneven_pads"));  // 6 x 5
  net.classify(y, 6, 5);
  const std::map<std::string, std::vector<float>> inputs{
      {"x", random_vector(static_cast<std::size_t>(batch * 16 * 25 * 21), 9)},
      {"labels", {2, 4, 6}}};
  for (unsigned intra : {1u, 2u}) {
    CompileOptions options;
    options.intra = intra;
    options.winograd = false;
    const auto direct = one_step_gradients(net, inputs, options, nullptr);
    ASSERT_EQ(direct.size(), net.initial.size());
    options.winograd = true;
    // "tfpin_wino_" takes the first of each step's tfpin kernels: F(4x4) at stride 2.
    for (const char* forced : {"tfpin_wino_", "tfpin_wino_s2_2x3"}) {
      SCOPED_TRACE(fmt::format("{}, {} threads", forced, intra));
      options.force_kernel = forced;
      std::string description;
      const auto winograd = one_step_gradients(net, inputs, options, &description);
      ASSERT_EQ(winograd.size(), net.initial.size());
      std::map<std::string, std::string> kernel_of;
      for (const auto& step : testing::described_steps(description)) kernel_of[step[1]] = step[3];
      const bool all = std::string(forced) == "tfpin_wino_";
      // The backward steps' layouts are oneDNN's choice (a step on other layouts has no tfpin
      // Winograd): each that has one must run the layer's kind, and some must have one.
      int backward_data = 0;
      int backward_weights = 0;
      auto check = [&](const std::string& step, const std::string& kernel) {
        const std::string& kept = kernel_of[step];
        if (kept.rfind("tfpin_wino_", 0) != 0) return;
        EXPECT_EQ(kept.rfind(kernel, 0), 0u) << step << "\n" << description;
        backward_data += step.ends_with(":backward_data") ? 1 : 0;
        backward_weights += step.ends_with(":backward_weights") ? 1 : 0;
      };
      const std::string stride2 = all ? "tfpin_wino_s2_4x3" : forced;
      for (const char* layer : {"strided", "strided_uneven_pads"}) {
        EXPECT_EQ(kernel_of[layer].rfind(stride2, 0), 0u) << layer << "\n" << description;
        check(std::string(layer) + ":backward_weights", stride2);
        check(std::string(layer) + ":backward_data", stride2 + "_transposed");
      }
      EXPECT_GE(backward_weights, 1) << description;
      // oneDNN 2.6 gives a stride-2 data gradient blocked layouts, where tfpin's transposed
      // Winograd is offered; oneDNN 3.7 (AVX-512, seen on Zen 5) picks channels-last for it and
      // its brgemm kernel, which tfpin's kernels do not read, so there none may have one.
      if (onednn_runtime_version().major < 3) {
        EXPECT_GE(backward_data, 1) << description;
      }
      if (all) {
        const std::pair<const char*, const char*> one_dimensional[] = {
            {"row", "tfpin_wino_1x4_1x7"},
            {"column", "tfpin_wino_4x1_7x1"},
            {"short_row", "tfpin_wino_1x4_1x3"},
            {"short_column", "tfpin_wino_4x1_3x1"}};
        for (const auto& [layer, kernel] : one_dimensional) {
          EXPECT_EQ(kernel_of[layer].rfind(kernel, 0), 0u) << layer << "\n" << description;
          check(std::string(layer) + ":backward_data", kernel);
          check(std::string(layer) + ":backward_weights", kernel);
        }
        EXPECT_GE(backward_data, 1) << description;
        EXPECT_GE(backward_weights, 3) << description;
      }
      for (const auto& [name, want] : direct) {
        EXPECT_TRUE(close(winograd.at(name), want, 1e-4, 1e-3)) << name;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Zoo, WinogradModelTest,
                         ::testing::Values(Model::resnet50, Model::inception3, Model::vgg16,
                                           Model::googlenet, Model::alexnet),
                         [](const ::testing::TestParamInfo<Model>& param) {
                           return std::string(to_string(param.param));
                         });

}  // namespace
}  // namespace tfpin::engine
