// tfpin's own Winograd convolutions F(4x4, 3x3) and F(6x6, 3x3) (Lavin and Gray, "Fast
// Algorithms for Convolutional Neural Networks", 2015): Y = A^T [(G g G^T) . (B^T d B)] A per
// m x m output tile, (m + 2)^2 products per tile and channel pair where the direct kernel does
// 9 m^2. oneDNN 2.x has F(4x4, 3x3) for AVX-512 only and oneDNN 3.x none; these run on AVX2 and
// AVX-512 from one source (winograd_kernels.cpp) and are timed against oneDNN's kernels like
// theirs against each other.
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

const WinogradKernels* kernels_for(std::int64_t block, int tile) {
  if (block == 16 && __builtin_cpu_supports("avx512f")) return &winograd_kernels_avx512(tile);
  if (block == 8 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return &winograd_kernels_avx2(tile);
  }
  return nullptr;
}

int positions_of(int tile) { return (tile + 2) * (tile + 2); }

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

  [[nodiscard]] std::int64_t tile_blocks() const {
    return (tiles + tile_block - 1) / tile_block;
  }
  // Output channels [begin, end) of part `part`, on whole blocks of the micro-kernel.
  [[nodiscard]] std::pair<std::int64_t, std::int64_t> channels(std::int64_t part) const {
    const std::int64_t full = std::int64_t{kernels->max_block_vectors} * kernels->vector_floats;
    const std::int64_t blocks = (layer.out_channels + full - 1) / full;
    const std::int64_t begin = std::min(layer.out_channels, blocks * part / k_parts * full);
    const std::int64_t end = std::min(layer.out_channels, blocks * (part + 1) / k_parts * full);
    return {begin, end};
  }

  void run(const float* src, const float* u, const float* bias, float* dst,
           std::byte* scratch) const {
    const std::int64_t items = tile_blocks() * k_parts;
    auto* scratch_floats = reinterpret_cast<float*>(scratch);
#pragma omp parallel num_threads(threads)
    {
      const auto thread = static_cast<std::int64_t>(omp_get_thread_num());
      const auto team = static_cast<std::int64_t>(omp_get_num_threads());
      float* v = scratch_floats + thread * scratch_floats_per_thread;
      float* m = v + std::int64_t{positions_of(kernels->tile)} * tile_block * layer.in_channels;
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
        kernels->multiply(layer, v, u, padded, k_begin, k_end, m);
        kernels->output(layer, m, with_bias, first, count, padded, k_begin, k_end, dst);
      }
    }
  }
};

// G g G^T for every output and input channel pair, in U's layout (winograd_kernels.hpp). In double:
// the transforms' fractions are not exact in float.
std::vector<float> transform_weights(const std::vector<float>& oihw, std::int64_t k_total,
                                     std::int64_t c_total, std::int64_t block_width, int tile) {
  using Row = std::array<double, 3>;
  // F(4x4, 3x3): points 0, 1, -1, 2, -2, infinity.
  static constexpr std::array<Row, 6> g4 = {{{1.0 / 4, 0, 0},
                                             {-1.0 / 6, -1.0 / 6, -1.0 / 6},
                                             {-1.0 / 6, 1.0 / 6, -1.0 / 6},
                                             {1.0 / 24, 1.0 / 12, 1.0 / 6},
                                             {1.0 / 24, -1.0 / 12, 1.0 / 6},
                                             {0, 0, 1}}};
  // F(6x6, 3x3): points 0, 1, -1, 2, -2, 1/2, -1/2, infinity.
  static constexpr std::array<Row, 8> g6 = {{{1, 0, 0},
                                             {-2.0 / 9, -2.0 / 9, -2.0 / 9},
                                             {-2.0 / 9, 2.0 / 9, -2.0 / 9},
                                             {1.0 / 90, 1.0 / 45, 2.0 / 45},
                                             {1.0 / 90, -1.0 / 45, 2.0 / 45},
                                             {32.0 / 45, 16.0 / 45, 8.0 / 45},
                                             {32.0 / 45, -16.0 / 45, 8.0 / 45},
                                             {0, 0, 1}}};
  const int alpha = tile + 2;
  const Row* g = tile == 6 ? g6.data() : g4.data();
  const std::int64_t positions = alpha * alpha;
  std::vector<float> u(static_cast<std::size_t>(positions * k_total * c_total));
  for (std::int64_t k = 0; k < k_total; ++k) {
    const std::int64_t k0 = k / block_width * block_width;
    const std::int64_t width = std::min(block_width, k_total - k0);
    for (std::int64_t c = 0; c < c_total; ++c) {
      const float* w = &oihw[static_cast<std::size_t>((k * c_total + c) * 9)];
      std::array<Row, 8> gw{};  // G g
      for (int i = 0; i < alpha; ++i) {
        for (int j = 0; j < 3; ++j) {
          for (int r = 0; r < 3; ++r) gw[i][j] += g[i][r] * w[r * 3 + j];
        }
      }
      for (int i = 0; i < alpha; ++i) {
        for (int j = 0; j < alpha; ++j) {
          double value = 0;
          for (int r = 0; r < 3; ++r) value += gw[i][r] * g[j][r];
          const std::int64_t p = i * alpha + j;
          const std::int64_t at = p * c_total * k_total + k0 * c_total + c * width + (k - k0);
          u[static_cast<std::size_t>(at)] = static_cast<float>(value);
        }
      }
    }
  }
  return u;
}

// One kernel as an alternative of the step: F(tile x tile, 3x3) with these kernels.
void add_alternative(Lowering& l, const Node& n, Step& step, const WinogradLayer& shape,
                     const WinogradKernels* kernels, const WinogradOutputOps& ops) {
  const int tile = kernels->tile;
  const std::int64_t positions = positions_of(tile);
  auto conv = std::make_shared<WinogradConvolution>();
  WinogradLayer& layer = conv->layer;
  layer = shape;
  layer.tiles_high = (layer.out_height + tile - 1) / tile;
  layer.tiles_wide = (layer.out_width + tile - 1) / tile;
  conv->kernels = kernels;
  conv->ops = ops;
  conv->has_bias = n.inputs.size() > 2;
  conv->threads = std::max(1u, l.step_threads);
  conv->tiles = layer.batch * layer.tiles_high * layer.tiles_wide;
  // The tile block: V and M within tile_block_bytes, and at least one block per thread.
  const std::int64_t rows = winograd_tile_rows;
  const std::int64_t bytes_per_tile = positions * 4 * (layer.in_channels + layer.out_channels);
  // Past the cache's share, big layers (512 channels in and out) still want more tiles per block:
  // all of U streams from memory once per block, V and M twice, so blocks of
  // C K / (4 (C + K)) tiles keep U's traffic below half of theirs (ResNet-50's last 3x3 layers
  // ran 1.5x faster so).
  const std::int64_t fitting = tile_block_bytes / bytes_per_tile;
  const std::int64_t amortising = layer.in_channels * layer.out_channels /
                                  (4 * (layer.in_channels + layer.out_channels));
  std::int64_t tile_block =
      std::clamp(std::max(fitting, amortising) / rows * rows, rows, max_tile_block);
  // Bounded scratch: a 2048-channel layer would otherwise take 200 MB per thread.
  tile_block = std::min(tile_block, std::max(rows, max_scratch_bytes / bytes_per_tile / rows * rows));
  const std::int64_t per_thread = (conv->tiles + conv->threads - 1) / conv->threads;
  tile_block = std::min(tile_block, (per_thread + rows - 1) / rows * rows);
  conv->tile_block = static_cast<int>(tile_block);
  // Fewer tile blocks than threads (batch 1, small images): the threads share output channels.
  if (conv->tile_blocks() < conv->threads) {
    conv->k_parts = (conv->threads + conv->tile_blocks() - 1) / conv->tile_blocks();
  }
  conv->scratch_floats_per_thread =
      (positions * tile_block * (layer.in_channels + layer.out_channels) + 15) / 16 * 16;

  const Value& weights = l.ir.values[static_cast<std::size_t>(n.inputs[1])];
  const std::int64_t block_width = std::int64_t{kernels->max_block_vectors} * kernels->vector_floats;
  const md_t u_md({positions * layer.out_channels * layer.in_channels},
                  dnnl::memory::data_type::f32, tag::x);
  Alternative alt;
  alt.args.push_back(step.args.front());  // src
  alt.args.push_back(Arg::in(
      DNNL_ARG_WEIGHTS,
      l.constant_values(transform_weights(*weights.data, layer.out_channels, layer.in_channels,
                                          block_width, tile),
                        u_md, u_md, fmt::format("{}:winograd_{}x3_weights", n.name, tile)),
      u_md));
  if (conv->has_bias) alt.args.push_back(step.args[2]);
  alt.args.push_back(step.args.back());  // dst
  alt.scratchpad_bytes = static_cast<std::uint64_t>(conv->scratch_floats_per_thread) *
                         conv->threads * sizeof(float);
  alt.impl = fmt::format("tfpin_wino_{}x3:{}", tile, kernels->vector_floats == 16 ? "avx512" : "avx2");
  alt.kernel = [conv](const KernelCall& call) {
    const auto& d = call.data;
    conv->run(static_cast<const float*>(d[0]), static_cast<const float*>(d[1]),
              conv->has_bias ? static_cast<const float*>(d[2]) : nullptr,
              static_cast<float*>(d.back()), call.scratch);
  };
  step.alternatives.push_back(std::move(alt));
}

}  // namespace

bool add_winograd_alternative(Lowering& l, int node, Step& step, const md_t& src_md,
                              const md_t& dst_md) {
  Node& n = node_of(l.ir, node);
  if (!l.options.winograd || l.training() || !winograd_shape(l.ir, node)) return false;
  const auto& a = std::get<Conv2D>(n.attrs);
  const Dims& xd = value_of(l.ir, n.inputs[0]).dims;
  const Dims& wd = value_of(l.ir, n.inputs[1]).dims;
  const Dims& od = value_of(l.ir, n.output).dims;
  const std::int64_t block = onednn::native_channel_block();
  const WinogradKernels* kernels = kernels_for(block, 4);
  if (kernels == nullptr || xd[1] % block != 0 || wd[0] % block != 0) return false;
  const tag blocked = block == 16 ? tag::nChw16c : tag::nChw8c;
  if (src_md != md_t(to_dnnl(xd), dnnl::memory::data_type::f32, blocked) ||
      dst_md != md_t(to_dnnl(od), dnnl::memory::data_type::f32, blocked)) {
    return false;
  }
  WinogradOutputOps ops;
  for (const PostOp& p : n.post_ops) {
    if (p.kind == PostOp::Kind::eltwise || ops.count == 4) return false;
    ops.ops[ops.count++] = p.kind == PostOp::Kind::sum ? WinogradPostOp::sum : WinogradPostOp::relu;
  }

  WinogradLayer layer;
  layer.batch = xd[0];
  layer.in_channels = xd[1];
  layer.height = xd[2];
  layer.width = xd[3];
  layer.out_channels = wd[0];
  layer.out_height = od[2];
  layer.out_width = od[3];
  layer.pad_top = a.padding[0];
  layer.pad_left = a.padding[1];
  // Both tile sizes, timed: F(6x6) does 1.8 multiplications per output where F(4x4) does 2.25,
  // with more transform work and rounding, and more tiles past the image's edge on small images.
  add_alternative(l, n, step, layer, kernels, ops);
  add_alternative(l, n, step, layer, kernels_for(block, 6), ops);
  return true;
}

}  // namespace tfpin::engine::detail
