#include "threads.hpp"

#include <fmt/format.h>

#include <cstdlib>

#include "tfpin/cpulist.hpp"
#include "tfpin/error.hpp"
#include "tfpin/options.hpp"
#include "tfpin/placement.hpp"
#include "tfpin/topology.hpp"

namespace tfpin::cli {

EnvGetter process_environment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

namespace {

// A positive count from the environment; unset, empty and 0 ("let the runtime choose") are unset.
std::optional<unsigned> env_count(const EnvGetter& get, const std::string& name) {
  auto text = get(name);
  if (!text || text->empty()) return std::nullopt;
  std::string first = text->substr(0, text->find(','));  // OMP_NUM_THREADS may be a list
  unsigned v = parse_non_negative(name, first, max_count);
  if (v == 0) return std::nullopt;
  return v;
}

}  // namespace

ThreadSettings resolve_threads(const ThreadRequest& request, const EnvGetter& get) {
  ThreadSettings s;
  const std::optional<Plan> handed_over = decode_plan(get);
  std::vector<unsigned> allowed = handed_over ? handed_over->cpus() : current_affinity();
  const Topology topology = Topology::host();

  if (request.inter && *request.inter > 0) {
    s.inter = *request.inter;
    s.inter_source = request.inter_flag;
  } else if (auto v = env_count(get, "TF_NUM_INTEROP_THREADS")) {
    s.inter = *v;
    s.inter_source = "TF_NUM_INTEROP_THREADS";
  } else if (handed_over) {
    s.inter = handed_over->interop;
    s.inter_source = "TFPIN_INTEROP";
  } else {
    s.inter = 1;
    s.inter_source = "default";
  }

  PlacementRequest all;
  all.allowed = allowed;
  const Plan everything = compute_plan(topology, all);  // one slot per usable core
  const unsigned slots = everything.threads;

  if (request.intra && *request.intra > 0) {
    s.intra = *request.intra;
    s.intra_source = request.intra_flag;
  } else if (auto v = env_count(get, "TF_NUM_INTRAOP_THREADS")) {
    s.intra = *v;
    s.intra_source = "TF_NUM_INTRAOP_THREADS";
  } else if (auto w = env_count(get, "OMP_NUM_THREADS")) {
    s.intra = *w;
    s.intra_source = "OMP_NUM_THREADS";
  } else if (handed_over && handed_over->interop == s.inter) {
    s.intra = handed_over->intra;
    s.intra_source = "TFPIN_INTRA";
  } else {
    s.intra = std::max(1u, slots / s.inter);
    s.intra_source = "default";
  }

  const unsigned total = s.inter * s.intra;
  if (s.inter > slots || total > slots) {
    const std::string inter_text = s.inter_source == "default"
                                       ? fmt::format("{} inter-op lane", s.inter)
                                       : fmt::format("{}={}", s.inter_source, s.inter);
    throw Error(
        ErrorKind::invalid_request,
        fmt::format("{}={} x {} needs {} threads, more than the {} cores allowed (cpus {}): "
                    "one thread per core, so intra x inter must be at most {}",
                    s.intra_source, s.intra, inter_text, total, slots, format_cpulist(allowed),
                    slots));
  }
  if (handed_over && handed_over->interop == s.inter && handed_over->intra == s.intra) {
    for (const Lane& lane : handed_over->lanes) s.lane_cpus.push_back(lane.cpus);
    s.cpus_source = "TFPIN_CPUS";
  } else {
    PlacementRequest r;
    r.threads = total;
    r.interop = s.inter;
    r.allowed = allowed;
    r.names.threads = s.intra_source + " x " + s.inter_source;
    r.names.interop = s.inter_source;
    const Plan plan = compute_plan(topology, r);
    for (const Lane& lane : plan.lanes) s.lane_cpus.push_back(lane.cpus);
    s.cpus_source = "computed";
  }
  return s;
}

}  // namespace tfpin::cli
