// tfpin's own Winograd convolutions F(2x2, 3x3), F(4x4, 3x3), F(6x6, 3x3), F(7x7, 3x3) and F(4x4,
// 5x5) (Lavin and Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): Y = A^T [(G g
// G^T) . (B^T d B)] A per m x m output tile, (m + r - 1)^2 products per tile and channel pair where
// the direct kernel does r^2 m^2. oneDNN 2.x has F(4x4, 3x3) for AVX-512 only and oneDNN 3.x none;
// these run on AVX2 and AVX-512 from one source (winograd_kernels.cpp) and are timed against
// oneDNN's kernels like theirs against each other.
//
// Per block of tiles, on each thread: the input transform into V[P][tiles][C], P matrix products
// with the transformed weights U[P][C][K] into M[P][tiles][K], the output transform with bias and
// post-ops into the destination. The tile block keeps V and M of one position in the core's cache
// while every output-channel block of U streams past them.
#include "winograd.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <memory>
#include <optional>
#include <stdexcept>

#include "../schedule.hpp"
#include "common.hpp"
#include "winograd_kernels.hpp"

namespace tfpin::engine::detail {

namespace {

// Bytes of V and M (all P positions) per thread that a tile block may take: half the L2 cache of
// a Zen 4 core (1 MiB; Zen 3 has 512 KiB, Intel Xeons since Skylake 1-2 MiB). ResNet-50 at batch
// 32 on Zen 4: 256 and 512 KiB ran its 56x56 and 28x28 layers 5-7% faster than 1 MiB, 2 MiB 8%
// slower.
constexpr std::int64_t tile_block_bytes = 512 << 10;
constexpr std::int64_t max_tile_block = 32 * winograd_tile_rows;
constexpr std::int64_t max_scratch_bytes = 32 << 20;  // per thread
// The weight gradient's partial sums What, all threads' together ([P][C][K] each: 38 MB for a
// 512-channel layer with F(4x4)).
constexpr std::int64_t max_weight_gradient_sums_bytes = std::int64_t{256} << 20;
// The weight gradient reads and writes all of a thread's What once per tile block, so its blocks
// are longer than the cache's: at least this many tiles (ResNet-50's 56x56 and 28x28 layers at
// batch 32 on Zen 4: 15.2 and 13.5 ms with 96 against 17.9 and 15.7 with the cache's 24 and 12),
// and all of a thread's tiles in one block where its What is past its share of the L3 cache
// (14x14 with 256 channels: 16.6 ms against 24.4, What written once instead of read and written
// 9 times).
constexpr std::int64_t min_weight_gradient_tile_block = 16 * winograd_tile_rows;
constexpr std::int64_t weight_gradient_cached_sums_bytes = std::int64_t{4} << 20;

const WinogradKernels* kernels_for(std::int64_t block, int tile, int kernel_size) {
  if (block == 16 && __builtin_cpu_supports("avx512f")) {
    return winograd_kernels_avx512(tile, kernel_size);
  }
  if (block == 8 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return winograd_kernels_avx2(tile, kernel_size);
  }
  return nullptr;
}

const WinogradKernels* kernels_1d_for(std::int64_t block, int tile, int kernel_size,
                                      WinogradShape shape) {
  if (block == 16 && __builtin_cpu_supports("avx512f")) {
    return winograd_1d_kernels_avx512(tile, kernel_size, shape);
  }
  if (block == 8 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return winograd_1d_kernels_avx2(tile, kernel_size, shape);
  }
  return nullptr;
}

const WinogradKernels* kernels_stride2_for(std::int64_t block, int tile, bool transposed) {
  if (block == 16 && __builtin_cpu_supports("avx512f")) {
    return winograd_stride2_kernels_avx512(tile, transposed);
  }
  if (block == 8 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return winograd_stride2_kernels_avx2(tile, transposed);
  }
  return nullptr;
}

// The tile sizes tfpin has for a kernel size: all timed for 3x3 (F(6x6) does 1.8 multiplications
// per output where F(4x4) does 2.25, with more transform work and rounding, and more tiles past
// the image's edge on small images; in inference F(2x2) too, 4 per output but with weights
// 16/36 of F(4x4)'s, for batch 1, where they stream from memory every run; F(7x7) 1.65 per
// output, and no tiles past the edge of images 7 divides, with weights 81/36 of F(4x4)'s);
// F(4x4) for 5x5 (its 8x8 tiles are F(6x6, 3x3)'s).
std::vector<int> tiles_for(int kernel_size, bool training) {
  if (kernel_size != 3) return {4};
  return training ? std::vector<int>{4, 6, 7} : std::vector<int>{4, 6, 2, 7};
}

// The kernel of a convolution tfpin's Winograd can run (no dilation or groups): at stride 1, 3x3 or
// 5x5, or 1x3, 3x1, 1x7 or 7x1 (Inception's factorised layers; one-dimensional tiles); 3x3 at
// stride 2 (ResNet-50's and Inception v3's downsampling layers; polyphase tiles).
struct OwnWinogradKernel {
  int size = 0;  // r; 0: none
  WinogradShape shape = WinogradShape::square;
};
OwnWinogradKernel own_winograd_kernel(const Ir& ir, int node) {
  const Node& n = ir.nodes[static_cast<std::size_t>(node)];
  if (n.kind != OpKind::convolution || n.inputs.size() < 2) return {};
  const auto& a = std::get<Conv2D>(n.attrs);
  const Dims& w = ir.values[static_cast<std::size_t>(n.inputs[1])].dims;
  if (a.groups != 1 || a.dilation[0] != 1 || a.dilation[1] != 1) return {};
  if (a.stride[0] == 2 && a.stride[1] == 2 && w[2] == 3 && w[3] == 3) {
    return {3, WinogradShape::stride2};
  }
  if (a.stride[0] != 1 || a.stride[1] != 1) return {};
  if (w[2] == w[3] && (w[2] == 3 || w[2] == 5)) return {static_cast<int>(w[2])};
  const std::int64_t taps = std::max(w[2], w[3]);
  if (std::min(w[2], w[3]) == 1 && (taps == 3 || taps == 7)) {
    return {static_cast<int>(taps), w[2] == 1 ? WinogradShape::row : WinogradShape::column};
  }
  return {};
}

int positions_of(const WinogradKernels& k) {
  if (k.shape == WinogradShape::stride2 || k.shape == WinogradShape::stride2_transposed) {
    return (2 * k.tile + 1) * (2 * k.tile + 1);
  }
  const int alpha = k.tile + k.kernel_size - 1;
  return k.shape == WinogradShape::square ? alpha * alpha : alpha;
}

struct WinogradConvolution {
  WinogradLayer layer;
  const WinogradKernels* kernels = nullptr;
  WinogradOutputOps ops;
  bool has_bias = false;
  unsigned threads = 1;
  std::int64_t tiles = 0;
  int tile_block = winograd_tile_rows;  // a multiple of winograd_tile_rows
  std::int64_t k_parts = 1;             // threads sharing one tile block's output channels
  std::int64_t scratch_floats_per_thread = 0;
  // Trained weights (training): every run transforms them into U at the start of the scratchpad,
  // reading oneDNN's layout through the index. Inference reads U made once at compile time.
  bool transforms_weights = false;
  std::vector<std::int64_t> out_channel_offsets;
  std::vector<std::int64_t> in_channel_offsets;
  WinogradWeightIndex index;
  std::int64_t u_floats = 0;  // of the scratchpad, when it transforms weights

  [[nodiscard]] std::int64_t tile_blocks() const { return (tiles + tile_block - 1) / tile_block; }
  [[nodiscard]] std::uint64_t scratch_bytes() const {
    return static_cast<std::uint64_t>(u_floats + scratch_floats_per_thread * threads) *
           sizeof(float);
  }
  // Output channels [begin, end) of part `part`, on whole blocks of the micro-kernel.
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> channels(std::int64_t part) const {
    const std::int64_t full = std::int64_t{kernels->max_block_vectors} * kernels->vector_floats;
    const std::int64_t blocks = (layer.out_channels + full - 1) / full;
    const std::int64_t begin = std::min(layer.out_channels, blocks * part / k_parts * full);
    const std::int64_t end = std::min(layer.out_channels, blocks * (part + 1) / k_parts * full);
    return {begin, end};
  }

  // `weights`: U, or the trained weights when it transforms them.
  void run(const float* src, const float* weights, const float* bias, float* dst,
           std::byte* scratch) const {
    const std::int64_t items = tile_blocks() * k_parts;
    auto* scratch_floats = reinterpret_cast<float*>(scratch);
#pragma omp parallel num_threads(threads)
    {
      const auto thread = static_cast<std::int64_t>(omp_get_thread_num());
      const auto team = static_cast<std::int64_t>(omp_get_num_threads());
      const float* u = weights;
      if (transforms_weights) {
        const std::int64_t vectors = layer.out_channels / kernels->vector_floats;
        kernels->weights(layer, weights, index, vectors * thread / team * kernels->vector_floats,
                         vectors * (thread + 1) / team * kernels->vector_floats, scratch_floats);
        u = scratch_floats;
#pragma omp barrier
      }
      float* v = scratch_floats + u_floats + thread * scratch_floats_per_thread;
      float* m = v + std::int64_t{positions_of(*kernels)} *
                         (tile_block * layer.in_channels + winograd_position_pad);
      WinogradOutputOps with_bias = ops;
      with_bias.bias = has_bias ? bias : nullptr;
      // Contiguous items per thread: a thread's k parts of one tile block share its V.
      const std::int64_t first_item = items * thread / team;
      const std::int64_t end_item = items * (thread + 1) / team;
      std::int64_t transformed_block = -1;
      for (std::int64_t item = first_item; item < end_item; ++item) {
        const std::int64_t block = item / k_parts;
        const std::int64_t first = block * tile_block;
        const int count = static_cast<int>(std::min<std::int64_t>(tile_block, tiles - first));
        const int padded =
            (count + winograd_tile_rows - 1) / winograd_tile_rows * winograd_tile_rows;
        if (block != transformed_block) {
          kernels->input(layer, src, first, count, padded, v);
          transformed_block = block;
        }
        const auto [k_begin, k_end] = channels(item % k_parts);
        if (k_begin == k_end) continue;
        kernels->multiply(layer, v, u, padded, count, k_begin, k_end, m);
        kernels->output(layer, m, with_bias, first, count, padded, k_begin, k_end, dst);
      }
    }
  }
};

// Training's weight gradient of a convolution (every shape of tfpin's Winograd): per block of
// output tiles, the input transform of x into V, A dy A^T into D, and What += V^T D per position;
// the partial sums of What (one per group of threads) are then added and transformed back,
// dW = G^T What G (one-dimensional tiles: A dy, G^T What).
struct WinogradWeightGradient {
  WinogradLayer layer;
  const WinogradKernels* kernels = nullptr;
  bool has_bias = false;
  unsigned threads = 1;
  std::int64_t tiles = 0;
  int tile_block = winograd_tile_rows;
  std::int64_t groups = 1;        // of threads, each with its own What over its tile blocks
  std::int64_t k_parts = 1;       // threads of a group, splitting the output channels
  std::int64_t w_hat_floats = 0;  // per group
  std::int64_t scratch_floats_per_thread = 0;
  std::vector<std::int64_t> out_channel_offsets;
  std::vector<std::int64_t> in_channel_offsets;
  WinogradWeightIndex index;

  [[nodiscard]] std::int64_t tile_blocks() const { return (tiles + tile_block - 1) / tile_block; }
  [[nodiscard]] std::uint64_t scratch_bytes() const {
    return static_cast<std::uint64_t>(w_hat_floats * groups + scratch_floats_per_thread * threads) *
           sizeof(float);
  }

  void run(const float* x, const float* dy, float* dw, float* db, std::byte* scratch) const {
    auto* w_hat = reinterpret_cast<float*>(scratch);
    const std::int64_t vectors = layer.out_channels / kernels->vector_floats;
    const std::int64_t positions = positions_of(*kernels);
#pragma omp parallel num_threads(threads)
    {
      const auto thread = static_cast<std::int64_t>(omp_get_thread_num());
      const auto team = static_cast<std::int64_t>(omp_get_num_threads());
      // A smaller team than planned (OMP_THREAD_LIMIT, nesting) takes fewer groups and parts.
      const std::int64_t used_groups = std::min(groups, team);
      const std::int64_t used_parts = std::clamp<std::int64_t>(team / used_groups, 1, k_parts);
      const std::int64_t group = thread / used_parts;
      if (group < used_groups) {
        const std::int64_t part = thread % used_parts;
        const std::int64_t k_begin = vectors * part / used_parts * kernels->vector_floats;
        const std::int64_t k_end = vectors * (part + 1) / used_parts * kernels->vector_floats;
        // V, then D: the accumulation's reads past V's end (rows past C) land in D.
        float* v = w_hat + w_hat_floats * groups + thread * scratch_floats_per_thread;
        float* d = v + positions * (tile_block * layer.in_channels + winograd_position_pad);
        float* mine = w_hat + group * w_hat_floats;
        const std::int64_t blocks = tile_blocks();
        bool first = true;
        for (std::int64_t block = blocks * group / used_groups;
             block < blocks * (group + 1) / used_groups; ++block) {
          const std::int64_t first_tile = block * tile_block;
          const int count =
              static_cast<int>(std::min<std::int64_t>(tile_block, tiles - first_tile));
          const int padded =
              (count + winograd_tile_rows - 1) / winograd_tile_rows * winograd_tile_rows;
          kernels->input(layer, x, first_tile, count, padded, v);
          kernels->gradient(layer, dy, first_tile, count, padded, d);
          if (k_begin < k_end) {
            kernels->accumulate(layer, v, d, padded, k_begin, k_end, first, mine);
          }
          first = false;
        }
      }
#pragma omp barrier
      const std::int64_t k_begin = vectors * thread / team * kernels->vector_floats;
      const std::int64_t k_end = vectors * (thread + 1) / team * kernels->vector_floats;
      kernels->weight_gradient(layer, w_hat, static_cast<int>(used_groups), w_hat_floats, index,
                               k_begin, k_end, dw);
      if (has_bias) bias_gradient(dy, k_begin, k_end, db);
    }
  }

  // db[k] = sum of dy over images and pixels, for k in whole channel blocks.
  void bias_gradient(const float* dy, std::int64_t k_begin, std::int64_t k_end, float* db) const {
    const std::int64_t block = kernels->vector_floats;
    const std::int64_t pixels = layer.out_height * layer.out_width;
    const std::int64_t blocks = layer.out_channels / block;
    for (std::int64_t k0 = k_begin; k0 < k_end; k0 += block) {
      std::array<float, 16> sum{};
      for (std::int64_t n = 0; n < layer.batch; ++n) {
        const float* plane = dy + (n * blocks + k0 / block) * pixels * block;
        for (std::int64_t i = 0; i < pixels; ++i) {
          for (std::int64_t j = 0; j < block; ++j)
            sum[static_cast<std::size_t>(j)] += plane[i * block + j];
        }
      }
      for (std::int64_t j = 0; j < block; ++j) db[k0 + j] = sum[static_cast<std::size_t>(j)];
    }
  }
};

// G's rows (up to 9: stride 2's F(4x4)), each up to 5 taps.
using WeightRow = std::array<double, 5>;
using WeightMatrix = std::array<WeightRow, 9>;

// The zeros after each position's weights in U (winograd_position_pad: the kernels' loads may
// run past a position's last row); U is written in place, uninitialised.
void zero_position_pads(float* u, std::int64_t positions, std::int64_t per_position) {
  for (std::int64_t p = 0; p < positions; ++p) {
    std::fill_n(u + p * (per_position + winograd_position_pad) + per_position,
                winograd_position_pad, 0.0F);
  }
}

// G g G^T for every output and input channel pair, for G of alpha rows and r taps (r x r kernels),
// in U's layout (winograd_kernels.hpp). In double: the transforms' fractions are not exact in
// float. alpha and r are template arguments so that the small products unroll: VGG16's 3x3
// layers transform 1.6 million kernels per tile size at every compile.
template <int alpha, int r>
void transform_weights(const std::vector<float>& oihw, std::int64_t k_total, std::int64_t c_total,
                       std::int64_t block_width, const WeightMatrix& g, float* u) {
  constexpr std::int64_t positions = alpha * alpha;
  zero_position_pads(u, positions, k_total * c_total);
  const std::int64_t position_stride = c_total * k_total + winograd_position_pad;
  // Output channels innermost: each (position, input channel) row of a block is written in order.
  for (std::int64_t k0 = 0; k0 < k_total; k0 += block_width) {
    const std::int64_t width = std::min(block_width, k_total - k0);
    for (std::int64_t c = 0; c < c_total; ++c) {
      float* row = u + k0 * c_total + c * width;
      for (std::int64_t k = 0; k < width; ++k) {
        const float* w = &oihw[static_cast<std::size_t>(((k0 + k) * c_total + c) * r * r)];
        std::array<std::array<double, r>, alpha> gw{};  // G g
        for (int i = 0; i < alpha; ++i) {
          for (int j = 0; j < r; ++j) {
            for (int t = 0; t < r; ++t) gw[i][j] += g[i][t] * w[t * r + j];
          }
        }
        for (int i = 0; i < alpha; ++i) {
          for (int j = 0; j < alpha; ++j) {
            double value = 0;
            for (int t = 0; t < r; ++t) value += gw[i][t] * g[j][t];
            row[(i * alpha + j) * position_stride + k] = static_cast<float>(value);
          }
        }
      }
    }
  }
}

void transform_weights(const std::vector<float>& oihw, std::int64_t k_total, std::int64_t c_total,
                       std::int64_t block_width, const WeightMatrix& g, int alpha, int r, float* u) {
  // Every G the kernels have: F(2x2), F(4x4), F(6x6), F(7x7) of 3x3, F(4x4, 5x5), and stride 2's
  // F(2x2) and F(4x4) of 3x3 (5 and 9 rows).
  using Transform = void (*)(const std::vector<float>&, std::int64_t, std::int64_t, std::int64_t,
                             const WeightMatrix&, float*);
  struct Shape {
    int alpha;
    int r;
    Transform transform;
  };
  static constexpr Shape shapes[] = {
      {4, 3, &transform_weights<4, 3>}, {5, 3, &transform_weights<5, 3>},
      {6, 3, &transform_weights<6, 3>}, {8, 3, &transform_weights<8, 3>},
      {9, 3, &transform_weights<9, 3>}, {8, 5, &transform_weights<8, 5>},
  };
  for (const Shape& shape : shapes) {
    if (shape.alpha == alpha && shape.r == r) {
      shape.transform(oihw, k_total, c_total, block_width, g, u);
      return;
    }
  }
  throw std::logic_error(
      fmt::format("no Winograd weight transform of {} rows and {} taps", alpha, r));
}

// The square kernels' G: F(tile x tile, kernel_size x kernel_size).
WeightMatrix square_weight_matrix(int tile, int kernel_size) {
  using Row = WeightRow;
  // F(4x4, 3x3): points 0, 1, -1, 2, -2, infinity.
  static constexpr std::array<Row, 6> g6 = {{{1.0 / 4, 0, 0},
                                             {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                             {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                             {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                             {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                             {0, 0, 1}}};
  // F(6x6, 3x3) and F(4x4, 5x5): points 0, 1, -1, 2, -2, 1/2, -1/2 (row i: s_i (1, x_i, x_i^2,
  // ...)), and infinity (the last tap, set below).
  static constexpr std::array<Row, 7> g8 = {
      {{1, 0, 0, 0, 0},
       {-2.0 / 9, -2.0 / 9, -2.0 / 9, -2.0 / 9, -2.0 / 9},
       {-2.0 / 9, 2.0 / 9, -2.0 / 9, 2.0 / 9, -2.0 / 9},
       {1.0 / 90, 2.0 / 90, 4.0 / 90, 8.0 / 90, 16.0 / 90},
       {1.0 / 90, -2.0 / 90, 4.0 / 90, -8.0 / 90, 16.0 / 90},
       {32.0 / 45, 16.0 / 45, 8.0 / 45, 4.0 / 45, 2.0 / 45},
       {32.0 / 45, -16.0 / 45, 8.0 / 45, -4.0 / 45, 2.0 / 45}}};
  const int r = kernel_size;
  const int alpha = tile + r - 1;
  WeightMatrix g{};
  if (alpha == 4) {
    // F(2x2, 3x3): the Toom-Cook matrices of its kernels (points 0, 1, -1, infinity).
    static constexpr Winograd1D<2, 3> f23 = make_winograd_1d<2, 3>();
    for (std::size_t i = 0; i < 4; ++i) std::copy(f23.g[i], f23.g[i] + 3, g[i].begin());
  } else if (alpha == 6) {
    std::copy(g6.begin(), g6.end(), g.begin());
  } else if (alpha == 9) {
    // F(7x7, 3x3): the Toom-Cook matrices of its kernels (Transforms<7, 3>).
    static constexpr Winograd1D<7, 3> f73 = make_winograd_1d<7, 3>(winograd_points_7x3);
    for (std::size_t i = 0; i < 9; ++i) std::copy(f73.g[i], f73.g[i] + 3, g[i].begin());
  } else {
    std::copy(g8.begin(), g8.end(), g.begin());
    g[7][static_cast<std::size_t>(r - 1)] = 1;
  }
  return g;
}

// Stride 2's G (WinogradStride2: 2 tile + 1 rows, 3 taps).
template <int tile>
WeightMatrix stride2_weight_matrix() {
  static constexpr WinogradStride2<tile> matrices = make_winograd_stride2<tile>();
  WeightMatrix g{};
  for (std::size_t i = 0; i < WinogradStride2<tile>::points; ++i)
    std::copy(matrices.g[i], matrices.g[i] + 3, g[i].begin());
  return g;
}

// G g for a one-dimensional F(tile, r) (1 x r or r x 1 kernels: r taps in a row of oihw either
// way), in U's layout.
template <int tile, int r>
void transform_weights_1d(const std::vector<float>& oihw, std::int64_t k_total,
                          std::int64_t c_total, std::int64_t block_width, float* u) {
  static constexpr Winograd1D<tile, r> matrices = make_winograd_1d<tile, r>();
  constexpr int points = tile + r - 1;
  zero_position_pads(u, points, k_total * c_total);
  for (std::int64_t k0 = 0; k0 < k_total; k0 += block_width) {
    const std::int64_t width = std::min(block_width, k_total - k0);
    for (std::int64_t c = 0; c < c_total; ++c) {
      for (std::int64_t k = k0; k < k0 + width; ++k) {
        const float* w = &oihw[static_cast<std::size_t>((k * c_total + c) * r)];
        for (int p = 0; p < points; ++p) {
          double value = 0;
          for (int j = 0; j < r; ++j) value += matrices.g[p][j] * w[j];
          u[p * (c_total * k_total + winograd_position_pad) + k0 * c_total + c * width +
            (k - k0)] = static_cast<float>(value);
        }
      }
    }
  }
}

// U of inference's constant weights, once at compile time (stride 2's data gradient, a training
// step, transforms its weights every run instead).
void transform_weights(const std::vector<float>& oihw, std::int64_t k_total, std::int64_t c_total,
                       std::int64_t block_width, const WinogradKernels& kernels, float* u) {
  if (kernels.shape == WinogradShape::stride2) {
    transform_weights(oihw, k_total, c_total, block_width,
                      kernels.tile == 4 ? stride2_weight_matrix<4>() : stride2_weight_matrix<2>(),
                      2 * kernels.tile + 1, 3, u);
  } else if (kernels.shape == WinogradShape::square) {
    transform_weights(oihw, k_total, c_total, block_width,
                      square_weight_matrix(kernels.tile, kernels.kernel_size),
                      kernels.tile + kernels.kernel_size - 1, kernels.kernel_size, u);
  } else if (kernels.kernel_size == 7) {
    transform_weights_1d<4, 7>(oihw, k_total, c_total, block_width, u);
  } else {
    transform_weights_1d<4, 3>(oihw, k_total, c_total, block_width, u);
  }
}

// Per-index offsets of a 4-d blocked layout (O, I, H, W): any blocked layout is a sum of one
// term per dimension, its outer index times its stride plus its place in the inner blocks.
std::optional<std::array<std::vector<std::int64_t>, 4>> separable_offsets(const md_t& md) {
  const onednn::Blocking b = onednn::blocking_of(md);
  if (!b.blocked || b.dims.size() != 4) return std::nullopt;
  std::array<std::vector<std::int64_t>, 4> offsets;
  for (int d = 0; d < 4; ++d) {
    std::int64_t block = 1;  // all inner blocks of d
    for (const auto& [dim, size] : b.inner) block *= dim == d ? size : 1;
    auto& table = offsets[static_cast<std::size_t>(d)];
    table.resize(static_cast<std::size_t>(b.dims[static_cast<std::size_t>(d)]));
    for (std::int64_t i = 0; i < b.dims[static_cast<std::size_t>(d)]; ++i) {
      std::int64_t offset = i / block * b.strides[static_cast<std::size_t>(d)];
      std::int64_t rest = i % block;
      std::int64_t stride = 1;  // of the innermost block, growing outwards
      for (auto it = b.inner.rbegin(); it != b.inner.rend(); ++it) {
        if (it->first == d) {
          offset += rest % it->second * stride;
          rest /= it->second;
        }
        stride *= it->second;
      }
      table[static_cast<std::size_t>(i)] = offset;
    }
  }
  return offsets;
}

// Where the alternative's weights come from: the constant weights (inference; transformed once
// here), or trained weights, the step's own argument 1, read through per-index offsets for the
// convolution's (K, C, r, s).
struct WeightSource {
  const std::vector<float>* oihw = nullptr;
  std::array<std::vector<std::int64_t>, 4> trained_offsets;
};

// Tiles per block: V and M (or D) within tile_block_bytes, and at least one block per thread
// unless `per_thread` is false (then at most all tiles).
std::int64_t choose_tile_block(const WinogradLayer& layer, std::int64_t positions, unsigned threads,
                               bool per_thread_share = true) {
  const std::int64_t tiles = layer.batch * layer.tiles_high * layer.tiles_wide;
  const std::int64_t rows = winograd_tile_rows;
  const std::int64_t bytes_per_tile = positions * 4 * (layer.in_channels + layer.out_channels);
  // Past the cache's share, big layers (512 channels in and out) still want more tiles per block:
  // all of U streams from memory once per block, V and M twice, so blocks of
  // C K / (4 (C + K)) tiles keep U's traffic below half of theirs (ResNet-50's last 3x3 layers
  // ran 1.5x faster so).
  const std::int64_t fitting = tile_block_bytes / bytes_per_tile;
  const std::int64_t amortising =
      layer.in_channels * layer.out_channels / (4 * (layer.in_channels + layer.out_channels));
  std::int64_t tile_block =
      std::clamp(std::max(fitting, amortising) / rows * rows, rows, max_tile_block);
  // Bounded scratch: a 2048-channel layer would otherwise take 200 MB per thread.
  tile_block =
      std::min(tile_block, std::max(rows, max_scratch_bytes / bytes_per_tile / rows * rows));
  const std::int64_t per_thread = per_thread_share ? (tiles + threads - 1) / threads : tiles;
  tile_block = std::min(tile_block, (per_thread + rows - 1) / rows * rows);
  return tile_block;
}

// The common part of a kernel's plan: its layer's tiles, threads and tile block.
template <typename Kernel>
void plan(Kernel& k, const Lowering& l, const WinogradLayer& shape, const WinogradKernels* kernels,
          bool has_bias) {
  const int tile = kernels->tile;
  k.layer = shape;
  const bool rows_tiled = kernels->shape != WinogradShape::row;  // tiles of m rows
  const bool columns_tiled = kernels->shape != WinogradShape::column;
  k.layer.tiles_high = rows_tiled ? (shape.out_height + tile - 1) / tile : shape.out_height;
  k.layer.tiles_wide = columns_tiled ? (shape.out_width + tile - 1) / tile : shape.out_width;
  if (kernels->shape == WinogradShape::stride2_transposed) {
    // 2m x 2m tiles from the forward's padding on (the even samples of the padded input first).
    k.layer.tiles_high = (shape.out_height + shape.pad_top + 2 * tile - 1) / (2 * tile);
    k.layer.tiles_wide = (shape.out_width + shape.pad_left + 2 * tile - 1) / (2 * tile);
  }
  k.kernels = kernels;
  k.has_bias = has_bias;
  k.threads = std::max(1u, l.step_threads);
  k.tiles = k.layer.batch * k.layer.tiles_high * k.layer.tiles_wide;
  k.tile_block = static_cast<int>(choose_tile_block(k.layer, positions_of(*kernels), k.threads));
}

// The tile block (at most the cache's) and the output-channel parts per tile block that give the
// busiest thread the least work, with items handed out as run() does (equal runs of consecutive
// items). The micro-kernel works on whole rows of winograd_tile_rows tiles and output-channel
// blocks, so where tiles are few (batch 1: 16 tiles of a 14x14 image, 49 of a 28x28 one) blocks
// of whole rows leave one thread idle for up to a third of the layer; parts of the output
// channels share the rows out instead, each thread transforming the block's input.
//
// A thread's work, in multiply-adds per position and input channel: per item, one per tile and
// output vector of its part, and a quarter of a row of tiles' worth per output vector for
// streaming its part of U past the cache; per tile block it transforms, 3 operations per input
// vector of its tiles. Among plans within 1% of the best: the largest block, then the fewest
// parts. (With many tiles, batch 32, that is the cache's block in one part.)
void balance_work(WinogradConvolution& conv, std::int64_t cached_tile_block) {
  const std::int64_t rows = winograd_tile_rows;
  const std::int64_t row_groups = (conv.tiles + rows - 1) / rows;
  const std::int64_t vectors = conv.layer.out_channels / conv.kernels->vector_floats;
  const std::int64_t block_vectors = conv.kernels->max_block_vectors;
  const std::int64_t channel_blocks = (vectors + block_vectors - 1) / block_vectors;
  const auto threads = static_cast<std::int64_t>(conv.threads);
  const double transform = 3.0 / static_cast<double>(conv.kernels->vector_floats);
  const double u_stream = 0.25 * rows;
  auto busiest = [&](std::int64_t block_groups, std::int64_t parts) {
    const std::int64_t blocks = (row_groups + block_groups - 1) / block_groups;
    const std::int64_t items = blocks * parts;
    double worst = 0;
    for (std::int64_t t = 0; t < threads; ++t) {
      double work = 0;
      std::int64_t transformed = -1;
      for (std::int64_t item = items * t / threads; item < items * (t + 1) / threads; ++item) {
        const std::int64_t block = item / parts;
        const std::int64_t part = item % parts;
        // The block's tiles (the micro-kernel's last call takes only the rows left).
        const auto tiles = static_cast<double>(
            std::min(rows * block_groups, conv.tiles - block * block_groups * rows));
        // The part's output vectors, on whole channel blocks (WinogradConvolution::channels).
        const auto out = static_cast<double>(
            std::min(vectors, channel_blocks * (part + 1) / parts * block_vectors) -
            std::min(vectors, channel_blocks * part / parts * block_vectors));
        work += (tiles + u_stream) * out;
        if (block != transformed) work += tiles * transform;
        transformed = block;
      }
      worst = std::max(worst, work);
    }
    return worst;
  };
  const std::int64_t max_groups = std::min(cached_tile_block / rows, row_groups);
  double best = 0;
  std::int64_t best_groups = max_groups;
  std::int64_t best_parts = 1;
  for (std::int64_t groups = max_groups; groups >= 1; --groups) {
    for (std::int64_t parts = 1; parts <= std::min(channel_blocks, threads); ++parts) {
      const double work = busiest(groups, parts);
      if (best == 0 || work < 0.99 * best) {
        best = work;
        best_groups = groups;
        best_parts = parts;
      }
    }
  }
  conv.tile_block = static_cast<int>(best_groups * rows);
  conv.k_parts = best_parts;
}

// The kernels' name in the compile report and for force_kernel: tfpin_wino_{tile}x{r} (square),
// _1x{tile}_1x{r} (row), _{tile}x1_{r}x1 (column), _s2_{tile}x3 (stride 2), _s2_{tile}x3_transposed
// (its data gradient: forcing a stride-2 tile size forces both), and the ISA.
std::string impl_name(const WinogradKernels& kernels) {
  const char* isa = kernels.vector_floats == 16 ? "avx512" : "avx2";
  const int tile = kernels.tile;
  const int r = kernels.kernel_size;
  switch (kernels.shape) {
    case WinogradShape::square:
      break;
    case WinogradShape::row:
      return fmt::format("tfpin_wino_1x{}_1x{}:{}", tile, r, isa);
    case WinogradShape::column:
      return fmt::format("tfpin_wino_{}x1_{}x1:{}", tile, r, isa);
    case WinogradShape::stride2:
      return fmt::format("tfpin_wino_s2_{}x{}:{}", tile, r, isa);
    case WinogradShape::stride2_transposed:
      return fmt::format("tfpin_wino_s2_{}x{}_transposed:{}", tile, r, isa);
  }
  return fmt::format("tfpin_wino_{}x{}:{}", tile, r, isa);
}

// One kernel as an alternative of the step (arguments: src, weights[, bias], dst): F(tile x tile,
// 3x3) with these kernels.
void add_alternative(Lowering& l, const std::string& name, Step& step, const WinogradLayer& shape,
                     const WinogradKernels* kernels, const WinogradOutputOps& ops, bool has_bias,
                     const WeightSource& source) {
  const int tile = kernels->tile;
  const std::int64_t positions = positions_of(*kernels);
  auto conv = std::make_shared<WinogradConvolution>();
  plan(*conv, l, shape, kernels, has_bias);
  const WinogradLayer& layer = conv->layer;
  conv->ops = ops;
  balance_work(*conv, choose_tile_block(conv->layer, positions, conv->threads, false));
  const std::int64_t tile_block = conv->tile_block;
  conv->scratch_floats_per_thread =
      (positions *
           (tile_block * (layer.in_channels + layer.out_channels) + 2 * winograd_position_pad) +
       15) /
      16 * 16;

  const std::int64_t block_width =
      std::int64_t{kernels->max_block_vectors} * kernels->vector_floats;
  const std::int64_t u_floats =
      positions * (layer.out_channels * layer.in_channels + winograd_position_pad);
  Alternative alt;
  if (source.oihw == nullptr) {
    conv->transforms_weights = true;
    conv->out_channel_offsets = source.trained_offsets[0];
    conv->in_channel_offsets = source.trained_offsets[1];
    conv->index.out_channel = conv->out_channel_offsets.data();
    conv->index.in_channel = conv->in_channel_offsets.data();
    // (1 x r and r x 1 kernels: one row or one column.)
    std::copy(source.trained_offsets[2].begin(), source.trained_offsets[2].end(), conv->index.row);
    std::copy(source.trained_offsets[3].begin(), source.trained_offsets[3].end(),
              conv->index.column);
    conv->u_floats = (u_floats + 15) / 16 * 16;
    alt.args = step.args;
  } else {
    const md_t u_md({u_floats}, dnnl::memory::data_type::f32, tag::x);
    const auto [u_buffer, u] =
        l.new_constant(u_md, fmt::format("{}:winograd_{}_weights", name, tile));
    transform_weights(*source.oihw, layer.out_channels, layer.in_channels, block_width, *kernels,
                      u);
    alt.args = step.args;
    alt.args[1] = Arg::in(DNNL_ARG_WEIGHTS, u_buffer, u_md);
  }
  alt.scratchpad_bytes = conv->scratch_bytes();
  alt.impl = impl_name(*kernels);
  alt.kernel = [conv](const KernelCall& call) {
    const auto& d = call.data;
    conv->run(static_cast<const float*>(d[0]), static_cast<const float*>(d[1]),
              conv->has_bias ? static_cast<const float*>(d[2]) : nullptr,
              static_cast<float*>(d.back()), call.scratch);
  };
  step.alternatives.push_back(std::move(alt));
}

// The channel block (8 or 16) of the kernels that can read `in` and write `out` (dims, layouts):
// both in the same channel-blocked layout, nChw8c or nChw16c, with the CPU's vectors for it and
// channels in whole blocks (oneDNN picks nChw8c for some of training's steps on AVX-512 too). 0 if
// none.
std::int64_t fitting_block(const Dims& in, const md_t& in_md, const Dims& out, const md_t& out_md) {
  for (std::int64_t block : {16, 8}) {
    auto blocked = [block](const Dims& d) {
      return md_t(to_dnnl(d), dnnl::memory::data_type::f32,
                  block == 16 ? tag::nChw16c : tag::nChw8c);
    };
    if (kernels_for(block, 4, 3) != nullptr && in[1] % block == 0 && out[1] % block == 0 &&
        in_md == blocked(in) && out_md == blocked(out)) {
      return block;
    }
  }
  return 0;
}

WinogradLayer layer_of(const Dims& in, const Dims& out, std::int64_t pad_top,
                       std::int64_t pad_left) {
  WinogradLayer layer;
  layer.batch = in[0];
  layer.in_channels = in[1];
  layer.height = in[2];
  layer.width = in[3];
  layer.out_channels = out[1];
  layer.out_height = out[2];
  layer.out_width = out[3];
  layer.pad_top = pad_top;
  layer.pad_left = pad_left;
  return layer;
}

// The kernels timed for a convolution of this kernel size and shape, channel block `block`: every
// tile size of a square kernel (tiles_for), F(4) for the one-dimensional ones, and at stride 2
// F(4x4) (81 products per 16 outputs) and F(2x2) (25 per 4, with 3.1x smaller weights than
// F(4x4)'s 9x, which batch 1 streams, and fewer tiles past the edge of 14x14 and 7x7 images).
std::vector<const WinogradKernels*> candidates(std::int64_t block, int kernel_size,
                                               WinogradShape shape, bool training) {
  std::vector<const WinogradKernels*> found;
  switch (shape) {
    case WinogradShape::square:
      for (int tile : tiles_for(kernel_size, training))
        found.push_back(kernels_for(block, tile, kernel_size));
      break;
    case WinogradShape::row:
    case WinogradShape::column:
      found.push_back(kernels_1d_for(block, 4, kernel_size, shape));
      break;
    case WinogradShape::stride2:
    case WinogradShape::stride2_transposed:
      for (int tile : {4, 2}) {
        found.push_back(
            kernels_stride2_for(block, tile, shape == WinogradShape::stride2_transposed));
      }
      break;
  }
  std::erase(found, nullptr);
  return found;
}

// Every tile size for the kernel size, timed.
void add_tiles(Lowering& l, const std::string& name, Step& step, std::int64_t block,
               int kernel_size, const Dims& in, const Dims& out, std::int64_t pad_top,
               std::int64_t pad_left, const WinogradOutputOps& ops, bool has_bias,
               const WeightSource& source, WinogradShape shape = WinogradShape::square) {
  const WinogradLayer layer = layer_of(in, out, pad_top, pad_left);
  for (const WinogradKernels* kernels : candidates(block, kernel_size, shape, l.training())) {
    add_alternative(l, name, step, layer, kernels, ops, has_bias, source);
  }
}

// The weight gradient step's alternative (arguments: x, dy, dW[, db]) with these kernels.
void add_weight_gradient_alternative(Lowering& l, Step& step, const WinogradLayer& shape,
                                     const WinogradKernels* kernels, bool has_bias,
                                     std::array<std::vector<std::int64_t>, 4> offsets) {
  const std::int64_t positions = positions_of(*kernels);
  auto grad = std::make_shared<WinogradWeightGradient>();
  plan(*grad, l, shape, kernels, has_bias);
  const WinogradLayer& layer = grad->layer;
  const std::int64_t c_rows =
      (layer.in_channels + winograd_tile_rows - 1) / winograd_tile_rows * winograd_tile_rows;
  grad->w_hat_floats =
      (positions * (c_rows * layer.out_channels + winograd_position_pad) + 15) / 16 * 16;
  {
    const std::int64_t rows = winograd_tile_rows;
    const std::int64_t bytes_per_tile =
        positions * std::int64_t{sizeof(float)} * (layer.in_channels + layer.out_channels);
    const std::int64_t share = (grad->tiles + grad->threads - 1) / grad->threads;
    std::int64_t block = std::max<std::int64_t>(grad->tile_block, min_weight_gradient_tile_block);
    if (grad->w_hat_floats * std::int64_t{sizeof(float)} > weight_gradient_cached_sums_bytes) {
      block = share;
    }
    block = std::min(block, std::max(rows, max_scratch_bytes / bytes_per_tile));
    block = std::min(block, share);
    grad->tile_block = static_cast<int>(std::max(rows, (block + rows - 1) / rows * rows));
  }
  // One What per thread while they fit the budget (then each thread has its own tiles); past it,
  // one What shared by threads splitting the output channels.
  const std::int64_t threads = grad->threads;
  const std::int64_t affordable = std::max<std::int64_t>(
      1, max_weight_gradient_sums_bytes / (grad->w_hat_floats * std::int64_t{sizeof(float)}));
  grad->groups = std::clamp<std::int64_t>(std::min(affordable, grad->tile_blocks()), 1, threads);
  grad->k_parts = threads / grad->groups;
  grad->scratch_floats_per_thread =
      (positions * (grad->tile_block * (layer.in_channels + layer.out_channels) +
                    2 * winograd_position_pad) +
       15) /
      16 * 16;
  grad->out_channel_offsets = std::move(offsets[0]);
  grad->in_channel_offsets = std::move(offsets[1]);
  grad->index.out_channel = grad->out_channel_offsets.data();
  grad->index.in_channel = grad->in_channel_offsets.data();
  // (1 x r and r x 1 kernels: one row or one column.)
  std::copy(offsets[2].begin(), offsets[2].end(), grad->index.row);
  std::copy(offsets[3].begin(), offsets[3].end(), grad->index.column);
  Alternative alt;
  alt.args = step.args;
  alt.scratchpad_bytes = grad->scratch_bytes();
  alt.impl = impl_name(*kernels);
  alt.kernel = [grad](const KernelCall& call) {
    const auto& d = call.data;
    grad->run(static_cast<const float*>(d[0]), static_cast<const float*>(d[1]),
              static_cast<float*>(d[2]), grad->has_bias ? static_cast<float*>(d[3]) : nullptr,
              call.scratch);
  };
  step.alternatives.push_back(std::move(alt));
}

}  // namespace

// What the entry points below share: the convolution `node`, if tfpin's Winograd applies to it.
struct WinogradNode {
  const Node& node;
  int kernel_size;  // r: 3 or 5 square, 3 or 7 one-dimensional
  WinogradShape shape;
  const Conv2D& conv;
  const Dims& in;   // x
  const Dims& out;  // y
};
std::optional<WinogradNode> winograd_node(const Lowering& l, int node) {
  const OwnWinogradKernel kernel = own_winograd_kernel(l.ir, node);
  if (!l.options.winograd || kernel.size == 0) return std::nullopt;
  const Node& n = l.ir.nodes[static_cast<std::size_t>(node)];
  return WinogradNode{n,
                      kernel.size,
                      kernel.shape,
                      std::get<Conv2D>(n.attrs),
                      l.ir.values[static_cast<std::size_t>(n.inputs[0])].dims,
                      l.ir.values[static_cast<std::size_t>(n.output)].dims};
}

bool add_winograd_alternative(Lowering& l, int node, Step& step, const md_t& src_md,
                              const md_t& weights_md, const md_t& dst_md) {
  const auto w = winograd_node(l, node);
  if (!w) return false;
  const std::int64_t block = fitting_block(w->in, src_md, w->out, dst_md);
  if (block == 0) return false;
  WeightSource source;
  if (l.training()) {
    auto offsets = separable_offsets(weights_md);
    if (!offsets) return false;
    source.trained_offsets = std::move(*offsets);
  } else {
    source.oihw = value_of(l.ir, w->node.inputs[1]).data.get();
  }
  WinogradOutputOps ops;
  for (const PostOp& p : w->node.post_ops) {
    if (p.kind == PostOp::Kind::eltwise || ops.count == 4) return false;
    ops.ops[ops.count++] = p.kind == PostOp::Kind::sum ? WinogradPostOp::sum : WinogradPostOp::relu;
  }
  add_tiles(l, w->node.name, step, block, w->kernel_size, w->in, w->out, w->conv.padding[0],
            w->conv.padding[1], ops, w->node.inputs.size() > 2, source, w->shape);
  return true;
}

bool add_winograd_backward_data_alternative(Lowering& l, int node, Step& step,
                                            const md_t& diff_dst_md, const md_t& weights_md,
                                            const md_t& diff_src_md) {
  const auto w = winograd_node(l, node);
  if (!w) return false;
  const std::int64_t block = fitting_block(w->out, diff_dst_md, w->in, diff_src_md);
  if (block == 0) return false;
  auto offsets = separable_offsets(weights_md);
  if (!offsets) return false;
  // The kernel transposed: K and C swap.
  WeightSource source;
  source.trained_offsets[0] = std::move((*offsets)[1]);
  source.trained_offsets[1] = std::move((*offsets)[0]);
  if (w->shape == WinogradShape::stride2) {
    // A transposed convolution (WinogradStride2Transposed): its transforms flip the taps and
    // place the tiles by the forward's padding.
    source.trained_offsets[2] = std::move((*offsets)[2]);
    source.trained_offsets[3] = std::move((*offsets)[3]);
    add_tiles(l, w->node.name + ":backward_data", step, block, 3, w->out, w->in, w->conv.padding[0],
              w->conv.padding[1], {}, false, source, WinogradShape::stride2_transposed);
    return true;
  }
  // dx = dy convolved with the kernel transposed and flipped, padded by R - 1 - p along each
  // dimension (R taps): dx[i] = sum over r of dy[i + p - r] w[r]
  //                           = sum over r' of dy[i - (R - 1 - p) + r'] w[R - 1 - r'].
  // (1 x r and r x 1 kernels: R is 1 across the taps, where a padding p becomes -p, a crop.)
  for (std::size_t d = 2; d < 4; ++d) {
    const auto& forward = (*offsets)[d];
    source.trained_offsets[d].assign(forward.rbegin(), forward.rend());
  }
  const auto taps = [&](std::size_t d) {
    return static_cast<std::int64_t>(source.trained_offsets[d].size());
  };
  add_tiles(l, w->node.name + ":backward_data", step, block, w->kernel_size, w->out, w->in,
            taps(2) - 1 - w->conv.padding[0], taps(3) - 1 - w->conv.padding[1], {}, false, source,
            w->shape);
  return true;
}

bool add_winograd_weight_gradient_alternative(Lowering& l, int node, Step& step, const md_t& src_md,
                                              const md_t& diff_dst_md, const md_t& diff_weights_md,
                                              const md_t& diff_bias_md) {
  const auto w = winograd_node(l, node);
  if (!w) return false;
  const std::int64_t block = fitting_block(w->in, src_md, w->out, diff_dst_md);
  if (block == 0) return false;
  const bool has_bias = w->node.inputs.size() > 2;
  if (has_bias && diff_bias_md != md_t({w->out[1]}, dnnl::memory::data_type::f32, tag::x))
    return false;
  auto offsets = separable_offsets(diff_weights_md);
  if (!offsets) return false;
  const WinogradLayer layer = layer_of(w->in, w->out, w->conv.padding[0], w->conv.padding[1]);
  bool added = false;
  for (const WinogradKernels* kernels : candidates(block, w->kernel_size, w->shape, true)) {
    if (kernels->gradient == nullptr) continue;
    add_weight_gradient_alternative(l, step, layer, kernels, has_bias, *offsets);
    added = true;
  }
  return added;
}

}  // namespace tfpin::engine::detail
