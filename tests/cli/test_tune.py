#!/usr/bin/python3
"""`tfpin tune`: a tiny real sweep (table, JSON, recommendation, #SBATCH lines, SVG), each child's
pinning checked against `tfpin show --json`, failed children reported, and refusals."""
import json
import os
import re
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from fifo_reader import fifo_reader  # noqa: E402

TFPIN = os.environ.get("TFPIN_EXE", "tfpin")
CORES = len(os.sched_getaffinity(0))
SVG = "{http://www.w3.org/2000/svg}"


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("TFPIN_", "OMP_", "KMP_", "GOMP_", "TF_NUM", "MKL_", "OPENBLAS_", "ORT_"))
           and k != "LD_PRELOAD"}
    env.update(extra or {})
    return env


def tfpin(*args, env=None, timeout=300):
    return subprocess.run([TFPIN, *args], capture_output=True, text=True, env=clean_env(env),
                          timeout=timeout)


TINY = ["--model", "alexnet", "--num_batches", "2", "--num_warmup_batches", "1", "--forward_only"]
# Thread counts swept: every allowed core (all its divisors as inter-op), and 1 thread when there
# are more cores, so that one configuration runs on a strict subset of the CPUs.
THREADS = "1,2" if CORES >= 2 else "1"


def expected_configs():
    out = []
    for t in [int(x) for x in THREADS.split(",")]:
        out += [(t, m) for m in range(1, t + 1) if t % m == 0]
    return out


class RealSweep(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.svg = os.path.join(cls.tmp.name, "tune.svg")
        # Thread variables in the caller's environment must not turn every run into the same one.
        cls.proc = tfpin("tune", *TINY, "--batch_sizes", "1,2", "--threads", THREADS, "--json",
                         "--plot", cls.svg,
                         env={"OMP_NUM_THREADS": "1", "TF_NUM_INTEROP_THREADS": "2"})
        cls.result = json.loads(cls.proc.stdout) if cls.proc.returncode == 0 else None

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def setUp(self):
        self.assertEqual(self.proc.returncode, 0, self.proc.stderr)

    def test_every_configuration_and_batch_was_measured(self):
        rows = self.result["results"]
        got = sorted((r["threads"], r["interop"], r["batch_size"]) for r in rows)
        want = sorted((t, m, b) for t, m in expected_configs() for b in (1, 2))
        self.assertEqual(got, want)
        for r in rows:
            self.assertEqual(r["status"], "ok", r)
            self.assertGreater(r["images_per_sec"], 0)
            self.assertEqual(r["threads"], r["interop"] * r["intra"])
            self.assertIn("jitter", r["step_images_per_sec"])
        self.assertEqual(self.proc.stderr, "")  # no progress output when stderr is not a terminal

    def test_recommendation_is_the_fastest_measured(self):
        rows = self.result["results"]
        fastest = max(rows, key=lambda r: r["images_per_sec"])
        best = self.result["best"]
        self.assertEqual((best["threads"], best["interop"], best["batch_size"]),
                         (fastest["threads"], fastest["interop"], fastest["batch_size"]))
        self.assertEqual(best["images_per_sec"], fastest["images_per_sec"])
        self.assertAlmostEqual(fastest["relative"], 1.0)
        self.assertTrue(all(r["relative"] <= 1.0 for r in rows))

    def test_sbatch_lines_are_consistent(self):
        lines = self.result["sbatch"]
        values = {}
        for line in lines:
            m = re.fullmatch(r"#SBATCH --([a-z-]+)=(\d+)", line)
            self.assertIsNotNone(m, line)
            values[m.group(1)] = int(m.group(2))
        best = self.result["best"]
        self.assertEqual(values["tf-threads"], values["cpus-per-task"])
        self.assertEqual(values["tf-threads"] % values["tf-interop"], 0)
        self.assertEqual((values["tf-threads"], values["tf-interop"]), (best["threads"], best["interop"]))

    def test_each_child_ran_on_the_plan_tfpin_show_computes(self):
        for r in self.result["results"]:
            show = tfpin("show", "--json", "--threads", str(r["threads"]), "--interop", str(r["interop"]))
            self.assertEqual(show.returncode, 0, show.stderr)
            plan = json.loads(show.stdout)
            lanes = [lane["cpus"] for lane in plan["lanes"]]
            self.assertEqual(r["child"]["lanes"], lanes, r)
            # The child took its layout from what `tfpin run` exported, as a job's program would.
            self.assertEqual((r["child"]["interop"], r["child"]["intra"]), (r["interop"], r["intra"]))
            self.assertEqual(r["child"]["interop_source"], "TF_NUM_INTEROP_THREADS")
            kernel = set()
            for item in r["child"]["cpus_allowed"].split(","):
                lo, _, hi = item.partition("-")
                kernel.update(range(int(lo), int(hi or lo) + 1))
            self.assertEqual(kernel, {c for lane in lanes for c in lane}, r)

    def test_svg_has_one_series_per_batch_size(self):
        root = ET.parse(self.svg).getroot()
        self.assertEqual(root.tag, SVG + "svg")
        series = [g for g in root.iter(SVG + "g") if g.get("class") == "series"]
        self.assertEqual([g.get("data-batch-size") for g in series], ["1", "2"])
        for g in series:
            self.assertEqual(len(g.findall(SVG + "circle")), len(expected_configs()))
            self.assertEqual(len(g.findall(SVG + "polyline")), 1)


class TextReport(unittest.TestCase):
    def test_failed_child_is_a_row_and_the_rest_runs(self):
        # Batch 100000 of AlexNet needs ~60 GB of activations: the child refuses it (exit 2).
        r = tfpin("tune", *TINY, "--threads", "1", "--batch_sizes", "100000,1")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        lines = [l for l in r.stdout.splitlines() if re.match(r"^\s+1\s+1\s+1\s+\d+\s", l)]
        rows = [l.split() for l in lines]
        self.assertEqual([row[3] for row in rows], ["100000", "1"], r.stdout)
        self.assertEqual(rows[0][4], "FAILED")
        self.assertIn("exit 2: ", lines[0])  # the child's own reason follows
        self.assertIn("memory", lines[0])
        self.assertGreater(float(rows[1][4]), 0)
        self.assertIn("(1 of 2 runs failed)", r.stdout)
        self.assertRegex(r.stdout, r"\|#+ +[\d.]+  <- best")
        self.assertIn("#SBATCH --cpus-per-task=1\n#SBATCH --tf-threads=1\n#SBATCH --tf-interop=1\n",
                      r.stdout)
        self.assertIn("# batch size 1 ", r.stdout)

    def test_a_run_over_its_timeout_is_killed_and_nothing_measured_exits_1(self):
        r = tfpin("tune", "--model", "resnet50", "--forward_only", "--threads", "1",
                  "--batch_sizes", "1", "--num_batches", "100000", "--timeout", "1", timeout=60)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("timed out after 1 s", r.stdout)
        self.assertIn("no configuration could be measured", r.stderr)


class DryRun(unittest.TestCase):
    def test_other_machine(self):
        desc = "package:2 numa:1 core:4 pu:2"
        r = tfpin("tune", "--forward_only", "--dry-run", "--json", "--topology", desc)
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["cores"], 8)
        got = [(c["threads"], c["interop"]) for c in j["configurations"]]
        self.assertEqual(got, [(8, 1), (8, 2), (8, 4), (8, 8)])
        show = json.loads(tfpin("show", "--json", "--topology", desc, "--threads", "8",
                                "--interop", "4").stdout)
        self.assertEqual(j["configurations"][2]["lanes"], [l["cpus"] for l in show["lanes"]])
        self.assertEqual(j["results"], [])
        r = tfpin("tune", "--forward_only", "--dry-run", "--topology", desc, "--threads", "4,2",
                  "--interop", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"\n\s+4\s+2\s+2\s+\S")
        self.assertRegex(r.stdout, r"\n\s+2\s+2\s+1\s+\S")
        self.assertIn("tfpin run --enforce --threads 4 --interop 2 -- tfpin bench", r.stdout)


class Streams(unittest.TestCase):
    """--streams: every multi-lane layout also as throughput streams, recommended apart."""

    def test_dry_run_adds_a_streams_configuration_per_multi_lane_layout(self):
        r = tfpin("tune", "--forward_only", "--streams", "--dry-run", "--json", "--topology",
                  "package:2 numa:1 core:4 pu:2")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        got = [(c["threads"], c["interop"], c["streams"]) for c in j["configurations"]]
        self.assertEqual(got, [(8, 1, 1), (8, 2, 1), (8, 4, 1), (8, 8, 1), (8, 2, 2), (8, 4, 4),
                               (8, 8, 8)])
        self.assertEqual(sum("--num_streams 4" in c for c in j["commands"]), 1)
        self.assertEqual(sum("--num_streams" in c for c in j["commands"]), 3)

    @unittest.skipIf(CORES < 2, "needs 2 cores")
    def test_streams_are_measured_and_recommended_apart(self):
        r = tfpin("tune", *TINY, "--batch_sizes", "1", "--threads", "2", "--streams", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        rows = {(x["interop"], x["streams"]): x for x in j["results"]}
        self.assertEqual(sorted(rows), [(1, 1), (2, 1), (2, 2)])
        for x in rows.values():
            self.assertEqual(x["status"], "ok", x)
        served = rows[(2, 2)]
        self.assertEqual(served["child"]["num_streams"], 2)
        # One thread per lane here: each stream's thread is bound to its lane's one cpu.
        self.assertEqual([s["cpus_allowed"] for s in served["child"]["streams"]],
                         [str(lane[0]) for lane in served["child"]["lanes"]])
        # The recommended job layout is the fastest one-request run, never a streams run.
        one = max((x for x in j["results"] if x["streams"] == 1), key=lambda x: x["images_per_sec"])
        self.assertEqual((j["best"]["interop"], j["best"]["images_per_sec"]),
                         (one["interop"], one["images_per_sec"]))
        self.assertEqual((j["best_streams"]["streams"], j["best_streams"]["images_per_sec"]),
                         (2, served["images_per_sec"]))
        text = tfpin("tune", *TINY, "--batch_sizes", "1", "--threads", "2", "--streams")
        self.assertEqual(text.returncode, 0, text.stderr)
        self.assertRegex(text.stdout, r"Serving many independent requests: 2 streams x 1 thread "
                                      r"\(one request per lane, batch 1\): [\d.]+ images/sec")
        self.assertIn("--forward_only --batch_size 1 --num_streams 2", text.stdout)
        self.assertIn("2 thr, 2 inter-op, 2 streams", text.stdout)

    def test_refused_for_training(self):
        r = tfpin("tune", "--model", "alexnet", "--streams", "--threads", "1")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--streams measures independent inference requests and needs --forward_only",
                      r.stderr)
        self.assertEqual(r.stdout, "")


class BadArguments(unittest.TestCase):
    def refused(self, *args, words):
        r = tfpin("tune", *args)
        self.assertEqual(r.returncode, 2, f"{args}: {r.stdout} {r.stderr}")
        for w in words:
            self.assertIn(w, r.stderr, args)
        self.assertEqual(r.stdout, "", args)  # refused before any child ran

    def test_refusals_name_the_option_and_value(self):
        fo = "--forward_only"
        self.refused(fo, "--batch_sizes", "1,x", words=["--batch_sizes=x", "1,x", "whole number"])
        self.refused(fo, "--batch_sizes", "0", words=["--batch_sizes=0", "from 1"])
        self.refused(fo, "--batch_sizes", "1,,2", words=["--batch_sizes", "1,,2"])
        self.refused(fo, "--model", "lenet", words=["--model=lenet", "alexnet", "resnet50"])
        self.refused(fo, "--data_format", "CHWN", words=["--data_format=CHWN", "NHWC, NCHW"])
        self.refused(fo, "--threads", str(CORES + 1),
                     words=[f"--threads={CORES + 1}", f"valid: 1..{CORES}"])
        self.refused(fo, "--threads", "1", "--interop", "2",
                     words=["--threads=1", "--interop=2", "not a multiple",
                            "valid --threads with --interop=2"])
        self.refused(fo, "--num_batches", "0", words=["--num_batches=0"])
        self.refused(fo, "--timeout", "-1", words=["--timeout=-1"])
        self.refused(fo, "--topology", "package:1 core:4", words=["--topology=package:1 core:4", "--dry-run"])
        self.refused(fo, "--cpuset", "4096", words=["--cpuset=4096", "outside"])
        self.refused(fo, "--plot", "/nonexistent/dir/p.svg", words=["--plot=/nonexistent/dir/p.svg"])

    def test_plot_into_a_fifo_in_one_open(self):
        # The early check opens nothing: a FIFO's reader sees one writer, who writes the whole SVG.
        with tempfile.TemporaryDirectory() as tmp:
            fifo = os.path.join(tmp, "plot.fifo")
            with fifo_reader(fifo) as got:
                r = tfpin("tune", "--model", "alexnet", "--batch_sizes", "1", "--threads", "1",
                          "--num_batches", "1", "--num_warmup_batches", "0", "--forward_only",
                          "--plot", fifo, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(ET.fromstring(got[0]).tag, SVG + "svg")

    def test_training_sweep_runs_training_steps(self):
        # GoogLeNet (batch norm): AlexNet at batch 2 diverges within the timed kernels' trial steps.
        r = tfpin("tune", "--model", "googlenet", "--batch_sizes", "2", "--threads", "1",
                  "--num_batches", "1", "--num_warmup_batches", "1", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        result = json.loads(r.stdout)
        self.assertEqual((result["forward_only"], result["mode"]), (False, "training"))
        self.assertEqual([x["status"] for x in result["results"]], ["ok"])
        self.assertGreater(result["results"][0]["images_per_sec"], 0)


if __name__ == "__main__":
    # Where oneDNN cannot run on this CPU the engine refuses: skip, with the reason.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from onednn_usable import exit_if_onednn_unusable  # noqa: E402
    exit_if_onednn_unusable(TFPIN)
    unittest.main(verbosity=2)
