#!/usr/bin/python3
"""Smoke test of the private-Slurm harness itself (no tfpin plugin).

Run:  python3 tests/slurm/test_harness.py [-v]
Needs root and the Debian packages slurm-wlm/slurmctld/slurmd/slurm-client/munge;
skips only if the programs are missing.  TFPIN_KEEP_SLURM=1 keeps the cluster
directories (configs, logs, job output) for inspection.
"""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import slurm_cluster  # noqa: E402
from slurm_cluster import LocalSlurm, cpus_allowed  # noqa: E402

MISSING = slurm_cluster.missing_binaries()
SKIP_REASON = "Slurm/munge programs not installed: " + ", ".join(MISSING)
MPI_HELLO = os.environ.get("SLURM_MPI_HELLO", "")


def saw(test: unittest.TestCase, what: str, text: str) -> None:
    """Show what a test observed (stderr, so it is visible with meson too)."""
    body = textwrap.indent(text.rstrip() or "(empty)", "    ")
    print(f"\n[{test.id().split('.', 1)[-1]}] {what}:\n{body}", file=sys.stderr, flush=True)


def _daemon_pids(workdir: Path) -> list[int]:
    state = json.loads((workdir / slurm_cluster.STATE_FILE).read_text())
    return [d["pid"] for d in state["daemons"]]


def _assert_all_gone(test, pids, workdir, keep=False):
    """Nothing we started is still running; the dir is removed (unless kept)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        alive = [p for p in pids if slurm_cluster._alive(p, None)]
        marked = slurm_cluster._marked_pids(str(workdir))
        if not alive and not marked:
            break
        time.sleep(0.1)
    test.assertEqual(alive, [], f"daemons still running: {alive}")
    test.assertEqual(marked, [], f"marked leftovers still running: {marked}")
    if not keep:
        test.assertFalse(workdir.exists(), f"{workdir} not removed")


@unittest.skipIf(MISSING, SKIP_REASON)
class SingleNode(unittest.TestCase):
    """One slurmd with both host CPUs; task/affinity binding of batch and steps."""

    @classmethod
    def setUpClass(cls):
        t = time.monotonic()
        cls.c = cls.enterClassContext(LocalSlurm(nodes=1, cpus_per_node=2))
        cls.start_errors = cls.c.log_errors()
        print(f"\n[SingleNode] cluster up in {time.monotonic() - t:.1f}s at {cls.c.tmpdir}",
              file=sys.stderr)

    def test_config_accepted_without_errors(self):
        # Every error:/fatal: line of slurmctld and slurmd at start-up (known noise aside, see
        # KNOWN_LOG_NOISE) is a complaint about the generated slurm.conf.
        saw(self, "error:/fatal: lines at start-up", "\n".join(self.start_errors))
        self.assertEqual(self.start_errors, [], self.c.conf_path.read_text())

    def test_batch_and_inner_srun(self):
        c = self.c
        jobid, r = c.sbatch(textwrap.dedent("""\
            #!/bin/sh
            #SBATCH -c 2
            #SBATCH -o out-%j.txt
            #SBATCH -J harness-batch
            echo "BATCH $(grep Cpus_allowed_list /proc/self/status)"
            srun -n 1 -c 1 sh -c 'echo "STEP $(grep Cpus_allowed_list /proc/self/status)"'
            echo "NODE $SLURMD_NODENAME"
            """))
        self.assertIsNotNone(jobid, f"sbatch failed: {r.stderr}")
        state = c.wait_job(jobid, timeout=60)
        out = c.job_stdout(jobid)
        saw(self, f"job {jobid} {state}, out-{jobid}.txt", out)
        self.assertEqual(state, "COMPLETED", c.diagnostics())
        self.assertTrue((c.tmpdir / "jobs" / f"out-{jobid}.txt").exists())
        lines = {l.split()[0]: l for l in out.splitlines() if l.strip()}
        self.assertEqual(set(lines), {"BATCH", "STEP", "NODE"}, out)
        # the batch step gets the job's 2 CPUs, the 1-CPU step one of them
        self.assertEqual(cpus_allowed(lines["BATCH"]), [0, 1])
        step = cpus_allowed(lines["STEP"])
        self.assertEqual(len(step), 1, lines["STEP"])
        self.assertTrue(set(step) <= {0, 1})
        self.assertEqual(lines["NODE"], "NODE n1")

    def test_srun_two_tasks_disjoint(self):
        r = self.c.srun(["-n", "2", "-c", "1", "-l", "grep", "Cpus_allowed_list",
                         "/proc/self/status"])
        saw(self, "srun -n 2 -c 1", r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stderr)
        per_task = {}
        for line in r.stdout.splitlines():
            task, _, rest = line.partition(":")
            per_task[int(task)] = set(cpus_allowed(rest))
        self.assertEqual(sorted(per_task), [0, 1])
        self.assertEqual([len(s) for s in per_task.values()], [1, 1], per_task)
        self.assertTrue(per_task[0].isdisjoint(per_task[1]), per_task)
        self.assertEqual(per_task[0] | per_task[1], {0, 1})

    def test_env_and_logs(self):
        c = self.c
        self.assertEqual(c.env["SLURM_CONF"], str(c.tmpdir / "slurm.conf"))
        r = c.run(["scontrol", "show", "config"])
        conf = {l.split("=", 1)[0].strip(): l.split("=", 1)[1].strip()
                for l in r.stdout.splitlines() if " = " in l}
        picked = {k: conf.get(k) for k in ("TaskPlugin", "ProctrackType", "SelectType",
                                           "PlugStackConfig", "SlurmctldPort", "AuthInfo")}
        saw(self, "scontrol show config (selection)",
            "\n".join(f"{k} = {v}" for k, v in picked.items()))
        self.assertEqual(picked["TaskPlugin"], "task/affinity")
        self.assertEqual(picked["PlugStackConfig"], str(c.tmpdir / "plugstack.conf"))
        self.assertIn("slurmctld version", c.slurmctld_log())
        self.assertIn("slurmd started", c.slurmd_log("n1"))


@unittest.skipIf(MISSING, SKIP_REASON)
class TwoNodes(unittest.TestCase):
    """Two slurmd (n1, n2) on this host; each gets its own host CPU."""

    @classmethod
    def setUpClass(cls):
        t = time.monotonic()
        cls.c = cls.enterClassContext(LocalSlurm(nodes=2, cpus_per_node=1))
        cls.start_errors = cls.c.log_errors()
        print(f"\n[TwoNodes] cluster up in {time.monotonic() - t:.1f}s, split_cores="
              f"{cls.c.split_cores}, node_cpus={cls.c.node_cpus}", file=sys.stderr)

    def test_config_accepted_without_errors(self):
        # the split layout's node lines (CpuSpecList) too
        saw(self, "error:/fatal: lines at start-up", "\n".join(self.start_errors))
        self.assertEqual(self.start_errors, [], self.c.conf_path.read_text())

    def test_srun_on_both_nodes(self):
        r = self.c.srun(["-N", "2", "-n", "2", "-l", "sh", "-c",
                         'echo "$SLURMD_NODENAME $(hostname) '
                         '$(grep Cpus_allowed_list /proc/self/status)"'])
        saw(self, "srun -N 2", r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stderr)
        seen = {}
        for line in r.stdout.splitlines():
            _, _, rest = line.partition(": ")
            node, host = rest.split()[:2]
            self.assertEqual(host, self.c.hostname)
            seen[node] = cpus_allowed(rest)
        self.assertEqual(sorted(seen), ["n1", "n2"])
        # split_cores: each node's tasks are bound to that node's host CPU
        self.assertEqual(seen, self.c.node_cpus)

    def test_srun_hostname_and_nodename(self):
        r = self.c.srun(["-N", "2", "hostname"])
        saw(self, "srun -N 2 hostname", r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.split(), [self.c.hostname] * 2)
        r = self.c.srun(["-N", "2", "printenv", "SLURMD_NODENAME"])
        saw(self, "srun -N 2 printenv SLURMD_NODENAME", r.stdout + r.stderr)
        self.assertEqual(sorted(r.stdout.split()), ["n1", "n2"])

    def test_batch_two_nodes(self):
        c = self.c
        jobid, r = c.sbatch(textwrap.dedent("""\
            #!/bin/sh
            #SBATCH -N 2 -n 2
            echo "NODELIST $SLURM_JOB_NODELIST"
            srun -l printenv SLURMD_NODENAME
            """))
        self.assertIsNotNone(jobid, f"sbatch failed: {r.stderr}")
        state = c.wait_job(jobid, timeout=60)
        out = c.job_stdout(jobid)
        saw(self, f"job {jobid} {state}", out)
        self.assertEqual(state, "COMPLETED", c.diagnostics())
        self.assertIn("NODELIST n[1-2]", out)
        self.assertIn("0: n1", out)
        self.assertIn("1: n2", out)

    @unittest.skipUnless(MPI_HELLO, "no MPI program: Open MPI (libopenmpi-dev) was not found at build")
    def test_mpi_ranks_on_both_nodes(self):
        reason = slurm_cluster.mpi_missing()
        if reason:
            self.skipTest(reason)
        r = self.c.srun(["--mpi=pmix", "-N", "2", "-n", "2", MPI_HELLO],
                        env_extra=slurm_cluster.MPI_LOOPBACK_ENV, timeout=60)
        saw(self, "srun --mpi=pmix -N 2 -n 2", r.stdout + r.stderr)
        self.assertEqual(r.returncode, 0, r.stderr + self.c.diagnostics())
        ranks = sorted((dict(kv.split("=", 1) for kv in line.split()) for line in
                        r.stdout.splitlines() if line.startswith("rank=")),
                       key=lambda rank: rank["rank"])
        self.assertEqual([(x["rank"], x["size"], x["sum"]) for x in ranks],
                         [("0", "2", "3"), ("1", "2", "3")])
        self.assertEqual(sorted(x["node"] for x in ranks), ["n1", "n2"])
        # Each rank on its own node's CPUs (task/affinity), as the plugin will plan them.
        self.assertEqual({x["node"]: cpus_allowed("Cpus_allowed_list: " + x["cpus"]) for x in ranks},
                         self.c.node_cpus)

    def test_node_cannot_exceed_its_cpus(self):
        # n2 has 1 usable CPU: asking for 2 there must be refused, not overlap n1
        r = self.c.srun(["-N", "1", "-w", "n2", "-c", "2", "--immediate=5", "true"],
                        timeout=30)
        saw(self, "srun -w n2 -c 2", r.stdout + r.stderr)
        self.assertNotEqual(r.returncode, 0)


@unittest.skipIf(MISSING, SKIP_REASON)
class Lifecycle(unittest.TestCase):
    """Start/stop leaves nothing behind: exceptions, SIGTERM, CLI up/down."""

    def setUp(self):
        self.keep = os.environ.get("TFPIN_KEEP_SLURM") == "1"

    def test_exception_inside_with_stops_everything(self):
        with self.assertRaises(ZeroDivisionError):
            with LocalSlurm(nodes=1, cpus_per_node=1) as c:
                workdir = c.tmpdir
                pids = _daemon_pids(workdir)
                # a running job at shutdown: its step must be cleaned up too
                jobid, _ = c.sbatch("#!/bin/sh\nsleep 300\n")
                deadline = time.monotonic() + 20
                while c.job_info(jobid).get("JobState") != "RUNNING":
                    self.assertLess(time.monotonic(), deadline, "job never started")
                    time.sleep(0.2)
                1 / 0
        saw(self, "daemons after exit", f"pids {pids}: all gone, {workdir} removed")
        _assert_all_gone(self, pids, workdir, self.keep)

    def test_failed_start_reports_logs(self):
        # a required SPANK plugin that does not exist: slurmd refuses to start
        t = time.monotonic()
        c = LocalSlurm(plugstack_lines=["required /nonexistent/tfpin-missing.so"],
                       start_timeout=30, keep=False)
        with self.assertRaises(slurm_cluster.SlurmStartError) as cm:
            with c:
                self.fail("cluster should not come up")
        msg = str(cm.exception)
        saw(self, f"start error after {time.monotonic() - t:.1f}s (excerpt)",
            "\n".join(l for l in msg.splitlines()
                      if "exited" in l or "---" in l or "spank" in l.lower()))
        self.assertIn("slurmd.n1 exited", msg)
        self.assertIn("--- slurmd.n1.stdout", msg)  # log tails are in the message
        self.assertIn("tfpin-missing.so", msg)
        pids = [p.pid for _, p in c._procs]
        self.assertEqual([p.poll() is not None for _, p in c._procs], [True] * len(pids))
        _assert_all_gone(self, pids, c.tmpdir, self.keep)

    def test_config_complaint_is_reported(self):
        # The check above can fail: a key given twice makes every Slurm release log an error
        # (and use the last value), and log_errors() reports it.
        with LocalSlurm(nodes=1, cpus_per_node=1, extra_conf=["KillWait=3"]) as c:
            errors = c.log_errors()
        saw(self, "log_errors() with KillWait given twice", "\n".join(errors))
        self.assertTrue(any("KillWait" in e for e in errors), errors)
        self.assertTrue(all(e.startswith(("slurmctld: ", "slurmd.n1: ")) for e in errors), errors)

    def test_sigterm_stops_cluster(self):
        code = textwrap.dedent(f"""\
            import sys, time
            sys.path.insert(0, {str(HERE)!r})
            from slurm_cluster import LocalSlurm
            with LocalSlurm(nodes=2, cpus_per_node=1) as c:
                print(c.tmpdir, flush=True)
                time.sleep(120)
            """)
        with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) as p:
            try:
                line = p.stdout.readline().strip()
                self.assertTrue(line, p.stderr.read() if p.poll() is not None else "no output")
                workdir = Path(line)
                pids = _daemon_pids(workdir)
                p.send_signal(signal.SIGTERM)
                rc = p.wait(timeout=60)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        saw(self, f"child exit status after SIGTERM: {rc}", f"daemons {pids} stopped")
        self.assertNotEqual(rc, 0)
        _assert_all_gone(self, pids, workdir, self.keep)

    def test_cli_up_down(self):
        import tempfile
        workdir = Path(tempfile.mkdtemp(prefix="tfpin-cli-")) / "cluster"
        os.chmod(workdir.parent, 0o755)  # munged wants o+x on the way to its socket
        script = str(HERE / "slurm_cluster.py")
        up = subprocess.run([sys.executable, script, "up", "--dir", str(workdir),
                             "--nodes", "2"], capture_output=True, text=True, timeout=90)
        try:
            saw(self, "up stdout", up.stdout)
            self.assertEqual(up.returncode, 0, up.stderr)
            self.assertEqual(up.stdout.strip(),
                             f"export SLURM_CONF={workdir / 'slurm.conf'}")
            env = slurm_cluster._client_env(str(workdir))
            r = subprocess.run(["srun", "-N", "2", "printenv", "SLURMD_NODENAME"], env=env,
                               capture_output=True, text=True, timeout=60)
            saw(self, "srun against the up cluster", r.stdout + r.stderr)
            self.assertEqual(sorted(r.stdout.split()), ["n1", "n2"])
            pids = _daemon_pids(workdir)
        finally:
            down = subprocess.run([sys.executable, script, "down", "--dir", str(workdir)],
                                  capture_output=True, text=True, timeout=90)
        self.assertEqual(down.returncode, 0, down.stderr)
        _assert_all_gone(self, pids, workdir)
        workdir.parent.rmdir()


if __name__ == "__main__":
    unittest.main(verbosity=2)
