// `tfpin --version`: tfpin's version and what it was built with, so a site admin can tell which
// Slurm release the plugin next to this command was compiled for.
#include <fmt/format.h>
#include <hwloc.h>

#include <string>

#include "commands.hpp"
#ifdef TFPIN_HAVE_ENGINE
#include "ranks.hpp"
#include "tfpin/engine/version.hpp"
#endif

#ifndef TFPIN_VERSION
#define TFPIN_VERSION "unknown"
#endif

namespace tfpin::cli {

namespace {

std::string hwloc_text(unsigned v) {
  return fmt::format("{}.{}.{}", v >> 16, (v >> 8) & 0xff, v & 0xff);
}

}  // namespace

std::string version_text() {
  std::string text = fmt::format("tfpin {}\n", TFPIN_VERSION);
#ifdef TFPIN_SLURM_VERSION
  text += fmt::format("Slurm headers: {} (the SPANK plugin loads into this Slurm release only)\n",
                      TFPIN_SLURM_VERSION);
#else
  text += "Slurm headers: none (built without the SPANK plugin)\n";
#endif
#ifdef TFPIN_HAVE_ENGINE
  const engine::LibraryVersion built = engine::onednn_build_version();
  const engine::LibraryVersion loaded = engine::onednn_runtime_version();
  text += fmt::format("oneDNN: {} ({}), built with {}; ISA {}\n", loaded.text(), loaded.runtime,
                      built.text(), engine::onednn_effective_isa());
  if (const std::string why = engine::onednn_unusable_reason(); !why.empty()) {
    text += fmt::format("oneDNN unusable here: {} (bench, tune and infer refuse)\n", why);
  }
  const std::string mpi = mpi_library_version();
  if (mpi.empty()) {
    text += "MPI: none (built without MPI: no bench --variable_update=horovod)\n";
  } else if (mpi.starts_with("unavailable")) {
    text += fmt::format("MPI: {}\n", mpi);  // built with it, but the module did not load
  } else {
    text += fmt::format("MPI: {} (bench --variable_update=horovod)\n", mpi);
  }
#else
  text += "oneDNN: none (built without the engine)\n";
#endif
#ifdef TFPIN_SHIM_PATH
  // The floor is the shim's ELF (tests/shim Build), not this build's glibc.
  text += fmt::format("shim: {} (loads with glibc 2.17 or newer)\n", TFPIN_SHIM_PATH);
#endif
  // The release of the headers; the loaded library only tells its API level.
  text += fmt::format("hwloc: {} (library API {})", HWLOC_VERSION,
                      hwloc_text(hwloc_get_api_version()));
  return text;
}

}  // namespace tfpin::cli
