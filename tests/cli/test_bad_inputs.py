#!/usr/bin/python3
"""The `tfpin` command's rows of tests/fixtures/bad_inputs.json (runner "cli"): every bad value of
`tfpin show`, `run`, `bench` and `tune` and of the variables they read exits 2, without a crash or a
hang, with one line that names the option or variable, shows the value as tfpin::shown_value
escapes it, and says what is valid. The schema is tests/fixtures/generate_bad_inputs.py's.

    TFPIN_EXE=build/cli/tfpin tests/cli/test_bad_inputs.py
"""
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from onednn_usable import MARK, onednn_unusable_reason  # noqa: E402

TFPIN = os.environ.get("TFPIN_EXE", "tfpin")
FIXTURES = os.environ.get("TFPIN_FIXTURE_DIR",
                          os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures"))
TABLE = os.path.join(FIXTURES, "bad_inputs.json")
MIN_ROWS = 200
TIMEOUT = 30  # seconds per row: a refusal is immediate, anything near this is a hang
SURFACES = {"cli", "job_option", "site", "lib_env"}
RUNNERS = {"cli", "plugin"}


def load_rows():
    with open(TABLE) as f:
        return json.load(f)["rows"]


def as_bytes(value):
    """A table string is bytes, one per character (0..255); a repeat object is a long value."""
    if isinstance(value, dict):
        return as_bytes(value.get("prefix", "")) + as_bytes(value["repeat"]) * value["times"]
    return value.encode("latin-1")


def clean_environment():
    env = {k.encode(): v.encode() for k, v in os.environ.items()}
    for name in list(env):
        # An outer plan (these tests may run inside a tfpin'd job) must not leak in.
        if name.startswith((b"TFPIN_", b"OMP_", b"KMP_", b"GOMP_", b"TF_NUM", b"MKL_", b"OPENBLAS_", b"ORT_")) \
                or name in (b"LD_PRELOAD", b"HWLOC_SYNTHETIC", b"HWLOC_XMLFILE"):
            del env[name]
    return env


def has_engine(subcommand="bench"):
    """bench and tune exist only in a tfpin built with the engine, infer only with its ONNX
    import too (--help lists them)."""
    proc = subprocess.run([TFPIN, "--help"], capture_output=True, text=True, timeout=TIMEOUT)
    return any(line.split()[:1] == [subcommand] for line in proc.stdout.splitlines())


RUNTIME_PREFIXES = (b"libgomp:", b"OMP: ")


def printable(data):
    return all(0x20 <= c < 0x7F or c == 0x0A for c in data)


class BadInputs(unittest.TestCase):
    rows = load_rows()

    def test_table_has_enough_rows_on_every_surface(self):
        self.assertGreaterEqual(len(self.rows), MIN_ROWS, TABLE)
        ids = [row["id"] for row in self.rows]
        self.assertEqual(len(ids), len(set(ids)), "row ids must be unique")
        for row in self.rows:
            self.assertIn(row["surface"], SURFACES, row["id"])
            self.assertIn(row["runner"], RUNNERS, row["id"])
        self.assertEqual({row["surface"] for row in self.rows}, SURFACES)

    def test_cli_rows(self):
        rows = [row for row in self.rows if row["runner"] == "cli"]
        self.assertGreater(len(rows), 0)
        engine = has_engine()
        onnx = has_engine("infer")
        # Where oneDNN cannot run here the engine refuses to compile (tests/onednn_usable.py): a
        # row whose refusal comes from compiling (a batch too large to plan) cannot be checked.
        unusable = onednn_unusable_reason(TFPIN)[len(MARK):].split(" (bench, tune and infer")[0]
        self.unusable = unusable.strip().encode()
        for row in rows:
            with self.subTest(row["id"]):
                if row["args"][0] in ("bench", "tune") and not engine:
                    self.skipTest("tfpin was built without the engine")
                if row["args"][0] == "infer" and not onnx:
                    self.skipTest("tfpin was built without ONNX import (tfpin infer)")
                self.check(row)

    def check(self, row):
        argv = [os.fsencode(TFPIN)] + [as_bytes(arg) for arg in row["args"]]
        env = clean_environment()
        for name, value in row.get("env", {}).items():
            env[name.encode()] = as_bytes(value)
        try:
            proc = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                                  timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            self.fail(f"hung: no answer in {TIMEOUT} s")
        # An OpenMP runtime linked into tfpin (the engine's) reads OMP_* itself in its constructor,
        # before tfpin runs, and may echo a bad value raw (GCC 14's libgomp does, 12's does not):
        # its lines are not tfpin's to escape.
        err = b"\n".join(line for line in proc.stderr.split(b"\n")
                         if not line.startswith(RUNTIME_PREFIXES))
        brief = err[:600].decode("latin-1")
        if getattr(self, "unusable", b"") and proc.returncode == 1 and self.unusable in err:
            self.skipTest(f"needs the engine to compile, and {self.unusable.decode()}")
        self.assertGreaterEqual(proc.returncode, 0, f"crashed: signal {-proc.returncode}\n{brief}")
        self.assertEqual(proc.returncode, row.get("exit", 2), brief)
        # The value cannot forge a line or reach the terminal raw: one printable line.
        self.assertTrue(printable(err), f"raw control or non-ASCII bytes in stderr: {err[:600]!r}")
        names = row["names"] if isinstance(row["names"], list) else [row["names"]]
        wanted = names + [row["value_shown"], row["valid"]] + ([row["says"]] if "says" in row else [])
        lines = [line for line in err.decode("ascii").splitlines()
                 if all(part in line for part in wanted)]
        self.assertTrue(lines, f"no line of stderr has all of {wanted}:\n{brief}")
        self.assertLess(len(lines[0]), 1000, "a long value must be shortened")


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
