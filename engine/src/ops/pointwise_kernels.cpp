// The vectorised part of tfpin's 1x1 convolution (pointwise_kernels.hpp). One source for every
// ISA: meson builds it once per vector width (TFPIN_WINOGRAD_FLOATS 8 with -mavx2 -mfma, 16 with
// -mavx512f), with GCC's vector extensions for the arithmetic.
//
// Nothing here may use an inline function or template from a header: the linker keeps one copy of
// each, and the AVX-512 build's could then run on an AVX2 machine. Everything is our own, in an
// unnamed namespace (vector_isa.hpp's too), except the entry points.
#include "pointwise_kernels.hpp"

#include "vector_isa.hpp"

namespace tfpin::engine::detail {
namespace {

constexpr int rows = 6;  // output pixels per micro-kernel call
// How far ahead of a call the first block of output channels fetches its input: that block reads
// each pixel from memory, the later ones find it in L2. 12 pixels (two calls) ran batch 32's 1x1
// layers of ResNet-50 3-7% faster on Zen 5 than no fetch (24 and 48 no better).
constexpr int input_prefetch_pixels = 12;

// height output pixels x (vectors * floats) output channels: the sum over c_blocks blocks of input
// channels of a pixel's channel (broadcast) times a row of the packed weights (vectors). Pixel r's
// block cb starts at a[r] + block_offsets[cb] (the nChw{V}c plane of the block's channels, from
// the block's tap on); the weights' row c at b + c * width; output vector k of pixel r at
// c[r] + k * c_vector_stride. The first pass over the input channels starts from the bias and
// adds the residual (a leading sum op) after the products, later ones start from the partial sums
// in dst; the last applies the ReLU. While it runs it asks for its share of `next` (the weights
// of the pass after this one, in c_blocks slices of next_slice_lines cache lines; of each slice
// lines first_row, first_row + every, ...) to be brought into L1 (prefetcht0) where it has room
// for both passes, else into L2; with stream_input, also the input input_prefetch_pixels pixels
// ahead.
template <int vectors, int height>
void pixel_rows(const float* const (&a)[rows], const std::int64_t* block_offsets,
                std::int64_t c_blocks, const float* b, std::int64_t width, float* const (&c)[rows],
                std::int64_t c_vector_stride, const float* bias, bool first_pass, bool last_pass,
                bool residual, bool relu, const float* next, std::int64_t next_slice_lines,
                bool next_to_l1, int first_row, int every, bool stream_input) {
  // The residual (in dst before the first pass) is added after the products, not loaded into the
  // accumulators first: its lines come from memory, and the FMAs would wait for them. Asked for
  // now, they arrive while the FMAs run. (Earlier passes' sums, in cache, start the sums.)
  const bool late_residual = first_pass && residual;
  if (late_residual) {
#pragma GCC unroll 8
    for (int k = 0; k < vectors; ++k) {
#pragma GCC unroll 8
      for (int r = 0; r < height; ++r) __builtin_prefetch(c[r] + k * c_vector_stride, 1, 3);
    }
  }
  vec acc[height][vectors];
#pragma GCC unroll 8
  for (int k = 0; k < vectors; ++k) {
    const vec shift = first_pass && bias != nullptr ? load(bias + k * floats) : vec{};
#pragma GCC unroll 8
    for (int r = 0; r < height; ++r) {
      acc[r][k] = first_pass ? shift : load(c[r] + k * c_vector_stride);
    }
  }
  constexpr int line_floats = 64 / sizeof(float);
  const std::int64_t next_lines = next != nullptr ? next_slice_lines : 0;
  for (std::int64_t cb = 0; cb < c_blocks; ++cb) {
    const std::int64_t offset = block_offsets[cb];
    const float* block = b + cb * floats * width;
    if (stream_input) {
#pragma GCC unroll 8
      for (int r = 0; r < height; ++r) {
        __builtin_prefetch(a[0] + offset + (input_prefetch_pixels + r) * floats, 0, 3);
      }
    }
    for (std::int64_t line = first_row; line < next_lines; line += every) {
      const float* at = next + (cb * next_slice_lines + line) * line_floats;
      if (next_to_l1) {
        __builtin_prefetch(at, 0, 3);
      } else {
        __builtin_prefetch(at, 0, 2);
      }
    }
#pragma GCC unroll 16
    for (int s = 0; s < floats; ++s) {
      vec w[vectors];
#pragma GCC unroll 8
      for (int k = 0; k < vectors; ++k) w[k] = load(block + s * width + k * floats);
#pragma GCC unroll 8
      for (int r = 0; r < height; ++r) {
        const vec x = splat(a[r][offset + s]);
#pragma GCC unroll 8
        for (int k = 0; k < vectors; ++k) acc[r][k] += x * w[k];
      }
    }
  }
#pragma GCC unroll 8
  for (int k = 0; k < vectors; ++k) {
#pragma GCC unroll 8
    for (int r = 0; r < height; ++r) {
      vec y = acc[r][k];
      if (late_residual) y += load(c[r] + k * c_vector_stride);
      if (last_pass && relu) y = y > vec{} ? y : vec{};
      store(c[r] + k * c_vector_stride, y);
    }
  }
}

// One block of output channels (vectors wide, starting at k0) for pixels [first, end), over the
// c_blocks blocks of input channels of one pass (block cb block_offsets[cb] floats from a pixel's
// first), weights b (the pass's rows of the block); next: the next_floats weights of the pass
// after it (or null).
template <int vectors>
void channel_block(const PointwiseLayer& l, const float* src, const float* b,
                   const WinogradOutputOps& ops, std::int64_t first, std::int64_t end,
                   std::int64_t k0, const std::int64_t* block_offsets, std::int64_t c_blocks,
                   bool first_pass, bool last_pass, const float* next, std::int64_t next_floats,
                   bool next_to_l1, bool stream_input, float* dst) {
  if (end <= first) return;
  const std::int64_t c_total = l.in_channels;
  const std::int64_t out_pixels = l.out_height * l.out_width;
  const std::int64_t out_plane = out_pixels * floats;
  const std::int64_t in_image = c_total * l.height * l.width;
  const std::int64_t out_image = l.out_channels * out_pixels;
  const std::int64_t width = vectors * floats;
  const float* bias = ops.bias != nullptr ? ops.bias + k0 : nullptr;
  const bool residual = ops.count > 0 && ops.ops[0] == WinogradPostOp::sum;
  const bool relu = ops.count > (residual ? 1 : 0);
  constexpr std::int64_t line_floats = 64 / sizeof(float);
  const std::int64_t next_slice_lines = (next_floats / line_floats + c_blocks - 1) / c_blocks;
  const int calls = static_cast<int>((end - first + rows - 1) / rows);
  // Where pixel `first` is, then advanced pixel by pixel (no division per call). Offsets, not
  // pointers: past the last pixel they may point beyond the buffers.
  std::int64_t image = first / out_pixels;
  std::int64_t y = first % out_pixels / l.out_width;
  std::int64_t x = first % out_pixels % l.out_width;
  float* c_base = dst + (k0 / floats) * out_plane;
  std::int64_t a_at = image * in_image + (y * l.stride_h * l.width + x * l.stride_w) * floats;
  std::int64_t c_at = image * out_image + (y * l.out_width + x) * floats;
  const std::int64_t a_step = l.stride_w * floats;
  // From past a row's last pixel to the next row's first, and from past an image's last row.
  const std::int64_t a_row_skip = (l.stride_h * l.width - l.out_width * l.stride_w) * floats;
  const std::int64_t a_image_skip = in_image - l.out_height * l.stride_h * l.width * floats;
  const std::int64_t c_image_skip = out_image - out_plane;
  // The pixels shared out evenly among the calls: a short last call (49 pixels: 8 x 6 + 1) waits
  // on its few accumulators' FMA latency; 4 x 6 + 5 x 5 does not.
  const std::int64_t pixels = end - first;
  const int even_share = static_cast<int>(pixels / calls);
  const int longer = static_cast<int>(pixels % calls);  // calls of one pixel more
  for (int call = 0; call < calls; ++call) {
    const int count = even_share + (call < longer ? 1 : 0);
    const float* a[rows] = {};
    float* c[rows] = {};
    for (int r = 0; r < rows; ++r) {
      if (r >= count) {  // (not read: the call takes `count` rows)
        a[r] = a[0];
        c[r] = c[0];
        continue;
      }
      a[r] = src + a_at;
      c[r] = c_base + c_at;
      a_at += a_step;
      c_at += floats;
      if (++x == l.out_width) {
        x = 0;
        a_at += a_row_skip;
        if (++y == l.out_height) {
          y = 0;
          a_at += a_image_skip;
          c_at += c_image_skip;
        }
      }
    }
    auto rows_of = [&]<int height>() {
      pixel_rows<vectors, height>(a, block_offsets, c_blocks, b, width, c, out_plane, bias,
                                  first_pass, last_pass, residual, relu, next, next_slice_lines,
                                  next_to_l1, call, calls, stream_input);
    };
    switch (count) {
      case 1:
        rows_of.template operator()<1>();
        break;
      case 2:
        rows_of.template operator()<2>();
        break;
      case 3:
        rows_of.template operator()<3>();
        break;
      case 4:
        rows_of.template operator()<4>();
        break;
      case 5:
        rows_of.template operator()<5>();
        break;
      default:
        rows_of.template operator()<rows>();
        break;
    }
  }
}

// Input channels per pass of a block `width` floats wide (pointwise_pass_bytes of its weights).
std::int64_t pass_of(std::int64_t width) {
  const std::int64_t pass = pointwise_pass_bytes / (width * 4) / floats * floats;
  return pass < floats ? floats : pass;
}

// Blocks of input channels in a pass at most (one vector of output channels wide).
constexpr std::int64_t max_pass_blocks = pointwise_pass_bytes / (floats * 4) / floats;
static_assert(max_pass_blocks >= 1, "pass_of() clamps a pass to one block");

void run(const PointwiseLayer& l, const float* src, const float* packed,
         const WinogradOutputOps& ops, std::int64_t first, std::int64_t end, std::int64_t k_begin,
         std::int64_t k_end, bool next_to_l1, float* dst) {
  const std::int64_t full = block_vectors * floats;
  const std::int64_t c_total = l.in_channels;
  const std::int64_t in_plane = l.height * l.width * floats;
  // The sum runs over rows (tap, input channel), tap-major, as the packed weights hold them; a
  // pass may end in one tap and go on in the next (a 3x3 layer of 128 channels has passes of
  // 96 over its 1152 rows, not 96 and 32 per tap).
  const std::int64_t reduction = l.kernel_h * l.kernel_w * c_total;
  std::int64_t block_offsets[max_pass_blocks];
  for (std::int64_t k0 = k_begin; k0 < k_end; k0 += full) {
    const std::int64_t width = k_end - k0 < full ? k_end - k0 : full;
    const std::int64_t pass = pass_of(width);
    const float* block = packed + k0 * reduction;
    for (std::int64_t r_begin = 0; r_begin < reduction; r_begin += pass) {
      const std::int64_t r_end = reduction - r_begin < pass ? reduction : r_begin + pass;
      const std::int64_t c_blocks = (r_end - r_begin) / floats;
      for (std::int64_t cb = 0; cb < c_blocks; ++cb) {
        const std::int64_t row = r_begin + cb * floats;
        const std::int64_t tap = row / c_total;
        block_offsets[cb] = ((tap / l.kernel_w) * l.width + tap % l.kernel_w) * floats +
                            (row % c_total) / floats * in_plane;
      }
      const float* b = block + r_begin * width;
      // The pass after this one, fetched while this one runs: the block's next rows (a block's
      // rows are contiguous), or the next block's first.
      const float* next = nullptr;
      std::int64_t next_floats = 0;
      if (r_end < reduction) {
        next = block + r_end * width;
        next_floats = ((reduction - r_end < pass ? reduction : r_end + pass) - r_end) * width;
      } else if (k0 + width < k_end) {
        const std::int64_t next_width = k_end - k0 - width < full ? k_end - k0 - width : full;
        const std::int64_t next_pass = pass_of(next_width);
        next = packed + (k0 + width) * reduction;
        next_floats = (reduction < next_pass ? reduction : next_pass) * next_width;
      }
      auto block_of = [&]<int vectors>() {
        channel_block<vectors>(l, src, b, ops, first, end, k0, block_offsets, c_blocks,
                               r_begin == 0, r_end == reduction, next, next_floats, next_to_l1,
                               k0 == k_begin, dst);
      };
      switch (width / floats) {
        case 1:
          block_of.template operator()<1>();
          break;
#if TFPIN_WINOGRAD_FLOATS == 16
        case 2:
          block_of.template operator()<2>();
          break;
        case 3:
          block_of.template operator()<3>();
          break;
#endif
        default:
          block_of.template operator()<block_vectors>();
          break;
      }
    }
  }
}

constexpr PointwiseKernels table{floats, block_vectors, run};

}  // namespace

#if TFPIN_WINOGRAD_FLOATS == 16
const PointwiseKernels* pointwise_kernels_avx512() { return &table; }
#else
const PointwiseKernels* pointwise_kernels_avx2() { return &table; }
#endif

}  // namespace tfpin::engine::detail
