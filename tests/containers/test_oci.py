#!/usr/bin/python3
"""tfpin under Slurm's own OCI container support (`srun --container=BUNDLE`, oci.conf with runc)
in the real harness: the bundle is a Debian 11 root (glibc 2.31) with omp-lanes
(tests/containers/omp_lanes.c) compiled inside.

- Default site keys: the shim's host path does not exist in the bundle, so the plugin does not
  preload it (no ld.so error in any process) and says so once; the task's cores apply, and its
  thread variables where Slurm passes the task's environment into the container.
- oci_shim=yes with a bundle whose config.json binds the shim's directory: the shim runs inside
  and each lane's OpenMP team is capped and on its own core.

Slurm 22.05 writes the container's environment before the plugins' task_init: there, neither the
variables nor LD_PRELOAD reach the container (only the cores), and the test says so instead of
checking them."""
import json
import os
import re
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "slurm"))
from slurm_cluster import LocalSlurm, missing_binaries  # noqa: E402

import images  # noqa: E402

PLUGIN = os.environ.get("TFPIN_PLUGIN", "")
SHIM = os.environ.get("TFPIN_SHIM", "")
RUNC = shutil.which("runc")
RELEASE = "bullseye"
# A system path no bundle has unless it binds it (the build tree's may be bound by chance).
INSTALLED_SHIM = Path("/usr/local/lib/tfpin-oci-test/libtfpin-shim.so")
RUNC_ROOT = "/run/tfpin-oci-test"
OCI_CONF = (f'RunTimeQuery="runc --root={RUNC_ROOT} state %n.%u.%j.%s.%t"\n'
            f'RunTimeKill="runc --root={RUNC_ROOT} kill -a %n.%u.%j.%s.%t"\n'
            f'RunTimeDelete="runc --root={RUNC_ROOT} delete --force %n.%u.%j.%s.%t"\n'
            f'RunTimeRun="runc --root={RUNC_ROOT} run --bundle %b %n.%u.%j.%s.%t"\n')


def root_is_a_mount():
    """runc makes the container's mounts private from / down: / must be a mount point, which it
    is not in a chroot (scripts/test-matrix enters trixie's root that way; sid's by pivot_root)."""
    with open("/proc/self/mountinfo") as mountinfo:
        return any(line.split()[4] == "/" for line in mountinfo)


def slurm_version():
    r = subprocess.run(["slurmd", "-V"], capture_output=True, text=True)
    m = re.search(r"(\d+)\.(\d+)", r.stdout)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)


def write_bundle(shim_dir):
    """The OCI bundle: the Debian 11 root as its rootfs (built once) and runc's default
    config.json (no terminal, writable root), plus a read-only bind of `shim_dir` when given.
    Returns its path."""
    bundle = images.CACHE / "oci-bundle"
    images.built("oci-bundle/rootfs", lambda root: images.make_root(RELEASE, root),
                 images.root_inputs(RELEASE))
    config_path = bundle / "config.json"
    config_path.unlink(missing_ok=True)
    subprocess.run([RUNC, "spec", "--bundle", str(bundle)], check=True, capture_output=True)
    config = json.loads(config_path.read_text())
    config["root"] = {"path": "rootfs", "readonly": False}
    config["process"]["terminal"] = False
    if shim_dir:
        config["mounts"].append({"destination": str(shim_dir), "type": "none",
                                 "source": str(shim_dir), "options": ["bind", "ro"]})
    config_path.write_text(json.dumps(config, indent=1))
    return bundle


@unittest.skipUnless(RUNC, "runc missing: scripts/setup installs it")
@unittest.skipUnless(os.geteuid() == 0, "runs runc and Slurm as root")
@unittest.skipUnless(root_is_a_mount(), "/ is not a mount point (a chroot): runc cannot run here")
@unittest.skipIf(missing_binaries(), f"Slurm/munge binaries missing: {missing_binaries()}")
@unittest.skipUnless(PLUGIN and SHIM, "TFPIN_PLUGIN and TFPIN_SHIM not set")
class OciContainers(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        INSTALLED_SHIM.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SHIM, INSTALLED_SHIM)
        cls.env_reaches = slurm_version() > (22, 5)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(INSTALLED_SHIM.parent, ignore_errors=True)

    def srun(self, keys, bundle):
        line = f"required {PLUGIN} shim_path={INSTALLED_SHIM} {keys}".strip()
        with LocalSlurm(nodes=1, cpus_per_node=2, plugstack_lines=[line],
                        extra_files={"oci.conf": OCI_CONF}) as cluster:
            r = cluster.srun([f"--container={bundle}", "-n", "1", "-c", "2", "--tf-threads=2",
                              "--tf-interop=2", "/usr/local/bin/omp-lanes"],
                             timeout=120, env_extra={"TFPIN_REPORT": "stderr"})
        self.assertEqual(r.returncode, 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
        self.assertNotRegex(r.stderr, r"ld\.so|cannot be preloaded|GLIBC_", r.stderr)
        return r

    def test_no_shim_preload_and_one_warning_by_default(self):
        r = self.srun("", write_bundle(None))
        warnings = [line for line in r.stderr.splitlines()
                    if "srun --container: the shim is not preloaded" in line]
        self.assertEqual(len(warnings), 1, r.stderr)
        self.assertNotIn("tfpin-shim[", r.stderr)
        head, lanes = images.parse_lanes(r.stdout)
        self.assertEqual(len(lanes), 2, r.stdout)
        for _, masks in lanes:  # the task's cores: the step's two
            self.assertTrue(all(mask == [0, 1] for mask in masks), r.stdout)
        if self.env_reaches:
            self.assertEqual(head["omp_num_threads"], "1", r.stdout)
        else:
            print("Slurm 22.05: the container gets the step's environment from before task_init; "
                  f"OMP_NUM_THREADS inside: {head['omp_num_threads']}")

    def test_the_shim_runs_inside_when_the_site_binds_it(self):
        if not self.env_reaches:
            self.skipTest("Slurm 22.05 gives the container no variable set in task_init, so no "
                          "LD_PRELOAD and no plan: only the cores apply")
        r = self.srun("oci_shim=yes", write_bundle(INSTALLED_SHIM.parent))
        self.assertNotIn("the shim is not preloaded", r.stderr)
        head, lanes = images.parse_lanes(r.stdout)
        self.assertEqual(head["omp_num_threads"], "1", r.stdout)
        self.assertEqual([team for team, _ in lanes], [1, 1], r.stdout)
        self.assertEqual(sorted(masks[0][0] for _, masks in lanes), [0, 1], r.stdout)
        reports = [line for line in r.stderr.splitlines() if line.startswith("tfpin-shim[")]
        self.assertEqual(len(reports), 1, r.stderr)
        self.assertRegex(reports[0], r" interop=2 intra=1 .*teams_clamped=[1-9].* lanes_used=2/2")


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
