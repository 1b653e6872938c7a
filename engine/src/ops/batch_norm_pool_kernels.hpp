// Training's batch norm + ReLU + max pooling as one step (batch_norm_pool.cpp), and inference's
// plain max pooling (pooling.cpp), the vectorised parts: batch_norm_pool_kernels.cpp, built once
// per ISA like the Winograd kernels (one channel block of `lanes` floats, contiguous in memory, is
// one vector register: 8 with AVX2, 16 with AVX-512).
//
// Every function works on one plane: one image and one channel block. Its pointers are the
// plane's first element; rows and pixels are `row` and `pixel` floats apart (nChw{8,16}c and NHWC
// alike). The pooled tensors (y, the window index, x at the maximum) share one geometry, the
// index in bytes where the others are in floats.
#pragma once

#include <cstdint>

namespace tfpin::engine::detail {

struct BatchNormPoolPlane {
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t out_height = 0;
  std::int64_t out_width = 0;
  int kernel_h = 1;
  int kernel_w = 1;
  int stride_h = 1;
  int stride_w = 1;
  int pad_top = 0;
  int pad_left = 0;
  std::int64_t x_row = 0;  // input rows and pixels, in floats
  std::int64_t x_pixel = 0;
  std::int64_t y_row = 0;  // pooled rows and pixels (floats, or bytes for the index)
  std::int64_t y_pixel = 0;
};

// The window index of the maximum, kh * kernel_w + kw, with this bit set when it is positive
// (the ReLU passes it): its gradient flows.
constexpr unsigned batch_norm_pool_active = 0x80;

struct BatchNormPoolKernels {
  int lanes = 0;
  // sum[j] += sum over the plane of (x - shift[j]), squares[j] += of (x - shift[j])^2.
  void (*statistics)(const BatchNormPoolPlane& p, const float* x, const float* shift, double* sum,
                     double* squares);
  // z = scale (x - mean) + shift per lane; y = max over the window of max(z, 0) (a NaN wins and
  // stays); index: where z was largest (first of equals), | batch_norm_pool_active when that
  // z > 0; x_max: x there.
  // `streaming`: the index and x_max (read only by the backward) with non-temporal stores, which
  // needs them aligned (16 and 64 bytes with AVX-512, 8 and 32 with AVX2) and their pixels
  // contiguous (y_pixel = lanes).
  void (*forward)(const BatchNormPoolPlane& p, const float* x, const float* mean,
                  const float* scale, const float* shift, float* y, unsigned char* index,
                  float* x_max, bool streaming);
  // Over the pooled outputs whose maximum passed the ReLU: sum_dy[j] += dy, sum_dy_x[j] +=
  // dy (x_max - mean[j]).
  void (*gradient_sums)(const BatchNormPoolPlane& p, const float* dy, const unsigned char* index,
                        const float* x_max, const float* mean, double* sum_dy, double* sum_dy_x);
  // dx = scale[j] g + slope[j] (x - mean[j]) + offset[j], g the output gradient routed back to
  // the maxima that passed the ReLU (zero elsewhere, summed where windows overlap).
  void (*backward)(const BatchNormPoolPlane& p, const float* x, const float* dy,
                   const unsigned char* index, const float* mean, const float* scale,
                   const float* slope, const float* offset, float* dx);
  // Inference's max pooling (no batch norm, no index), output rows [row_begin, row_end): y = the
  // window's maximum, a NaN winning and staying as above. Windows up to max_pool_widest columns.
  void (*max_pool)(const BatchNormPoolPlane& p, const float* x, float* y, std::int64_t row_begin,
                   std::int64_t row_end);
};

constexpr int max_pool_widest = 64;

// Built with -mavx2 -mfma and -mavx512f: call only where the CPU has them.
const BatchNormPoolKernels* batch_norm_pool_kernels_avx2();
const BatchNormPoolKernels* batch_norm_pool_kernels_avx512();

}  // namespace tfpin::engine::detail
