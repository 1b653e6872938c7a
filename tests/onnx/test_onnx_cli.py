#!/usr/bin/env python3
"""`tfpin bench`, `tfpin tune` and `tfpin infer` on ONNX files built here with onnx.helper."""
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cli"))
from test_cli import USER_AFFINITY_SETTINGS  # noqa: E402 (the variables x commands table's rows)
from test_cli import tfpin as tfpin_clean_env  # noqa: E402

TFPIN = os.environ.get("TFPIN_EXE", "tfpin")


def small_classifier(path, batch="N", classes=10, keep_bn=True, seed=0):
    """Conv -> BatchNormalization -> Relu -> MaxPool -> Conv -> Relu -> GlobalAveragePool ->
    Flatten -> Gemm: a network bench can train (batch norm kept, as a training export would)."""
    rng = np.random.default_rng(seed)

    def init(name, shape, scale=0.2):
        return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)

    inits = [init("w1", (8, 3, 3, 3)), init("b1", (8,)), init("w2", (16, 8, 3, 3)),
             init("fc_w", (classes, 16)), init("fc_b", (classes,))]
    nodes = [helper.make_node("Conv", ["images", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1])]
    last = "c1"
    if keep_bn:
        inits += [numpy_helper.from_array(np.abs(rng.standard_normal(8)).astype(np.float32) + 0.5, "scale"),
                  init("shift", (8,)), init("mean", (8,), 0.1),
                  numpy_helper.from_array(np.abs(rng.standard_normal(8)).astype(np.float32) + 0.5, "var")]
        nodes.append(helper.make_node("BatchNormalization", ["c1", "scale", "shift", "mean", "var"], ["bn"]))
        last = "bn"
    nodes += [helper.make_node("Relu", [last], ["r1"]),
              helper.make_node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
              helper.make_node("Conv", ["p1", "w2"], ["c2"], pads=[1, 1, 1, 1]),
              helper.make_node("Relu", ["c2"], ["r2"]),
              helper.make_node("GlobalAveragePool", ["r2"], ["g"]),
              helper.make_node("Flatten", ["g"], ["f"]),
              helper.make_node("Gemm", ["f", "fc_w", "fc_b"], ["logits"], transB=1)]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("images", TensorProto.FLOAT, [batch, 3, 32, 32])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])], inits)
    model = helper.make_model(graph, producer_name="tfpin-test", opset_imports=[helper.make_opsetid("", 13)])
    onnx.checker.check_model(model)
    onnx.save(model, path)


def tfpin(*args, **kw):
    return subprocess.run([TFPIN, *map(str, args)], capture_output=True, text=True, timeout=600, **kw)


class OnnxCommands(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = Path(cls.tmp.name)
        cls.model = cls.dir / "small.onnx"
        small_classifier(cls.model)
        cls.fixed = cls.dir / "fixed.onnx"
        small_classifier(cls.fixed, batch=4)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_bench_forward_only_json(self):
        r = tfpin("bench", "--model", self.model, "--batch_size", 3, "--num_batches", 3,
                  "--num_warmup_batches", 1, "--forward_only", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual((j["model"], j["batch_size"], j["mode"], j["data_format"]),
                         (str(self.model), 3, "inference", "NCHW"))
        self.assertTrue(j["outputs_finite"])
        self.assertGreater(j["images_per_sec"], 0)
        self.assertGreater(j["gflop_per_image"], 0)

    def test_bench_trains_and_the_loss_falls(self):
        r = tfpin("bench", "--model", self.model, "--batch_size", 8, "--num_batches", 12,
                  "--num_warmup_batches", 0, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["mode"], "training")
        losses = j["losses"]
        self.assertEqual(len(losses), 12)
        self.assertTrue(all(np.isfinite(losses)))
        # Synthetic data and labels repeat every step: SGD must fit them.
        self.assertLess(losses[-1], losses[0])
        self.assertGreater(j["compile"]["trained_tensors"], 0)

    def test_fixed_batch_must_match(self):
        r = tfpin("bench", "--model", self.fixed, "--batch_size", 2, "--forward_only", "--num_batches", 1)
        self.assertEqual(r.returncode, 2)
        self.assertIn(f"--model={self.fixed} (--batch_size=2, --forward_only)", r.stderr)
        self.assertIn("fixed dimension 0 of 4, but 2 was given", r.stderr)
        r = tfpin("bench", "--model", self.fixed, "--batch_size", 4, "--forward_only", "--num_batches", 1,
                  "--num_warmup_batches", 0)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_missing_or_unreadable_model(self):
        r = tfpin("bench", "--model", self.dir / "nothere.onnx", "--forward_only")
        self.assertEqual(r.returncode, 2)
        self.assertIn("nothere.onnx: cannot read the ONNX file", r.stderr)
        self.assertIn("valid: a model of the zoo, or a readable .onnx file", r.stderr)

    def test_tune_sweeps_an_onnx_model(self):
        r = tfpin("tune", "--model", self.model, "--batch_sizes", 2, "--num_batches", 1,
                  "--num_warmup_batches", 0, "--forward_only", "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["model"], str(self.model))
        self.assertTrue(j["results"])
        self.assertTrue(all(res["images_per_sec"] > 0 for res in j["results"]))

    def test_infer_matches_numpy_reference_and_json(self):
        x = np.random.default_rng(1).standard_normal((2, 3, 32, 32)).astype(np.float32)
        np.save(self.dir / "x.npy", x)
        out = self.dir / "y.npy"
        r = tfpin("infer", "--model", self.model, "--input", f"images={self.dir / 'x.npy'}",
                  "--output", out, "--json")
        self.assertEqual(r.returncode, 0, r.stderr)
        j = json.loads(r.stdout)
        self.assertEqual(j["inputs"], [{"name": "images", "dims": [2, 3, 32, 32]}])
        self.assertEqual(j["outputs"], [{"name": "logits", "dims": [2, 10], "file": str(out)}])
        self.assertEqual((j["opset"], j["producer"]), (13, "tfpin-test"))
        got = np.load(out)
        self.assertEqual(got.shape, (2, 10))
        self.assertTrue(np.isfinite(got).all())
        # The same model without batch norm and with it folded by hand gives the same numbers
        # only if the importer applied batch norm as ONNX defines it: check against numpy.
        self.assertTrue(np.allclose(got, reference_forward(self.model, x), rtol=1e-4, atol=1e-5))


    def test_infer_runs_on_every_allowed_cpu_whatever_openmp_affinity_the_user_set(self):
        """The infer column of tests/cli's variables x commands table (libgomp binds at load time,
        before main: tfpin must plan from the CPUs it was given)."""
        allowed = sorted(os.sched_getaffinity(0))
        if len(allowed) < 2:
            self.skipTest("needs 2 allowed CPUs to see a process collapse onto one")
        x = np.zeros((1, 3, 32, 32), np.float32)
        np.save(self.dir / "x1.npy", x)
        for setting in USER_AFFINITY_SETTINGS:
            with self.subTest(**setting):
                r = tfpin_clean_env("infer", "--model", str(self.model), "--input",
                                    str(self.dir / "x1.npy"), "--output", str(self.dir / "y1.npy"),
                                    "--json", env=setting)
                self.assertEqual(r.returncode, 0, r.stderr)
                j = json.loads(r.stdout)
                self.assertEqual(j["inter"] * j["intra"], len(allowed), j)
                self.assertEqual(sorted(c for lane in j["lanes"] for c in lane), allowed, j)


def reference_forward(path, x):
    """A plain numpy evaluation of small_classifier's graph."""
    m = onnx.load(path)
    w = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}

    def conv(a, k, b=None):
        n, c, h, wd = a.shape
        o = k.shape[0]
        p = np.pad(a, ((0, 0), (0, 0), (1, 1), (1, 1)))
        out = np.zeros((n, o, h, wd), np.float64)
        for i in range(3):
            for j in range(3):
                out += np.einsum("nchw,oc->nohw", p[:, :, i:i + h, j:j + wd], k[:, :, i, j])
        return out + (0 if b is None else b[None, :, None, None])

    y = conv(x.astype(np.float64), w["w1"], w["b1"])
    y = (y - w["mean"][None, :, None, None]) / np.sqrt(w["var"][None, :, None, None] + 1e-5) \
        * w["scale"][None, :, None, None] + w["shift"][None, :, None, None]
    y = np.maximum(y, 0)
    n, c, h, wd = y.shape
    y = y.reshape(n, c, h // 2, 2, wd // 2, 2).max(axis=(3, 5))
    y = np.maximum(conv(y, w["w2"]), 0).mean(axis=(2, 3))
    return y @ w["fc_w"].T + w["fc_b"]


if __name__ == "__main__":
    # Where oneDNN cannot run on this CPU the engine refuses: skip, with the reason.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from onednn_usable import exit_if_onednn_unusable  # noqa: E402
    exit_if_onednn_unusable(TFPIN)
    unittest.main(verbosity=2)
