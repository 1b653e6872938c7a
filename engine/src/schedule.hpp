// How the compiled steps share the cores: a modelled cost per node and step (FLOPs and bytes
// moved), the number of threads each node's primitives are created for, and the critical-path
// priority by which the executor picks among ready steps.
//
// Threads per node (CompileOptions::elastic_threads, inference):
// - wide: a node that no other node can run beside (every other node is its ancestor or its
//   descendant: a network's stem, a VGG or AlexNet layer, most of ResNet) runs on the cores of
//   every lane, since the other lanes would idle anyway; so does every node of a region between
//   two such nodes when lanes would idle beside its longest branch (modelled by list scheduling
//   on the lanes against running it step by step wide: ResNet's downsampling blocks, Inception
//   v3's reduction blocks). The executor runs a wide step alone;
// - narrow: a node too small to repay waking a team (batch-1 pooling, concat, small 1x1
//   convolutions) runs on the lane's own thread alone;
// - else: the lane's `intra` threads.
#pragma once

#include <cstdint>
#include <vector>

#include "ir.hpp"
#include "lowering.hpp"
#include "tfpin/engine/runtime.hpp"

namespace tfpin::engine::detail {

struct Cost {
  double flops = 0;  // multiply-adds x 2
  double bytes = 0;  // read and written, weights included
};

// A 3x3 stride-1 dense ungrouped convolution: the shape oneDNN's Winograd kernels take.
bool winograd_shape(const Ir& ir, int node);

// A node's forward cost from its shapes.
Cost node_cost(const Ir& ir, int node);

// Modelled microseconds of `cost` on `threads` threads (one core each): compute and memory
// traffic at rough per-core rates of this generation of server cores, plus the fork and join of
// an OpenMP team when threads > 1. Only ratios between steps and between thread counts matter.
double modelled_microseconds(const Cost& cost, unsigned threads);

// For each node, the nodes it reads from (its inputs' producers and a sum post-op's residual).
std::vector<std::vector<int>> node_predecessors(const Ir& ir);

// Live nodes in a topological order that stays as close to the builder's as possible.
std::vector<int> topological_order(const Ir& ir);

// Nodes that no other live node can run beside.
std::vector<bool> serial_nodes(const Ir& ir, const std::vector<int>& order);

// Threads each node's primitives are created for (0 for dead nodes).
std::vector<unsigned> node_threads(const Ir& ir, const std::vector<int>& order,
                                   const CompileOptions& options);

// Critical-path rank of each step: its modelled cost plus the largest rank among its successors
// (steps are in a topological order). The executor runs the ready step of highest rank first.
std::vector<double> critical_path_ranks(const std::vector<Step>& steps,
                                        const std::vector<std::vector<int>>& successors);

}  // namespace tfpin::engine::detail
