// Training's batch norm + ReLU + max pooling as one step each way (fuse_batch_norm_max_pools):
// GoogLeNet's and Inception v3's stems normalise their largest activations and pool them at once.
//
// Unfused, the forward writes the normalised tensor and the pooling reads it back, and the
// backward writes the pooling's full-size gradient, which batch norm's backward reads twice. Here
// the forward takes the batch statistics (one pass over x), then normalises, applies the ReLU and
// pools in one pass, keeping per pooled output the window index of its maximum and x there.
// The backward takes the scale and shift gradients from the pooled outputs alone (the gradient is
// zero everywhere but at the maxima), then writes dx in one pass over x. For GoogLeNet's conv1
// (32 x 64 x 112 x 112) that is about 0.5 GB of memory traffic a step instead of 1.2 GB.
#include "batch_norm_pool.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>

#include "batch_norm_pool_kernels.hpp"
#include "common.hpp"

namespace tfpin::engine::detail {

const BatchNormPoolKernels* pool_kernels_for(std::int64_t lanes) {
  if (lanes == 16 && __builtin_cpu_supports("avx512f")) return batch_norm_pool_kernels_avx512();
  if (lanes == 8 && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
    return batch_norm_pool_kernels_avx2();
  }
  return nullptr;
}

std::optional<ChannelPlanes> channel_planes_of(const md_t& md, std::int64_t lanes) {
  const onednn::Blocking b = onednn::blocking_of(md);
  if (!b.blocked || b.dims.size() != 4) return std::nullopt;
  if (b.inner.size() == 1 && b.inner[0].first == 1 &&
      (b.inner[0].second == 8 || b.inner[0].second == 16) && b.dims[1] % b.inner[0].second == 0) {
    return ChannelPlanes{b.inner[0].second, false,        b.strides[0],
                         b.strides[1],      b.strides[2], b.strides[3]};
  }
  if (b.inner.empty() && b.strides[1] == 1 && b.dims[1] % lanes == 0) {
    return ChannelPlanes{lanes, true, b.strides[0], lanes, b.strides[2], b.strides[3]};
  }
  return std::nullopt;
}

BatchNormPoolPlane pool_plane(const Dims& xd, const Dims& yd, const Pool2D& window,
                              const std::array<std::int64_t, 4>& padding, const ChannelPlanes& x,
                              const ChannelPlanes& y) {
  BatchNormPoolPlane p;
  p.height = xd[2];
  p.width = xd[3];
  p.out_height = yd[2];
  p.out_width = yd[3];
  p.kernel_h = static_cast<int>(window.kernel[0]);
  p.kernel_w = static_cast<int>(window.kernel[1]);
  p.stride_h = static_cast<int>(window.stride[0]);
  p.stride_w = static_cast<int>(window.stride[1]);
  p.pad_top = static_cast<int>(padding[0]);
  p.pad_left = static_cast<int>(padding[1]);
  p.x_row = x.row;
  p.x_pixel = x.pixel;
  p.y_row = y.row;
  p.y_pixel = y.pixel;
  return p;
}

namespace {

// The input's format for the pooled dimensions (and another data type).
md_t pooled_like(const ChannelPlanes& x, const Dims& dims, dnnl::memory::data_type type) {
  tag t = tag::nhwc;
  if (!x.channels_last) t = x.lanes == 16 ? tag::nChw16c : tag::nChw8c;
  return md_t(to_dnnl(dims), type, t);
}

struct Plan {
  const BatchNormPoolKernels* kernels = nullptr;
  BatchNormPoolPlane plane;
  std::int64_t batch = 0;
  std::int64_t channels = 0;
  ChannelPlanes x;
  ChannelPlanes y;  // the pooled outputs, the index (in bytes) and x at the maxima alike
  double epsilon = 0;

  [[nodiscard]] std::int64_t lanes() const { return x.lanes; }
  [[nodiscard]] std::int64_t blocks() const { return channels / x.lanes; }
  [[nodiscard]] std::int64_t items() const { return batch * blocks(); }  // planes
  [[nodiscard]] double count() const {
    return static_cast<double>(batch * plane.height * plane.width);
  }
  // Per plane two sums of `lanes` doubles, their two sums per channel, then four floats per
  // channel: nothing is allocated while a step runs.
  [[nodiscard]] std::uint64_t scratch_bytes() const {
    return static_cast<std::uint64_t>(items() * 2 * lanes() + 2 * channels) * sizeof(double) +
           static_cast<std::uint64_t>(4 * channels) * sizeof(float);
  }
  [[nodiscard]] double* sums_at(std::byte* scratch) const {
    return reinterpret_cast<double*>(scratch) + items() * 2 * lanes();
  }
  [[nodiscard]] float* floats_at(std::byte* scratch) const {
    return reinterpret_cast<float*>(sums_at(scratch) + 2 * channels);
  }
  // Non-temporal stores need aligned vectors, and whole cache lines from consecutive pixels.
  [[nodiscard]] bool can_stream(const ChannelPlanes& planes, const void* floats,
                                const void* bytes) const {
    const auto vector = static_cast<std::uintptr_t>(lanes() * sizeof(float));
    return !planes.channels_last && planes.pixel == lanes() &&
           reinterpret_cast<std::uintptr_t>(floats) % vector == 0 &&
           reinterpret_cast<std::uintptr_t>(bytes) % static_cast<std::uintptr_t>(lanes()) == 0;
  }

  // Where plane `item` (one image, one channel block) starts: in x, in the pooled tensors, and
  // its first channel.
  struct PlaneAt {
    std::int64_t item;
    std::int64_t in;
    std::int64_t out;
    std::int64_t c0;
  };
  template <class PerPlane>
  void each_plane(PerPlane per_plane) const {
    const std::int64_t n_items = items();
#pragma omp parallel for schedule(static)
    for (std::int64_t item = 0; item < n_items; ++item) {
      const std::int64_t n = item / blocks();
      const std::int64_t b = item % blocks();
      per_plane(PlaneAt{item, n * x.image + b * x.block, n * y.image + b * y.block, b * lanes()});
    }
  }

  // Each plane's two sums, added over the images per channel (in image order: the same result
  // whatever the threads).
  template <class PerPlane>
  void channel_sums(double* partial, double* first, double* second, PerPlane per_plane) const {
    const std::int64_t l = lanes();
    each_plane([&](const PlaneAt& at) {
      double* sums = partial + at.item * 2 * l;
      std::fill(sums, sums + 2 * l, 0.0);
      per_plane(at, sums, sums + l);
    });
    std::fill(first, first + channels, 0.0);
    std::fill(second, second + channels, 0.0);
    for (std::int64_t item = 0; item < items(); ++item) {
      const std::int64_t c0 = item % blocks() * l;
      for (std::int64_t j = 0; j < l; ++j) {
        first[c0 + j] += partial[item * 2 * l + j];
        second[c0 + j] += partial[item * 2 * l + l + j];
      }
    }
  }

  void forward(const float* src, const float* gamma, const float* beta, float* dst, float* mean,
               float* variance, unsigned char* index, float* x_max, std::byte* scratch) const {
    auto* partial = reinterpret_cast<double*>(scratch);
    double* sum = sums_at(scratch);
    double* squares = sum + channels;
    float* shift = floats_at(scratch);
    float* scale = shift + channels;
    // Sums of x - (its first value in the channel): the variance without the cancellation of
    // E[x^2] - E[x]^2 when the mean is large against the spread.
    for (std::int64_t c = 0; c < channels; ++c) shift[c] = src[c / lanes() * x.block + c % lanes()];
    channel_sums(partial, sum, squares, [&](const PlaneAt& at, double* s, double* q) {
      kernels->statistics(plane, src + at.in, shift + at.c0, s, q);
    });
    for (std::int64_t c = 0; c < channels; ++c) {
      const double d = sum[c] / count();
      const double var = std::max(0.0, squares[c] / count() - d * d);
      mean[c] = static_cast<float>(shift[c] + d);
      variance[c] = static_cast<float>(var);
      scale[c] = static_cast<float>(gamma[c] / std::sqrt(var + epsilon));
    }
    const bool streaming = can_stream(y, x_max, index);
    each_plane([&](const PlaneAt& at) {
      kernels->forward(plane, src + at.in, mean + at.c0, scale + at.c0, beta + at.c0, dst + at.out,
                       index + at.out, x_max + at.out, streaming);
    });
  }

  // dx may be null (the input needs no gradient): the scale and shift gradients only.
  void backward(const float* src, const float* dy, const unsigned char* index, const float* x_max,
                const float* mean, const float* variance, const float* gamma, float* dx,
                float* dgamma, float* dbeta, std::byte* scratch) const {
    auto* partial = reinterpret_cast<double*>(scratch);
    double* sum_dy = sums_at(scratch);
    double* sum_dy_x = sum_dy + channels;
    float* scale = floats_at(scratch);
    float* slope = scale + channels;
    float* offset = slope + channels;
    channel_sums(partial, sum_dy, sum_dy_x, [&](const PlaneAt& at, double* s, double* t) {
      kernels->gradient_sums(plane, dy + at.out, index + at.out, x_max + at.out, mean + at.c0, s,
                             t);
    });
    // With x^ = (x - mean) rstd and g the gradient reaching batch norm's output (after the ReLU):
    // dgamma = sum g x^, dbeta = sum g, dx = gamma rstd (g - dbeta / M - x^ dgamma / M).
    for (std::int64_t c = 0; c < channels; ++c) {
      const double rstd = 1.0 / std::sqrt(static_cast<double>(variance[c]) + epsilon);
      const double dg = sum_dy_x[c] * rstd;
      dgamma[c] = static_cast<float>(dg);
      dbeta[c] = static_cast<float>(sum_dy[c]);
      const double s = gamma[c] * rstd;
      scale[c] = static_cast<float>(s);
      slope[c] = static_cast<float>(-s * rstd * dg / count());
      offset[c] = static_cast<float>(-s * sum_dy[c] / count());
    }
    if (dx == nullptr) return;
    // (dx with non-temporal stores, through a ring of rows in the cache, measured slower.)
    each_plane([&](const PlaneAt& at) {
      kernels->backward(plane, src + at.in, dy + at.out, index + at.out, mean + at.c0,
                        scale + at.c0, slope + at.c0, offset + at.c0, dx + at.in);
    });
  }
};

// What the forward leaves for the backward (in ForwardRecord::pd).
struct FusedRecord {
  std::shared_ptr<const Plan> plan;
  md_t pooled_md;
  md_t index_md;
  int x_max = -1;
};

}  // namespace

bool batch_norm_pool_available() {
  return pool_kernels_for(onednn::native_channel_block()) != nullptr;
}

void lower_batch_norm_pool(Lowering& l, int node) {
  Node& n = node_of(l.ir, node);
  const int x = n.inputs[0];
  const Dims& xd = value_of(l.ir, x).dims;
  const Dims& yd = value_of(l.ir, n.output).dims;
  const std::int64_t c = xd[1];
  const Pool2D& pool = *n.fused_max_pool;

  // The input as its producer wrote it where the kernels can read that, else reordered.
  const std::int64_t native = onednn::native_channel_block();
  md_t x_md = l.value_md[static_cast<std::size_t>(x)];
  std::optional<ChannelPlanes> xp = channel_planes_of(x_md, native);
  if (!xp || pool_kernels_for(xp->lanes) == nullptr) {
    x_md =
        md_t(to_dnnl(xd), dnnl::memory::data_type::f32, native == 16 ? tag::nChw16c : tag::nChw8c);
    xp = channel_planes_of(x_md, native);
  }
  auto plan = std::make_shared<Plan>();
  plan->kernels = pool_kernels_for(xp->lanes);
  if (plan->kernels == nullptr) {
    throw Unsupported("batch norm + ReLU + max pooling: no vector kernels on this CPU");
  }
  plan->x = *xp;
  plan->batch = xd[0];
  plan->channels = c;
  plan->epsilon = std::get<BatchNorm>(n.attrs).epsilon;
  const md_t pooled_md = pooled_like(*xp, yd, dnnl::memory::data_type::f32);
  const md_t index_md = pooled_like(*xp, yd, dnnl::memory::data_type::u8);
  plan->y = *channel_planes_of(pooled_md, xp->lanes);
  plan->plane = pool_plane(xd, yd, pool, n.padding, *xp, plan->y);

  const md_t vec({c}, dnnl::memory::data_type::f32, tag::x);
  ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  r.src = l.read_as(x, x_md);
  r.src_md = x_md;
  r.weights = l.parameter_as(n.inputs[1], vec, vec);
  r.bias = l.parameter_as(n.inputs[2], vec, vec);
  r.mean = l.new_arena_buffer(vec, n.name + ":mean");
  r.variance = l.new_arena_buffer(vec, n.name + ":variance");
  r.workspace_md = index_md;
  r.workspace = l.new_arena_buffer(index_md, n.name + ":workspace");
  FusedRecord fused{plan, pooled_md, index_md, l.new_arena_buffer(pooled_md, n.name + ":x_max")};
  const int dst = l.new_arena_buffer(pooled_md, n.name);
  Step step;
  step.name = n.name;
  step.op = l.op_label(n);
  step.args.push_back(Arg::in(0, r.src, x_md));
  step.args.push_back(Arg::in(0, r.weights, vec));
  step.args.push_back(Arg::in(0, r.bias, vec));
  step.args.push_back(Arg::out(0, dst, pooled_md));
  step.args.push_back(Arg::out(0, r.mean, vec));
  step.args.push_back(Arg::out(0, r.variance, vec));
  step.args.push_back(Arg::out(0, r.workspace, index_md));
  step.args.push_back(Arg::out(0, fused.x_max, pooled_md));
  step.scratchpad_bytes = plan->scratch_bytes();
  step.impl = plan->lanes() == 16 ? "tfpin:avx512" : "tfpin:avx2";
  step.kernel = [plan](const KernelCall& call) {
    const auto& d = call.data;
    plan->forward(static_cast<const float*>(d[0]), static_cast<const float*>(d[1]),
                  static_cast<const float*>(d[2]), static_cast<float*>(d[3]),
                  static_cast<float*>(d[4]), static_cast<float*>(d[5]),
                  static_cast<unsigned char*>(d[6]), static_cast<float*>(d[7]), call.scratch);
  };
  l.add_kernel_step(std::move(step));
  l.define(n.output, pooled_md, dst);
  r.pd = fused;
}

void backward_batch_norm_pool(Lowering& l, int node) {
  const Node& n = node_of(l.ir, node);
  const ForwardRecord& r = l.forward[static_cast<std::size_t>(node)];
  const auto& fused = std::any_cast<const FusedRecord&>(r.pd);
  const std::shared_ptr<const Plan> plan = fused.plan;
  const std::int64_t c = plan->channels;
  const md_t vec({c}, dnnl::memory::data_type::f32, tag::x);
  const int dy = l.gradient_as(n.output, fused.pooled_md);
  const bool wants_dx = l.wants_gradient(n.inputs[0]);
  Step step;
  step.name = n.name + ":backward";
  step.op = l.op_label(n) + "_backward";
  step.args.push_back(Arg::in(0, r.src, r.src_md));
  step.args.push_back(Arg::in(0, dy, fused.pooled_md));
  step.args.push_back(Arg::in(0, r.workspace, fused.index_md));
  step.args.push_back(Arg::in(0, fused.x_max, fused.pooled_md));
  step.args.push_back(Arg::in(0, r.mean, vec));
  step.args.push_back(Arg::in(0, r.variance, vec));
  step.args.push_back(Arg::in(0, r.weights, vec));
  const int dscale = l.new_arena_buffer(vec, n.name + ":diff_scale");
  const int dshift = l.new_arena_buffer(vec, n.name + ":diff_shift");
  step.args.push_back(Arg::out(0, dscale, vec));
  step.args.push_back(Arg::out(0, dshift, vec));
  int dx = -1;
  if (wants_dx) {
    dx = l.new_arena_buffer(r.src_md, n.name + ":diff_src");
    step.args.push_back(Arg::out(0, dx, r.src_md));
  }
  step.scratchpad_bytes = plan->scratch_bytes();
  step.impl = plan->lanes() == 16 ? "tfpin:avx512" : "tfpin:avx2";
  step.kernel = [plan, wants_dx](const KernelCall& call) {
    const auto& d = call.data;
    plan->backward(static_cast<const float*>(d[0]), static_cast<const float*>(d[1]),
                   static_cast<const unsigned char*>(d[2]), static_cast<const float*>(d[3]),
                   static_cast<const float*>(d[4]), static_cast<const float*>(d[5]),
                   static_cast<const float*>(d[6]), wants_dx ? static_cast<float*>(d[9]) : nullptr,
                   static_cast<float*>(d[7]), static_cast<float*>(d[8]), call.scratch);
  };
  l.add_kernel_step(std::move(step));
  if (wants_dx) l.add_gradient(n.inputs[0], dx, r.src_md);
  l.add_update(r.weights, dscale, vec, value_of(l.ir, n.inputs[1]).name);
  l.add_update(r.bias, dshift, vec, value_of(l.ir, n.inputs[2]).name);
}

}  // namespace tfpin::engine::detail
