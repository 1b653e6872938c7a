#include "threads.hpp"

#include <fmt/format.h>

#include <cstdlib>
#include <initializer_list>
#include <tuple>
#include <utility>

#include "tfpin/cpulist.hpp"
#include "tfpin/error.hpp"
#include "tfpin/options.hpp"
#include "tfpin/placement.hpp"
#include "tfpin/topology.hpp"

namespace tfpin::cli {

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

// The flag when given and not 0, else the first of `variables` set and not 0: value and source.
std::optional<std::pair<unsigned, std::string>> first_given(
    std::optional<unsigned> flag, const std::string& flag_name, const EnvGetter& get,
    std::initializer_list<const char*> variables) {
  if (flag && *flag > 0) return std::pair{*flag, flag_name};
  for (const char* name : variables) {
    if (auto value = env_count(get, name)) return std::pair{*value, std::string(name)};
  }
  return std::nullopt;
}

}  // namespace

ThreadSettings resolve_threads(const ThreadRequest& request, const EnvGetter& get) {
  ThreadSettings s;
  const std::optional<Plan> handed_over = decode_plan(get);
  std::vector<unsigned> allowed = handed_over ? handed_over->cpus() : current_affinity();
  const Topology topology = Topology::host();

  if (auto chosen =
          first_given(request.inter, request.inter_flag, get, {"TF_NUM_INTEROP_THREADS"})) {
    std::tie(s.lanes, s.lanes_source) = *chosen;
  } else if (handed_over) {
    std::tie(s.lanes, s.lanes_source) = std::pair{handed_over->interop, "TFPIN_INTEROP"};
  } else {
    std::tie(s.lanes, s.lanes_source) = std::pair{1u, "default"};
  }

  PlacementRequest all;
  all.allowed = allowed;
  const Plan everything = compute_plan(topology, all);  // one slot per usable core
  const unsigned slots = everything.threads;

  const std::initializer_list<const char*> intra_variables = {"TF_NUM_INTRAOP_THREADS",
                                                              "OMP_NUM_THREADS"};
  if (auto chosen =
          first_given(request.intra, request.intra_flag, get,
                      request.intra_ignores_environment ? std::initializer_list<const char*>{}
                                                        : intra_variables)) {
    std::tie(s.intra, s.intra_source) = *chosen;
  } else if (handed_over && handed_over->interop == s.lanes && !request.intra_ignores_environment) {
    std::tie(s.intra, s.intra_source) = std::pair{handed_over->intra, "TFPIN_INTRA"};
  } else {
    std::tie(s.intra, s.intra_source) = std::pair{std::max(1u, slots / s.lanes), "default"};
  }

  const unsigned total = s.lanes * s.intra;
  if (s.lanes > slots && s.intra_source == "default") {
    // Only the lanes were asked for: say so, not the intra default derived from them.
    throw Error(
        ErrorKind::invalid_request,
        fmt::format("{}={}: {} lanes of one thread each are more than the {} cores "
                    "allowed (cpus {}) (valid: 1 to {})",
                    s.lanes_source, s.lanes, s.lanes, slots, format_cpulist(allowed), slots));
  }
  if (s.lanes > slots || total > slots) {
    const std::string inter_text = s.lanes_source == "default"
                                       ? fmt::format("{} inter-op lane", s.lanes)
                                       : fmt::format("{}={}", s.lanes_source, s.lanes);
    throw Error(
        ErrorKind::invalid_request,
        fmt::format("{}={} x {} needs {} threads, more than the {} cores allowed (cpus {}): "
                    "one thread per core, so intra x inter must be at most {}",
                    s.intra_source, s.intra, inter_text, total, slots, format_cpulist(allowed),
                    slots));
  }
  if (handed_over && handed_over->interop == s.lanes && handed_over->intra == s.intra) {
    for (const Lane& lane : handed_over->lanes) s.lane_cpus.push_back(lane.cpus);
    s.cpus_source = "TFPIN_CPUS";
  } else {
    PlacementRequest r;
    r.threads = total;
    r.interop = s.lanes;
    r.allowed = allowed;
    r.names.threads = s.intra_source + " x " + s.lanes_source;
    r.names.interop = s.lanes_source;
    const Plan plan = compute_plan(topology, r);
    for (const Lane& lane : plan.lanes) s.lane_cpus.push_back(lane.cpus);
    s.cpus_source = "computed";
  }
  return s;
}

}  // namespace tfpin::cli
