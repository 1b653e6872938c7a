// Inference: a concat whose inputs can be written straight into its output disappears. For one
// image (N = 1) in a channel-outermost layout (nChw16c, nChw8c, nchw, nc), a whole-block slice of
// channels is one contiguous run of memory laid out exactly as the input alone would be, so each
// producer writes its own output buffer, now an alias at an offset inside the concat's buffer,
// and nothing is copied. At batch 1 the copies were a sixth of GoogLeNet's time and a tenth of
// Inception v3's (oneDNN's concat on small blocked tensors runs far below memory speed). The
// branches still write distinct buffers, so the dependency analysis keeps them independent.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "compiled_graph.hpp"

namespace tfpin::engine::detail {

namespace {

// Channels per block when a slice of whole blocks of channels of `md` is contiguous and has the
// layout of a tensor of just those channels: one image in a channel-outermost layout.
std::optional<std::int64_t> channel_block(const md_t& md) {
  const dnnl::memory::dims dims = onednn::blocking_of(md).dims;
  if (dims.empty() || dims[0] != 1) return std::nullopt;
  return channel_sliceable_block(md);
}

// Steps (or their timed alternatives) that write each buffer.
std::vector<int> writer_counts(const std::vector<Buffer>& buffers, const std::vector<Step>& steps) {
  std::vector<int> writers(buffers.size(), 0);
  for (const Step& step : steps) {
    std::vector<int> written;
    auto note = [&](const std::vector<Arg>& args) {
      for (const Arg& a : args) {
        if (a.write) written.push_back(a.buffer);
      }
    };
    note(step.args);
    for (const Alternative& alt : step.alternatives) note(alt.args);
    std::sort(written.begin(), written.end());
    written.erase(std::unique(written.begin(), written.end()), written.end());
    for (int b : written) ++writers[static_cast<std::size_t>(b)];
  }
  return writers;
}

// The concat step's inputs as (buffer, byte offset in the output), when all can be aliased.
std::optional<std::vector<std::pair<int, std::uint64_t>>> aliasable_inputs(
    const Step& step, const std::vector<Buffer>& buffers, const std::vector<int>& writers) {
  if (step.kernel || step.args.size() < 2) return std::nullopt;
  const Arg& out = step.args.back();
  if (!out.write || out.arg != DNNL_ARG_DST) return std::nullopt;
  const Buffer& parent = buffers[static_cast<std::size_t>(out.buffer)];
  if (parent.kind != BufferKind::arena || parent.alias_of >= 0 ||
      writers[static_cast<std::size_t>(out.buffer)] != 1) {
    return std::nullopt;
  }
  const std::optional<std::int64_t> block = channel_block(out.md);
  if (!block) return std::nullopt;
  const dnnl::memory::dims out_dims = onednn::blocking_of(out.md).dims;
  std::int64_t per_channel = 1;  // elements of one channel of the one image
  for (std::size_t d = 2; d < out_dims.size(); ++d) per_channel *= out_dims[d];

  std::vector<std::pair<int, std::uint64_t>> inputs;
  std::int64_t channel = 0;
  for (std::size_t k = 0; k + 1 < step.args.size(); ++k) {
    const Arg& in = step.args[k];
    const auto b = static_cast<std::size_t>(in.buffer);
    const Buffer& buffer = buffers[b];
    const dnnl::memory::dims in_dims = onednn::blocking_of(in.md).dims;
    const bool distinct = std::none_of(inputs.begin(), inputs.end(),
                                       [&](const auto& x) { return x.first == in.buffer; });
    if (in.write || !distinct || buffer.kind != BufferKind::arena || buffer.alias_of >= 0 ||
        writers[b] != 1 || in_dims.size() != out_dims.size() || channel_block(in.md) != block ||
        channel % *block != 0 || in_dims[1] % *block != 0) {
      return std::nullopt;
    }
    const auto offset = static_cast<std::uint64_t>(channel * per_channel) * sizeof(float);
    if (offset % 64 != 0) return std::nullopt;  // tfpin's own kernels want aligned outputs
    inputs.emplace_back(in.buffer, offset);
    channel += in_dims[1];
  }
  if (channel != out_dims[1]) return std::nullopt;
  return inputs;
}

}  // namespace

void place_concats_in_place(std::vector<Buffer>& buffers, std::vector<Step>& steps, unsigned intra,
                            CompileReport& report) {
  const std::vector<int> writers = writer_counts(buffers, steps);
  std::vector<bool> removed(steps.size(), false);
  int count = 0;
  for (std::size_t s = 0; s < steps.size(); ++s) {
    if (steps[s].op != "concat") continue;
    const auto inputs = aliasable_inputs(steps[s], buffers, writers);
    if (!inputs) continue;
    const int parent = steps[s].args.back().buffer;
    for (const auto& [buffer, offset] : *inputs) {
      // A nested concat's output becomes a slice of this one: so do the slices inside it.
      for (Buffer& b : buffers) {
        if (b.alias_of == buffer) {
          b.alias_of = parent;
          b.alias_offset += offset;
        }
      }
      Buffer& b = buffers[static_cast<std::size_t>(buffer)];
      b.alias_of = parent;
      b.alias_offset = offset;
    }
    removed[s] = true;
    ++count;
    if (steps[s].threads > intra) --report.wide_steps;
    if (steps[s].threads < intra) --report.narrow_steps;
  }
  report.in_place_concats = count;
  if (count == 0) return;
  std::vector<Step> kept;
  kept.reserve(steps.size() - static_cast<std::size_t>(count));
  for (std::size_t s = 0; s < steps.size(); ++s) {
    if (!removed[s]) kept.push_back(std::move(steps[s]));
  }
  steps = std::move(kept);
}

}  // namespace tfpin::engine::detail
