// The plugin's and the library's rows of tests/fixtures/bad_inputs.json (runner "plugin"): job
// options and their TFPIN_* forms through the SPANK hooks (fake spank layer), plugstack.conf words,
// and the TFPIN_* plan hand-over lib decodes. Each must be refused with one printable line that
// names the option, variable or key, shows the value as tfpin::shown_value escapes it and says what
// is valid. The schema is tests/fixtures/generate_bad_inputs.py's.
#include <gtest/gtest.h>
#include <sched.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fake_spank.hpp"
#include "site_config.hpp"
#include "tfpin/environment.hpp"
#include "tfpin/error.hpp"

using nlohmann::json;

namespace {

constexpr std::size_t min_rows = 200;

std::string table_path() {
  if (const char* dir = std::getenv("TFPIN_FIXTURE_DIR")) {
    return std::string(dir) + "/bad_inputs.json";
  }
#ifdef TFPIN_FIXTURE_DIR
  return TFPIN_FIXTURE_DIR "/bad_inputs.json";
#else
  return "tests/fixtures/bad_inputs.json";
#endif
}

// The whole table; empty when it cannot be read (TableIsComplete says so).
const json& table() {
  static const json rows = [] {
    std::ifstream file(table_path());
    if (!file) return json::array();
    return json::parse(file, nullptr, false).value("rows", json::array());
  }();
  return rows;
}

std::vector<json> plugin_rows(std::string_view how) {
  std::vector<json> rows;
  for (const json& row : table()) {
    if (row.value("runner", "") == "plugin" && row.value("how", "") == how) rows.push_back(row);
  }
  return rows;
}

std::string row_name(const testing::TestParamInfo<json>& info) {
  return info.param.at("id").get<std::string>();
}

// A table string is bytes, one per character (code points 0..255, UTF-8 in the parsed JSON); an
// object is a long value: prefix, then `repeat` `times` times.
std::string bytes_of(const json& value) {
  if (value.is_object()) {
    std::string out = value.contains("prefix") ? bytes_of(value.at("prefix")) : std::string();
    const std::string unit = bytes_of(value.at("repeat"));
    for (int i = 0; i < value.at("times").get<int>(); ++i) out += unit;
    return out;
  }
  const auto& utf8 = value.get_ref<const std::string&>();
  std::string out;
  for (std::size_t i = 0; i < utf8.size(); ++i) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      out += static_cast<char>(c);
    } else if ((c & 0xE0) == 0xC0 && c <= 0xC3 && i + 1 < utf8.size()) {
      const auto next = static_cast<unsigned char>(utf8[++i]);
      out += static_cast<char>(((c & 0x1F) << 6) | (next & 0x3F));
    } else {
      throw std::runtime_error("table strings are bytes: code points 0..255 only");
    }
  }
  return out;
}

std::map<std::string, std::string> env_of(const json& row) {
  std::map<std::string, std::string> env;
  const json variables = row.value("env", json::object());
  for (const auto& [name, value] : variables.items()) {
    env[name] = bytes_of(value);
  }
  return env;
}

// One line a person reads: printable ASCII, no forged second line, not 100 KB.
void expect_refusal(const json& row, const std::string& message) {
  std::vector<std::string> parts;
  const json& names = row.at("names");
  if (names.is_array()) {
    for (const json& name : names) parts.push_back(name.get<std::string>());
  } else {
    parts.push_back(names.get<std::string>());
  }
  parts.push_back(row.at("value_shown").get<std::string>());
  parts.push_back(row.at("valid").get<std::string>());
  if (row.contains("says")) parts.push_back(row.at("says").get<std::string>());
  for (const std::string& part : parts) {
    EXPECT_NE(message.find(part), std::string::npos) << "'" << part << "' missing in: " << message;
  }
  for (char c : message) {
    const auto byte = static_cast<unsigned char>(c);
    ASSERT_TRUE(byte >= 0x20 && byte < 0x7f) << "raw byte " << int(byte) << " in: " << message;
  }
  EXPECT_LT(message.size(), 1000U) << "a long value must be shortened";
}

using fake_spank::AffinityGuard;

// The process environment sbatch/srun see: the row's variables, and no request or plan from
// outside (these tests may themselves run in a tfpin'd job); put back afterwards.
class ScopedEnvironment {
 public:
  explicit ScopedEnvironment(const std::map<std::string, std::string>& env) {
    for (const char* name : {"TFPIN_THREADS", "TFPIN_INTEROP", "TFPIN_ENV", "TFPIN_CPUS"}) {
      save(name);
      ::unsetenv(name);
    }
    for (const auto& [name, value] : env) {
      save(name);
      ::setenv(name.c_str(), value.c_str(), 1);
    }
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name.c_str(), value->c_str(), 1);
      } else {
        ::unsetenv(name.c_str());
      }
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  void save(const std::string& name) {
    if (saved_.contains(name)) return;
    const char* value = std::getenv(name.c_str());
    saved_[name] = value != nullptr ? std::optional<std::string>(value) : std::nullopt;
  }
  std::map<std::string, std::optional<std::string>> saved_;
};

int init(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  return slurm_spank_init(fake_spank::handle(), static_cast<int>(argv.size()), argv.data());
}

// As Slurm calls an option's callback: remote in slurmstepd.
int option(const std::string& name, const char* value) {
  const int remote = fake_spank::state().context == S_CTX_REMOTE ? 1 : 0;
  for (const spank_option& opt : fake_spank::state().options) {
    if ("--" + std::string(opt.name) == name) return opt.cb(opt.val, value, remote);
  }
  ADD_FAILURE() << "option " << name << " not registered";
  return -2;
}

std::vector<std::string> site_words(const json& row, std::string_view field) {
  std::vector<std::string> words;
  for (const json& word : row.value(std::string(field), json::array())) {
    words.push_back(bytes_of(word));
  }
  return words;
}

// The row's options as the user gave them: name, and the value (nullopt: no argument).
std::vector<std::pair<std::string, std::optional<std::string>>> options_of(const json& row) {
  std::vector<std::pair<std::string, std::optional<std::string>>> options;
  for (const json& pair : row.at("args")) {
    const json& value = pair.at(1);
    options.emplace_back(pair.at(0).get<std::string>(),
                         value.is_null() ? std::nullopt : std::optional(bytes_of(value)));
  }
  return options;
}

const std::string& only_line() {
  const auto& log = fake_spank::state().log;
  static const std::string none;
  EXPECT_EQ(log.size(), 1U) << (log.empty() ? std::string("(no line)") : log.back());
  return log.empty() ? none : log.back();
}

// sbatch/salloc: a bad value fails its callback, a bad combination init_post_opt; either way one
// error line and a non-zero return (sbatch exits).
void refused_at_submit(const json& row) {
  ScopedEnvironment env(env_of(row));
  fake_spank::reset(S_CTX_ALLOCATOR);
  ASSERT_EQ(init(site_words(row, "site")), 0) << fake_spank::state().log.size();
  bool refused = false;
  for (const auto& [name, value] : options_of(row)) {
    const int rc = option(name, value ? value->c_str() : nullptr);
    if (rc != 0) {
      EXPECT_EQ(rc, -1);
      refused = true;
      break;
    }
  }
  if (!refused) {
    EXPECT_EQ(slurm_spank_init_post_opt(fake_spank::handle(), 0, nullptr), -1);
  }
  const std::string& line = only_line();
  EXPECT_TRUE(line.starts_with("error: tfpin: ")) << line;
  expect_refusal(row, line);
}

// slurmstepd: callbacks only note a bad value (Slurm would run the job anyway); task_init fails the
// task with the message, and exports nothing.
void refused_at_launch(const json& row) {
  AffinityGuard guard;
  fake_spank::reset(S_CTX_REMOTE);
  ASSERT_EQ(init(site_words(row, "site")), 0);
  for (const auto& [name, value] : options_of(row)) {
    EXPECT_EQ(option(name, value ? value->c_str() : nullptr), 0) << name;
  }
  EXPECT_TRUE(fake_spank::state().log.empty());
  EXPECT_EQ(slurm_spank_init_post_opt(fake_spank::handle(), 0, nullptr), 0);
  auto& task_env = fake_spank::state().task_env;
  for (const auto& [name, value] : env_of(row)) task_env[name] = value;
  task_env["PATH"] = "/bin";
  EXPECT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), -1);
  const std::string& line = only_line();
  EXPECT_TRUE(line.starts_with("error: tfpin: job 42 step 0 task 0: ")) << line;
  expect_refusal(row, line);
  EXPECT_FALSE(task_env.contains("TFPIN_CPUS"));
  EXPECT_FALSE(task_env.contains("OMP_NUM_THREADS"));
}

}  // namespace

TEST(BadInputTable, IsCompleteAndEveryRowHasARunner) {
  const json& rows = table();
  ASSERT_GE(rows.size(), min_rows) << table_path();
  const std::set<std::string> surfaces = {"cli", "job_option", "site", "lib_env"};
  const std::set<std::string> hows = {"option", "site_config", "decode_plan"};
  std::set<std::string> seen_surfaces;
  std::set<std::string> ids;
  for (const json& row : rows) {
    const std::string id = row.value("id", "");
    EXPECT_TRUE(ids.insert(id).second) << "repeated id " << id;
    const std::string surface = row.value("surface", "");
    EXPECT_TRUE(surfaces.contains(surface)) << id;
    seen_surfaces.insert(surface);
    const std::string runner = row.value("runner", "");
    EXPECT_TRUE(runner == "cli" || runner == "plugin") << id;
    if (runner == "plugin") {
      EXPECT_TRUE(hows.contains(row.value("how", ""))) << id;
    }
    for (const char* field : {"names", "value_shown", "valid"}) {
      EXPECT_TRUE(row.contains(field)) << id << ": no " << field;
    }
  }
  EXPECT_EQ(seen_surfaces, surfaces);
}

class JobOption : public testing::TestWithParam<json> {};

TEST_P(JobOption, IsRefusedNamingOptionValueAndWhatIsValid) {
  const json& row = GetParam();
  ASSERT_FALSE(row.at("contexts").empty());
  for (const json& context : row.at("contexts")) {
    SCOPED_TRACE(context.get<std::string>());
    if (context == "allocator") {
      refused_at_submit(row);
    } else if (context == "remote") {
      refused_at_launch(row);
    } else {
      ADD_FAILURE() << "unknown context " << context;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(BadInputs, JobOption, testing::ValuesIn(plugin_rows("option")), row_name);

class SiteWords : public testing::TestWithParam<json> {};

TEST_P(SiteWords, IsRefusedNamingKeyValueAndWhatIsValid) {
  const json& row = GetParam();
  const std::vector<std::string> words = site_words(row, "args");
  const std::vector<std::string_view> views(words.begin(), words.end());
  try {
    tfpin::plugin::parse_site_config(views);
    ADD_FAILURE() << "accepted";
  } catch (const tfpin::Error& e) {
    EXPECT_EQ(e.kind(), tfpin::ErrorKind::invalid_request);
    expect_refusal(row, e.what());
  }
  // As Slurm loads it: init fails with the same words on one line, and tfpin stays inactive.
  fake_spank::reset(S_CTX_ALLOCATOR);
  EXPECT_EQ(init(words), -1);
  const std::string& line = only_line();
  EXPECT_TRUE(line.starts_with("error: tfpin: plugstack.conf: ")) << line;
  expect_refusal(row, line);
}

INSTANTIATE_TEST_SUITE_P(BadInputs, SiteWords, testing::ValuesIn(plugin_rows("site_config")),
                         row_name);

class PlanHandover : public testing::TestWithParam<json> {};

TEST_P(PlanHandover, IsRefusedNamingVariableValueAndWhatIsValid) {
  const json& row = GetParam();
  const std::map<std::string, std::string> env = env_of(row);
  const tfpin::EnvGetter get = [&env](const std::string& name) -> std::optional<std::string> {
    const auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional(it->second);
  };
  try {
    tfpin::decode_plan(get);
    ADD_FAILURE() << "decoded";
  } catch (const tfpin::Error& e) {
    EXPECT_EQ(e.kind(), tfpin::ErrorKind::invalid_request);
    expect_refusal(row, e.what());
  }
}

INSTANTIATE_TEST_SUITE_P(BadInputs, PlanHandover, testing::ValuesIn(plugin_rows("decode_plan")),
                         row_name);
