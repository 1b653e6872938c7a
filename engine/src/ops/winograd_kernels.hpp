// tfpin's own Winograd F(2x2, 3x3), F(4x4, 3x3), F(6x6, 3x3), F(7x7, 3x3) and F(4x4, 5x5)
// convolutions, the vectorised parts (winograd_kernels.cpp, built once per ISA: the channel block
// of the activations' layout is one vector register, 8 floats with AVX2 and 16 with AVX-512). The
// driver and the weight transform are in winograd.cpp.
//
// Layouts, for P = (m + r - 1)^2 positions of an m x m output tile and r x r kernel (36 for
// F(4x4, 3x3), 64 for F(6x6, 3x3) and F(4x4, 5x5), 81 for F(7x7, 3x3)):
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
  std::int64_t row[7] = {};  // kernel rows and columns: 3 or 5 of them, 1 and 3 or 7 (1-D)
  std::int64_t column[7] = {};
};

// Tiles per micro-kernel call.
constexpr int winograd_tile_rows = 6;

// Floats between the positions of V, M and D beyond their rows (position p at p (padded rows x
// channels + this)), and of U and What beyond C x K: rows x channels and C x K are often
// multiples of 2 KiB, which put a tile's (or a weight's) P positions in the same few sets of the
// L1 cache.
constexpr std::int64_t winograd_position_pad = 16;

// Which way a kernel's taps run: r x r (2-D tiles), or 1 x r along the width (Inception's 1x7 and
// 1x3) or r x 1 along the height, whose one-dimensional F(m, r) tiles are 1 x m or m x 1; or 3x3
// at stride 2 (WinogradStride2), or that layer's data gradient (WinogradStride2Transposed).
enum class WinogradShape : std::uint8_t { square, row, column, stride2, stride2_transposed };

// The one-dimensional F(m, r) by Toom-Cook (Lavin and Gray; Barabasz et al. 2020), computed at
// compile time: y = A^T [(G g) . (B^T d)], with P = m + r - 1 points: the first P - 1 of
// 0, 1, -1, 2, -2, 1/2, -1/2, 3/2, -3/2, and infinity. A^T (m x P) and G (P x r) are the
// Vandermonde rows of the points (infinity: the last power alone) and B^T the inverse transpose
// of the square one. Its float error against double, relative to sum |g d|, measured on 20000
// random windows: F(4, 7) mean 6e-7, worst 3e-5; F(4, 3) mean 1.4e-7.
template <int m, int r>
struct Winograd1D {
  static constexpr int points = m + r - 1;
  double at[m][points] = {};
  double g[points][r] = {};
  double bt[points][points] = {};
};

// The points of make_winograd_1d: the first P - 1 of them, then infinity.
constexpr double winograd_points[9] = {0, 1, -1, 2, -2, 0.5, -0.5, 1.5, -1.5};
// F(7x7, 3x3)'s ninth point: -1/4 rounds half as much as 3/2 (mean error of one 9x9 window in
// float against double, relative to sum |g d|, 3.3e-6 against 6.8e-6; F(6x6, 3x3) 6.9e-7).
constexpr double winograd_points_7x3[9] = {0, 1, -1, 2, -2, 0.5, -0.5, -0.25, 0};

template <int m, int r>
consteval Winograd1D<m, r> make_winograd_1d(const double (&chosen)[9] = winograd_points) {
  constexpr int n = m + r - 1;
  static_assert(n <= 10, "no more points are chosen");
  // Row p of the Vandermonde matrix with `columns` powers.
  auto power = [&](int p, int column, int columns) {
    if (p == n - 1) return column == columns - 1 ? 1.0 : 0.0;  // infinity
    double x = 1;
    for (int i = 0; i < column; ++i) x *= chosen[p];
    return x;
  };
  Winograd1D<m, r> t;
  double v[n][n] = {};
  double inverse[n][n] = {};
  for (int p = 0; p < n; ++p) {
    for (int j = 0; j < n; ++j) v[p][j] = power(p, j, n);
    inverse[p][p] = 1;
    for (int i = 0; i < m; ++i) t.at[i][p] = power(p, i, m);
    for (int j = 0; j < r; ++j) t.g[p][j] = power(p, j, r);
  }
  // Gauss-Jordan with partial pivoting.
  for (int c = 0; c < n; ++c) {
    int pivot = c;
    for (int i = c + 1; i < n; ++i) {
      const double a = v[i][c] < 0 ? -v[i][c] : v[i][c];
      const double b = v[pivot][c] < 0 ? -v[pivot][c] : v[pivot][c];
      if (a > b) pivot = i;
    }
    for (int j = 0; j < n; ++j) {
      const double a = v[c][j];
      v[c][j] = v[pivot][j];
      v[pivot][j] = a;
      const double b = inverse[c][j];
      inverse[c][j] = inverse[pivot][j];
      inverse[pivot][j] = b;
    }
    const double d = v[c][c];
    for (int j = 0; j < n; ++j) {
      v[c][j] /= d;
      inverse[c][j] /= d;
    }
    for (int i = 0; i < n; ++i) {
      if (i == c) continue;
      const double f = v[i][c];
      for (int j = 0; j < n; ++j) {
        v[i][j] -= f * v[c][j];
        inverse[i][j] -= f * inverse[c][j];
      }
    }
  }
  for (int p = 0; p < n; ++p) {
    for (int j = 0; j < n; ++j) t.bt[p][j] = inverse[j][p];
  }
  return t;
}

// A 3x3 convolution at stride 2 by its polyphase parts: along one dimension, output i reads
// window samples 2i, 2i + 1 and 2i + 2, so the even samples meet taps 0 and 2 (a stride-1
// correlation with a 2-tap kernel: F(m, 2) on m + 1 points) and the odd ones tap 1 alone (m
// products). An m-output tile reads a window of 2m + 1 samples and takes 2m + 1 products, and the
// 2-D tile the tensor product: (2m + 1)^2 products for m^2 outputs, 81 for 16 with m = 4 where the
// direct kernel does 144 (the approach of Yepez and Ko, "Stride 2 1-D, 2-D, and 3-D Winograd for
// convolutional neural networks", 2020). Points 0..m are F(m, 2)'s on window samples 0, 2, .., 2m;
// point m + 1 + u is window sample 2u + 1.
template <int m>
struct WinogradStride2 {
  static constexpr int points = 2 * m + 1;
  double at[m][points] = {};
  double g[points][3] = {};
  double bt[points][points] = {};
};

template <int m>
consteval WinogradStride2<m> make_winograd_stride2() {
  const Winograd1D<m, 2> even = make_winograd_1d<m, 2>();
  WinogradStride2<m> t;
  for (int p = 0; p <= m; ++p) {
    for (int u = 0; u <= m; ++u) t.bt[p][2 * u] = even.bt[p][u];
    t.g[p][0] = even.g[p][0];
    t.g[p][2] = even.g[p][1];
    for (int i = 0; i < m; ++i) t.at[i][p] = even.at[i][p];
  }
  for (int u = 0; u < m; ++u) {
    t.bt[m + 1 + u][2 * u + 1] = 1;
    t.g[m + 1 + u][1] = 1;
    t.at[u][m + 1 + u] = 1;
  }
  return t;
}

// The data gradient of a 3x3 convolution at stride 2 with padding p, by the same polyphase parts
// read the other way: with q' = q + p, dx[q' = 2j] = g0 dy[j] + g2 dy[j - 1] (F(m, 2), the taps
// g2, g0, on the even samples) and dx[q' = 2j + 1] = g1 dy[j]. A tile is 2m x 2m of dx from the
// (m + 1)^2 window of dy starting one sample before m times its place, with the forward's 2m + 1
// points per dimension: (2m + 1)^2 products for 4m^2 outputs where the direct kernel does 9m^2.
// Points 0..m are F(m, 2)'s on window samples 0..m; point m + 1 + u is window sample u + 1.
template <int m>
struct WinogradStride2Transposed {
  static constexpr int points = 2 * m + 1;
  double at[2 * m][points] = {};
  double g[points][3] = {};
  double bt[points][m + 1] = {};
};

template <int m>
consteval WinogradStride2Transposed<m> make_winograd_stride2_transposed() {
  const Winograd1D<m, 2> even = make_winograd_1d<m, 2>();
  WinogradStride2Transposed<m> t;
  for (int p = 0; p <= m; ++p) {
    for (int u = 0; u <= m; ++u) t.bt[p][u] = even.bt[p][u];
    t.g[p][2] = even.g[p][0];
    t.g[p][0] = even.g[p][1];
    for (int i = 0; i < m; ++i) t.at[2 * i][p] = even.at[i][p];
  }
  for (int u = 0; u < m; ++u) {
    t.bt[m + 1 + u][u + 1] = 1;
    t.g[m + 1 + u][1] = 1;
    t.at[2 * u + 1][m + 1 + u] = 1;
  }
  return t;
}

struct WinogradKernels {
  int vector_floats = 0;      // the ISA's channel block
  int max_block_vectors = 0;  // output channels per micro-kernel call, in vectors
  int tile = 0;               // m: F(m x m, r x r), or F(m, r) for the 1-D shapes
  int kernel_size = 0;        // r
  WinogradShape shape = WinogradShape::square;
  // Transforms tiles [first, first + count) (all channels) into V[P][padded][C]; tiles from
  // count to padded (a multiple of winograd_tile_rows) are zero.
  void (*input)(const WinogradLayer& layer, const float* src, std::int64_t first, int count,
                int padded, float* v);
  // M[p][t][k_begin, k_end) = V[p][t][:] U[p][:][k_begin, k_end), for t < count (V and M have
  // padded rows per position; rows from count on are left as they were); k_begin and k_end on
  // the output-channel blocks of U (multiples of max_block_vectors * vector_floats, or the end).
  void (*multiply)(const WinogradLayer& layer, const float* v, const float* u, int padded,
                   int count, std::int64_t k_begin, std::int64_t k_end, float* m);
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

// F(tile x tile, kernel_size x kernel_size): F(2x2, 3x3), F(4x4, 3x3), F(6x6, 3x3), F(7x7, 3x3) or
// F(4x4, 5x5); null for others. Built with -mavx2 -mfma and -mavx512f: call only where the CPU has
// them.
const WinogradKernels* winograd_kernels_avx2(int tile, int kernel_size);
const WinogradKernels* winograd_kernels_avx512(int tile, int kernel_size);
// F(m, r) along a row (1 x r kernels) or a column (r x 1): F(4, 7) and F(4, 3), with the weight
// gradient's members. Null for others.
const WinogradKernels* winograd_1d_kernels_avx2(int tile, int kernel_size, WinogradShape shape);
const WinogradKernels* winograd_1d_kernels_avx512(int tile, int kernel_size, WinogradShape shape);
// 3x3 at stride 2 (WinogradStride2) with m x m output tiles, m = 2 or 4, with the weight
// gradient's members; or, `transposed`, its data gradient (WinogradStride2Transposed: a
// convolution of dy, the layer's in_channels, into dx in 2m x 2m tiles; training only, its
// weights transformed every run). Null for others.
const WinogradKernels* winograd_stride2_kernels_avx2(int tile, bool transposed);
const WinogradKernels* winograd_stride2_kernels_avx512(int tile, bool transposed);

}  // namespace tfpin::engine::detail
