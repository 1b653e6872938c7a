#!/usr/bin/python3
"""tfpin in Apptainer containers started by Slurm tasks: `srun --tf-threads=N --tf-interop=M
apptainer exec IMAGE omp-lanes` under the real plugin (tests/slurm harness), in a Debian 11 image
(glibc 2.31, as container images still ship) and a Debian 13 one whose %environment sets
OMP_NUM_THREADS=8. omp-lanes (tests/containers/omp_lanes.c, compiled in each image with its own
gcc) runs M threads that each start an OpenMP region asking for 64 threads.

Checked inside: the shim is loaded (its report), each lane's team is capped to intra and sits on
its own cores, the CPU count and /sys/devices/system/cpu/online show the plan, the plan's
OMP_NUM_THREADS wins over the image's, --cleanenv keeps all of it, and no ld.so error is printed.

Apptainer is packaged in Debian unstable only: the test runs in scripts/test-matrix's sid root
(entered by pivot_root, which Apptainer needs) and skips elsewhere. The images are built with
mmdebstrap from the Debian mirror (TFPIN_MATRIX_MIRROR, which scripts/test-matrix passes in, or the
one scripts/test-matrix --print-mirror finds) into TFPIN_CONTAINER_CACHE (default
/var/cache/tfpin-containers)."""
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
from slurm_cluster import _parse_cpu_list as cpulist  # noqa: E402

import images  # noqa: E402
from images import parse_lanes as parse  # noqa: E402

PLUGIN = os.environ.get("TFPIN_PLUGIN", "")
SHIM = os.environ.get("TFPIN_SHIM", "")
APPTAINER = shutil.which("apptainer")
INSTALLED_SHIM = Path("/usr/local/lib/tfpin-container-test/libtfpin-shim.so")
IMAGES = {"bullseye": "", "trixie": "export OMP_NUM_THREADS=8\n"}  # release -> %environment
# Bit 24 of the bounding set: without it (a VM or container that dropped it), Apptainer must not
# try to drop it itself.
CAP_SYS_RESOURCE = 24


def build_image(release):
    """CACHE/RELEASE.sif, from a root with omp-lanes (tests/containers/images.py)."""
    environment = IMAGES[release]

    def make(sif):
        root = images.CACHE / f"{release}-apptainer-root"
        shutil.rmtree(root, ignore_errors=True)
        try:
            images.make_root(release, root, environment)
            r = subprocess.run([APPTAINER, "build", str(sif), str(root)], capture_output=True,
                               text=True, timeout=1200)
            if r.returncode != 0:
                raise AssertionError(f"apptainer build {release} failed:\n{r.stderr[-3000:]}")
        finally:
            shutil.rmtree(root, ignore_errors=True)

    return images.built(f"{release}.sif", make, images.root_inputs(release, environment))


def capability_bounded(bit):
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("CapBnd:"):
                return bool(int(line.split()[1], 16) >> bit & 1)
    return True


@unittest.skipUnless(APPTAINER, "Apptainer is packaged in Debian unstable only: this test runs in "
                                "scripts/test-matrix sid")
@unittest.skipUnless(os.geteuid() == 0, "builds images with mmdebstrap and runs Slurm as root")
@unittest.skipIf(missing_binaries(), f"Slurm/munge binaries missing: {missing_binaries()}")
@unittest.skipUnless(PLUGIN and SHIM, "TFPIN_PLUGIN and TFPIN_SHIM not set")
class ApptainerUnderSlurm(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.images = {release: build_image(release) for release in IMAGES}
        # The shim where a package puts it, a system directory no container sees by default (the
        # build tree may be under $HOME or the working directory, which Apptainer binds itself).
        INSTALLED_SHIM.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(SHIM, INSTALLED_SHIM)
        cls.cluster = LocalSlurm(nodes=1, cpus_per_node=2, plugstack_lines=[
            f"required {PLUGIN} shim_path={INSTALLED_SHIM}"]).start()
        cls.env = {"TFPIN_REPORT": "stderr"}
        if not capability_bounded(CAP_SYS_RESOURCE):
            cls.env["APPTAINER_DROP_CAPS"] = "CAP_SYS_RESOURCE"

    @classmethod
    def tearDownClass(cls):
        if hasattr(cls, "cluster"):
            cls.cluster.stop()
        shutil.rmtree(INSTALLED_SHIM.parent, ignore_errors=True)

    def run_in(self, release, srun_args, exec_args=(), program_args=()):
        r = self.cluster.srun(["-n", "1", "-c", "2"] + list(srun_args) +
                              [APPTAINER, "exec", *exec_args, str(self.images[release]),
                               "omp-lanes", *program_args], timeout=180, env_extra=self.env)
        self.assertEqual(r.returncode, 0, f"stdout:\n{r.stdout}\nstderr:\n{r.stderr}")
        self.assertNotRegex(r.stderr, r"ld\.so|cannot be preloaded|GLIBC_|ERROR", r.stderr)
        return r

    def reports(self, stderr):
        """The shim's report lines of processes that ran a lane (the probe's)."""
        return [line for line in stderr.splitlines()
                if line.startswith("tfpin-shim[") and "lanes_used=0/" not in line]

    def check_lanes(self, release, exec_args=()):
        r = self.run_in(release, ["--tf-threads=2", "--tf-interop=2"], exec_args)
        head, lanes = parse(r.stdout)
        self.assertEqual(len(lanes), 2, r.stdout)
        # Each lane's team is intra (1), not the 64 asked for, and the lanes hold different cores.
        for team, masks in lanes:
            self.assertEqual(team, 1, r.stdout)
            self.assertEqual([len(m) for m in masks], [1], r.stdout)
        self.assertNotEqual(lanes[0][1], lanes[1][1], r.stdout)
        self.assertEqual(sorted(lanes[0][1][0] + lanes[1][1][0]), [0, 1], r.stdout)
        # The plan's OMP_NUM_THREADS, over an image's own (the trixie image exports 8).
        self.assertEqual(head["omp_num_threads"], "1", r.stdout)
        reports = self.reports(r.stderr)
        self.assertEqual(len(reports), 1, r.stderr)
        self.assertRegex(reports[0], r" interop=2 intra=1 .*teams_clamped=[1-9].* lanes_used=2/2",
                         r.stderr)
        return r

    def test_lanes_in_an_old_glibc_image(self):
        r = subprocess.run([APPTAINER, "exec", str(self.images["bullseye"]), "ldd", "--version"],
                           capture_output=True, text=True, env={**os.environ, **self.env})
        version = re.search(r"(\d+)\.(\d+)\s*$", r.stdout.splitlines()[0] if r.stdout else "")
        self.assertIsNotNone(version, r.stdout + r.stderr)
        self.assertLess((int(version.group(1)), int(version.group(2))), (2, 34), r.stdout)
        self.check_lanes("bullseye")

    def test_lanes_in_an_image_that_sets_its_own_thread_count(self):
        self.check_lanes("trixie")

    def test_cleanenv_keeps_the_plan(self):
        self.check_lanes("trixie", ["--cleanenv"])

    def test_cpu_count_and_files_show_the_plan_inside(self):
        for release in IMAGES:
            r = self.run_in(release, ["--tf-threads=1"], (), ["1"])
            head, lanes = parse(r.stdout)
            self.assertEqual(head["nprocs"], "1", r.stdout)
            self.assertEqual(len(lanes), 1, r.stdout)
            (team, masks), = lanes
            self.assertEqual(team, 1, r.stdout)
            # /sys/devices/system/cpu/online lists the plan's one CPU, the one the lane runs on.
            self.assertEqual(cpulist(head["online"]), masks[0], r.stdout)


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
