#!/usr/bin/python3
"""Where a tfpin step goes: time and % of the FMA peak per convolution shape and per layer.

Runs `tfpin bench -v --json --trace_file` once (a model, an ONNX file, or a chain of identical
convolutions written for the run), takes each step's median time from the trace and each
convolution's and inner product's FLOPs from the compiled steps' shapes, and prints:
  - per group of layers (kernel size, stride, and in training the pass): ms a step, GFLOP (direct
    convolution, so Winograd layers can pass 100%) and % of the FMA peak probed before and after
    the run with the widest vector (bench/machine.py; TFPIN_BENCH_ISA=avx2 for the ymm peak);
  - the slowest layers with the kernel the executor kept (`compile.kernel_choices`);
  - the other steps by kind (batch norm, pooling, sums, reorders...).

    bench/layer_profile.py --model resnet50 --batch_size 32 --forward_only
    bench/layer_profile.py --model resnet50 --batch_size 32          # training: three passes
    bench/layer_profile.py --chain 256,14,3 --batch_size 32 --forward_only   # 6 x (3x3 conv + ReLU)
    bench/layer_profile.py --root /var/tmp/peers ...     # the oneDNN 3.x build bench/peer-root made
    DNNL_MAX_CPU_ISA=AVX2 ONEDNN_MAX_CPU_ISA=AVX2 TFPIN_BENCH_ISA=avx2 bench/layer_profile.py ...

--chain C,HW,K[,N] needs Python's onnx (python3-onnx, `scripts/setup`). Standard library otherwise.
"""
import argparse
import collections
import json
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from machine import ISA_HELP, cpu, fma_peak  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
PEER_ROOT_TFPIN = "/opt/tfpin-build/cli/tfpin"  # where bench/peer-root builds it
# "  12 layer1.0.conv1   convolution+relu   jit_1x1:avx512_core   aBcd16b 1x64x56x56@arena+0 ..."
STEP = re.compile(r"^\s*\d+\s+(\S+)\s+(\S+)\s+(\S+)\s+(.*)$")
SHAPE = re.compile(r"(\d+(?:x\d+)+)@")


def write_chain(spec, batch, path):
    """N convolutions C -> C, KxK, stride 1, padded to keep HWxHW, each with a ReLU."""
    try:
        fields = [int(f) for f in spec.split(",")]
    except ValueError:
        fields = []
    if len(fields) not in (3, 4) or min(fields) < 1 or fields[2] % 2 == 0:
        raise SystemExit(f"--chain {spec}: expected C,HW,K[,N], positive integers with K odd")
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    c, hw, k, n = (fields + [6])[:4]
    rng = np.random.default_rng(0)
    nodes, weights, prev = [], [], "x"
    for i in range(n):
        w = (rng.standard_normal((c, c, k, k)) * (2.0 / (c * k * k)) ** 0.5).astype(np.float32)
        weights += [numpy_helper.from_array(w, f"w{i}"),
                    numpy_helper.from_array(np.zeros(c, np.float32), f"b{i}")]
        nodes.append(helper.make_node("Conv", [prev, f"w{i}", f"b{i}"], [f"conv{i}"],
                                      kernel_shape=[k, k], pads=[k // 2] * 4))
        nodes.append(helper.make_node("Relu", [f"conv{i}"], [f"relu{i}"]))
        prev = f"relu{i}"
    shape = [batch, c, hw, hw]
    graph = helper.make_graph(nodes, "chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(prev, TensorProto.FLOAT, shape)],
                              weights)
    # IR 7 / opset 13: what Debian 12's libonnx checks.
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7),
              path)


def compiled_layers(verbose):
    """name -> (FLOPs, group) of every forward convolution and inner product, and step name ->
    the kernel the compile listed (the executor may keep a timed alternative instead)."""
    layers, kernels = {}, {}
    for line in verbose.splitlines():
        m = STEP.match(line)
        if not m:
            continue
        name, op, impl, rest = m.groups()
        kernels[name] = impl
        if ":" in name:
            continue
        if not op.startswith(("convolution", "inner_product")) or "backward" in op:
            continue
        shapes = [[int(d) for d in s.split("x")] for s in SHAPE.findall(rest)]
        if len(shapes) < 3:
            continue
        src, w, dst = shapes[0], shapes[1], shapes[-1]
        if len(w) == len(dst) + 1:
            w = w[1:]  # grouped: (groups, out/groups, in/groups, kh, kw)
        flops = 2
        for d in dst + w[1:]:
            flops *= d
        if op.startswith("inner_product"):
            group = "inner product"
        else:
            stride = round(src[2] / dst[2]) if dst[2] else 1
            group = f"{w[2]}x{w[3]}" + (f" stride {stride}" if stride > 1 else "")
        layers[name] = (flops, group)
    return layers, kernels


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=ISA_HELP)
    p.add_argument("--tfpin", default=str(ROOT / "build" / "cli" / "tfpin"))
    p.add_argument("--root", metavar="DIR",
                   help="run the tfpin built inside a bench/peer-root root (oneDNN 3.x) instead")
    what = p.add_mutually_exclusive_group()
    what.add_argument("--model", default="resnet50", help="a model name or an ONNX file")
    what.add_argument("--chain", metavar="C,HW,K[,N]",
                      help="N (default 6) convolutions C -> C, KxK, on HWxHW, each with a ReLU")
    p.add_argument("--batch_size", type=int, default=32)
    p.add_argument("--threads", type=int, default=2, help="--num_intra_threads (one lane)")
    p.add_argument("--forward_only", action="store_true", help="inference (default: training)")
    p.add_argument("--num_batches", type=int, default=10)
    p.add_argument("--num_warmup_batches", type=int, default=3)
    p.add_argument("--top", type=int, default=15, help="slowest layers listed")
    p.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    p.add_argument("bench_flags", nargs="*", metavar="-- FLAG",
                   help="after --: more `tfpin bench` flags (--no_own_1x1, --force_kernel K, ...)")
    args = p.parse_args()
    for flag in ("batch_size", "threads", "num_batches"):
        if getattr(args, flag) < 1:
            p.error(f"--{flag} {getattr(args, flag)}: must be at least 1")

    # Files the run reads and writes live under the root it runs in.
    root = Path(args.root).resolve() if args.root else Path("/")
    tfpin = [args.tfpin] if not args.root else ["chroot", str(root), PEER_ROOT_TFPIN]
    with tempfile.TemporaryDirectory(dir=root / "tmp") as work:
        inside = "/" + str(Path(work).relative_to(root))
        model = args.model
        if args.chain:
            write_chain(args.chain, args.batch_size, Path(work) / "chain.onnx")
            model = inside + "/chain.onnx"
        trace = Path(work) / "trace.json"
        peak_before = fma_peak(args.threads, work)
        cmd = [*tfpin, "bench", "--model", model, "--batch_size", str(args.batch_size),
               "--num_intra_threads", str(args.threads), "--num_inter_threads", "1",
               "--num_batches", str(args.num_batches),
               "--num_warmup_batches", str(args.num_warmup_batches),
               "--trace_file", inside + "/trace.json", "--json", "-v"]
        if args.forward_only:
            cmd.append("--forward_only")
        cmd += args.bench_flags
        run = subprocess.run(cmd, capture_output=True, text=True)
        if run.returncode != 0:
            raise SystemExit(f"{' '.join(cmd)} failed ({run.returncode}): {run.stderr.strip()}")
        peak_after = fma_peak(args.threads, work)
        report = json.loads(run.stdout.strip().splitlines()[-1])
        events = [e for e in json.loads(trace.read_text())["traceEvents"] if e.get("ph") == "X"]

    peaks = [x.gflops for x in (peak_before, peak_after) if x.gflops]
    peak = max(peaks) if peaks else None
    layers, kernels = compiled_layers(run.stderr)
    kept = {c["step"]: c["kept"] for c in report.get("compile", {}).get("kernel_choices", [])}
    durations = collections.defaultdict(list)
    kinds = {}
    for e in events:
        durations[e["name"]].append(e["dur"] / 1000.0)
        kinds[e["name"]] = e.get("cat", "")
    # Per step: the median occurrence times the occurrences a step.
    per_step = {n: statistics.median(d) * len(d) / args.num_batches for n, d in durations.items()}
    total = sum(per_step.values())

    groups = collections.defaultdict(lambda: [0.0, 0.0])
    rows, others = [], collections.defaultdict(float)
    for name, ms in per_step.items():
        layer, _, part = name.partition(":")
        if layer in layers and part in ("", "backward_data", "backward_weights"):
            flops, group = layers[layer]
            pass_name = {"": "forward", "backward_data": "data gradient",
                         "backward_weights": "weight gradient"}[part]
            key = group if args.forward_only else f"{group}, {pass_name}"
            groups[key][0] += ms
            groups[key][1] += flops
            rows.append((ms, name, kept.get(name, kernels.get(name, kinds[name])), flops))
        else:
            others[kinds[name] or name] += ms

    def pct(flops, ms):
        return f"{100 * flops / (ms * 1e6) / peak:6.1f}" if peak and ms > 0 else "     -"

    print(f"cpu: {cpu()}; FMA peak of {args.threads} cores {peak:.0f} GFLOP/s "
          f"({peak_before.isa}; probes {', '.join(f'{x:.0f}' for x in peaks)})"
          if peak else f"cpu: {cpu()}; no FMA peak ({peak_before.note})")
    print(" ".join(cmd))
    dnnl = report["onednn"]
    print(f"oneDNN {dnnl['version']} ({dnnl['isa']}); step: {total:.1f} ms of traced steps (medians), "
          f"{report['images_per_sec']:.2f} img/s\n")
    print(f"{'layers':34s} {'ms/step':>9s} {'share':>6s} {'GFLOP':>8s} {'% peak':>7s}")
    for key, (ms, flops) in sorted(groups.items(), key=lambda kv: -kv[1][0]):
        print(f"{key:34s} {ms:9.1f} {100 * ms / total:5.1f}% {flops / 1e9:8.1f} {pct(flops, ms)}")
    for kind, ms in sorted(others.items(), key=lambda kv: -kv[1]):
        if ms >= 0.005 * total:
            print(f"{kind:34s} {ms:9.1f} {100 * ms / total:5.1f}%")
    if args.top > 0:
        print(f"\nslowest {args.top} layers")
    for ms, name, impl, flops in sorted(rows, reverse=True)[:args.top]:
        print(f"  {name:36s} {ms:8.2f} ms {pct(flops, ms)}%  {impl}")
    if args.json:
        Path(args.json).write_text(json.dumps({
            "cpu": cpu().as_json(), "peak_gflops": peak, "command": cmd, "step_ms": total,
            "groups": {k: {"ms": v[0], "gflop": v[1] / 1e9} for k, v in groups.items()},
            "other_ms": others,
            "layers": [{"name": n, "ms": ms, "kernel": impl, "gflop": f / 1e9}
                       for ms, n, impl, f in rows]}, indent=1))


if __name__ == "__main__":
    main()
