#include "schedule.hpp"

#include <algorithm>
#include <bit>
#include <functional>
#include <queue>

#include "tfpin/engine/version.hpp"

namespace tfpin::engine::detail {

namespace {

// Rough per-core rates of a current server core (AVX-512 direct and brgemm kernels reach about
// half their FMA peak on real layers; a core streams about 10 GB/s), and the cost of waking and
// joining an OpenMP team with passive waiting.
constexpr double flops_per_us_per_core = 50e3;
constexpr double bytes_per_us_per_core = 10e3;
constexpr double team_fork_join_us = 6.0;

// Below this modelled single-thread time a node runs on one thread: a team costs more than it
// saves. Above `wide_min_us` a serial node is worth the cores of every lane.
constexpr double narrow_max_us = 12.0;
constexpr double wide_min_us = 25.0;
// A team spanning every lane's cores loses time to load imbalance on a batch-1 layer (work split
// into few blocks), about this much per wide step here: GoogLeNet's blocks of small layers run
// faster on lanes of one thread though one branch is twice the others, ResNet-50's chain beside
// its projection runs faster wide (tfpin bench A/B runs, docs/benchmarks/engine.md).
constexpr double wide_step_overhead_us = 75.0;
// Winograd F(4x4, 3x3) (oneDNN 2.x, inference) runs a 3x3 stride-1 convolution in about this
// share of its direct-FLOP time at batch 1 here (ResNet-50's: 0.5 to 0.85): without it GoogLeNet's
// blocks look unbalanced, their 3x3 branches being Winograd's.
constexpr double winograd_time_share = 0.55;
// The model is rough: a region goes wide only on a clear modelled win (GoogLeNet's 3a/3b blocks,
// 1.08-1.13, ran faster on lanes; ResNet-50's downsampling blocks, 1.3, and Inception v3's
// reduction blocks, 1.3-1.45, wide).
constexpr double wide_region_margin = 1.15;

double elements(const Dims& dims) { return static_cast<double>(element_count(dims)); }

}  // namespace

bool winograd_shape(const Ir& ir, int node) {
  const Node& n = ir.nodes[static_cast<std::size_t>(node)];
  if (n.kind != OpKind::convolution || n.inputs.size() < 2) return false;
  const auto& a = std::get<Conv2D>(n.attrs);
  const Dims& w = ir.values[static_cast<std::size_t>(n.inputs[1])].dims;
  return a.groups == 1 && w[2] == 3 && w[3] == 3 && a.stride[0] == 1 && a.stride[1] == 1 &&
         a.dilation[0] == 1 && a.dilation[1] == 1;
}

Cost node_cost(const Ir& ir, int node) {
  const Node& n = ir.nodes[static_cast<std::size_t>(node)];
  const Dims& out = ir.values[static_cast<std::size_t>(n.output)].dims;
  Cost cost;
  for (int in : n.inputs)
    cost.bytes += 4.0 * elements(ir.values[static_cast<std::size_t>(in)].dims);
  for (const PostOp& post : n.post_ops) {
    if (post.kind == PostOp::Kind::sum) {
      cost.bytes += 4.0 * elements(ir.values[static_cast<std::size_t>(post.value)].dims);
    }
  }
  cost.bytes += 4.0 * elements(out);
  cost.flops = elements(out);
  if ((n.kind == OpKind::convolution || n.kind == OpKind::inner_product) && n.inputs.size() > 1) {
    const Dims& w = ir.values[static_cast<std::size_t>(n.inputs[1])].dims;
    double per_output = 1;
    for (std::size_t d = 1; d < w.size(); ++d) per_output *= static_cast<double>(w[d]);
    cost.flops = 2.0 * elements(out) * per_output;
  }
  return cost;
}

double modelled_microseconds(const Cost& cost, unsigned threads) {
  const double t = std::max(1u, threads);
  return cost.flops / (flops_per_us_per_core * t) + cost.bytes / (bytes_per_us_per_core * t) +
         (threads > 1 ? team_fork_join_us : 0.0);
}

std::vector<std::vector<int>> node_predecessors(const Ir& ir) {
  std::vector<std::vector<int>> preds(ir.nodes.size());
  for (std::size_t i = 0; i < ir.nodes.size(); ++i) {
    const Node& node = ir.nodes[i];
    if (node.dead) continue;
    auto depend = [&](int value) {
      const int p = ir.values[static_cast<std::size_t>(value)].producer;
      if (p >= 0) preds[i].push_back(p);
    };
    for (int in : node.inputs) depend(in);
    for (const PostOp& post : node.post_ops) {
      if (post.kind == PostOp::Kind::sum) depend(post.value);
    }
  }
  return preds;
}

// A sum post-op makes a convolution depend on the residual's producer, which the builder may have
// created later: hence a real topological sort, lowest index first.
std::vector<int> topological_order(const Ir& ir) {
  const std::size_t n = ir.nodes.size();
  const std::vector<std::vector<int>> preds = node_predecessors(ir);
  std::vector<int> indegree(n, 0);
  std::vector<std::vector<int>> users(n);
  for (std::size_t i = 0; i < n; ++i) {
    for (int p : preds[i]) {
      users[static_cast<std::size_t>(p)].push_back(static_cast<int>(i));
      ++indegree[i];
    }
  }
  std::priority_queue<int, std::vector<int>, std::greater<>> ready;
  for (std::size_t i = 0; i < n; ++i) {
    if (!ir.nodes[i].dead && indegree[i] == 0) ready.push(static_cast<int>(i));
  }
  std::vector<int> order;
  while (!ready.empty()) {
    const int i = ready.top();
    ready.pop();
    order.push_back(i);
    for (int u : users[static_cast<std::size_t>(i)]) {
      if (--indegree[static_cast<std::size_t>(u)] == 0) ready.push(u);
    }
  }
  return order;
}

std::vector<bool> serial_nodes(const Ir& ir, const std::vector<int>& order) {
  const std::size_t n = ir.nodes.size();
  const std::size_t words = (n + 63) / 64;
  const std::vector<std::vector<int>> preds = node_predecessors(ir);
  // ancestors[i]: bit a set when i depends (transitively) on a; descendants likewise.
  std::vector<std::uint64_t> ancestors(n * words, 0);
  std::vector<std::uint64_t> descendants(n * words, 0);
  auto set = [&](std::vector<std::uint64_t>& bits, std::size_t row, std::size_t col) {
    bits[row * words + col / 64] |= std::uint64_t{1} << (col % 64);
  };
  for (int i : order) {
    const auto row = static_cast<std::size_t>(i);
    for (int p : preds[row]) {
      const auto pr = static_cast<std::size_t>(p);
      set(ancestors, row, pr);
      for (std::size_t w = 0; w < words; ++w)
        ancestors[row * words + w] |= ancestors[pr * words + w];
    }
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const auto row = static_cast<std::size_t>(*it);
    for (int p : preds[row]) {
      const auto pr = static_cast<std::size_t>(p);
      set(descendants, pr, row);
      for (std::size_t w = 0; w < words; ++w) {
        descendants[pr * words + w] |= descendants[row * words + w];
      }
    }
  }
  std::vector<bool> serial(n, false);
  for (int i : order) {
    const auto row = static_cast<std::size_t>(i);
    std::size_t related = 0;
    for (std::size_t w = 0; w < words; ++w) {
      related += static_cast<std::size_t>(
          std::popcount(ancestors[row * words + w] | descendants[row * words + w]));
    }
    serial[row] = related + 1 == order.size();
  }
  return serial;
}

namespace {

// The regions between serial nodes: the other live nodes, each region in topological order.
std::vector<std::vector<int>> parallel_regions(const std::vector<int>& order,
                                               const std::vector<bool>& serial) {
  std::vector<std::vector<int>> regions(1);
  for (int i : order) {
    if (!serial[static_cast<std::size_t>(i)]) {
      regions.back().push_back(i);
    } else if (!regions.back().empty()) {
      regions.emplace_back();
    }
  }
  if (regions.back().empty()) regions.pop_back();
  return regions;
}

// Modelled time of a region on `lanes` lanes taking the ready node of longest remaining path
// first, as the executor does (greedy list scheduling).
double lanes_makespan(const std::vector<int>& region, const std::vector<double>& cost_us,
                      const std::vector<std::vector<int>>& preds, unsigned lanes) {
  const std::size_t n = region.size();
  std::vector<int> position(preds.size(), -1);
  for (std::size_t k = 0; k < n; ++k)
    position[static_cast<std::size_t>(region[k])] = static_cast<int>(k);
  std::vector<std::vector<int>> inside(n);  // predecessors within the region, by position
  std::vector<double> rank(n, 0.0);
  for (std::size_t k = 0; k < n; ++k) {
    for (int p : preds[static_cast<std::size_t>(region[k])]) {
      if (position[static_cast<std::size_t>(p)] >= 0)
        inside[k].push_back(position[static_cast<std::size_t>(p)]);
    }
  }
  // Longest path to the region's end. Positions are topological: when k is visited, rank[k]
  // already holds the longest path of its successors.
  for (std::size_t k = n; k-- > 0;) {
    rank[k] += cost_us[k];
    for (int p : inside[k]) {
      auto& r = rank[static_cast<std::size_t>(p)];
      r = std::max(r, rank[k]);
    }
  }
  std::vector<double> finish(n, -1.0);
  std::vector<double> lane_free(std::max(1u, lanes), 0.0);
  double makespan = 0;
  for (std::size_t started = 0; started < n; ++started) {
    auto lane = std::min_element(lane_free.begin(), lane_free.end());
    int best = -1;
    double best_start = 0;
    for (std::size_t k = 0; k < n; ++k) {
      if (finish[k] >= 0) continue;
      double earliest = 0;
      bool ready = true;
      for (int p : inside[k]) {
        const double f = finish[static_cast<std::size_t>(p)];
        ready = ready && f >= 0;
        earliest = std::max(earliest, f);
      }
      if (!ready) continue;
      const double start = std::max(*lane, earliest);
      // Earliest start first; among equal starts the longest remaining path.
      if (best < 0 || start < best_start ||
          (start == best_start && rank[k] > rank[static_cast<std::size_t>(best)])) {
        best = static_cast<int>(k);
        best_start = start;
      }
    }
    const auto b = static_cast<std::size_t>(best);
    finish[b] = best_start + cost_us[b];
    *lane = finish[b];
    makespan = std::max(makespan, finish[b]);
  }
  return makespan;
}

}  // namespace

std::vector<unsigned> node_threads(const Ir& ir, const std::vector<int>& order,
                                   const CompileOptions& options) {
  std::vector<unsigned> threads(ir.nodes.size(), 0);
  const unsigned intra = std::max(1u, options.intra);
  const unsigned all = intra * std::max(1u, options.lanes);
  const bool elastic = options.elastic_threads && !options.training;
  // Wide steps need a core per thread: lanes without cores of their own would share one.
  const bool can_widen = elastic && options.lanes > 1 && !options.lane_cpus.empty();
  const std::vector<bool> serial = can_widen ? serial_nodes(ir, order) : std::vector<bool>();
  // Nodes that run wide: serial ones, and every node of a region whose lanes would idle while one
  // long branch finishes (an Inception reduction block's big convolution, ResNet's chain beside
  // its projection): there the whole region runs one step at a time on every lane's cores.
  std::vector<bool> widen = serial;
  if (can_widen) {
    const std::vector<std::vector<int>> preds = node_predecessors(ir);
    const bool winograd = options.winograd && onednn_offers_winograd();
    for (const std::vector<int>& region : parallel_regions(order, serial)) {
      std::vector<double> lane_us;
      double wide_us = 0;
      for (int i : region) {
        const Cost cost = node_cost(ir, i);
        const double share = winograd && winograd_shape(ir, i) ? winograd_time_share : 1.0;
        lane_us.push_back(modelled_microseconds(cost, intra) * share);
        wide_us += lane_us.back() >= wide_min_us
                       ? modelled_microseconds(cost, all) * share + wide_step_overhead_us
                       : lane_us.back();
      }
      if (wide_us * wide_region_margin < lanes_makespan(region, lane_us, preds, options.lanes)) {
        for (int i : region) widen[static_cast<std::size_t>(i)] = true;
      }
    }
  }
  for (int i : order) {
    const auto node = static_cast<std::size_t>(i);
    threads[node] = intra;
    if (!elastic) continue;
    const Cost cost = node_cost(ir, i);
    if (can_widen && widen[node] && modelled_microseconds(cost, intra) >= wide_min_us) {
      threads[node] = all;
    } else if (intra > 1 && modelled_microseconds(cost, 1) < narrow_max_us) {
      threads[node] = 1;
    }
  }
  return threads;
}

std::vector<double> critical_path_ranks(const std::vector<Step>& steps,
                                        const std::vector<std::vector<int>>& successors) {
  std::vector<double> rank(steps.size(), 0.0);
  for (std::size_t s = steps.size(); s-- > 0;) {
    double longest = 0;
    for (int t : successors[s]) longest = std::max(longest, rank[static_cast<std::size_t>(t)]);
    rank[s] = modelled_microseconds({steps[s].flops, static_cast<double>(steps[s].bytes)},
                                    steps[s].threads) +
              longest;
  }
  return rank;
}

}  // namespace tfpin::engine::detail
