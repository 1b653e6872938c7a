// Training's batch norm + ReLU + max pooling kernels (engine/src/ops/batch_norm_pool_kernels.hpp)
// against a naive reference, plane by plane, on every ISA this CPU has: windows with padding and
// clipped edges, scales of both signs, blocked and channels-last planes, plain and non-temporal
// stores. (The fused step in whole graphs: test_training.cpp.)
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
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

}  // namespace
}  // namespace tfpin::engine::detail
