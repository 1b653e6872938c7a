#!/usr/bin/python3
"""meson's engine=auto/enabled against oneDNN versions the engine does not support.

A header directory that claims another oneDNN version is put first on the include path
(-Dcpp_args=-I...), so meson's version probe reads it while everything else is this machine's.
"""
import os
import subprocess
import tempfile
import unittest
from pathlib import Path

SOURCE_ROOT = Path(os.environ.get("SOURCE_ROOT", Path(__file__).resolve().parents[2]))


def configure(version, engine):
    with tempfile.TemporaryDirectory() as tmp:
        header = Path(tmp) / "include/oneapi/dnnl/dnnl_version.h"
        header.parent.mkdir(parents=True)
        major, minor, patch = version.split(".")
        header.write_text(f"#define DNNL_VERSION_MAJOR {major}\n#define DNNL_VERSION_MINOR {minor}\n"
                          f"#define DNNL_VERSION_PATCH {patch}\n")
        build = Path(tmp) / "build"
        r = subprocess.run(["meson", "setup", str(build), f"-Dengine={engine}", "-Dtests=disabled",
                            f"-Dcpp_args=-I{header.parents[2]}"],
                           cwd=SOURCE_ROOT, capture_output=True, text=True, timeout=300)
        return r.returncode, r.stdout + r.stderr


class UnsupportedOneDnn(unittest.TestCase):
    def test_enabled_fails_naming_found_and_supported(self):
        for version in ("2.5.4", "4.0.0"):
            with self.subTest(version=version):
                code, out = configure(version, "enabled")
                self.assertNotEqual(code, 0, out)
                self.assertIn(f"oneDNN {version} found, but the engine supports oneDNN 2.6 to 3.x", out)

    def test_auto_skips_the_engine_and_says_why(self):
        code, out = configure("1.8.0", "auto")
        self.assertEqual(code, 0, out)
        self.assertIn("WARNING: oneDNN 1.8.0 found, but the engine supports oneDNN 2.6 to 3.x", out)
        self.assertRegex(out, r"engine\s*: NO")

    def test_supported_version_builds_the_engine(self):
        code, out = configure("3.7.2", "auto")
        self.assertEqual(code, 0, out)
        self.assertRegex(out, r"oneDNN\s*: 3\.7\.2")
        self.assertRegex(out, r"engine\s*: YES")


if __name__ == "__main__":
    unittest.main(verbosity=2)
