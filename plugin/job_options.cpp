#include "job_options.hpp"

#include <fmt/format.h>

#include "tfpin/error.hpp"
#include "tfpin/options.hpp"

namespace tfpin::plugin {

void apply_option(JobOptions& options, OptionId id, const char* optarg) {
  const std::string_view value = optarg != nullptr ? optarg : "";
  switch (id) {
    case OptionId::threads:
      options.threads = parse_count(threads_option, value);
      break;
    case OptionId::interop:
      options.interop = parse_count(interop_option, value);
      break;
    case OptionId::verbose:
      options.verbose = true;
      break;
    case OptionId::off:
      options.off = true;
      break;
    case OptionId::hyperthreads:
      options.hyperthreads = true;
      break;
    default:
      throw Error(ErrorKind::invalid_request, fmt::format("unknown option id {}", int(id)));
  }
}

void apply_environment(JobOptions& options, const EnvGetter& get) {
  options.threads = requested_count(options.threads, get, env_threads);
  options.interop = requested_count(options.interop, get, env_interop);
}

void check_options(const JobOptions& options, const SiteConfig& site) {
  const unsigned interop = options.interop.value_or(site.interop);
  if (options.interop && interop > site.max_interop) {
    throw Error(ErrorKind::invalid_request,
                fmt::format("{}={} is above this site's limit of {} inter-op lanes", interop_option,
                            interop, site.max_interop));
  }
  if (options.threads) {
    if (*options.threads > site.max_threads) {
      throw Error(ErrorKind::invalid_request,
                  fmt::format("{}={} is above this site's limit of {} threads", threads_option,
                              *options.threads, site.max_threads));
    }
    // A site default interop adapts at launch (make_request); only the user's must divide N.
    if (options.interop) {
      check_multiple({threads_option, interop_option}, *options.threads, interop);
    }
  }
  if (options.hyperthreads && site.hyperthreads == SiteHyperthreads::never) {
    throw Error(ErrorKind::invalid_request,
                "--tf-hyperthreads is not allowed on this cluster (site policy hyperthreads=never)");
  }
}

PlacementRequest make_request(const JobOptions& options, const SiteConfig& site) {
  PlacementRequest request;
  request.threads = options.threads;
  request.interop = options.interop.value_or(site.interop);
  request.interop_is_default = !options.interop;
  const bool hyperthreads = site.hyperthreads != SiteHyperthreads::never &&
                            (options.hyperthreads || site.hyperthreads == SiteHyperthreads::yes);
  request.hyperthreads = hyperthreads ? HyperthreadPolicy::all : HyperthreadPolicy::one_per_core;
  request.clamp = site.enforcement == Enforcement::clamp;
  request.names = {threads_option, interop_option};
  return request;
}

EnvironmentPolicy make_environment_policy(const SiteConfig& site) {
  EnvironmentPolicy policy;
  policy.blocktime_ms = site.blocktime_ms;
  policy.tf_intra_is_all_threads = site.tf_intraop_all_threads;
  policy.cpu_files = site.cpu_files;
  return policy;
}

}  // namespace tfpin::plugin
