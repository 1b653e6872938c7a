#!/usr/bin/python3
"""The zoo's ResNet-50 against the same network exported to ONNX by Debian's PyTorch (issue #15):
`tfpin bench --model resnet50` and `tfpin bench --model resnet50.onnx`, inference, NCHW, the
same batch and threads, interleaved round by round. Prints the median images/sec of each, their
ratio, the CPU and the FMA peak measured in the same run (bench/machine.py: zmm with AVX-512F, else
ymm with AVX2+FMA). Usage:
    bench/onnx_vs_zoo.py [--batch_size 32] [--rounds 5] [--num_batches 10] [--threads 2]"""
import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from machine import ISA_HELP, cpu, fma_peak  # noqa: E402


def export_resnet50(path):
    import torch
    import torchvision
    model = torchvision.models.resnet50().eval()
    torch.onnx.export(model, torch.randn(1, 3, 224, 224), str(path), input_names=["images"],
                      output_names=["logits"], dynamic_axes={"images": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=13)


def bench(tfpin, model, a):
    r = subprocess.run([tfpin, "bench", "--model", model, "--batch_size", str(a.batch_size),
                        "--num_batches", str(a.num_batches), "--num_warmup_batches", "2",
                        "--data_format", "NCHW", "--forward_only", "--num_intra_threads", str(a.threads),
                        "--json"], capture_output=True, text=True, timeout=3600)
    if r.returncode != 0:
        sys.exit(f"tfpin bench --model {model} failed:\n{r.stderr}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser(epilog=ISA_HELP)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--num_batches", type=int, default=10)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--tfpin", default=str(ROOT / "build" / "cli" / "tfpin"))
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        onnx_file = Path(tmp) / "resnet50.onnx"
        export_resnet50(onnx_file)
        peak = fma_peak(a.threads, tmp)
        speeds = {"zoo resnet50": [], "resnet50.onnx": []}
        details = {}
        for r in range(a.rounds):
            for name, model in (("zoo resnet50", "resnet50"), ("resnet50.onnx", str(onnx_file))):
                j = bench(a.tfpin, model, a)
                speeds[name].append(j["images_per_sec"])
                details[name] = j
                print(f"round {r + 1} {name}: {j['images_per_sec']:.2f} images/sec", flush=True)
    print(f"\nResNet-50 inference, batch {a.batch_size}, {a.threads} threads, NCHW, medians of {a.rounds} "
          f"interleaved rounds of {a.num_batches} steps"
          + f"; {cpu()}, {peak}")
    for name, values in speeds.items():
        j = details[name]
        median = statistics.median(values)
        gflops = median * j["gflop_per_image"]
        print(f"  {name:14s} {median:7.2f} images/sec  ({gflops:.0f} GFLOP/s"
              + (f", {100 * gflops / peak.gflops:.0f}% of peak" if peak.gflops else "")
              + f"; {j['compile']['steps']} steps, {j['compile']['reorders']} reorders)")
    ratio = statistics.median(speeds["resnet50.onnx"]) / statistics.median(speeds["zoo resnet50"])
    print(f"  ONNX / zoo: {ratio:.3f}")


if __name__ == "__main__":
    main()
