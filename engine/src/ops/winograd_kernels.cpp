// The vectorised parts of tfpin's Winograd F(4x4, 3x3) convolution (winograd_kernels.hpp). One
// source for every ISA: meson builds it once per vector width (TFPIN_WINOGRAD_FLOATS 8 with
// -mavx2 -mfma, 16 with -mavx512f), with GCC's vector extensions for the arithmetic.
//
// Nothing here may use an inline function or template from a header: the linker keeps one copy of
// each, and the AVX-512 build's could then run on an AVX2 machine. Everything is our own, in an
// unnamed namespace, except the two entry points.
#include "winograd_kernels.hpp"

#ifndef TFPIN_WINOGRAD_FLOATS
#error "build with TFPIN_WINOGRAD_FLOATS=8 (AVX2) or 16 (AVX-512)"
#endif

namespace tfpin::engine::detail {
namespace {

constexpr int floats = TFPIN_WINOGRAD_FLOATS;
#if TFPIN_WINOGRAD_FLOATS == 16
constexpr int block_vectors = 4;  // 6 x 4 accumulators of 32 zmm registers
#else
constexpr int block_vectors = 2;  // 6 x 2 accumulators of 16 ymm registers
#endif
constexpr int rows = winograd_tile_rows;

// Unaligned and allowed to alias float (the buffers are floats).
typedef float vec __attribute__((vector_size(floats * 4), aligned(4), may_alias));

inline vec load(const float* p) { return *reinterpret_cast<const vec*>(p); }
inline void store(float* p, vec x) { *reinterpret_cast<vec*>(p) = x; }
inline vec splat(float x) { return x - vec{}; }  // x - 0 is x (x + 0 is not, for -0)

// B^T d for one column of a 6x6 input tile (Lavin and Gray's F(4x4, 3x3), points 0, +-1, +-2).
inline void input_column(const vec d[6], vec r[6]) {
  r[0] = 4 * d[0] - 5 * d[2] + d[4];
  r[1] = d[3] + d[4] - 4 * (d[1] + d[2]);
  r[2] = 4 * (d[1] - d[2]) + d[4] - d[3];
  r[3] = 2 * (d[3] - d[1]) + d[4] - d[2];
  r[4] = 2 * (d[1] - d[3]) + d[4] - d[2];
  r[5] = 4 * d[1] - 5 * d[3] + d[5];
}

// A^T m for one column of a 6x6 product tile.
inline void output_column(const vec m[6], vec o[4]) {
  const vec a = m[1] + m[2];
  const vec b = m[1] - m[2];
  const vec c = m[3] + m[4];
  const vec d = m[3] - m[4];
  o[0] = m[0] + a + c;
  o[1] = b + 2 * d;
  o[2] = a + 4 * c;
  o[3] = b + 8 * d + m[5];
}

struct TilePlace {
  std::int64_t image;
  std::int64_t y;  // top row of the output tile
  std::int64_t x;
};

inline TilePlace place_of(const WinogradLayer& l, std::int64_t tile) {
  const std::int64_t per_image = l.tiles_high * l.tiles_wide;
  const std::int64_t in_image = tile % per_image;
  return {tile / per_image, 4 * (in_image / l.tiles_wide), 4 * (in_image % l.tiles_wide)};
}

void transform_input(const WinogradLayer& l, const float* src, std::int64_t first, int count,
                     int padded, float* v) {
  const std::int64_t c_total = l.in_channels;
  const std::int64_t blocks = c_total / floats;
  const std::int64_t position_stride = static_cast<std::int64_t>(padded) * c_total;
  for (int t = 0; t < padded; ++t) {
    float* tile_out = v + static_cast<std::int64_t>(t) * c_total;
    if (t >= count) {
      for (int p = 0; p < 36; ++p) {
        for (std::int64_t c = 0; c < c_total; c += floats) store(tile_out + p * position_stride + c, vec{});
      }
      continue;
    }
    const TilePlace place = place_of(l, first + t);
    const std::int64_t y0 = place.y - l.pad_top;
    const std::int64_t x0 = place.x - l.pad_left;
    const bool inside = y0 >= 0 && x0 >= 0 && y0 + 6 <= l.height && x0 + 6 <= l.width;
    for (std::int64_t cb = 0; cb < blocks; ++cb) {
      const float* plane = src + (place.image * blocks + cb) * l.height * l.width * floats;
      vec d[6][6];
      for (int i = 0; i < 6; ++i) {
        const std::int64_t y = y0 + i;
        for (int j = 0; j < 6; ++j) {
          const std::int64_t x = x0 + j;
          d[i][j] = inside || (y >= 0 && y < l.height && x >= 0 && x < l.width)
                        ? load(plane + (y * l.width + x) * floats)
                        : vec{};
        }
      }
      vec t1[6][6];  // t1[i][j] = (B^T d)[i][j]
      for (int j = 0; j < 6; ++j) {
        vec column[6];
        vec result[6];
        for (int i = 0; i < 6; ++i) column[i] = d[i][j];
        input_column(column, result);
        for (int i = 0; i < 6; ++i) t1[i][j] = result[i];
      }
      float* out = tile_out + cb * floats;
      for (int i = 0; i < 6; ++i) {
        vec result[6];
        input_column(t1[i], result);  // (B^T d B)[i][k] = (B^T (B^T d)[i]^T)[k]
        for (int k = 0; k < 6; ++k) store(out + (i * 6 + k) * position_stride, result[k]);
      }
    }
  }
}

// rows x (vectors * floats) of M += rows x C of V times C x (vectors * floats) of U.
template <int vectors>
void multiply_block(const float* v, std::int64_t c_total, const float* u, float* m,
                    std::int64_t k_total) {
  vec acc[rows][vectors];
#pragma GCC unroll 8
  for (int r = 0; r < rows; ++r) {
#pragma GCC unroll 8
    for (int k = 0; k < vectors; ++k) acc[r][k] = vec{};
  }
  for (std::int64_t c = 0; c < c_total; ++c) {
    vec w[vectors];
#pragma GCC unroll 8
    for (int k = 0; k < vectors; ++k) w[k] = load(u + (c * vectors + k) * floats);
#pragma GCC unroll 8
    for (int r = 0; r < rows; ++r) {
      const vec x = splat(v[r * c_total + c]);
#pragma GCC unroll 8
      for (int k = 0; k < vectors; ++k) acc[r][k] += x * w[k];
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < rows; ++r) {
#pragma GCC unroll 8
    for (int k = 0; k < vectors; ++k) store(m + r * k_total + k * floats, acc[r][k]);
  }
}

template <int vectors>
void multiply_blocks(const float* v, std::int64_t c_total, const float* u, int padded, float* m,
                     std::int64_t k_total) {
  for (int t = 0; t < padded; t += rows) {
    multiply_block<vectors>(v + t * c_total, c_total, u, m + t * k_total, k_total);
  }
}

void multiply(const WinogradLayer& l, const float* v, const float* u, int padded,
              std::int64_t k_begin, std::int64_t k_end, float* m) {
  const std::int64_t c_total = l.in_channels;
  const std::int64_t k_total = l.out_channels;
  const std::int64_t full = block_vectors * floats;
  for (int p = 0; p < 36; ++p) {
    const float* vp = v + static_cast<std::int64_t>(p) * padded * c_total;
    const float* up = u + p * c_total * k_total;
    float* mp = m + static_cast<std::int64_t>(p) * padded * k_total;
    for (std::int64_t k0 = k_begin; k0 < k_end; k0 += full) {
      const std::int64_t width = k_end - k0 < full ? k_end - k0 : full;
      const float* ub = up + k0 * c_total;
      float* mb = mp + k0;
      switch (width / floats) {
        case 1:
          multiply_blocks<1>(vp, c_total, ub, padded, mb, k_total);
          break;
#if TFPIN_WINOGRAD_FLOATS == 16
        case 2:
          multiply_blocks<2>(vp, c_total, ub, padded, mb, k_total);
          break;
        case 3:
          multiply_blocks<3>(vp, c_total, ub, padded, mb, k_total);
          break;
#endif
        default:
          multiply_blocks<block_vectors>(vp, c_total, ub, padded, mb, k_total);
          break;
      }
    }
  }
}

void transform_output(const WinogradLayer& l, const float* m, const WinogradOutputOps& ops,
                      std::int64_t first, int count, int padded, std::int64_t k_begin,
                      std::int64_t k_end, float* dst) {
  const std::int64_t k_total = l.out_channels;
  const std::int64_t blocks = k_total / floats;
  const std::int64_t position_stride = static_cast<std::int64_t>(padded) * k_total;
  for (int t = 0; t < count; ++t) {
    const TilePlace place = place_of(l, first + t);
    const int rows_here = l.out_height - place.y < 4 ? static_cast<int>(l.out_height - place.y) : 4;
    const int columns_here = l.out_width - place.x < 4 ? static_cast<int>(l.out_width - place.x) : 4;
    const float* tile = m + static_cast<std::int64_t>(t) * k_total;
    for (std::int64_t k = k_begin; k < k_end; k += floats) {
      vec s[4][6];  // s = A^T m
      for (int j = 0; j < 6; ++j) {
        vec column[6];
        vec result[4];
        for (int i = 0; i < 6; ++i) column[i] = load(tile + (i * 6 + j) * position_stride + k);
        output_column(column, result);
        for (int i = 0; i < 4; ++i) s[i][j] = result[i];
      }
      const vec bias = ops.bias != nullptr ? load(ops.bias + k) : vec{};
      float* plane = dst + (place.image * blocks + k / floats) * l.out_height * l.out_width * floats;
      for (int i = 0; i < rows_here; ++i) {
        vec y[4];
        output_column(s[i], y);  // (A^T m A)[i] = A^T s[i]^T
        float* row = plane + ((place.y + i) * l.out_width + place.x) * floats;
        for (int j = 0; j < columns_here; ++j) {
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

}  // namespace

#if TFPIN_WINOGRAD_FLOATS == 16
const WinogradKernels& winograd_kernels_avx512() {
#else
const WinogradKernels& winograd_kernels_avx2() {
#endif
  static const WinogradKernels kernels{floats, block_vectors, transform_input, multiply,
                                       transform_output};
  return kernels;
}

}  // namespace tfpin::engine::detail
