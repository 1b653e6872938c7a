// Inner product of a single image (batch 1, inference): a matrix-vector product whose time is
// the weights streaming from memory (AlexNet's fc6 alone is 151 MB per image). oneDNN 2.6's
// brgemm kernel reads them at about two thirds of the machine's bandwidth; this kernel packs the
// weights once so that each thread reads long sequential runs (blocks of 4 rows x 16 inputs,
// 256 bytes), the pattern hardware prefetchers follow best, and x stays in L1: the inputs are cut
// into tiles of 512 (2 KiB of x, reused every 8 KiB of weights). Untiled, a row block of fc6
// streams 147 KiB between two uses of the same x (36 KiB in all), which falls out of L1 and cost
// about 10% of the read bandwidth.
#include "matrix_vector.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>

#include "common.hpp"

namespace tfpin::engine::detail {

namespace {

constexpr std::int64_t rows_per_block = 4;
constexpr std::int64_t inputs_per_block = 16;  // one AVX-512 vector, two AVX2 vectors
constexpr std::int64_t inputs_per_tile = 512;  // the last tile may be shorter (whole blocks)

// Packed order: tile, row block, input block, row, lane. The tile starting at input t0 begins at
// t0 * outputs (every earlier tile holds all rows), its row block b at b * 4 * tile_inputs.
std::int64_t tile_inputs(std::int64_t inputs, std::int64_t t0) {
  return std::min(inputs_per_tile, inputs - t0);
}

// Adds a tile's four row sums to y (the first tile starts from the bias, the last applies ReLU).
void accumulate_tile(const float (&sums)[rows_per_block], const float* bias, float* y,
                     std::int64_t b, bool first_tile, bool last_tile, bool relu) {
  for (std::int64_t r = 0; r < rows_per_block; ++r) {
    const std::int64_t o = b * rows_per_block + r;
    float v = sums[r] + (first_tile ? (bias != nullptr ? bias[o] : 0.0f) : y[o]);
    if (last_tile && relu && v < 0.0f) v = 0.0f;
    y[o] = v;
  }
}

// The sum of a vector's lanes.
__attribute__((target("avx2"))) float sum_lanes(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Through memory, once per 8 KiB of weights: GCC 12's _mm512_reduce_add_ps, cast and extract
// intrinsics warn of an uninitialized value inside its own header.
__attribute__((target("avx512f"))) float sum_lanes(__m512 v) {
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, v);
  return sum_lanes(_mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8)));
}

// The four row sums of one row block over one tile of n inputs (w: the block's packed tile, x: the
// tile's inputs). One AVX-512 vector per row and input block.
struct Avx512RowBlock {
  __attribute__((target("avx512f"))) static void sums(const float* w, const float* x,
                                                      std::int64_t n,
                                                      float (&out)[rows_per_block]) {
    __m512 acc0 = _mm512_setzero_ps();
    __m512 acc1 = _mm512_setzero_ps();
    __m512 acc2 = _mm512_setzero_ps();
    __m512 acc3 = _mm512_setzero_ps();
    for (std::int64_t i = 0; i < n; i += inputs_per_block) {
      const __m512 xv = _mm512_loadu_ps(x + i);
      acc0 = _mm512_fmadd_ps(_mm512_load_ps(w), xv, acc0);
      acc1 = _mm512_fmadd_ps(_mm512_load_ps(w + 16), xv, acc1);
      acc2 = _mm512_fmadd_ps(_mm512_load_ps(w + 32), xv, acc2);
      acc3 = _mm512_fmadd_ps(_mm512_load_ps(w + 48), xv, acc3);
      w += rows_per_block * inputs_per_block;
    }
    out[0] = sum_lanes(acc0);
    out[1] = sum_lanes(acc1);
    out[2] = sum_lanes(acc2);
    out[3] = sum_lanes(acc3);
  }
};

// The same on AVX2: the same packing (one order whatever the ISA), each 16-input row piece as
// two ymm halves, eight independent accumulators. Named, not an array: at -O2 GCC keeps an
// accumulator array on the stack (a store and reload per FMA), which read the weights about 10%
// slower.
struct Avx2RowBlock {
  __attribute__((target("avx2,fma"))) static void sums(const float* w, const float* x,
                                                       std::int64_t n,
                                                       float (&out)[rows_per_block]) {
    __m256 row0_lo = _mm256_setzero_ps();
    __m256 row0_hi = row0_lo;
    __m256 row1_lo = row0_lo;
    __m256 row1_hi = row0_lo;
    __m256 row2_lo = row0_lo;
    __m256 row2_hi = row0_lo;
    __m256 row3_lo = row0_lo;
    __m256 row3_hi = row0_lo;
    for (std::int64_t i = 0; i < n; i += inputs_per_block) {
      const __m256 x_lo = _mm256_loadu_ps(x + i);
      const __m256 x_hi = _mm256_loadu_ps(x + i + 8);
      row0_lo = _mm256_fmadd_ps(_mm256_load_ps(w), x_lo, row0_lo);
      row0_hi = _mm256_fmadd_ps(_mm256_load_ps(w + 8), x_hi, row0_hi);
      row1_lo = _mm256_fmadd_ps(_mm256_load_ps(w + 16), x_lo, row1_lo);
      row1_hi = _mm256_fmadd_ps(_mm256_load_ps(w + 24), x_hi, row1_hi);
      row2_lo = _mm256_fmadd_ps(_mm256_load_ps(w + 32), x_lo, row2_lo);
      row2_hi = _mm256_fmadd_ps(_mm256_load_ps(w + 40), x_hi, row2_hi);
      row3_lo = _mm256_fmadd_ps(_mm256_load_ps(w + 48), x_lo, row3_lo);
      row3_hi = _mm256_fmadd_ps(_mm256_load_ps(w + 56), x_hi, row3_hi);
      w += rows_per_block * inputs_per_block;
    }
    out[0] = sum_lanes(_mm256_add_ps(row0_lo, row0_hi));
    out[1] = sum_lanes(_mm256_add_ps(row1_lo, row1_hi));
    out[2] = sum_lanes(_mm256_add_ps(row2_lo, row2_hi));
    out[3] = sum_lanes(_mm256_add_ps(row3_lo, row3_hi));
  }
};

// y[o] for the row blocks [first, last), tile by tile (one call per 8 KiB of weights).
template <class RowBlock>
void matrix_vector_blocks(const float* packed, const float* x, const float* bias, float* y,
                          std::int64_t outputs, std::int64_t inputs, std::int64_t first,
                          std::int64_t last, bool relu) {
  for (std::int64_t t0 = 0; t0 < inputs; t0 += inputs_per_tile) {
    const std::int64_t tl = tile_inputs(inputs, t0);
    const float* tile = packed + t0 * outputs;
    for (std::int64_t b = first; b < last; ++b) {
      float sums[rows_per_block];
      RowBlock::sums(tile + b * rows_per_block * tl, x + t0, tl, sums);
      accumulate_tile(sums, bias, y, b, t0 == 0, t0 + tl == inputs, relu);
    }
  }
}

using BlocksKernel = void (*)(const float*, const float*, const float*, float*, std::int64_t,
                              std::int64_t, std::int64_t, std::int64_t, bool);

struct Variant {
  BlocksKernel kernel = nullptr;  // none: the ISA has neither (oneDNN runs the inner product)
  const char* name = "";
};

// The widest variant the effective ISA allows (oneDNN's, so DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA
// caps this kernel too). oneDNN's avx2 does not promise FMA (a VM may hide it): asked separately.
Variant variant_for_effective_isa() {
  if (onednn::effective_isa_includes(dnnl::cpu_isa::avx512_core)) {
    return {matrix_vector_blocks<Avx512RowBlock>, "avx512"};
  }
  static const bool fma = __builtin_cpu_supports("fma") != 0;
  if (onednn::effective_isa_includes(dnnl::cpu_isa::avx2) && fma) {
    return {matrix_vector_blocks<Avx2RowBlock>, "avx2"};
  }
  return {};
}

}  // namespace

bool matrix_vector_applies(const Lowering& l, const Node& n, const Dims& x, const Dims& w) {
  if (l.training() || x[0] != 1 || w[0] % rows_per_block != 0 || w[1] % inputs_per_block != 0) {
    return false;
  }
  for (const PostOp& p : n.post_ops) {
    if (p.kind != PostOp::Kind::relu) return false;
  }
  return variant_for_effective_isa().kernel != nullptr;
}

void lower_matrix_vector(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  const Dims& xd = value_of(l.ir, x).dims;
  const Value& weights = value_of(l.ir, n.inputs[1]);
  const std::int64_t outputs = weights.dims[0];
  const std::int64_t inputs = weights.dims[1];
  const bool has_bias = n.inputs.size() > 2;
  const bool relu = !n.post_ops.empty();

  // Pack: tile t0, block b, input k of the tile in steps of 16, row r, lane j
  // <- w[4 b + r][k + j].
  std::vector<float> packed(static_cast<std::size_t>(outputs * inputs));
  const std::vector<float>& w = *weights.data;
  std::size_t at = 0;
  for (std::int64_t t0 = 0; t0 < inputs; t0 += inputs_per_tile) {
    const std::int64_t tile_end = t0 + tile_inputs(inputs, t0);
    for (std::int64_t b = 0; b < outputs / rows_per_block; ++b) {
      for (std::int64_t k = t0; k < tile_end; k += inputs_per_block) {
        for (std::int64_t r = 0; r < rows_per_block; ++r) {
          const float* row = &w[static_cast<std::size_t>((b * rows_per_block + r) * inputs + k)];
          for (std::int64_t j = 0; j < inputs_per_block; ++j) packed[at++] = row[j];
        }
      }
    }
  }
  const md_t flat({outputs * inputs}, dnnl::memory::data_type::f32, tag::x);
  const int packed_buffer = l.constant_values(packed, flat, flat, weights.name + ":packed");
  // x in plain order (N, I or N, C, H, W row-major: the weights' input order).
  const md_t x_md = plain_md(xd, Layout::nchw);
  const int src = l.read_as(x, x_md);
  const md_t y_md({1, outputs}, dnnl::memory::data_type::f32, tag::ab);
  const int dst = l.new_arena_buffer(y_md, n.name);

  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  const Variant variant = variant_for_effective_isa();
  step.impl = std::string("tfpin:matrix_vector:") + variant.name;
  step.args.push_back(Arg::in(DNNL_ARG_SRC, src, x_md));
  step.args.push_back(Arg::in(DNNL_ARG_WEIGHTS, packed_buffer, flat));
  if (has_bias) {
    const md_t b_md({outputs}, dnnl::memory::data_type::f32, tag::x);
    step.args.push_back(Arg::in(DNNL_ARG_BIAS, l.constant_as(n.inputs[2], b_md, b_md), b_md));
  }
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst, y_md));
  const int threads = static_cast<int>(l.step_threads);
  step.kernel = [outputs, inputs, has_bias, relu, threads,
                 blocks_kernel = variant.kernel](const KernelCall& call) {
    const auto* xv = static_cast<const float*>(call.data[0]);
    const auto* packed_weights = static_cast<const float*>(call.data[1]);
    const auto* bias = has_bias ? static_cast<const float*>(call.data[2]) : nullptr;
    auto* y = static_cast<float*>(call.data[has_bias ? 3 : 2]);
    const std::int64_t blocks = outputs / rows_per_block;
#pragma omp parallel num_threads(threads)
    {
      const std::int64_t t = omp_get_thread_num();
      const std::int64_t team = omp_get_num_threads();
      blocks_kernel(packed_weights, xv, bias, y, outputs, inputs, blocks * t / team,
                    blocks * (t + 1) / team, relu);
    }
  };
  l.add_kernel_step(std::move(step));
  l.define(n.output, y_md, dst);
  l.report.flops += 2.0 * static_cast<double>(outputs) * static_cast<double>(inputs);
}

}  // namespace tfpin::engine::detail
