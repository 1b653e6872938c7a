// oneDNN's cache sizes where CPUID hides them (onednn_cache_sizes.hpp).
//
// oneDNN 3.2 and later ask dnnl::impl::cpu::platform::get_per_core_cache_size(level) for the cache
// sizes it blocks its kernels by, and that answers, on AMD CPUs, from CPUID leaf 0x8000001D alone.
// Some hypervisors zero the leaf (a Firecracker VM of an AMD EPYC); every cache then reads as one
// byte, and the kernels divide by zero (SIGFPE) or compute wrong results. The function is exported
// from Debian's libdnnl.so.3 and libdnnl calls it through its PLT, so a definition earlier in the
// symbol lookup order takes its place: this one, exported from the executables that link the
// engine (engine/meson.build) or preloaded into other programs (libtfpin-onednn-cache-sizes.so,
// for the peer benchmarks). It answers with the operating system's figures where the leaf is
// zeroed and oneDNN is 3.2 or later, and forwards to oneDNN's own everywhere else, so oneDNN 2.x
// (which guesses there) and every CPU that describes its caches see no change.
//
// Self-contained (libc and libdnnl's C API only): also built alone as the preloadable module.
#include "onednn_cache_sizes.hpp"

#include <cpuid.h>
#include <dlfcn.h>
#include <dnnl.h>
#include <elf.h>
#include <link.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace dnnl::impl::cpu::platform {
unsigned get_per_core_cache_size(int level);
}  // namespace dnnl::impl::cpu::platform

namespace tfpin::engine::detail {

namespace {

constexpr const char* mangled_name = "_ZN4dnnl4impl3cpu8platform23get_per_core_cache_sizeEi";

}  // namespace

bool amd_cache_leaf_zeroed() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  if (std::strcmp(vendor, "AuthenticAMD") != 0) return false;  // Xbyak's AMD branch only
  // Subleaf 0 the L1 data cache, 2 the L2; a cache type of 0 means "no cache".
  for (unsigned subleaf : {0U, 2U}) {
    __cpuid_count(0x8000001D, subleaf, eax, ebx, ecx, edx);
    if ((eax & 0x1FU) == 0) return true;
  }
  return false;
}

bool onednn_reads_amd_cache_leaf() {
  const dnnl_version_t* v = dnnl_version();
  return v->major > 3 || (v->major == 3 && v->minor >= 2);
}

bool cache_sizes_wanted() {
  static const bool wanted = [] {
    const char* setting = std::getenv("TFPIN_ONEDNN_CACHE_SIZES");
    if (setting != nullptr && std::strcmp(setting, "off") == 0) return false;
    return onednn_reads_amd_cache_leaf() && amd_cache_leaf_zeroed();
  }();
  return wanted;
}

unsigned os_cache_size(int level) {
  // glibc reads AMD's older leaves 0x80000005 and 0x80000006 for L1 and L2, which such VMs pass
  // through; a figure outside a plausible range falls back to oneDNN's own guesses for a CPU
  // that describes no caches (32 KiB, 512 KiB). The L3 figure of those leaves is the whole
  // cache, not a core's share (that needs 0x8000001D), so L3 takes oneDNN's guess, 1 MiB a core.
  auto plausible = [](long bytes, long low, long high, unsigned fallback) {
    return bytes >= low && bytes <= high ? static_cast<unsigned>(bytes) : fallback;
  };
  switch (level) {
    case 1:
      return plausible(sysconf(_SC_LEVEL1_DCACHE_SIZE), 4L << 10, 4L << 20, 32U << 10);
    case 2:
      return plausible(sysconf(_SC_LEVEL2_CACHE_SIZE), 64L << 10, 64L << 20, 512U << 10);
    case 3:
      return 1U << 20;
    default:
      return 0;
  }
}

namespace {

struct SlotSearch {
  const void* ours = nullptr;
  int slots = 0;    // libdnnl's relocations of the function
  int to_ours = 0;  // of them, those that reach this definition
  bool found_library = false;
};

// Every libdnnl relocation slot of the function (its GOT entries: JUMP_SLOT for the PLT, GLOB_DAT
// for address-taken uses), read after the dynamic linker filled them.
int find_slots(dl_phdr_info* info, size_t /*size*/, void* data) {
  auto* search = static_cast<SlotSearch*>(data);
  if (info->dlpi_name == nullptr || std::strstr(info->dlpi_name, "libdnnl.so") == nullptr) return 0;
  search->found_library = true;
  const ElfW(Dyn)* dynamic = nullptr;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type == PT_DYNAMIC) {
      dynamic = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    }
  }
  if (dynamic == nullptr) return 0;
  // glibc relocates these addresses in place; other loaders may leave them relative.
  auto address = [info](ElfW(Addr) a) { return a < info->dlpi_addr ? a + info->dlpi_addr : a; };
  const ElfW(Sym)* symbols = nullptr;
  const char* names = nullptr;
  const ElfW(Rela) * tables[2] = {};
  std::size_t table_bytes[2] = {};
  for (const ElfW(Dyn)* d = dynamic; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB:
        symbols = reinterpret_cast<const ElfW(Sym)*>(address(d->d_un.d_ptr));
        break;
      case DT_STRTAB:
        names = reinterpret_cast<const char*>(address(d->d_un.d_ptr));
        break;
      case DT_JMPREL:
        tables[0] = reinterpret_cast<const ElfW(Rela)*>(address(d->d_un.d_ptr));
        break;
      case DT_PLTRELSZ:
        table_bytes[0] = d->d_un.d_val;
        break;
      case DT_RELA:
        tables[1] = reinterpret_cast<const ElfW(Rela)*>(address(d->d_un.d_ptr));
        break;
      case DT_RELASZ:
        table_bytes[1] = d->d_un.d_val;
        break;
      default:
        break;
    }
  }
  if (symbols == nullptr || names == nullptr) return 0;
  for (int t = 0; t < 2; ++t) {
    if (tables[t] == nullptr) continue;
    for (std::size_t r = 0; r < table_bytes[t] / sizeof(ElfW(Rela)); ++r) {
      const ElfW(Rela)& rela = tables[t][r];
      const auto type = ELF64_R_TYPE(rela.r_info);
      if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
      const ElfW(Sym)& symbol = symbols[ELF64_R_SYM(rela.r_info)];
      if (std::strcmp(names + symbol.st_name, mangled_name) != 0) continue;
      ++search->slots;
      const void* target = *reinterpret_cast<void* const*>(info->dlpi_addr + rela.r_offset);
      if (target == search->ours) ++search->to_ours;
    }
  }
  return 0;
}

}  // namespace

std::string cache_sizes_not_supplied_reason() {
  SlotSearch search;
  search.ours = reinterpret_cast<const void*>(&dnnl::impl::cpu::platform::get_per_core_cache_size);
  dl_iterate_phdr(find_slots, &search);
  if (!search.found_library) return "no libdnnl.so is loaded";
  if (search.slots == 0) {
    return "this libdnnl.so does not call get_per_core_cache_size through its symbol table";
  }
  if (search.to_ours != search.slots) {
    return "libdnnl.so's calls of get_per_core_cache_size do not reach tfpin's (the executable "
           "does not export it, or lazy binding)";
  }
  return {};
}

}  // namespace tfpin::engine::detail

namespace dnnl::impl::cpu::platform {

__attribute__((visibility("default"))) unsigned get_per_core_cache_size(int level) {
  using Original = unsigned (*)(int);
  static const auto original =
      reinterpret_cast<Original>(dlsym(RTLD_NEXT, tfpin::engine::detail::mangled_name));
  if (tfpin::engine::detail::cache_sizes_wanted() || original == nullptr) {
    return tfpin::engine::detail::os_cache_size(level);
  }
  return original(level);
}

}  // namespace dnnl::impl::cpu::platform
