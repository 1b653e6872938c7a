// Every difference between the oneDNN 2.x and 3.x C++ APIs the engine meets, in one place.
//
// oneDNN 3 removed the operation descriptors (`X::desc`): primitive descriptors are built in one
// call with the engine first and the attributes last, backward ones with the forward hint before the
// attributes. Eltwise and batch norm also want their destination descriptor, pooling its dilation,
// softmax its algorithm; `memory::desc` no longer exposes its C struct (`.data`) but accessors;
// `post_ops::append_eltwise` lost its scale; `sum`/`concat` take the engine first.
// Eltwise: 3.x's hard swish takes alpha and beta (2.x's are fixed), only 3.x has a hard sigmoid.
// The operator files call only the functions below, which have the same meaning on both versions.
// Supported: 2.6 <= version < 4 (meson checks this at configure time, engine/meson.build).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#include <oneapi/dnnl/dnnl_version.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#if DNNL_VERSION_MAJOR < 2 || (DNNL_VERSION_MAJOR == 2 && DNNL_VERSION_MINOR < 6) || \
    DNNL_VERSION_MAJOR > 3
#error "tfpin's engine supports oneDNN 2.6 to 3.x"
#endif

namespace tfpin::engine::detail::onednn {

using md_t = dnnl::memory::desc;
using dims_t = dnnl::memory::dims;
using attr_t = dnnl::primitive_attr;

// The layout of a memory descriptor: blocked (strides + inner blocks) or not.
struct Blocking {
  bool blocked = false;      // format_kind == blocked
  bool any = false;          // format_kind == any
  dims_t dims;               // logical dimensions
  dims_t strides;            // of the outer dimensions (blocked only)
  std::vector<std::pair<int, std::int64_t>> inner;  // (dimension index, block size), outermost first
};

// A convolution's geometry. Dilation as oneDNN counts it: 0 = dense.
struct Window {
  dims_t strides;
  dims_t dilation;
  dims_t padding_l;
  dims_t padding_r;
};

// One oneDNN eltwise algorithm with its parameters; an activation is one or a chain of them
// (hard sigmoid on 2.6).
struct EltwiseStep {
  dnnl::algorithm algorithm = dnnl::algorithm::eltwise_relu;
  float alpha = 0.0f;
  float beta = 0.0f;
};

// oneDNN 2.6 refuses to run a batch norm backward without the shift (which it does not use);
// 3.x refuses to run it with one (it counts its arguments).
inline constexpr bool batch_norm_backward_reads_shift = DNNL_VERSION_MAJOR < 3;

// Whether the vector ISA oneDNN runs on (the CPU's, lowered by DNNL_MAX_CPU_ISA or
// ONEDNN_MAX_CPU_ISA) includes `isa`. tfpin's own kernels and layout choices follow the same cap,
// so that a capped run exercises one ISA family throughout. The dnnl_cpu_isa_t values are bit
// sets in both 2.x and 3.x: an ISA includes another when it has all of its bits.
inline bool effective_isa_includes(dnnl::cpu_isa isa) {
  const auto have = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
  const auto want = static_cast<unsigned>(isa);
  return (have & want) == want;
}

// Channels per block of the blocked layout oneDNN's direct kernels run on for this ISA: nChw16c
// (one zmm register) with AVX-512, nChw8c (one ymm register) below.
inline std::int64_t native_channel_block() {
  return effective_isa_includes(dnnl::cpu_isa::avx512_core) ? 16 : 8;
}

// `pd` and the other implementations oneDNN offers after it, in its order of preference, each
// once: 2.6's iterator yields a kernel again for each earlier descriptor of the same shape
// (ResNet-50's third layer1 convolution got F(2x2, 3x3) and F(4x4, 3x3) three times each). A
// copy keeps its implementation: next_impl() moves only the descriptor it is called on.
template <class PrimitiveDesc>
std::vector<PrimitiveDesc> implementations_from(PrimitiveDesc pd) {
  std::vector<PrimitiveDesc> all;
  std::vector<std::string> seen;
  do {
    std::string impl = pd.impl_info_str();
    if (std::find(seen.begin(), seen.end(), impl) != seen.end()) continue;
    seen.push_back(std::move(impl));
    all.push_back(pd);
  } while (pd.next_impl());
  return all;
}

#if DNNL_VERSION_MAJOR >= 3  // ======================================================= oneDNN 3.x

inline dims_t dims_of(const md_t& md) { return md.get_dims(); }

inline Blocking blocking_of(const md_t& md) {
  Blocking b;
  b.dims = md.get_dims();
  b.any = md.get_format_kind() == dnnl::memory::format_kind::any;
  b.blocked = md.get_format_kind() == dnnl::memory::format_kind::blocked;
  if (b.blocked) {
    b.strides = md.get_strides();
    const dims_t blks = md.get_inner_blks();
    const dims_t idxs = md.get_inner_idxs();
    for (std::size_t k = 0; k < blks.size(); ++k) {
      b.inner.emplace_back(static_cast<int>(idxs[k]), blks[k]);
    }
  }
  return b;
}

inline void append_relu(dnnl::post_ops& ops) {
  ops.append_eltwise(dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
}

inline void append_eltwise(dnnl::post_ops& ops, const EltwiseStep& step) {
  ops.append_eltwise(step.algorithm, step.alpha, step.beta);
}

// x max(0, min(1, alpha x + beta)): 3.x's hard swish takes ONNX's alpha and beta (1/6, 1/2).
inline EltwiseStep hard_swish() { return {dnnl::algorithm::eltwise_hardswish, 1.0f / 6.0f, 0.5f}; }

// max(0, min(1, alpha x + beta)): one algorithm on 3.x.
inline std::vector<EltwiseStep> hard_sigmoid(float alpha, float beta) {
  return {{dnnl::algorithm::eltwise_hardsigmoid, alpha, beta}};
}

inline dnnl::convolution_forward::primitive_desc convolution_forward(
    const dnnl::engine& e, dnnl::prop_kind prop, dnnl::algorithm alg, const md_t& src,
    const md_t& weights, const md_t& bias, const md_t& dst, const Window& w, const attr_t& attr) {
  return {e,   prop,      alg,          src,          weights, bias,
          dst, w.strides, w.dilation, w.padding_l, w.padding_r, attr};
}

// Every implementation oneDNN offers for the convolution, in its order of preference.
inline std::vector<dnnl::convolution_forward::primitive_desc> convolution_forward_implementations(
    const dnnl::engine& e, dnnl::prop_kind prop, dnnl::algorithm alg, const md_t& src,
    const md_t& weights, const md_t& bias, const md_t& dst, const Window& w, const attr_t& attr) {
  return implementations_from(convolution_forward(e, prop, alg, src, weights, bias, dst, w, attr));
}

inline dnnl::convolution_backward_data::primitive_desc convolution_backward_data(
    const dnnl::engine& e, dnnl::algorithm alg, const md_t& diff_src, const md_t& weights,
    const md_t& diff_dst, const Window& w, const dnnl::convolution_forward::primitive_desc& hint,
    const attr_t& attr) {
  return {e,         alg,        diff_src,    weights,     diff_dst, w.strides,
          w.dilation, w.padding_l, w.padding_r, hint,       attr};
}

inline dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights(
    const dnnl::engine& e, dnnl::algorithm alg, const md_t& src, const md_t& diff_weights,
    const md_t& diff_bias, const md_t& diff_dst, const Window& w,
    const dnnl::convolution_forward::primitive_desc& hint, const attr_t& attr) {
  return {e,         alg,        src,         diff_weights, diff_bias, diff_dst, w.strides,
          w.dilation, w.padding_l, w.padding_r, hint,         attr};
}

inline dnnl::inner_product_forward::primitive_desc inner_product_forward(
    const dnnl::engine& e, dnnl::prop_kind prop, const md_t& src, const md_t& weights,
    const md_t& bias, const md_t& dst, const attr_t& attr) {
  return {e, prop, src, weights, bias, dst, attr};
}

inline dnnl::inner_product_backward_data::primitive_desc inner_product_backward_data(
    const dnnl::engine& e, const md_t& diff_src, const md_t& weights, const md_t& diff_dst,
    const dnnl::inner_product_forward::primitive_desc& hint, const attr_t& attr) {
  return {e, diff_src, weights, diff_dst, hint, attr};
}

inline dnnl::inner_product_backward_weights::primitive_desc inner_product_backward_weights(
    const dnnl::engine& e, const md_t& src, const md_t& diff_weights, const md_t& diff_bias,
    const md_t& diff_dst, const dnnl::inner_product_forward::primitive_desc& hint,
    const attr_t& attr) {
  return {e, src, diff_weights, diff_bias, diff_dst, hint, attr};
}

inline dnnl::pooling_forward::primitive_desc pooling_forward(
    const dnnl::engine& e, dnnl::prop_kind prop, dnnl::algorithm alg, const md_t& src,
    const md_t& dst, const dims_t& kernel, const Window& w, const attr_t& attr) {
  return {e, prop, alg, src, dst, w.strides, kernel, w.dilation, w.padding_l, w.padding_r, attr};
}

inline dnnl::pooling_backward::primitive_desc pooling_backward(
    const dnnl::engine& e, dnnl::algorithm alg, const md_t& diff_src, const md_t& diff_dst,
    const dims_t& kernel, const Window& w, const dnnl::pooling_forward::primitive_desc& hint,
    const attr_t& attr) {
  return {e,          alg,         diff_src,    diff_dst, w.strides, kernel,
          w.dilation, w.padding_l, w.padding_r, hint,     attr};
}

inline dnnl::batch_normalization_forward::primitive_desc batch_norm_forward(
    const dnnl::engine& e, dnnl::prop_kind prop, const md_t& src, float epsilon,
    dnnl::normalization_flags flags, const attr_t& attr) {
  return {e, prop, src, src, epsilon, flags, attr};
}

inline dnnl::batch_normalization_backward::primitive_desc batch_norm_backward(
    const dnnl::engine& e, const md_t& diff, const md_t& src, float epsilon,
    dnnl::normalization_flags flags,
    const dnnl::batch_normalization_forward::primitive_desc& hint, const attr_t& attr) {
  return {e, dnnl::prop_kind::backward, diff, diff, src, epsilon, flags, hint, attr};
}

inline dnnl::eltwise_forward::primitive_desc eltwise_forward(const dnnl::engine& e,
                                                             dnnl::prop_kind prop,
                                                             dnnl::algorithm alg, const md_t& src,
                                                             const attr_t& attr) {
  return {e, prop, alg, src, src, 0.0f, 0.0f, attr};
}

inline dnnl::eltwise_backward::primitive_desc eltwise_backward(
    const dnnl::engine& e, dnnl::algorithm alg, const md_t& diff, const md_t& data,
    const dnnl::eltwise_forward::primitive_desc& hint, const attr_t& attr) {
  return {e, alg, diff, diff, data, 0.0f, 0.0f, hint, attr};
}

inline dnnl::eltwise_forward::primitive_desc eltwise_forward(const dnnl::engine& e,
                                                             dnnl::prop_kind prop,
                                                             const EltwiseStep& step,
                                                             const md_t& src, const attr_t& attr) {
  return {e, prop, step.algorithm, src, src, step.alpha, step.beta, attr};
}

inline dnnl::eltwise_backward::primitive_desc eltwise_backward(
    const dnnl::engine& e, const EltwiseStep& step, const md_t& diff, const md_t& data,
    const dnnl::eltwise_forward::primitive_desc& hint, const attr_t& attr) {
  return {e, step.algorithm, diff, diff, data, step.alpha, step.beta, hint, attr};
}

inline dnnl::lrn_forward::primitive_desc lrn_forward(const dnnl::engine& e, const md_t& src,
                                                     dnnl::memory::dim size, float alpha,
                                                     float beta, float k, const attr_t& attr) {
  return {e,    dnnl::prop_kind::forward_inference, dnnl::algorithm::lrn_across_channels,
          src,  src,  size, alpha, beta, k, attr};
}

inline dnnl::softmax_forward::primitive_desc softmax_forward(const dnnl::engine& e,
                                                             const md_t& src, int axis,
                                                             const attr_t& attr) {
  return {e,   dnnl::prop_kind::forward_inference, dnnl::algorithm::softmax_accurate, src, src,
          axis, attr};
}

inline dnnl::binary::primitive_desc binary_add(const dnnl::engine& e, const md_t& src0,
                                               const md_t& src1, const md_t& dst,
                                               const attr_t& attr) {
  return {e, dnnl::algorithm::binary_add, src0, src1, dst, attr};
}

// src1 may have 1 in any dimension (broadcast).
inline dnnl::binary::primitive_desc binary(const dnnl::engine& e, dnnl::algorithm alg,
                                           const md_t& src0, const md_t& src1, const md_t& dst,
                                           const attr_t& attr) {
  return {e, alg, src0, src1, dst, attr};
}

// Sums src over the dimensions where dst has 1.
inline dnnl::reduction::primitive_desc reduction_sum(const dnnl::engine& e, const md_t& src,
                                                     const md_t& dst, const attr_t& attr) {
  return {e, dnnl::algorithm::reduction_sum, src, dst, 0.0f, 0.0f, attr};
}

inline dnnl::sum::primitive_desc sum(const dnnl::engine& e, const md_t& dst,
                                     const std::vector<float>& scales,
                                     const std::vector<md_t>& srcs, const attr_t& attr) {
  return {e, dst, scales, srcs, attr};
}

inline dnnl::concat::primitive_desc concat(const dnnl::engine& e, int axis,
                                           const std::vector<md_t>& srcs, const attr_t& attr) {
  return {e, axis, srcs, attr};
}

inline dnnl::concat::primitive_desc concat(const dnnl::engine& e, const md_t& dst, int axis,
                                           const std::vector<md_t>& srcs, const attr_t& attr) {
  return {e, dst, axis, srcs, attr};
}

#else  // ==================================================================== oneDNN 2.6 / 2.7

inline dims_t dims_of(const md_t& md) { return md.dims(); }

inline Blocking blocking_of(const md_t& md) {
  const dnnl_memory_desc_t& d = md.data;
  Blocking b;
  b.dims.assign(d.dims, d.dims + d.ndims);
  b.any = d.format_kind == dnnl_format_kind_any;
  b.blocked = d.format_kind == dnnl_blocked;
  if (b.blocked) {
    const dnnl_blocking_desc_t& blocking = d.format_desc.blocking;
    b.strides.assign(blocking.strides, blocking.strides + d.ndims);
    for (int k = 0; k < blocking.inner_nblks; ++k) {
      b.inner.emplace_back(static_cast<int>(blocking.inner_idxs[k]), blocking.inner_blks[k]);
    }
  }
  return b;
}

inline void append_relu(dnnl::post_ops& ops) {
  ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
}

inline void append_eltwise(dnnl::post_ops& ops, const EltwiseStep& step) {
  ops.append_eltwise(1.0f, step.algorithm, step.alpha, step.beta);
}

// x max(0, min(1, x / 6 + 1 / 2)): 2.x's hard swish has these constants built in (and documents
// alpha and beta as ignored).
inline EltwiseStep hard_swish() { return {dnnl::algorithm::eltwise_hardswish, 0.0f, 0.0f}; }

// max(0, min(1, alpha x + beta)): 2.x has no hard sigmoid; alpha x + beta, then clipped to [0, 1].
inline std::vector<EltwiseStep> hard_sigmoid(float alpha, float beta) {
  return {{dnnl::algorithm::eltwise_linear, alpha, beta},
          {dnnl::algorithm::eltwise_clip, 0.0f, 1.0f}};
}

inline dnnl::convolution_forward::primitive_desc convolution_forward(
    const dnnl::engine& e, dnnl::prop_kind prop, dnnl::algorithm alg, const md_t& src,
    const md_t& weights, const md_t& bias, const md_t& dst, const Window& w, const attr_t& attr) {
  return {{prop, alg, src, weights, bias, dst, w.strides, w.dilation, w.padding_l, w.padding_r},
          attr,
          e};
}

// Every implementation oneDNN offers for the convolution, in its order of preference. 2.6's
// iterator keeps a pointer to the operation descriptor, so next_impl() is only safe while that
// descriptor lives: here, not on a descriptor returned by convolution_forward().
inline std::vector<dnnl::convolution_forward::primitive_desc> convolution_forward_implementations(
    const dnnl::engine& e, dnnl::prop_kind prop, dnnl::algorithm alg, const md_t& src,
    const md_t& weights, const md_t& bias, const md_t& dst, const Window& w, const attr_t& attr) {
  const dnnl::convolution_forward::desc op(prop, alg, src, weights, bias, dst, w.strides,
                                           w.dilation, w.padding_l, w.padding_r);
  return implementations_from(dnnl::convolution_forward::primitive_desc(op, attr, e));
}

inline dnnl::convolution_backward_data::primitive_desc convolution_backward_data(
    const dnnl::engine& e, dnnl::algorithm alg, const md_t& diff_src, const md_t& weights,
    const md_t& diff_dst, const Window& w, const dnnl::convolution_forward::primitive_desc& hint,
    const attr_t& attr) {
  return {{alg, diff_src, weights, diff_dst, w.strides, w.dilation, w.padding_l, w.padding_r},
          attr,
          e,
          hint};
}

inline dnnl::convolution_backward_weights::primitive_desc convolution_backward_weights(
    const dnnl::engine& e, dnnl::algorithm alg, const md_t& src, const md_t& diff_weights,
    const md_t& diff_bias, const md_t& diff_dst, const Window& w,
    const dnnl::convolution_forward::primitive_desc& hint, const attr_t& attr) {
  return {{alg, src, diff_weights, diff_bias, diff_dst, w.strides, w.dilation, w.padding_l,
           w.padding_r},
          attr,
          e,
          hint};
}

inline dnnl::inner_product_forward::primitive_desc inner_product_forward(
    const dnnl::engine& e, dnnl::prop_kind prop, const md_t& src, const md_t& weights,
    const md_t& bias, const md_t& dst, const attr_t& attr) {
  return {{prop, src, weights, bias, dst}, attr, e};
}

inline dnnl::inner_product_backward_data::primitive_desc inner_product_backward_data(
    const dnnl::engine& e, const md_t& diff_src, const md_t& weights, const md_t& diff_dst,
    const dnnl::inner_product_forward::primitive_desc& hint, const attr_t& attr) {
  return {{diff_src, weights, diff_dst}, attr, e, hint};
}

inline dnnl::inner_product_backward_weights::primitive_desc inner_product_backward_weights(
    const dnnl::engine& e, const md_t& src, const md_t& diff_weights, const md_t& diff_bias,
    const md_t& diff_dst, const dnnl::inner_product_forward::primitive_desc& hint,
    const attr_t& attr) {
  return {{src, diff_weights, diff_bias, diff_dst}, attr, e, hint};
}

// pooling_v2 is 2.x's pooling with dilation; its primitive_desc converts to pooling_forward's.
inline dnnl::pooling_forward::primitive_desc pooling_forward(
    const dnnl::engine& e, dnnl::prop_kind prop, dnnl::algorithm alg, const md_t& src,
    const md_t& dst, const dims_t& kernel, const Window& w, const attr_t& attr) {
  return {{prop, alg, src, dst, w.strides, kernel, w.padding_l, w.padding_r}, attr, e};
}

inline dnnl::pooling_backward::primitive_desc pooling_backward(
    const dnnl::engine& e, dnnl::algorithm alg, const md_t& diff_src, const md_t& diff_dst,
    const dims_t& kernel, const Window& w, const dnnl::pooling_forward::primitive_desc& hint,
    const attr_t& attr) {
  return {{alg, diff_src, diff_dst, w.strides, kernel, w.padding_l, w.padding_r}, attr, e, hint};
}

inline dnnl::batch_normalization_forward::primitive_desc batch_norm_forward(
    const dnnl::engine& e, dnnl::prop_kind prop, const md_t& src, float epsilon,
    dnnl::normalization_flags flags, const attr_t& attr) {
  return {{prop, src, epsilon, flags}, attr, e};
}

inline dnnl::batch_normalization_backward::primitive_desc batch_norm_backward(
    const dnnl::engine& e, const md_t& diff, const md_t& src, float epsilon,
    dnnl::normalization_flags flags,
    const dnnl::batch_normalization_forward::primitive_desc& hint, const attr_t& attr) {
  return {{dnnl::prop_kind::backward, diff, src, epsilon, flags}, attr, e, hint};
}

inline dnnl::eltwise_forward::primitive_desc eltwise_forward(const dnnl::engine& e,
                                                             dnnl::prop_kind prop,
                                                             dnnl::algorithm alg, const md_t& src,
                                                             const attr_t& attr) {
  return {{prop, alg, src, 0.0f, 0.0f}, attr, e};
}

inline dnnl::eltwise_backward::primitive_desc eltwise_backward(
    const dnnl::engine& e, dnnl::algorithm alg, const md_t& diff, const md_t& data,
    const dnnl::eltwise_forward::primitive_desc& hint, const attr_t& attr) {
  return {{alg, diff, data, 0.0f, 0.0f}, attr, e, hint};
}

inline dnnl::eltwise_forward::primitive_desc eltwise_forward(const dnnl::engine& e,
                                                             dnnl::prop_kind prop,
                                                             const EltwiseStep& step,
                                                             const md_t& src, const attr_t& attr) {
  return {{prop, step.algorithm, src, step.alpha, step.beta}, attr, e};
}

inline dnnl::eltwise_backward::primitive_desc eltwise_backward(
    const dnnl::engine& e, const EltwiseStep& step, const md_t& diff, const md_t& data,
    const dnnl::eltwise_forward::primitive_desc& hint, const attr_t& attr) {
  return {{step.algorithm, diff, data, step.alpha, step.beta}, attr, e, hint};
}

inline dnnl::lrn_forward::primitive_desc lrn_forward(const dnnl::engine& e, const md_t& src,
                                                     dnnl::memory::dim size, float alpha,
                                                     float beta, float k, const attr_t& attr) {
  return {{dnnl::prop_kind::forward_inference, dnnl::algorithm::lrn_across_channels, src, size,
           alpha, beta, k},
          attr,
          e};
}

inline dnnl::softmax_forward::primitive_desc softmax_forward(const dnnl::engine& e,
                                                             const md_t& src, int axis,
                                                             const attr_t& attr) {
  return {{dnnl::prop_kind::forward_inference, src, axis}, attr, e};
}

inline dnnl::binary::primitive_desc binary_add(const dnnl::engine& e, const md_t& src0,
                                               const md_t& src1, const md_t& dst,
                                               const attr_t& attr) {
  return {{dnnl::algorithm::binary_add, src0, src1, dst}, attr, e};
}

inline dnnl::binary::primitive_desc binary(const dnnl::engine& e, dnnl::algorithm alg,
                                           const md_t& src0, const md_t& src1, const md_t& dst,
                                           const attr_t& attr) {
  return {{alg, src0, src1, dst}, attr, e};
}

inline dnnl::reduction::primitive_desc reduction_sum(const dnnl::engine& e, const md_t& src,
                                                     const md_t& dst, const attr_t& attr) {
  return {{dnnl::algorithm::reduction_sum, src, dst, 0.0f, 0.0f}, attr, e};
}

inline dnnl::sum::primitive_desc sum(const dnnl::engine& e, const md_t& dst,
                                     const std::vector<float>& scales,
                                     const std::vector<md_t>& srcs, const attr_t& attr) {
  return {dst, scales, srcs, e, attr};
}

inline dnnl::concat::primitive_desc concat(const dnnl::engine& e, int axis,
                                           const std::vector<md_t>& srcs, const attr_t& attr) {
  return {axis, srcs, e, attr};
}

inline dnnl::concat::primitive_desc concat(const dnnl::engine& e, const md_t& dst, int axis,
                                           const std::vector<md_t>& srcs, const attr_t& attr) {
  return {dst, axis, srcs, e, attr};
}

#endif

}  // namespace tfpin::engine::detail::onednn
