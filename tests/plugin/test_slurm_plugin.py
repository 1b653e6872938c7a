#!/usr/bin/python3
"""tfpin.so under a real Slurm: private munge + slurmctld + slurmd on loopback (tests/slurm harness),
real sbatch/srun, each task's affinity and environment read back from /proc and env."""
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "slurm"))
from slurm_cluster import LocalSlurm as HarnessSlurm  # noqa: E402
from slurm_cluster import announce_cgroup_mode, missing_binaries  # noqa: E402

# TFPIN_SLURM_CGROUP=1 (meson's slurm-plugin-cgroup): every cluster runs as production sites do,
# task/cgroup + task/affinity, proctrack/cgroup, ConstrainCores=yes.
CGROUP = os.environ.get("TFPIN_SLURM_CGROUP") == "1"


def LocalSlurm(**kwargs):  # noqa: N802 (the harness's class, in this run's containment mode)
    return HarnessSlurm(cgroup=CGROUP, **kwargs)

PLUGIN = os.environ.get("TFPIN_PLUGIN", str(HERE.parents[1] / "build" / "plugin" / "tfpin.so"))
SHIM = os.environ.get("TFPIN_SHIM", "")
SHIM_PROBE = os.environ.get("SHIM_PROBE", "")

# Printed by every probe task: one line per fact, prefixed with the task's rank and node.
PROBE = ("echo \"rank=${SLURM_PROCID:-batch} node=${SLURMD_NODENAME}"
         " cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)"
         " TFPIN_CPUS=${TFPIN_CPUS-unset} OMP_NUM_THREADS=${OMP_NUM_THREADS-unset}"
         " TF_NUM_INTEROP_THREADS=${TF_NUM_INTEROP_THREADS-unset}"
         " TF_NUM_INTRAOP_THREADS=${TF_NUM_INTRAOP_THREADS-unset} KMP_AFFINITY=${KMP_AFFINITY-unset}"
         " LD_PRELOAD=${LD_PRELOAD-unset}\"")


def cpus_allowed(cpulist):
    """Expands a kernel cpulist ("0-2,5") into sorted CPU numbers."""
    cpus = []
    for item in cpulist.split(","):
        lo, _, hi = item.partition("-")
        cpus.extend(range(int(lo), int(hi or lo) + 1))
    return sorted(cpus)


def probes(text):
    """Parses PROBE lines into dicts."""
    found = []
    for line in text.splitlines():
        if line.startswith("rank="):
            found.append(dict(item.split("=", 1) for item in line.split()))
    return found


def plugstack(*keys, kind="required"):
    line = f"{kind} {PLUGIN}"
    if SHIM:
        keys = (f"shim_path={SHIM}",) + keys
    return [" ".join((line,) + keys)]


def header_declares_failure_mode():
    """Slurm >= 25.05: spank.h declares slurm_spank_init_failure_mode, and the plugin sets it."""
    with open("/usr/include/slurm/spank.h") as header:
        return "slurm_spank_init_failure_mode" in header.read()


def client_conf(cluster, lines):
    """SLURM_CONF for commands that read their own plugstack (LINES) while the daemons keep the
    cluster's: a site whose login nodes and compute nodes disagree."""
    d = cluster.tmpdir
    (d / "client-plugstack.conf").write_text("".join(line + "\n" for line in lines))
    text = re.sub(r"^PlugStackConfig=.*$", f"PlugStackConfig={d}/client-plugstack.conf",
                  (d / "slurm.conf").read_text(), flags=re.M)
    (d / "client-slurm.conf").write_text(text)
    return {"SLURM_CONF": str(d / "client-slurm.conf")}


def job_count(cluster):
    r = cluster.run(["squeue", "-h", "-t", "all", "-o", "%i"])
    return len(r.stdout.split())


class ClusterTest(unittest.TestCase):
    """One single-node Slurm with the plugin, configured with SITE_KEYS, for all tests of a class."""
    SITE_KEYS = ()

    @classmethod
    def setUpClass(cls):
        cls.cluster = LocalSlurm(nodes=1, cpus_per_node=2,
                                 plugstack_lines=plugstack(*cls.SITE_KEYS)).start()

    @classmethod
    def tearDownClass(cls):
        cls.cluster.stop()


@unittest.skipIf(missing_binaries(), f"Slurm/munge binaries missing: {missing_binaries()}")
class OnRequest(ClusterTest):
    """Site defaults: activation on request, strict enforcement."""

    def run_batch(self, script, extra_args=None, env_extra=None):
        jobid, r = self.cluster.sbatch(script, extra_args, env_extra=env_extra)
        self.assertIsNotNone(jobid, f"sbatch refused: {r.stderr}")
        state = self.cluster.wait_job(jobid)
        return state, self.cluster.job_stdout(jobid)

    def test_options_show_in_sbatch_help(self):
        r = self.cluster.run(["sbatch", "--help"])
        for option in ("--tf-threads=N", "--tf-interop=M", "--tf-verbose", "--tf-off",
                       "--tf-hyperthreads"):
            self.assertIn(option, r.stdout)

    def test_batch_step_and_inner_steps_get_their_plans(self):
        state, out = self.run_batch(
            "#!/bin/sh\n#SBATCH -c 2\n#SBATCH --tf-threads=2\n#SBATCH --tf-interop=2\n"
            f"{PROBE}\n"
            f"srun -n 1 -c 2 sh -c '{PROBE}'\n"
            f"srun -n 1 -c 1 --tf-threads=1 --tf-interop=1 sh -c '{PROBE}'\n")
        print(out)
        self.assertEqual(state, "COMPLETED", out)
        batch, inherited, narrowed = probes(out)
        for task in (batch, inherited):
            self.assertEqual(cpus_allowed(task["cpus"]), [0, 1])
            self.assertEqual(sorted(map(int, task["TFPIN_CPUS"].split(","))), [0, 1])
            self.assertEqual(task["OMP_NUM_THREADS"], "1")
            self.assertEqual(task["TF_NUM_INTEROP_THREADS"], "2")
            self.assertEqual(task["TF_NUM_INTRAOP_THREADS"], "1")
            self.assertEqual(task["KMP_AFFINITY"], "none")
        self.assertEqual(len(cpus_allowed(narrowed["cpus"])), 1)
        self.assertEqual(narrowed["TFPIN_CPUS"], narrowed["cpus"])
        self.assertEqual(narrowed["OMP_NUM_THREADS"], "1")
        self.assertEqual(narrowed["TF_NUM_INTEROP_THREADS"], "1")

    def test_srun_tasks_get_disjoint_cores(self):
        r = self.cluster.srun(["-n", "2", "-c", "1", "--tf-threads=1", "sh", "-c", PROBE])
        self.assertEqual(r.returncode, 0, r.stderr)
        tasks = probes(r.stdout)
        self.assertEqual(len(tasks), 2, r.stdout)
        cores = [cpus_allowed(t["cpus"]) for t in tasks]
        self.assertEqual(sorted(c for cs in cores for c in cs), [0, 1])
        for task in tasks:
            self.assertEqual(task["TFPIN_CPUS"], task["cpus"])
            self.assertEqual(task["OMP_NUM_THREADS"], "1")

    def test_containers_started_by_the_task_get_the_shim_bound_and_the_plan(self):
        # What `apptainer exec` reads in the task: the bind of the shim's directory and the plan
        # as APPTAINERENV_*. A --tf-off step inside takes back what tfpin added, keeps the user's.
        show = ("env | grep -e ^APPTAINER -e ^SINGULARITY | sort; echo OMP=$OMP_NUM_THREADS "
                "CPUS=$TFPIN_CPUS PRELOAD=$LD_PRELOAD; echo ---")
        state, out = self.run_batch(
            "#!/bin/sh\n#SBATCH -c 2\n#SBATCH --tf-threads=2\n#SBATCH --tf-interop=2\n"
            "export APPTAINER_BINDPATH=/scratch APPTAINERENV_MKL_NUM_THREADS=5\n"
            f"srun -n 1 -c 2 sh -c '{show}'\n"
            f"srun -n 1 -c 2 --tf-off sh -c '{show}'\n")
        self.assertEqual(state, "COMPLETED", out)
        planned, off = [dict(line.split("=", 1) for line in block.split() if "=" in line)
                        for block in out.split("---")[:2]]
        shim = planned["PRELOAD"].split(":")[0]
        self.assertTrue(shim.endswith("/libtfpin-shim.so"), planned)
        shim_dir = os.path.dirname(shim)
        self.assertEqual(planned["APPTAINER_BINDPATH"], f"/scratch,{shim_dir}:{shim_dir}:ro")
        self.assertEqual(planned["APPTAINERENV_LD_PRELOAD"], planned["PRELOAD"])
        self.assertEqual(planned["APPTAINERENV_OMP_NUM_THREADS"], planned["OMP"])
        self.assertEqual(planned["APPTAINERENV_TFPIN_CPUS"], planned["CPUS"])
        self.assertEqual(planned["APPTAINERENV_TF_NUM_INTEROP_THREADS"], "2")
        self.assertEqual(planned["APPTAINERENV_MKL_NUM_THREADS"], "5")  # the user's
        self.assertFalse([k for k in planned if k.startswith("SINGULARITY")], planned)
        self.assertEqual(off, {"APPTAINER_BINDPATH": "/scratch", "APPTAINERENV_MKL_NUM_THREADS": "5",
                               "OMP": "", "CPUS": "", "PRELOAD": ""})

    def test_environment_form_and_command_line_precedence(self):
        r = self.cluster.srun(["-c", "2", "sh", "-c", PROBE], env_extra={"TFPIN_THREADS": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(probes(r.stdout)[0]["OMP_NUM_THREADS"], "1")
        r = self.cluster.srun(["-c", "2", "--tf-threads=2", "sh", "-c", PROBE],
                              env_extra={"TFPIN_THREADS": "1"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(probes(r.stdout)[0]["OMP_NUM_THREADS"], "2")

    def test_bad_values_are_refused_at_submit_and_nothing_is_queued(self):
        cases = [
            (["--tf-threads=abc"], "--tf-threads=abc is not a whole number"),
            (["--tf-threads=0"], "--tf-threads=0 is too small"),
            (["--tf-threads=-3"], "--tf-threads=-3 is not a whole number"),
            (["--tf-threads=99999999999"], "--tf-threads=99999999999 is too large"),
            (["--tf-threads=3", "--tf-interop=2"], "--tf-threads=3 is not a multiple of --tf-interop=2"),
            (["--tf-threads="], "--tf-threads needs a value"),
            (["--tf-interop=x"], "--tf-interop=x is not a whole number"),
        ]
        before = job_count(self.cluster)
        for args, message in cases:
            with self.subTest(args=args):
                jobid, r = self.cluster.sbatch("#!/bin/sh\ntrue\n", args)
                self.assertIsNone(jobid)
                self.assertNotEqual(r.returncode, 0)
                self.assertIn(message, r.stderr)
                r = self.cluster.srun(args + ["true"])
                self.assertNotEqual(r.returncode, 0)
                self.assertIn(message, r.stderr)
        # The same through #SBATCH lines.
        jobid, r = self.cluster.sbatch("#!/bin/sh\n#SBATCH --tf-threads=3\n#SBATCH --tf-interop=2\ntrue\n")
        self.assertIsNone(jobid)
        self.assertIn("--tf-threads=3 is not a multiple of --tf-interop=2", r.stderr)
        self.assertEqual(job_count(self.cluster), before, "a refused job was queued")

    def test_bad_value_carried_to_the_batch_step_fails_it(self):
        # Slurm hands the step its options as _SLURM_SPANK_OPTION_* variables; one the user set
        # by hand is never seen by sbatch. slurmstepd only logs a refused value (echoing it raw)
        # and would run the job with another plan: the plugin fails the task instead.
        for value, shown in (("abc", "abc"), ("2\ntfpin: forged", "2\\ntfpin: forged")):
            with self.subTest(value=value):
                jobid, r = self.cluster.sbatch(
                    f"#!/bin/sh\n{PROBE}\n", ["-c", "2", "--tf-interop=2"],
                    env_extra={"_SLURM_SPANK_OPTION_tfpin_tf_threads": value})
                self.assertIsNotNone(jobid, f"sbatch refused: {r.stderr}")
                state = self.cluster.wait_job(jobid)
                out = self.cluster.job_stdout(jobid)
                self.assertEqual(state, "FAILED", out)
                self.assertEqual(probes(out), [], "the batch script ran")
                message = f"--tf-threads={shown} is not a whole number: expected a whole number"
                self.assertIn(f"tfpin: job {jobid} step batch task 0: {message}", out)
                log = self.cluster.slurmd_log()
                self.assertEqual(log.count(message), 1, log)
                self.assertNotIn("failed to process option", log)
                self.assertFalse(re.search(r"^tfpin: forged", log, re.MULTILINE), log)

    def test_steps_without_tfpin_inside_a_tfpind_batch_job_get_no_plan(self):
        state, out = self.run_batch(
            "#!/bin/sh\n#SBATCH -c 2\n#SBATCH --tf-threads=2\n"
            f"srun -n 1 -c 1 --tf-off sh -c '{PROBE}'\n")
        self.assertEqual(state, "COMPLETED", out)
        task = probes(out)[0]
        self.assertEqual(len(cpus_allowed(task["cpus"])), 1)
        self.assertEqual(task["TFPIN_CPUS"], "unset")
        self.assertEqual(task["OMP_NUM_THREADS"], "unset")
        self.assertNotIn("libtfpin-shim", task["LD_PRELOAD"])

    def test_handed_over_interop_is_not_a_request(self):
        # The environment of a tfpin'd task, without any --tf-* option: nothing is requested.
        env = {"TFPIN_INTEROP": "2", "TFPIN_CPUS": "0,1", "TFPIN_INTRA": "1",
               "TFPIN_ENV": "TFPIN_INTEROP=2;TFPIN_CPUS=0,1;TFPIN_INTRA=1;OMP_NUM_THREADS=1",
               "OMP_NUM_THREADS": "1"}
        r = self.cluster.srun(["-c", "1", "sh", "-c", PROBE], env_extra=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        task = probes(r.stdout)[0]
        self.assertEqual(task["TFPIN_CPUS"], "unset")
        self.assertEqual(task["OMP_NUM_THREADS"], "unset")

    def test_slurm_memory_binding_is_kept(self):
        # task/affinity applies --mem-bind before the plugin's task_init; tfpin's plan (first touch
        # on this one-node machine) must not reset it.
        policy = "head -n 1 /proc/self/numa_maps | cut -d' ' -f2"
        for tfpin_args, expected in (([], "bind:0"), (["--tf-threads=2"], "bind:0")):
            with self.subTest(tfpin_args=tfpin_args):
                r = self.cluster.srun(["-c", "2", "--mem-bind=map_mem:0", *tfpin_args,
                                       "sh", "-c", policy])
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(r.stdout.strip(), expected, r.stderr)
        r = self.cluster.srun(["-c", "2", "--tf-threads=2", "sh", "-c", policy])
        self.assertEqual(r.stdout.strip(), "default", r.stderr)

    def test_more_threads_than_allocated_fails_the_task(self):
        r = self.cluster.srun(["-c", "1", "--tf-threads=2", "true"])
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("--tf-threads=2 is more than the 1 cores allowed", r.stderr)

    def test_job_without_options_is_untouched(self):
        r = self.cluster.srun(["-c", "2", "sh", "-c", PROBE])
        self.assertEqual(r.returncode, 0, r.stderr)
        task = probes(r.stdout)[0]
        self.assertEqual(task["TFPIN_CPUS"], "unset")
        self.assertEqual(task["OMP_NUM_THREADS"], "unset")

    def test_verbose_prints_the_plan(self):
        r = self.cluster.srun(["-c", "2", "--tf-interop=2", "--tf-verbose", "true"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("2 threads = 2 inter-op lane(s) x 1 intra-op thread(s)", r.stderr)
        self.assertIn("lane 1", r.stderr)

    def test_user_values_win(self):
        r = self.cluster.srun(["-c", "2", "--tf-threads=2", "sh", "-c", PROBE],
                              env_extra={"OMP_NUM_THREADS": "7"})
        self.assertEqual(probes(r.stdout)[0]["OMP_NUM_THREADS"], "7")


@unittest.skipIf(missing_binaries(), f"Slurm/munge binaries missing: {missing_binaries()}")
class AlwaysAndClamp(ClusterTest):
    SITE_KEYS = ("activation=always", "enforcement=clamp", "override_env=yes", "interop=2",
                 "blocktime=0")

    def test_site_default_interop_adapts_to_small_tasks(self):
        r = self.cluster.srun(["-c", "1", "sh", "-c", PROBE])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(probes(r.stdout)[0]["TF_NUM_INTEROP_THREADS"], "1")
        r = self.cluster.srun(["-c", "2", "sh", "-c", PROBE])
        self.assertEqual(probes(r.stdout)[0]["TF_NUM_INTEROP_THREADS"], "2")
        r = self.cluster.srun(["-c", "2", "--tf-threads=1", "sh", "-c", PROBE])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(probes(r.stdout)[0]["TF_NUM_INTEROP_THREADS"], "1")

    def test_job_without_options_is_configured(self):
        r = self.cluster.srun(["-c", "2", "sh", "-c", PROBE + "; echo KMP_BLOCKTIME=$KMP_BLOCKTIME"])
        self.assertEqual(r.returncode, 0, r.stderr)
        task = probes(r.stdout)[0]
        self.assertEqual(sorted(map(int, task["TFPIN_CPUS"].split(","))), [0, 1])
        self.assertEqual(task["OMP_NUM_THREADS"], "1")  # site interop=2: 2 lanes of 1
        self.assertEqual(task["TF_NUM_INTEROP_THREADS"], "2")
        self.assertIn("KMP_BLOCKTIME=0", r.stdout)

    def test_tf_off_leaves_the_job_alone(self):
        r = self.cluster.srun(["-c", "2", "--tf-off", "sh", "-c", PROBE])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(probes(r.stdout)[0]["TFPIN_CPUS"], "unset")

    def test_oversized_request_runs_clamped_with_a_warning(self):
        r = self.cluster.srun(["-c", "1", "--tf-threads=2", "sh", "-c", PROBE])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--tf-threads=2 is more than the 1 cores allowed; using 1", r.stderr)
        task = probes(r.stdout)[0]
        self.assertEqual(task["OMP_NUM_THREADS"], "1")
        self.assertEqual(task["TFPIN_CPUS"], task["cpus"])

    def test_site_enforces_over_user_values(self):
        r = self.cluster.srun(["-c", "2", "sh", "-c", PROBE], env_extra={"OMP_NUM_THREADS": "7"})
        self.assertEqual(probes(r.stdout)[0]["OMP_NUM_THREADS"], "1")


@unittest.skipIf(missing_binaries(), f"Slurm/munge binaries missing: {missing_binaries()}")
class MultiNode(unittest.TestCase):
    def test_every_task_on_every_node_gets_its_plan(self):
        with LocalSlurm(nodes=2, cpus_per_node=1, plugstack_lines=plugstack()) as cluster:
            r = cluster.srun(["-N", "2", "-n", "2", "--tf-threads=1", "sh", "-c", PROBE])
            self.assertEqual(r.returncode, 0, r.stderr + cluster.diagnostics())
            tasks = probes(r.stdout)
            self.assertEqual(sorted(t["node"] for t in tasks), ["n1", "n2"])
            for task in tasks:
                self.assertEqual(task["TFPIN_CPUS"], task["cpus"])
                self.assertEqual(task["OMP_NUM_THREADS"], "1")
            jobid, r = cluster.sbatch("#!/bin/sh\n#SBATCH -N 2\n#SBATCH --tf-threads=1\n"
                                      f"{PROBE}\nsrun -N 2 -n 2 sh -c '{PROBE}'\n")
            self.assertIsNotNone(jobid, r.stderr)
            self.assertEqual(cluster.wait_job(jobid), "COMPLETED")
            tasks = probes(cluster.job_stdout(jobid))
            self.assertEqual(len(tasks), 3, tasks)
            for task in tasks:
                self.assertEqual(task["OMP_NUM_THREADS"], "1")
                self.assertNotEqual(task["TFPIN_CPUS"], "unset")


@unittest.skipIf(missing_binaries(), f"Slurm/munge binaries missing: {missing_binaries()}")
class TopologyCache(unittest.TestCase):
    """The node's topology cache (site key topology_cache): the first planned step writes it, root's
    and 0644; a damaged or foreign file gets one warning in slurmd's log, the same plans and a
    rewrite; a job that does not ask for tfpin never touches it."""

    def test_steps_write_read_and_repair_the_nodes_cache(self):
        # Not under /tmp: every directory on the way to the cache must be writable by root only.
        with tempfile.TemporaryDirectory(dir="/run") as tmp:
            os.chmod(tmp, 0o755)
            cache = Path(tmp, "cache")
            path = cache / "topology.cache"
            lines = plugstack(f"topology_cache={cache}")
            with LocalSlurm(nodes=1, cpus_per_node=2, plugstack_lines=lines) as cluster:
                r = cluster.srun(["-c", "2", "true"])
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertFalse(cache.exists())
                step = ["-c", "2", "--tf-threads=2", "--tf-interop=2", "sh", "-c", PROBE]
                r = cluster.srun(step)
                self.assertEqual(r.returncode, 0, r.stderr)
                plan = probes(r.stdout)[0]["TFPIN_CPUS"]
                self.assertEqual(sorted(map(int, plan.split(","))), [0, 1])
                self.assertEqual((path.stat().st_uid, path.stat().st_mode & 0o7777), (0, 0o644))
                self.assertEqual(cache.stat().st_mode & 0o7777, 0o755)
                self.assertTrue(path.read_text().startswith("tfpin-topology-cache 1\n"))
                for damage, why in ((lambda: path.write_text("garbage\n"),
                                     "truncated (no checksum line)"),
                                    (lambda: os.chown(path, 65534, 65534),
                                     "the file is owned by uid 65534, not 0")):
                    damage()
                    r = cluster.srun(step)
                    self.assertEqual(r.returncode, 0, r.stderr)
                    self.assertEqual(probes(r.stdout)[0]["TFPIN_CPUS"], plan)
                    self.assertEqual(cluster.slurmd_log().count(why + "; ignored and rewritten"), 1,
                                     cluster.slurmd_log())
                    self.assertEqual(path.stat().st_uid, 0)
                r = cluster.srun(step)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(probes(r.stdout)[0]["TFPIN_CPUS"], plan)
                self.assertEqual(cluster.slurmd_log().count("topology cache"), 2)


@unittest.skipIf(missing_binaries(), f"Slurm/munge binaries missing: {missing_binaries()}")
class BadSiteConfig(unittest.TestCase):
    def test_unknown_key_is_a_clear_error_and_nothing_crashes(self):
        with LocalSlurm(nodes=1, cpus_per_node=2, plugstack_lines=plugstack("bogus=1")) as cluster:
            r = cluster.srun(["true"])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("plugstack.conf: unknown key 'bogus'", r.stderr)
            r = cluster.run(["sbatch", "--wrap", "true"])
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("unknown key 'bogus'", r.stderr)
            # The daemons are still up and the node still takes work from Slurm itself.
            self.assertEqual(set(cluster.node_states().values()), {"idle"})
            log = cluster.slurmctld_log() + cluster.slurmd_log("n1")
            self.assertNotIn("Segmentation", log)

    def test_failing_init_on_the_compute_node_fails_the_job(self):
        """Only slurmstepd sees the bad key: srun and sbatch read a good plugstack. Slurm >= 25.05
        lets a plugin choose what its failing slurm_spank_init does; tfpin fails the job and leaves
        the node in service. Older Slurm drains the node when a batch step's init fails."""
        with LocalSlurm(nodes=1, cpus_per_node=2, plugstack_lines=plugstack("bogus=1")) as cluster:
            good = client_conf(cluster, plugstack())
            r = cluster.srun(["--tf-threads=1", "true"], env_extra=good)
            # ("Plugin initialization failed" before 25.05; "Spank plugin failure, job failed" with
            # the job failure mode)
            self.assertIn("launch failed", r.stderr)
            self.assertIn("unknown key 'bogus'", cluster.slurmd_log("n1"))
            if header_declares_failure_mode():
                self.assertNotEqual(r.returncode, 0, r.stderr)
            # (Slurm 22.05's srun exits 0 here.)
            # Two batch jobs: the second runs only if the first left the node in service.
            for _ in range(2):
                jobid, r = cluster.sbatch("#!/bin/sh\ntrue\n", ["--tf-threads=1"], env_extra=good)
                self.assertIsNotNone(jobid, f"sbatch refused: {r.stderr}")
                if not header_declares_failure_mode():
                    # (The job then reads COMPLETED on 22.05 and is requeued, PENDING, on 24.11.)
                    deadline = time.monotonic() + 30
                    while not cluster.node_states().get("n1", "").startswith("drain"):
                        self.assertLess(time.monotonic(), deadline, cluster.node_states())
                        time.sleep(0.25)
                    cluster.run(["scancel", jobid])
                    return
                self.assertEqual(cluster.wait_job(jobid), "FAILED")
            self.assertEqual(set(cluster.node_states().values()), {"idle"})
            self.assertNotIn("Segmentation", cluster.slurmd_log("n1"))


@unittest.skipIf(missing_binaries(), f"Slurm/munge binaries missing: {missing_binaries()}")
class OptionalWithBadSiteConfig(unittest.TestCase):
    def test_jobs_run_without_tfpin_with_one_warning(self):
        lines = plugstack("bogus=1", kind="optional")
        with LocalSlurm(nodes=1, cpus_per_node=2, plugstack_lines=lines) as cluster:
            warning = "plugstack.conf: unknown key 'bogus'"
            jobid, r = cluster.sbatch(f"#!/bin/sh\n{PROBE}\n", ["-c", "2", "--tf-threads=2"])
            self.assertIsNotNone(jobid, f"sbatch refused: {r.stderr}")
            self.assertEqual(r.stderr.count("tfpin:"), 1, r.stderr)
            self.assertIn(warning, r.stderr)
            self.assertIn("tfpin is inactive until this is fixed", r.stderr)
            self.assertEqual(cluster.wait_job(jobid), "COMPLETED")
            task = probes(cluster.job_stdout(jobid))[0]
            self.assertEqual(task["TFPIN_CPUS"], "unset")
            self.assertEqual(task["OMP_NUM_THREADS"], "unset")
            # The batch step's slurmstepd says it once, in slurmd's log.
            self.assertEqual(cluster.slurmd_log().count(warning), 1)
            r = cluster.srun(["-c", "2", "--tf-threads=2", "sh", "-c", PROBE])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr.count("tfpin:"), 1, r.stderr)
            self.assertEqual(probes(r.stdout)[0]["TFPIN_CPUS"], "unset")


@unittest.skipIf(missing_binaries() or not (SHIM and SHIM_PROBE), "needs Slurm, the shim and its probe")
class ShimUnderSlurm(ClusterTest):
    """The shim's probes as Slurm tasks: the plugin preloads the shim, the shim enforces the plan."""

    def probe(self, *args):
        r = self.cluster.srun(list(args))
        self.assertEqual(r.returncode, 0, r.stderr)
        print(r.stdout)
        return json.loads(r.stdout.strip().splitlines()[-1])

    def test_openmp_team_is_capped_and_pinned(self):
        out = self.probe("-c", "2", "--tf-threads=2", SHIM_PROBE, "omp", "64")
        self.assertEqual(out["team"], 2)
        self.assertEqual(sorted(m["allowed"] for m in out["members"]), [[0], [1]])

    def test_lanes_run_on_disjoint_cores(self):
        out = self.probe("-c", "2", "--tf-threads=2", "--tf-interop=2", SHIM_PROBE, "interop", "5", "64")
        self.assertEqual(out["A"]["team_max"], 1)
        self.assertEqual(out["B"]["team_max"], 1)
        self.assertEqual(sorted(out["A"]["allowed_union"] + out["B"]["allowed_union"]), [0, 1])

    def test_cpu_count_is_the_plans(self):
        r = self.cluster.srun(["-c", "2", "--tf-threads=1", "/usr/bin/python3", "-c",
                               "import os; print(os.cpu_count(), len(os.sched_getaffinity(0)), "
                               "os.environ['LD_PRELOAD'])"])
        self.assertEqual(r.returncode, 0, r.stderr)
        count, affinity, preload = r.stdout.split()
        self.assertEqual((count, affinity), ("1", "1"))
        self.assertTrue(preload.startswith(SHIM), preload)

    def test_cpu_files_show_the_plan(self):
        # A task that counts CPUs from sysfs and /proc/cpuinfo (as libcpuinfo does) sees the plan.
        count = "cat /sys/devices/system/cpu/online; grep -c ^processor /proc/cpuinfo; echo $TFPIN_CPUS"
        r = self.cluster.srun(["-c", "2", "--tf-threads=1", "sh", "-c", count])
        self.assertEqual(r.returncode, 0, r.stderr)
        online, processors, plan = r.stdout.split()
        self.assertEqual((online, processors), (plan, "1"))
        r = self.cluster.srun(["-c", "2", "sh", "-c", count])  # no tfpin: the machine's
        self.assertEqual(r.stdout.split()[:2], ["0-1", "2"])


def own_cgroup_cpus():
    """Shell: the cpuset of the task's own cgroup, v1 or v2."""
    return ("p=$(sed -n 's/^[0-9]*:cpuset:\\(.*\\)/\\1/p' /proc/self/cgroup); "
            "if [ -n \"$p\" ]; then cat /sys/fs/cgroup/cpuset$p/cpuset.cpus; "
            "else p=$(sed -n 's/^0::\\(.*\\)/\\1/p' /proc/self/cgroup); "
            "cat /sys/fs/cgroup$p/cpuset.cpus.effective; fi")


# Only in cgroup mode (slurm-plugin-cgroup): defined there alone, so that the default run (and the
# RPM test, which wants no skip) has nothing to skip.
if CGROUP:
    @unittest.skipIf(missing_binaries(), f"Slurm/munge binaries missing: {missing_binaries()}")
    class CgroupContainment(ClusterTest):
        def test_each_task_pinned_inside_its_steps_cgroup(self):
            # Two tasks of one core each: the step's cgroup holds both cores (ConstrainCores), each
            # task is pinned to its own, and the plan covers the task's core only.
            r = self.cluster.srun(["-n", "2", "-c", "1", "--tf-threads=1", "sh", "-c",
                                   PROBE + "; echo cgroup=$(" + own_cgroup_cpus() + ")"])
            self.assertEqual(r.returncode, 0, r.stderr)
            found = probes(r.stdout)
            self.assertEqual(len(found), 2, r.stdout)
            groups = re.findall(r"^cgroup=(\S+)$", r.stdout, re.M)
            self.assertEqual(len(groups), 2, r.stdout)
            for task, group in zip(sorted(found, key=lambda t: t["rank"]), groups):
                self.assertEqual(len(cpus_allowed(task["cpus"])), 1, task)
                self.assertEqual(cpus_allowed(task["TFPIN_CPUS"]), cpus_allowed(task["cpus"]), task)
            # What a runtime reading its cgroup's cpuset would see: the whole step's CPUs, not the
            # task's (none of OpenMP, oneDNN, TensorFlow or PyTorch sizes its pools from it; they
            # use the affinity mask, which the plan matches).
            all_cpus = sorted(c for t in found for c in cpus_allowed(t["cpus"]))
            for group in groups:
                self.assertEqual(cpus_allowed(group), all_cpus, r.stdout)

        def test_the_kernel_holds_a_task_in_its_cgroup(self):
            # That the mode is real: without tfpin (no shim to clip it), taskset to both CPUs leaves
            # the task on its one core, the kernel intersecting with the cgroup's cpuset (under
            # task/affinity alone it would get both).
            r = self.cluster.srun(["-n", "1", "-c", "1", "--tf-off", "sh", "-c",
                                   "taskset -pc 0-1 $$ >/dev/null 2>&1; "
                                   "sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status"])
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(len(cpus_allowed(r.stdout.strip())), 1, r.stdout)


class Symbols(unittest.TestCase):
    def test_only_spank_symbols_are_exported(self):
        out = subprocess.run(["nm", "-D", "--defined-only", PLUGIN], capture_output=True, text=True,
                             check=True).stdout
        names = sorted(line.split()[-1] for line in out.splitlines() if line.strip())
        expected = ["plugin_name", "plugin_type", "plugin_version", "slurm_spank_init",
                    "slurm_spank_init_post_opt", "slurm_spank_task_init", "spank_plugin_version"]
        # Slurm >= 25.05 (spank.h declares it): the init failure mode too.
        if header_declares_failure_mode():
            expected.append("slurm_spank_init_failure_mode")
        self.assertEqual(names, sorted(expected))


if __name__ == "__main__":
    announce_cgroup_mode(CGROUP)
    result = unittest.main(verbosity=2, exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
