// tfpin's own 1x1 convolution, the vectorised part (pointwise_kernels.cpp, built once per vector
// width like winograd_kernels.cpp). A 1x1 convolution is a matrix product, pixels x C by C x K.
// At one image each layer's weights stream from memory every run, and oneDNN's 1x1 kernel reads
// 72-80% of the FMA peak on ResNet-50's layers there against 85-95% with the weights in cache;
// this one fetches the next block of weights while it computes. The driver and the weight
// packing are in pointwise.cpp.
//
// Layouts: activations nChw{V}c (V = the vector width: 8 floats with AVX2, 16 with AVX-512),
// channels in whole blocks; weights packed once at compile time into blocks of output channels,
// block k0 at packed + k0 * C holding [C][width] (width = max_block_vectors vectors, or what is
// left of K), as the Winograd U of one position; with taps (kernel_h x kernel_w), block k0 at
// packed + k0 * taps * C holding [tap][C][width].
#pragma once

#include <cstdint>

#include "winograd_kernels.hpp"

namespace tfpin::engine::detail {

struct PointwiseLayer {
  std::int64_t batch = 0;
  std::int64_t in_channels = 0;
  std::int64_t height = 0;  // of the input
  std::int64_t width = 0;
  std::int64_t out_channels = 0;
  std::int64_t out_height = 0;
  std::int64_t out_width = 0;
  std::int64_t stride_h = 1;  // output pixel (y, x) reads input pixel (stride_h y, stride_w x)
  std::int64_t stride_w = 1;
  // A kernel_h x kernel_w convolution (tfpin_direct) is a sum of 1x1 ones, one per tap (i, j),
  // each reading the input from pixel (i, j) on: the input is already padded (height and width
  // are the padded ones).
  std::int64_t kernel_h = 1;
  std::int64_t kernel_w = 1;
};

// Weights per pass of the micro-kernel over a block's input channels (pointwise_kernels.cpp): a
// pass's block of weights stays in L1 while every pixel of the chunk goes past it (Zen 4 has 32
// KiB of L1 data, Zen 5 48).
constexpr std::int64_t pointwise_pass_bytes = 24 << 10;

struct PointwiseKernels {
  int vector_floats = 0;      // the ISA's channel block
  int max_block_vectors = 0;  // output channels per micro-kernel call, in vectors
  // dst for output pixels [first, end) of all images (pixel p is image p / (OH OW), then row
  // major) and output channels [k_begin, k_end), on the packed weights' blocks (multiples of
  // max_block_vectors * vector_floats, or the end), with bias and the ops (WinogradOutputOps:
  // bias, then sum and ReLU in order). Each pass fetches the next pass's weights into L1 if
  // next_to_l1 (the L1 holds two passes), else into L2.
  void (*run)(const PointwiseLayer& layer, const float* src, const float* packed,
              const WinogradOutputOps& ops, std::int64_t first, std::int64_t end,
              std::int64_t k_begin, std::int64_t k_end, bool next_to_l1, float* dst);
};

// Built with -mavx2 -mfma and -mavx512f: call only where the CPU has them.
const PointwiseKernels* pointwise_kernels_avx2();
const PointwiseKernels* pointwise_kernels_avx512();

}  // namespace tfpin::engine::detail
