// The vectorised parts of training's batch norm + ReLU + max pooling step
// (batch_norm_pool_kernels.hpp). One source for every ISA, built once per vector width like
// winograd_kernels.cpp, and under the same rule: nothing from a header's inline functions or
// templates (the linker would keep one copy, possibly the AVX-512 one on an AVX2 machine).
#include "batch_norm_pool_kernels.hpp"

#include <immintrin.h>

#ifndef TFPIN_WINOGRAD_FLOATS
#error "build with TFPIN_WINOGRAD_FLOATS=8 (AVX2) or 16 (AVX-512)"
#endif

namespace tfpin::engine::detail {
namespace {

constexpr int lanes = TFPIN_WINOGRAD_FLOATS;

// Unaligned and allowed to alias (the buffers are floats and bytes).
typedef float vec __attribute__((vector_size(lanes * 4), aligned(4), may_alias));
typedef int ivec __attribute__((vector_size(lanes * 4)));

inline vec load(const float* p) { return *reinterpret_cast<const vec*>(p); }
inline void store(float* p, vec x) { *reinterpret_cast<vec*>(p) = x; }
// Widening and narrowing by hand: GCC 12 made __builtin_convertvector's a byte at a time. (The
// intrinsics are always inlined, never a linked copy.)
inline ivec load_index(const unsigned char* p) {
#if TFPIN_WINOGRAD_FLOATS == 16
  return reinterpret_cast<ivec>(
      _mm512_maskz_cvtepu8_epi32(0xffff, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
#else
  return reinterpret_cast<ivec>(
      _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
#endif
}
// The index's values (0..255) as bytes: 16 of them with AVX-512, 8 (the low half) with AVX2.
inline __m128i index_bytes(ivec x) {
#if TFPIN_WINOGRAD_FLOATS == 16
  return _mm512_maskz_cvtepi32_epi8(0xffff, reinterpret_cast<__m512i>(x));
#else
  const auto v = reinterpret_cast<__m256i>(x);  // the saturating packs keep 0..255
  const __m128i words = _mm_packus_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  return _mm_packus_epi16(words, words);
#endif
}
inline void store_index(unsigned char* p, ivec x) {
#if TFPIN_WINOGRAD_FLOATS == 16
  _mm_storeu_si128(reinterpret_cast<__m128i*>(p), index_bytes(x));
#else
  _mm_storel_epi64(reinterpret_cast<__m128i*>(p), index_bytes(x));
#endif
}
inline ivec splat_int(int x) { return x - ivec{}; }

// Non-temporal stores, for outputs read again only much later (or never from the cache): no
// read of the line before it is written. Aligned addresses only: a vector for the floats, the
// index's bytes for the index.
inline void stream(float* p, vec x) {
#if TFPIN_WINOGRAD_FLOATS == 16
  _mm512_stream_ps(p, reinterpret_cast<__m512>(x));
#else
  _mm256_stream_ps(p, reinterpret_cast<__m256>(x));
#endif
}
inline void stream_index(unsigned char* p, ivec x) {
#if TFPIN_WINOGRAD_FLOATS == 16
  _mm_stream_si128(reinterpret_cast<__m128i*>(p), index_bytes(x));
#else
  _mm_stream_si64(reinterpret_cast<long long*>(p), _mm_cvtsi128_si64(index_bytes(x)));
#endif
}

// The window's rows (or columns) inside the input: [begin, end) of the kernel's.
struct Span {
  int begin;
  int end;
};
inline Span inside(std::int64_t start, int kernel, std::int64_t size) {
  const int begin = start < 0 ? static_cast<int>(-start) : 0;
  const int end = start + kernel > size ? static_cast<int>(size - start) : kernel;
  return {begin, end};
}

void statistics(const BatchNormPoolPlane& plane, const float* x, const float* shift, double* sum,
                double* squares) {
  const BatchNormPoolPlane p = plane;  // a copy: the stores may alias anything
  const vec s = load(shift);
  for (std::int64_t h = 0; h < p.height; ++h) {
    // Two chains per sum: an add's latency, not the loads, would bound one.
    vec a0{}, a1{}, q0{}, q1{};
    const float* row = x + h * p.x_row;
    std::int64_t w = 0;
    for (; w + 2 <= p.width; w += 2) {
      const vec d0 = load(row + w * p.x_pixel) - s;
      const vec d1 = load(row + (w + 1) * p.x_pixel) - s;
      a0 += d0;
      a1 += d1;
      q0 += d0 * d0;
      q1 += d1 * d1;
    }
    if (w < p.width) {
      const vec d = load(row + w * p.x_pixel) - s;
      a0 += d;
      q0 += d * d;
    }
    a0 += a1;
    q0 += q1;
    for (int j = 0; j < lanes; ++j) {
      sum[j] += a0[j];
      squares[j] += q0[j];
    }
  }
}

// `count` adjacent outputs of one row, from ow on: their own maxima, interleaved so that the
// compare-and-select chains (one per output) overlap. `full`: every window has all its columns.
template <int count, bool full, bool streaming>
inline void pool_outputs(const BatchNormPoolPlane& p, const float* x, std::int64_t h0, Span rows,
                         std::int64_t oh, std::int64_t ow, vec mean, vec scale, vec shift, float* y,
                         unsigned char* index, float* x_max) {
  const std::int64_t x_row = p.x_row;
  const std::int64_t x_pixel = p.x_pixel;
  const std::int64_t stride = p.stride_w;
  const int kernel_w = p.kernel_w;
  const std::int64_t w0 = ow * stride - p.pad_left;
  const Span columns = full ? Span{0, kernel_w} : inside(w0, kernel_w, p.width);
  vec best[count];
  vec best_x[count];
  ivec at[count];
  for (int u = 0; u < count; ++u) {
    best[u] = vec{} - __builtin_inff();
    best_x[u] = vec{};
    at[u] = ivec{};
  }
  for (int i = rows.begin; i < rows.end; ++i) {
    const float* row = x + (h0 + i) * x_row + w0 * x_pixel;
    for (int k = columns.begin; k < columns.end; ++k) {
      const ivec tap = splat_int(i * kernel_w + k);
#pragma GCC unroll 4
      for (int u = 0; u < count; ++u) {
        const vec xv = load(row + (u * stride + k) * x_pixel);
        const vec z = scale * (xv - mean) + shift;
        // A NaN wins and stays, as in PyTorch's max pooling.
        const ivec greater = (z > best[u]) | (z != z);
        best[u] = greater ? z : best[u];
        best_x[u] = greater ? xv : best_x[u];
        at[u] = greater ? tap : at[u];
      }
    }
  }
  for (int u = 0; u < count; ++u) {
    const ivec on = best[u] > vec{};
    const ivec nan = best[u] != best[u];  // the ReLU keeps a NaN too
    const std::int64_t out = oh * p.y_row + (ow + u) * p.y_pixel;
    store(y + out, (on | nan) ? best[u] : vec{});  // read next by the following layer
    const ivec where = at[u] | (on & splat_int(batch_norm_pool_active));
    if constexpr (streaming) {
      stream(x_max + out, best_x[u]);
      stream_index(index + out, where);
    } else {
      store(x_max + out, best_x[u]);
      store_index(index + out, where);
    }
  }
}

template <bool streaming>
void forward_with(const BatchNormPoolPlane& plane, const float* x, const float* mean_in,
                  const float* scale_in, const float* shift_in, float* y, unsigned char* index,
                  float* x_max) {
  const vec mean = load(mean_in);
  const vec scale = load(scale_in);
  const vec shift = load(shift_in);
  // A copy: the stores may alias anything, so the compiler would reload the fields after each.
  const BatchNormPoolPlane p = plane;
  constexpr int group = 4;
  for (std::int64_t oh = 0; oh < p.out_height; ++oh) {
    const std::int64_t h0 = oh * p.stride_h - p.pad_top;
    const Span rows = inside(h0, p.kernel_h, p.height);
    std::int64_t ow = 0;
    for (; ow < p.out_width; ++ow) {  // up to the first window with all its columns
      if (ow * p.stride_w - p.pad_left >= 0) break;
      pool_outputs<1, false, streaming>(p, x, h0, rows, oh, ow, mean, scale, shift, y, index,
                                        x_max);
    }
    for (; ow + group <= p.out_width &&
           (ow + group - 1) * p.stride_w - p.pad_left + p.kernel_w <= p.width;
         ow += group) {
      pool_outputs<group, true, streaming>(p, x, h0, rows, oh, ow, mean, scale, shift, y, index,
                                           x_max);
    }
    for (; ow < p.out_width; ++ow) {
      pool_outputs<1, false, streaming>(p, x, h0, rows, oh, ow, mean, scale, shift, y, index,
                                        x_max);
    }
  }
}

void forward(const BatchNormPoolPlane& plane, const float* x, const float* mean, const float* scale,
             const float* shift, float* y, unsigned char* index, float* x_max, bool streaming) {
  if (streaming) {
    forward_with<true>(plane, x, mean, scale, shift, y, index, x_max);
    _mm_sfence();
  } else {
    forward_with<false>(plane, x, mean, scale, shift, y, index, x_max);
  }
}

void gradient_sums(const BatchNormPoolPlane& plane, const float* dy, const unsigned char* index,
                   const float* x_max, const float* mean, double* sum_dy, double* sum_dy_x) {
  const BatchNormPoolPlane p = plane;  // a copy: the stores may alias anything
  const vec m = load(mean);
  const ivec active = splat_int(batch_norm_pool_active);
  for (std::int64_t oh = 0; oh < p.out_height; ++oh) {
    vec s{}, t{};
    for (std::int64_t ow = 0; ow < p.out_width; ++ow) {
      const std::int64_t out = oh * p.y_row + ow * p.y_pixel;
      const ivec on = (load_index(index + out) & active) != ivec{};
      const vec g = on ? load(dy + out) : vec{};
      s += g;
      t += g * (load(x_max + out) - m);
    }
    for (int j = 0; j < lanes; ++j) {
      sum_dy[j] += s[j];
      sum_dy_x[j] += t[j];
    }
  }
}

void backward(const BatchNormPoolPlane& plane, const float* x, const float* dy,
              const unsigned char* index, const float* mean_in, const float* scale_in,
              const float* slope_in, const float* offset_in, float* dx) {
  const BatchNormPoolPlane p = plane;  // a copy: the stores may alias anything
  const vec mean = load(mean_in);
  const vec scale = load(scale_in);
  const vec slope = load(slope_in);
  const vec offset = load(offset_in);
  const ivec active = splat_int(batch_norm_pool_active);
  const ivec where = splat_int(static_cast<int>(batch_norm_pool_active) - 1);
  // Rows get their dense part just before the first window reaching them, so that the routed
  // gradients are added while the row is still in the cache.
  std::int64_t filled = 0;
  auto fill_to = [&](std::int64_t end) {
    for (; filled < end; ++filled) {
      const float* xr = x + filled * p.x_row;
      float* dr = dx + filled * p.x_row;
      for (std::int64_t w = 0; w < p.width; ++w) {
        store(dr + w * p.x_pixel, slope * (load(xr + w * p.x_pixel) - mean) + offset);
      }
    }
  };
  for (std::int64_t oh = 0; oh < p.out_height; ++oh) {
    const std::int64_t h0 = oh * p.stride_h - p.pad_top;
    const Span rows = inside(h0, p.kernel_h, p.height);
    fill_to(h0 + rows.end);
    for (std::int64_t ow = 0; ow < p.out_width; ++ow) {
      const std::int64_t w0 = ow * p.stride_w - p.pad_left;
      const Span columns = inside(w0, p.kernel_w, p.width);
      const std::int64_t out = oh * p.y_row + ow * p.y_pixel;
      const ivec at = load_index(index + out);
      const vec g = (at & active) != ivec{} ? scale * load(dy + out) : vec{};
      const ivec position = at & where;
      for (int i = rows.begin; i < rows.end; ++i) {
        float* row = dx + (h0 + i) * p.x_row + w0 * p.x_pixel;
        for (int k = columns.begin; k < columns.end; ++k) {
          float* d = row + k * p.x_pixel;
          store(d, load(d) + (position == splat_int(i * p.kernel_w + k) ? g : vec{}));
        }
      }
    }
  }
  fill_to(p.height);
}

// a > b ? a : b, and b when either is a NaN (the instruction's rule).
inline vec max_or_second(vec a, vec b) {
#if TFPIN_WINOGRAD_FLOATS == 16
  return reinterpret_cast<vec>(
      _mm512_maskz_max_ps(0xffff, reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(b)));
#else
  return reinterpret_cast<vec>(
      _mm256_max_ps(reinterpret_cast<__m256>(a), reinterpret_cast<__m256>(b)));
#endif
}

// The larger of best and x. Fast: one max instruction, which drops a NaN x. Exact: a NaN x wins
// and a NaN best stays (PyTorch's rule), a compare and a blend more.
template <bool exact>
inline vec larger(vec best, vec x) {
  if constexpr (exact) {
    const ivec greater = (x > best) | (x != x);
    return greater ? x : best;
  } else {
    return max_or_second(x, best);
  }
}

// One output row, separably: each input column's maximum over the window's rows into a buffer
// (columns in the padding are -inf), then each output's over its window's columns there. A 3x3
// window at stride 1 takes 4 maxima per output instead of 8. `fixed_rows` and `fixed_width`
// (when not 0) are the window's rows inside the input and its columns, for unrolled loops.
// Returns, in the fast mode, a probe that is nonzero when a column's sum was a NaN or an
// infinity (a NaN or an infinity read, or an overflow): the row is then redone in the exact
// mode, since the fast maxima drop NaNs.
template <bool exact, int fixed_rows, int fixed_width>
ivec max_pool_row(const BatchNormPoolPlane& p, const float* x, float* y_row, std::int64_t oh) {
  constexpr int buffered = 2 * max_pool_widest + 64;  // input columns
  alignas(64) float columns[buffered * lanes];
  const vec lowest = vec{} - __builtin_inff();
  // Locals: the stores may alias anything, so fields would be reloaded after each.
  const std::int64_t x_row = p.x_row;
  const std::int64_t x_pixel = p.x_pixel;
  const std::int64_t y_pixel = p.y_pixel;
  const std::int64_t width = p.width;
  const std::int64_t out_width = p.out_width;
  const std::int64_t stride = p.stride_w;
  const std::int64_t pad_left = p.pad_left;
  const int kernel_w = fixed_width != 0 ? fixed_width : p.kernel_w;
  const std::int64_t h0 = oh * p.stride_h - p.pad_top;
  const Span rows = inside(h0, p.kernel_h, p.height);
  const float* first_row = x + (h0 + rows.begin) * x_row;
  const int row_count = fixed_rows != 0 ? fixed_rows : rows.end - rows.begin;
  // Outputs per pass: their windows' columns fit the buffer.
  const std::int64_t per_pass = (buffered - kernel_w) / stride + 1;  // kernel_w <= widest
  ivec probe{};
  for (std::int64_t ow0 = 0; ow0 < out_width; ow0 += per_pass) {
    const std::int64_t ow1 = ow0 + per_pass < out_width ? ow0 + per_pass : out_width;
    const std::int64_t w_begin = ow0 * stride - pad_left;
    const std::int64_t w_end = (ow1 - 1) * stride - pad_left + kernel_w;
    for (std::int64_t w = w_begin; w < w_end; ++w) {
      vec m = lowest;
      if (w >= 0 && w < width) {
        const float* column = first_row + w * x_pixel;
        m = load(column);
        vec sum = m;
        for (int i = 1; i < row_count; ++i) {
          const vec v = load(column + i * x_row);
          if constexpr (!exact) sum += v;
          m = larger<exact>(m, v);
        }
        // sum - sum is 0, or a NaN (every bit of the exponent set): ORed bits, no chain of
        // float additions from column to column.
        if constexpr (!exact) probe |= reinterpret_cast<ivec>(sum - sum);
      }
      store(columns + (w - w_begin) * lanes, m);
    }
    for (std::int64_t ow = ow0; ow < ow1; ++ow) {
      const float* window = columns + (ow - ow0) * stride * lanes;
      vec m = load(window);
      for (int k = 1; k < kernel_w; ++k) m = larger<exact>(m, load(window + k * lanes));
      store(y_row + ow * y_pixel, m);
    }
  }
  return probe;
}

// The fast row, unrolled for the common windows (3x3, 2x2, and 3x3 clipped to 2 rows).
ivec fast_max_pool_row(const BatchNormPoolPlane& p, const float* x, float* y_row, std::int64_t oh) {
  const Span rows = inside(oh * p.stride_h - p.pad_top, p.kernel_h, p.height);
  const int count = rows.end - rows.begin;
  if (p.kernel_w == 3 && count == 3) return max_pool_row<false, 3, 3>(p, x, y_row, oh);
  if (p.kernel_w == 3 && count == 2) return max_pool_row<false, 2, 3>(p, x, y_row, oh);
  if (p.kernel_w == 2 && count == 2) return max_pool_row<false, 2, 2>(p, x, y_row, oh);
  return max_pool_row<false, 0, 0>(p, x, y_row, oh);
}

void max_pool(const BatchNormPoolPlane& plane, const float* x, float* y, std::int64_t row_begin,
              std::int64_t row_end) {
  const BatchNormPoolPlane p = plane;  // a copy: the stores may alias anything
  for (std::int64_t oh = row_begin; oh < row_end; ++oh) {
    float* y_row = y + oh * p.y_row;
    const ivec probe = fast_max_pool_row(p, x, y_row, oh);
    bool suspect = false;
    for (int j = 0; j < lanes; ++j) suspect |= probe[j] != 0;
    if (suspect) max_pool_row<true, 0, 0>(p, x, y_row, oh);
  }
}

constexpr BatchNormPoolKernels table = {lanes,         statistics, forward,
                                        gradient_sums, backward,   max_pool};

}  // namespace

#if TFPIN_WINOGRAD_FLOATS == 16
const BatchNormPoolKernels* batch_norm_pool_kernels_avx512() {
#else
const BatchNormPoolKernels* batch_norm_pool_kernels_avx2() {
#endif
  return &table;
}

}  // namespace tfpin::engine::detail
