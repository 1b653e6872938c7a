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
and, for AlexNet, fc6/fc7/fc8 from a trace: weight bytes / median step time, in GB/s and as a
share of the bandwidth measured in the same run by a STREAM-like probe compiled on the fly
(triad a = b + s c counted as STREAM does, 3 x 8 bytes per element, and a read-only sum, both on
every allowed core, on huge pages as the engine's weights), with --no_matrix_vector (oneDNN's kernel) beside it. The FMA peak of the same
cores is printed too (engine_vs_pytorch.py's probe).

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
from engine_vs_pytorch import MODELS, allowed_cpus, fma_peak  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

BANDWIDTH_PROBE = r"""
#include <omp.h>
#include <sys/mman.h>
#include <cstdio>
#include <cstdlib>
#include <immintrin.h>
// 2 MiB aligned with transparent huge pages, as the engine allocates weights: 4 KiB pages would
// measure TLB misses as much as memory.
static float* huge(long bytes) {
  void* p = std::aligned_alloc(2L << 20, bytes);
  madvise(p, bytes, MADV_HUGEPAGE);
  return static_cast<float*>(p);
}
int main() {
  const long n = 1L << 26;  // 256 MiB per float array: far beyond any cache
  float* a = huge(n * 4);
  float* b = huge(n * 4);
  float* c = huge(n * 4);
#pragma omp parallel for schedule(static)
  for (long i = 0; i < n; ++i) { a[i] = 1; b[i] = 2; c[i] = 3; }
  double triad = 1e30, read = 1e30;
  float sink = 0;
  for (int r = 0; r < 8; ++r) {
    double t = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
    t = omp_get_wtime() - t;
    if (t < triad) triad = t;
    t = omp_get_wtime();
#pragma omp parallel reduction(+ : sink)
    {
      __m512 s0 = _mm512_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
#pragma omp for schedule(static)
      for (long i = 0; i < n; i += 64) {
        s0 = _mm512_add_ps(s0, _mm512_load_ps(b + i));
        s1 = _mm512_add_ps(s1, _mm512_load_ps(b + i + 16));
        s2 = _mm512_add_ps(s2, _mm512_load_ps(b + i + 32));
        s3 = _mm512_add_ps(s3, _mm512_load_ps(b + i + 48));
      }
      float out[16];
      _mm512_storeu_ps(out, _mm512_add_ps(_mm512_add_ps(s0, s1), _mm512_add_ps(s2, s3)));
      for (float x : out) sink += x;
    }
    t = omp_get_wtime() - t;
    if (t < read) read = t;
  }
  std::printf("%.3f %.3f %g\n", 3.0 * n * 4 / triad / 1e9, 1.0 * n * 4 / read / 1e9, sink);
}
"""

FC_WEIGHT_BYTES = {"classifier.1": 9216 * 4096 * 4, "classifier.4": 4096 * 4096 * 4,
                   "classifier.6": 4096 * 1000 * 4}
FC_NAMES = {"classifier.1": "fc6", "classifier.4": "fc7", "classifier.6": "fc8"}

CONFIGS = {
    "1x2": ["--num_inter_threads", "1", "--num_intra_threads", "2"],
    "2x1": ["--num_inter_threads", "2", "--num_intra_threads", "1"],
    "2x1-fixed": ["--num_inter_threads", "2", "--num_intra_threads", "1", "--no_elastic_threads"],
    "2 streams": ["--num_streams", "2"],
}


def bandwidth(workdir, threads):
    src = Path(workdir) / "bw.cpp"
    exe = Path(workdir) / "bw"
    src.write_text(BANDWIDTH_PROBE)
    build = subprocess.run(["g++", "-O2", "-mavx512f", "-fopenmp", "-o", str(exe), str(src)],
                           capture_output=True, text=True)
    if build.returncode != 0:
        sys.exit(f"bandwidth probe: cannot compile: {build.stderr.strip()}")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="true", OMP_PLACES="cores")
    out = subprocess.run([str(exe)], capture_output=True, text=True, env=env, check=True).stdout
    triad, read, _ = out.split()
    return float(triad), float(read)


def bench(exe, model, flags, batches, trace=None):
    cmd = [str(exe), "bench", "--model", model, "--batch_size", "1", "--forward_only", "--json",
           "--num_batches", str(batches), "--num_warmup_batches", "10", *flags]
    if trace:
        cmd += ["--trace_file", trace]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed: {res.stderr.strip()}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def fc_microseconds(trace):
    times = collections.defaultdict(list)
    for e in json.loads(Path(trace).read_text())["traceEvents"]:
        if e.get("ph") == "X" and e["name"] in FC_WEIGHT_BYTES:
            times[e["name"]].append(e["dur"])
    return {name: statistics.median(v) for name, v in times.items()}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
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
        triads, reads = [], []
        ips = collections.defaultdict(list)
        fc = collections.defaultdict(list)  # (kernel, layer) -> GB/s per round
        for _ in range(args.rounds):
            triad, read = bandwidth(work, 2)
            triads.append(triad)
            reads.append(read)
            for model in models:
                for name, flags in CONFIGS.items():
                    ips[(model, name)].append(bench(args.exe, model, flags, args.num_batches)
                                              ["images_per_sec"])
            if "alexnet" in models:
                for kernel, extra in (("tfpin", []), ("oneDNN", ["--no_matrix_vector"])):
                    trace = str(Path(work) / "trace.json")
                    bench(args.exe, "alexnet", CONFIGS["1x2"] + extra, args.num_batches, trace)
                    for name, us in fc_microseconds(trace).items():
                        fc[(kernel, name)].append(FC_WEIGHT_BYTES[name] / us / 1e3)
    triad, read = statistics.median(triads), statistics.median(reads)
    print(f"2 cores: FMA peak {peak or 0:.0f} GFLOP/s, memory triad {triad:.1f} GB/s, "
          f"read {read:.1f} GB/s (medians of {args.rounds} rounds)")
    print("images/sec, batch 1 | " + " | ".join(CONFIGS) + " | 2x1 / 1x2 | streams / 1x2")
    for model in models:
        med = {name: statistics.median(ips[(model, name)]) for name in CONFIGS}
        print(f"{model:11s} | " + " | ".join(f"{med[n]:.1f}" for n in CONFIGS) +
              f" | {med['2x1'] / med['1x2']:.2f} | {med['2 streams'] / med['1x2']:.2f}")
    for (kernel, name), values in sorted(fc.items()):
        gbs = statistics.median(values)
        print(f"AlexNet {FC_NAMES[name]} ({kernel}, 1x2): {gbs:.1f} GB/s = {100 * gbs / triad:.0f}% "
              f"of triad, {100 * gbs / read:.0f}% of read")


if __name__ == "__main__":
    main()
