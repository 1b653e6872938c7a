// The batch-1 inference path of the inner product (matrix_vector.cpp).
#pragma once

#include "../lowering.hpp"

namespace tfpin::engine::detail {

// Batch 1, inference, ReLU at most, whole blocks of 4 outputs x 16 inputs, and AVX-512 or AVX2
// (the effective ISA oneDNN reports, so its ISA cap applies).
bool matrix_vector_applies(const Lowering& l, const Node& n, const Dims& x, const Dims& w);
void lower_matrix_vector(Lowering& l, int node);

}  // namespace tfpin::engine::detail
