// Lowering the IR to oneDNN: every live node becomes one primitive (plus reorders where a consumer
// needs another layout than its producer made), with its arguments pointing into buffers that the
// memory planner places afterwards.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "ir.hpp"
#include "tfpin/engine/runtime.hpp"

namespace tfpin::engine::detail {

using md_t = dnnl::memory::desc;
using tag = dnnl::memory::format_tag;

struct AlignedFree {
  void operator()(void* p) const noexcept;
};
using AlignedBytes = std::unique_ptr<std::byte, AlignedFree>;
// 64-byte aligned (2 MiB aligned with transparent huge pages advised for big blocks); nullptr when
// the allocation fails.
AlignedBytes allocate_aligned(std::uint64_t bytes);

enum class BufferKind { arena, weights, input, output };

struct Buffer {
  BufferKind kind = BufferKind::arena;
  std::uint64_t bytes = 0;
  std::uint64_t offset = 0;  // arena: placed by the planner
  int io = -1;               // input / output: index in the runtime's inputs / outputs
  AlignedBytes owned;        // weights
  std::string name;          // for describe()
};

struct Arg {
  int arg = 0;  // DNNL_ARG_*
  int buffer = -1;
  md_t md;
  bool read = true;
  bool write = false;
};

struct Step {
  std::string name;
  std::string op;
  std::string impl;
  dnnl::primitive primitive;
  std::vector<Arg> args;
  std::uint64_t scratchpad_bytes = 0;
  bool reorder = false;
};

bool is_plain(const md_t& md);          // no inner blocks
std::string md_string(const md_t& md);  // "nChw16c 32x64x56x56"
md_t plain_md(const Dims& dims, Layout layout);
md_t any_md(const Dims& dims);
dnnl::memory::dims to_dnnl(const Dims& dims);

class Lowering {
 public:
  Lowering(Ir& ir, dnnl::engine engine, const CompileOptions& options, CompileReport& report);

  Ir& ir;
  dnnl::engine engine;
  const CompileOptions& options;
  dnnl::stream compile_stream;
  CompileReport& report;
  std::vector<Buffer> buffers;
  std::vector<Step> steps;

  // The layout and buffer each value lives in once produced.
  std::vector<md_t> value_md;
  std::vector<int> value_buffer;
  std::vector<bool> defined;

  int new_arena_buffer(const md_t& md, std::string name);
  // Reads value v in layout `want`: its own buffer when it already is in that layout, else the
  // buffer of a reorder into it (one reorder per value and layout, shared by every consumer).
  int read_as(int v, const md_t& want);
  // A constant reordered once at compile time from `user` (its logical row-major layout, possibly
  // reshaped, e.g. grouped weights) into `want`; returns a weights buffer.
  int constant_as(int v, const md_t& user, const md_t& want);
  int constant_values(const std::vector<float>& values, const md_t& user, const md_t& want,
                      std::string name);
  void define(int v, const md_t& md, int buffer);

  // Attributes with the node's post-ops and a user-managed scratchpad.
  dnnl::primitive_attr attributes(const Node& node) const;
  void add_step(Step step, const dnnl::primitive_desc_base& pd);
  // Adds a reorder step from (src_buffer, src_md) to (dst_buffer, dst_md).
  void add_reorder(const std::string& name, int src_buffer, const md_t& src_md, int dst_buffer,
                   const md_t& dst_md);
  std::string op_label(const Node& node) const;

 private:
  std::map<std::pair<int, std::string>, int> reordered_;  // (value, layout key) -> buffer
  std::map<std::pair<int, std::string>, int> constants_;
};

// Lowering of each operator (ops/*.cpp).
void lower_convolution(Lowering& l, int node);
void lower_batch_norm(Lowering& l, int node);
void lower_relu(Lowering& l, int node);
void lower_pooling(Lowering& l, int node);
void lower_lrn(Lowering& l, int node);
void lower_concat(Lowering& l, int node);
void lower_add(Lowering& l, int node);
void lower_inner_product(Lowering& l, int node);
void lower_softmax(Lowering& l, int node);
void lower_flatten(Lowering& l, int node);
// dropout never reaches lowering (drop_identities)

}  // namespace tfpin::engine::detail
