// Linked into every engine test but test_version (which checks the refusal below itself).
// Where the loaded oneDNN cannot run on this CPU (onednn_unusable_reason: oneDNN >= 3.2 under a
// hypervisor that hides AMD's cache leaf, where tfpin cannot supply the cache sizes or was told
// not to), Runtime::create refuses, so the suite is skipped with that reason. The ISA-dependent
// suites run twice: as the CPU is, and with oneDNN capped to AVX2 (DNNL_MAX_CPU_ISA /
// ONEDNN_MAX_CPU_ISA, tests/engine/meson.build), so that an AVX-512 machine also exercises the AVX2
// layouts and kernels. TFPIN_TEST_ISA_CAP names the cap of the second run: there the cap must hold
// (else the run would silently test the wide ISA twice), and on a CPU with nothing above the cap
// the first run already was this one, so it is skipped. With TFPIN_TEST_SKIP_ISA_CAP set
// (scripts/test-matrix's roots) the capped run is skipped too.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "tfpin/engine/version.hpp"

namespace {

class EngineEnvironment : public ::testing::Environment {
 public:
  void SetUp() override {
    if (const std::string why = tfpin::engine::onednn_unusable_reason(); !why.empty()) {
      GTEST_SKIP() << why;
    }
    const char* cap = std::getenv("TFPIN_TEST_ISA_CAP");
    if (cap == nullptr || *cap == '\0') return;
    ASSERT_EQ(std::string(cap), "avx2") << "TFPIN_TEST_ISA_CAP: only avx2 is supported";
    if (const char* skip = std::getenv("TFPIN_TEST_SKIP_ISA_CAP");
        skip != nullptr && *skip != '\0') {
      GTEST_SKIP() << "TFPIN_TEST_SKIP_ISA_CAP is set (scripts/test-matrix): the capped run is the "
                      "host's";
    }
    if (__builtin_cpu_supports("avx512f") == 0) {
      GTEST_SKIP() << "no AVX-512 on this CPU: the uncapped run was the AVX2 run";
    }
    ASSERT_EQ(tfpin::engine::onednn_effective_isa(), "avx2")
        << "oneDNN ignored the ISA cap (DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA)";
  }
};

// NOLINTNEXTLINE(cert-err58-cpp): gtest's documented way to register an environment before main.
::testing::Environment* const engine_environment =
    ::testing::AddGlobalTestEnvironment(new EngineEnvironment);

}  // namespace
