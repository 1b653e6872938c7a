// Site policy from the plugstack.conf line: `required tfpin.so key=value ...`. Parsed strictly: an
// unknown key, a repeated key or a bad value is an error that names the key and what is valid.
#pragma once

#include <span>
#include <string>
#include <string_view>

#include "tfpin/environment.hpp"

namespace tfpin::plugin {

enum class Activation { on_request, always };
enum class Enforcement { strict, clamp };  // --tf-threads larger than the allocation
enum class OnError { warn, fail };  // machine faults at task launch (a bad request always fails)
enum class SiteHyperthreads { no, yes, never };

// The defaults are site_keys()'s, which parse_site_config applies first.
struct SiteConfig {
  unsigned interop{};
  unsigned blocktime_ms{};
  SiteHyperthreads hyperthreads{};
  bool shim{};
  std::string shim_path;
  bool cpu_files{};  // the shim serves the plan's view of /sys/devices/system/cpu, /proc/cpuinfo
  ContainerRuntime containers{};  // the runtime whose launcher gets the shim bound and the plan
  bool oci_shim{};  // srun --container: the site's bundles bind the shim's directory, preload it
  Enforcement enforcement{};
  OnError on_error{};
  Activation activation{};
  bool verbose{};
  bool override_env{};
  bool tf_intraop_all_threads{};
  unsigned max_threads{};
  unsigned max_interop{};
  std::string topology_cache;  // directory of the node's topology cache; empty: no cache
};

// One row per key: the one place a key, its default, its valid values and its meaning for
// SiteConfig are written (a new key is one row and one SiteConfig field).
// etc/plugstack.conf.d/tfpin.conf.in and tfpin-plugin(8) document the same keys and defaults
// (plugin unit tests compare them).
struct SiteKey {
  std::string_view key;
  std::string_view fallback;  // the default, as written in plugstack.conf
  std::string_view choices;   // "no|yes|never"; empty for a number
  void (*set)(SiteConfig& config, std::string_view value);  // checks the value; throws Error
};
std::span<const SiteKey> site_keys();

// Throws tfpin::Error(invalid_request).
SiteConfig parse_site_config(std::span<const std::string_view> args);

}  // namespace tfpin::plugin
