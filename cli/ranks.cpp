#include "ranks.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "exit_codes.hpp"

namespace tfpin::cli {

std::string Ranks::who() const {
  if (size() == 1 && rank() == 0) return {};
  return fmt::format("rank {} of {} ({})", rank(), size(), node());
}

void print_reason(const std::string& who, const std::string& message) {
  std::fflush(stdout);
  fmt::print(stderr, "tfpin bench: {}{}{}\n", who, who.empty() ? "" : ": ", message);
  std::fflush(stderr);
}

void end_process(const std::string& who, const std::string& message, int exit_code) {
  print_reason(who, message);
  std::_Exit(exit_code);
}

namespace {

class SingleProcess final : public Ranks {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string node() const override {
    char name[256] = {};
    return gethostname(name, sizeof name - 1) == 0 ? name : "localhost";
  }
  std::vector<std::string> allgather(const std::string& mine) override { return {mine}; }
  std::vector<double> allgather(double mine) override { return {mine}; }
  double sum(double mine) override { return mine; }
  std::shared_ptr<engine::GradientReducer> gradient_reducer() override { return nullptr; }
  [[noreturn]] void abort(const std::string& message, int exit_code) override {
    end_process("", message, exit_code);
  }
  [[noreturn]] void end_together(const std::string& message, int exit_code) override {
    if (!message.empty()) print_reason("", message);
    std::fflush(stdout);
    std::_Exit(exit_code);
  }
};

}  // namespace

std::unique_ptr<Ranks> single_process() { return std::make_unique<SingleProcess>(); }

}  // namespace tfpin::cli
