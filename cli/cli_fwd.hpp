#pragma once

// CLI11 is header-only and its non-template code is compiled again in every file that includes
// CLI/CLI.hpp (seconds each): headers that only hold CLI::App& or CLI::Option* see these
// declarations; the files that build the command line include CLI/CLI.hpp themselves.
namespace CLI {
class App;
class Option;
}  // namespace CLI
