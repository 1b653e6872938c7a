// The processes of one `tfpin bench` job: this process alone, or the ranks of an MPI job
// (--variable_update=horovod|independent). Every collective is bounded by the stall timeout: a rank
// that died or stopped ends the job with a message, never a hang.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tfpin/engine/runtime.hpp"

namespace tfpin::cli {

class Ranks {
 public:
  virtual ~Ranks() = default;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  [[nodiscard]] virtual std::string node() const = 0;  // the host (MPI's processor name)
  // Every rank's string, by rank. Each rank must call it the same number of times.
  virtual std::vector<std::string> allgather(const std::string& mine) = 0;
  virtual std::vector<double> allgather(double mine) = 0;
  virtual double sum(double mine) = 0;
  // Sums gradients over the ranks (on the engine's communication thread); null for one process.
  virtual std::shared_ptr<engine::GradientReducer> gradient_reducer() = 0;
  // Ends this process at once (stdout flushed) with `message` on stderr, prefixed with the rank;
  // the other ranks end through their own checks or the stall timeout.
  [[noreturn]] virtual void abort(const std::string& message, int exit_code) = 0;
  // Every rank calls it once a collective has shown the job cannot go on: prints `message` (when
  // not empty) like abort, waits (bounded) for the other ranks to reach it, leaves MPI and ends
  // with exit_code. A rank that quits while the others are still in a collective can crash them.
  [[noreturn]] virtual void end_together(const std::string& message, int exit_code) = 0;
  // "rank 1 of 2 (n2)", or "" for one process.
  [[nodiscard]] std::string who() const;
};

// Flushes stdout and prints "tfpin bench: [who: ]message" on stderr.
void print_reason(const std::string& who, const std::string& message);
// print_reason, then ends the process at once.
[[noreturn]] void end_process(const std::string& who, const std::string& message, int exit_code);

std::unique_ptr<Ranks> single_process();
// Both load libtfpin-mpi.so on first use (ranks_loader.cpp, mpi_module.hpp).
// "Open MPI v4.1.4" (MPI_Get_library_version, up to its first comma); "unavailable (why)" when the
// module does not load; empty when built without MPI.
std::string mpi_library_version();
// Joins the MPI job this process was launched in (srun --mpi=pmix, mpirun; a lone process is a
// job of one). stall_seconds: how long any collective may wait for the other ranks (0: forever).
// Throws tfpin::Error(invalid_request) when tfpin was built without MPI; ends the process (exit 1,
// the reason on stderr) when the module does not load.
std::unique_ptr<Ranks> join_mpi_job(double stall_seconds);

}  // namespace tfpin::cli
