// Site policy from the plugstack.conf line: `required tfpin.so key=value ...`. Parsed strictly: an
// unknown key, a repeated key or a bad value is an error that names the key and what is valid.
#pragma once

#include <span>
#include <string>
#include <string_view>

namespace tfpin::plugin {

enum class Activation { on_request, always };
enum class Enforcement { strict, clamp };  // --tf-threads larger than the allocation
enum class OnError { warn, fail };          // topology or binding failures at task launch
enum class SiteHyperthreads { no, yes, never };

struct SiteConfig {
  unsigned interop = 1;
  unsigned blocktime_ms = 1;
  SiteHyperthreads hyperthreads = SiteHyperthreads::no;
  bool shim = true;
  std::string shim_path;  // empty = the path the package installs it to
  Enforcement enforcement = Enforcement::strict;
  OnError on_error = OnError::warn;
  Activation activation = Activation::on_request;
  bool verbose = false;
  bool override_env = false;
  bool tf_intraop_all_threads = false;
  unsigned max_threads = 65536;
  unsigned max_interop = 256;
};

// Throws tfpin::Error(invalid_request).
SiteConfig parse_site_config(std::span<const std::string_view> args);

// Every key with its default, for messages and the annotated etc/ snippet.
std::string_view site_config_keys();

}  // namespace tfpin::plugin
