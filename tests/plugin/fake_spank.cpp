#include "fake_spank.hpp"

#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace fake_spank {

State& state() {
  static State s;
  return s;
}

void reset(spank_context_t context) {
  state() = State{};
  state().context = context;
}

spank_t handle() { return reinterpret_cast<spank_t>(&state()); }

bool logged(const std::string& needle) {
  for (const auto& line : state().log) {
    if (line.find(needle) != std::string::npos) return true;
  }
  return false;
}

namespace {
void record(const char* level, const char* format, va_list args) {
  char buffer[4096];
  std::vsnprintf(buffer, sizeof buffer, format, args);
  state().log.push_back(std::string(level) + ": " + buffer);
}
}  // namespace

}  // namespace fake_spank

extern "C" {

spank_context_t spank_context(void) { return fake_spank::state().context; }

spank_err_t spank_option_register(spank_t, struct spank_option* opt) {
  fake_spank::state().options.push_back(*opt);
  return static_cast<spank_err_t>(ESPANK_SUCCESS);
}

spank_err_t spank_getenv(spank_t, const char* var, char* buf, int len) {
  const auto& env = fake_spank::state().task_env;
  const auto it = env.find(var);
  if (it == env.end()) return static_cast<spank_err_t>(ESPANK_ENV_NOEXIST);
  if (it->second.size() + 1 > static_cast<std::size_t>(len)) return static_cast<spank_err_t>(ESPANK_NOSPACE);
  std::memcpy(buf, it->second.c_str(), it->second.size() + 1);
  return static_cast<spank_err_t>(ESPANK_SUCCESS);
}

spank_err_t spank_setenv(spank_t, const char* var, const char* val, int overwrite) {
  auto& env = fake_spank::state().task_env;
  if (!overwrite && env.contains(var)) return static_cast<spank_err_t>(ESPANK_ENV_EXISTS);
  env[var] = val;
  return static_cast<spank_err_t>(ESPANK_SUCCESS);
}

spank_err_t spank_unsetenv(spank_t, const char* var) {
  fake_spank::state().task_env.erase(var);
  return static_cast<spank_err_t>(ESPANK_SUCCESS);
}

spank_err_t spank_get_item(spank_t, spank_item_t item, ...) {
  va_list args;
  va_start(args, item);
  auto* out = va_arg(args, uint32_t*);
  va_end(args);
  switch (item) {
    case S_JOB_ID: *out = fake_spank::state().job_id; return static_cast<spank_err_t>(ESPANK_SUCCESS);
    case S_JOB_STEPID: *out = fake_spank::state().step_id; return static_cast<spank_err_t>(ESPANK_SUCCESS);
    case S_TASK_GLOBAL_ID: *out = fake_spank::state().task_id; return static_cast<spank_err_t>(ESPANK_SUCCESS);
    default: return static_cast<spank_err_t>(ESPANK_BAD_ARG);
  }
}

void slurm_error(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fake_spank::record("error", format, args);
  va_end(args);
}

void slurm_info(const char* format, ...) {
  va_list args;
  va_start(args, format);
  fake_spank::record("info", format, args);
  va_end(args);
}

}  // extern "C"
