// Training's batch norm + ReLU + max pooling in one step each way (batch_norm_pool.cpp), for the
// batch norm node that fuse_batch_norm_max_pools gave the pooling (Node::fused_max_pool).
#pragma once

#include "../lowering.hpp"

namespace tfpin::engine::detail {

// Whether this CPU has the step's vector kernels (AVX2 with FMA, or AVX-512 where oneDNN's
// blocks are 16 channels): the pass fuses nothing without them.
bool batch_norm_pool_available();
// The forward step (statistics, then normalise + ReLU + pool); the node's ForwardRecord keeps
// what the backward needs. The caller adds the running statistics' update.
void lower_batch_norm_pool(Lowering& l, int node);
// The backward step: scale and shift gradients, the input's gradient, the updates.
void backward_batch_norm_pool(Lowering& l, int node);

}  // namespace tfpin::engine::detail
