// tfpin's own 1x1 convolution (pointwise.hpp): the weights packed once, the output cut into
// items of (pixel chunk, output-channel part) shared out among the threads, each item a run of
// the micro-kernel over whole blocks of output channels (pointwise_kernels.cpp).
#include "pointwise.hpp"

#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <memory>

#include "common.hpp"
#include "pointwise_kernels.hpp"

namespace tfpin::engine::detail {

namespace {

// The input rows of a pixel chunk (pixels x C floats) that an item reads once per block of output
// channels: at most a core's L2 (Zen 4 and 5 1 MiB; Zen 3 512 KiB, where they come from L3). On
// ResNet-50's 1x1 layers at batch 1 on Zen 5, 1 MiB ran 3-6% faster than 256 and 512 KiB (one
// chunk and the output channels split instead of several chunks re-reading the weights).
constexpr std::int64_t chunk_bytes = 1 << 20;
constexpr int rows = 6;  // pixels per micro-kernel call (pointwise_kernels.cpp)

// Whether the core's L1 data cache holds two passes of weights, the one in use and the next one
// being fetched (48 KiB: Zen 5, Intel since Ice Lake; not 32 KiB: Zen 3 and 4, Skylake). On Zen
// 5, fetching into L1 rather than L2 ran ResNet-50's 7x7 1x1 layers at batch 1 5-10% faster.
bool l1_holds_two_passes() {
  static const bool holds = sysconf(_SC_LEVEL1_DCACHE_SIZE) >= 2 * pointwise_pass_bytes;
  return holds;
}

const PointwiseKernels* kernels_for(std::int64_t block) {
  if (block == 16 && __builtin_cpu_supports("avx512f")) return pointwise_kernels_avx512();
  if (block == 8 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return pointwise_kernels_avx2();
  }
  return nullptr;
}

struct PointwiseConvolution {
  PointwiseLayer layer;  // with taps: the padded input's height and width
  // Padding (tfpin_direct): each run first copies the input into the scratchpad inside zero
  // borders, and the kernel reads that copy.
  bool padded = false;
  std::int64_t src_height = 0;
  std::int64_t src_width = 0;
  std::int64_t pad_top = 0;
  std::int64_t pad_left = 0;
  const PointwiseKernels* kernels = nullptr;
  WinogradOutputOps ops;
  bool has_bias = false;
  unsigned threads = 1;
  std::int64_t pixels = 0;  // output pixels of all images
  std::int64_t chunk = 0;   // pixels per item
  std::int64_t chunks = 0;
  std::int64_t k_parts = 1;  // output-channel parts per chunk
  bool next_to_l1 = false;   // PointwiseKernels::run's prefetch

  // Output channels per micro-kernel block, and the blocks of the layer.
  [[nodiscard]] std::int64_t block_width() const {
    return std::int64_t{kernels->max_block_vectors} * kernels->vector_floats;
  }
  [[nodiscard]] std::int64_t channel_blocks() const {
    return (layer.out_channels + block_width() - 1) / block_width();
  }
  // Output channels [begin, end) of part `part` of `parts`, on whole blocks of the micro-kernel.
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> channels(std::int64_t part,
                                                               std::int64_t parts) const {
    const std::int64_t blocks = channel_blocks();
    return {std::min(layer.out_channels, blocks * part / parts * block_width()),
            std::min(layer.out_channels, blocks * (part + 1) / parts * block_width())};
  }

  [[nodiscard]] std::uint64_t scratch_bytes() const {
    return padded ? static_cast<std::uint64_t>(layer.batch * layer.in_channels * layer.height *
                                               layer.width) *
                        sizeof(float)
                  : 0;
  }

  // Plane `plane` (an image's block of vector_floats channels) of src into the padded copy.
  void pad_plane(const float* src, std::int64_t plane, float* padded_src) const {
    const std::int64_t v = kernels->vector_floats;
    const float* from = src + plane * src_height * src_width * v;
    float* to = padded_src + plane * layer.height * layer.width * v;
    const std::int64_t row = layer.width * v;
    for (std::int64_t y = 0; y < layer.height; ++y) {
      float* out = to + y * row;
      const std::int64_t iy = y - pad_top;
      if (iy < 0 || iy >= src_height) {
        std::fill(out, out + row, 0.0f);
        continue;
      }
      std::fill(out, out + pad_left * v, 0.0f);
      std::copy(from + iy * src_width * v, from + (iy + 1) * src_width * v, out + pad_left * v);
      std::fill(out + (pad_left + src_width) * v, out + row, 0.0f);
    }
  }

  void run(const float* src, const float* packed, const float* bias, float* dst,
           std::byte* scratch) const {
    WinogradOutputOps with_bias = ops;
    with_bias.bias = has_bias ? bias : nullptr;
    const std::int64_t items = chunks * k_parts;
    auto* padded_src = reinterpret_cast<float*>(scratch);
#pragma omp parallel num_threads(threads)
    {
      const auto thread = static_cast<std::int64_t>(omp_get_thread_num());
      const auto team = static_cast<std::int64_t>(omp_get_num_threads());
      const float* in = src;
      if (padded) {
        const std::int64_t planes = layer.batch * layer.in_channels / kernels->vector_floats;
        for (std::int64_t p = planes * thread / team; p < planes * (thread + 1) / team; ++p) {
          pad_plane(src, p, padded_src);
        }
#pragma omp barrier
        in = padded_src;
      }
      for (std::int64_t item = items * thread / team; item < items * (thread + 1) / team; ++item) {
        const std::int64_t first = item / k_parts * chunk;
        const auto [k_begin, k_end] = channels(item % k_parts, k_parts);
        if (k_begin == k_end) continue;
        kernels->run(layer, in, packed, with_bias, first, std::min(pixels, first + chunk), k_begin,
                     k_end, next_to_l1, dst);
      }
    }
  }
};

// The chunk and the output-channel parts that give the busiest thread the least work, with items
// handed out as run() does (equal runs of consecutive items). A thread's work, in micro-kernel
// calls times output vectors: per item, its pixels rounded up to whole calls, plus a quarter of a
// call's worth per block for streaming the block's weights. Chunks at most chunk_bytes of input;
// among plans within 1% of the best, the largest chunk, then the fewest parts. At batch 1 a 7x7
// layer has 49 pixels, 9 calls: split in output channels both threads work to the end.
void plan(PointwiseConvolution& conv) {
  const std::int64_t threads = conv.threads;
  const std::int64_t blocks = conv.channel_blocks();
  const std::int64_t vector = conv.kernels->vector_floats;
  // An output pixel's share of the input: C floats, stride_h x stride_w pixels of it with taps
  // (a 3x3 stride-2 layer's windows overlap; 1x1 strided layers skip the pixels between).
  const std::int64_t taps = conv.layer.kernel_h * conv.layer.kernel_w;
  const std::int64_t pixel_bytes = conv.layer.in_channels * std::int64_t{sizeof(float)} *
                                   (taps > 1 ? conv.layer.stride_h * conv.layer.stride_w : 1);
  const std::int64_t fitting =
      std::max<std::int64_t>(rows, chunk_bytes / pixel_bytes / rows * rows);
  const std::int64_t largest = std::min(fitting, (conv.pixels + rows - 1) / rows * rows);
  auto busiest = [&](std::int64_t chunk, std::int64_t chunks, std::int64_t parts) {
    const std::int64_t items = chunks * parts;
    double worst = 0;
    for (std::int64_t t = 0; t < threads; ++t) {
      double work = 0;
      for (std::int64_t item = items * t / threads; item < items * (t + 1) / threads; ++item) {
        const std::int64_t pixels = std::min(chunk, conv.pixels - item / parts * chunk);
        const std::int64_t part = item % parts;
        const std::int64_t part_blocks = blocks * (part + 1) / parts - blocks * part / parts;
        // (A narrower last block is fewer vectors: K = 80 with AVX-512 is 4 + 1.)
        const auto [k_begin, k_end] = conv.channels(part, parts);
        work += static_cast<double>(((pixels + rows - 1) / rows) * ((k_end - k_begin) / vector)) +
                0.25 * static_cast<double>(part_blocks * conv.kernels->max_block_vectors);
      }
      worst = std::max(worst, work);
    }
    return worst;
  };
  double best = 0;
  conv.chunk = largest;
  conv.chunks = (conv.pixels + largest - 1) / largest;
  conv.k_parts = 1;
  for (std::int64_t chunk = largest; chunk >= rows; chunk -= rows) {
    const std::int64_t chunks = (conv.pixels + chunk - 1) / chunk;
    for (std::int64_t parts = 1; parts <= std::min(blocks, 4 * threads); ++parts) {
      const double work = busiest(chunk, chunks, parts);
      if (best == 0 || work < 0.99 * best) {
        best = work;
        conv.chunk = chunk;
        conv.chunks = chunks;
        conv.k_parts = parts;
      }
    }
    // Many chunks share out evenly already; smaller ones would only cost more weight streaming.
    if (chunks >= 8 * threads) break;
  }
}

// K x C x taps weights into blocks of output channels: block k0 at k0 * taps * C, [tap][C][width].
void pack_weights(const std::vector<float>& oihw, std::int64_t k_total, std::int64_t c_total,
                  std::int64_t taps, std::int64_t full, float* packed) {
  for (std::int64_t k0 = 0; k0 < k_total; k0 += full) {
    const std::int64_t width = std::min(full, k_total - k0);
    for (std::int64_t t = 0; t < taps; ++t) {
      for (std::int64_t c = 0; c < c_total; ++c) {
        for (std::int64_t j = 0; j < width; ++j) {
          packed[k0 * c_total * taps + (t * c_total + c) * width + j] =
              oihw[static_cast<std::size_t>(((k0 + j) * c_total + c) * taps + t)];
        }
      }
    }
  }
}

// Both alternatives: tfpin_1x1 (kernel 1 x 1, no padding) and tfpin_direct (larger kernels,
// any padding), from the K x C x kernel_h x kernel_w weights.
bool add_alternative(Lowering& l, const Node& n, const std::string& name, Step& step,
                     const std::vector<float>& oihw, std::int64_t kernel_h, std::int64_t kernel_w,
                     bool has_bias, const md_t& src_md, const md_t& dst_md) {
  if (!l.options.own_pointwise || l.training() || n.kind != OpKind::convolution) return false;
  const auto& a = std::get<Conv2D>(n.attrs);
  const bool pointwise = kernel_h == 1 && kernel_w == 1;
  const bool has_padding =
      std::any_of(a.padding.begin(), a.padding.end(), [](std::int64_t p) { return p != 0; });
  if (a.groups != 1 || a.dilation != std::array<std::int64_t, 2>{1, 1} ||
      (pointwise && has_padding) || kernel_h < 1 || kernel_w < 1) {
    return false;
  }
  const auto in = onednn::dims_of(src_md);
  const auto out = onednn::dims_of(dst_md);
  if (in.size() != 4 || out.size() != 4) return false;
  const std::int64_t padded_h = in[2] + a.padding[0] + a.padding[2];
  const std::int64_t padded_w = in[3] + a.padding[1] + a.padding[3];
  const std::int64_t block = channel_sliceable_block(src_md).value_or(0);
  const PointwiseKernels* kernels = block > 1 ? kernels_for(block) : nullptr;
  if (kernels == nullptr || channel_sliceable_block(dst_md).value_or(0) != block ||
      in[1] % block != 0 || out[1] % block != 0 ||
      static_cast<std::int64_t>(oihw.size()) != in[1] * out[1] * kernel_h * kernel_w ||
      padded_h < kernel_h || padded_w < kernel_w ||
      (padded_h - kernel_h) / a.stride[0] + 1 != out[2] ||
      (padded_w - kernel_w) / a.stride[1] + 1 != out[3]) {
    return false;
  }
  // The kernel adds a residual before the first pass over the input channels and applies a ReLU
  // after the last: a sum, then a ReLU, each optional, in that order.
  WinogradOutputOps ops;
  for (const PostOp& p : n.post_ops) {
    const bool sum = p.kind == PostOp::Kind::sum;
    if (p.kind == PostOp::Kind::eltwise || ops.count == 2 || (sum && ops.count > 0) ||
        (!sum && ops.count > 0 && ops.ops[0] == WinogradPostOp::relu)) {
      return false;
    }
    ops.ops[ops.count++] = sum ? WinogradPostOp::sum : WinogradPostOp::relu;
  }

  auto conv = std::make_shared<PointwiseConvolution>();
  conv->layer = {in[0],  in[1],       padded_h,    padded_w, out[1],  out[2],
                 out[3], a.stride[0], a.stride[1], kernel_h, kernel_w};
  conv->padded = has_padding;
  conv->src_height = in[2];
  conv->src_width = in[3];
  conv->pad_top = a.padding[0];
  conv->pad_left = a.padding[1];
  conv->kernels = kernels;
  conv->ops = ops;
  conv->has_bias = has_bias;
  conv->threads = std::max(1u, l.step_threads);
  conv->next_to_l1 = l1_holds_two_passes();
  conv->pixels = out[0] * out[2] * out[3];
  plan(*conv);

  const std::int64_t taps = kernel_h * kernel_w;
  const md_t packed_md({out[1] * in[1] * taps}, dnnl::memory::data_type::f32, tag::x);
  const char* prefix = pointwise ? pointwise_prefix : direct_prefix;
  const auto [packed_buffer, packed] =
      l.new_constant(packed_md, fmt::format("{}:{}_weights", name, prefix));
  pack_weights(oihw, out[1], in[1], taps, conv->block_width(), packed);
  Alternative alt;
  alt.args = step.args;
  alt.args[1] = Arg::in(DNNL_ARG_WEIGHTS, packed_buffer, packed_md);
  alt.impl = fmt::format("{}:{}", prefix, block == 16 ? "avx512" : "avx2");
  alt.scratchpad_bytes = conv->scratch_bytes();
  alt.kernel = [conv](const KernelCall& call) {
    const auto& d = call.data;
    conv->run(static_cast<const float*>(d[0]), static_cast<const float*>(d[1]),
              conv->has_bias ? static_cast<const float*>(d[2]) : nullptr,
              static_cast<float*>(d.back()), call.scratch);
  };
  step.alternatives.push_back(std::move(alt));
  return true;
}

}  // namespace

bool add_pointwise_alternative(Lowering& l, const Node& n, const std::string& name, Step& step,
                               const std::vector<float>& oihw, bool has_bias, const md_t& src_md,
                               const md_t& dst_md) {
  return add_alternative(l, n, name, step, oihw, 1, 1, has_bias, src_md, dst_md);
}

bool add_direct_alternative(Lowering& l, const Node& n, Step& step, const std::vector<float>& oihw,
                            std::int64_t kernel_h, std::int64_t kernel_w, bool has_bias,
                            const md_t& src_md, const md_t& dst_md) {
  if (kernel_h == 1 && kernel_w == 1) return false;
  return add_alternative(l, n, n.name, step, oihw, kernel_h, kernel_w, has_bias, src_md, dst_md);
}

}  // namespace tfpin::engine::detail
