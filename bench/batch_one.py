#!/usr/bin/python3
"""Batch-1 inference of the zoo in one run: inter-op lanes against intra-op threads, and the fully
connected layers against the machine's memory bandwidth.

For each model, interleaved over --rounds rounds (medians; a shared machine's load hits every
configuration alike), `tfpin bench --forward_only --batch_size 1 --json` with
  1x2          one lane of 2 threads
  2x1          two inter-op lanes of 1 thread (steps nothing can run beside use both cores)
  2x1-fixed    the same without elastic threads (--no_elastic_threads: every step on 1 thread)
  2 streams    throughput mode (--num_streams 2): two independent requests at once, one per
               lane of 1 thread; images/sec of both together (each request's latency is longer)
and, for AlexNet, fc6/fc7/fc8 from a trace: weight bytes / step time, in GB/s and as a share of
the bandwidth measured in the same run by a STREAM-like probe compiled on the fly (triad
a = b + s c counted as STREAM does, 3 x 4 bytes per element, and a read-only sum, both on every
allowed core, on huge pages as the engine's weights); the median step against the probe's median
round and the best step against its best round, with --no_matrix_vector (oneDNN's
kernel) beside it. The FMA peak of the same cores is printed too. Both probes (bench/machine.py)
use the widest vector the CPU has, zmm (AVX-512F) or ymm (AVX2+FMA; TFPIN_BENCH_ISA=avx2 asks for
it on an AVX-512 CPU), and the report names it and the CPU.

    bench/batch_one.py --rounds 3
    bench/batch_one.py --models googlenet,inception3 --rounds 5 --exe build/cli/tfpin
Standard library only; needs g++ with OpenMP for the bandwidth probe.
"""
import argparse
import collections
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from engine_vs_pytorch import MODELS  # noqa: E402
from machine import ISA_HELP, allowed_cpus, cpu, fma_peak, memory_bandwidth  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

FC_WEIGHT_BYTES = {"classifier.1": 9216 * 4096 * 4, "classifier.4": 4096 * 4096 * 4,
                   "classifier.6": 4096 * 1000 * 4}
FC_NAMES = {"classifier.1": "fc6", "classifier.4": "fc7", "classifier.6": "fc8"}

# The ISA oneDNN (and so tfpin's own kernels) ran with, from each report: the CPU's widest, or
# what DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA capped it to.
ENGINE_ISAS = set()

CONFIGS = {
    "1x2": ["--num_inter_threads", "1", "--num_intra_threads", "2"],
    "2x1": ["--num_inter_threads", "2", "--num_intra_threads", "1"],
    "2x1-fixed": ["--num_inter_threads", "2", "--num_intra_threads", "1", "--no_elastic_threads"],
    "2 streams": ["--num_streams", "2"],
}


def bench(exe, model, flags, batches, trace=None):
    cmd = [str(exe), "bench", "--model", model, "--batch_size", "1", "--forward_only", "--json",
           "--num_batches", str(batches), "--num_warmup_batches", "10", *flags]
    if trace:
        cmd += ["--trace_file", trace]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {res.stderr.strip()}")
    report = json.loads(res.stdout.strip().splitlines()[-1])
    ENGINE_ISAS.add(report.get("onednn", {}).get("isa", "?"))
    return report


def fc_microseconds(trace):
    """Per fc layer, (median, best) step time of the trace's batches."""
    times = collections.defaultdict(list)
    for e in json.loads(Path(trace).read_text())["traceEvents"]:
        if e.get("ph") == "X" and e["name"] in FC_WEIGHT_BYTES:
            times[e["name"]].append(e["dur"])
    return {name: (statistics.median(v), min(v)) for name, v in times.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=ISA_HELP)
    p.add_argument("--models", default=",".join(MODELS))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--num_batches", type=int, default=40)
    p.add_argument("--exe", default=str(ROOT / "build" / "cli" / "tfpin"))
    args = p.parse_args()
    models = args.models.split(",")
    threads = len(allowed_cpus())
    if threads != 2:
        print(f"note: {threads} cpus allowed; the configurations use 2", file=sys.stderr)
    with tempfile.TemporaryDirectory() as work:
        peak = fma_peak(2, work)
        triads, reads, read_medians = [], [], []
        ips = collections.defaultdict(list)
        fc = collections.defaultdict(list)  # (kernel, layer) -> (median, best) GB/s per round
        for _ in range(args.rounds):
            bw = memory_bandwidth(2, work)
            triads.append(bw.triad)
            reads.append(bw.read)
            read_medians.append(bw.read_median)
            for model in models:
                for name, flags in CONFIGS.items():
                    ips[(model, name)].append(bench(args.exe, model, flags, args.num_batches)
                                              ["images_per_sec"])
            if "alexnet" in models:
                for kernel, extra in (("tfpin", []), ("oneDNN", ["--no_matrix_vector"])):
                    trace = str(Path(work) / "trace.json")
                    bench(args.exe, "alexnet", CONFIGS["1x2"] + extra, args.num_batches, trace)
                    for name, (median_us, best_us) in fc_microseconds(trace).items():
                        fc[(kernel, name)].append((FC_WEIGHT_BYTES[name] / median_us / 1e3,
                                                   FC_WEIGHT_BYTES[name] / best_us / 1e3))
    triad, read = statistics.median(triads), statistics.median(reads)
    read_median = statistics.median(read_medians)
    print(f"cpu: {cpu()}")
    caps = [f"{v}={os.environ[v]}" for v in ("DNNL_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA")
            if os.environ.get(v)]
    print(f"tfpin ran with ISA {', '.join(sorted(ENGINE_ISAS))}"
          + (f" ({', '.join(caps)})" if caps else ""))
    print(f"{peak}, memory triad {triad:.1f} GB/s, read {read:.1f} GB/s of 2 cores ({bw.isa}; "
          f"each the probe's best of its rounds, median over {args.rounds} rounds); "
          f"read {read_median:.1f} GB/s as the probe's median")
    print("images/sec, batch 1 | " + " | ".join(CONFIGS) + " | 2x1 / 1x2 | streams / 1x2")
    for model in models:
        med = {name: statistics.median(ips[(model, name)]) for name in CONFIGS}
        print(f"{model:11s} | " + " | ".join(f"{med[n]:.1f}" for n in CONFIGS) +
              f" | {med['2x1'] / med['1x2']:.2f} | {med['2 streams'] / med['1x2']:.2f}")
    # Like with like: the median step against the probe's median round, the best step against its
    # best round (a median against a best reads ~10% low on a shared machine).
    print("AlexNet fc, 1x2: weight bytes / step time | median step | % of read median | "
          "best step | % of read best | % of triad best")
    for (kernel, name), values in sorted(fc.items()):
        median_gbs = statistics.median(v[0] for v in values)
        best_gbs = statistics.median(v[1] for v in values)
        print(f"{FC_NAMES[name]} ({kernel}) | {median_gbs:.1f} GB/s | {100 * median_gbs / read_median:.0f}% | "
              f"{best_gbs:.1f} GB/s | {100 * best_gbs / read:.0f}% | {100 * best_gbs / triad:.0f}%")


if __name__ == "__main__":
    main()
