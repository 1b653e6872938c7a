#!/usr/bin/env python3
"""torchvision classification networks (random initialisation, eval mode) exported to ONNX by
Debian's PyTorch, run by the real `tfpin infer` on several thread layouts, compared output for
output with PyTorch's own forward pass."""
import inspect
import json
import os
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

import numpy as np

try:
    import torch
    import torchvision
except ImportError:  # reported by the test, not at import
    torch = None

TFPIN = os.environ.get("TFPIN_EXE", "tfpin")

# name -> input side. Small inputs keep the suite quick; each network's adaptive pooling still
# sees a size it exports as plain (global) pooling.
NETWORKS = {
    "resnet18": 64,
    "mobilenet_v2": 64,
    "mobilenet_v3_small": 64,  # hard-swish, hard-sigmoid, squeeze-and-excite (Mul by N,C,1,1)
    "squeezenet1_1": 96,       # concat, ceil-mode max pooling, global average pooling
    "efficientnet_b0": 64,     # SiLU (Sigmoid * x), squeeze-and-excite
    "googlenet": 64,           # 4-branch concat, ceil-mode pooling
    "densenet121": 64,         # deep concat chains, average pooling
    "alexnet": 224,            # ReLU, LRN-free; 6x6 adaptive pooling, Flatten, dropout, Gemm
}
LAYOUTS = [("1", "1"), ("2", "1"), ("2", "2")]  # --threads, --interop


def export(name, side, folder):
    torch.manual_seed(0)
    kwargs = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
    model = getattr(torchvision.models, name)(**kwargs).eval()
    # Freshly initialised batch norms (mean 0, variance 1, identity affine) let the signal fade to
    # nothing in deep networks; random statistics and affine parameters keep every layer's output
    # of order one, so that the comparison below compares something.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.8, 1.6)
                m.bias.uniform_(-0.1, 0.2)
    x = torch.randn(2, 3, side, side)
    with torch.no_grad():
        expected = model(x).numpy()
    path = folder / f"{name}.onnx"
    # The TorchScript exporter: newer PyTorch defaults to the dynamo one, which needs onnxscript.
    legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
    torch.onnx.export(model, x, str(path), input_names=["images"], output_names=["logits"],
                      dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}}, opset_version=13,
                      **legacy)
    np.save(folder / f"{name}-in.npy", x.numpy())
    return path, expected


@unittest.skipIf(torch is None, "PyTorch and torchvision (python3-torch, python3-torchvision) missing")
class TorchvisionNetworks(unittest.TestCase):
    def test_networks_match_pytorch(self):
        failures = []
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            for name, side in NETWORKS.items():
                path, expected = export(name, side, folder)
                for threads, interop in LAYOUTS:
                    out = folder / f"{name}-{threads}x{interop}.npy"
                    r = subprocess.run([TFPIN, "infer", "--model", str(path),
                                        "--input", str(folder / f"{name}-in.npy"), "--output", str(out),
                                        "--threads", threads, "--interop", interop, "--json"],
                                       capture_output=True, text=True, timeout=600)
                    if r.returncode != 0:
                        failures.append(f"{name} {threads}x{interop}: exit {r.returncode}: {r.stderr[-600:]}")
                        continue
                    report = json.loads(r.stdout)
                    self.assertEqual((report["inter"], report["intra"]),
                                     (int(interop), int(threads) // int(interop)))
                    got = np.load(out)
                    scale = float(np.abs(expected).max())
                    error = float(np.abs(got - expected).max())
                    print(f"{name} ({side}x{side}) threads {threads} interop {interop}: max |tfpin - "
                          f"PyTorch| = {error:.2e} (outputs up to {scale:.2e}), same argmax: "
                          f"{bool((got.argmax(1) == expected.argmax(1)).all())}")
                    # Outputs that hardly vary would make the comparison empty.
                    self.assertGreater(float(expected.std()), 1e-3 * scale, f"{name}: degenerate outputs")
                    if got.shape != expected.shape or error > 1e-4 * scale:
                        failures.append(f"{name} {threads}x{interop}: max error {error:.3e} against outputs "
                                        f"up to {scale:.3e} (shape {got.shape} vs {expected.shape})")
        self.assertEqual(failures, [], "\n".join(failures))


if __name__ == "__main__":
    # Where oneDNN cannot run on this CPU the engine refuses: skip, with the reason.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    from onednn_usable import exit_if_onednn_unusable  # noqa: E402
    exit_if_onednn_unusable(TFPIN)
    unittest.main(verbosity=2)
