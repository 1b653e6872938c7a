// The interface between the tfpin command and libtfpin-mpi.so, the module that holds everything
// touching MPI (ranks_mpi.cpp). tfpin dlopens it only to join an MPI job or to name the MPI
// library: linking libmpi into tfpin itself would make every command pay for Open MPI's load-time
// constructors (about 0.5 s per exec with Open MPI 6).
#pragma once

#include <cstddef>

namespace tfpin::cli {
class Ranks;
}

// Raised whenever the functions below or the Ranks class change: tfpin refuses a module of
// another version (a stale build tree, a half-upgraded install) instead of calling into it.
#define TFPIN_MPI_MODULE_INTERFACE 1
#define TFPIN_MPI_MODULE_NAME "libtfpin-mpi.so"

extern "C" {
using tfpin_mpi_interface_fn = int();
// "Open MPI v4.1.4" (up to its first comma), NUL-terminated, truncated to `size`.
using tfpin_mpi_library_version_fn = void(char* out, std::size_t size);
// Joins the MPI job this process was launched in; never null (a failure ends the process with
// the reason). The caller owns the result; the module must stay loaded while it lives.
using tfpin_mpi_join_job_fn = tfpin::cli::Ranks*(double stall_seconds);
}
