// Thread settings of `tfpin bench` and `tfpin tune` for the engine: how many inter-op lanes, how
// many intra-op threads each, and the cores of each lane. Precedence: explicit values (command-line
// flags) > TF_NUM_INTEROP_THREADS / TF_NUM_INTRAOP_THREADS / OMP_NUM_THREADS > the plan tfpin
// handed over (TFPIN_*) > a plan computed by the placement library for the allowed cores (one
// thread per core, inter-op 1).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tfpin/environment.hpp"

namespace tfpin::cli {

struct ThreadRequest {
  std::optional<unsigned> intra;  // --num_intra_threads (0 counts as unset, as in TensorFlow)
  std::optional<unsigned> inter;  // --num_inter_threads
  // The intra-op environment variables describe one team per process; with several throughput
  // streams (bench --num_streams) each stream's team defaults to its share of the cores instead.
  bool intra_ignores_environment = false;
  std::string intra_flag = "--num_intra_threads";
  std::string inter_flag = "--num_inter_threads";
};

struct ThreadSettings {
  unsigned lanes = 1;  // inter-op lanes (--num_inter_threads, TF_NUM_INTEROP_THREADS, ...)
  unsigned intra = 1;  // threads per lane
  std::vector<std::vector<unsigned>> lane_cpus;  // one entry per lane
  std::string intra_source;  // "--num_intra_threads", "TF_NUM_INTRAOP_THREADS", "plan", ...
  std::string lanes_source;
  std::string cpus_source;  // "TFPIN_CPUS" or "computed"
};

// Throws tfpin::Error(invalid_request) naming the flag or variable, its value and what is valid.
ThreadSettings resolve_threads(const ThreadRequest& request, const EnvGetter& get);

}  // namespace tfpin::cli
