#include <fmt/format.h>
#include <gtest/gtest.h>
#include <numa.h>
#include <numaif.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <thread>
#include <nlohmann/json.hpp>

#include "plan_checks.hpp"
#include "tfpin/binding.hpp"
#include "tfpin/environment.hpp"
#include "tfpin/error.hpp"
#include "tfpin/thread_affinity.hpp"
#include "tfpin/topology.hpp"

namespace {

using Env = std::map<std::string, std::string>;

tfpin::EnvGetter getter(const Env& env) {
  return [&env](const std::string& name) -> std::optional<std::string> {
    auto it = env.find(name);
    return it == env.end() ? std::nullopt : std::optional(it->second);
  };
}

tfpin::EnvAccess access(Env& env) {
  return {getter(env), [&env](const std::string& n, const std::string& v) { env[n] = v; },
          [&env](const std::string& n) { env.erase(n); }};
}

Env as_map(const std::vector<tfpin::EnvVar>& vars) {
  Env env;
  for (const auto& var : vars) env[var.name] = var.value;
  return env;
}

tfpin::Plan broadwell_plan(unsigned threads, unsigned interop,
                           tfpin::HyperthreadPolicy ht = tfpin::HyperthreadPolicy::one_per_core) {
  tfpin::PlacementRequest r;
  r.threads = threads;
  r.interop = interop;
  r.hyperthreads = ht;
  return tfpin::compute_plan(tfpin::Topology::load(fixture("broadwell-2x18-ht.xml")), r);
}

}  // namespace

TEST(Environment, ThreadCountsFollowThePlan) {
  const Env env = as_map(tfpin::environment_for(broadwell_plan(36, 2), {}));
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "18");
  EXPECT_EQ(env.at("TF_NUM_INTRAOP_THREADS"), "18");
  EXPECT_EQ(env.at("TF_NUM_INTEROP_THREADS"), "2");
  EXPECT_EQ(env.at("MKL_NUM_THREADS"), "18");
  EXPECT_EQ(env.at("OPENBLAS_NUM_THREADS"), "18");
  EXPECT_EQ(env.at("ORT_INTRA_OP_NUM_THREADS"), "18");
  EXPECT_EQ(env.at("ORT_INTER_OP_NUM_THREADS"), "2");
  EXPECT_EQ(env.at("KMP_HW_SUBSET"), "1T");
  EXPECT_EQ(env.at("KMP_BLOCKTIME"), "1");
  EXPECT_EQ(env.at("TFPIN_CPUS"), "0-35");
  EXPECT_FALSE(env.contains("TFPIN_LANE_NUMA"));  // dropped: nothing read it
  EXPECT_FALSE(env.contains("OMP_WAIT_POLICY"));
  EXPECT_FALSE(env.contains("TFPIN_THREADS"));  // a request variable, never handed over
}

TEST(Environment, NoVariableBindsTheInitialThread) {
  const Env env = as_map(tfpin::environment_for(broadwell_plan(4, 1), {}));
  // Any of these would pin the main thread to one core and every later thread with it.
  EXPECT_EQ(env.at("KMP_AFFINITY"), "none");
  EXPECT_EQ(env.at("OMP_PROC_BIND"), "false");
  EXPECT_FALSE(env.contains("OMP_PLACES"));
  EXPECT_FALSE(env.contains("GOMP_CPU_AFFINITY"));
}

TEST(Environment, SitePolicies) {
  tfpin::EnvironmentPolicy policy;
  policy.blocktime_ms = 0;
  policy.tf_intra_is_all_threads = true;
  const Env env = as_map(tfpin::environment_for(broadwell_plan(36, 2), policy));
  EXPECT_EQ(env.at("TF_NUM_INTRAOP_THREADS"), "36");
  EXPECT_EQ(env.at("KMP_BLOCKTIME"), "0");
  EXPECT_EQ(env.at("GOMP_SPINCOUNT"), "0");
  EXPECT_EQ(env.at("OMP_WAIT_POLICY"), "PASSIVE");
}

TEST(Environment, UserValuesWinUnlessEnforcedButTheHandoverAlwaysWins) {
  const auto vars = tfpin::environment_for(broadwell_plan(8, 2), {});
  Env env = {{"OMP_NUM_THREADS", "64"}, {"TFPIN_CPUS", "0-63"}};
  const auto outcomes = tfpin::export_environment(vars, false, access(env));
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "64");
  EXPECT_EQ(env.at("TFPIN_CPUS"), "0-3,18-21");
  const auto kept =
      std::count_if(outcomes.begin(), outcomes.end(), [](auto& o) { return o.kept_user; });
  EXPECT_EQ(kept, 1);
  tfpin::export_environment(vars, true, access(env));
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "4");
}

TEST(Environment, AnEmptyUserValueCountsAsUnset) {
  Env env = {{"OMP_NUM_THREADS", ""}, {"KMP_AFFINITY", ""}};
  tfpin::export_environment(tfpin::environment_for(broadwell_plan(8, 2), {}), false, access(env));
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "4");
  EXPECT_EQ(env.at("KMP_AFFINITY"), "none");
}

// A variable that would contradict one the user set is not exported (the runtime would ignore one
// of the two and LLVM's libomp would say so per team); --enforce exports everything.
TEST(Environment, NothingContradictsTheUsersOwnSettings) {
  struct Row {
    Env user;
    std::vector<std::string> withheld;
  };
  const std::vector<Row> rows = {
      {{{"KMP_AFFINITY", "compact"}}, {}},
      {{{"OMP_PROC_BIND", "spread"}}, {"KMP_AFFINITY"}},
      {{{"OMP_PLACES", "threads"}}, {"KMP_AFFINITY"}},
      {{{"GOMP_CPU_AFFINITY", "0-3"}}, {"KMP_AFFINITY"}},
      {{{"OMP_WAIT_POLICY", "active"}}, {"GOMP_SPINCOUNT", "KMP_BLOCKTIME"}},
  };
  const auto vars = tfpin::environment_for(broadwell_plan(8, 2), {});
  for (const Row& row : rows) {
    const std::string user = row.user.begin()->first;
    Env env = row.user;
    const auto outcomes = tfpin::export_environment(vars, false, access(env));
    EXPECT_EQ(env.at(user), row.user.at(user));
    for (const std::string& name : row.withheld) {
      EXPECT_FALSE(env.contains(name)) << name << " beside the user's " << user;
      const auto it = std::find_if(outcomes.begin(), outcomes.end(),
                                   [&](const auto& o) { return o.name == name; });
      ASSERT_NE(it, outcomes.end());
      EXPECT_EQ(it->withheld_for, user);
      EXPECT_EQ(env.at("TFPIN_ENV").find(name + "="), std::string::npos);
    }
    // Never KMP_AFFINITY and OMP_PROC_BIND together unless enforced.
    EXPECT_FALSE(env.contains("KMP_AFFINITY") && env.contains("OMP_PROC_BIND")) << user;
    EXPECT_EQ(env.at("OMP_NUM_THREADS"), "4") << "the counts are still exported";
    Env enforced = row.user;
    tfpin::export_environment(vars, true, access(enforced));
    for (const std::string& name : row.withheld) EXPECT_TRUE(enforced.contains(name)) << name;
  }
  // --enforce replaces a user's GNU binding with OMP_PROC_BIND=false, and only then sets it.
  Env places = {{"OMP_PLACES", "cores"}};
  tfpin::export_environment(vars, true, access(places));
  EXPECT_EQ(places.at("OMP_PROC_BIND"), "false");
  Env plain;
  tfpin::export_environment(vars, true, access(plain));
  EXPECT_FALSE(plain.contains("OMP_PROC_BIND"));
  EXPECT_EQ(plain.at("KMP_AFFINITY"), "none");
  // tfpin's own value from an outer plan gives way once the user sets the other one.
  Env env;
  tfpin::export_environment(vars, false, access(env));
  EXPECT_EQ(env.at("KMP_AFFINITY"), "none");
  env["OMP_PROC_BIND"] = "close";
  tfpin::export_environment(vars, false, access(env));
  EXPECT_FALSE(env.contains("KMP_AFFINITY"));
  Env empty = {{"KMP_AFFINITY", ""}, {"OMP_PLACES", "cores"}};  // an empty one goes too
  tfpin::export_environment(vars, false, access(empty));
  EXPECT_FALSE(empty.contains("KMP_AFFINITY"));
  // With blocktime 0 tfpin's OMP_WAIT_POLICY=PASSIVE gives way to the user's spin settings.
  tfpin::EnvironmentPolicy passive;
  passive.blocktime_ms = 0;
  Env spin = {{"KMP_BLOCKTIME", "200"}};
  tfpin::export_environment(tfpin::environment_for(broadwell_plan(8, 2), passive), false,
                            access(spin));
  EXPECT_FALSE(spin.contains("OMP_WAIT_POLICY"));
}

TEST(Environment, ValuesAnOuterTfpinExportedAreNotTheUsers) {
  Env env;
  tfpin::export_environment(tfpin::environment_for(broadwell_plan(36, 2), {}), false, access(env));
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "18");
  EXPECT_NE(env.at("TFPIN_ENV").find("OMP_NUM_THREADS=18"), std::string::npos);
  // An inner step with 4 cores: the outer counts give way ...
  env["KMP_BLOCKTIME"] = "30";  // ... but what the user changed in between stays.
  tfpin::export_environment(tfpin::environment_for(broadwell_plan(4, 1), {}), false, access(env));
  EXPECT_EQ(env.at("OMP_NUM_THREADS"), "4");
  EXPECT_EQ(env.at("TF_NUM_INTEROP_THREADS"), "1");
  EXPECT_EQ(env.at("KMP_BLOCKTIME"), "30");
  EXPECT_EQ(env.at("TFPIN_ENV").find("KMP_BLOCKTIME"), std::string::npos);
}

TEST(Environment, VariablesOnlyTheOuterPlanSetAreRemoved) {
  Env env;
  tfpin::EnvironmentPolicy passive;
  passive.blocktime_ms = 0;
  tfpin::export_environment(tfpin::environment_for(broadwell_plan(4, 1), passive), false,
                            access(env));
  EXPECT_EQ(env.at("KMP_HW_SUBSET"), "1T");
  EXPECT_EQ(env.at("OMP_WAIT_POLICY"), "PASSIVE");
  const auto ht = broadwell_plan(4, 1, tfpin::HyperthreadPolicy::all);
  tfpin::export_environment(tfpin::environment_for(ht, {}), false, access(env));
  EXPECT_FALSE(env.contains("KMP_HW_SUBSET"));    // hyperthreads inside: no 1T
  EXPECT_FALSE(env.contains("OMP_WAIT_POLICY"));  // default blocktime inside
}

TEST(Environment, WithdrawRemovesTheOuterPlanButNotTheUsersValues) {
  Env env = {{"LD_PRELOAD", "/opt/libuser.so"}, {"PATH", "/bin"}};
  env["LD_PRELOAD"] =
      tfpin::preload_with_shim(env["LD_PRELOAD"], "/usr/lib/tfpin/libtfpin-shim.so");
  tfpin::export_environment(tfpin::environment_for(broadwell_plan(36, 2), {}), false, access(env));
  env["OMP_NUM_THREADS"] = "3";  // the user's own, set after tfpin
  tfpin::withdraw_environment(access(env));
  EXPECT_EQ(env,
            (Env{{"LD_PRELOAD", "/opt/libuser.so"}, {"PATH", "/bin"}, {"OMP_NUM_THREADS", "3"}}));
  Env only_shim = {{"LD_PRELOAD", "libtfpin-shim.so"}};
  tfpin::withdraw_environment(access(only_shim));
  EXPECT_TRUE(only_shim.empty());
}

// The task exports its plan, preloads the shim, then passes both on to the containers it starts.
Env planned_task(Env env, tfpin::ContainerRuntime runtime, bool enforce = false) {
  const auto vars = tfpin::environment_for(broadwell_plan(36, 2), {});
  tfpin::export_environment(vars, enforce, access(env));
  const std::string shim = "/usr/lib/tfpin/libtfpin-shim.so";
  env["LD_PRELOAD"] = tfpin::preload_with_shim(env["LD_PRELOAD"], shim);
  EXPECT_EQ(tfpin::forward_to_containers(runtime, vars, shim, enforce, access(env)), "");
  return env;
}

TEST(Containers, ApptainerGetsTheShimBoundAndThePlanOverTheImagesEnvironment) {
  const Env env = planned_task({{"APPTAINER_BINDPATH", "/scratch"}, {"OMP_PLACES", "cores"},
                                {"TFPIN_REPORT", "stderr"}},
                               tfpin::ContainerRuntime::apptainer);
  EXPECT_EQ(env.at("APPTAINER_BINDPATH"), "/scratch,/usr/lib/tfpin:/usr/lib/tfpin:ro");
  EXPECT_EQ(env.at("APPTAINERENV_LD_PRELOAD"), "/usr/lib/tfpin/libtfpin-shim.so");
  for (const char* name : {"OMP_NUM_THREADS", "TF_NUM_INTEROP_THREADS", "KMP_BLOCKTIME",
                           "GOMP_SPINCOUNT", "TFPIN_CPUS", "TFPIN_INTEROP", "TFPIN_INTRA",
                           "TFPIN_CPU_FILES", "TFPIN_REPORT"}) {
    ASSERT_TRUE(env.contains(fmt::format("APPTAINERENV_{}", name))) << name;
    EXPECT_EQ(env.at(fmt::format("APPTAINERENV_{}", name)), env.at(name)) << name;
  }
  // KMP_AFFINITY and OMP_PROC_BIND are withheld against the user's OMP_PLACES: nothing to pass
  // on (the user's own OMP_PLACES reaches the container as any host variable does).
  EXPECT_FALSE(env.contains("APPTAINERENV_KMP_AFFINITY"));
  EXPECT_FALSE(env.contains("APPTAINERENV_OMP_PROC_BIND"));
  EXPECT_EQ(env.at("APPTAINERENV_OMP_NUM_THREADS"), "18");
  // Inside, an inner tfpin knows tfpin's values from the user's.
  ASSERT_TRUE(env.contains("APPTAINERENV_TFPIN_ENV"));
  EXPECT_NE(env.at("APPTAINERENV_TFPIN_ENV").find("OMP_NUM_THREADS=18"), std::string::npos);
  EXPECT_FALSE(env.contains("SINGULARITY_BINDPATH"));
  EXPECT_FALSE(env.contains("SINGULARITYENV_OMP_NUM_THREADS"));
}

TEST(Containers, SingularityCeNamesAndNoneAtAll) {
  const Env ce = planned_task({}, tfpin::ContainerRuntime::singularity);
  EXPECT_EQ(ce.at("SINGULARITY_BINDPATH"), "/usr/lib/tfpin:/usr/lib/tfpin:ro");
  EXPECT_EQ(ce.at("SINGULARITYENV_TFPIN_CPUS"), ce.at("TFPIN_CPUS"));
  EXPECT_FALSE(ce.contains("APPTAINER_BINDPATH"));
  const Env none = planned_task({}, tfpin::ContainerRuntime::none);
  for (const auto& [name, value] : none) {
    EXPECT_EQ(name.find("APPTAINER"), std::string::npos) << name;
    EXPECT_EQ(name.find("SINGULARITY"), std::string::npos) << name;
  }
}

TEST(Containers, TheUsersContainerValuesWinUnlessEnforcedButNotOverThePlan) {
  const Env user = {{"APPTAINERENV_OMP_NUM_THREADS", "3"},
                    {"APPTAINERENV_LD_PRELOAD", "/opt/libjemalloc.so"},
                    {"APPTAINERENV_TFPIN_CPUS", "0-99"},
                    {"APPTAINER_BINDPATH", "/usr/lib/tfpin"}};
  const Env kept = planned_task(user, tfpin::ContainerRuntime::apptainer);
  EXPECT_EQ(kept.at("APPTAINERENV_OMP_NUM_THREADS"), "3");
  EXPECT_EQ(kept.at("APPTAINERENV_LD_PRELOAD"),
            "/usr/lib/tfpin/libtfpin-shim.so:/opt/libjemalloc.so");
  EXPECT_EQ(kept.at("APPTAINERENV_TFPIN_CPUS"), kept.at("TFPIN_CPUS"));
  EXPECT_EQ(kept.at("APPTAINER_BINDPATH"), "/usr/lib/tfpin");  // already bound by the user
  const Env enforced = planned_task(user, tfpin::ContainerRuntime::apptainer, true);
  EXPECT_EQ(enforced.at("APPTAINERENV_OMP_NUM_THREADS"), "18");
  EXPECT_EQ(enforced.at("APPTAINERENV_LD_PRELOAD"), "/usr/lib/tfpin/libtfpin-shim.so");
}

TEST(Containers, WithdrawTakesBackWhatWasForwardedAndKeepsTheUsers) {
  Env env = planned_task({{"APPTAINER_BINDPATH", "/scratch"},
                          {"APPTAINERENV_LD_PRELOAD", "/opt/libjemalloc.so"},
                          {"APPTAINERENV_FOO", "bar"}},
                         tfpin::ContainerRuntime::apptainer);
  env["APPTAINERENV_MKL_NUM_THREADS"] = "5";  // changed by the user after tfpin: the user's now
  tfpin::withdraw_environment(access(env));
  EXPECT_EQ(env, (Env{{"APPTAINER_BINDPATH", "/scratch"},
                      {"APPTAINERENV_LD_PRELOAD", "/opt/libjemalloc.so"},
                      {"APPTAINERENV_FOO", "bar"},
                      {"APPTAINERENV_MKL_NUM_THREADS", "5"}}));
}

TEST(Containers, AnInnerPlanReplacesTheOutersInsideToo) {
  Env env = planned_task({}, tfpin::ContainerRuntime::apptainer);
  const auto inner = tfpin::environment_for(broadwell_plan(4, 1), {});
  tfpin::export_environment(inner, false, access(env));
  EXPECT_EQ(tfpin::forward_to_containers(tfpin::ContainerRuntime::apptainer, inner,
                                         "/usr/lib/tfpin/libtfpin-shim.so", false, access(env)),
            "");
  EXPECT_EQ(env.at("APPTAINERENV_OMP_NUM_THREADS"), "4");
  EXPECT_EQ(env.at("APPTAINERENV_TF_NUM_INTEROP_THREADS"), "1");
  EXPECT_EQ(env.at("APPTAINERENV_TFPIN_CPUS"), env.at("TFPIN_CPUS"));
  EXPECT_EQ(env.at("APPTAINER_BINDPATH"), "/usr/lib/tfpin:/usr/lib/tfpin:ro");
  EXPECT_EQ(env.at("APPTAINERENV_LD_PRELOAD"), "/usr/lib/tfpin/libtfpin-shim.so");
}

TEST(Containers, AShimDirectoryABindCannotSpellIsReported) {
  Env env;
  const auto vars = tfpin::environment_for(broadwell_plan(4, 1), {});
  tfpin::export_environment(vars, false, access(env));
  const std::string warning = tfpin::forward_to_containers(
      tfpin::ContainerRuntime::apptainer, vars, "/opt/a,b/libtfpin-shim.so", false, access(env));
  EXPECT_NE(warning.find("'/opt/a,b'"), std::string::npos) << warning;
  EXPECT_NE(warning.find("APPTAINER_BINDPATH"), std::string::npos) << warning;
  EXPECT_FALSE(env.contains("APPTAINER_BINDPATH"));
  EXPECT_EQ(env.at("APPTAINERENV_OMP_NUM_THREADS"), "4");
}

TEST(Environment, HandedOverInteropIsNotARequest) {
  Env env = {{"TFPIN_THREADS", "8"}};
  EXPECT_EQ(tfpin::requested_value(getter(env), "TFPIN_THREADS"), "8");
  tfpin::export_environment(tfpin::environment_for(broadwell_plan(36, 2), {}), false, access(env));
  EXPECT_EQ(env.at("TFPIN_INTEROP"), "2");
  EXPECT_EQ(tfpin::requested_value(getter(env), "TFPIN_INTEROP"), std::nullopt);
  env["TFPIN_INTEROP"] = "4";  // the user's request for an inner step
  EXPECT_EQ(tfpin::requested_value(getter(env), "TFPIN_INTEROP"), "4");
}

TEST(Environment, ShimGoesFirstInLdPreloadOnce) {
  EXPECT_EQ(tfpin::preload_with_shim("", "/l/shim.so"), "/l/shim.so");
  EXPECT_EQ(tfpin::preload_with_shim("a.so b.so", "/l/shim.so"), "/l/shim.so:a.so b.so");
  EXPECT_EQ(tfpin::preload_with_shim("a.so:/l/shim.so", "/l/shim.so"), "a.so:/l/shim.so");
  EXPECT_EQ(tfpin::preload_with_shim("/l/shim.so.bak", "/l/shim.so"), "/l/shim.so:/l/shim.so.bak");
  // An outer tfpin's shim at another path is replaced, not loaded a second time.
  EXPECT_EQ(tfpin::preload_with_shim("/old/libtfpin-shim.so:a.so", "/new/libtfpin-shim.so"),
            "/new/libtfpin-shim.so:a.so");
  EXPECT_EQ(tfpin::preload_with_shim("a.so:libtfpin-shim.so:/new/libtfpin-shim.so",
                                     "/new/libtfpin-shim.so"),
            "a.so:/new/libtfpin-shim.so");
}

TEST(PlanCodec, RoundTrips) {
  for (auto [threads, interop] : {std::pair{36U, 2U}, {8U, 4U}, {1U, 1U}, {36U, 36U}}) {
    const tfpin::Plan plan = broadwell_plan(threads, interop);
    const Env env = as_map(tfpin::encode_plan(plan));
    const auto decoded = tfpin::decode_plan(getter(env));
    ASSERT_TRUE(decoded.has_value());
    EXPECT_EQ(decoded->threads, plan.threads);
    EXPECT_EQ(decoded->interop, plan.interop);
    EXPECT_EQ(decoded->intra, plan.intra);
    ASSERT_EQ(decoded->lanes.size(), plan.lanes.size());
    for (std::size_t i = 0; i < plan.lanes.size(); ++i) {
      EXPECT_EQ(decoded->lanes[i].cpus, plan.lanes[i].cpus);
    }
  }
}

TEST(PlanCodec, AbsentPlanIsNotAnError) {
  EXPECT_FALSE(tfpin::decode_plan(getter({})).has_value());
}

// The table the shim tests use too (tests/fixtures/invalid_plans.json).
TEST(PlanCodec, InvalidPlansAreRejected) {
  std::ifstream file(fixture("invalid_plans.json"));
  ASSERT_TRUE(file);
  const auto table = nlohmann::json::parse(file);
  ASSERT_GE(table.at("plans").size(), 10U);
  for (const auto& row : table.at("plans")) {
    Env env;
    for (const char* name : {TFPIN_VAR_CPUS, TFPIN_VAR_INTEROP, TFPIN_VAR_INTRA}) {
      if (row.contains(name)) env[name] = row.at(name).get<std::string>();
    }
    EXPECT_THROW(tfpin::decode_plan(getter(env)), tfpin::Error) << row.dump();
  }
}

TEST(PlanCodec, LimitsAreTheShims) {
  const Env highest = {{"TFPIN_CPUS", "4095"}, {"TFPIN_INTEROP", "1"}, {"TFPIN_INTRA", "1"}};
  EXPECT_TRUE(tfpin::decode_plan(getter(highest)).has_value());
  const Env beyond = {{"TFPIN_CPUS", "4094-4096"}, {"TFPIN_INTEROP", "1"}, {"TFPIN_INTRA", "3"}};
  try {
    tfpin::decode_plan(getter(beyond));
    FAIL() << "CPU 4096 accepted";
  } catch (const tfpin::Error& e) {
    EXPECT_STREQ(e.what(),
                 "TFPIN_CPUS=4094-4096: CPU 4096 is outside the CPU ids tfpin's shim can "
                 "pin to (valid: 0..4095)");
  }
}

// A hostile hand-over (98 KB of CPU lists, a huge lane count) is refused in one short message.
TEST(PlanCodec, HugeValuesAreRefusedBriefly) {
  std::string huge;
  for (int i = 0; i < 14000; ++i) huge += "0-4095,";
  for (const Env& env : {Env{{"TFPIN_CPUS", huge}, {"TFPIN_INTEROP", "1"}, {"TFPIN_INTRA", "1"}},
                         Env{{"TFPIN_CPUS", "0"},
                             {"TFPIN_INTEROP", std::string(5000, '9')},
                             {"TFPIN_INTRA", "1"}}}) {
    try {
      tfpin::decode_plan(getter(env));
      FAIL() << "accepted";
    } catch (const tfpin::Error& e) {
      EXPECT_LT(std::string(e.what()).size(), 300U) << e.what();
    }
  }
}

// What an older tfpin handed over (TFPIN_LANE_NUMA) goes away with the rest, and is not read.
TEST(PlanCodec, StaleLaneNumaIsWithdrawnAndIgnored) {
  Env env = {{"TFPIN_CPUS", "0,1"},
             {"TFPIN_INTEROP", "2"},
             {"TFPIN_INTRA", "1"},
             {"TFPIN_LANE_NUMA", "7"},
             {"OMP_NUM_THREADS", "1"},
             {"TFPIN_ENV",
              "OMP_NUM_THREADS=1;TFPIN_CPUS=0,1;TFPIN_INTEROP=2;TFPIN_INTRA=1;"
              "TFPIN_LANE_NUMA=7"}};
  EXPECT_EQ(tfpin::decode_plan(getter(env))->lanes.size(), 2U);
  Env inner = env;
  tfpin::export_environment(tfpin::environment_for(broadwell_plan(4, 1), {}), false, access(inner));
  EXPECT_FALSE(inner.contains("TFPIN_LANE_NUMA"));
  tfpin::withdraw_environment(access(env));
  EXPECT_TRUE(env.empty());
}

TEST(Requests, OptionWinsOverVariableWhichWinsOverNothing) {
  Env env = {{"TFPIN_THREADS", "8"}};
  EXPECT_EQ(tfpin::requested_count(4U, getter(env), "TFPIN_THREADS"), 4U);
  EXPECT_EQ(tfpin::requested_count(std::nullopt, getter(env), "TFPIN_THREADS"), 8U);
  EXPECT_EQ(tfpin::requested_count(std::nullopt, getter(env), "TFPIN_INTEROP"), std::nullopt);
  env["TFPIN_THREADS"] = "0";
  EXPECT_THROW(tfpin::requested_count(std::nullopt, getter(env), "TFPIN_THREADS"), tfpin::Error);
}

// apply_plan binds this test process; the CPUs it had are restored at the end.
TEST(ApplyPlan, ExportsAndPreloadsTheShimOrWarns) {
  const std::vector<unsigned> saved = tfpin::current_affinity();
  tfpin::PlacementRequest r;
  r.threads = 1;
  r.allowed = saved;
  const tfpin::Plan plan = tfpin::compute_plan(tfpin::Topology::host(), r);
  const auto vars = tfpin::environment_for(plan, {});
  Env env = {{"LD_PRELOAD", "libuser.so"}};
  tfpin::ApplyOptions how;
  how.shim = "/nonexistent/libtfpin-shim.so";
  EXPECT_EQ(
      tfpin::apply_plan(plan, vars, access(env), how).warnings,
      std::vector<std::string>{"shim /nonexistent/libtfpin-shim.so not found; threads are not "
                               "enforced inside the program"});
  EXPECT_EQ(tfpin::current_affinity(), plan.cpus());
  EXPECT_EQ(env.at("TFPIN_CPUS"), std::to_string(plan.cpus().at(0)));
  EXPECT_EQ(env.at("LD_PRELOAD"), "libuser.so");
  how.shim = "/proc/self/exe";  // any regular file stands for the shim
  EXPECT_TRUE(tfpin::apply_plan(plan, vars, access(env), how).warnings.empty());
  EXPECT_EQ(env.at("LD_PRELOAD"), "/proc/self/exe:libuser.so");
  tfpin::bind_current_process(saved);
}

// Plans allow CPU ids up to 4095, past CPU_SETSIZE (1024): the one pinning function sizes its mask
// to the highest id, so a lane that names CPU 1500 beside one of ours pins (the kernel keeps the
// CPUs that exist) where a fixed cpu_set_t failed (the engine's lanes) or dropped it (bench's
// streams).
TEST(ThreadAffinity, MaskReachesPastCpuSetSize) {
  const std::vector<unsigned> saved = tfpin::current_affinity();
  const std::vector<unsigned> lane = {saved.front(), 1500, 4095};
  std::thread worker([&] {
    EXPECT_EQ(tfpin::set_thread_affinity(pthread_self(), lane), 0);
    EXPECT_EQ(tfpin::current_affinity(), std::vector<unsigned>{saved.front()});
    EXPECT_EQ(tfpin::set_thread_affinity(pthread_self(), std::vector<unsigned>{4000}), EINVAL);
    EXPECT_EQ(tfpin::set_thread_affinity(pthread_self(), std::vector<unsigned>{}), EINVAL);
  });
  worker.join();
  EXPECT_EQ(tfpin::current_affinity(), saved);  // another thread's mask: ours unchanged
}

// A plan for CPUs this machine does not have: sched_setaffinity refuses it.
tfpin::Plan plan_beyond_this_machine() {
  const unsigned first = tfpin::current_affinity().back() + 1;
  const tfpin::Topology elsewhere =
      tfpin::Topology::load(fmt::format("core:2 pu:1(indexes={},{})", first + 100, first + 101));
  tfpin::PlacementRequest r;
  r.threads = 1;
  return tfpin::compute_plan(elsewhere, r);
}

TEST(ApplyPlan, BindingFailureFailsUnlessToleratedAndThenNothingOfAnyPlanIsLeft) {
  const std::vector<unsigned> saved = tfpin::current_affinity();
  const tfpin::Plan plan = plan_beyond_this_machine();
  const auto vars = tfpin::environment_for(plan, {});
  // The task inherited an outer plan (a tfpin'd batch script) and the user's own preload.
  Env env;
  tfpin::export_environment(tfpin::environment_for(broadwell_plan(4, 1), {}), false, access(env));
  env["LD_PRELOAD"] = "/opt/tfpin/lib/libtfpin-shim.so:libuser.so";
  env["OMP_PROC_BIND"] = "spread";  // the user's, not tfpin's: stays
  const Env outer = env;
  tfpin::ApplyOptions how;
  how.shim = "/proc/self/exe";
  try {
    tfpin::apply_plan(plan, vars, access(env), how);
    ADD_FAILURE() << "binding to CPUs this machine lacks succeeded";
  } catch (const tfpin::Error& e) {
    EXPECT_EQ(e.kind(), tfpin::ErrorKind::system);
    EXPECT_NE(std::string(e.what()).find("binding to CPUs"), std::string::npos) << e.what();
  }
  EXPECT_EQ(env, outer);
  EXPECT_EQ(tfpin::current_affinity(), saved);

  how.tolerate_binding_failure = true;
  const tfpin::AppliedPlan applied = tfpin::apply_plan(plan, vars, access(env), how);
  EXPECT_FALSE(applied.bound);
  ASSERT_EQ(applied.warnings.size(), 1U);
  EXPECT_NE(applied.warnings[0].find("the task runs unbound, without tfpin"), std::string::npos);
  EXPECT_EQ(tfpin::current_affinity(), saved);
  EXPECT_EQ(env, (Env{{"LD_PRELOAD", "libuser.so"}, {"OMP_PROC_BIND", "spread"}}));
}

// The process's memory policy for the length of a test; the default is put back after.
class MemoryPolicyGuard {
 public:
  MemoryPolicyGuard() = default;
  ~MemoryPolicyGuard() { set_mempolicy(MPOL_DEFAULT, nullptr, 0); }
  MemoryPolicyGuard(const MemoryPolicyGuard&) = delete;
  MemoryPolicyGuard& operator=(const MemoryPolicyGuard&) = delete;
};

TEST(ApplyPlan, MemoryPolicyChosenBeforeTfpinIsKept) {
  if (numa_available() < 0) GTEST_SKIP() << "no NUMA support in this kernel";
  const std::vector<unsigned> saved = tfpin::current_affinity();
  MemoryPolicyGuard guard;
  tfpin::PlacementRequest r;
  r.threads = 1;
  r.allowed = saved;
  tfpin::Plan plan = tfpin::compute_plan(tfpin::Topology::host(), r);
  Env env;
  EXPECT_EQ(tfpin::inherited_memory_policy(), std::nullopt);
  EXPECT_EQ(tfpin::apply_plan(plan, {}, access(env), {}).kept_memory_policy, std::nullopt);
  EXPECT_EQ(tfpin::inherited_memory_policy(), std::nullopt);  // first touch: nothing set

  // As numactl --membind=0 or srun --mem-bind=map_mem:0 leave it.
  unsigned long node0 = 1;
  ASSERT_EQ(set_mempolicy(MPOL_BIND, &node0, sizeof node0 * 8), 0) << std::strerror(errno);
  EXPECT_EQ(tfpin::inherited_memory_policy(), "bind:0");
  for (auto kind : {tfpin::MemoryPolicyKind::local, tfpin::MemoryPolicyKind::preferred}) {
    plan.memory = {kind, {0}};
    EXPECT_EQ(tfpin::apply_plan(plan, {}, access(env), {}).kept_memory_policy, "bind:0");
    EXPECT_EQ(tfpin::inherited_memory_policy(), "bind:0");
  }
  ASSERT_EQ(set_mempolicy(MPOL_INTERLEAVE, &node0, sizeof node0 * 8), 0);
  EXPECT_EQ(tfpin::apply_plan(plan, {}, access(env), {}).kept_memory_policy, "interleave:0");

  // With no policy of its own, the plan's preference applies.
  ASSERT_EQ(set_mempolicy(MPOL_DEFAULT, nullptr, 0), 0);
  EXPECT_EQ(tfpin::apply_plan(plan, {}, access(env), {}).kept_memory_policy, std::nullopt);
  EXPECT_EQ(tfpin::inherited_memory_policy(), "prefer:0");
  tfpin::bind_current_process(saved);
}
