#include "lowering.hpp"

#include <fmt/format.h>
#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>

namespace tfpin::engine::detail {

void AlignedFree::operator()(void* p) const noexcept { std::free(p); }

AlignedBytes allocate_aligned(std::uint64_t bytes) {
  constexpr std::uint64_t huge = 2u << 20;
  std::uint64_t alignment = bytes >= huge ? huge : 64;
  std::uint64_t rounded = (bytes + alignment - 1) / alignment * alignment;
  if (rounded == 0) rounded = alignment;
  void* p = nullptr;
  if (posix_memalign(&p, alignment, rounded) != 0) return AlignedBytes{};
  if (alignment == huge) madvise(p, rounded, MADV_HUGEPAGE);
  return AlignedBytes{static_cast<std::byte*>(p)};
}

dnnl::memory::dims to_dnnl(const Dims& dims) {
  return dnnl::memory::dims(dims.begin(), dims.end());
}

bool is_plain(const md_t& md) {
  const onednn::Blocking b = onednn::blocking_of(md);
  return b.blocked && b.inner.empty();
}

std::string md_string(const md_t& md) {
  const onednn::Blocking b = onednn::blocking_of(md);
  std::string dims;
  for (std::size_t i = 0; i < b.dims.size(); ++i)
    dims += fmt::format("{}{}", i ? "x" : "", b.dims[i]);
  if (!b.blocked) return fmt::format("{} {}", b.any ? "any" : "?", dims);
  std::vector<int> order(b.dims.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    return b.strides[static_cast<std::size_t>(x)] > b.strides[static_cast<std::size_t>(y)];
  });
  std::string f;
  for (int i : order) {
    bool blocked = false;
    for (const auto& [index, size] : b.inner) blocked = blocked || index == i;
    f += static_cast<char>((blocked ? 'A' : 'a') + i);
  }
  for (const auto& [index, size] : b.inner) {
    f += fmt::format("{}{}", size, static_cast<char>('a' + index));
  }
  return fmt::format("{} {}", f, dims);
}

md_t plain_md(const Dims& dims, Layout layout) {
  tag t = tag::nc;
  if (dims.size() == 4) t = layout == Layout::nhwc ? tag::nhwc : tag::nchw;
  if (dims.size() == 1) t = tag::x;
  return md_t(to_dnnl(dims), dnnl::memory::data_type::f32, t);
}

namespace {

// The channel-sliceable layouts of a rank, with their channels per block.
std::vector<std::pair<tag, std::int64_t>> channel_sliceable_layouts(std::size_t rank) {
  if (rank == 4) return {{tag::nChw16c, 16}, {tag::nChw8c, 8}, {tag::nchw, 1}};
  if (rank == 2) return {{tag::nc, 1}};
  return {};
}

}  // namespace

std::optional<std::int64_t> channel_sliceable_block(const md_t& md) {
  const dnnl::memory::dims dims = onednn::blocking_of(md).dims;
  for (const auto& [t, block] : channel_sliceable_layouts(dims.size())) {
    if (md == md_t(dims, dnnl::memory::data_type::f32, t)) return block;
  }
  return std::nullopt;
}

md_t channel_sliceable_md(const Dims& dims, std::int64_t block) {
  for (const auto& [t, b] : channel_sliceable_layouts(dims.size())) {
    if (b == block) return md_t(to_dnnl(dims), dnnl::memory::data_type::f32, t);
  }
  throw std::logic_error("no channel-sliceable layout with that block");
}

void sum_floats(std::span<void* const> parts, std::size_t offset, float* dst, std::size_t n) {
  const float* a = static_cast<const float*>(parts[0]) + offset;
  const float* b = static_cast<const float*>(parts[1]) + offset;
#pragma omp simd
  for (std::size_t i = 0; i < n; ++i) dst[i] = a[i] + b[i];
  for (std::size_t k = 2; k < parts.size(); ++k) {
    const float* c = static_cast<const float*>(parts[k]) + offset;
#pragma omp simd
    for (std::size_t i = 0; i < n; ++i) dst[i] += c[i];
  }
}

md_t any_md(const Dims& dims) {
  return md_t(to_dnnl(dims), dnnl::memory::data_type::f32, tag::any);
}

Lowering::Lowering(Ir& ir_, dnnl::engine engine_, const CompileOptions& options_,
                   CompileReport& report_)
    : ir(ir_),
      engine(std::move(engine_)),
      options(options_),
      compile_stream(engine),
      report(report_),
      sibling_groups(ir_.nodes.size()),
      computed_with_sibling(ir_.nodes.size(), false),
      value_md(ir_.values.size()),
      value_buffer(ir_.values.size(), -1),
      forward(ir_.nodes.size()),
      needs_gradient(ir_.values.size(), false) {}

int Lowering::new_arena_buffer(const md_t& md, std::string name) {
  Buffer b;
  b.kind = BufferKind::arena;
  b.bytes = md.get_size();
  b.name = std::move(name);
  buffers.push_back(std::move(b));
  return static_cast<int>(buffers.size() - 1);
}

void Lowering::define(int v, const md_t& md, int buffer) {
  auto i = static_cast<std::size_t>(v);
  value_md[i] = md;
  value_buffer[i] = buffer;
}

int Lowering::read_as(int v, const md_t& want) {
  auto i = static_cast<std::size_t>(v);
  if (value_md[i] == want) return value_buffer[i];
  auto key = std::make_pair(v, md_string(want));
  if (auto it = reordered_.find(key); it != reordered_.end()) return it->second;
  int buffer = new_arena_buffer(want, ir.values[i].name + ":reordered");
  add_reorder(ir.values[i].name + ":reorder", value_buffer[i], value_md[i], buffer, want);
  reordered_[key] = buffer;
  return buffer;
}

int Lowering::constant_values(const std::vector<float>& values, const md_t& user, const md_t& want,
                              std::string name) {
  const auto [buffer, data] = new_constant(want, std::move(name));
  if (user == want) {
    std::memcpy(data, values.data(), values.size() * sizeof(float));
  } else {
    dnnl::memory src(user, engine, const_cast<float*>(values.data()));
    dnnl::memory dst(want, engine, data);
    dnnl::reorder(src, dst).execute(compile_stream, src, dst);
    compile_stream.wait();
  }
  return buffer;
}

Lowering::NewConstant Lowering::new_constant(const md_t& md, std::string name) {
  Buffer b;
  b.kind = BufferKind::weights;
  b.bytes = md.get_size();
  b.name = std::move(name);
  b.owned = allocate_aligned(b.bytes);
  if (!b.owned) throw std::bad_alloc();
  auto* data = reinterpret_cast<float*>(b.owned.get());
  // The engine's tests set TFPIN_TEST_POISON_WEIGHTS: every element a packing leaves unwritten
  // is then a NaN, which reaches the outputs they compare unless a fused ReLU turns it into 0
  // (deterministic, unlike MALLOC_PERTURB_, which cannot reach fresh mmap'd pages and tripled
  // the whole-model suites' time).
  static const bool poison = std::getenv("TFPIN_TEST_POISON_WEIGHTS") != nullptr;
  if (poison) {
    std::fill_n(data, b.bytes / sizeof(float), std::numeric_limits<float>::quiet_NaN());
  }
  report.weight_bytes += b.bytes;
  buffers.push_back(std::move(b));
  return {static_cast<int>(buffers.size() - 1), data};
}

int Lowering::constant_as(int v, const md_t& user, const md_t& want) {
  std::vector<std::pair<md_t, int>>& copies = constants_[v];
  for (const auto& [md, buffer] : copies) {
    if (md == want) return buffer;
  }
  const Value& value = ir.values[static_cast<std::size_t>(v)];
  const int buffer = constant_values(*value.data, user, want, value.name);
  copies.emplace_back(want, buffer);
  return buffer;
}

dnnl::primitive_attr Lowering::attributes(const Node& node) const {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  if (node.kind == OpKind::batch_norm) return attr;  // its ReLU is a flag
  dnnl::post_ops ops;
  for (const PostOp& p : node.post_ops) {
    switch (p.kind) {
      case PostOp::Kind::relu:
        onednn::append_relu(ops);
        break;
      case PostOp::Kind::sum:
        ops.append_sum(1.0f);
        break;
      case PostOp::Kind::eltwise:
        for (const onednn::EltwiseStep& step : eltwise_steps(p.eltwise)) {
          onednn::append_eltwise(ops, step);
        }
        break;
    }
  }
  if (ops.len() > 0) attr.set_post_ops(ops);
  return attr;
}

std::string Lowering::op_label(const Node& node) const {
  // Activations and binary operations by what they compute ("hard_swish", "binary_mul").
  std::string label = to_string(node.kind);
  if (const auto* e = std::get_if<Eltwise>(&node.attrs)) label = to_string(e->kind);
  if (const auto* b = std::get_if<Binary>(&node.attrs)) {
    label += fmt::format("_{}", to_string(b->kind));
  }
  for (const PostOp& p : node.post_ops) {
    switch (p.kind) {
      case PostOp::Kind::relu:
        label += "+relu";
        break;
      case PostOp::Kind::sum:
        label += "+sum";
        break;
      case PostOp::Kind::eltwise:
        label += fmt::format("+{}", to_string(p.eltwise.kind));
        break;
    }
  }
  if (node.fused_max_pool) label += "+max_pool";
  return label;
}

ScopedOmpThreads::ScopedOmpThreads(unsigned threads) : saved_(omp_get_max_threads()) {
  omp_set_num_threads(static_cast<int>(std::max(1u, threads)));
}

ScopedOmpThreads::~ScopedOmpThreads() { omp_set_num_threads(saved_); }

void Lowering::add_step(Step step, const dnnl::primitive_desc_base& pd) {
  step.scratchpad_bytes = pd.scratchpad_desc().get_size();
  const char* impl = pd.impl_info_str();
  step.impl = impl != nullptr ? impl : "";
  step.bytes = 0;
  for (const Arg& a : step.args) step.bytes += a.md.get_size();
  if (step.threads == 0) step.threads = step_threads;
  steps.push_back(std::move(step));
}

void Lowering::add_reorder(const std::string& name, int src_buffer, const md_t& src_md,
                           int dst_buffer, const md_t& dst_md) {
  // A reorder of a value for a wide node may run beside other nodes of the lane's width (it
  // depends on the value's producer only): always the lane's threads.
  const ScopedOmpThreads lane_threads(options.intra);
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  dnnl::reorder::primitive_desc pd(engine, src_md, engine, dst_md, attr);
  Step step;
  step.name = name;
  step.op = "reorder";
  step.primitive = dnnl::reorder(pd);
  step.args.push_back(Arg::in(DNNL_ARG_SRC, src_buffer, src_md));
  step.args.push_back(Arg::out(DNNL_ARG_DST, dst_buffer, dst_md));
  step.threads = std::max(1u, options.intra);
  add_step(std::move(step), pd);
  ++report.reorders;
}

int Lowering::reordered(int buffer, const md_t& from, const md_t& to, const std::string& name) {
  if (from == to) return buffer;
  const int out = new_arena_buffer(to, name);
  add_reorder(name + ":reorder", buffer, from, out, to);
  return out;
}

}  // namespace tfpin::engine::detail
