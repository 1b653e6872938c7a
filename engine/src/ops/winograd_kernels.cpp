// The vectorised parts of tfpin's Winograd F(4x4, 3x3) convolution (winograd_kernels.hpp). One
// source for every ISA: meson builds it once per vector width (TFPIN_WINOGRAD_FLOATS 8 with
// -mavx2 -mfma, 16 with -mavx512f), with GCC's vector extensions for the arithmetic.
//
// Nothing here may use an inline function or template from a header: the linker keeps one copy of
// each, and the AVX-512 build's could then run on an AVX2 machine. Everything is our own, in an
// unnamed namespace (vector_isa.hpp's too), except the two entry points.
#include "winograd_kernels.hpp"

#include "vector_isa.hpp"

namespace tfpin::engine::detail {
namespace {

constexpr int rows = winograd_tile_rows;

// Floats from one position of V, M or D (padded rows x channels) to the next, and of U or What
// (C or its rows x K): winograd_position_pad more than the position's size.
std::int64_t position_stride_of(std::int64_t rows_of_position, std::int64_t columns) {
  return rows_of_position * columns + winograd_position_pad;
}

// y = M x (or M^T x) for a constant matrix of the transforms (a static constexpr member): once
// unrolled, its zeros and ones fold away.
template <int rows_out, int columns>
void constant_product(const double (&matrix)[rows_out][columns], const vec x[columns],
                      vec y[rows_out]) {
#pragma GCC unroll 16
  for (int i = 0; i < rows_out; ++i) {
    vec sum{};
#pragma GCC unroll 16
    for (int j = 0; j < columns; ++j) {
      if (matrix[i][j] == 1) {
        sum += x[j];
      } else if (matrix[i][j] != 0) {
        sum += static_cast<float>(matrix[i][j]) * x[j];
      }
    }
    y[i] = sum;
  }
}
template <int rows_in, int columns>
void transposed_constant_product(const double (&matrix)[rows_in][columns], const vec x[rows_in],
                                 vec y[columns]) {
#pragma GCC unroll 16
  for (int j = 0; j < columns; ++j) {
    vec sum{};
#pragma GCC unroll 16
    for (int i = 0; i < rows_in; ++i) {
      if (matrix[i][j] == 1) {
        sum += x[i];
      } else if (matrix[i][j] != 0) {
        sum += static_cast<float>(matrix[i][j]) * x[i];
      }
    }
    y[j] = sum;
  }
}

// B^T d for one column of an input tile, A^T m for one column of a product tile (Lavin and Gray).
// F(4x4, 3x3): 6x6 tiles, points 0, +-1, +-2 and infinity.
template <int m, int ks>
struct Transforms;

template <>
struct Transforms<4, 3> {
  // G g for one column of a 3x3 kernel (in float: training transforms every run).
  static void weight(const vec g[3], vec r[6]) {
    const vec a = g[0] + g[2];
    r[0] = 0.25f * g[0];
    r[1] = (-1.0f / 6) * (a + g[1]);
    r[2] = (-1.0f / 6) * (a - g[1]);
    r[3] = (1.0f / 24) * g[0] + (1.0f / 12) * g[1] + (1.0f / 6) * g[2];
    r[4] = (1.0f / 24) * g[0] - (1.0f / 12) * g[1] + (1.0f / 6) * g[2];
    r[5] = g[2];
  }
  // A y for one column of an output-gradient tile (training's weight gradient, the transpose of
  // output()).
  static void gradient(const vec y[4], vec r[6]) {
    const vec even = y[0] + y[2];
    const vec odd = y[1] + y[3];
    const vec even2 = y[0] + 4 * y[2];
    const vec odd2 = 2 * y[1] + 8 * y[3];
    r[0] = y[0];
    r[1] = even + odd;
    r[2] = even - odd;
    r[3] = even2 + odd2;
    r[4] = even2 - odd2;
    r[5] = y[3];
  }
  // G^T x for one column of a product tile (the transpose of weight()).
  static void weight_gradient(const vec x[6], vec r[3]) {
    const vec a = x[1] + x[2];
    const vec b = x[1] - x[2];
    const vec c = x[3] + x[4];
    const vec d = x[3] - x[4];
    r[0] = 0.25f * x[0] - (1.0f / 6) * a + (1.0f / 24) * c;
    r[1] = (-1.0f / 6) * b + (1.0f / 12) * d;
    r[2] = (-1.0f / 6) * a + (1.0f / 6) * c + x[5];
  }
  static void input(const vec d[6], vec r[6]) {
    r[0] = 4 * d[0] - 5 * d[2] + d[4];
    r[1] = d[3] + d[4] - 4 * (d[1] + d[2]);
    r[2] = 4 * (d[1] - d[2]) + d[4] - d[3];
    r[3] = 2 * (d[3] - d[1]) + d[4] - d[2];
    r[4] = 2 * (d[1] - d[3]) + d[4] - d[2];
    r[5] = 4 * d[1] - 5 * d[3] + d[5];
  }
  static void output(const vec p[6], vec o[4]) {
    const vec a = p[1] + p[2];
    const vec b = p[1] - p[2];
    const vec c = p[3] + p[4];
    const vec d = p[3] - p[4];
    o[0] = p[0] + a + c;
    o[1] = b + 2 * d;
    o[2] = a + 4 * c;
    o[3] = b + 8 * d + p[5];
  }
};

// F(6x6, 3x3): 8x8 tiles, points 0, +-1, +-2, +-1/2 and infinity (the rows pair up as a +- b).
template <>
struct Transforms<6, 3> {
  static void weight(const vec g[3], vec r[8]) {
    const vec a = g[0] + g[2];
    r[0] = g[0];
    r[1] = (-2.0f / 9) * (a + g[1]);
    r[2] = (-2.0f / 9) * (a - g[1]);
    const vec b = (1.0f / 90) * g[0] + (2.0f / 45) * g[2];
    r[3] = b + (1.0f / 45) * g[1];
    r[4] = b - (1.0f / 45) * g[1];
    const vec c = (32.0f / 45) * g[0] + (8.0f / 45) * g[2];
    r[5] = c + (16.0f / 45) * g[1];
    r[6] = c - (16.0f / 45) * g[1];
    r[7] = g[2];
  }
  static void gradient(const vec y[6], vec r[8]) {
    const vec even1 = y[0] + y[2] + y[4];
    const vec odd1 = y[1] + y[3] + y[5];
    const vec even2 = y[0] + 4 * y[2] + 16 * y[4];
    const vec odd2 = 2 * y[1] + 8 * y[3] + 32 * y[5];
    const vec even3 = y[0] + 0.25f * y[2] + 0.0625f * y[4];
    const vec odd3 = 0.5f * y[1] + 0.125f * y[3] + 0.03125f * y[5];
    r[0] = y[0];
    r[1] = even1 + odd1;
    r[2] = even1 - odd1;
    r[3] = even2 + odd2;
    r[4] = even2 - odd2;
    r[5] = even3 + odd3;
    r[6] = even3 - odd3;
    r[7] = y[5];
  }
  static void weight_gradient(const vec x[8], vec r[3]) {
    const vec a = x[1] + x[2];
    const vec b = x[1] - x[2];
    const vec c = x[3] + x[4];
    const vec d = x[3] - x[4];
    const vec e = x[5] + x[6];
    const vec f = x[5] - x[6];
    r[0] = x[0] - (2.0f / 9) * a + (1.0f / 90) * c + (32.0f / 45) * e;
    r[1] = (-2.0f / 9) * b + (1.0f / 45) * d + (16.0f / 45) * f;
    r[2] = (-2.0f / 9) * a + (2.0f / 45) * c + (8.0f / 45) * e + x[7];
  }
  static void input(const vec d[8], vec r[8]) {
    r[0] = d[0] - d[6] + 5.25f * (d[4] - d[2]);
    r[7] = d[7] - d[1] + 5.25f * (d[3] - d[5]);
    vec a = d[2] + d[6] - 4.25f * d[4];
    vec b = d[1] + d[5] - 4.25f * d[3];
    r[1] = a + b;
    r[2] = a - b;
    a = 0.25f * d[2] - 1.25f * d[4] + d[6];
    b = 0.5f * d[1] - 2.5f * d[3] + 2 * d[5];
    r[3] = a + b;
    r[4] = a - b;
    a = 4 * d[2] - 5 * d[4] + d[6];
    b = 2 * d[1] - 2.5f * d[3] + 0.5f * d[5];
    r[5] = a + b;
    r[6] = a - b;
  }
  static void output(const vec p[8], vec o[6]) {
    const vec a = p[1] + p[2];
    const vec b = p[1] - p[2];
    const vec c = p[3] + p[4];
    const vec d = p[3] - p[4];
    const vec e = p[5] + p[6];
    const vec f = p[5] - p[6];
    o[0] = p[0] + a + c + e;
    o[1] = b + 2 * d + 0.5f * f;
    o[2] = a + 4 * c + 0.25f * e;
    o[3] = b + 8 * d + 0.125f * f;
    o[4] = a + 16 * c + 0.0625f * e;
    o[5] = b + 32 * d + 0.03125f * f + p[7];
  }
};

// F(4x4, 5x5): the 8x8 tiles and points of F(6x6, 3x3) (B depends on the points only), with
// G for 5 taps and A for 4 outputs.
template <>
struct Transforms<4, 5> {
  static void input(const vec d[8], vec r[8]) { Transforms<6, 3>::input(d, r); }
  static void output(const vec p[8], vec o[4]) {
    vec six[6];  // the same points: F(6x6, 3x3)'s first rows, infinity's term moved to the 4th
    Transforms<6, 3>::output(p, six);
    o[0] = six[0];
    o[1] = six[1];
    o[2] = six[2];
    o[3] = six[3] + p[7];
  }
  static void weight(const vec g[5], vec r[8]) {
    const vec even1 = g[0] + g[2] + g[4];
    const vec odd1 = g[1] + g[3];
    const vec even2 = g[0] + 4 * g[2] + 16 * g[4];
    const vec odd2 = 2 * g[1] + 8 * g[3];
    const vec even3 = g[0] + 0.25f * g[2] + 0.0625f * g[4];
    const vec odd3 = 0.5f * g[1] + 0.125f * g[3];
    r[0] = g[0];
    r[1] = (-2.0f / 9) * (even1 + odd1);
    r[2] = (-2.0f / 9) * (even1 - odd1);
    r[3] = (1.0f / 90) * (even2 + odd2);
    r[4] = (1.0f / 90) * (even2 - odd2);
    r[5] = (32.0f / 45) * (even3 + odd3);
    r[6] = (32.0f / 45) * (even3 - odd3);
    r[7] = g[4];
  }
  static void gradient(const vec y[4], vec r[8]) {
    Transforms<4, 3>::gradient(y, r);  // points 0, +-1, +-2 (and r[5] = y[3], moved below)
    const vec even3 = y[0] + 0.25f * y[2];
    const vec odd3 = 0.5f * y[1] + 0.125f * y[3];
    r[7] = y[3];
    r[5] = even3 + odd3;
    r[6] = even3 - odd3;
  }
  static void weight_gradient(const vec x[8], vec r[5]) {
    const vec a = x[1] + x[2];
    const vec b = x[1] - x[2];
    const vec c = x[3] + x[4];
    const vec d = x[3] - x[4];
    const vec e = x[5] + x[6];
    const vec f = x[5] - x[6];
    r[0] = x[0] - (2.0f / 9) * a + (1.0f / 90) * c + (32.0f / 45) * e;
    r[1] = (-2.0f / 9) * b + (2.0f / 90) * d + (16.0f / 45) * f;
    r[2] = (-2.0f / 9) * a + (4.0f / 90) * c + (8.0f / 45) * e;
    r[3] = (-2.0f / 9) * b + (8.0f / 90) * d + (4.0f / 45) * f;
    r[4] = (-2.0f / 9) * a + (16.0f / 90) * c + (2.0f / 45) * e + x[7];
  }
};

// F(2x2, 3x3): 4x4 tiles, points 0, 1, -1 and infinity, from the Toom-Cook matrices
// (Winograd1D): 16 products per 4 outputs (F(4x4): 36 per 16), but U is 1.8x the plain weights
// (F(4x4): 4x), which batch 1 streams from memory every run, and no tiles past the edge of 14x14
// and 7x7 images.
template <>
struct Transforms<2, 3> {
  static constexpr Winograd1D<2, 3> t = make_winograd_1d<2, 3>();
  static void input(const vec d[4], vec r[4]) { constant_product(t.bt, d, r); }
  static void output(const vec p[4], vec o[2]) { constant_product(t.at, p, o); }
  static void weight(const vec g[3], vec r[4]) { constant_product(t.g, g, r); }
  static void gradient(const vec y[2], vec r[4]) { transposed_constant_product(t.at, y, r); }
  static void weight_gradient(const vec x[4], vec r[3]) { transposed_constant_product(t.g, x, r); }
};

// F(7x7, 3x3): 9x9 tiles, points 0, +-1, +-2, +-1/2, -1/4 and infinity, from the Toom-Cook
// matrices: 81 products per 49 outputs (F(6x6): 64 per 36), and 7 divides the 56, 28, 14, 7 and
// 35 wide images of ResNet-50, GoogLeNet and Inception v3, where 4x4 and 6x6 tiles run past the
// edge (14x14: 576 products per image with either, 324 with 7x7).
template <>
struct Transforms<7, 3> {
  static constexpr Winograd1D<7, 3> t = make_winograd_1d<7, 3>(winograd_points_7x3);
  static void input(const vec d[9], vec r[9]) { constant_product(t.bt, d, r); }
  static void output(const vec p[9], vec o[7]) { constant_product(t.at, p, o); }
  static void weight(const vec g[3], vec r[9]) { constant_product(t.g, g, r); }
  static void gradient(const vec y[7], vec r[9]) { transposed_constant_product(t.at, y, r); }
  static void weight_gradient(const vec x[9], vec r[3]) { transposed_constant_product(t.g, x, r); }
};

// (Not std::clamp: no template from a header here.)
std::int64_t clamped(std::int64_t x, std::int64_t lo, std::int64_t hi) {
  return x < lo ? lo : x > hi ? hi : x;
}

struct TilePlace {
  std::int64_t image;
  std::int64_t y;  // top row of the output tile
  std::int64_t x;
};

template <int m>
TilePlace place_of(const WinogradLayer& l, std::int64_t tile) {
  const std::int64_t per_image = l.tiles_high * l.tiles_wide;
  const std::int64_t in_image = tile % per_image;
  return {tile / per_image, m * (in_image / l.tiles_wide), m * (in_image % l.tiles_wide)};
}

// A padding tile of a transformed block (V or D): zero in every position.
void zero_tile(float* tile, std::int64_t channels, int positions, std::int64_t position_stride) {
  for (int p = 0; p < positions; ++p) {
    for (std::int64_t c = 0; c < channels; c += floats)
      store(tile + p * position_stride + c, vec{});
  }
}

// The input transform of m x m output tiles whose alpha x alpha windows start `stride` times the
// tile's place (T::input: one column or row of a window through B^T, window = alpha samples in,
// alpha points out). A window smaller than alpha is stride 2's data gradient's
// (WinogradStride2Transposed): m + 1 samples of dy from one before the tile's place, whatever
// the padding (that of the forward, which places the output tiles).
template <int m, int alpha, int stride, typename T, int window = alpha>
void input_tiles(const WinogradLayer& l, const float* src, std::int64_t first, int count,
                 int padded, float* v) {
  const std::int64_t c_total = l.in_channels;
  const std::int64_t blocks = c_total / floats;
  const std::int64_t position_stride = position_stride_of(padded, c_total);
  for (int t = 0; t < padded; ++t) {
    float* tile_out = v + static_cast<std::int64_t>(t) * c_total;
    if (t >= count) {
      zero_tile(tile_out, c_total, alpha * alpha, position_stride);
      continue;
    }
    const TilePlace place = place_of<m>(l, first + t);
    constexpr bool transposed = window != alpha;
    const std::int64_t y0 = transposed ? place.y - 1 : stride * place.y - l.pad_top;
    const std::int64_t x0 = transposed ? place.x - 1 : stride * place.x - l.pad_left;
    const bool inside = y0 >= 0 && x0 >= 0 && y0 + window <= l.height && x0 + window <= l.width;
    for (std::int64_t cb = 0; cb < blocks; ++cb) {
      const float* plane = src + (place.image * blocks + cb) * l.height * l.width * floats;
      vec t1[alpha][window];  // t1[i][j] = (B^T d)[i][j], one column of d at a time
      for (int j = 0; j < window; ++j) {
        const std::int64_t x = x0 + j;
        vec column[window];
        for (int i = 0; i < window; ++i) {
          const std::int64_t y = y0 + i;
          column[i] = inside || (y >= 0 && y < l.height && x >= 0 && x < l.width)
                          ? load(plane + (y * l.width + x) * floats)
                          : vec{};
        }
        vec result[alpha];
        T::input(column, result);
        for (int i = 0; i < alpha; ++i) t1[i][j] = result[i];
      }
      float* out = tile_out + cb * floats;
      for (int i = 0; i < alpha; ++i) {
        vec result[alpha];
        T::input(t1[i], result);  // (B^T d B)[i][k] = (B^T (B^T d)[i]^T)[k]
        for (int k = 0; k < alpha; ++k) store(out + (i * alpha + k) * position_stride, result[k]);
      }
    }
  }
}

template <int m, int ks>
void transform_input(const WinogradLayer& l, const float* src, std::int64_t first, int count,
                     int padded, float* v) {
  input_tiles<m, m + ks - 1, 1, Transforms<m, ks>>(l, src, first, count, padded, v);
}

// The register-blocked micro-kernel: height rows x (vectors * floats) of C = (C if accumulating) +
// the sum over `steps` of a column of A (rows, broadcast) times a row of B (vectors). A's element
// (row r, step s) is at a[r * a_stride + s], or a[s * a_stride + r] when A is transposed; B's row s
// at b + s * b_stride. With `next` set, it also asks for rows of a B shaped like this one at `next`
// to be brought into L2: rows first_row, first_row + every, ... (the caller's calls share them).
template <int vectors, bool a_transposed, int height = rows>
void micro_kernel(const float* a, std::int64_t a_stride, const float* b, std::int64_t b_stride,
                  std::int64_t steps, bool accumulating, float* c, std::int64_t c_stride,
                  const float* next = nullptr, int first_row = 0, int every = 1) {
  constexpr int line_floats = 64 / sizeof(float);
  vec acc[height][vectors];
#pragma GCC unroll 8
  for (int r = 0; r < height; ++r) {
#pragma GCC unroll 8
    for (int k = 0; k < vectors; ++k) {
      acc[r][k] = accumulating ? load(c + r * c_stride + k * floats) : vec{};
    }
  }
  auto step = [&](std::int64_t s) __attribute__((always_inline)) {
    vec w[vectors];
#pragma GCC unroll 8
    for (int k = 0; k < vectors; ++k) w[k] = load(b + s * b_stride + k * floats);
#pragma GCC unroll 8
    for (int r = 0; r < height; ++r) {
      const vec x = splat(a_transposed ? a[s * a_stride + r] : a[r * a_stride + s]);
#pragma GCC unroll 8
      for (int k = 0; k < vectors; ++k) acc[r][k] += x * w[k];
    }
  };
  if (next != nullptr) {
    int wait = first_row;
    for (std::int64_t s = 0; s < steps; ++s) {
      if (wait-- == 0) {
#pragma GCC unroll 8
        for (int f = 0; f < vectors * floats; f += line_floats) {
          __builtin_prefetch(next + s * b_stride + f, 0, 2);
        }
        wait = every - 1;
      }
      step(s);
    }
  } else {
    for (std::int64_t s = 0; s < steps; ++s) step(s);
  }
#pragma GCC unroll 8
  for (int r = 0; r < height; ++r) {
#pragma GCC unroll 8
    for (int k = 0; k < vectors; ++k) store(c + r * c_stride + k * floats, acc[r][k]);
  }
}

// At batch 1 a block of U is used by few calls (16 tiles: 3), and the first waits for it from
// memory unless it was fetched while the block before was in use: each call fetches its share of
// the next block's rows into L2. Zen 4, ResNet-50 at batch 1: see engine.md. The last call takes
// only the rows left of `count` (16 tiles: 6 + 6 + 4, not 18 rows of products).
template <int vectors>
void multiply_blocks(const float* v, std::int64_t c_total, const float* u, int count, float* m,
                     std::int64_t k_total, const float* next) {
  const int calls = (count + rows - 1) / rows;
  auto call = [&]<int height>(int t) {
    // height tiles x (vectors * floats) of M = height x C of V times C x (vectors * floats) of U.
    micro_kernel<vectors, false, height>(v + t * c_total, c_total, u, vectors * floats, c_total,
                                         false, m + t * k_total, k_total, next, t / rows, calls);
  };
  int t = 0;
  for (; t + rows <= count; t += rows) call.template operator()<rows>(t);
  switch (count - t) {
    case 1:
      call.template operator()<1>(t);
      break;
    case 2:
      call.template operator()<2>(t);
      break;
    case 3:
      call.template operator()<3>(t);
      break;
    case 4:
      call.template operator()<4>(t);
      break;
    case 5:
      call.template operator()<5>(t);
      break;
    default:
      break;
  }
}

template <int positions>
void multiply(const WinogradLayer& l, const float* v, const float* u, int padded, int count,
              std::int64_t k_begin, std::int64_t k_end, float* product) {
  const std::int64_t c_total = l.in_channels;
  const std::int64_t k_total = l.out_channels;
  const std::int64_t full = block_vectors * floats;
  for (int p = 0; p < positions; ++p) {
    const float* vp = v + p * position_stride_of(padded, c_total);
    const float* up = u + p * position_stride_of(c_total, k_total);
    float* mp = product + p * position_stride_of(padded, k_total);
    for (std::int64_t k0 = k_begin; k0 < k_end; k0 += full) {
      const std::int64_t width = k_end - k0 < full ? k_end - k0 : full;
      const float* ub = up + k0 * c_total;
      float* mb = mp + k0;
      // The block after this one: the next output channels, or the next position's first.
      const float* next = k0 + full < k_end ? ub + width * c_total
                          : p + 1 < positions
                              ? up + position_stride_of(c_total, k_total) + k_begin * c_total
                              : nullptr;
      switch (width / floats) {
        case 1:
          multiply_blocks<1>(vp, c_total, ub, count, mb, k_total, next);
          break;
#if TFPIN_WINOGRAD_FLOATS == 16
        case 2:
          multiply_blocks<2>(vp, c_total, ub, count, mb, k_total, next);
          break;
        case 3:
          multiply_blocks<3>(vp, c_total, ub, count, mb, k_total, next);
          break;
#endif
        default:
          multiply_blocks<block_vectors>(vp, c_total, ub, count, mb, k_total, next);
          break;
      }
    }
  }
}

// The output transform of m x m output tiles from alpha x alpha product tiles, with bias and
// post-ops (T::output: one column or row of a product tile through A^T). Stride 2's data
// gradient's tiles are out_m = 2m wide, at twice the tile's place less the forward's padding.
template <int m, int alpha, typename T, int out_m = m>
void output_tiles(const WinogradLayer& l, const float* product, const WinogradOutputOps& ops,
                  std::int64_t first, int count, int padded, std::int64_t k_begin,
                  std::int64_t k_end, float* dst) {
  const std::int64_t k_total = l.out_channels;
  const std::int64_t blocks = k_total / floats;
  const std::int64_t position_stride = position_stride_of(padded, k_total);
  for (int t = 0; t < count; ++t) {
    const TilePlace place = place_of<m>(l, first + t);
    constexpr bool transposed = out_m != m;
    const std::int64_t y0 = transposed ? 2 * place.y - l.pad_top : place.y;
    const std::int64_t x0 = transposed ? 2 * place.x - l.pad_left : place.x;
    const int first_row = y0 < 0 ? static_cast<int>(-y0) : 0;
    const int first_column = x0 < 0 ? static_cast<int>(-x0) : 0;
    const int rows_here = l.out_height - y0 < out_m ? static_cast<int>(l.out_height - y0) : out_m;
    const int columns_here = l.out_width - x0 < out_m ? static_cast<int>(l.out_width - x0) : out_m;
    const float* tile = product + static_cast<std::int64_t>(t) * k_total;
    for (std::int64_t k = k_begin; k < k_end; k += floats) {
      vec s[out_m][alpha];  // s = A^T p
      for (int j = 0; j < alpha; ++j) {
        vec column[alpha];
        vec result[out_m];
        for (int i = 0; i < alpha; ++i) {
          column[i] = load(tile + (i * alpha + j) * position_stride + k);
        }
        T::output(column, result);
        for (int i = 0; i < out_m; ++i) s[i][j] = result[i];
      }
      const vec bias = ops.bias != nullptr ? load(ops.bias + k) : vec{};
      float* plane =
          dst + (place.image * blocks + k / floats) * l.out_height * l.out_width * floats;
      for (int i = first_row; i < rows_here; ++i) {
        vec y[out_m];
        T::output(s[i], y);  // (A^T p A)[i] = A^T s[i]^T
        float* row = plane + ((y0 + i) * l.out_width + x0) * floats;
        for (int j = first_column; j < columns_here; ++j) {
          vec out = y[j] + bias;
          for (int o = 0; o < ops.count; ++o) {
            if (ops.ops[o] == WinogradPostOp::sum) {
              out += load(row + j * floats);
            } else {
              out = out > vec{} ? out : vec{};
            }
          }
          store(row + j * floats, out);
        }
      }
    }
  }
}

template <int m, int ks>
void transform_output(const WinogradLayer& l, const float* product, const WinogradOutputOps& ops,
                      std::int64_t first, int count, int padded, std::int64_t k_begin,
                      std::int64_t k_end, float* dst) {
  output_tiles<m, m + ks - 1, Transforms<m, ks>>(l, product, ops, first, count, padded, k_begin,
                                                 k_end, dst);
}

// G g G^T for `floats` output channels at a time (a gather: the trained weights' layout is
// oneDNN's), stored at U[p] + k0 * C + c * width + (k - k0); T::weight is G (alpha x ks) on one
// column of ks taps.
template <int alpha, int ks, typename T>
void transform_weights_with(const WinogradLayer& l, const float* w,
                            const WinogradWeightIndex& index, std::int64_t k_begin,
                            std::int64_t k_end, float* u) {
  const std::int64_t c_total = l.in_channels;
  const std::int64_t k_total = l.out_channels;
  const std::int64_t full = block_vectors * floats;
  const std::int64_t position_stride = position_stride_of(c_total, k_total);
  for (std::int64_t k = k_begin; k < k_end; k += floats) {
    const std::int64_t k0 = k / full * full;
    const std::int64_t width = k_total - k0 < full ? k_total - k0 : full;
    float* out = u + k0 * c_total + (k - k0);
    for (std::int64_t c = 0; c < c_total; ++c) {
      const float* wc = w + index.in_channel[c];
      vec g[ks][ks];
      for (int r = 0; r < ks; ++r) {
        for (int s = 0; s < ks; ++s) {
          const float* at = wc + index.row[r] + index.column[s];
          for (int j = 0; j < floats; ++j) g[r][s][j] = at[index.out_channel[k + j]];
        }
      }
      vec gw[alpha][ks];  // G g, column by column
      for (int s = 0; s < ks; ++s) {
        vec column[ks];
        for (int r = 0; r < ks; ++r) column[r] = g[r][s];
        vec result[alpha];
        T::weight(column, result);
        for (int i = 0; i < alpha; ++i) gw[i][s] = result[i];
      }
      for (int i = 0; i < alpha; ++i) {
        vec result[alpha];
        T::weight(gw[i], result);  // (G g G^T)[i] = G (G g)[i]^T
        for (int j = 0; j < alpha; ++j) {
          store(out + (i * alpha + j) * position_stride + c * width, result[j]);
        }
      }
    }
  }
}

template <int m, int ks>
void transform_weights(const WinogradLayer& l, const float* w, const WinogradWeightIndex& index,
                       std::int64_t k_begin, std::int64_t k_end, float* u) {
  transform_weights_with<m + ks - 1, ks, Transforms<m, ks>>(l, w, index, k_begin, k_end, u);
}

// A dy A^T for m x m output tiles [first, first + count) (all K channels) into D[P][padded][K];
// zero past the output's edges and for tiles count..padded (T::gradient: A on one column of m).
template <int m, int alpha, typename T>
void gradient_tiles(const WinogradLayer& l, const float* dy, std::int64_t first, int count,
                    int padded, float* d) {
  const std::int64_t k_total = l.out_channels;
  const std::int64_t blocks = k_total / floats;
  const std::int64_t position_stride = position_stride_of(padded, k_total);
  for (int t = 0; t < padded; ++t) {
    float* tile_out = d + static_cast<std::int64_t>(t) * k_total;
    if (t >= count) {
      zero_tile(tile_out, k_total, alpha * alpha, position_stride);
      continue;
    }
    const TilePlace place = place_of<m>(l, first + t);
    const std::int64_t rows_here = l.out_height - place.y < m ? l.out_height - place.y : m;
    const std::int64_t columns_here = l.out_width - place.x < m ? l.out_width - place.x : m;
    for (std::int64_t kb = 0; kb < blocks; ++kb) {
      const float* plane = dy + (place.image * blocks + kb) * l.out_height * l.out_width * floats;
      vec t1[alpha][m];  // t1[i][j] = (A y)[i][j], one column of y at a time
      for (int j = 0; j < m; ++j) {
        vec column[m];
        for (int i = 0; i < m; ++i) {
          column[i] = i < rows_here && j < columns_here
                          ? load(plane + ((place.y + i) * l.out_width + place.x + j) * floats)
                          : vec{};
        }
        vec result[alpha];
        T::gradient(column, result);
        for (int i = 0; i < alpha; ++i) t1[i][j] = result[i];
      }
      float* out = tile_out + kb * floats;
      for (int i = 0; i < alpha; ++i) {
        vec result[alpha];
        T::gradient(t1[i], result);  // (A y A^T)[i] = A (A y)[i]^T
        for (int k = 0; k < alpha; ++k) store(out + (i * alpha + k) * position_stride, result[k]);
      }
    }
  }
}

template <int m, int ks>
void transform_gradient(const WinogradLayer& l, const float* dy, std::int64_t first, int count,
                        int padded, float* d) {
  gradient_tiles<m, m + ks - 1, Transforms<m, ks>>(l, dy, first, count, padded, d);
}

// rows x (vectors * floats) of What (+)= sum over t < padded of V[t][rows] D[t][vectors * floats]:
// the rows are input channels, read past C into the next tile (What's rows past C are padding).
template <int vectors>
void accumulate_block(const float* v, std::int64_t c_total, const float* d, std::int64_t k_total,
                      int padded, bool first, float* w) {
  micro_kernel<vectors, true>(v, c_total, d, k_total, padded, !first, w, k_total);
}

// What[p][c][k] (+)= sum over t of V[p][t][c] D[p][t][k] for k in [k_begin, k_end) (multiples of
// vector_floats); What has C rounded up to winograd_tile_rows rows.
template <int positions>
void accumulate(const WinogradLayer& l, const float* v, const float* d, int padded,
                std::int64_t k_begin, std::int64_t k_end, bool first, float* w_hat) {
  const std::int64_t c_total = l.in_channels;
  const std::int64_t c_rows = (c_total + rows - 1) / rows * rows;
  const std::int64_t k_total = l.out_channels;
  const std::int64_t full = block_vectors * floats;
  for (int p = 0; p < positions; ++p) {
    const float* vp = v + p * position_stride_of(padded, c_total);
    const float* dp = d + p * position_stride_of(padded, k_total);
    float* wp = w_hat + p * position_stride_of(c_rows, k_total);
    for (std::int64_t c0 = 0; c0 < c_total; c0 += rows) {
      for (std::int64_t k0 = k_begin; k0 < k_end; k0 += full) {
        const std::int64_t width = k_end - k0 < full ? k_end - k0 : full;
        const float* vb = vp + c0;
        const float* db = dp + k0;
        float* wb = wp + c0 * k_total + k0;
        switch (width / floats) {
          case 1:
            accumulate_block<1>(vb, c_total, db, k_total, padded, first, wb);
            break;
          case 2:
            accumulate_block<2>(vb, c_total, db, k_total, padded, first, wb);
            break;
#if TFPIN_WINOGRAD_FLOATS == 16
          case 3:
            accumulate_block<3>(vb, c_total, db, k_total, padded, first, wb);
            break;
#endif
          default:
            accumulate_block<block_vectors>(vb, c_total, db, k_total, padded, first, wb);
            break;
        }
      }
    }
  }
}

// One vector of What: the sum of its `parts` partial sums, part_stride floats apart.
vec summed_parts(const float* at, int parts, std::int64_t part_stride) {
  vec sum = load(at);
  for (int part = 1; part < parts; ++part) sum += load(at + part * part_stride);
  return sum;
}

// dW = G^T (sum of the `parts` partial What, part_stride floats apart) G for output channels
// [k_begin, k_end) (multiples of vector_floats), scattered into the trained tensor's layout
// (T::weight_gradient: G^T on one column of alpha).
template <int alpha, int ks, typename T>
void weight_gradient_with(const WinogradLayer& l, const float* w_hat, int parts,
                          std::int64_t part_stride, const WinogradWeightIndex& index,
                          std::int64_t k_begin, std::int64_t k_end, float* dw) {
  const std::int64_t c_total = l.in_channels;
  const std::int64_t c_rows = (c_total + rows - 1) / rows * rows;
  const std::int64_t k_total = l.out_channels;
  const std::int64_t position_stride = position_stride_of(c_rows, k_total);
  for (std::int64_t k = k_begin; k < k_end; k += floats) {
    for (std::int64_t c = 0; c < c_total; ++c) {
      vec x[alpha][alpha];
      for (int p = 0; p < alpha * alpha; ++p) {
        x[p / alpha][p % alpha] =
            summed_parts(w_hat + p * position_stride + c * k_total + k, parts, part_stride);
      }
      vec gx[ks][alpha];  // G^T x, column by column
      for (int j = 0; j < alpha; ++j) {
        vec column[alpha];
        for (int i = 0; i < alpha; ++i) column[i] = x[i][j];
        vec result[ks];
        T::weight_gradient(column, result);
        for (int r = 0; r < ks; ++r) gx[r][j] = result[r];
      }
      float* wc = dw + index.in_channel[c];
      for (int r = 0; r < ks; ++r) {
        vec result[ks];
        T::weight_gradient(gx[r], result);  // (G^T x G)[r] = G^T (G^T x)[r]^T
        for (int s = 0; s < ks; ++s) {
          float* out = wc + index.row[r] + index.column[s];
          for (int j = 0; j < floats; ++j) out[index.out_channel[k + j]] = result[s][j];
        }
      }
    }
  }
}

template <int m, int ks>
void weight_gradient(const WinogradLayer& l, const float* w_hat, int parts,
                     std::int64_t part_stride, const WinogradWeightIndex& index,
                     std::int64_t k_begin, std::int64_t k_end, float* dw) {
  weight_gradient_with<m + ks - 1, ks, Transforms<m, ks>>(l, w_hat, parts, part_stride, index,
                                                          k_begin, k_end, dw);
}

template <int m, int ks>
const WinogradKernels kernels{floats,
                              block_vectors,
                              m,
                              ks,
                              WinogradShape::square,
                              transform_input<m, ks>,
                              multiply<(m + ks - 1) * (m + ks - 1)>,
                              transform_output<m, ks>,
                              transform_weights<m, ks>,
                              transform_gradient<m, ks>,
                              accumulate<(m + ks - 1) * (m + ks - 1)>,
                              weight_gradient<m, ks>};

// One-dimensional F(m, r) (Winograd1D): tile t of an image is 1 x m outputs along a row
// (WinogradShape::row) or m x 1 along a column, tiles_high x tiles_wide of them per image. The
// transforms are dense products by the constant matrices (P <= 10: a few percent of the tile's
// matrix products at Inception's 128-192 channels).
template <int m, int r, WinogradShape shape>
struct Winograd1DKernels {
  static constexpr int points = m + r - 1;
  static constexpr Winograd1D<m, r> matrices = make_winograd_1d<m, r>();
  static constexpr bool along_row = shape == WinogradShape::row;

  static TilePlace place(const WinogradLayer& l, std::int64_t tile) {
    const std::int64_t per_image = l.tiles_high * l.tiles_wide;
    const std::int64_t in_image = tile % per_image;
    const std::int64_t row = in_image / l.tiles_wide;
    const std::int64_t column = in_image % l.tiles_wide;
    return {tile / per_image, along_row ? row : m * row, along_row ? m * column : column};
  }

  // f(tile, its place) for the tiles [first, first + count) of a transformed block (V or D:
  // [P][padded][channels]); the tiles count..padded are zero.
  template <typename F>
  static void each_tile(const WinogradLayer& l, float* block, std::int64_t channels,
                        std::int64_t first, int count, int padded, F f) {
    const std::int64_t position_stride = position_stride_of(padded, channels);
    for (int t = 0; t < padded; ++t) {
      float* tile = block + static_cast<std::int64_t>(t) * channels;
      if (t < count) {
        f(tile, place(l, first + t));
      } else {
        zero_tile(tile, channels, points, position_stride);
      }
    }
  }

  static void input(const WinogradLayer& l, const float* src, std::int64_t first, int count,
                    int padded, float* v) {
    const std::int64_t c_total = l.in_channels;
    const std::int64_t blocks = c_total / floats;
    const std::int64_t position_stride = position_stride_of(padded, c_total);
    // Where tap j of the window is, relative to its first tap, in floats of one channel plane.
    const std::int64_t step = along_row ? floats : l.width * floats;
    each_tile(l, v, c_total, first, count, padded, [&](float* tile_out, const TilePlace& at) {
      const std::int64_t y0 = at.y - l.pad_top;
      const std::int64_t x0 = at.x - l.pad_left;
      // Taps [lo, hi) of the window are inside the image, the rest are padding.
      const std::int64_t start = along_row ? x0 : y0;
      const std::int64_t extent = along_row ? l.width : l.height;
      const bool line_inside = along_row ? (y0 >= 0 && y0 < l.height) : (x0 >= 0 && x0 < l.width);
      const int lo = static_cast<int>(clamped(-start, 0, points));
      const int hi = static_cast<int>(clamped(extent - start, 0, points));
      for (std::int64_t cb = 0; cb < blocks; ++cb) {
        const float* plane = src + (at.image * blocks + cb) * l.height * l.width * floats;
        const std::int64_t first_tap = (y0 * l.width + x0) * floats;  // may be outside
        vec d[points];
#pragma GCC unroll 16
        for (int j = 0; j < points; ++j) {
          d[j] = line_inside && j >= lo && j < hi ? load(plane + first_tap + j * step) : vec{};
        }
        float* out = tile_out + cb * floats;
        vec transformed[points];
        constant_product(matrices.bt, d, transformed);
#pragma GCC unroll 16
        for (int p = 0; p < points; ++p) store(out + p * position_stride, transformed[p]);
      }
    });
  }

  static void output(const WinogradLayer& l, const float* product, const WinogradOutputOps& ops,
                     std::int64_t first, int count, int padded, std::int64_t k_begin,
                     std::int64_t k_end, float* dst) {
    const std::int64_t k_total = l.out_channels;
    const std::int64_t blocks = k_total / floats;
    const std::int64_t position_stride = position_stride_of(padded, k_total);
    const std::int64_t step = along_row ? floats : l.out_width * floats;
    for (int t = 0; t < count; ++t) {
      const TilePlace at = place(l, first + t);
      const std::int64_t left = along_row ? l.out_width - at.x : l.out_height - at.y;
      const int here = left < m ? static_cast<int>(left) : m;
      const float* tile = product + static_cast<std::int64_t>(t) * k_total;
      for (std::int64_t k = k_begin; k < k_end; k += floats) {
        vec mp[points];
#pragma GCC unroll 16
        for (int p = 0; p < points; ++p) mp[p] = load(tile + p * position_stride + k);
        const vec bias = ops.bias != nullptr ? load(ops.bias + k) : vec{};
        float* plane = dst + (at.image * blocks + k / floats) * l.out_height * l.out_width * floats;
        float* first_out = plane + (at.y * l.out_width + at.x) * floats;
        vec outputs[m];
        constant_product(matrices.at, mp, outputs);
#pragma GCC unroll 8
        for (int i = 0; i < m; ++i) {
          if (i >= here) break;
          vec out = outputs[i] + bias;
          float* y = first_out + i * step;
          for (int o = 0; o < ops.count; ++o) {
            if (ops.ops[o] == WinogradPostOp::sum) {
              out += load(y);
            } else {
              out = out > vec{} ? out : vec{};
            }
          }
          store(y, out);
        }
      }
    }
  }

  // G g for trained weights (training's forward), as transform_weights_with does for 2-D tiles:
  // the r taps run along the kernel's one row or column.
  static void weights(const WinogradLayer& l, const float* w, const WinogradWeightIndex& index,
                      std::int64_t k_begin, std::int64_t k_end, float* u) {
    const std::int64_t c_total = l.in_channels;
    const std::int64_t k_total = l.out_channels;
    const std::int64_t full = block_vectors * floats;
    const std::int64_t position_stride = position_stride_of(c_total, k_total);
    for (std::int64_t k = k_begin; k < k_end; k += floats) {
      const std::int64_t k0 = k / full * full;
      const std::int64_t width = k_total - k0 < full ? k_total - k0 : full;
      float* out = u + k0 * c_total + (k - k0);
      for (std::int64_t c = 0; c < c_total; ++c) {
        const float* wc = w + index.in_channel[c];
        vec g[r];
        for (int j = 0; j < r; ++j) {
          const float* at =
              wc + (along_row ? index.row[0] + index.column[j] : index.row[j] + index.column[0]);
          alignas(sizeof(vec)) float lanes[floats];
          for (int i = 0; i < floats; ++i) lanes[i] = at[index.out_channel[k + i]];
          g[j] = load(lanes);
        }
        vec result[points];
        constant_product(matrices.g, g, result);
        for (int p = 0; p < points; ++p) store(out + p * position_stride + c * width, result[p]);
      }
    }
  }

  // A dy (A = at^T, points x m) for the output tiles [first, first + count) into D[P][padded][K]
  // (training's weight gradient, the transpose of output()); zero past the output's edge and for
  // tiles count..padded.
  static void gradient(const WinogradLayer& l, const float* dy, std::int64_t first, int count,
                       int padded, float* d) {
    const std::int64_t k_total = l.out_channels;
    const std::int64_t blocks = k_total / floats;
    const std::int64_t position_stride = position_stride_of(padded, k_total);
    const std::int64_t step = along_row ? floats : l.out_width * floats;
    each_tile(l, d, k_total, first, count, padded, [&](float* tile_out, const TilePlace& at) {
      const std::int64_t left = along_row ? l.out_width - at.x : l.out_height - at.y;
      const int here = left < m ? static_cast<int>(left) : m;
      for (std::int64_t kb = 0; kb < blocks; ++kb) {
        const float* plane = dy + (at.image * blocks + kb) * l.out_height * l.out_width * floats;
        const float* first_out = plane + (at.y * l.out_width + at.x) * floats;
        vec y[m];
#pragma GCC unroll 8
        for (int i = 0; i < m; ++i) y[i] = i < here ? load(first_out + i * step) : vec{};
        vec transformed[points];
        transposed_constant_product(matrices.at, y, transformed);
        float* out = tile_out + kb * floats;
#pragma GCC unroll 16
        for (int p = 0; p < points; ++p) store(out + p * position_stride, transformed[p]);
      }
    });
  }

  // dW = G^T (sum of the `parts` partial What) for output channels [k_begin, k_end), scattered
  // into the trained tensor's layout along the kernel's row or column (the transpose of
  // weights()).
  static void weight_gradient(const WinogradLayer& l, const float* w_hat, int parts,
                              std::int64_t part_stride, const WinogradWeightIndex& index,
                              std::int64_t k_begin, std::int64_t k_end, float* dw) {
    const std::int64_t c_total = l.in_channels;
    const std::int64_t c_rows = (c_total + rows - 1) / rows * rows;
    const std::int64_t k_total = l.out_channels;
    const std::int64_t position_stride = position_stride_of(c_rows, k_total);
    for (std::int64_t k = k_begin; k < k_end; k += floats) {
      for (std::int64_t c = 0; c < c_total; ++c) {
        vec x[points];
        for (int p = 0; p < points; ++p) {
          x[p] = summed_parts(w_hat + p * position_stride + c * k_total + k, parts, part_stride);
        }
        vec result[r];
        transposed_constant_product(matrices.g, x, result);
        float* wc = dw + index.in_channel[c];
        for (int j = 0; j < r; ++j) {
          float* out =
              wc + (along_row ? index.row[0] + index.column[j] : index.row[j] + index.column[0]);
          for (int i = 0; i < floats; ++i) out[index.out_channel[k + i]] = result[j][i];
        }
      }
    }
  }

  static constexpr WinogradKernels table{floats,
                                         block_vectors,
                                         m,
                                         r,
                                         shape,
                                         input,
                                         multiply<points>,
                                         output,
                                         weights,
                                         gradient,
                                         accumulate<points>,
                                         weight_gradient};
};

// 3x3 at stride 2 (WinogradStride2): tile t of an image is m x m outputs, read from a window of
// (2m + 1)^2 input pixels at twice the tile's place; P = (2m + 1)^2 positions. The transforms are
// the separable products by the constant matrices, their zeros skipped at compile time (the odd
// samples' rows are copies).
template <int m>
struct Stride2Kernels {
  static constexpr int points = 2 * m + 1;
  static constexpr WinogradStride2<m> matrices = make_winograd_stride2<m>();

  // The transform policy of input_tiles and output_tiles.
  struct Transform {
    static void input(const vec d[points], vec r[points]) { constant_product(matrices.bt, d, r); }
    static void output(const vec p[points], vec o[m]) { constant_product(matrices.at, p, o); }
    static void weight(const vec g[3], vec r[points]) { constant_product(matrices.g, g, r); }
    // Training's weight gradient: A on a column of an output-gradient tile, G^T on a column of
    // What (the transposes of output() and weight()).
    static void gradient(const vec y[m], vec r[points]) {
      transposed_constant_product(matrices.at, y, r);
    }
    static void weight_gradient(const vec x[points], vec r[3]) {
      transposed_constant_product(matrices.g, x, r);
    }
  };

  static constexpr WinogradKernels table{floats,
                                         block_vectors,
                                         m,
                                         3,
                                         WinogradShape::stride2,
                                         input_tiles<m, points, 2, Transform>,
                                         multiply<points * points>,
                                         output_tiles<m, points, Transform>,
                                         transform_weights_with<points, 3, Transform>,
                                         gradient_tiles<m, points, Transform>,
                                         accumulate<points * points>,
                                         weight_gradient_with<points, 3, Transform>};
};

// Stride 2's data gradient (WinogradStride2Transposed): tile t of an image is 2m x 2m of dx
// from the (m + 1)^2 window of dy, one sample before m times its place; P = (2m + 1)^2. No
// weight gradient's members: it is itself a backward step.
template <int m>
struct Stride2TransposedKernels {
  static constexpr int points = 2 * m + 1;
  static constexpr WinogradStride2Transposed<m> matrices = make_winograd_stride2_transposed<m>();

  struct Transform {
    static void input(const vec d[m + 1], vec r[points]) { constant_product(matrices.bt, d, r); }
    static void output(const vec p[points], vec o[2 * m]) { constant_product(matrices.at, p, o); }
    static void weight(const vec g[3], vec r[points]) { constant_product(matrices.g, g, r); }
  };

  static constexpr WinogradKernels table{floats,
                                         block_vectors,
                                         m,
                                         3,
                                         WinogradShape::stride2_transposed,
                                         input_tiles<m, points, 1, Transform, m + 1>,
                                         multiply<points * points>,
                                         output_tiles<m, points, Transform, 2 * m>,
                                         transform_weights_with<points, 3, Transform>,
                                         nullptr,
                                         nullptr,
                                         nullptr};
};

}  // namespace

#if TFPIN_WINOGRAD_FLOATS == 16
const WinogradKernels* winograd_1d_kernels_avx512(int tile, int kernel_size, WinogradShape shape) {
#else
const WinogradKernels* winograd_1d_kernels_avx2(int tile, int kernel_size, WinogradShape shape) {
#endif
  const bool row = shape == WinogradShape::row;
  if (shape == WinogradShape::square || tile != 4) return nullptr;
  if (kernel_size == 7) {
    return row ? &Winograd1DKernels<4, 7, WinogradShape::row>::table
               : &Winograd1DKernels<4, 7, WinogradShape::column>::table;
  }
  if (kernel_size == 3) {
    return row ? &Winograd1DKernels<4, 3, WinogradShape::row>::table
               : &Winograd1DKernels<4, 3, WinogradShape::column>::table;
  }
  return nullptr;
}

#if TFPIN_WINOGRAD_FLOATS == 16
const WinogradKernels* winograd_stride2_kernels_avx512(int tile, bool transposed) {
#else
const WinogradKernels* winograd_stride2_kernels_avx2(int tile, bool transposed) {
#endif
  if (tile == 4)
    return transposed ? &Stride2TransposedKernels<4>::table : &Stride2Kernels<4>::table;
  if (tile == 2)
    return transposed ? &Stride2TransposedKernels<2>::table : &Stride2Kernels<2>::table;
  return nullptr;
}

#if TFPIN_WINOGRAD_FLOATS == 16
const WinogradKernels* winograd_kernels_avx512(int tile, int kernel_size) {
#else
const WinogradKernels* winograd_kernels_avx2(int tile, int kernel_size) {
#endif
  if (tile == 2 && kernel_size == 3) return &kernels<2, 3>;
  if (tile == 4 && kernel_size == 3) return &kernels<4, 3>;
  if (tile == 6 && kernel_size == 3) return &kernels<6, 3>;
  if (tile == 7 && kernel_size == 3) return &kernels<7, 3>;
  if (tile == 4 && kernel_size == 5) return &kernels<4, 5>;
  return nullptr;
}

}  // namespace tfpin::engine::detail
