#!/usr/bin/python3
"""`tfpin show` and `tfpin run` on this host, checked through /proc (what the kernel says the child
got), against what `tfpin show --json` predicted."""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from onednn_usable import onednn_unusable_reason  # noqa: E402

TFPIN = os.environ.get("TFPIN_EXE", "tfpin")
FIXTURES = os.environ.get("TFPIN_FIXTURE_DIR", os.path.join(os.path.dirname(__file__), "..", "fixtures"))

# A child that prints what the kernel and its environment say about it.
PROBE = ("grep -E '^(Cpus_allowed_list|Mems_allowed_list)' /proc/self/status; "
         "env | grep -E '^(OMP_|KMP_|TF_|MKL_|OPENBLAS_|ORT_|GOMP_|TFPIN_)' | sort")


def tfpin(*args, env=None):
    full_env = dict(os.environ)
    for name in list(full_env):
        # An outer plan (these tests may run inside a tfpin'd job) must not leak in.
        if name.startswith(("TFPIN_", "OMP_", "KMP_", "GOMP_", "TF_NUM", "MKL_", "OPENBLAS_", "ORT_")) \
                or name == "LD_PRELOAD":
            del full_env[name]
    full_env.update(env or {})
    return subprocess.run([TFPIN, *args], capture_output=True, text=True, env=full_env, timeout=60)


def show_json(*args, env=None):
    proc = tfpin("show", "--json", *args, env=env)
    if proc.returncode != 0:
        raise AssertionError(f"tfpin show failed: {proc.stderr}")
    return json.loads(proc.stdout)


def parse_probe(text):
    status, env = {}, {}
    for line in text.splitlines():
        if ":\t" in line:
            key, value = line.split(":\t", 1)
            status[key] = value.strip()
        elif "=" in line:
            key, value = line.split("=", 1)
            env[key] = value
    return status, env


def cpulist(text):
    cpus = []
    for item in text.split(","):
        lo, _, hi = item.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return cpus


class Show(unittest.TestCase):
    def test_host_plan_uses_every_allowed_core(self):
        plan = show_json()
        allowed = sorted(os.sched_getaffinity(0))
        self.assertEqual(plan["threads"], len(allowed))
        self.assertEqual(plan["interop"], 1)
        self.assertEqual(sorted(plan["lanes"][0]["cpus"]), allowed)
        for key in ("threads", "interop", "intra", "lanes", "env"):
            self.assertIn(key, plan)

    def test_other_machine_dry_run(self):
        plan = show_json("--topology", os.path.join(FIXTURES, "broadwell-2x18-ht.xml"),
                         "--threads", "36", "--interop", "2")
        self.assertEqual([lane["cpus"] for lane in plan["lanes"]],
                         [list(range(0, 18)), list(range(18, 36))])
        self.assertEqual([lane["numa"] for lane in plan["lanes"]], [0, 1])
        self.assertEqual(plan["env"]["OMP_NUM_THREADS"], "18")
        self.assertEqual(plan["env"]["TF_NUM_INTEROP_THREADS"], "2")

    def test_synthetic_description_and_cpuset(self):
        plan = show_json("--topology", "package:1 numa:1 core:16 pu:1", "--cpuset", "0-3,8-11",
                         "--interop", "2")
        self.assertEqual([lane["cpus"] for lane in plan["lanes"]], [[0, 1, 2, 3], [8, 9, 10, 11]])

    def test_plan_with_cpu_ids_past_1023(self):
        # 8 x 96 cores x 2 threads: ids 0-1535, past CPU_SETSIZE (1024). Every hardware thread in
        # 4 lanes: each lane's cpus are whole, distinct and as listed in TFPIN_CPUS.
        plan = show_json("--topology", "package:8 numa:1 core:96 pu:2", "--hyperthreads",
                         "--threads", "1536", "--interop", "4")
        lanes = [lane["cpus"] for lane in plan["lanes"]]
        self.assertEqual([len(l) for l in lanes], [384] * 4)
        every = sorted(c for l in lanes for c in l)
        self.assertEqual(every, list(range(1536)))
        self.assertEqual(plan["env"]["TFPIN_INTRA"], "384")
        self.assertIn("1535", plan["env"]["TFPIN_CPUS"])

    def test_text_output_names_lanes(self):
        proc = tfpin("show", "--topology", "package:2 numa:1 core:4 pu:1", "--interop", "2")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("lane 0    cpus 0-3  NUMA 0", proc.stdout)
        self.assertIn("OMP_NUM_THREADS=4", proc.stdout)

    def test_options_from_environment_command_line_wins(self):
        topo = ("--topology", "package:1 numa:1 core:8 pu:1")
        self.assertEqual(show_json(*topo, env={"TFPIN_THREADS": "4"})["threads"], 4)
        self.assertEqual(show_json(*topo, "--threads", "2", env={"TFPIN_THREADS": "4"})["threads"], 2)
        self.assertEqual(show_json(*topo, env={"TFPIN_INTEROP": "2"})["interop"], 2)


class Run(unittest.TestCase):
    def run_probe(self, *args, env=None):
        proc = tfpin("run", *args, "--", "sh", "-c", PROBE, env=env)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        return parse_probe(proc.stdout)

    def test_child_gets_what_show_predicted(self):
        for threads in sorted({1, len(os.sched_getaffinity(0))}):
            with self.subTest(threads=threads):
                plan = show_json("--threads", str(threads))
                status, env = self.run_probe("--threads", str(threads))
                predicted = [cpu for lane in plan["lanes"] for cpu in lane["cpus"]]
                self.assertEqual(sorted(cpulist(status["Cpus_allowed_list"])), sorted(predicted))
                for name, value in plan["env"].items():
                    self.assertEqual(env.get(name), value, name)

    def test_user_values_win_unless_enforced(self):
        _, env = self.run_probe("--threads", "1", env={"OMP_NUM_THREADS": "64"})
        self.assertEqual(env["OMP_NUM_THREADS"], "64")
        self.assertEqual(env["TFPIN_INTRA"], "1")
        self.assertNotIn("TFPIN_THREADS", env)
        _, env = self.run_probe("--threads", "1", "--enforce", env={"OMP_NUM_THREADS": "64"})
        self.assertEqual(env["OMP_NUM_THREADS"], "1")

    def test_exit_code_is_preserved(self):
        self.assertEqual(tfpin("run", "--", "sh", "-c", "exit 7").returncode, 7)
        self.assertEqual(tfpin("run", "true").returncode, 0)

    def test_program_arguments_are_not_parsed_as_tfpin_options(self):
        cases = [
            (["--", "echo", "--threads", "abc"], "--threads abc"),
            (["echo", "--threads", "abc"], "--threads abc"),
            (["echo", "A", "--", "B", "C"], "A -- B C"),
            (["--threads", "1", "--", "echo", "-v", "--", "x"], "-v -- x"),
            (["sh", "-c", 'echo "$@"', "sh", "--help"], "--help"),
            (["--threads", "1", "echo", "--threads", "2"], "--threads 2"),
        ]
        for args, printed in cases:
            with self.subTest(args=args):
                proc = tfpin("run", "--no-shim", *args)
                self.assertEqual(proc.returncode, 0, proc.stderr)
                self.assertEqual(proc.stdout.strip(), printed)

    def test_cpuset_cannot_widen_this_process(self):
        allowed = sorted(os.sched_getaffinity(0))
        proc = subprocess.run(["taskset", "-c", str(allowed[0]), TFPIN, "run", "--cpuset",
                               f"{allowed[0]},{max(allowed) + 1}", "--", "true"],
                              capture_output=True, text=True, timeout=60)
        self.assertEqual(proc.returncode, 2, proc.stderr)
        self.assertIn("outside this process's CPUs", proc.stderr)

    def test_nested_run_gets_its_own_plan(self):
        proc = tfpin("run", "--no-shim", "--interop", str(len(os.sched_getaffinity(0))), "--",
                     TFPIN, "run", "--no-shim", "--threads", "1", "--", "sh", "-c",
                     "echo $TFPIN_INTEROP $OMP_NUM_THREADS $TF_NUM_INTEROP_THREADS")
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.split(), ["1", "1", "1"])

    def test_shim_is_preloaded_unless_no_shim(self):
        import tempfile
        with tempfile.NamedTemporaryFile(suffix=".so") as shim:
            env = {"TFPIN_SHIM": shim.name, "LD_PRELOAD": "libuser.so"}
            proc = tfpin("run", "--", "printenv", "LD_PRELOAD", env=env)
            self.assertEqual(proc.stdout.strip(), f"{shim.name}:libuser.so", proc.stderr)
            proc = tfpin("run", "--no-shim", "--", "printenv", "LD_PRELOAD", env=env)
            self.assertEqual(proc.stdout.strip(), "libuser.so")
        proc = tfpin("run", "--", "true", env={"TFPIN_SHIM": "/nonexistent/shim.so"})
        self.assertEqual(proc.returncode, 0)
        self.assertIn("TFPIN_SHIM=/nonexistent/shim.so does not exist", proc.stderr)

    def test_memory_binding_chosen_before_tfpin_is_kept(self):
        # numactl's (or srun --mem-bind's) policy reaches the program: tfpin's plan only prefers
        # a node, it never needs to override a binding the user chose.
        policy = "head -n 1 /proc/self/numa_maps | cut -d' ' -f2"
        proc = subprocess.run(["numactl", "--membind=0", TFPIN, "run", "--verbose", "--threads",
                               "1", "--", "sh", "-c", policy], capture_output=True, text=True,
                              timeout=60)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertEqual(proc.stdout.strip(), "bind:0")
        self.assertIn("memory    bind:0, kept: set before tfpin", proc.stderr)
        proc = tfpin("run", "--threads", "1", "--", "sh", "-c", policy)
        self.assertEqual(proc.stdout.strip(), "default", proc.stderr)

    def test_missing_program_is_127(self):
        proc = tfpin("run", "--", "/nonexistent/program")
        self.assertEqual(proc.returncode, 127)
        self.assertIn("/nonexistent/program", proc.stderr)


class BadArguments(unittest.TestCase):
    CASES = [
        (["--threads", "abc"], "--threads=abc is not a whole number"),
        (["--threads", "0"], "--threads=0 is too small"),
        (["--threads=-1"], "--threads=-1 is not a whole number"),
        (["--threads", "99999999999"], "--threads=99999999999 is too large"),
        (["--interop", "3", "--threads", "8"], "--threads=8 is not a multiple of --interop=3"),
        (["--threads", "4096"], "--threads=4096 is more than the"),
        (["--cpuset", "0-x"], "--cpuset='0-x'"),
        (["--blocktime", "-1"], "--blocktime=-1 is not a whole number"),
        (["--threads", ""], "--threads needs a value"),
        (["--interop="], "--interop"),
        (["--cpuset", ""], "--cpuset is empty"),
    ]

    def test_run_refuses_with_exit_2_and_a_message(self):
        for args, message in self.CASES:
            with self.subTest(args=args):
                proc = tfpin("run", *args, "--", "true")
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(message, proc.stderr)

    def test_show_refuses_the_same_way(self):
        for args, message in self.CASES:
            with self.subTest(args=args):
                proc = tfpin("show", *args)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                self.assertIn(message, proc.stderr)

    def test_no_program(self):
        for args in (["run"], ["run", "--"], ["run", "--threads", "1"]):
            with self.subTest(args=args):
                proc = tfpin(*args)
                self.assertEqual(proc.returncode, 2)
                self.assertIn("program", proc.stderr)

    def test_empty_environment_request_is_refused(self):
        proc = tfpin("show", env={"TFPIN_THREADS": ""})
        self.assertEqual(proc.returncode, 2)
        self.assertIn("TFPIN_THREADS needs a value", proc.stderr)

    def test_show_runs_no_program(self):
        proc = tfpin("show", "--", "x")
        self.assertEqual(proc.returncode, 2)

    def test_unknown_option_and_subcommand(self):
        self.assertEqual(tfpin("show", "--bogus").returncode, 2)
        self.assertEqual(tfpin("frobnicate").returncode, 2)
        self.assertEqual(tfpin().returncode, 2)

    def test_bad_topology(self):
        # Another machine's description is the user's value: a bad one is a usage error.
        proc = tfpin("show", "--topology", "not a machine")
        self.assertEqual(proc.returncode, 2)
        self.assertIn("'not a machine'", proc.stderr)


# OpenMP and Intel OpenMP affinity settings job scripts carry (NERSC's guidance, the Intel guides).
# libgomp, which tfpin links through the engine, binds its initial thread at load time under the
# GNU ones; tfpin must still plan from every CPU it was given.
USER_AFFINITY_SETTINGS = [
    {"OMP_PROC_BIND": "spread"},
    {"OMP_PROC_BIND": "true"},
    {"OMP_PROC_BIND": "close", "OMP_PLACES": "cores"},
    {"OMP_PLACES": "threads"},
    {"OMP_PLACES": "cores"},
    {"OMP_PROC_BIND": "spread", "OMP_PLACES": "threads"},
    {"OMP_PLACES": "{0}"},
    {"GOMP_CPU_AFFINITY": "0"},
    {"KMP_AFFINITY": "compact"},
    {"KMP_AFFINITY": "granularity=fine,compact,1,0"},
]


def has_command(name):
    return tfpin(name, "--help").returncode == 0


class UsersOpenMpAffinity(unittest.TestCase):
    """Every command x every setting: the plan covers all the CPUs this process was given."""

    @classmethod
    def setUpClass(cls):
        cls.allowed = sorted(os.sched_getaffinity(0))
        cls.all = ",".join(map(str, cls.allowed))
        cls.engine = has_command("bench")
        cls.engine_refusal = onednn_unusable_reason(TFPIN) if cls.engine else ""

    def each_setting(self, check):
        if len(self.allowed) < 2:
            self.skipTest("needs 2 allowed CPUs to see a process collapse onto one")
        for setting in USER_AFFINITY_SETTINGS:
            with self.subTest(**setting):
                check(setting)

    def test_show_plans_every_allowed_cpu(self):
        def check(setting):
            plan = show_json(env=setting)
            self.assertEqual(cpulist(plan["allowed"]), self.allowed, plan)
        self.each_setting(check)

    def test_run_gives_the_program_every_allowed_cpu(self):
        def check(setting):
            proc = tfpin("run", "--threads", str(len(self.allowed)), "--", "sh", "-c", PROBE,
                         env=setting)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            status, env = parse_probe(proc.stdout)
            self.assertEqual(cpulist(status["Cpus_allowed_list"]), self.allowed, proc.stdout)
            # The user's own variables reach the program (theirs to set; tfpin does not fight them).
            for name, value in setting.items():
                self.assertEqual(env.get(name), value, proc.stdout)
        self.each_setting(check)

    def test_run_passes_the_plan_on_to_containers_the_program_starts(self):
        show = "env | grep -e ^APPTAINER -e ^SINGULARITY -e ^LD_PRELOAD= -e ^TFPIN_CPUS= | sort"
        runs = {}
        for runtime in ("apptainer", "singularity", "no", None):
            args = ["run", "--threads", "1"] + (["--containers", runtime] if runtime else [])
            proc = tfpin(*args, "--", "sh", "-c", show)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            runs[runtime] = dict(line.split("=", 1) for line in proc.stdout.splitlines())
        self.assertEqual(runs[None], runs["apptainer"])  # the default
        env = runs["apptainer"]
        shim = env["LD_PRELOAD"].split(":")[0]
        self.assertTrue(shim.endswith("/libtfpin-shim.so"), env)
        shim_dir = os.path.dirname(shim)
        self.assertEqual(env["APPTAINER_BINDPATH"], f"{shim_dir}:{shim_dir}:ro")
        self.assertEqual(env["APPTAINERENV_LD_PRELOAD"], env["LD_PRELOAD"])
        self.assertEqual(env["APPTAINERENV_TFPIN_CPUS"], env["TFPIN_CPUS"])
        ce = runs["singularity"]
        self.assertEqual(ce["SINGULARITY_BINDPATH"], f"{shim_dir}:{shim_dir}:ro")
        self.assertEqual(ce["SINGULARITYENV_TFPIN_CPUS"], ce["TFPIN_CPUS"])
        self.assertFalse([k for k in ce if k.startswith("APPTAINER")], ce)
        self.assertEqual(sorted(runs["no"]), ["LD_PRELOAD", "TFPIN_CPUS"])

    def test_bench_runs_on_every_allowed_cpu(self):
        if not self.engine:
            self.skipTest("built without the engine")
        if self.engine_refusal:
            self.skipTest(self.engine_refusal)

        def check(setting):
            proc = tfpin("bench", "--model", "alexnet", "--batch_size", "1", "--num_batches", "1",
                         "--num_warmup_batches", "0", "--forward_only", "--json", env=setting)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            report = json.loads(proc.stdout.strip().splitlines()[-1])
            self.assertEqual(report["interop"] * report["intra"], len(self.allowed), report)
            self.assertEqual(cpulist(report["cpus_allowed"]), self.allowed, report)
        self.each_setting(check)

    def test_tune_sweeps_every_allowed_cpu(self):
        if not self.engine:
            self.skipTest("built without the engine")

        def check(setting):
            proc = tfpin("tune", "--model", "alexnet", "--forward_only", "--dry-run", "--json",
                         env=setting)
            self.assertEqual(proc.returncode, 0, proc.stderr)
            sweep = json.loads(proc.stdout)
            self.assertEqual(cpulist(sweep["allowed"]), self.allowed, sweep["allowed"])
            self.assertEqual(max(c["threads"] for c in sweep["configurations"]),
                             len(self.allowed), sweep["configurations"])
        self.each_setting(check)


class HostileValues(unittest.TestCase):
    def test_json_with_a_file_name_that_is_not_utf8(self):
        import shutil
        import tempfile
        with tempfile.TemporaryDirectory() as tmp:
            name = os.path.join(tmp, os.fsdecode(b"skylake-\xff.xml"))  # raw byte 0xff on the command line
            shutil.copy(os.path.join(FIXTURES, "skylake-2x20.xml"), name)
            proc = tfpin("show", "--json", "--topology", name, "--threads", "2")
            self.assertEqual(proc.returncode, 0, proc.stderr)
            self.assertIn("\ufffd", json.loads(proc.stdout)["topology"]["source"])

    def test_huge_list_is_refused_in_a_short_line(self):
        huge = "0-4095," * 14000  # 98 KB
        proc = tfpin("show", "--cpuset", huge)
        self.assertEqual(proc.returncode, 2, proc.stderr[:300])
        self.assertLess(len(proc.stderr), 400, proc.stderr[:400])
        self.assertIn("(98000 bytes)", proc.stderr)

    def test_control_characters_are_escaped(self):
        proc = tfpin("show", "--threads", "2\ntfpin: forged")
        self.assertEqual(proc.returncode, 2)
        self.assertEqual(len(proc.stderr.strip().splitlines()), 1, proc.stderr)
        self.assertIn("2\\ntfpin: forged", proc.stderr)


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
