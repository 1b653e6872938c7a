// Training's batch norm + ReLU + max pooling in one step each way (batch_norm_pool.cpp), for the
// batch norm node that fuse_batch_norm_max_pools gave the pooling (Node::fused_max_pool); and
// where its vector kernels apply (inference's max pooling uses them too).
#pragma once

#include <array>
#include <optional>

#include "../lowering.hpp"
#include "batch_norm_pool_kernels.hpp"

namespace tfpin::engine::detail {

// The vector kernels for blocks of `lanes` channels (8 or 16) when this CPU has them, else null.
const BatchNormPoolKernels* pool_kernels_for(std::int64_t lanes);

// Where a tensor's blocks of `lanes` channels lie (each block's channels contiguous): in floats,
// from one image to the next, one block to the next, one row and one pixel to the next.
struct ChannelPlanes {
  std::int64_t lanes = 0;
  bool channels_last = false;  // NHWC-like; else nChw{lanes}c
  std::int64_t image = 0;
  std::int64_t block = 0;
  std::int64_t row = 0;
  std::int64_t pixel = 0;
};

// nChw8c and nChw16c, or any layout with the channels innermost (NHWC, in blocks of `lanes`);
// others: none.
std::optional<ChannelPlanes> channel_planes_of(const md_t& md, std::int64_t lanes);

// The kernels' view of one plane pooled by `window` (padding: the node's effective padding) from
// x (dims xd) to y (dims yd).
BatchNormPoolPlane pool_plane(const Dims& xd, const Dims& yd, const Pool2D& window,
                              const std::array<std::int64_t, 4>& padding, const ChannelPlanes& x,
                              const ChannelPlanes& y);

// Whether this CPU has the step's vector kernels (AVX2 with FMA, or AVX-512 where oneDNN's
// blocks are 16 channels): the pass fuses nothing without them.
bool batch_norm_pool_available();
// The forward step (statistics, then normalise + ReLU + pool); the node's ForwardRecord keeps
// what the backward needs. The caller adds the running statistics' update.
void lower_batch_norm_pool(Lowering& l, int node);
// The backward step: scale and shift gradients, the input's gradient, the updates.
void backward_batch_norm_pool(Lowering& l, int node);

}  // namespace tfpin::engine::detail
