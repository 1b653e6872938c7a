#include "tfpin/engine/version.hpp"

#include <fmt/format.h>

#include "onednn_cache_sizes.hpp"
#include "onednn_compat.hpp"

namespace tfpin::engine {

namespace onednn = detail::onednn;

namespace {

std::string runtime_name(unsigned runtime) {
  switch (runtime) {
    case DNNL_RUNTIME_OMP:
      return "OpenMP";
    case DNNL_RUNTIME_TBB:
      return "TBB";
    case DNNL_RUNTIME_SEQ:
      return "sequential";
    case DNNL_RUNTIME_THREADPOOL:
      return "threadpool";
    default:
      return "other";
  }
}

}  // namespace

std::string LibraryVersion::text() const { return fmt::format("{}.{}.{}", major, minor, patch); }

LibraryVersion onednn_runtime_version() {
  const dnnl_version_t* v = dnnl_version();
  return {v->major, v->minor, v->patch, runtime_name(v->cpu_runtime)};
}

LibraryVersion onednn_build_version() {
  return {DNNL_VERSION_MAJOR, DNNL_VERSION_MINOR, DNNL_VERSION_PATCH,
          runtime_name(DNNL_CPU_RUNTIME)};
}

std::string onednn_unusable_reason() {
  if (!detail::onednn_reads_amd_cache_leaf()) return {};
  static const bool zeroed = detail::amd_cache_leaf_zeroed();
  if (!zeroed) return {};
  // tfpin answers oneDNN's cache-size queries itself there (onednn_cache_sizes.hpp), unless
  // turned off or unable to.
  static const std::string not_supplied = [] {
    if (!detail::cache_sizes_wanted()) return std::string("TFPIN_ONEDNN_CACHE_SIZES=off");
    return detail::cache_sizes_not_supplied_reason();
  }();
  if (not_supplied.empty()) return {};
  return fmt::format(
      "oneDNN {} cannot run on this CPU: it takes an AMD CPU's cache sizes from CPUID leaf "
      "0x8000001D alone, which reads zero here (a hypervisor that hides it), and then sizes its "
      "kernels for 1-byte caches, which crash (SIGFPE) or compute wrong results; tfpin supplies "
      "them where it can, but not here ({}). Use a tfpin built with oneDNN 2.x, run on bare "
      "metal, or have the hypervisor expose that leaf",
      onednn_runtime_version().text(), not_supplied);
}

bool onednn_offers_winograd() {
  if (!onednn_unusable_reason().empty()) return false;
  using tag = dnnl::memory::format_tag;
  const auto f32 = dnnl::memory::data_type::f32;
  try {
    const dnnl::engine cpu(dnnl::engine::kind::cpu, 0);
    const onednn::md_t data({4, 64, 14, 14}, f32, tag::any);
    const onednn::md_t weights({64, 64, 3, 3}, f32, tag::any);
    onednn::convolution_forward(
        cpu, dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_winograd, data,
        weights, onednn::md_t(), data, {{1, 1}, {0, 0}, {1, 1}, {1, 1}}, dnnl::primitive_attr());
    return true;
  } catch (const dnnl::error&) {
    return false;
  }
}

std::string onednn_effective_isa() {
  using isa = dnnl::cpu_isa;
  if (onednn::effective_isa_includes(isa::avx512_core)) return "avx512_core";
  if (onednn::effective_isa_includes(isa::avx2)) return "avx2";
  if (onednn::effective_isa_includes(isa::avx)) return "avx";
  if (onednn::effective_isa_includes(isa::sse41)) return "sse41";
  return "other";
}

}  // namespace tfpin::engine
