#!/usr/bin/python3
"""tfpin's engine against PyTorch on the same CNN, batch and threads, in one run.

For each model: `tfpin bench --forward_only --json` and a PyTorch 1.13 run of the torchvision model
(channels_last; torch.jit.optimize_for_inference for ResNet-50, PyTorch's fastest path there), with
the same batch size and intra-op threads, then images/sec of both, their ratio, and each as a
percentage of the FMA peak measured by a small FMA loop compiled on the fly (bench/machine.py) for
the widest vector the CPU has: zmm with AVX-512F, else ymm with AVX2+FMA (TFPIN_BENCH_ISA=avx2
measures the ymm peak of an AVX-512 CPU). The report names the CPU and the probe's vector. The
peak is probed again after each model: % peak uses the highest probe, and a WARNING line names the
probes when one read more than 10% below it (other load on the machine during that probe).

--train compares training steps instead: `tfpin bench` without --forward_only against PyTorch
training the same model the same way (train mode, batch-norm batch statistics, cross-entropy on
fixed labels, SGD lr 0.01 momentum 0.9, no auxiliary heads), counting 3x the forward FLOPs.
--rounds R runs both R times, interleaved, and reports medians (a shared machine's load hits
both alike).

The fair PyTorch baseline (docs/design.md, "Performance goals and how they are checked"): Debian's OpenBLAS behind
libblas.so.3, on kernels of the CPU's vector width. Before the runs, each peer's python (the host's,
and the root's) reports which core its OpenBLAS picks by itself; only when that core is narrower
than the CPU (an OpenBLAS that does not know the CPU falls back to e.g. Prescott) does the peer get
OPENBLAS_CORETYPE=SkylakeX (AVX-512), Haswell or Zen (AVX2), and the report says so. An inherited
OPENBLAS_CORETYPE is not passed on. Install with `scripts/setup --bench`. Standard library only.

--root DIR (a Debian 13 root made by bench/peer-root) adds the current releases' peers, each run
inside that root with chroot, one after another with the same batch and threads:
  torch2.6-eager    PyTorch 2.6, channels_last, torch.inference_mode (training: train mode, SGD)
  torch2.6-compile  torch.compile with inductor freezing (inference only)
  ort-cpu           ONNX Runtime 1.21, CPU execution provider, model from torch.onnx.export opset 17
  ort-dnnl          ONNX Runtime 1.21, oneDNN execution provider (same model)
and `tfpin bench` built inside the root against oneDNN 3.x next to this tree's build. Facts that
shape the runner: Debian 13's torch asserts on max_pool2d in TorchScript outside inference mode and
its NNC fuser hangs in LLVM code generation (switched off); it sends small-batch 1x1 convolutions to
BLAS, so the root has Debian's OpenMP OpenBLAS (libopenblas0-openmp). The PyTorch peers get the
malloc PyTorch's CPU launcher (torch.backends.xeon.run_cpu) preloads: tcmalloc, or --torch-malloc
jemalloc (with the launcher's MALLOC_CONF) or glibc; the report names it. The peers on oneDNN 3.x
(PyTorch, ort-dnnl) also get tfpin's answer to oneDNN's cache-size query preloaded, as the root's
tfpin has it built in: where a hypervisor hides CPUID leaf 0x8000001D oneDNN 3.x would otherwise
crash or compute garbage; elsewhere it forwards to oneDNN's own answer.

    bench/engine_vs_pytorch.py --models resnet50,googlenet --batch_size 32 --threads 2
    bench/engine_vs_pytorch.py --train --models resnet50 --batch_size 32 --rounds 3
    bench/peer-root /var/tmp/peers && bench/engine_vs_pytorch.py --root /var/tmp/peers --rounds 3
"""
import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import allowed_cpus, cpu, fma_peak, openblas_coretype  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MODELS = ["resnet50", "inception3", "vgg16", "googlenet", "alexnet"]
# Debian's python3-torch lives in Debian's interpreter, not in a pyenv/virtualenv one.
TORCH_PYTHON = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable

# Shared by both runners (each runs in its own interpreter): the torchvision model for
# model_name (no auxiliary heads when training), its input size, and one SGD training step.
MODEL_SETUP = r"""
m = torchvision.models
build = {
    "resnet50": lambda: m.resnet50(weights=None),
    "inception3": lambda: m.inception_v3(weights=None, aux_logits=not train, init_weights=False),
    "vgg16": lambda: m.vgg16(weights=None),
    "googlenet": lambda: m.googlenet(weights=None, aux_logits=False, init_weights=False),
    "alexnet": lambda: m.alexnet(weights=None),
}[model_name]
size = 299 if model_name == "inception3" else 224


def training_step(net, x):
    labels = torch.tensor([(i * 7919) % 1000 for i in range(x.shape[0])])
    opt = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    lossf = torch.nn.CrossEntropyLoss()
    def step():
        opt.zero_grad(set_to_none=True)
        loss = lossf(net(x), labels)
        loss.backward()
        opt.step()
        return loss.detach()
    return step
"""

TORCH_RUNNER = r"""
import json, sys, time
import torch, torchvision
model_name, batch, threads, steps, warmup, jit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "1"
train = sys.argv[7] == "1"
torch.set_num_threads(threads)
""" + MODEL_SETUP + r"""
x = torch.randn(batch, 3, size, size).to(memory_format=torch.channels_last)
if train:
    net = build().train().to(memory_format=torch.channels_last)
    step = training_step(net, x)
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

# The ONNX Runtime peers' session (PEER_RUNNER; bench/ort_layers.py profiles the same one): the
# model exported once per model and batch under the root's /tmp, intra-op threads, full graph
# optimization, optionally the profiler.
ORT_SESSION = r"""
def ort_session(ort, net, x, provider, profile_prefix=None):
    path = f"/tmp/tfpin-peers/{model_name}-{batch}.onnx"
    if not os.path.exists(path):
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with torch.no_grad():
            torch.onnx.export(net, x, path + ".part", opset_version=17, input_names=["x"],
                              output_names=["y"], dynamo=False)
        os.replace(path + ".part", path)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    if profile_prefix:
        options.enable_profiling = True
        options.profile_file_prefix = profile_prefix
    return ort.InferenceSession(path, options, providers=[provider, "CPUExecutionProvider"])
"""

# Runs inside the Debian 13 root (PyTorch 2.6, ONNX Runtime 1.21): one peer, one model.
PEER_RUNNER = r"""
import json, os, sys, time
peer, model_name, batch, threads, steps, warmup, train = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]), sys.argv[7] == "1"
import torch, torchvision
torch.set_num_threads(threads)
torch._C._jit_set_texpr_fuser_enabled(False)  # Debian 13's NNC hangs in LLVMCodeGen
""" + MODEL_SETUP + ORT_SESSION + r"""
torch.manual_seed(0)
x = torch.randn(batch, 3, size, size)
xc = x.to(memory_format=torch.channels_last)
detail = {}
if train:
    net = build().train().to(memory_format=torch.channels_last)
    run = training_step(net, xc)
    mode = torch.enable_grad
else:
    net = build().eval()
    mode = torch.inference_mode
    if peer == "torch2.6-eager":
        net = net.to(memory_format=torch.channels_last)
        run = lambda: net(xc)
    elif peer == "torch2.6-compile":
        import torch._inductor.config as inductor
        inductor.freezing = True
        net = net.to(memory_format=torch.channels_last)
        compiled = torch.compile(net)
        run = lambda: compiled(xc)
    else:
        import onnxruntime as ort
        provider = "DnnlExecutionProvider" if peer == "ort-dnnl" else "CPUExecutionProvider"
        if provider not in ort.get_available_providers():
            raise SystemExit(f"{provider} not available: {ort.get_available_providers()}")
        session = ort_session(ort, net, x, provider)
        detail["providers"] = session.get_providers()
        detail["onnxruntime"] = ort.__version__
        feed = {"x": x.numpy()}
        run = lambda: torch.from_numpy(session.run(None, feed)[0])
with mode():
    for _ in range(warmup):
        y = run()
    times = []
    for _ in range(steps):
        t0 = time.perf_counter()
        y = run()
        times.append(time.perf_counter() - t0)
out = y[0] if isinstance(y, tuple) else y
print(json.dumps({"images_per_sec": batch * steps / sum(times), "best_step": batch / min(times),
                  "finite": bool(torch.isfinite(out).all()), "torch": torch.__version__, **detail}))
"""
PEERS_IN_ROOT = ["torch2.6-eager", "torch2.6-compile", "ort-cpu", "ort-dnnl"]
# malloc for the PyTorch peers in the root, as PyTorch's own CPU launcher (torch.backends.xeon.
# run_cpu) sets it up: tcmalloc by default, or jemalloc with the launcher's MALLOC_CONF. With
# glibc's malloc a training step gives its activations back to the kernel and faults them in
# again (ResNet-50 at batch 32: ~4.9 GB of fresh pages a step), at a cost that moves with the host.
TORCH_MALLOCS = {
    "tcmalloc": ("/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4", {}),
    "jemalloc": ("/usr/lib/x86_64-linux-gnu/libjemalloc.so.2",
                 {"MALLOC_CONF": "oversize_threshold:1,background_thread:true,metadata_thp:auto"}),
    "glibc": (None, {}),
}
ROOT_TFPIN = "/opt/tfpin-build/cli/tfpin"
# tfpin's answer to oneDNN's cache-size query (engine/src/onednn_cache_sizes.cpp), preloaded into
# the peers that run oneDNN 3.x (PyTorch, ONNX Runtime's oneDNN provider): where a hypervisor hides
# CPUID leaf 0x8000001D they would crash or compute garbage without it, as tfpin would; elsewhere it
# forwards to oneDNN's own answer and changes nothing.
ROOT_CACHE_SIZES = "/opt/tfpin-build/engine/libtfpin-onednn-cache-sizes.so"


class Root:
    """A Debian root with /proc, /sys and /dev mounted while in use (unmounted on every exit)."""

    def __init__(self, path):
        self.path = Path(path).resolve()
        self.mounted = []

    def __enter__(self):
        for what, args in (("proc", ["-t", "proc", "proc"]), ("sys", ["--bind", "/sys"]),
                           ("dev", ["--bind", "/dev"])):
            target = self.path / what
            if subprocess.run(["mountpoint", "-q", str(target)]).returncode == 0:
                continue
            subprocess.run(["mount", *args, str(target)], check=True)
            self.mounted.append(target)
        return self

    def __exit__(self, *exc):
        for target in reversed(self.mounted):
            subprocess.run(["umount", "-l", str(target)])
        self.mounted = []

    def command(self, *argv):
        return ["chroot", str(self.path), *argv]


def peer_env(args):
    """The environment of the peers in the root (before OpenBLAS's core is settled)."""
    return {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "HOME": "/root", "LANG": "C.UTF-8",
            "OMP_NUM_THREADS": str(args.threads), "OPENBLAS_NUM_THREADS": str(args.threads)}


def torch_env(args):
    """The environment of PyTorch 1.13 on this machine (before OpenBLAS's core is settled)."""
    return dict(os.environ, OMP_NUM_THREADS=str(args.threads),
                OPENBLAS_NUM_THREADS=str(args.threads), MKL_NUM_THREADS=str(args.threads))


def torch_malloc_env(malloc):
    library, extra = TORCH_MALLOCS[malloc]
    return dict(extra, **({"LD_PRELOAD": library} if library else {}))


def run_peer(root, peer, model, args, blas):
    env = blas.apply(peer_env(args))
    if peer.startswith("torch"):
        env.update(torch_malloc_env(args.torch_malloc))
    if (peer.startswith("torch") or peer == "ort-dnnl") and \
            (root.path / ROOT_CACHE_SIZES.lstrip("/")).exists():
        env["LD_PRELOAD"] = " ".join(filter(None, [ROOT_CACHE_SIZES, env.get("LD_PRELOAD")]))
    steps = str(max(3, args.num_batches // 2))
    res = subprocess.run(root.command("/usr/bin/python3", "-c", PEER_RUNNER, peer, model,
                                      str(args.batch_size), str(args.threads), steps,
                                      str(max(2, args.num_warmup_batches)),
                                      "1" if args.train else "0"),
                         capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"{peer} {model} failed: {res.stderr.strip()[-2000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


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


def run_tfpin(exe, model, args, interop, prefix=()):
    cmd = [*prefix, str(exe), "bench", "--model", model, "--batch_size", str(args.batch_size),
           "--num_batches", str(args.num_batches), "--num_warmup_batches", str(args.num_warmup_batches),
           "--num_intra_threads", str(args.threads // interop), "--num_inter_threads", str(interop),
           "--data_format", "NHWC", "--json"] + ([] if args.train else ["--forward_only"])
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {res.stderr.strip()}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def run_torch(model, args, blas):
    env = blas.apply(torch_env(args))
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
    p.add_argument("--interop", default="1",
                   help="tfpin inter-op lanes (threads = interop x intra); a comma-separated list runs "
                        "tfpin once per value, and the faster per round is compared with the peers")
    p.add_argument("--num_batches", type=int, default=20)
    p.add_argument("--num_warmup_batches", type=int, default=3)
    p.add_argument("--tfpin", default=str(ROOT / "build" / "cli" / "tfpin"), help="the tfpin executable")
    p.add_argument("--no-torch", action="store_true", help="no PyTorch 1.13 from this machine")
    p.add_argument("--root", metavar="DIR",
                   help="a Debian 13 root from bench/peer-root: adds PyTorch 2.6, ONNX Runtime 1.21 and "
                        "tfpin on oneDNN 3.x")
    p.add_argument("--peers", default=",".join(PEERS_IN_ROOT),
                   help=f"peers to run in --root (default: {','.join(PEERS_IN_ROOT)})")
    p.add_argument("--torch-malloc", dest="torch_malloc", choices=list(TORCH_MALLOCS),
                   help="malloc of the PyTorch peers in --root, preloaded as PyTorch's CPU launcher "
                        "does (default: tcmalloc where the root has it, else glibc)")
    p.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    p.add_argument("--train", action="store_true",
                   help="training steps (forward, backward, SGD) instead of inference")
    p.add_argument("--rounds", type=int, default=1,
                   help="run every runner this many times, interleaved; report medians")
    args = p.parse_args()
    models = [m for m in args.models.split(",") if m]
    for m in models:
        if m not in MODELS:
            p.error(f"--models: unknown model '{m}' (valid: {', '.join(MODELS)})")
    try:
        interops = [int(x) for x in args.interop.split(",")]
    except ValueError:
        p.error(f"--interop={args.interop}: not a comma-separated list of integers (valid: e.g. 1 or 1,2)")
    for m in interops:
        if m < 1 or args.threads < 1 or args.threads % m:
            p.error(f"--threads={args.threads} must be a positive multiple of --interop={m}")
    if args.rounds < 1:
        p.error(f"--rounds={args.rounds} must be at least 1")
    peers = [x for x in args.peers.split(",") if x]
    for x in peers:
        if x not in PEERS_IN_ROOT:
            p.error(f"--peers: unknown peer '{x}' (valid: {', '.join(PEERS_IN_ROOT)})")
    if args.train:
        peers = [x for x in peers if x == "torch2.6-eager"]  # the others are inference engines
    if args.root and not (Path(args.root) / "usr/bin/python3").exists():
        p.error(f"--root={args.root} is not a root made by bench/peer-root (no usr/bin/python3)")
    if os.geteuid() != 0 and args.root:
        p.error("--root needs root (chroot)")
    malloc_note = None
    if args.root:
        def has(malloc):
            library = TORCH_MALLOCS[malloc][0]
            return library is None or (Path(args.root) / library.lstrip("/")).exists()
        if args.torch_malloc is None:
            args.torch_malloc = "tcmalloc" if has("tcmalloc") else "glibc"
            if args.torch_malloc == "glibc":
                malloc_note = ("WARNING: the root has no tcmalloc (libtcmalloc-minimal4t64; "
                               "bench/peer-root installs it): the PyTorch peers run on glibc's malloc")
        elif not has(args.torch_malloc):
            p.error(f"--torch-malloc={args.torch_malloc}: {args.root} has no "
                    f"{TORCH_MALLOCS[args.torch_malloc][0]} (bench/peer-root installs it)")

    machine = cpu()
    with tempfile.TemporaryDirectory() as tmp:
        peak = fma_peak(args.threads, tmp)
    probes = [peak.gflops] if peak.gflops is not None else []  # GFLOP/s of every peak probe
    openblas = {}  # peer environment -> OpenBlasChoice, for the JSON
    with contextlib.ExitStack() as stack:
        root = stack.enter_context(Root(args.root)) if args.root else None
        # (label, kind, function) in the order they run in each round.
        # One tfpin runner per inter-op value ("tfpin 2x1": 2 lanes of 1 thread); "tfpin" alone
        # when there is one value.
        def layout(m):
            return "" if len(interops) == 1 else f" {m}x{args.threads // m}"
        runners = [(f"tfpin{layout(m)}", "tfpin", lambda model, m=m: run_tfpin(args.tfpin, model, args, m))
                   for m in interops]
        if root and (root.path / ROOT_TFPIN.lstrip("/")).exists():
            runners += [(f"tfpin-root{layout(m)}", "tfpin",
                         lambda model, m=m: run_tfpin(ROOT_TFPIN, model, args, m, prefix=root.command()))
                        for m in interops]
        if not args.no_torch:
            probe = subprocess.run([TORCH_PYTHON, "-c", "import torch, torchvision"], capture_output=True)
            if probe.returncode == 0:
                host_blas = openblas["torch1.13"] = openblas_coretype([TORCH_PYTHON], torch_env(args))
                runners.append(("torch1.13", "peer", lambda model: run_torch(model, args, host_blas)))
                blas = blas_alternative()
                print(f"torch1.13: {host_blas.message}; channels_last, libblas.so.3 -> {blas}"
                      + ("" if "openblas" in blas else "  (WARNING: not OpenBLAS: the baseline is unfairly slow)"))
            else:
                print("torch1.13: PyTorch/torchvision not importable here: run scripts/setup --bench (skipped)",
                      file=sys.stderr)
        if root and peers:
            root_blas = openblas["root"] = openblas_coretype(root.command("/usr/bin/python3"),
                                                             peer_env(args))
            print(f"peers in {root.path}: {root_blas.message}")
            if any(x.startswith("torch") for x in peers):
                settings = " ".join(f"{k}={v}" for k, v in torch_malloc_env(args.torch_malloc).items())
                print(f"PyTorch peers: malloc {args.torch_malloc}" + (f" ({settings})" if settings else "")
                      + (f"; {malloc_note}" if malloc_note else ""))
            for peer in peers:
                runners.append((peer, "peer",
                                lambda model, peer=peer: run_peer(root, peer, model, args, root_blas)))

        # Versions each tfpin runs with, as it reports them.
        labels = {}
        for label, kind, _ in runners:
            if kind != "tfpin":
                continue
            in_root = label.startswith("tfpin-root")
            exe = ROOT_TFPIN if in_root else args.tfpin
            cmd = ([*root.command(), exe] if in_root else [exe]) + ["--version"]
            out = subprocess.run(cmd, capture_output=True, text=True).stdout
            line = next((l for l in out.splitlines() if l.startswith("oneDNN:")), "oneDNN: ?")
            onednn = line.split(":", 1)[1].split("(")[0].strip()
            # The ISA its kernels run with (the CPU's widest, or DNNL_MAX_CPU_ISA's cap).
            isa = line.split("; ISA ", 1)[1].strip() if "; ISA " in line else "?"
            labels[label] = f"{label} (oneDNN {onednn}, {isa})"
        print(f"cpu: {machine}")
        print(f"{'training' if args.train else 'inference'}: threads {args.threads} "
              f"(tfpin inter-op {args.interop}), batch {args.batch_size}, {peak}")
        print("(% peak: direct-convolution FLOPs per image x images/sec over the FMA peak; Winograd does "
              "fewer multiplications, so it can pass 100%" + ("; training counts 3x the forward)" if args.train else ")"))
        print("(best: the fastest step, which other load on a shared machine cannot inflate; "
              "tfpin/x: the best tfpin over this runner, median of the per-round ratios)")
        if args.rounds > 1:
            print(f"(img/s and best: medians of {args.rounds} interleaved rounds)")
        results = []
        for model in models:
            runs = {label: [] for label, _, _ in runners}
            errors = {}
            for _ in range(args.rounds):
                for label, _, fn in runners:
                    if label in errors:
                        continue
                    try:
                        runs[label].append(fn(model))
                    except RuntimeError as e:
                        errors[label] = str(e)
            # The peak again after each model: other load on a shared machine can only lower a
            # probe, so % peak uses the highest, and a probe far below it is reported.
            with tempfile.TemporaryDirectory() as tmp:
                again = fma_peak(args.threads, tmp)
            if again.gflops is not None:
                probes.append(again.gflops)
                if peak.gflops is None or again.gflops > peak.gflops:
                    peak = again
            gflop = next((r[0]["gflop_per_image"] for label, r in runs.items()
                          if r and "gflop_per_image" in r[0]), None)
            if gflop is None:
                print(f"{model}: tfpin failed: {errors}", file=sys.stderr)
                continue
            ips = lambda r: r["images_per_sec"]
            best = lambda r: r["step_images_per_sec"]["best"] if "step_images_per_sec" in r else r["best_step"]
            pct = lambda v: 100.0 * v * gflop / peak.gflops if peak.gflops else float("nan")
            tfpin_labels = [label for label, kind, _ in runners if kind == "tfpin" and runs[label]]
            # Per round: the faster tfpin; ratios of it to each runner, then the median.
            best_tfpin = [max(runs[label][k]["images_per_sec"] for label in tfpin_labels)
                          for k in range(min(len(runs[label]) for label in tfpin_labels))]
            print(f"\n{model}  ({gflop:.2f} GFLOP/image)")
            if probes and min(probes) < 0.9 * max(probes):
                print(f"  (WARNING: the FMA peak probes so far read "
                      f"{', '.join(f'{g:.0f}' for g in probes)} GFLOP/s: other load ran during the "
                      f"lower ones, and maybe during some runs; % peak uses {peak.gflops:.0f})")
            print(f"  {'runner':<30} {'img/s':>8} {'best':>8} {'% peak':>7} {'tfpin/x':>8}")
            row = {"model": model, "mode": "training" if args.train else "inference",
                   "batch_size": args.batch_size, "threads": args.threads, "interop": args.interop,
                   "rounds": args.rounds, "gflop_per_image": gflop, "cpu": machine.as_json(),
                   "fma_peak_gflops": peak.gflops, "fma_peak_isa": peak.isa,
                   "fma_peak_probes": list(probes),
                   "openblas": {k: v.as_json() for k, v in openblas.items()},
                   "torch_malloc": args.torch_malloc, "runners": {}}
            best_peer = None
            for label, kind, _ in runners:
                name = labels.get(label, label)
                if label in errors and not runs[label]:
                    # The last line is the runner's own message (tfpin's names the cause).
                    last = errors[label].strip().splitlines()[-1] if errors[label].strip() else "?"
                    print(f"  {name:<30} FAILED: {last}")
                    row["runners"][label] = {"error": errors[label]}
                    continue
                r = runs[label]
                med = statistics.median([ips(x) for x in r])
                ratio = statistics.median([t / ips(x) for t, x in zip(best_tfpin, r)])
                print(f"  {name:<30} {med:8.2f} {statistics.median([best(x) for x in r]):8.2f}"
                      f" {pct(med):7.1f} {ratio:8.2f}")
                row["runners"][label] = {"label": name, "kind": kind, "images_per_sec": med,
                                         "runs": [ips(x) for x in r], "ratio_best_tfpin": ratio,
                                         "percent_peak": pct(med),
                                         **({"detail": r[-1]} if kind == "peer" else {})}
                if kind == "peer" and (best_peer is None or med > best_peer[1]):
                    best_peer = (label, med, ratio)
            if best_peer:
                print(f"  best tfpin / best peer ({best_peer[0]}): {best_peer[2]:.2f}")
                row["best_peer"] = best_peer[0]
                row["ratio_best_peer"] = best_peer[2]
            results.append(row)
            sys.stdout.flush()
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
