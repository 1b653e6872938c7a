// The plugin's hooks driven through a fake spank_* layer: option and site-config parsing, context
// dispatch, and what a task gets, without a Slurm.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sched.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>

#include "fake_spank.hpp"
#include "log.hpp"
#include "site_config.hpp"
#include "tfpin/error.hpp"
#include "tfpin/topology.hpp"

using tfpin::plugin::parse_site_config;
using tfpin::plugin::SiteConfig;

namespace {

int init(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& arg : args) argv.push_back(arg.data());
  return slurm_spank_init(fake_spank::handle(), static_cast<int>(argv.size()), argv.data());
}

// As Slurm calls it: remote in slurmstepd, from the options the step was given.
int option(const char* name, const char* value) {
  const int remote = fake_spank::state().context == S_CTX_REMOTE ? 1 : 0;
  for (const spank_option& opt : fake_spank::state().options) {
    if (std::string(opt.name) == name) return opt.cb(opt.val, value, remote);
  }
  ADD_FAILURE() << "option " << name << " not registered";
  return -2;
}

std::string config_error(std::vector<std::string_view> args) {
  try {
    parse_site_config(args);
  } catch (const tfpin::Error& e) {
    return e.what();
  }
  return "";
}

using fake_spank::AffinityGuard;

}  // namespace

TEST(SiteConfig, DefaultsAndEveryKey) {
  const SiteConfig defaults = parse_site_config({});
  EXPECT_EQ(defaults.interop, 1U);
  EXPECT_EQ(defaults.activation, tfpin::plugin::Activation::on_request);
  EXPECT_EQ(defaults.enforcement, tfpin::plugin::Enforcement::strict);
  EXPECT_TRUE(defaults.shim);
  EXPECT_EQ(defaults.max_threads, 65536U);  // the rest: SnippetListsEveryKeyWithItsDefault
  EXPECT_EQ(defaults.topology_cache, "/run/tfpin");
  EXPECT_EQ(defaults.containers, tfpin::ContainerRuntime::apptainer);
  EXPECT_FALSE(defaults.oci_shim);
  const std::array<std::string_view, 17> all = {
      "interop=2",           "blocktime=0",  "hyperthreads=never", "shim=no",
      "shim_path=/opt/s.so", "cpu_files=no", "enforcement=clamp",  "on_error=fail",
      "activation=always",   "verbose=yes",  "override_env=yes",   "tf_intraop=threads",
      "max_threads=64",      "max_interop=4", "topology_cache=/var/cache/tfpin",
      "containers=singularity", "oci_shim=yes"};
  const SiteConfig c = parse_site_config(all);
  EXPECT_EQ(c.interop, 2U);
  EXPECT_EQ(c.blocktime_ms, 0U);
  EXPECT_EQ(c.hyperthreads, tfpin::plugin::SiteHyperthreads::never);
  EXPECT_FALSE(c.shim);
  EXPECT_EQ(c.shim_path, "/opt/s.so");
  EXPECT_FALSE(c.cpu_files);
  EXPECT_TRUE(defaults.cpu_files);
  EXPECT_EQ(c.enforcement, tfpin::plugin::Enforcement::clamp);
  EXPECT_EQ(c.on_error, tfpin::plugin::OnError::fail);
  EXPECT_EQ(c.activation, tfpin::plugin::Activation::always);
  EXPECT_TRUE(c.verbose);
  EXPECT_TRUE(c.override_env);
  EXPECT_TRUE(c.tf_intraop_all_threads);
  EXPECT_EQ(c.max_threads, 64U);
  EXPECT_EQ(c.max_interop, 4U);
  EXPECT_EQ(c.topology_cache, "/var/cache/tfpin");
  EXPECT_EQ(c.containers, tfpin::ContainerRuntime::singularity);
  EXPECT_TRUE(c.oci_shim);
  EXPECT_EQ(parse_site_config(std::array<std::string_view, 1>{"containers=no"}).containers,
            tfpin::ContainerRuntime::none);
  EXPECT_EQ(parse_site_config(std::array<std::string_view, 1>{"topology_cache=no"}).topology_cache,
            "");
}

// The installed snippet documents exactly the table's keys, in its order, with its defaults.
TEST(SiteConfig, SnippetListsEveryKeyWithItsDefault) {
  std::ifstream snippet(TFPIN_SITE_SNIPPET);
  ASSERT_TRUE(snippet) << TFPIN_SITE_SNIPPET;
  using Rows = std::vector<std::pair<std::string, std::string>>;
  Rows documented;
  const std::regex row(R"(^#   (\w+)=(\S*))");
  for (std::string line; std::getline(snippet, line);) {
    std::smatch m;
    if (std::regex_search(line, m, row)) documented.emplace_back(m[1], m[2]);
  }
  Rows table;
  for (const auto& key : tfpin::plugin::site_keys()) table.emplace_back(key.key, key.fallback);
  EXPECT_EQ(documented, table);
}

// tfpin-plugin(8) is the one reference for job options and site keys: every option the plugin
// registers and every key of its table opens an item (.TP) of the page, with groff's \- as -.
std::vector<std::string> man_page_items(const char* path, const std::string& section) {
  std::ifstream page(path);
  std::vector<std::string> items;
  std::string current;
  std::string previous;
  for (std::string line; std::getline(page, line); previous = line) {
    if (line.starts_with(".SH ")) current = line.substr(4);
    if (previous != ".TP" || current != section) continue;
    std::string tag = std::regex_replace(line, std::regex(R"(\\-)"), "-");
    std::smatch word;
    if (std::regex_search(tag, word, std::regex(R"(^\.B\w*\s+([\w-]+=?))"))) items.push_back(word[1]);
  }
  return items;
}

TEST(ManPage, DocumentsEveryJobOptionAndSiteKey) {
  ASSERT_TRUE(std::filesystem::exists(TFPIN_PLUGIN_MAN_PAGE)) << TFPIN_PLUGIN_MAN_PAGE;
  const auto options = man_page_items(TFPIN_PLUGIN_MAN_PAGE, "JOB OPTIONS");
  const auto keys = man_page_items(TFPIN_PLUGIN_MAN_PAGE, "SITE CONFIGURATION");
  auto has = [](const std::vector<std::string>& items, const std::string& item) {
    return std::find(items.begin(), items.end(), item) != items.end();
  };
  fake_spank::reset(S_CTX_LOCAL);
  ASSERT_EQ(init({}), 0);
  const auto& registered = fake_spank::state().options;
  ASSERT_EQ(registered.size(), 5U);
  for (const spank_option& option : registered) {
    const std::string name = fmt::format("--{}", option.name);
    EXPECT_TRUE(has(options, option.arginfo != nullptr ? name + "=" : name))
        << name << " is not an item of JOB OPTIONS";
  }
  for (const auto& key : tfpin::plugin::site_keys()) {
    EXPECT_TRUE(has(keys, fmt::format("{}=", key.key)))
        << key.key << " is not an item of SITE CONFIGURATION";
  }
  // Nothing documented there that the plugin does not have.
  EXPECT_EQ(options.size(), registered.size());
  EXPECT_EQ(keys.size(), tfpin::plugin::site_keys().size());
}

TEST(SiteConfig, ErrorsNameTheKeyAndWhatIsValid) {
  EXPECT_EQ(config_error({"bogus=1"}),
            "plugstack.conf: unknown key 'bogus' (keys: interop=1 blocktime=1 "
            "hyperthreads=no|yes|never shim=yes|no shim_path=PATH cpu_files=yes|no "
            "containers=apptainer|singularity|no oci_shim=no|yes enforcement=strict|clamp "
            "on_error=warn|fail activation=on-request|always verbose=no|yes override_env=no|yes "
            "tf_intraop=intra|threads max_threads=65536 max_interop=256 topology_cache=DIR|no)");
  EXPECT_EQ(config_error({"topology_cache=run/tfpin"}),
            "plugstack.conf: topology_cache=run/tfpin is not valid: an absolute directory "
            "(root's, not writable by others; e.g. /run/tfpin), or no");
  EXPECT_NE(config_error({"topology_cache="}).find("topology_cache= is not valid"),
            std::string::npos);
  EXPECT_NE(config_error({"shim_path="}).find("an absolute path"), std::string::npos);
  EXPECT_NE(config_error({"interop"}).find("'interop' is not key=value"), std::string::npos);
  EXPECT_EQ(config_error({"activation=sometimes"}),
            "plugstack.conf: activation=sometimes is not valid: one of on-request, always");
  EXPECT_EQ(config_error({"containers=docker"}),
            "plugstack.conf: containers=docker is not valid: one of apptainer, singularity, no");
  EXPECT_EQ(config_error({"shim=maybe"}),
            "plugstack.conf: shim=maybe is not valid: one of yes, no");
  EXPECT_NE(config_error({"interop=0"}).find("plugstack.conf: interop=0 is too small"),
            std::string::npos);
  EXPECT_NE(config_error({"blocktime=-1"}).find("blocktime=-1 is not a whole number"),
            std::string::npos);
  EXPECT_NE(config_error({"shim_path=relative.so"}).find("an absolute path"), std::string::npos);
  EXPECT_NE(config_error({"interop=2", "interop=3"}).find("given twice"), std::string::npos);
  EXPECT_NE(config_error({"interop=8", "max_interop=4"}).find("above max_interop=4"),
            std::string::npos);
}

TEST(Hooks, BadSiteConfigFailsInitWithOneLogLine) {
  fake_spank::reset(S_CTX_REMOTE);
  EXPECT_EQ(init({"bogus=1"}), -1);
  ASSERT_EQ(fake_spank::state().log.size(), 1U);
  EXPECT_TRUE(fake_spank::logged("error: tfpin: plugstack.conf: unknown key 'bogus'"));
  EXPECT_TRUE(fake_spank::logged("; tfpin is inactive until this is fixed"));
}

// With "optional" Slurm ignores the failed init: the options must still exist (or sbatch refuses
// --tf-threads as unknown) and do nothing, with no line beyond init's.
TEST(Hooks, BadSiteConfigLeavesOptionsRegisteredAndInert) {
  for (auto context : {S_CTX_ALLOCATOR, S_CTX_LOCAL, S_CTX_REMOTE}) {
    AffinityGuard guard;
    fake_spank::reset(context);
    EXPECT_EQ(init({"interop=0"}), -1);
    EXPECT_EQ(fake_spank::state().options.size(), 5U);
    EXPECT_EQ(option("tf-threads", "2"), 0);
    EXPECT_EQ(option("tf-interop", "abc"), 0);
    EXPECT_EQ(slurm_spank_init_post_opt(fake_spank::handle(), 0, nullptr), 0);
    fake_spank::state().task_env = {{"PATH", "/bin"}};
    EXPECT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
    EXPECT_EQ(fake_spank::state().task_env.size(), 1U);
    ASSERT_EQ(fake_spank::state().log.size(), 1U);
    EXPECT_TRUE(fake_spank::logged("interop=0 is too small"));
  }
}

TEST(LogSafe, EscapesControlAndNonAsciiBytes) {
  using tfpin::plugin::log_safe;
  EXPECT_EQ(log_safe("--tf-threads=3 (valid: 2, 4)"), "--tf-threads=3 (valid: 2, 4)");
  EXPECT_EQ(log_safe("2\ntfpin: forged"), "2\\ntfpin: forged");
  using namespace std::string_view_literals;
  EXPECT_EQ(log_safe("a\tb\r\x1b[0m\x7f\xff\0z"sv), "a\\tb\\x0d\\x1b[0m\\x7f\\xff\\x00z");
  // Already escaped text (the library's values) is left as it is.
  EXPECT_EQ(log_safe("2\\ntfpin: forged \\x5c"), "2\\ntfpin: forged \\x5c");
}

// A value typed with a newline must not start a second line in slurmd's (root's) log.
TEST(Hooks, ForgedOptionValueStaysOnOneLine) {
  auto one_line = [](const std::string& shown) {
    const auto& log = fake_spank::state().log;
    ASSERT_EQ(log.size(), 1U);
    EXPECT_EQ(log[0].find('\n'), std::string::npos) << log[0];
    EXPECT_NE(log[0].find(shown), std::string::npos) << log[0];
  };
  fake_spank::reset(S_CTX_ALLOCATOR);
  ASSERT_EQ(init({}), 0);
  EXPECT_EQ(option("tf-threads", "2\ntfpin: forged"), -1);
  one_line("--tf-threads=2\\ntfpin: forged");

  fake_spank::reset(S_CTX_REMOTE);
  ASSERT_EQ(init({}), 0);
  EXPECT_EQ(option("tf-threads", "2\ntfpin: forged"), 0);
  EXPECT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), -1);
  one_line("--tf-threads=2\\ntfpin: forged");

  // The plugin's own messages too (a site value, quoted by the plugin rather than the library).
  fake_spank::reset(S_CTX_REMOTE);
  EXPECT_EQ(init({"activation=always\ntfpin: forged"}), -1);
  one_line("activation=always\\ntfpin: forged is not valid");
}

// slurmstepd only logs a failed remote option callback and runs the job; a bad value carried to
// the step (_SLURM_SPANK_OPTION_tfpin_tf_threads=abc) must fail its tasks instead.
TEST(Hooks, BadValueGivenToTheStepFailsEveryTask) {
  AffinityGuard guard;
  fake_spank::reset(S_CTX_REMOTE);
  ASSERT_EQ(init({"shim=no"}), 0);
  EXPECT_EQ(option("tf-threads", "abc"), 0);  // Slurm would echo the raw value on failure
  EXPECT_EQ(option("tf-interop", "2"), 0);
  EXPECT_TRUE(fake_spank::state().log.empty());
  EXPECT_EQ(slurm_spank_init_post_opt(fake_spank::handle(), 0, nullptr), 0);
  for (uint32_t task : {0U, 1U}) {
    fake_spank::state().task_id = task;
    EXPECT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), -1);
  }
  const auto& log = fake_spank::state().log;
  ASSERT_EQ(log.size(), 2U);
  EXPECT_EQ(log[0],
            "error: tfpin: job 42 step 0 task 0: --tf-threads=abc is not a whole number: expected "
            "a whole number from 1 to 65536");
  EXPECT_TRUE(fake_spank::logged("task 1: --tf-threads=abc is not a whole number"));
  EXPECT_FALSE(fake_spank::state().task_env.contains("TFPIN_CPUS"));
}

TEST(Hooks, RegistersOptionsInUserContextsOnly) {
  for (auto context : {S_CTX_LOCAL, S_CTX_REMOTE, S_CTX_ALLOCATOR}) {
    fake_spank::reset(context);
    EXPECT_EQ(init({}), 0);
    EXPECT_EQ(fake_spank::state().options.size(), 5U);
  }
  fake_spank::reset(S_CTX_SLURMD);
  EXPECT_EQ(init({"bogus=1"}), 0);  // slurmd itself never reads the config or options
  EXPECT_TRUE(fake_spank::state().options.empty());
}

TEST(Hooks, OptionCallbacksRefuseBadValues) {
  fake_spank::reset(S_CTX_ALLOCATOR);
  ASSERT_EQ(init({}), 0);
  EXPECT_EQ(option("tf-threads", "abc"), -1);
  EXPECT_TRUE(fake_spank::logged("--tf-threads=abc is not a whole number"));
  EXPECT_EQ(option("tf-threads", nullptr), -1);
  EXPECT_EQ(option("tf-threads", "3"), 0);
  EXPECT_EQ(option("tf-interop", "2"), 0);
  EXPECT_EQ(slurm_spank_init_post_opt(fake_spank::handle(), 0, nullptr), -1);
  EXPECT_TRUE(fake_spank::logged("--tf-threads=3 is not a multiple of --tf-interop=2"));
}

TEST(Hooks, HyperthreadsCanBeForbiddenBySite) {
  fake_spank::reset(S_CTX_LOCAL);
  ASSERT_EQ(init({"hyperthreads=never"}), 0);
  EXPECT_EQ(option("tf-hyperthreads", nullptr), 0);
  EXPECT_EQ(slurm_spank_init_post_opt(fake_spank::handle(), 0, nullptr), -1);
  EXPECT_TRUE(fake_spank::logged("--tf-hyperthreads is not allowed"));
}

TEST(Hooks, TaskWithoutOptionsIsUntouchedOnRequest) {
  AffinityGuard guard;
  fake_spank::reset(S_CTX_REMOTE);
  ASSERT_EQ(init({}), 0);
  fake_spank::state().task_env = {{"PATH", "/bin"}};
  EXPECT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
  EXPECT_EQ(fake_spank::state().task_env.size(), 1U);
}

TEST(Hooks, TaskGetsPlanBindingAndEnvironment) {
  AffinityGuard guard;
  fake_spank::reset(S_CTX_REMOTE);
  ASSERT_EQ(init({"shim_path=/nonexistent/libtfpin-shim.so"}), 0);
  ASSERT_EQ(option("tf-threads", "1"), 0);
  fake_spank::state().task_env = {{"LD_PRELOAD", "libuser.so"}};
  ASSERT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
  auto& env = fake_spank::state().task_env;
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "1");
  EXPECT_EQ(env.at("TFPIN_INTEROP"), "1");
  EXPECT_EQ(env.at("TFPIN_CPU_FILES"), "1");  // the shim's CPU file view, on by default
  const auto bound = tfpin::current_affinity();
  ASSERT_EQ(bound.size(), 1U);
  EXPECT_EQ(env.at("TFPIN_CPUS"), std::to_string(bound[0]));
  // A missing shim is a warning, and the user's preload stays as it was.
  EXPECT_EQ(env.at("LD_PRELOAD"), "libuser.so");
  EXPECT_TRUE(fake_spank::logged("shim /nonexistent/libtfpin-shim.so not found"));
}

// An empty file standing for the shim (the plugin only checks that it is a regular file); its
// path, or "" when it cannot be written.
std::string fake_shim() {
  const std::string shim = std::string(TFPIN_TEST_BINARY_DIR) + "/fake-shim.so";
  std::FILE* f = std::fopen(shim.c_str(), "w");
  if (f == nullptr) return "";
  std::fclose(f);
  return shim;
}

TEST(Hooks, ShimIsPrependedOnce) {
  AffinityGuard guard;
  fake_spank::reset(S_CTX_REMOTE);
  const std::string shim = fake_shim();
  ASSERT_FALSE(shim.empty());
  ASSERT_EQ(init({"shim_path=" + shim, "activation=always"}), 0);
  fake_spank::state().task_env = {{"LD_PRELOAD", "libuser.so"}};
  ASSERT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
  EXPECT_EQ(fake_spank::state().task_env.at("LD_PRELOAD"), shim + ":libuser.so");
  ASSERT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
  EXPECT_EQ(fake_spank::state().task_env.at("LD_PRELOAD"), shim + ":libuser.so");
}

TEST(Hooks, ApptainerTasksGetTheShimBoundAndThePlanPassedOn) {
  AffinityGuard guard;
  fake_spank::reset(S_CTX_REMOTE);
  const std::string shim = fake_shim();
  ASSERT_FALSE(shim.empty());
  ASSERT_EQ(init({"shim_path=" + shim, "activation=always"}), 0);
  fake_spank::state().task_env = {{"APPTAINERENV_OMP_NUM_THREADS", "7"}};
  ASSERT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
  const auto& env = fake_spank::state().task_env;
  EXPECT_EQ(env.at("APPTAINER_BINDPATH"),
            fmt::format("{0}:{0}:ro", std::string(TFPIN_TEST_BINARY_DIR)));
  EXPECT_EQ(env.at("APPTAINERENV_LD_PRELOAD"), shim);
  EXPECT_EQ(env.at("APPTAINERENV_TFPIN_CPUS"), env.at("TFPIN_CPUS"));
  EXPECT_EQ(env.at("APPTAINERENV_OMP_NUM_THREADS"), "7");  // the user's, as on the host
  EXPECT_FALSE(env.contains("SINGULARITY_BINDPATH"));

  fake_spank::reset(S_CTX_REMOTE);
  ASSERT_EQ(init({"shim_path=" + shim, "activation=always", "containers=no"}), 0);
  ASSERT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
  EXPECT_FALSE(fake_spank::state().task_env.contains("APPTAINER_BINDPATH"));
  EXPECT_FALSE(fake_spank::state().task_env.contains("APPTAINERENV_TFPIN_CPUS"));
}

TEST(Hooks, OciContainerTasksGetNoShimUnlessTheSiteBindsIt) {
  AffinityGuard guard;
  const std::string shim = fake_shim();
  ASSERT_FALSE(shim.empty());
  for (const bool site_binds : {false, true}) {
    fake_spank::reset(S_CTX_REMOTE);
    std::vector<std::string> keys = {"shim_path=" + shim, "activation=always"};
    if (site_binds) keys.emplace_back("oci_shim=yes");
    ASSERT_EQ(init(keys), 0);
    fake_spank::state().task_env = {{"SLURM_CONTAINER", "/home/u/bundle"},
                                    {"LD_PRELOAD", "libuser.so"}};
    ASSERT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
    const auto& env = fake_spank::state().task_env;
    EXPECT_EQ(env.at("LD_PRELOAD"), site_binds ? shim + ":libuser.so" : "libuser.so");
    EXPECT_EQ(env.at("OMP_NUM_THREADS"), env.at("TFPIN_INTRA"));  // the variables still apply
    EXPECT_FALSE(env.contains("APPTAINER_BINDPATH"));
    EXPECT_EQ(fake_spank::logged("srun --container: the shim is not preloaded"), !site_binds);
  }
}

TEST(Hooks, OversizedRequestFailsStrictAndClampsOtherwise) {
  AffinityGuard guard;
  fake_spank::reset(S_CTX_REMOTE);
  ASSERT_EQ(init({"shim=no"}), 0);
  ASSERT_EQ(option("tf-threads", "4096"), 0);
  EXPECT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), -1);
  EXPECT_TRUE(fake_spank::logged("job 42 step 0 task 0: --tf-threads=4096 is more than the"));

  fake_spank::reset(S_CTX_REMOTE);
  ASSERT_EQ(init({"shim=no", "enforcement=clamp"}), 0);
  ASSERT_EQ(option("tf-threads", "4096"), 0);
  EXPECT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
  EXPECT_TRUE(fake_spank::logged("using"));
}

// hwloc's description and the kernel's affinity disagree (here HWLOC_SYNTHETIC describes CPUs this
// process does not have, as a stale or foreign topology would): a fault of the machine, not of the
// request. on_error=warn runs the task as a job without tfpin, including no plan inherited from an
// outer step; on_error=fail fails it; a bad request still fails under warn.
TEST(Hooks, HwlocAndKernelDisagreeingIsTheMachinesFault) {
  AffinityGuard guard;
  const std::vector<unsigned> mine = tfpin::current_affinity();
  // The plan of an outer step (a tfpin'd batch script), as a task would inherit it.
  fake_spank::reset(S_CTX_REMOTE);
  ASSERT_EQ(init({"shim=no", "activation=always"}), 0);
  ASSERT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
  std::map<std::string, std::string> outer = fake_spank::state().task_env;
  ASSERT_TRUE(outer.contains("TFPIN_CPUS"));
  outer["LD_PRELOAD"] = "/usr/lib/tfpin/libtfpin-shim.so:libuser.so";
  outer["PATH"] = "/bin";

  const std::string elsewhere =
      fmt::format("core:2 pu:1(indexes={},{})", mine.back() + 1, mine.back() + 2);
  ASSERT_EQ(setenv("HWLOC_SYNTHETIC", elsewhere.c_str(), 1), 0);
  auto task = [&](std::vector<std::string> config, const char* threads, const char* interop) {
    fake_spank::reset(S_CTX_REMOTE);
    EXPECT_EQ(init(std::move(config)), 0);
    EXPECT_EQ(option("tf-threads", threads), 0);
    if (interop != nullptr) {
      EXPECT_EQ(option("tf-interop", interop), 0);
    }
    fake_spank::state().task_env = outer;
    return slurm_spank_task_init(fake_spank::handle(), 0, nullptr);
  };
  EXPECT_EQ(task({"shim=no"}, "1", nullptr), 0);
  EXPECT_EQ(fake_spank::state().task_env,
            (std::map<std::string, std::string>{{"LD_PRELOAD", "libuser.so"}, {"PATH", "/bin"}}));
  EXPECT_EQ(tfpin::current_affinity(), mine);
  ASSERT_EQ(fake_spank::state().log.size(), 1U);
  EXPECT_TRUE(fake_spank::logged("job 42 step 0 task 0: hwloc and the kernel disagree"));
  EXPECT_TRUE(fake_spank::logged("; the task runs unbound, without tfpin"));

  EXPECT_EQ(task({"shim=no", "on_error=fail"}, "1", nullptr), -1);
  EXPECT_TRUE(
      fake_spank::logged("error: tfpin: job 42 step 0 task 0: hwloc and the kernel disagree"));
  EXPECT_EQ(task({"shim=no"}, "3", "2"), -1);
  EXPECT_TRUE(fake_spank::logged("--tf-threads=3 is not a multiple of --tf-interop=2"));
  unsetenv("HWLOC_SYNTHETIC");
}

TEST(Hooks, OtherContextsDoNothingInTaskInit) {
  fake_spank::reset(S_CTX_LOCAL);
  ASSERT_EQ(init({"activation=always"}), 0);
  EXPECT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
  EXPECT_TRUE(fake_spank::state().task_env.empty());
}

// slurmstepd loads the node's topology once per step, before it forks the tasks, through the
// node's cache: the tasks use that copy (a cache damaged after the step started does not reach
// them), a damaged cache costs one warning and is rewritten, and a step that does not ask for
// tfpin reads and writes nothing.
TEST(Hooks, StepLoadsTheTopologyOnceThroughTheNodesCache) {
  AffinityGuard guard;
  const bool root = geteuid() == 0;
  // As root, not under /tmp: every directory on the way to the cache must be writable by root only.
  std::string templ = root ? "/run/tfpin-plugin-cache-XXXXXX" : "/tmp/tfpin-plugin-cache-XXXXXX";
  ASSERT_NE(mkdtemp(templ.data()), nullptr);
  const std::string dir = templ;
  const std::string file = dir + "/topology.cache";
  chmod(dir.c_str(), 0755);
  auto damage = [&file] {
    std::fstream f(file, std::ios::in | std::ios::out);
    f.seekp(30);
    f.put('#');
  };
  auto step = [&dir](std::vector<std::string> config) {
    fake_spank::reset(S_CTX_REMOTE);
    config.push_back("topology_cache=" + dir);
    config.push_back("shim=no");
    EXPECT_EQ(init(config), 0);
    return slurm_spank_init_post_opt(fake_spank::handle(), 0, nullptr);
  };

  ASSERT_EQ(step({"activation=always"}), 0);
  EXPECT_EQ(std::filesystem::exists(file), root);
  damage();
  std::string first;
  for (uint32_t task : {0U, 1U}) {
    fake_spank::state().task_id = task;
    fake_spank::state().task_env.clear();
    ASSERT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
    first = fake_spank::state().task_env.at("TFPIN_CPUS");
  }
  EXPECT_TRUE(fake_spank::state().log.empty()) << fake_spank::state().log.front();

  if (root) {
    ASSERT_EQ(step({"activation=always"}), 0);
    ASSERT_EQ(fake_spank::state().log.size(), 1U);
    EXPECT_TRUE(fake_spank::logged("info: tfpin: warning: job 42 step 0: topology cache " + file +
                                   ": damaged (checksum mismatch); ignored and rewritten"));
    ASSERT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
    EXPECT_EQ(fake_spank::state().task_env.at("TFPIN_CPUS"), first);
    ASSERT_EQ(step({"activation=always"}), 0);
    EXPECT_TRUE(fake_spank::state().log.empty());  // rewritten: read without a word
  }

  std::filesystem::remove(file);
  ASSERT_EQ(step({}), 0);  // on-request, and this step asks for nothing
  EXPECT_EQ(slurm_spank_task_init(fake_spank::handle(), 0, nullptr), 0);
  EXPECT_FALSE(std::filesystem::exists(file));
  EXPECT_TRUE(fake_spank::state().task_env.empty());
  fake_spank::reset(S_CTX_REMOTE);
  ASSERT_EQ(init({"activation=always", "topology_cache=" + dir}), 0);
  ASSERT_EQ(option("tf-off", nullptr), 0);  // the job opted out
  ASSERT_EQ(slurm_spank_init_post_opt(fake_spank::handle(), 0, nullptr), 0);
  EXPECT_FALSE(std::filesystem::exists(file));
  std::filesystem::remove_all(dir);
}
