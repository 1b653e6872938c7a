// join_mpi_job and mpi_library_version for the tfpin command: they load libtfpin-mpi.so on first
// use, so only data-parallel runs and --version load libmpi (mpi_module.hpp says why).
#include <dlfcn.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <filesystem>
#include <string>
#include <vector>

#include "commands.hpp"
#include "mpi_module.hpp"
#include "ranks.hpp"

namespace tfpin::cli {

#ifdef TFPIN_MPI_MODULE_PATH

namespace {

// The build tree's module next to this tfpin (build/cli/); else the module of the install this
// tfpin belongs to (also when relocated, e.g. under rpm --root); else where the package installs it.
std::vector<std::string> module_candidates() {
  namespace fs = std::filesystem;
  std::vector<std::string> candidates;
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    candidates.push_back((exe.parent_path() / TFPIN_MPI_MODULE_NAME).string());
#ifdef TFPIN_MPI_MODULE_FROM_BINDIR
    candidates.push_back((exe.parent_path() / TFPIN_MPI_MODULE_FROM_BINDIR).lexically_normal().string());
#endif
  }
  candidates.emplace_back(TFPIN_MPI_MODULE_PATH);
  return candidates;
}

struct Module {
  tfpin_mpi_library_version_fn* library_version = nullptr;
  tfpin_mpi_join_job_fn* join_job = nullptr;
  std::string error;  // why it could not be loaded, when the functions are null
};

template <typename Fn>
Fn* symbol(void* handle, const char* name) {
  return reinterpret_cast<Fn*>(dlsym(handle, name));
}

Module load() {
  namespace fs = std::filesystem;
  Module module;
  for (const std::string& path : module_candidates()) {
    std::error_code ec;
    if (!fs::is_regular_file(path, ec)) continue;
    // Never closed: the Ranks it makes live until the process ends. RTLD_GLOBAL because some
    // Open MPI builds' own components resolve libmpi's symbols from the global scope.
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_GLOBAL);
    if (handle == nullptr) {
      module.error = fmt::format("cannot load {}: {}", path, dlerror());
      return module;
    }
    auto* interface = symbol<tfpin_mpi_interface_fn>(handle, "tfpin_mpi_interface");
    const int found = interface != nullptr ? interface() : 0;
    if (found != TFPIN_MPI_MODULE_INTERFACE) {
      module.error = fmt::format("{} is of interface {} where this tfpin needs {} (an install "
                                 "from another tfpin version?)",
                                 path, found, TFPIN_MPI_MODULE_INTERFACE);
      return module;
    }
    module.library_version =
        symbol<tfpin_mpi_library_version_fn>(handle, "tfpin_mpi_library_version");
    module.join_job = symbol<tfpin_mpi_join_job_fn>(handle, "tfpin_mpi_join_job");
    if (module.library_version == nullptr || module.join_job == nullptr) {
      module = Module{};
      module.error = fmt::format("{} lacks tfpin's MPI functions", path);
    }
    return module;
  }
  module.error = fmt::format("{} is not installed (looked for {})", TFPIN_MPI_MODULE_NAME,
                             fmt::join(module_candidates(), ", "));
  return module;
}

const Module& loaded() {
  static const Module module = load();
  return module;
}

}  // namespace

std::string mpi_library_version() {
  const Module& module = loaded();
  if (module.library_version == nullptr) return fmt::format("unavailable ({})", module.error);
  char text[256] = {};
  module.library_version(text, sizeof text);
  return text;
}

std::unique_ptr<Ranks> join_mpi_job(double stall_seconds) {
  const Module& module = loaded();
  if (module.join_job == nullptr) {
    end_process("", fmt::format("--variable_update needs tfpin's MPI module: {}", module.error),
                exit_failure);
  }
  return std::unique_ptr<Ranks>(module.join_job(stall_seconds));
}

#else  // built without Open MPI: data-parallel training is refused with the reason

std::string mpi_library_version() { return {}; }

std::unique_ptr<Ranks> join_mpi_job(double /*stall_seconds*/) {
  usage_error(
      "--variable_update: this tfpin was built without MPI (Open MPI's libopenmpi-dev was not "
      "found at build time), so it cannot train across ranks (valid here: replicated)");
}

#endif

}  // namespace tfpin::cli
