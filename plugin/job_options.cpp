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
  if (!options.threads) {
    options.threads = requested_count(std::nullopt, get, env_threads);
    if (options.threads) options.names.threads = env_threads;
  }
  if (!options.interop) {
    options.interop = requested_count(std::nullopt, get, env_interop);
    if (options.interop) options.names.interop = env_interop;
  }
}

void check_options(const JobOptions& options, const SiteConfig& site) {
  const unsigned interop = options.interop.value_or(site.interop);
  const OptionNames& names = options.names;
  if (options.interop && interop > site.max_interop) {
    throw Error(ErrorKind::invalid_request,
                fmt::format("{}={} is above this site's limit of {} inter-op lanes (valid: 1..{})",
                            names.interop, interop, site.max_interop, site.max_interop));
  }
  if (options.threads) {
    if (*options.threads > site.max_threads) {
      throw Error(ErrorKind::invalid_request,
                  fmt::format("{}={} is above this site's limit of {} threads (valid: 1..{})",
                              names.threads, *options.threads, site.max_threads, site.max_threads));
    }
    // A site default interop adapts at launch (make_request); only the user's must divide N.
    if (options.interop) check_multiple(names, *options.threads, interop);
  }
  if (options.hyperthreads && site.hyperthreads == SiteHyperthreads::never) {
    throw Error(ErrorKind::invalid_request,
                "--tf-hyperthreads is not allowed on this cluster (site policy "
                "hyperthreads=never; valid: leave it out, tasks get one thread per core)");
  }
}

TaskSettings task_settings(const JobOptions& options, const SiteConfig& site, bool oci_container) {
  TaskSettings s;
  PlacementRequest& request = s.request;
  request.threads = options.threads;
  request.interop = options.interop.value_or(site.interop);
  request.interop_is_default = !options.interop;
  const bool hyperthreads = site.hyperthreads != SiteHyperthreads::never &&
                            (options.hyperthreads || site.hyperthreads == SiteHyperthreads::yes);
  request.hyperthreads = hyperthreads ? HyperthreadPolicy::all : HyperthreadPolicy::one_per_core;
  request.clamp = site.enforcement == Enforcement::clamp;
  request.names = options.names;

  s.environment.blocktime_ms = site.blocktime_ms;
  s.environment.tf_intra_is_all_threads = site.tf_intraop_all_threads;
  s.environment.cpu_files = site.cpu_files;

  s.apply.enforce = site.override_env;
  // In an OCI bundle's root the shim's host path is missing unless the site's bundles bind it:
  // preloading it there would print an ld.so error in every process.
  if (site.shim && !(oci_container && !site.oci_shim)) s.apply.shim = site.shim_path;
  s.apply.containers = oci_container ? ContainerRuntime::none : site.containers;
  s.apply.tolerate_binding_failure = site.on_error == OnError::warn;
  return s;
}

}  // namespace tfpin::plugin
