#!/usr/bin/python3
"""The shim in a C library older than the one it was built with: a Debian 11 root (glibc 2.31,
what container images still ship) entered with bubblewrap, its own programs (sh, coreutils,
Python) run with the build's shim preloaded. Before the glibc floor, ld.so refused the shim there
(`GLIBC_2.34' not found) and every program exited 1 before main.

The root is built once with mmdebstrap from this machine's Debian mirror and kept in the matrix
cache (TFPIN_MATRIX_CACHE, default /var/cache/tfpin-matrix). Inside a scripts/test-matrix root the
test skips: it runs on the host's scripts/test."""
import fcntl
import os
import re
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

SHIM = os.environ.get("TFPIN_SHIM_LIB", "")
HERE = Path(__file__).resolve().parent
SOURCE_ROOT = HERE.parents[1]
CACHE = Path(os.environ.get("TFPIN_MATRIX_CACHE", "/var/cache/tfpin-matrix"))
RELEASE = "bullseye"
PACKAGES = "python3-minimal"
ROOT = CACHE / f"{RELEASE}-shim-root"
IN_MATRIX = Path("/usr/local/lib/tfpin-matrix").exists()
CPUS = sorted(os.sched_getaffinity(0))
B = CPUS[-1]


def build_root():
    """ROOT, built once (under a lock) with mmdebstrap; the reason it could not be, or ""."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{RELEASE}-shim-root.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        stamp = ROOT / ".tfpin-packages"
        if stamp.exists() and stamp.read_text() == PACKAGES:
            return ""
        shutil.rmtree(ROOT, ignore_errors=True)
        mirror = subprocess.run([SOURCE_ROOT / "scripts/test-matrix", "--print-mirror"],
                                capture_output=True, text=True)
        if mirror.returncode != 0:
            return f"no Debian mirror: {mirror.stderr.strip()}"
        r = subprocess.run(["mmdebstrap", "--variant=minbase", f"--include={PACKAGES}", RELEASE,
                            str(ROOT), mirror.stdout.strip()], capture_output=True, text=True,
                           timeout=900)
        if r.returncode != 0:
            shutil.rmtree(ROOT, ignore_errors=True)
            return f"mmdebstrap {RELEASE} failed:\n{r.stderr[-3000:]}"
        stamp.write_text(PACKAGES)
        return ""


def in_root(command, env):
    """`sh -c command` in the old root, the build's shim directory bound at /opt/tfpin."""
    argv = ["bwrap", "--ro-bind", str(ROOT), "/", "--proc", "/proc", "--dev", "/dev",
            "--ro-bind", "/sys", "/sys", "--tmpfs", "/opt",
            "--ro-bind", str(Path(SHIM).parent), "/opt/tfpin", "--clearenv",
            "--setenv", "PATH", "/usr/bin:/bin"]
    for name, value in env.items():
        argv += ["--setenv", name, value]
    return subprocess.run(argv + ["--", "/bin/sh", "-c", command], capture_output=True, text=True,
                          timeout=120)


PRELOAD = {"LD_PRELOAD": "/opt/tfpin/libtfpin-shim.so"}
PLAN = {**PRELOAD, "TFPIN_CPUS": str(B), "TFPIN_INTEROP": "1", "TFPIN_INTRA": "1"}
THREADS = ("import os, threading\n"
           "seen = []\n"
           "def work(): seen.append(sorted(os.sched_getaffinity(0)))\n"
           "ts = [threading.Thread(target=work) for _ in range(4)]\n"
           "[t.start() for t in ts]; [t.join() for t in ts]\n"
           "print(os.cpu_count(), seen)\n")


@unittest.skipIf(IN_MATRIX, "runs on the host (scripts/test), which builds the Debian 11 root")
@unittest.skipUnless(os.geteuid() == 0, "mmdebstrap builds the Debian 11 root as root")
@unittest.skipUnless(SHIM, "TFPIN_SHIM_LIB not set")
class OldGlibc(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        missing = [tool for tool in ("bwrap", "mmdebstrap") if shutil.which(tool) is None]
        if missing:
            raise AssertionError(f"{missing} missing: scripts/setup installs them")
        why = build_root()
        if why:
            raise AssertionError(why)

    def test_the_root_has_an_older_glibc(self):
        r = in_root("ldd --version | head -1", {})
        version = re.search(r"(\d+)\.(\d+)\s*$", r.stdout.strip())
        self.assertIsNotNone(version, r.stdout + r.stderr)
        self.assertLess((int(version.group(1)), int(version.group(2))), (2, 34), r.stdout)

    def test_programs_of_the_image_run_under_the_plan(self):
        r = in_root("nproc; cat /sys/devices/system/cpu/online; grep -c ^processor /proc/cpuinfo;"
                    f" python3 -c '{THREADS}'", {**PLAN, "TFPIN_REPORT": "stderr"})
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), ["1", str(B), "1", f"1 {[[B]] * 4}"])
        # One report per process (nproc, cat, grep, python3: dash execs its last command, so the
        # shell's own never comes), each with the plan; nothing else.
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 4, r.stderr)
        for line in lines:
            self.assertRegex(line, rf"^tfpin-shim\[\d+\]: cpus={B} interop=1 intra=1 ")
        self.assertIn("other_threads_pinned=4", r.stderr)

    def test_without_a_plan_the_shim_is_inert(self):
        machine = in_root("nproc", {})
        self.assertEqual(machine.stdout.strip(), str(len(CPUS)))
        r = in_root("nproc", PRELOAD)
        self.assertEqual((r.returncode, r.stdout, r.stderr), (0, machine.stdout, ""))


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
