#!/usr/bin/python3
"""tfpin's engine against PyTorch on the same CNN, batch and threads, in one run.

For each model: `tfpin bench --forward_only --json` and a PyTorch 1.13 run of the torchvision model
(channels_last; torch.jit.optimize_for_inference for ResNet-50, PyTorch's fastest path there), with
the same batch size and intra-op threads, then images/sec of both, their ratio, and each as a
percentage of the FMA peak measured by a small AVX-512 FMA loop compiled on the fly.

--train compares training steps instead: `tfpin bench` without --forward_only against PyTorch
training the same model the same way (train mode, batch-norm batch statistics, cross-entropy on
fixed labels, SGD lr 0.01 momentum 0.9, no auxiliary heads), counting 3x the forward FLOPs.
--rounds R runs both R times, interleaved, and reports medians (a shared machine's load hits
both alike).

The fair PyTorch baseline (DESIGN.md, "Performance goals in force"): Debian's OpenBLAS behind
libblas.so.3 and OPENBLAS_CORETYPE=SKYLAKEX (OpenBLAS 0.3.21 does not recognise this CPU). Install
with `scripts/setup --bench`. Standard library only.

    bench/engine_vs_pytorch.py --models resnet50,googlenet --batch_size 32 --threads 2
    bench/engine_vs_pytorch.py --train --models resnet50 --batch_size 32 --rounds 3
"""
import argparse
import json
import os
import statistics
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["resnet50", "inception3", "vgg16", "googlenet", "alexnet"]
# Debian's python3-torch lives in Debian's interpreter, not in a pyenv/virtualenv one.
TORCH_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable

FMA_PROBE = r"""
#include <immintrin.h>
#include <pthread.h>
#include <sched.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
// 12 independent accumulator chains of 512-bit FMAs: enough in flight for 2 FMA pipes x 4 cycles.
static double run(long iters) {
  __m512 b = _mm512_set1_ps(1.0000001f), c = _mm512_set1_ps(1e-7f);
  __m512 a0 = _mm512_set1_ps(0), a1 = _mm512_set1_ps(1), a2 = _mm512_set1_ps(2),
         a3 = _mm512_set1_ps(3), a4 = _mm512_set1_ps(4), a5 = _mm512_set1_ps(5),
         a6 = _mm512_set1_ps(6), a7 = _mm512_set1_ps(7), a8 = _mm512_set1_ps(8),
         a9 = _mm512_set1_ps(9), a10 = _mm512_set1_ps(10), a11 = _mm512_set1_ps(11);
  auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < iters; ++k) {
#define F(x) x = _mm512_fmadd_ps(x, b, c);
    F(a0) F(a1) F(a2) F(a3) F(a4) F(a5) F(a6) F(a7) F(a8) F(a9) F(a10) F(a11)
  }
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  __m512 s = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)),
                           _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7)));
  s = _mm512_add_ps(s, _mm512_add_ps(_mm512_add_ps(a8, a9), _mm512_add_ps(a10, a11)));
  if (_mm512_reduce_add_ps(s) == 12345.f) std::printf(" ");
  return iters * 12.0 * 32 / dt / 1e9;
}
int main(int argc, char** argv) {
  int n = std::atoi(argv[1]);
  std::vector<int> cpus;
  for (int i = 2; i < argc; ++i) cpus.push_back(std::atoi(argv[i]));
  // Best of several concurrent rounds: a shared machine only ever makes the probe slower.
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    std::vector<double> r(n);
    std::vector<std::thread> ts;
    for (int t = 0; t < n; ++t) {
      ts.emplace_back([&, t] {
        cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpus[t % cpus.size()], &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
        if (round == 0) run(20000000);  // warm up (frequency, power licence)
        r[t] = run(60000000);
      });
    }
    for (auto& t : ts) t.join();
    double sum = 0;
    for (double x : r) sum += x;
    if (sum > best) best = sum;
  }
  std::printf("%.2f\n", best);
}
"""

TORCH_RUNNER = r"""
import json, sys, time
import torch, torchvision
model_name, batch, threads, steps, warmup, jit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
train = sys.argv[7] == "1"
torch.set_num_threads(threads)
m = torchvision.models
build = {
    "resnet50": lambda: m.resnet50(weights=None),
    "inception3": lambda: m.inception_v3(weights=None, aux_logits=True, init_weights=False),
    "vgg16": lambda: m.vgg16(weights=None),
    "googlenet": lambda: m.googlenet(weights=None, aux_logits=False, init_weights=False),
    "alexnet": lambda: m.alexnet(weights=None),
}[model_name]
size = 299 if model_name == "inception3" else 224
x = torch.randn(batch, 3, size, size).to(memory_format=torch.channels_last)
if train:
    if model_name == "inception3":
        build = lambda: m.inception_v3(weights=None, aux_logits=False, init_weights=False)
    net = build().train().to(memory_format=torch.channels_last)
    labels = torch.tensor([(i * 7919) % 1000 for i in range(batch)])
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    lossf = torch.nn.CrossEntropyLoss()
    def step():
        opt.zero_grad(set_to_none=True)
        loss = lossf(net(x), labels)
        loss.backward()
        opt.step()
        return loss.detach()
    for _ in range(warmup):
        y = step()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        y = step()
        times.append(time.perf_counter() - t0)
    print(json.dumps({"images_per_sec": batch * steps / sum(times), "best_step": batch / min(times), "finite": bool(torch.isfinite(y).all()),
                      "torch": torch.__version__, "blas": torch.__config__.show().count("BLAS_INFO=open")}))
    sys.exit(0)
net = build().eval().to(memory_format=torch.channels_last)
with torch.no_grad():
    if jit:
        net = torch.jit.optimize_for_inference(torch.jit.script(net))
    for _ in range(warmup):
        y = net(x)
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        y = net(x)
        times.append(time.perf_counter() - t0)
out = y[0] if isinstance(y, tuple) else y
print(json.dumps({"images_per_sec": batch * steps / sum(times), "best_step": batch / min(times), "finite": bool(torch.isfinite(out).all()),
                  "torch": torch.__version__, "blas": torch.__config__.show().count("BLAS_INFO=open")}))
"""


def allowed_cpus():
    return sorted(os.sched_getaffinity(0))


def fma_peak(threads, workdir):
    """GFLOP/s of `threads` cores running FMAs flat out (None when no AVX-512 compiler/CPU)."""
    if shutil.which("g++") is None:
        return None
    src = Path(workdir) / "fma.cpp"
    exe = Path(workdir) / "fma"
    src.write_text(FMA_PROBE)
    build = subprocess.run(["g++", "-O2", "-mavx512f", "-pthread", "-o", str(exe), str(src)],
                           capture_output=True, text=True)
    if build.returncode != 0:
        print(f"fma probe: cannot compile: {build.stderr.strip()}", file=sys.stderr)
        return None
    cpus = [str(c) for c in allowed_cpus()]
    run = subprocess.run([str(exe), str(threads), *cpus], capture_output=True, text=True)
    if run.returncode != 0:
        print("fma probe: the CPU has no AVX-512 (or the probe crashed)", file=sys.stderr)
        return None
    return float(run.stdout.strip())


def blas_alternative():
    try:
        out = subprocess.run(["update-alternatives", "--display", "libblas.so.3-x86_64-linux-gnu"],
                             capture_output=True, text=True).stdout
    except FileNotFoundError:
        return "unknown"
    for line in out.splitlines():
        if "link currently points to" in line:
            return line.split("points to", 1)[1].strip()
    return "unknown"


def run_tfpin(exe, model, args):
    cmd = [str(exe), "bench", "--model", model, "--batch_size", str(args.batch_size),
           "--num_batches", str(args.num_batches), "--num_warmup_batches", str(args.num_warmup_batches),
           "--num_intra_threads", str(args.threads // args.interop), "--num_inter_threads", str(args.interop),
           "--data_format", "NHWC", "--json"] + ([] if args.train else ["--forward_only"])
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {res.stderr.strip()}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def run_torch(model, args):
    env = dict(os.environ)
    env.update({"OPENBLAS_CORETYPE": "SKYLAKEX", "OMP_NUM_THREADS": str(args.threads),
                "OPENBLAS_NUM_THREADS": str(args.threads), "MKL_NUM_THREADS": str(args.threads)})
    jit = "1" if model == "resnet50" and not args.train else "0"
    res = subprocess.run([TORCH_PYTHON, "-c", TORCH_RUNNER, model, str(args.batch_size),
                          str(args.threads), str(max(3, args.num_batches // 2)),
                          str(max(1, args.num_warmup_batches)), jit, "1" if args.train else "0"],
                         capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"PyTorch {model} failed: {res.stderr.strip()[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default=",".join(MODELS), help="comma-separated (default: all five)")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--threads", type=int, default=len(allowed_cpus()), help="cores used by each (default: all allowed)")
    p.add_argument("--interop", type=int, default=1, help="tfpin inter-op lanes (threads = interop x intra)")
    p.add_argument("--num_batches", type=int, default=20)
    p.add_argument("--num_warmup_batches", type=int, default=3)
    p.add_argument("--tfpin", default=str(ROOT / "build" / "cli" / "tfpin"), help="the tfpin executable")
    p.add_argument("--no-torch", action="store_true", help="only tfpin (and the FMA peak)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--train", action="store_true",
                   help="training steps (forward, backward, SGD) instead of inference")
    p.add_argument("--rounds", type=int, default=1,
                   help="run tfpin and PyTorch this many times, interleaved; report medians")
    args = p.parse_args()
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            p.error(f"--models: unknown model '{m}' (valid: {', '.join(MODELS)})")
    if args.threads < 1 or args.threads % args.interop:
        p.error(f"--threads={args.threads} must be a positive multiple of --interop={args.interop}")

    with tempfile.TemporaryDirectory() as tmp:
        peak = fma_peak(args.threads, tmp)
    blas = blas_alternative()
    torch_ok = not args.no_torch
    if torch_ok:
        probe = subprocess.run([TORCH_PYTHON, "-c", "import torch, torchvision"], capture_output=True)
        if probe.returncode != 0:
            print("PyTorch/torchvision not importable: run scripts/setup --bench (skipping PyTorch)", file=sys.stderr)
            torch_ok = False
    if args.rounds < 1:
        p.error(f"--rounds={args.rounds} must be at least 1")
    print(f"{'training' if args.train else 'inference'}: "
          f"threads {args.threads} (tfpin inter-op {args.interop}), batch {args.batch_size}, "
          f"FMA peak {peak:.0f} GFLOP/s" if peak else "FMA peak: not measured")
    if torch_ok:
        print(f"PyTorch: OPENBLAS_CORETYPE=SKYLAKEX, channels_last, libblas.so.3 -> {blas}"
              + ("" if "openblas" in blas else "  (WARNING: not OpenBLAS: the baseline is unfairly slow)"))
    print("(% peak: direct-convolution FLOPs per image x images/sec over the FMA peak; Winograd does "
          "fewer multiplications, so it can pass 100%" + ("; training counts 3x the forward)" if args.train else ")"))
    print("(best: the fastest step, which other load on a shared machine cannot inflate)")
    if args.rounds > 1:
        print(f"(img/s and best: medians of {args.rounds} interleaved rounds)")
    header = f"{'model':<11} {'GFLOP/img':>9} {'tfpin img/s':>11} {'best':>7} {'% peak':>6}"
    if torch_ok:
        header += f" {'torch img/s':>11} {'best':>7} {'% peak':>6} {'tfpin/torch':>11}"
    print(header)
    results = []
    median = lambda values: statistics.median(values)
    for model in models:
        mine_runs, theirs_runs = [], []
        for _ in range(args.rounds):
            mine_runs.append(run_tfpin(args.tfpin, model, args))
            if torch_ok:
                theirs_runs.append(run_torch(model, args))
        mine = mine_runs[-1]
        mine_ips = median([r["images_per_sec"] for r in mine_runs])
        mine_best = median([r["step_images_per_sec"]["best"] for r in mine_runs])
        row = {"model": model, "mode": "training" if args.train else "inference",
               "batch_size": args.batch_size, "threads": args.threads, "interop": args.interop,
               "rounds": args.rounds, "gflop_per_image": mine["gflop_per_image"],
               "tfpin_images_per_sec": mine_ips, "tfpin_runs": [r["images_per_sec"] for r in mine_runs],
               "fma_peak_gflops": peak}
        gflop = mine["gflop_per_image"]
        pct = lambda ips: 100.0 * ips * gflop / peak if peak else float("nan")
        row["tfpin_best_step"] = mine_best
        line = (f"{model:<11} {gflop:9.2f} {mine_ips:11.2f} {mine_best:7.2f}"
                f" {pct(mine_ips):6.1f}")
        if torch_ok:
            theirs_ips = median([r["images_per_sec"] for r in theirs_runs])
            theirs_best = median([r["best_step"] for r in theirs_runs])
            row["torch_images_per_sec"] = theirs_ips
            row["torch_runs"] = [r["images_per_sec"] for r in theirs_runs]
            row["torch_best_step"] = theirs_best
            # The ratio of each interleaved pair, then their median: both saw the same load.
            row["ratio"] = median([a["images_per_sec"] / b["images_per_sec"]
                                   for a, b in zip(mine_runs, theirs_runs)])
            line += (f" {theirs_ips:11.2f} {theirs_best:7.2f}"
                     f" {pct(theirs_ips):6.1f}"
                     f" {row['ratio']:11.2f}")
        results.append(row)
        print(line, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
