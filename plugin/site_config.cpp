#include "site_config.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <map>

#include "tfpin/error.hpp"
#include "tfpin/options.hpp"

#ifndef TFPIN_SHIM_PATH
#define TFPIN_SHIM_PATH ""
#endif

namespace tfpin::plugin {
namespace {

[[noreturn]] void bad(std::string_view key, std::string_view value, std::string_view valid) {
  throw Error(ErrorKind::invalid_request, fmt::format("plugstack.conf: {}={} is not valid: {}", key,
                                                      shown_value(value), valid));
}

template <typename Enum, std::size_t N>
Enum choose(std::string_view key, std::string_view value,
            const std::array<std::pair<std::string_view, Enum>, N>& choices) {
  std::string valid;
  for (const auto& [name, choice] : choices) {
    if (name == value) return choice;
    valid += valid.empty() ? "one of " : ", ";
    valid += name;
  }
  bad(key, value, valid);
}

bool yes_no(std::string_view key, std::string_view value) {
  return choose<bool, 2>(key, value, {{{"yes", true}, {"no", false}}});
}

unsigned count(std::string_view key, std::string_view value, unsigned max) {
  return parse_count(fmt::format("plugstack.conf: {}", key), value, max);
}

// One row per key: its name, its default as written in plugstack.conf, what a message lists as
// valid, and how a value lands in SiteConfig (each setter checks its value and throws).
constexpr std::array<SiteKey, 17> keys = {{
    {"interop", "1", "",
     [](SiteConfig& c, std::string_view v) { c.interop = count("interop", v, max_count); }},
    {"blocktime", "1", "",
     [](SiteConfig& c, std::string_view v) {
       c.blocktime_ms = parse_non_negative("plugstack.conf: blocktime", v, 1000);
     }},
    {"hyperthreads", "no", "no|yes|never",
     [](SiteConfig& c, std::string_view v) {
       c.hyperthreads = choose<SiteHyperthreads, 3>("hyperthreads", v,
                                                    {{{"no", SiteHyperthreads::no},
                                                      {"yes", SiteHyperthreads::yes},
                                                      {"never", SiteHyperthreads::never}}});
     }},
    {"shim", "yes", "yes|no",
     [](SiteConfig& c, std::string_view v) { c.shim = yes_no("shim", v); }},
    {"shim_path", TFPIN_SHIM_PATH, "PATH",
     [](SiteConfig& c, std::string_view v) {
       if (v.empty() || v.front() != '/') bad("shim_path", v, "an absolute path");
       c.shim_path = std::string(v);
     }},
    {"cpu_files", "yes", "yes|no",
     [](SiteConfig& c, std::string_view v) { c.cpu_files = yes_no("cpu_files", v); }},
    {"containers", "apptainer", "apptainer|singularity|no",
     [](SiteConfig& c, std::string_view v) {
       c.containers = choose<ContainerRuntime, 3>("containers", v,
                                                  {{{"apptainer", ContainerRuntime::apptainer},
                                                    {"singularity", ContainerRuntime::singularity},
                                                    {"no", ContainerRuntime::none}}});
     }},
    {"oci_shim", "no", "no|yes",
     [](SiteConfig& c, std::string_view v) { c.oci_shim = yes_no("oci_shim", v); }},
    {"enforcement", "strict", "strict|clamp",
     [](SiteConfig& c, std::string_view v) {
       c.enforcement = choose<Enforcement, 2>(
           "enforcement", v, {{{"strict", Enforcement::strict}, {"clamp", Enforcement::clamp}}});
     }},
    {"on_error", "warn", "warn|fail",
     [](SiteConfig& c, std::string_view v) {
       c.on_error =
           choose<OnError, 2>("on_error", v, {{{"warn", OnError::warn}, {"fail", OnError::fail}}});
     }},
    {"activation", "on-request", "on-request|always",
     [](SiteConfig& c, std::string_view v) {
       c.activation = choose<Activation, 2>(
           "activation", v,
           {{{"on-request", Activation::on_request}, {"always", Activation::always}}});
     }},
    {"verbose", "no", "no|yes",
     [](SiteConfig& c, std::string_view v) { c.verbose = yes_no("verbose", v); }},
    {"override_env", "no", "no|yes",
     [](SiteConfig& c, std::string_view v) { c.override_env = yes_no("override_env", v); }},
    {"tf_intraop", "intra", "intra|threads",
     [](SiteConfig& c, std::string_view v) {
       c.tf_intraop_all_threads =
           choose<bool, 2>("tf_intraop", v, {{{"intra", false}, {"threads", true}}});
     }},
    {"max_threads", "65536", "",
     [](SiteConfig& c, std::string_view v) { c.max_threads = count("max_threads", v, max_count); }},
    {"max_interop", "256", "",
     [](SiteConfig& c, std::string_view v) { c.max_interop = count("max_interop", v, max_count); }},
    {"topology_cache", "/run/tfpin", "DIR|no",
     [](SiteConfig& c, std::string_view v) {
       if (v == "no") {
         c.topology_cache.clear();
         return;
       }
       if (v.size() < 2 || v.front() != '/' || v.find('\0') != std::string_view::npos) {
         bad("topology_cache", v,
             "an absolute directory (root's, not writable by others; e.g. /run/tfpin), or no");
       }
       c.topology_cache = std::string(v);
     }},
}};

// "interop=1 ... hyperthreads=no|yes|never ...", for messages.
std::string key_list() {
  std::string list;
  for (const SiteKey& k : keys) {
    list += fmt::format("{}{}={}", list.empty() ? "" : " ", k.key,
                        k.choices.empty() ? k.fallback : k.choices);
  }
  return list;
}

}  // namespace

std::span<const SiteKey> site_keys() { return keys; }

SiteConfig parse_site_config(std::span<const std::string_view> args) {
  SiteConfig config;
  // An empty default (shim_path where the build does not say where the shim goes) stays empty.
  for (const SiteKey& k : keys) {
    if (!k.fallback.empty()) k.set(config, k.fallback);
  }
  std::map<std::string_view, std::string_view> seen;  // key -> its value
  for (std::string_view arg : args) {
    const auto eq = arg.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw Error(ErrorKind::invalid_request,
                  fmt::format("plugstack.conf: '{}' is not key=value (keys: {})", shown_value(arg),
                              key_list()));
    }
    const std::string_view key = arg.substr(0, eq);
    const auto* row =
        std::find_if(keys.begin(), keys.end(), [&](const SiteKey& k) { return k.key == key; });
    if (row == keys.end()) {
      throw Error(
          ErrorKind::invalid_request,
          fmt::format("plugstack.conf: unknown key '{}' (keys: {})", shown_value(key), key_list()));
    }
    const std::string_view value = arg.substr(eq + 1);
    if (const auto [first, inserted] = seen.emplace(key, value); !inserted) {
      throw Error(ErrorKind::invalid_request,
                  fmt::format("plugstack.conf: key '{}' is given twice ({}={}, then {}={}); valid: "
                              "each key at most once",
                              key, key, shown_value(first->second), key, shown_value(value)));
    }
    row->set(config, value);
  }
  if (config.interop > config.max_interop) {
    throw Error(ErrorKind::invalid_request,
                fmt::format("plugstack.conf: interop={} is above max_interop={} (valid: interop "
                            "from 1 to {})",
                            config.interop, config.max_interop, config.max_interop));
  }
  return config;
}

}  // namespace tfpin::plugin
