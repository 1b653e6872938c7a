#!/usr/bin/python3
"""srun wall time with and without tfpin.so, on private loopback Slurms started side by side.
Prints the median of N runs of each and their ratio (goal: <= 1.05): without the plugin, with the
plugin loaded but the job not asking for it, and with --tf-threads/--tf-interop. Usage:
    bench/srun_overhead.py [--runs 40] [--plugin build/plugin/tfpin.so]"""
import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "slurm"))
from slurm_cluster import LocalSlurm  # noqa: E402


def timed_sruns(cluster, args, runs):
    times = []
    for _ in range(runs):
        start = time.monotonic()
        r = cluster.srun(args)
        times.append(time.monotonic() - start)
        if r.returncode != 0:
            sys.exit(f"srun {' '.join(args)} failed: {r.stderr}")
    return times


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=40)
    ap.add_argument("--plugin", default=str(ROOT / "build" / "plugin" / "tfpin.so"))
    a = ap.parse_args()
    with LocalSlurm(nodes=1, cpus_per_node=2) as plain, \
         LocalSlurm(nodes=1, cpus_per_node=2, plugstack_lines=[f"required {a.plugin} shim=no"]) as tf:
        timed_sruns(plain, ["-c", "2", "true"], 2)  # warm caches of both
        timed_sruns(tf, ["-c", "2", "--tf-threads=2", "true"], 2)
        # Interleaved so that machine noise hits both alike.
        base, idle, active = [], [], []
        for _ in range(a.runs):
            base += timed_sruns(plain, ["-c", "2", "true"], 1)
            idle += timed_sruns(tf, ["-c", "2", "true"], 1)
            active += timed_sruns(tf, ["-c", "2", "--tf-threads=2", "--tf-interop=2", "true"], 1)
    mb = statistics.median(base)
    print(f"srun -c 2 true, {a.runs} runs each, interleaved")
    for name, times in (("without plugin", base), ("plugin, no --tf-*", idle),
                        ("plugin, --tf-threads=2 --tf-interop=2", active)):
        m = statistics.median(times)
        print(f"  {name:<40} median {m * 1000:6.1f} ms  (min {min(times) * 1000:5.1f})  "
              f"ratio {m / mb:.3f}")


if __name__ == "__main__":
    main()
