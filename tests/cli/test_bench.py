#!/usr/bin/python3
"""`tfpin bench`: tf_cnn_benchmarks-shaped output, --json, --trace_file, lanes, and refusals."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fifo_reader import fifo_reader  # noqa: E402

TFPIN = os.environ.get("TFPIN_EXE", "tfpin")


def bench(*args, env=None, timeout=300):
    full_env = dict(os.environ)
    for name in ("TFPIN_CPUS", "TFPIN_INTEROP", "TFPIN_INTRA", "OMP_NUM_THREADS",
                 "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"):
        full_env.pop(name, None)
    full_env.update(env or {})
    return subprocess.run([TFPIN, "bench", *args], capture_output=True, text=True, env=full_env,
                          timeout=timeout)


SMALL = ["--model", "alexnet", "--batch_size", "2", "--num_warmup_batches", "1", "--forward_only"]


class BenchOutput(unittest.TestCase):
    def test_text_report_like_tf_cnn_benchmarks(self):
        r = bench(*SMALL, "--num_batches", "20")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        steps = [l for l in lines if re.match(r"^\d+\timages/sec: [\d.]+ \+/- [\d.]+ \(jitter = [\d.]+\)$", l)]
        self.assertEqual([l.split("\t")[0] for l in steps], ["1", "10", "20"], r.stdout)
        total = [l for l in lines if l.startswith("total images/sec: ")]
        self.assertEqual(len(total), 1, r.stdout)
        self.assertGreater(float(total[0].split(": ")[1]), 0)
        self.assertIn("Model:       alexnet", r.stdout)
        self.assertIn("Batch size:  2 global", r.stdout)
        self.assertEqual(r.stderr, "")  # no progress output when stderr is not a terminal

    def test_json(self):
        r = bench(*SMALL, "--num_batches", "3", "--json", "--data_format", "NCHW")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["model"], "alexnet")
        self.assertEqual(j["batch_size"], 2)
        self.assertEqual(j["data_format"], "NCHW")
        self.assertGreater(j["images_per_sec"], 0)
        self.assertGreaterEqual(j["intra"], 1)
        self.assertEqual(j["interop"], 1)
        self.assertTrue(j["outputs_finite"])
        self.assertAlmostEqual(j["gflop_per_image"], 1.43, delta=0.05)
        # The oneDNN it ran with, as `tfpin --version` reports it.
        v = subprocess.run([TFPIN, "--version"], capture_output=True, text=True, timeout=60)
        self.assertEqual(v.returncode, 0, v.stderr)
        self.assertRegex(j["onednn"]["version"], r"^[23]\.\d+\.\d+$")
        self.assertIn(f"oneDNN: {j['onednn']['version']} (OpenMP), built with {j['onednn']['built_with']}",
                      v.stdout)
        self.assertIsInstance(j["onednn"]["winograd_offered"], bool)
        # Where it ran: the ISA oneDNN's kernels (and tfpin's) used, and the CPU.
        self.assertIn(j["onednn"]["isa"], ("avx512_core", "avx2", "avx", "sse41", "other"))
        self.assertNotEqual(j["cpu"], "")
        self.assertIn(f"; ISA {j['onednn']['isa']}\n", v.stdout)
        capped = bench(*SMALL, "--num_batches", "2", "--json",
                       env={"DNNL_MAX_CPU_ISA": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"})
        self.assertEqual(capped.returncode, 0, capped.stderr)
        capped_isa = json.loads(capped.stdout)["onednn"]["isa"]
        if j["onednn"]["isa"] in ("avx512_core", "avx2"):
            self.assertEqual(capped_isa, "avx2")

    def test_threads_from_environment_and_flags(self):
        r = bench(*SMALL, "--num_batches", "2", "--json", env={"OMP_NUM_THREADS": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual((j["intra"], j["intra_source"]), (1, "OMP_NUM_THREADS"))
        r = bench(*SMALL, "--num_batches", "2", "--json", "--num_intra_threads", "1",
                  env={"TF_NUM_INTRAOP_THREADS": "2"})
        self.assertEqual(json.loads(r.stdout)["intra_source"], "--num_intra_threads")

    @unittest.skipIf(len(os.sched_getaffinity(0)) < 2, "needs 2 cores")
    def test_trace_with_two_lanes(self):
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, "trace.json")
            r = bench("--model", "googlenet", "--batch_size", "1", "--num_batches", "3",
                      "--num_warmup_batches", "1", "--forward_only", "--num_inter_threads", "2",
                      "--num_intra_threads", "1", "--trace_file", trace, "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
            self.assertEqual((j["interop"], j["intra"]), (2, 1))
            self.assertEqual(len(j["lanes"]), 2)
            self.assertNotEqual(j["lanes"][0], j["lanes"][1])
            with open(trace) as f:
                everything = json.load(f)["traceEvents"]
        events = [e for e in everything if e["ph"] == "X"]
        names = [e for e in everything if e["ph"] == "M"]
        self.assertEqual(sorted(e["args"]["name"] for e in names), ["lane 0", "lane 1"])
        steps = j["compile"]["steps"]
        self.assertEqual(len(events), 3 * steps)  # one event per operator and timed step
        for e in events:
            self.assertEqual(e["ph"], "X")
            self.assertIn(e["args"]["lane"], (0, 1))
            self.assertEqual(e["tid"], e["args"]["thread"])
        self.assertEqual(len({e["args"]["lane"] for e in events}), 2, "both lanes ran operators")
        self.assertEqual(len({e["tid"] for e in events}), 2)
        self.assertIn("inception3a.branch1.conv", {e["name"] for e in events})


class BenchStreams(unittest.TestCase):
    """--num_streams: independent requests at once, one per lane, each stream on its lane's cores."""

    @unittest.skipIf(len(os.sched_getaffinity(0)) < 2, "needs 2 cores")
    def test_two_streams_on_their_own_cores(self):
        # OMP_NUM_THREADS describes one team per process: streams split the cores regardless.
        r = bench("--model", "googlenet", "--batch_size", "1", "--num_batches", "10",
                  "--num_warmup_batches", "1", "--forward_only", "--num_streams", "2", "--json",
                  env={"OMP_NUM_THREADS": "2"})
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual((j["num_streams"], j["interop"], j["intra"]), (2, 2, 1))
        self.assertEqual(j["interop_source"], "--num_streams")
        self.assertTrue(j["outputs_finite"])
        self.assertEqual(len(j["streams"]), 2)
        # Each stream's driving thread runs on its own lane's cores, as the kernel has it.
        lanes = [",".join(map(str, lane)) for lane in j["lanes"]]
        self.assertEqual([s["cpus_allowed"] for s in j["streams"]], lanes)
        self.assertNotEqual(lanes[0], lanes[1])
        # Every stream's requests over the wall time until the last stream ends: never more than
        # twice the slower stream's own rate.
        rates = [s["images_per_sec"] for s in j["streams"]]
        self.assertGreater(min(rates), 0)
        self.assertLessEqual(j["images_per_sec"], 2 * min(rates) * 1.0001)
        self.assertGreater(j["latency_ms"]["median"], 0)
        self.assertGreaterEqual(j["latency_ms"]["p90"], j["latency_ms"]["median"])
        # The running report's step lines are stream 0's, at twice its rate.
        t = bench("--model", "alexnet", "--batch_size", "1", "--num_batches", "10",
                  "--num_warmup_batches", "1", "--forward_only", "--num_streams", "2")
        self.assertEqual(t.returncode, 0, t.stderr)
        self.assertIn("Streams:     2 (one request per lane", t.stdout)
        self.assertRegex(t.stdout, r"2 streams: images/sec per stream [\d.]+, [\d.]+; latency per request: "
                                   r"median [\d.]+ ms, p90 [\d.]+ ms")
        steps = [l.split("\t")[0] for l in t.stdout.splitlines() if re.match(r"^\d+\timages/sec", l)]
        self.assertEqual(steps, ["1", "10"], t.stdout)

    def test_one_stream_is_the_default(self):
        r = bench(*SMALL, "--num_batches", "2", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["num_streams"], 1)
        self.assertNotIn("streams", j)

    def test_refusals(self):
        def refused(args, *fragments):
            r = bench(*args)
            self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
            for fragment in fragments:
                self.assertIn(fragment, r.stderr)
        n = len(os.sched_getaffinity(0))
        refused(["--num_streams", "2", "--model", "alexnet"], "--num_streams=2",
                "need --forward_only")
        refused(["--num_streams", "2", "--forward_only", "--num_inter_threads", "3"],
                "--num_streams=2 runs one request per inter-op lane, but --num_inter_threads=3")
        refused(["--num_streams", "2", "--forward_only", "--trace_file", "/tmp/t.json"],
                "--trace_file traces one request at a time")
        refused(["--num_streams", str(n + 1), "--forward_only"],
                f"--num_streams={n + 1}: {n + 1} lanes of one thread each are more than the {n} cores",
                f"valid: 1 to {n}")
        refused(["--num_streams", "0", "--forward_only"], "--num_streams=0 is too small")


class TraceFile(unittest.TestCase):
    """--trace_file is checked before the run without being opened, and written once at the end."""

    def test_refused_run_leaves_an_existing_file_as_it_was(self):
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, "trace.json")
            with open(trace, "w") as f:
                f.write("keep\n")
            # refused after the trace file's check: the batch is found too large when compiling
            r = bench("--model", "resnet50", "--batch_size", "10000000", "--forward_only",
                      "--num_batches", "1", "--trace_file", trace)
            self.assertNotEqual(r.returncode, 0, r.stderr)
            self.assertIn("tfpin", r.stderr)
            with open(trace) as f:
                self.assertEqual(f.read(), "keep\n")
            self.assertEqual(os.listdir(tmp), ["trace.json"])

    def test_a_fifo_gets_the_whole_trace_in_one_open(self):
        with tempfile.TemporaryDirectory() as tmp:
            with fifo_reader(os.path.join(tmp, "trace.fifo")) as got:
                r = bench(*SMALL, "--num_batches", "1", "--trace_file",
                          os.path.join(tmp, "trace.fifo"), timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(json.loads(got[0])["traceEvents"])


class BenchTraining(unittest.TestCase):
    def test_resnet50_trains_without_forward_only(self):
        r = bench("--model", "resnet50", "--batch_size", "2", "--num_batches", "2",
                  "--num_warmup_batches", "1")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("Mode:        training", r.stdout)
        self.assertIn("Step\tImg/sec\ttotal_loss", r.stdout)
        steps = [l for l in r.stdout.splitlines()
                 if re.match(r"^\d+\timages/sec: [\d.]+ \+/- [\d.]+ \(jitter = [\d.]+\)\t[\d.]+$", l)]
        self.assertEqual([l.split("\t")[0] for l in steps], ["1"], r.stdout)
        loss = float(steps[0].split("\t")[2])
        self.assertTrue(0 <= loss < 12, loss)  # ln(1000) at first, falling (the batch repeats; the
        # timed kernels' trial steps train too, so it can reach 0)
        total = [l for l in r.stdout.splitlines() if l.startswith("total images/sec: ")]
        self.assertEqual(len(total), 1, r.stdout)
        self.assertGreater(float(total[0].split(": ")[1]), 0)
        self.assertIn("(3x forward)", r.stdout)

    @unittest.skipIf(len(os.sched_getaffinity(0)) < 2, "needs 2 cores")
    def test_training_json_and_trace_with_two_lanes(self):
        with tempfile.TemporaryDirectory() as tmp:
            trace = os.path.join(tmp, "trace.json")
            r = bench("--model", "googlenet", "--batch_size", "1", "--num_batches", "2",
                      "--num_warmup_batches", "1", "--num_inter_threads", "2",
                      "--num_intra_threads", "1", "--trace_file", trace, "--json")
            self.assertEqual(r.returncode, 0, r.stderr)
            j = json.loads(r.stdout)
            with open(trace) as f:
                events = [e for e in json.load(f)["traceEvents"] if e["ph"] == "X"]
        self.assertEqual(j["mode"], "training")
        self.assertFalse(j["forward_only"])
        # (>= 0: one synthetic image, fitted through the timed kernels' trial steps, can reach 0.)
        self.assertGreaterEqual(j["loss"], 0)
        self.assertTrue(j["outputs_finite"])
        self.assertAlmostEqual(j["gflop_per_image"], 3 * 3.0, delta=0.3)  # 3x the forward's 3.0
        self.assertGreater(j["compile"]["trained_tensors"], 100)
        self.assertEqual(len(events), 2 * j["compile"]["steps"])
        ops = {e["name"]: e["cat"] for e in events}
        for name in ("loss", "conv1.conv:backward_weights", "conv1.conv.weight:sgd",
                     "inception3a.branch1.conv:backward_data", "conv1.bn:backward",
                     "inception3a.branch4.0:backward"):
            self.assertIn(name, ops)
        # Batch norm + ReLU + max pooling run as one step each way where the CPU has AVX2: conv1's
        # and conv3's, and those of the 8 parts that maxpool3 and maxpool4 are split over.
        with open("/proc/cpuinfo") as f:
            flags = next((line.split() for line in f if line.startswith("flags")), [])
        fused = "avx2" in flags and "fma" in flags
        self.assertEqual(j["compile"]["fused_pools"], 10 if fused else 0)
        self.assertEqual(j["compile"]["max_pools_before_concats"], 2)
        self.assertEqual(ops["conv1.bn:backward"],
                         "batch_norm+relu+max_pool_backward" if fused else "batch_norm+relu_backward")
        self.assertEqual(ops["inception3a.branch4.0:backward"], "max_pool_backward")
        self.assertEqual(len({e["args"]["lane"] for e in events}), 2, "both lanes ran steps")


class ForceKernel(unittest.TestCase):
    """--force_kernel runs a named candidate on every step offering it, untimed."""

    def test_forced_steps_run_the_named_kernel(self):
        r = bench(*SMALL, "--num_batches", "2", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        timed = json.loads(r.stdout)["compile"]
        self.assertEqual(timed["forced_choices"], 0)
        self.assertNotIn("force_kernel", json.loads(r.stdout))
        # A candidate that is not the one kept on the first timed step (names differ per oneDNN
        # version and ISA, so taken from this run).
        first = timed["kernel_choices"][0]
        name = next(k for k in first["best_us"] if k != first["kept"])
        offering = {c["step"] for c in timed["kernel_choices"] if name in c["best_us"]}
        r = bench(*SMALL, "--num_batches", "2", "--json", "--force_kernel", name, "-v")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["force_kernel"], name)
        self.assertEqual(j["compile"]["forced_choices"], len(offering))
        still_timed = {c["step"] for c in j["compile"]["kernel_choices"]}
        self.assertFalse(still_timed & offering, still_timed)
        self.assertTrue(j["outputs_finite"])
        # -v lists the compiled steps with the kernel each runs: the forced one on those steps.
        for step in offering:
            line = next(l for l in r.stderr.splitlines() if re.match(rf"^\s*\d+\s+{re.escape(step)}\s", l))
            self.assertIn(f" {name} ", line)

    def test_unknown_prefix_is_refused(self):
        r = bench(*SMALL, "--num_batches", "1", "--force_kernel", "no_such_kernel")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--force_kernel=no_such_kernel", r.stderr)
        self.assertIn("no step of alexnet", r.stderr)
        self.assertIn("valid:", r.stderr)


class BenchRefusals(unittest.TestCase):
    def refused(self, args, *fragments, code=2):
        r = bench(*args)
        self.assertEqual(r.returncode, code, r.stdout + r.stderr)
        for fragment in fragments:
            self.assertIn(fragment, r.stderr)

    def test_unknown_model(self):
        self.refused(["--model", "resnet51", "--forward_only"], "--model=resnet51",
                     "valid: resnet50, inception3, vgg16, googlenet, alexnet")

    def test_bad_numbers(self):
        self.refused(["--batch_size", "0", "--forward_only"], "--batch_size=0 is too small")
        self.refused(["--batch_size", "abc", "--forward_only"], "--batch_size=abc is not a whole number")
        self.refused(["--num_batches", "-3", "--forward_only"], "--num_batches=-3")

    def test_bad_layout(self):
        self.refused(["--data_format", "NCWH", "--forward_only"], "--data_format=NCWH", "NHWC, NCHW")

    def test_training_batch_too_large_to_plan(self):
        # Training keeps every activation until its backward step: refused before allocating.
        self.refused(["--model", "vgg16", "--batch_size", "20000", "--num_batches", "1"],
                     "cannot compile vgg16 for batch 20000", "out of memory", "cannot be planned")

    def test_more_threads_than_cores(self):
        n = len(os.sched_getaffinity(0))
        self.refused(["--num_intra_threads", str(n + 1), "--forward_only"],
                     f"--num_intra_threads={n + 1}", f"more than the {n} cores")

    def test_batch_too_large_to_plan(self):
        self.refused(["--model", "resnet50", "--batch_size", "100000", "--forward_only",
                      "--num_batches", "1"], "cannot be planned")


class VariableUpdate(unittest.TestCase):
    """--variable_update outside srun: a job of one rank when tfpin has MPI, else a clear refusal."""

    def test_one_rank_job_or_refusal(self):
        version = subprocess.run([TFPIN, "--version"], capture_output=True, text=True, timeout=60)
        mpi = next(line for line in version.stdout.splitlines() if line.startswith("MPI: "))
        args = ["--model", "alexnet", "--batch_size", "1", "--num_batches", "2",
                "--num_warmup_batches", "0", "--variable_update", "horovod", "--json"]
        r = bench(*args)
        if mpi.startswith("MPI: none"):
            self.assertEqual(r.returncode, 2, r.stderr)
            self.assertIn("built without MPI", r.stderr)
            self.assertIn("valid here: replicated", r.stderr)
            return
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual((j["ranks"], j["global_batch_size"], j["variable_update"]), (1, 1, "horovod"))
        self.assertEqual(len(j["per_rank"]), 1)
        # fc8 + fc7 (80 MB), fc6 alone (151 MB, above the threshold), the convolutions (9 MB)
        self.assertEqual(j["allreduce"]["buckets"], 3)
        self.assertGreater(j["allreduce"]["bytes_per_step"], 200e6)
        self.assertEqual(len(j["losses"]), 2)

    def test_tfpin_itself_does_not_link_mpi(self):
        # libmpi's load-time constructors would cost every command (0.5 s with Open MPI 6): only
        # libtfpin-mpi.so, loaded for --variable_update and --version, may link it.
        needed = subprocess.run(["readelf", "-d", TFPIN], capture_output=True, text=True, check=True).stdout
        self.assertRegex(needed, r"\(NEEDED\).*libc\.so")
        self.assertNotRegex(needed, r"\(NEEDED\).*lib(mpi|open-pal|open-rte|pmix)")

    def test_missing_mpi_module_is_named(self):
        if "MPI: none" in subprocess.run([TFPIN, "--version"], capture_output=True, text=True).stdout:
            self.skipTest("tfpin built without MPI")
        module = os.path.join(os.path.dirname(os.path.realpath(TFPIN)), "libtfpin-mpi.so")
        self.assertTrue(os.path.isfile(module), module)
        with tempfile.TemporaryDirectory() as alone:
            # A tfpin with no module next to it (and, from a build tree, none installed).
            copy = os.path.join(alone, "tfpin")
            subprocess.run(["cp", os.path.realpath(TFPIN), copy], check=True)
            r = subprocess.run([copy, "bench", "--model", "alexnet", "--batch_size", "1",
                                "--variable_update", "horovod"], capture_output=True, text=True, timeout=60)
            installed = re.search(r"looked for .*, (/\S+libtfpin-mpi\.so)", r.stderr)
            if installed and os.path.exists(installed.group(1)):
                self.skipTest(f"a module is installed at {installed.group(1)}")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("--variable_update needs tfpin's MPI module: libtfpin-mpi.so is not installed "
                          f"(looked for {alone}/libtfpin-mpi.so", r.stderr)
            self.assertNotIn("images/sec", r.stdout)
            # --version says the same instead of naming the library.
            version = subprocess.run([copy, "--version"], capture_output=True, text=True, timeout=60)
            self.assertEqual(version.returncode, 0, version.stderr)
            self.assertIn("MPI: unavailable (libtfpin-mpi.so is not installed", version.stdout)
            # A module that does not load is named with the loader's reason.
            with open(os.path.join(alone, "libtfpin-mpi.so"), "w") as broken:
                broken.write("not an ELF file\n")
            r = subprocess.run([copy, "bench", "--variable_update", "horovod"], capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"cannot load {alone}/libtfpin-mpi.so", r.stderr)

    def test_bad_values(self):
        r = bench("--variable_update", "parameter_server", "--forward_only")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--variable_update=parameter_server is not supported (valid: replicated, "
                      "horovod, independent)", r.stderr)


class DefaultsWrittenOnce(unittest.TestCase):
    """`--help` prints each default from the command's own initial value; the man page must agree."""

    MAN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "cli", "tfpin.1")

    @staticmethod
    def help_defaults(command):
        out = subprocess.run([TFPIN, command, "--help"], capture_output=True, text=True, timeout=30).stdout
        # CLI11 2.1 prints "--batch_size B=32", later versions "--batch_size B [32]".
        return dict(re.findall(r"^\s+(--[a-z_-]+) [^=\s\[]+(?:=| \[)([^\s\]]+)", out, re.M))

    @classmethod
    def man_entries(cls, command):
        """Option name -> the text of its .TP entry in the OPTIONS (command) section."""
        with open(cls.MAN) as f:
            man = f.read()
        section = man.split(f".SH OPTIONS ({command})\n", 1)[1].split("\n.SH ", 1)[0]
        entries = {}
        for entry in section.split(".TP\n")[1:]:
            heading, _, body = entry.partition("\n")
            for option in re.findall(r"\\-\\-([a-z_\\-]+)", heading):
                entries["--" + option.replace("\\-", "-")] = body
        return entries

    def test_man_page_states_the_defaults_help_prints(self):
        bench_entries = self.man_entries("bench")
        for command in ("bench", "tune"):
            defaults = self.help_defaults(command)
            self.assertIn("--batch_size" if command == "bench" else "--batch_sizes", defaults)
            entries = self.man_entries(command)
            for option, value in defaults.items():
                with self.subTest(command=command, option=option):
                    self.assertIn(option, entries, f"tfpin.1 has no entry for {command} {option}")
                    text = entries[option]
                    if value not in text and "As for" in text:
                        text = bench_entries.get(option, "")
                    self.assertIn(value, text, f"tfpin.1 {command} {option}: --help says the default is {value}")


if __name__ == "__main__":
    # Where oneDNN cannot run on this CPU the engine refuses: skip, with the reason.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from onednn_usable import exit_if_onednn_unusable  # noqa: E402
    exit_if_onednn_unusable(TFPIN)
    probe = subprocess.run([TFPIN, "bench", "--help"], capture_output=True, text=True)
    if probe.returncode != 0:
        print(f"{TFPIN} has no bench command (the engine is not wired into the CLI): skipping")
        sys.exit(77)
    unittest.main(verbosity=2)
