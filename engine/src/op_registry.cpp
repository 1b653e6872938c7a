#include "op_registry.hpp"

#include <cstdio>
#include <cstdlib>
#include <map>

namespace tfpin::engine::detail {

namespace {

// Function-local so that registrations from other files' static initialisers find it constructed.
std::map<OpKind, OpDef>& table() {
  static std::map<OpKind, OpDef> ops;
  return ops;
}

}  // namespace

bool register_op(const OpDef& def) {
  if (!table().emplace(def.kind, def).second) {
    std::fprintf(stderr, "tfpin engine: operator '%s' is registered twice\n", def.name);
    std::abort();
  }
  return true;
}

const OpDef* find_op(OpKind kind) {
  auto it = table().find(kind);
  return it == table().end() ? nullptr : &it->second;
}

std::vector<const OpDef*> registered_ops() {
  std::vector<const OpDef*> ops;
  for (const auto& [kind, def] : table()) ops.push_back(&def);
  return ops;
}

}  // namespace tfpin::engine::detail
