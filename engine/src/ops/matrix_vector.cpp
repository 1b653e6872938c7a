// Inner product of a single image (batch 1, inference): a matrix-vector product whose time is
// the weights streaming from memory (AlexNet's fc6 alone is 151 MB per image). oneDNN 2.6's
// brgemm kernel reads them at about two thirds of the machine's bandwidth; this kernel packs the
// weights once so that each thread reads one sequential stream (blocks of 4 rows x 16 inputs,
// 256 bytes), the pattern hardware prefetchers follow best, and keeps x in L1/L2.
#include "matrix_vector.hpp"

#include <immintrin.h>
#include <omp.h>

#include "common.hpp"

namespace tfpin::engine::detail {

namespace {

constexpr std::int64_t rows_per_block = 4;
constexpr std::int64_t inputs_per_block = 16;  // one AVX-512 vector, two AVX2 vectors

// y[o] for the four rows of block b from their 16-lane partial sums.
void finish_block(const float (&lanes)[rows_per_block][inputs_per_block], const float* bias,
                  float* y, std::int64_t b, bool relu) {
  for (std::int64_t r = 0; r < rows_per_block; ++r) {
    const std::int64_t o = b * rows_per_block + r;
    float v = bias != nullptr ? bias[o] : 0.0f;
    for (float lane : lanes[r]) v += lane;
    y[o] = relu && v < 0.0f ? 0.0f : v;
  }
}

// y[o] for the row blocks [first, last): packed[block][i / 16][row][i % 16]. One AVX-512 vector
// per row and input block.
__attribute__((target("avx512f"))) void matrix_vector_blocks_avx512(
    const float* packed, const float* x, const float* bias, float* y, std::int64_t inputs,
    std::int64_t first, std::int64_t last, bool relu) {
  const std::int64_t block_floats = rows_per_block * inputs;
  for (std::int64_t b = first; b < last; ++b) {
    const float* w = packed + b * block_floats;
    __m512 acc0 = _mm512_setzero_ps();
    __m512 acc1 = _mm512_setzero_ps();
    __m512 acc2 = _mm512_setzero_ps();
    __m512 acc3 = _mm512_setzero_ps();
    for (std::int64_t i = 0; i < inputs; i += inputs_per_block) {
      const __m512 xv = _mm512_loadu_ps(x + i);
      acc0 = _mm512_fmadd_ps(_mm512_load_ps(w), xv, acc0);
      acc1 = _mm512_fmadd_ps(_mm512_load_ps(w + 16), xv, acc1);
      acc2 = _mm512_fmadd_ps(_mm512_load_ps(w + 32), xv, acc2);
      acc3 = _mm512_fmadd_ps(_mm512_load_ps(w + 48), xv, acc3);
      w += rows_per_block * inputs_per_block;
    }
    alignas(64) float lanes[rows_per_block][inputs_per_block];
    _mm512_store_ps(lanes[0], acc0);
    _mm512_store_ps(lanes[1], acc1);
    _mm512_store_ps(lanes[2], acc2);
    _mm512_store_ps(lanes[3], acc3);
    finish_block(lanes, bias, y, b, relu);
  }
}

// The same on AVX2: the same packing (one sequential stream whatever the ISA), each 16-input
// row piece as two ymm halves, eight independent accumulators.
__attribute__((target("avx2,fma"))) void matrix_vector_blocks_avx2(
    const float* packed, const float* x, const float* bias, float* y, std::int64_t inputs,
    std::int64_t first, std::int64_t last, bool relu) {
  const std::int64_t block_floats = rows_per_block * inputs;
  for (std::int64_t b = first; b < last; ++b) {
    const float* w = packed + b * block_floats;
    __m256 acc[rows_per_block][2];
    for (auto& row : acc) row[0] = row[1] = _mm256_setzero_ps();
    for (std::int64_t i = 0; i < inputs; i += inputs_per_block) {
      const __m256 x0 = _mm256_loadu_ps(x + i);
      const __m256 x1 = _mm256_loadu_ps(x + i + 8);
      for (std::int64_t r = 0; r < rows_per_block; ++r) {
        acc[r][0] = _mm256_fmadd_ps(_mm256_load_ps(w + 16 * r), x0, acc[r][0]);
        acc[r][1] = _mm256_fmadd_ps(_mm256_load_ps(w + 16 * r + 8), x1, acc[r][1]);
      }
      w += rows_per_block * inputs_per_block;
    }
    alignas(64) float lanes[rows_per_block][inputs_per_block];
    for (std::int64_t r = 0; r < rows_per_block; ++r) {
      _mm256_store_ps(lanes[r], acc[r][0]);
      _mm256_store_ps(lanes[r] + 8, acc[r][1]);
    }
    finish_block(lanes, bias, y, b, relu);
  }
}

using BlocksKernel = void (*)(const float*, const float*, const float*, float*, std::int64_t,
                              std::int64_t, std::int64_t, bool);

struct Variant {
  BlocksKernel kernel = nullptr;  // none: the ISA has neither (oneDNN runs the inner product)
  const char* name = "";
};

// The widest variant the effective ISA allows (oneDNN's, so DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA
// caps this kernel too). oneDNN's avx2 does not promise FMA (a VM may hide it): asked separately.
Variant variant_for_effective_isa() {
  if (onednn::effective_isa_includes(dnnl::cpu_isa::avx512_core)) {
    return {matrix_vector_blocks_avx512, "avx512"};
  }
  static const bool fma = __builtin_cpu_supports("fma") != 0;
  if (onednn::effective_isa_includes(dnnl::cpu_isa::avx2) && fma) {
    return {matrix_vector_blocks_avx2, "avx2"};
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

  // Pack: block b, input block k, row r, lane j <- w[4 b + r][16 k + j].
  std::vector<float> packed(static_cast<std::size_t>(outputs * inputs));
  const std::vector<float>& w = *weights.data;
  std::size_t at = 0;
  for (std::int64_t b = 0; b < outputs / rows_per_block; ++b) {
    for (std::int64_t k = 0; k < inputs; k += inputs_per_block) {
      for (std::int64_t r = 0; r < rows_per_block; ++r) {
        const float* row = &w[static_cast<std::size_t>((b * rows_per_block + r) * inputs + k)];
        for (std::int64_t j = 0; j < inputs_per_block; ++j) packed[at++] = row[j];
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
      blocks_kernel(packed_weights, xv, bias, y, inputs, blocks * t / team,
                    blocks * (t + 1) / team, relu);
    }
  };
  l.add_kernel_step(std::move(step));
  l.define(n.output, y_md, dst);
  l.report.flops += 2.0 * static_cast<double>(outputs) * static_cast<double>(inputs);
}

}  // namespace tfpin::engine::detail
