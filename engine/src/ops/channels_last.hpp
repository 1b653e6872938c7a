// oneDNN's brgemm convolutions ("brgconv") take channels-last (nhwc) tensors only, and where they
// exist (oneDNN 2.6 on AVX-512) they beat its blocked direct kernels on layers Winograd does not
// cover: the 3x3 stride-2 layers of ResNet-50 ran 1.1-1.5x faster standalone at batch 32 and 1
// (AMD EPYC Zen 5, 2 threads; 1x1 layers gained nothing). The engine keeps its blocked layouts
// (its own Winograd and oneDNN's reorder-free chains need them), so such a convolution gets one
// more timed alternative: x reordered to nhwc, the brgemm convolution, y reordered back, in the
// lane's scratchpad. The executor keeps it only where it wins with its reorders.
#pragma once

#include "../lowering.hpp"
#include "../onednn_compat.hpp"

namespace tfpin::engine::detail {

// What the alternative's implementation name starts with ("nhwc_brgconv:avx512_core"):
// CompileOptions::force_kernel and the compile report's kernel choices use it.
inline constexpr const char* channels_last_prefix = "nhwc_";

// Adds the alternative to `step` (the inference convolution `node`, compiled as `pd` with these
// window and attributes; arguments src, weights[, bias], dst) when oneDNN has a brgemm kernel for
// it in nhwc: not for 1x1 layers, training or a residual sum post-op, nor when pd already is
// channels-last. Returns whether it did.
bool add_channels_last_alternative(Lowering& l, int node, Step& step,
                                   const dnnl::convolution_forward::primitive_desc& pd,
                                   const onednn::Window& window, const dnnl::primitive_attr& attr,
                                   const md_t& w_user);

}  // namespace tfpin::engine::detail
