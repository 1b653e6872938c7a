// Built without Open MPI: data-parallel training is refused with the reason.
#include "commands.hpp"
#include "ranks.hpp"

namespace tfpin::cli {

std::string mpi_library_version() { return {}; }

std::unique_ptr<Ranks> join_mpi_job(double /*stall_seconds*/) {
  usage_error(
      "--variable_update: this tfpin was built without MPI (Open MPI's libopenmpi-dev was not "
      "found at build time), so it cannot train across ranks (valid here: replicated)");
}

}  // namespace tfpin::cli
