// `tfpin`: show the plan for this machine (or another one), run a program under a plan; with the
// engine, benchmark a model and tune the thread layout for it.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "commands.hpp"
#include "initial_affinity.hpp"
#ifdef TFPIN_HAVE_ENGINE
#include "bench.hpp"
#include "tune.hpp"
#endif
#ifdef TFPIN_HAVE_ONNX
#include "infer.hpp"
#endif
#include "tfpin/error.hpp"

namespace {

// CLI11 2.1 reads "--name=" (an empty value) as "--name" alone: it takes the next argument as the
// value ("--interop= --json" became --interop=--json) or, at the end, fails with "1 required M
// missing". tfpin's own arguments (up to the program of `run`) get "--name" "" instead, an empty
// value that tfpin's parsers refuse by name.
std::vector<std::string> own_arguments(const CLI::App& app, int count, char** argv) {
  std::vector<std::string> args(argv, argv + count);
  if (count < 2) return args;
  const CLI::App* sub = nullptr;
  for (const CLI::App* candidate : app.get_subcommands([](const CLI::App*) { return true; })) {
    if (candidate->get_name() == args[1]) sub = candidate;
  }
  if (sub == nullptr) return args;
  std::vector<std::string> out(args.begin(), args.begin() + 2);
  bool options_ended = false;  // from the first positional on (run's PROGRAM), nothing is touched
  for (std::size_t i = 2; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (options_ended || !arg.starts_with("-")) {
      options_ended = true;
      out.push_back(arg);
      continue;
    }
    const std::size_t eq = arg.find('=');
    const CLI::Option* option =
        arg.starts_with("--") ? sub->get_option_no_throw(arg.substr(0, eq)) : nullptr;
    const bool takes_value = option != nullptr && option->get_items_expected_max() > 0;
    if (takes_value && eq == arg.size() - 1) {
      out.push_back(arg.substr(0, eq));
      out.emplace_back();
      continue;
    }
    out.push_back(arg);
    if (takes_value && eq == std::string::npos && i + 1 < args.size()) out.push_back(args[++i]);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace tfpin::cli;
  // Before anything reads the allowed CPUs or starts a thread: undo libgomp's start-up binding.
  restore_initial_affinity();
  CLI::App app{"tfpin: pin deep-learning threads to the cores a job was given"};
  app.set_version_flag("--version", version_text);
  app.require_subcommand(1);

  ShowCommand show;
  CLI::App* show_app = app.add_subcommand("show", "print the plan and environment (a dry run)");
  show.plan.add_to(*show_app);
  show_app
      ->add_option("--topology", show.topology,
                   "another machine: an hwloc XML file or synthetic description, e.g. "
                   "\"package:2 numa:1 core:18 pu:2\" (default: this host)")
      ->type_name("DESC|FILE");
  show_app->add_flag("--json", show.json, "machine-readable output");

  RunCommand run;
  CLI::App* run_app =
      app.add_subcommand("run", "bind, set memory policy and environment, then exec PROGRAM");
  run.plan.add_to(*run_app);
  run_app->add_flag("-v,--verbose", run.verbose, "print the plan to stderr before running");
  run_app->add_flag("--no-shim", run.no_shim,
                    "do not preload libtfpin-shim.so (the plan is then not enforced inside the "
                    "program)");
  run_app->add_flag("--enforce", run.enforce,
                    "overwrite thread variables the user already set (default: the user's win)");
  run_app->add_option("--containers", run.containers,
                      "apptainer (default): containers the program starts get the shim's "
                      "directory bound and the plan as APPTAINERENV_*; singularity: the same for "
                      "SingularityCE; no: neither");
  run_app->footer(
      "PROGRAM [ARGS...] follows the options, after an optional --; everything from "
      "the program name on is the program's, options included.");
  // CLI11 stops at the first positional (the program) and leaves the rest unparsed.
  run_app->prefix_command();

#ifdef TFPIN_HAVE_ENGINE
  BenchCommand bench;
  CLI::App* bench_app = add_bench_command(app, bench);
  TuneCommand tune;
  CLI::App* tune_app = add_tune_command(app, tune);
#endif
#ifdef TFPIN_HAVE_ONNX
  InferCommand infer;
  CLI::App* infer_app = add_infer_command(app, infer);
#endif

  // CLI11 mishandles a "--" in prefix mode, so tfpin's own arguments end at the first "--"; what
  // follows is the program's, verbatim (unless a program name came before it: see below).
  int split = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--") {
      split = i;
      break;
    }
  }

  std::vector<std::string> own = own_arguments(app, split, argv);
  std::vector<char*> own_argv;
  for (std::string& arg : own) own_argv.push_back(arg.data());
  try {
    app.parse(static_cast<int>(own_argv.size()), own_argv.data());
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    fmt::print(stderr, "tfpin: {}\nRun 'tfpin --help' (or 'tfpin SUBCOMMAND --help') for usage.\n",
               e.what());
    return exit_usage;
  }

  try {
#ifdef TFPIN_HAVE_ENGINE
    if (*bench_app) return bench();
    if (*tune_app) return tune();
#endif
#ifdef TFPIN_HAVE_ONNX
    if (*infer_app) return infer();
#endif
    if (*show_app) {
      if (split < argc) {
        fmt::print(stderr, "tfpin show: unexpected arguments after --: it runs no program\n");
        return exit_usage;
      }
      return show();
    }
    run.program = run_app->remaining();
    if (split < argc) {
      // "tfpin run -- prog args": the program starts after "--". "tfpin run prog a -- b": the "--"
      // is one of the program's arguments.
      const int first = run.program.empty() ? split + 1 : split;
      run.program.insert(run.program.end(), argv + first, argv + argc);
    }
    if (run.program.empty()) {
      fmt::print(stderr,
                 "tfpin run: no program given; usage: tfpin run [OPTIONS] -- PROGRAM [ARGS...]\n");
      return exit_usage;
    }
    return run();
  } catch (const tfpin::Error& e) {
    fmt::print(stderr, "tfpin: {}\n", e.what());
    return e.kind() == tfpin::ErrorKind::invalid_request ? exit_usage : exit_failure;
  } catch (const std::exception& e) {
    fmt::print(stderr, "tfpin: internal error: {}\n", e.what());
    return exit_failure;
  }
}
