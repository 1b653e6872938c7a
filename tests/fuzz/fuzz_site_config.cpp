// The plugstack.conf arguments (`key=value ...`, NUL- or space-separated): a config, or
// tfpin::Error naming the key. Never anything else: the plugin parses this inside slurmstepd.
#include "../../plugin/site_config.hpp"
#include "fuzz_util.hpp"
#include "tfpin/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<std::string_view> args;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    if (i == text.size() || text[i] == ' ' || text[i] == '\0') {
      if (i > start) args.emplace_back(text.data() + start, i - start);
      start = i + 1;
    }
  }
  try {
    const tfpin::plugin::SiteConfig config = tfpin::plugin::parse_site_config(args);
    FUZZ_CHECK(config.interop >= 1);
    FUZZ_CHECK(!config.shim_path.empty());
  } catch (const tfpin::Error& e) {
    FUZZ_CHECK(e.kind() == tfpin::ErrorKind::invalid_request);
  }
  return 0;
}
