// Inner product of a single image (batch 1, inference): a matrix-vector product whose time is
// the weights streaming from memory (AlexNet's fc6 alone is 151 MB per image). oneDNN 2.6's
// brgemm kernel reads them at about two thirds of the machine's bandwidth; this kernel packs the
// weights once so that each thread reads long sequential runs (blocks of 4 rows x 16 inputs,
// 256 bytes), the pattern hardware prefetchers follow best, and x stays in L1: the inputs are cut
// into tiles of 512 (2 KiB of x, reused every 8 KiB of weights). Untiled, a row block of fc6
// streams 147 KiB between two uses of the same x (36 KiB in all), which falls out of L1 and cost
// about 10% of the read bandwidth.
// Work comes in chunks of 16 row blocks (64 rows, contiguous in the packing). Each thread takes
// its own share's chunks from the front, in memory order, then takes other shares' chunks from
// their back: a thread that starts late or runs on a busier core no longer holds the step (on the
// 2-core VM, the second OpenMP thread started ~25 us late and read ~20% slower, and a static
// split left AlexNet's fc8 at 78% of the read bandwidth).
#include "matrix_vector.hpp"

#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "common.hpp"

namespace tfpin::engine::detail {

namespace {

constexpr std::int64_t rows_per_block = 4;
constexpr std::int64_t inputs_per_block = 16;  // one AVX-512 vector, two AVX2 vectors
constexpr std::int64_t inputs_per_tile = 512;  // the last tile may be shorter (whole blocks)
constexpr std::int64_t blocks_per_chunk = 16;  // the last chunk may be shorter

// Packed order: chunk, tile, row block of the chunk, input block, row, lane. Chunk c begins at
// c * 16 * 4 * inputs; within it, the tile starting at input t0 begins at t0 * 4 * chunk_blocks
// (every earlier tile holds all the chunk's rows), its k-th block at k * 4 * tile_inputs.
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

// y[o] for the rows of one chunk, tile by tile (one RowBlock call per 8 KiB of weights).
template <class RowBlock>
void matrix_vector_chunk(const float* packed, const float* x, const float* bias, float* y,
                         std::int64_t blocks, std::int64_t inputs, std::int64_t chunk, bool relu) {
  const std::int64_t first = chunk * blocks_per_chunk;
  const std::int64_t chunk_blocks = std::min(blocks_per_chunk, blocks - first);
  const float* chunk_weights = packed + first * rows_per_block * inputs;
  for (std::int64_t t0 = 0; t0 < inputs; t0 += inputs_per_tile) {
    const std::int64_t tl = tile_inputs(inputs, t0);
    const float* tile = chunk_weights + t0 * rows_per_block * chunk_blocks;
    for (std::int64_t k = 0; k < chunk_blocks; ++k) {
      float sums[rows_per_block];
      RowBlock::sums(tile + k * rows_per_block * tl, x + t0, tl, sums);
      accumulate_tile(sums, bias, y, first + k, t0 == 0, t0 + tl == inputs, relu);
    }
  }
}

// One thread's share of the chunks, [front, back) packed in one word so that the owner taking
// the front and a thief taking the back never both get the same chunk.
struct alignas(64) Share {
  std::atomic<std::uint64_t> range{0};

  static std::uint64_t pack(std::uint64_t front, std::uint64_t back) { return front << 32 | back; }
  void reset(std::int64_t front, std::int64_t back) {
    range.store(pack(static_cast<std::uint64_t>(front), static_cast<std::uint64_t>(back)),
                std::memory_order_relaxed);
  }
  // The next chunk from the front (owner) or the back (thief); false once the share is empty.
  bool take(bool from_front, std::int64_t* chunk) {
    std::uint64_t r = range.load(std::memory_order_relaxed);
    for (;;) {
      const std::uint64_t front = r >> 32;
      const std::uint64_t back = r & 0xffffffffU;
      if (front >= back) return false;
      const std::uint64_t next = from_front ? pack(front + 1, back) : pack(front, back - 1);
      if (range.compare_exchange_weak(r, next, std::memory_order_relaxed)) {
        *chunk = static_cast<std::int64_t>(from_front ? front : back - 1);
        return true;
      }
    }
  }
};

using ChunkKernel = void (*)(const float*, const float*, const float*, float*, std::int64_t,
                             std::int64_t, std::int64_t, bool);

struct Variant {
  ChunkKernel kernel = nullptr;  // none: the ISA has neither (oneDNN runs the inner product)
  const char* name = "";
};

// The widest variant the effective ISA allows (oneDNN's, so DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA
// caps this kernel too). oneDNN's avx2 does not promise FMA (a VM may hide it): asked separately.
Variant variant_for_effective_isa() {
  if (onednn::effective_isa_includes(dnnl::cpu_isa::avx512_core)) {
    return {matrix_vector_chunk<Avx512RowBlock>, "avx512"};
  }
  static const bool fma = __builtin_cpu_supports("fma") != 0;
  if (onednn::effective_isa_includes(dnnl::cpu_isa::avx2) && fma) {
    return {matrix_vector_chunk<Avx2RowBlock>, "avx2"};
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

  // Pack: chunk c, tile t0, block b of the chunk, input k of the tile in steps of 16, row r,
  // lane j <- w[4 b + r][k + j].
  const std::int64_t blocks = outputs / rows_per_block;
  const md_t flat({outputs * inputs}, dnnl::memory::data_type::f32, tag::x);
  const auto [packed_buffer, packed] = l.new_constant(flat, weights.name + ":packed");
  const std::vector<float>& w = *weights.data;
  std::size_t at = 0;
  for (std::int64_t first = 0; first < blocks; first += blocks_per_chunk) {
    const std::int64_t chunk_end = std::min(blocks, first + blocks_per_chunk);
    for (std::int64_t t0 = 0; t0 < inputs; t0 += inputs_per_tile) {
      const std::int64_t tile_end = t0 + tile_inputs(inputs, t0);
      for (std::int64_t b = first; b < chunk_end; ++b) {
        for (std::int64_t k = t0; k < tile_end; k += inputs_per_block) {
          for (std::int64_t r = 0; r < rows_per_block; ++r) {
            const float* row = &w[static_cast<std::size_t>((b * rows_per_block + r) * inputs + k)];
            for (std::int64_t j = 0; j < inputs_per_block; ++j) packed[at++] = row[j];
          }
        }
      }
    }
  }
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
  step.kernel = [blocks, inputs, has_bias, relu, threads,
                 chunk_kernel = variant.kernel](const KernelCall& call) {
    const auto* xv = static_cast<const float*>(call.data[0]);
    const auto* packed_weights = static_cast<const float*>(call.data[1]);
    const auto* bias = has_bias ? static_cast<const float*>(call.data[2]) : nullptr;
    auto* y = static_cast<float*>(call.data[has_bias ? 3 : 2]);
    const std::int64_t chunks = (blocks + blocks_per_chunk - 1) / blocks_per_chunk;
    // Per call: lanes may run this step at once. Shares for the threads asked for; those of
    // threads the team did not get are taken by the others.
    std::vector<Share> shares(static_cast<std::size_t>(threads));
    for (std::int64_t t = 0; t < threads; ++t) {
      shares[static_cast<std::size_t>(t)].reset(chunks * t / threads, chunks * (t + 1) / threads);
    }
#pragma omp parallel num_threads(threads)
    {
      const auto own = static_cast<std::size_t>(omp_get_thread_num());
      std::int64_t chunk = 0;
      while (shares[own].take(true, &chunk)) {
        chunk_kernel(packed_weights, xv, bias, y, blocks, inputs, chunk, relu);
      }
      for (std::size_t k = 1; k < shares.size(); ++k) {
        Share& other = shares[(own + k) % shares.size()];
        while (other.take(false, &chunk)) {
          chunk_kernel(packed_weights, xv, bias, y, blocks, inputs, chunk, relu);
        }
      }
    }
  };
  l.add_kernel_step(std::move(step));
  l.define(n.output, y_md, dst);
  l.report.flops += 2.0 * static_cast<double>(outputs) * static_cast<double>(inputs);
}

}  // namespace tfpin::engine::detail
