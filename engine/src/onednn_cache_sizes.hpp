// oneDNN's cache sizes where CPUID hides them: oneDNN >= 3.2 reads an AMD CPU's caches from CPUID
// leaf 0x8000001D alone, and some hypervisors zero that leaf. onednn_cache_sizes.cpp defines
// oneDNN's get_per_core_cache_size, which libdnnl then calls instead of its own, and answers with
// the operating system's figures there (TFPIN_ONEDNN_CACHE_SIZES=off: oneDNN's own answer, and the
// engine refuses to run there as before).
#pragma once

#include <string>

namespace tfpin::engine::detail {

// Whether the loaded oneDNN takes an AMD CPU's cache sizes from CPUID leaf 0x8000001D alone:
// oneDNN 3.2 and later.
bool onednn_reads_amd_cache_leaf();
// An AMD CPU whose CPUID leaf 0x8000001D reads zero for the L1 data cache or the L2.
bool amd_cache_leaf_zeroed();
// Whether tfpin's answer replaces oneDNN's: oneDNN 3.2 or later, the leaf zeroed, and not
// TFPIN_ONEDNN_CACHE_SIZES=off.
bool cache_sizes_wanted();
// The answer: a core's share of cache `level` (1, 2, 3) in bytes, 0 for other levels.
unsigned os_cache_size(int level);
// Empty when every call libdnnl.so makes to get_per_core_cache_size reaches tfpin's definition
// (read from libdnnl's relocation slots, without running oneDNN), else why not.
std::string cache_sizes_not_supplied_reason();

}  // namespace tfpin::engine::detail
