// Training's batch norm + ReLU + max pooling kernels and inference's max pooling kernel
// (engine/src/ops/batch_norm_pool_kernels.hpp) against a naive reference, plane by plane, on every
// ISA this CPU has: windows with padding and clipped edges, scales of both signs, blocked and
// channels-last planes, plain and non-temporal stores, NaNs and infinities. (The fused step in
// whole graphs: test_training.cpp; the max pooling step: test_ops.cpp.)
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ops/batch_norm_pool_kernels.hpp"

namespace tfpin::engine::detail {
namespace {

struct Isa {
  const char* name;
  const BatchNormPoolKernels* kernels;
};

std::vector<Isa> isas() {
  std::vector<Isa> all;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    all.push_back({"avx2", batch_norm_pool_kernels_avx2()});
  }
  if (__builtin_cpu_supports("avx512f"))
    all.push_back({"avx512", batch_norm_pool_kernels_avx512()});
  return all;
}

struct Window {
  std::int64_t height, width;
  int kernel, stride, pad;
  std::int64_t out_height, out_width;  // the last window may hang past the input (ceil mode)
};

const Window windows[] = {
    {12, 12, 3, 2, 0, 6, 6},  // GoogLeNet's: ceil mode clips the last row and column
    {7, 9, 3, 1, 1, 7, 9},    // padding on every side
    {6, 6, 2, 2, 0, 3, 3},   {11, 13, 3, 2, 1, 6, 7}, {15, 15, 3, 2, 0, 7, 7},  // Inception v3's
};

// 64-byte aligned floats (non-temporal stores need it), zero-filled.
struct Floats {
  explicit Floats(std::size_t n)
      : data(static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64))) {
    for (std::size_t i = 0; i < n; ++i) data.get()[i] = 0.0f;
  }
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data;
  float* get() const { return data.get(); }
};

// One plane's tensors in one of two layouts: blocked (the plane alone, pixels `lanes` apart) or
// channels last (two blocks of channels, the plane the second block of each pixel).
struct Planes {
  Planes(const Window& w, int lanes, bool channels_last)
      : blocks(channels_last ? 2 : 1),
        first(channels_last ? lanes : 0),
        x(static_cast<std::size_t>(w.height * w.width * blocks * lanes)),
        dx(static_cast<std::size_t>(w.height * w.width * blocks * lanes)),
        y(static_cast<std::size_t>(w.out_height * w.out_width * blocks * lanes)),
        x_max(static_cast<std::size_t>(w.out_height * w.out_width * blocks * lanes)),
        dy(static_cast<std::size_t>(w.out_height * w.out_width * blocks * lanes)),
        index(static_cast<std::size_t>(w.out_height * w.out_width * blocks * lanes) + 64) {
    p.height = w.height;
    p.width = w.width;
    p.out_height = w.out_height;
    p.out_width = w.out_width;
    p.kernel_h = p.kernel_w = w.kernel;
    p.stride_h = p.stride_w = w.stride;
    p.pad_top = p.pad_left = w.pad;
    p.x_pixel = blocks * lanes;
    p.x_row = w.width * p.x_pixel;
    p.y_pixel = blocks * lanes;
    p.y_row = w.out_width * p.y_pixel;
  }
  std::int64_t blocks;
  std::int64_t first;  // the plane's offset: its channel block within a pixel
  BatchNormPoolPlane p;
  Floats x, dx, y, x_max, dy;
  std::vector<unsigned char> index;
  unsigned char* index_at() {  // 64-byte aligned as well
    auto address = reinterpret_cast<std::uintptr_t>(index.data());
    return index.data() + (64 - address % 64) % 64;
  }
};

class BatchNormPoolKernelsTest : public ::testing::Test {
 protected:
  std::mt19937 rng{12345};
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }
};

TEST_F(BatchNormPoolKernelsTest, AgainstTheNaiveReference) {
  const std::vector<Isa> available = isas();
  if (available.empty()) GTEST_SKIP() << "no AVX2 on this CPU: the kernels are not used";
  for (const Isa& isa : available) {
    const int lanes = isa.kernels->lanes;
    for (const Window& w : windows) {
      for (bool channels_last : {false, true}) {
        // Non-temporal stores only where the step would use them: contiguous pixels.
        for (bool streaming :
             channels_last ? std::vector<bool>{false} : std::vector<bool>{false, true}) {
          SCOPED_TRACE(std::string(isa.name) + " " + std::to_string(w.height) + "x" +
                       std::to_string(w.width) + " kernel " + std::to_string(w.kernel) +
                       " stride " + std::to_string(w.stride) + " pad " + std::to_string(w.pad) +
                       (channels_last ? " channels last" : " blocked") +
                       (streaming ? " streaming" : ""));
          Planes t(w, lanes, channels_last);
          const BatchNormPoolPlane& p = t.p;
          const std::size_t x_count =
              static_cast<std::size_t>(w.height * w.width * t.blocks * lanes);
          const std::size_t y_count =
              static_cast<std::size_t>(w.out_height * w.out_width * t.blocks * lanes);
          for (std::size_t i = 0; i < x_count; ++i) t.x.get()[i] = uniform(-2.0f, 2.0f);
          for (std::size_t i = 0; i < y_count; ++i) t.dy.get()[i] = uniform(-1.0f, 1.0f);
          std::vector<float> mean(lanes), scale(lanes), shift(lanes), slope(lanes), offset(lanes),
              shift_stats(lanes);
          for (int j = 0; j < lanes; ++j) {
            mean[j] = uniform(-0.3f, 0.3f);
            scale[j] = uniform(0.5f, 1.5f) * (j % 3 == 1 ? -1.0f : 1.0f);  // both signs
            shift[j] = uniform(-0.5f, 0.5f);
            slope[j] = uniform(-0.1f, 0.1f);
            offset[j] = uniform(-0.1f, 0.1f);
            shift_stats[j] = uniform(-0.5f, 0.5f);
          }
          const float* x = t.x.get() + t.first;
          auto at = [&](std::int64_t h, std::int64_t wi, int j) {
            return x[h * p.x_row + wi * p.x_pixel + j];
          };

          // Statistics: sums of x - shift and of its squares.
          std::vector<double> sum(lanes, 0.0), squares(lanes, 0.0);
          isa.kernels->statistics(p, x, shift_stats.data(), sum.data(), squares.data());
          for (int j = 0; j < lanes; ++j) {
            double s = 0, q = 0;
            for (std::int64_t h = 0; h < w.height; ++h) {
              for (std::int64_t wi = 0; wi < w.width; ++wi) {
                const double d = static_cast<double>(at(h, wi, j)) - shift_stats[j];
                s += d;
                q += d * d;
              }
            }
            EXPECT_NEAR(sum[j], s, 1e-4 * (1 + std::abs(s))) << "lane " << j;
            EXPECT_NEAR(squares[j], q, 1e-4 * q) << "lane " << j;
          }

          // Forward: the pooled maximum after the ReLU, where it was, x there.
          float* y = t.y.get() + t.first;
          float* x_max = t.x_max.get() + t.first;
          unsigned char* index = t.index_at() + t.first;
          isa.kernels->forward(p, x, mean.data(), scale.data(), shift.data(), y, index, x_max,
                               streaming);
          std::vector<int> want_index(y_count, -1);
          for (std::int64_t oh = 0; oh < w.out_height; ++oh) {
            for (std::int64_t ow = 0; ow < w.out_width; ++ow) {
              const std::int64_t out = oh * p.y_row + ow * p.y_pixel;
              for (int j = 0; j < lanes; ++j) {
                float best = -INFINITY;
                float best_x = 0;
                int best_at = 0;
                for (int i = 0; i < w.kernel; ++i) {
                  for (int k = 0; k < w.kernel; ++k) {
                    const std::int64_t h = oh * w.stride - w.pad + i;
                    const std::int64_t wi = ow * w.stride - w.pad + k;
                    if (h < 0 || h >= w.height || wi < 0 || wi >= w.width) continue;
                    const float z = std::fma(scale[j], at(h, wi, j) - mean[j], shift[j]);
                    if (z > best) {
                      best = z;
                      best_x = at(h, wi, j);
                      best_at = i * w.kernel + k;
                    }
                  }
                }
                const bool on = best > 0;
                const int want = best_at | (on ? static_cast<int>(batch_norm_pool_active) : 0);
                want_index[static_cast<std::size_t>(out + j)] = want;
                ASSERT_EQ(index[out + j], want) << "output " << oh << "," << ow << " lane " << j;
                EXPECT_EQ(x_max[out + j], best_x) << "output " << oh << "," << ow << " lane " << j;
                EXPECT_NEAR(y[out + j], on ? best : 0.0f, 1e-6f * (1 + std::abs(best)))
                    << "output " << oh << "," << ow << " lane " << j;
              }
            }
          }

          // Gradient sums over the outputs that passed the ReLU.
          const float* dy = t.dy.get() + t.first;
          std::vector<double> sum_dy(lanes, 0.0), sum_dy_x(lanes, 0.0);
          isa.kernels->gradient_sums(p, dy, index, x_max, mean.data(), sum_dy.data(),
                                     sum_dy_x.data());
          // Backward: dx = scale g + slope (x - mean) + offset, g routed to the maxima.
          float* dx = t.dx.get() + t.first;
          isa.kernels->backward(p, x, dy, index, mean.data(), scale.data(), slope.data(),
                                offset.data(), dx);
          std::vector<double> g(x_count, 0.0);
          for (int j = 0; j < lanes; ++j) {
            double s = 0, u = 0;
            for (std::int64_t oh = 0; oh < w.out_height; ++oh) {
              for (std::int64_t ow = 0; ow < w.out_width; ++ow) {
                const std::int64_t out = oh * p.y_row + ow * p.y_pixel;
                const int where = want_index[static_cast<std::size_t>(out + j)];
                if ((where & static_cast<int>(batch_norm_pool_active)) == 0) continue;
                s += dy[out + j];
                u += static_cast<double>(dy[out + j]) * (x_max[out + j] - mean[j]);
                const int tap = where & (static_cast<int>(batch_norm_pool_active) - 1);
                const std::int64_t h = oh * w.stride - w.pad + tap / w.kernel;
                const std::int64_t wi = ow * w.stride - w.pad + tap % w.kernel;
                g[static_cast<std::size_t>(h * p.x_row + wi * p.x_pixel + j)] +=
                    static_cast<double>(scale[j]) * dy[out + j];
              }
            }
            EXPECT_NEAR(sum_dy[j], s, 1e-4 * (1 + std::abs(s))) << "lane " << j;
            EXPECT_NEAR(sum_dy_x[j], u, 1e-4 * (1 + std::abs(u))) << "lane " << j;
            for (std::int64_t h = 0; h < w.height; ++h) {
              for (std::int64_t wi = 0; wi < w.width; ++wi) {
                const std::int64_t e = h * p.x_row + wi * p.x_pixel + j;
                const double want = g[static_cast<std::size_t>(e)] +
                                    slope[j] * (at(h, wi, j) - mean[j]) + offset[j];
                ASSERT_NEAR(dx[e], want, 1e-5 * (1 + std::abs(want)))
                    << h << "," << wi << " lane " << j;
              }
            }
          }
          // Channels last: the other block of each pixel is untouched.
          if (channels_last) {
            for (std::int64_t e = 0; e < static_cast<std::int64_t>(x_count); e += p.x_pixel) {
              for (int j = 0; j < lanes; ++j) ASSERT_EQ(t.dx.get()[e + j], 0.0f);
            }
          }
        }
      }
    }
  }
}

// A NaN in x comes out of every window that holds it (as PyTorch's ReLU and max pooling keep it).
TEST_F(BatchNormPoolKernelsTest, ANaNPropagates) {
  const std::vector<Isa> available = isas();
  if (available.empty()) GTEST_SKIP() << "no AVX2 on this CPU: the kernels are not used";
  const Window w = windows[0];  // 12x12, 3x3 at stride 2
  for (const Isa& isa : available) {
    SCOPED_TRACE(isa.name);
    const int lanes = isa.kernels->lanes;
    Planes t(w, lanes, false);
    const BatchNormPoolPlane& p = t.p;
    for (std::size_t i = 0; i < static_cast<std::size_t>(w.height * w.width * lanes); ++i) {
      t.x.get()[i] = uniform(-2.0f, 2.0f);
    }
    t.x.get()[3 * p.x_row + 4 * p.x_pixel + 1] = NAN;  // row 3, column 4, lane 1
    const std::vector<float> mean(lanes, 0.0f), scale(lanes, 1.0f), shift(lanes, 0.0f);
    isa.kernels->forward(p, t.x.get(), mean.data(), scale.data(), shift.data(), t.y.get(),
                         t.index_at(), t.x_max.get(), false);
    for (std::int64_t oh = 0; oh < w.out_height; ++oh) {
      for (std::int64_t ow = 0; ow < w.out_width; ++ow) {
        const bool holds = oh * w.stride <= 3 && 3 < oh * w.stride + w.kernel &&
                           ow * w.stride <= 4 && 4 < ow * w.stride + w.kernel;
        const float y = t.y.get()[oh * p.y_row + ow * p.y_pixel + 1];
        EXPECT_EQ(std::isnan(y), holds) << "output " << oh << "," << ow;
        EXPECT_FALSE(std::isnan(t.y.get()[oh * p.y_row + ow * p.y_pixel]));  // lane 0
      }
    }
  }
}

// Inference's max pooling: one window shape per row (kernel, stride and padding per dimension).
struct PoolShape {
  std::int64_t height, width;
  int kernel_h, kernel_w, stride_h, stride_w, pad_top, pad_left;
  std::int64_t out_height, out_width;
};

const PoolShape pool_shapes[] = {
    {12, 12, 3, 3, 2, 2, 0, 0, 6, 6},    // GoogLeNet's stride-2 pools: ceil mode clips the last
    {14, 14, 3, 3, 1, 1, 1, 1, 14, 14},  // its branch pools: padding on every side
    {7, 9, 3, 3, 1, 1, 1, 1, 7, 9},
    {11, 13, 3, 3, 2, 2, 1, 1, 6, 7},
    {8, 8, 2, 2, 2, 2, 0, 0, 4, 4},      // VGG's
    {9, 10, 2, 3, 1, 2, 1, 0, 10, 4},    // rectangular windows and strides
    {3, 400, 3, 3, 1, 1, 1, 1, 3, 400},  // a row in three passes through the column buffer
    {4, 300, 2, max_pool_widest, 1, 3, 0, 0, 3, 79},  // the widest window, in two passes
    {5, 5, 5, 5, 1, 1, 0, 0, 1, 1},                   // one window over the whole plane
};

// The window's maximum, or a NaN when it holds one (PyTorch's rule).
float reference_max(const BatchNormPoolPlane& p, const float* x, std::int64_t oh, std::int64_t ow,
                    int j) {
  float best = -INFINITY;
  for (int i = 0; i < p.kernel_h; ++i) {
    for (int k = 0; k < p.kernel_w; ++k) {
      const std::int64_t h = oh * p.stride_h - p.pad_top + i;
      const std::int64_t w = ow * p.stride_w - p.pad_left + k;
      if (h < 0 || h >= p.height || w < 0 || w >= p.width) continue;
      const float v = x[h * p.x_row + w * p.x_pixel + j];
      if (std::isnan(v)) return v;
      best = std::max(best, v);
    }
  }
  return best;
}

// Runs the kernel on shape s (rows in two calls, as the step splits them between threads) and
// compares every output with the reference: bit for bit, NaN for NaN.
void check_max_pool(const Isa& isa, const PoolShape& s, bool channels_last,
                    const std::function<float(std::size_t)>& value) {
  const int lanes = isa.kernels->lanes;
  const std::int64_t blocks = channels_last ? 2 : 1;
  const std::int64_t first = channels_last ? lanes : 0;  // the plane: the second block
  BatchNormPoolPlane p;
  p.height = s.height;
  p.width = s.width;
  p.out_height = s.out_height;
  p.out_width = s.out_width;
  p.kernel_h = s.kernel_h;
  p.kernel_w = s.kernel_w;
  p.stride_h = s.stride_h;
  p.stride_w = s.stride_w;
  p.pad_top = s.pad_top;
  p.pad_left = s.pad_left;
  p.x_pixel = p.y_pixel = blocks * lanes;
  p.x_row = s.width * p.x_pixel;
  p.y_row = s.out_width * p.y_pixel;
  const auto x_count = static_cast<std::size_t>(s.height * p.x_row);
  const auto y_count = static_cast<std::size_t>(s.out_height * p.y_row);
  Floats x(x_count), y(y_count);
  for (std::size_t i = 0; i < x_count; ++i) x.get()[i] = value(i);
  const float sentinel = 12345.0f;  // outside the plane: never written
  for (std::size_t i = 0; i < y_count; ++i) y.get()[i] = sentinel;
  const std::int64_t split = s.out_height / 2;
  isa.kernels->max_pool(p, x.get() + first, y.get() + first, 0, split);
  isa.kernels->max_pool(p, x.get() + first, y.get() + first, split, s.out_height);
  for (std::int64_t oh = 0; oh < s.out_height; ++oh) {
    for (std::int64_t ow = 0; ow < s.out_width; ++ow) {
      const std::int64_t out = oh * p.y_row + ow * p.y_pixel;
      for (int j = 0; j < lanes; ++j) {
        const float want = reference_max(p, x.get() + first, oh, ow, j);
        const float got = y.get()[first + out + j];
        if (std::isnan(want)) {
          ASSERT_TRUE(std::isnan(got)) << "output " << oh << "," << ow << " lane " << j;
        } else {
          ASSERT_EQ(got, want) << "output " << oh << "," << ow << " lane " << j;
        }
        if (channels_last) {
          ASSERT_EQ(y.get()[out + j], sentinel);
        }
      }
    }
  }
}

std::string shape_name(const Isa& isa, const PoolShape& s, bool channels_last) {
  return std::string(isa.name) + " " + std::to_string(s.height) + "x" + std::to_string(s.width) +
         " kernel " + std::to_string(s.kernel_h) + "x" + std::to_string(s.kernel_w) + " stride " +
         std::to_string(s.stride_h) + "x" + std::to_string(s.stride_w) + " pad " +
         std::to_string(s.pad_top) + "," + std::to_string(s.pad_left) +
         (channels_last ? " channels last" : " blocked");
}

TEST_F(BatchNormPoolKernelsTest, MaxPoolAgainstTheNaiveReference) {
  const std::vector<Isa> available = isas();
  if (available.empty()) GTEST_SKIP() << "no AVX2 on this CPU: the kernels are not used";
  for (const Isa& isa : available) {
    for (const PoolShape& s : pool_shapes) {
      for (bool channels_last : {false, true}) {
        SCOPED_TRACE(shape_name(isa, s, channels_last));
        check_max_pool(isa, s, channels_last, [&](std::size_t) { return uniform(-2.0f, 2.0f); });
        // All negative: the padding must not count as zeros.
        check_max_pool(isa, s, channels_last, [&](std::size_t) { return uniform(-9.0f, -1.0f); });
      }
    }
  }
}

// NaNs win and stay wherever they are in a window (first row, last, middle), infinities are
// maxima like any value, and a finite sum that overflows changes nothing: the fast kernel's
// probe sends such rows through the exact path, which must give the same maxima.
TEST_F(BatchNormPoolKernelsTest, MaxPoolKeepsNaNsAndInfinities) {
  const std::vector<Isa> available = isas();
  if (available.empty()) GTEST_SKIP() << "no AVX2 on this CPU: the kernels are not used";
  const float specials[] = {NAN, INFINITY, -INFINITY, 3e38f, -3e38f};
  for (const Isa& isa : available) {
    for (const PoolShape& s : pool_shapes) {
      for (bool channels_last : {false, true}) {
        SCOPED_TRACE(shape_name(isa, s, channels_last));
        // About one value in 23 special, at random positions.
        check_max_pool(isa, s, channels_last, [&](std::size_t) {
          const std::size_t r = std::uniform_int_distribution<std::size_t>(0, 114)(rng);
          return r < 5 ? specials[r] : uniform(-2.0f, 2.0f);
        });
      }
    }
  }
}

}  // namespace
}  // namespace tfpin::engine::detail
