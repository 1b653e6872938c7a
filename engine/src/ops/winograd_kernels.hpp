// tfpin's own Winograd F(4x4, 3x3), F(6x6, 3x3) and F(4x4, 5x5) convolutions, the vectorised parts
// (winograd_kernels.cpp, built once per ISA: the channel block of the activations' layout is one
// vector register, 8 floats with AVX2 and 16 with AVX-512). The driver and the weight transform are
// in winograd.cpp.
//
// Layouts, for P = (m + r - 1)^2 positions of an m x m output tile and r x r kernel (36 for
// F(4x4, 3x3), 64 for F(6x6, 3x3) and F(4x4, 5x5)):
// activations nChw{V}c (V = the vector width), weights transformed once into U[P][K][C] grouped
// by output-channel blocks (U[p] + k0 * C holds the block's [C][width], width = max_block_vectors
// vectors or what is left of K), the per-thread scratch
// V[P][tiles][C] and M[P][tiles][K] (channels contiguous: the product of one of the P positions is
// a matrix product of tiles x C by C x K).
#pragma once

#include <cstdint>

namespace tfpin::engine::detail {

struct WinogradLayer {
  std::int64_t batch = 0;
  std::int64_t in_channels = 0;
  std::int64_t height = 0;
  std::int64_t width = 0;
  std::int64_t out_channels = 0;
  std::int64_t out_height = 0;
  std::int64_t out_width = 0;
  std::int64_t pad_top = 0;
  std::int64_t pad_left = 0;
  std::int64_t tiles_high = 0;  // output tiles of m x m per image: ceil(out / m)
  std::int64_t tiles_wide = 0;
};

// What follows the convolution, in order (bias first, as oneDNN adds it).
enum class WinogradPostOp : std::uint8_t { sum, relu };
struct WinogradOutputOps {
  const float* bias = nullptr;
  WinogradPostOp ops[4] = {};
  int count = 0;
};

// Where weight (k, c, r, s) of the convolution is in a buffer of trained weights: the sum of one
// offset per index (every oneDNN blocked layout is separable so). The backward data pass reads
// the forward's weights transposed and flipped through its own index.
struct WinogradWeightIndex {
  const std::int64_t* out_channel = nullptr;  // [K]
  const std::int64_t* in_channel = nullptr;   // [C]
  std::int64_t row[5] = {};                   // kernel rows and columns: 3 or 5 of them
  std::int64_t column[5] = {};
};

// Tiles per micro-kernel call.
constexpr int winograd_tile_rows = 6;

struct WinogradKernels {
  int vector_floats = 0;      // the ISA's channel block
  int max_block_vectors = 0;  // output channels per micro-kernel call, in vectors
  int tile = 0;               // m: F(m x m, r x r)
  int kernel_size = 0;        // r
  // Transforms tiles [first, first + count) (all channels) into V[P][padded][C]; tiles from
  // count to padded (a multiple of winograd_tile_rows) are zero.
  void (*input)(const WinogradLayer& layer, const float* src, std::int64_t first, int count,
                int padded, float* v);
  // M[p][t][k_begin, k_end) = V[p][t][:] U[p][:][k_begin, k_end), for t < padded; k_begin and
  // k_end on the output-channel blocks of U (multiples of max_block_vectors * vector_floats, or
  // the end).
  void (*multiply)(const WinogradLayer& layer, const float* v, const float* u, int padded,
                   std::int64_t k_begin, std::int64_t k_end, float* m);
  // The output tiles [first, first + count), channels [k_begin, k_end), from M, with the ops.
  void (*output)(const WinogradLayer& layer, const float* m, const WinogradOutputOps& ops,
                 std::int64_t first, int count, int padded, std::int64_t k_begin,
                 std::int64_t k_end, float* dst);
  // U (the layout above) for output channels [k_begin, k_end), multiples of vector_floats, from
  // weights that change between runs (training), in float.
  void (*weights)(const WinogradLayer& layer, const float* w, const WinogradWeightIndex& index,
                  std::int64_t k_begin, std::int64_t k_end, float* u);

  // Training's weight gradient, dW = G^T [sum over tiles of (A dy A^T) . (B^T x B)] G, with the
  // input transform above for x:
  // the output gradient's tiles [first, first + count) into D[P][padded][K] (A dy A^T);
  void (*gradient)(const WinogradLayer& layer, const float* dy, std::int64_t first, int count,
                   int padded, float* d);
  // What[p][c][k] (+)= sum over t < padded of V[p][t][c] D[p][t][k], k in [k_begin, k_end)
  // (multiples of vector_floats); What is [P][C rounded up to winograd_tile_rows][K], and V needs
  // winograd_tile_rows floats readable past its end;
  void (*accumulate)(const WinogradLayer& layer, const float* v, const float* d, int padded,
                     std::int64_t k_begin, std::int64_t k_end, bool first, float* w_hat);
  // dW = G^T What G, What the sum of `parts` partial sums part_stride floats apart, for output
  // channels [k_begin, k_end), written through the index.
  void (*weight_gradient)(const WinogradLayer& layer, const float* w_hat, int parts,
                          std::int64_t part_stride, const WinogradWeightIndex& index,
                          std::int64_t k_begin, std::int64_t k_end, float* dw);
};

// F(tile x tile, kernel_size x kernel_size): F(4x4, 3x3), F(6x6, 3x3) or F(4x4, 5x5); null for
// others. Built with -mavx2 -mfma and -mavx512f: call only where the CPU has them.
const WinogradKernels* winograd_kernels_avx2(int tile, int kernel_size);
const WinogradKernels* winograd_kernels_avx512(int tile, int kernel_size);

}  // namespace tfpin::engine::detail
