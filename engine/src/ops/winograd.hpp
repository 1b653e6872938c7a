// tfpin's own Winograd F(2x2, 3x3), F(4x4, 3x3), F(6x6, 3x3), F(7x7, 3x3) and F(4x4, 5x5)
// convolutions (winograd.cpp): timed alternatives of 3x3 and 5x5 stride-1 convolutions, 1-D and
// stride-2 ones (inference; training's forward and backward steps), for CPUs and oneDNN builds
// without oneDNN's Winograd (AVX2; oneDNN 3.x on any ISA) and for training, where oneDNN has none.
#pragma once

#include "../lowering.hpp"

namespace tfpin::engine::detail {

// Adds the kernels (both tile sizes for 3x3, F(4x4) for 5x5) to `step` (the convolution `node`,
// already given its primary kernel, whose arguments are src, weights[, bias], dst) as
// alternatives where they apply: 3x3 or 5x5 stride 1, no
// groups or dilation, bias, ReLU and sum post-ops only, channels in whole vectors, and src and
// dst in the channel-blocked layout of the ISA (nChw8c with AVX2, nChw16c with AVX-512). In
// training they read the trained weights in `weights_md` and transform them every run. Returns
// whether it did.
bool add_winograd_alternative(Lowering& l, int node, Step& step, const md_t& src_md,
                              const md_t& weights_md, const md_t& dst_md);

// The same for the convolution's backward data step (arguments: diff_dst, weights, diff_src):
// a forward convolution of diff_dst by the kernel transposed and flipped (at stride 2, the
// polyphase transposed convolution of WinogradStride2Transposed).
bool add_winograd_backward_data_alternative(Lowering& l, int node, Step& step,
                                            const md_t& diff_dst_md, const md_t& weights_md,
                                            const md_t& diff_src_md);

// The same for its backward weights step (arguments: src, diff_dst, diff_weights[, diff_bias]):
// dW = G^T [sum over tiles of (A dy A^T) . (B^T x B)] G, the transpose of the forward.
bool add_winograd_weight_gradient_alternative(Lowering& l, int node, Step& step, const md_t& src_md,
                                              const md_t& diff_dst_md, const md_t& diff_weights_md,
                                              const md_t& diff_bias_md);

}  // namespace tfpin::engine::detail
