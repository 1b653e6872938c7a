// The operator registry. Each ops/*.cpp registers the definition of the operator it implements
// (shape inference, lowering to oneDNN, training backward); the compiler looks operators up here
// and has no per-operator switch. Adding an operator = its OpKind and Graph builder method (the
// public API) and one ops/*.cpp file.
#pragma once

#include <vector>

#include "ir.hpp"

namespace tfpin::engine::detail {

class Lowering;

struct OpDef {
  OpKind kind = OpKind::relu;
  const char* name = "";
  // Validates the node's inputs and attributes; sets `out` to its output's dims.
  Status (*infer)(Ir& ir, int node, Dims& out) = nullptr;
  // Emits the node's forward step(s) and defines its output value.
  void (*lower)(Lowering& lowering, int node) = nullptr;
  // Training: adds gradient contributions to the node's inputs and SGD updates of its parameters.
  // nullptr: inference only, and training a graph that uses it is refused.
  void (*backward)(Lowering& lowering, int node) = nullptr;
  // Its constant inputs (weights, bias, batch-norm scale and shift) are trained.
  bool has_parameters = false;
};

// Registers `def` (from a namespace-scope initialiser in its ops/*.cpp; meson links the engine
// whole so that no such file is dropped). Registering one kind twice aborts at start-up: it is a
// build mistake, not a runtime condition.
bool register_op(const OpDef& def);

// At the end of an ops/*.cpp file, after its (static) functions:
//   TFPIN_REGISTER_OP(relu, .infer = infer_relu, .lower = lower_relu, .backward = backward_relu);
#define TFPIN_REGISTER_OP(kind_name, ...)                                                    \
  [[maybe_unused]] const bool registered_##kind_name = ::tfpin::engine::detail::register_op( \
      {.kind = OpKind::kind_name, .name = #kind_name, __VA_ARGS__})

// The definition of `kind`, or nullptr when no file registered it.
const OpDef* find_op(OpKind kind);

// Every registered definition, in OpKind order.
std::vector<const OpDef*> registered_ops();

}  // namespace tfpin::engine::detail
