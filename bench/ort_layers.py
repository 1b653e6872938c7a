#!/usr/bin/python3
"""tfpin's convolutions beside ONNX Runtime's, layer by layer, on the same model, batch and threads.

The ort-cpu peer of bench/engine_vs_pytorch.py (ONNX Runtime 1.21, CPU execution provider, the
same torch.onnx.export model, threads and session options) runs inside a bench/peer-root root with
its profiler on; each node's kernel time is the median over the profiled steps. `tfpin bench
--trace_file` gives tfpin's per-step medians. The two lists of convolutions are paired by output
shape (N, C, H, W), in the order each runs them: layers of one shape that the two run in different
orders (a downsampling branch beside its block) pair crosswise, so read such pairs as a group.
Prints the pairs with both times and their ratio, the sums, and each side's other work.

    bench/ort_layers.py --root /var/tmp/peers --model resnet50 --batch_size 1 --threads 2
    bench/ort_layers.py --root /var/tmp/peers --model googlenet --batch_size 1 -- --force_kernel jit_1x1

Standard library here; ONNX Runtime, PyTorch and numpy inside the root (`bench/peer-root`).
"""
import argparse
import collections
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_vs_pytorch import MODEL_SETUP, ORT_SESSION, Root, peer_env  # noqa: E402
from layer_profile import SHAPE, STEP  # noqa: E402  (the -v step listing)
from machine import cpu  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
# Inside the root: engine_vs_pytorch.py's ort-cpu session (the same export, reused by either), with
# the profiler on; prints per-node medians as JSON.
PROFILER = r"""
import json, os, statistics, sys, time, collections
model_name, batch, threads, steps, warmup, prefix = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
import torch, torchvision
torch.set_num_threads(threads)
train = False
""" + MODEL_SETUP + ORT_SESSION + r"""
import onnxruntime as ort
x = torch.randn(batch, 3, size, size)
session = ort_session(ort, build().eval(), x, "CPUExecutionProvider", profile_prefix=prefix)
feed = {"x": x.numpy()}
for _ in range(warmup):
    session.run(None, feed)
times = []
for _ in range(steps):
    t0 = time.perf_counter()
    session.run(None, feed)
    times.append(time.perf_counter() - t0)
events = json.load(open(session.end_profiling()))
durations, info, order = collections.defaultdict(list), {}, []
for e in events:
    if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
        continue
    name = e["name"][:-len("_kernel_time")]
    if name not in info:
        order.append(name)
        shapes = e["args"].get("output_type_shape") or [{}]
        info[name] = (e["args"].get("op_name", "?"), next(iter(shapes[0].values()), []))
    durations[name].append(e["dur"] / 1000.0)
# The last `steps` occurrences of each node are the timed runs (the warmup ones come first).
nodes = [{"name": n, "op": info[n][0], "shape": info[n][1],
          "ms": statistics.median(durations[n][-steps:])} for n in order]
print(json.dumps({"step_ms": 1000 * statistics.median(times), "onnxruntime": ort.__version__,
                  "nodes": nodes}))
"""

def nchw(shape):
    """ORT's output shape as N, C, H, W (its NCHWc tensors are N, C/b, H, W, b)."""
    if len(shape) == 5:
        return (shape[0], shape[1] * shape[4], shape[2], shape[3])
    return tuple(shape)


def tfpin_convolutions(args, work):
    """[(layer name, output shape, kernel, ms a step)] in step order, and the other steps' ms."""
    trace = Path(work) / "trace.json"
    cmd = [args.tfpin, "bench", "--model", args.model, "--batch_size", str(args.batch_size),
           "--num_intra_threads", str(args.threads), "--num_inter_threads", "1",
           "--num_batches", str(args.num_batches), "--forward_only", "--trace_file", str(trace),
           "--json", "-v", *args.bench_flags]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} failed ({run.returncode}): {run.stderr.strip()}")
    report = json.loads(run.stdout.strip().splitlines()[-1])
    kept = {c["step"]: c["kept"] for c in report["compile"]["kernel_choices"]}
    shapes, kernels = {}, {}
    for line in run.stderr.splitlines():
        m = STEP.match(line)
        if m and m.group(2).startswith("convolution"):
            dims = SHAPE.findall(m.group(4))
            shapes[m.group(1)] = tuple(int(d) for d in dims[-1].split("x"))
            kernels[m.group(1)] = kept.get(m.group(1), m.group(3))
    durations, first = collections.defaultdict(list), {}
    for e in json.loads(trace.read_text())["traceEvents"]:
        if e.get("ph") == "X":
            durations[e["name"]].append(e["dur"] / 1000.0)
            first.setdefault(e["name"], e["ts"])
    per_step = {n: statistics.median(d) * len(d) / args.num_batches for n, d in durations.items()}
    convs = [(n, shapes[n], kernels[n], per_step[n]) for n in sorted(per_step, key=first.get)
             if n in shapes]
    other = sum(ms for n, ms in per_step.items() if n not in shapes)
    return convs, other, report


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--root", required=True, metavar="DIR", help="a bench/peer-root root")
    p.add_argument("--tfpin", default=str(ROOT / "build" / "cli" / "tfpin"))
    p.add_argument("--model", default="resnet50", help="a model of the zoo (resnet50, googlenet...)")
    p.add_argument("--batch_size", type=int, default=1)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--num_batches", type=int, default=60)
    p.add_argument("bench_flags", nargs="*", metavar="-- FLAG",
                   help="after --: more `tfpin bench` flags (--force_kernel K, ...)")
    args = p.parse_args()
    for flag in ("batch_size", "threads", "num_batches"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag} {getattr(args, flag)}: must be at least 1")
    root_dir = Path(args.root).resolve()
    if not (root_dir / "usr/bin/python3").exists():
        p.error(f"--root {args.root}: no python3 in it (make one with bench/peer-root)")

    with tempfile.TemporaryDirectory() as work:
        convs, tfpin_other, report = tfpin_convolutions(args, work)
    with Root(root_dir) as root, tempfile.TemporaryDirectory(dir=root_dir / "tmp") as work:
        inside = "/" + str(Path(work).relative_to(root_dir))
        env = dict(peer_env(args), OMP_NUM_THREADS=str(args.threads))
        res = subprocess.run(root.command("/usr/bin/python3", "-c", PROFILER, args.model,
                                          str(args.batch_size), str(args.threads),
                                          str(args.num_batches), "10", inside + "/ort"),
                             capture_output=True, text=True, env=env)
    if res.returncode != 0:
        raise SystemExit(f"ONNX Runtime on {args.model} failed: {res.stderr.strip()[-2000:]}")
    ort = json.loads(res.stdout.strip().splitlines()[-1])
    ort_convs = [n for n in ort["nodes"] if n["op"] in ("Conv", "FusedConv")]
    ort_other = sum(n["ms"] for n in ort["nodes"] if n not in ort_convs)

    # Pair by output shape, in each side's order.
    queues = collections.defaultdict(collections.deque)
    for n in ort_convs:
        queues[nchw(n["shape"])].append(n)
    print(f"cpu: {cpu()}; {args.model}, batch {args.batch_size}, {args.threads} threads, inference")
    print(f"tfpin: oneDNN {report['onednn']['version']} ({report['onednn']['isa']}), "
          f"{report['images_per_sec']:.2f} img/s; ONNX Runtime {ort['onnxruntime']} CPU: "
          f"{1000 * args.batch_size / ort['step_ms']:.2f} img/s (median step {ort['step_ms']:.2f} ms)")
    print("(ms a step: medians over the traced / profiled steps; pairs by output shape in order)\n")
    print(f"{'tfpin layer':34s} {'output':>16s} {'tfpin ms':>9s} {'ORT ms':>8s} {'ratio':>6s}  kernel")
    paired = [0.0, 0.0]
    tfpin_unpaired = 0.0
    for name, shape, kernel, ms in convs:
        peer = queues[shape].popleft() if queues[shape] else None
        ort_ms = peer["ms"] if peer else None
        ratio = f"{ms / ort_ms:6.2f}" if ort_ms else "     -"
        if peer:
            paired[0] += ms
            paired[1] += ort_ms
        else:
            tfpin_unpaired += ms
        print(f"{name:34s} {'x'.join(map(str, shape)):>16s} {ms:9.3f} "
              f"{ort_ms if ort_ms is not None else float('nan'):8.3f} {ratio}  {kernel}")
    unpaired = [n for q in queues.values() for n in q]
    print(f"\npaired convolutions: tfpin {paired[0]:.2f} ms, ORT {paired[1]:.2f} ms; unpaired: tfpin "
          f"{tfpin_unpaired:.2f} ms, ORT {sum(n['ms'] for n in unpaired):.2f} ms")
    print(f"other steps: tfpin {tfpin_other:.2f} ms, ORT nodes {ort_other:.2f} ms; "
          f"ORT's step beyond its nodes: {ort['step_ms'] - sum(n['ms'] for n in ort['nodes']):.2f} ms")


if __name__ == "__main__":
    main()
