#include "site_config.hpp"

#include <fmt/format.h>

#include <array>
#include <functional>
#include <map>
#include <set>

#include "tfpin/error.hpp"
#include "tfpin/options.hpp"

namespace tfpin::plugin {
namespace {

[[noreturn]] void bad(std::string_view key, std::string_view value, std::string_view valid) {
  throw Error(ErrorKind::invalid_request,
              fmt::format("plugstack.conf: {}={} is not valid: {}", key, value, valid));
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

}  // namespace

std::string_view site_config_keys() {
  return "interop=1 blocktime=1 hyperthreads=no|yes|never shim=yes|no shim_path=PATH "
         "enforcement=strict|clamp on_error=warn|fail activation=on-request|always verbose=no|yes "
         "override_env=no|yes tf_intraop=intra|threads max_threads=65536 max_interop=256";
}

SiteConfig parse_site_config(std::span<const std::string_view> args) {
  SiteConfig config;
  using Setter = std::function<void(std::string_view)>;
  const std::map<std::string_view, Setter> setters = {
      {"interop", [&](auto v) { config.interop = count("interop", v, max_count); }},
      {"blocktime",
       [&](auto v) {
         config.blocktime_ms = parse_non_negative("plugstack.conf: blocktime", v, 1000);
       }},
      {"hyperthreads",
       [&](auto v) {
         config.hyperthreads = choose<SiteHyperthreads, 3>(
             "hyperthreads", v,
             {{{"no", SiteHyperthreads::no}, {"yes", SiteHyperthreads::yes},
               {"never", SiteHyperthreads::never}}});
       }},
      {"shim", [&](auto v) { config.shim = yes_no("shim", v); }},
      {"shim_path",
       [&](auto v) {
         if (v.empty() || v.front() != '/') bad("shim_path", v, "an absolute path");
         config.shim_path = std::string(v);
       }},
      {"enforcement",
       [&](auto v) {
         config.enforcement = choose<Enforcement, 2>(
             "enforcement", v, {{{"strict", Enforcement::strict}, {"clamp", Enforcement::clamp}}});
       }},
      {"on_error",
       [&](auto v) {
         config.on_error =
             choose<OnError, 2>("on_error", v, {{{"warn", OnError::warn}, {"fail", OnError::fail}}});
       }},
      {"activation",
       [&](auto v) {
         config.activation = choose<Activation, 2>(
             "activation", v,
             {{{"on-request", Activation::on_request}, {"always", Activation::always}}});
       }},
      {"verbose", [&](auto v) { config.verbose = yes_no("verbose", v); }},
      {"override_env", [&](auto v) { config.override_env = yes_no("override_env", v); }},
      {"tf_intraop",
       [&](auto v) {
         config.tf_intraop_all_threads =
             choose<bool, 2>("tf_intraop", v, {{{"intra", false}, {"threads", true}}});
       }},
      {"max_threads", [&](auto v) { config.max_threads = count("max_threads", v, max_count); }},
      {"max_interop", [&](auto v) { config.max_interop = count("max_interop", v, max_count); }},
  };

  std::set<std::string_view> seen;
  for (std::string_view arg : args) {
    const auto eq = arg.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw Error(ErrorKind::invalid_request,
                  fmt::format("plugstack.conf: '{}' is not key=value (keys: {})", arg,
                              site_config_keys()));
    }
    const std::string_view key = arg.substr(0, eq);
    const auto setter = setters.find(key);
    if (setter == setters.end()) {
      throw Error(ErrorKind::invalid_request,
                  fmt::format("plugstack.conf: unknown key '{}' (keys: {})", key, site_config_keys()));
    }
    if (!seen.insert(key).second) {
      throw Error(ErrorKind::invalid_request,
                  fmt::format("plugstack.conf: key '{}' is given twice", key));
    }
    setter->second(arg.substr(eq + 1));
  }
  if (config.interop > config.max_interop) {
    throw Error(ErrorKind::invalid_request,
                fmt::format("plugstack.conf: interop={} is above max_interop={}", config.interop,
                            config.max_interop));
  }
  return config;
}

}  // namespace tfpin::plugin
