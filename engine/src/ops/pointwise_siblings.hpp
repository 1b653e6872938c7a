// Inference at batch 1: sibling 1x1 convolutions, the ones that read the same input with the same
// stride and activation (the reduce layers of GoogLeNet's and Inception v3's blocks), computed as
// one convolution over their concatenated weights. At one image in a channel-outermost blocked
// layout a slice of whole channel blocks is contiguous and laid out as the member's own output
// would be (as for the in-place concat), so each member's output is an alias inside the merged
// output and nothing is copied. One wide 1x1 runs nearer the peak than several narrow ones:
// GoogLeNet's 16-channel reduce layers ran at 28-66% of it at batch 1 (Zen 5), the 96-208-channel
// ones at 59-88%.
#pragma once

#include <vector>

#include "../ir.hpp"
#include "../lowering.hpp"

namespace tfpin::engine::detail {

// By node: for the member of each group that comes first in `order` (the one lowered first), the
// group's members in the order of their channels in the merged output; empty for every other
// node. Members: live 1x1 convolutions (one group, no padding, no dilation, constant weights and
// bias) of one image, on the same input with the same stride and the same post-ops (none or a
// ReLU), whose output is no graph output and is read by neither a concat (its producer may write
// into the concat's buffer instead, in_place_concat.cpp) nor a residual sum. The members whose
// channels are not a multiple of `block` would split a block: at most one, placed last.
std::vector<std::vector<int>> pointwise_sibling_groups(const Ir& ir, const std::vector<int>& order,
                                                       std::int64_t block);

// Lowers the group that `node` leads (Lowering::sibling_groups) as one convolution and defines each
// member's output as its slice of the merged output; marks the members
// (Lowering::computed_with_sibling). False, and nothing added, when the merged convolution does not
// come out in a layout whose slices are the members' outputs: the members are then lowered one by
// one.
bool lower_pointwise_siblings(Lowering& l, int node);

}  // namespace tfpin::engine::detail
