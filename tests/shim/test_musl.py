#!/usr/bin/python3
"""The shim preloaded into a program of another C library (musl, as in Alpine images that get the
shim through a container bind): the program starts and runs as it would without the shim, and
with TFPIN_REPORT the shim says once that it is inactive. Before, musl's loader refused the shim's
glibc-only references (__sysconf, __register_atfork, __memmove_chk) and the program exited 127
before main."""
import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

SHIM = os.environ.get("TFPIN_SHIM_LIB", "")
HERE = Path(__file__).resolve().parent
MUSL_GCC = shutil.which("musl-gcc")
CPUS = sorted(os.sched_getaffinity(0))
PLAN = {"TFPIN_CPUS": str(CPUS[-1]), "TFPIN_INTEROP": "1", "TFPIN_INTRA": "1"}


@unittest.skipUnless(MUSL_GCC, "musl-gcc missing: scripts/setup installs musl-tools")
@unittest.skipUnless(SHIM, "TFPIN_SHIM_LIB not set")
class MuslProgram(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.dir = tempfile.TemporaryDirectory()
        cls.probe = Path(cls.dir.name) / "probe-musl"
        subprocess.run([MUSL_GCC, "-O1", "-pthread", str(HERE / "probe_musl.c"), "-o",
                        str(cls.probe)], check=True, capture_output=True)
        interpreter = subprocess.run(["file", "-L", str(cls.probe)], capture_output=True,
                                     text=True).stdout
        assert "ld-musl" in interpreter, interpreter

    @classmethod
    def tearDownClass(cls):
        cls.dir.cleanup()

    def run_probe(self, env):
        clean = {k: v for k, v in os.environ.items()
                 if not k.startswith("TFPIN_") and k != "LD_PRELOAD"}
        return subprocess.run([str(self.probe)], capture_output=True, text=True, timeout=60,
                              env={**clean, **env})

    def test_runs_as_without_the_shim_and_reports_inactive_once(self):
        alone = self.run_probe({})
        self.assertEqual((alone.returncode, alone.stderr), (0, ""))
        preloaded = self.run_probe({"LD_PRELOAD": SHIM, **PLAN, "TFPIN_REPORT": "stderr"})
        self.assertEqual(preloaded.returncode, 0, preloaded.stderr)
        self.assertEqual(preloaded.stdout, alone.stdout)
        lines = preloaded.stderr.splitlines()
        self.assertEqual(len(lines), 1, preloaded.stderr)  # the parent's; the child inherits it
        self.assertRegex(lines[0], r"^tfpin-shim\[\d+\]: the program's C library is not glibc "
                                   r"\(musl\?\); the shim is inactive$")

    def test_silent_without_a_report_and_without_a_plan(self):
        for env in ({"LD_PRELOAD": SHIM, **PLAN}, {"LD_PRELOAD": SHIM}):
            r = self.run_probe(env)
            self.assertEqual((r.returncode, r.stderr), (0, ""), env)


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
