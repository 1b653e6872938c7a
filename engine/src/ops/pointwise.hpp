// tfpin's own 1x1 convolution (pointwise.cpp, kernels in pointwise_kernels.cpp): a timed
// alternative of inference's 1x1 convolutions beside oneDNN's kernel. It reads and writes the
// blocked layouts around it (nChw16c with AVX-512, nChw8c with AVX2), so it costs no reorders.
#pragma once

#include <vector>

#include "../lowering.hpp"

namespace tfpin::engine::detail {

// What the alternative's implementation name starts with ("tfpin_1x1:avx512"): force_kernel and
// the compile report's kernel choices use it.
inline constexpr const char* pointwise_prefix = "tfpin_1x1";
// Its direct convolution of larger kernels ("tfpin_direct:avx512").
inline constexpr const char* direct_prefix = "tfpin_direct";

// Adds the kernel to `step` (an inference convolution, arguments src, weights[, bias], dst) when
// it applies: `options.own_pointwise`, a 1x1 kernel at any stride, no padding, groups or
// dilation, constant weights (`oihw`, K x C), bias, then a sum and a ReLU post-op (each optional,
// in that order), channels in whole vectors, src and dst in the ISA's channel-blocked layout.
// `name` names the packed weights. Returns whether it did.
bool add_pointwise_alternative(Lowering& l, const Node& n, const std::string& name, Step& step,
                               const std::vector<float>& oihw, bool has_bias, const md_t& src_md,
                               const md_t& dst_md);

// The same kernel for a kernel_h x kernel_w convolution (not 1 x 1), any stride and padding: a sum
// of 1x1 convolutions, one per tap, over a copy of the input inside zero borders (made each run,
// in the lane's scratchpad) where the layer pads. Same conditions otherwise; the step's name
// names the packed weights.
bool add_direct_alternative(Lowering& l, const Node& n, Step& step, const std::vector<float>& oihw,
                            std::int64_t kernel_h, std::int64_t kernel_w, bool has_bias,
                            const md_t& src_md, const md_t& dst_md);

}  // namespace tfpin::engine::detail
