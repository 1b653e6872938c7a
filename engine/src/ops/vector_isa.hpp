// What the vector kernels built once per vector width (winograd_kernels.cpp,
// pointwise_kernels.cpp) share: the width, the micro-kernel's output block and GCC vector
// extensions for the arithmetic. Everything is in an unnamed namespace, so each ISA's build keeps
// its own copy: a header's ordinary inline function would be merged by the linker, and the
// AVX-512 build's could then run on an AVX2 machine.
#pragma once

#ifndef TFPIN_WINOGRAD_FLOATS
#error "build with TFPIN_WINOGRAD_FLOATS=8 (AVX2) or 16 (AVX-512)"
#endif

namespace tfpin::engine::detail {
namespace {  // NOLINT(google-build-namespaces, cert-dcl59-cpp): one copy per ISA, see above

constexpr int floats = TFPIN_WINOGRAD_FLOATS;
#if TFPIN_WINOGRAD_FLOATS == 16
constexpr int block_vectors = 4;  // 6 x 4 accumulators of 32 zmm registers
#else
constexpr int block_vectors = 2;  // 6 x 2 accumulators of 16 ymm registers
#endif

// Unaligned and allowed to alias float (the buffers are floats).
typedef float vec __attribute__((vector_size(floats * 4), aligned(4), may_alias));

inline vec load(const float* p) { return *reinterpret_cast<const vec*>(p); }
inline void store(float* p, vec x) { *reinterpret_cast<vec*>(p) = x; }
inline vec splat(float x) { return x - vec{}; }  // x - 0 is x (x + 0 is not, for -0)

}  // namespace
}  // namespace tfpin::engine::detail
