#!/usr/bin/python3
"""srun wall time with and without tfpin.so, on private loopback Slurms started side by side.
Prints the median of N runs of each and their ratio (goal: <= 1.05): without the plugin, with the
plugin loaded but the job not asking for it, and with --tf-threads/--tf-interop (and, with
--no-cache-too, the same with the site key topology_cache=no: every step loads hwloc itself).

--nodes N --tasks K: each Slurm has N simulated nodes (slurmd processes on this host, 2 CPUs each)
and every step is `srun -N N -n K` (overcommitted with -O when K > 2N: several tasks per CPU, all
started at once, as the ranks of an MPI job are). Usage:
    bench/srun_overhead.py [--runs 40] [--nodes 1] [--tasks 1] [--no-cache-too]
                           [--plugin build/plugin/tfpin.so]"""
import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "slurm"))
sys.path.insert(0, str(ROOT / "bench"))
from slurm_cluster import LocalSlurm  # noqa: E402
from machine import cpu  # noqa: E402

CPUS_PER_NODE = 2


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
    ap.add_argument("--nodes", type=int, default=1)
    ap.add_argument("--tasks", type=int, default=1)
    ap.add_argument("--no-cache-too", action="store_true",
                    help="also a Slurm whose plugin has topology_cache=no")
    ap.add_argument("--plugin", default=str(ROOT / "build" / "plugin" / "tfpin.so"))
    a = ap.parse_args()
    a.plugin = str(Path(a.plugin).resolve())  # slurmd resolves it from its own directory
    if a.tasks < a.nodes:
        sys.exit("--tasks must be at least --nodes")
    if a.nodes == 1 and a.tasks == 1:
        step = ["-c", str(CPUS_PER_NODE)]  # the original measurement: one task on the node
    else:
        step = ["-N", str(a.nodes), "-n", str(a.tasks)]
        if a.tasks > a.nodes * CPUS_PER_NODE:
            step.append("-O")
    threads = CPUS_PER_NODE if step[0] == "-c" else 1
    tf = [f"--tf-threads={threads}", f"--tf-interop={threads}"]

    def cluster(*keys, plugin=True):
        lines = [" ".join([f"required {a.plugin}", "shim=no", *keys])] if plugin else []
        return LocalSlurm(nodes=a.nodes, cpus_per_node=CPUS_PER_NODE, plugstack_lines=lines,
                          split_cores=False)

    clusters = {"plain": cluster(plugin=False), "tf": cluster()}
    variants = [("without plugin", "plain", []), ("plugin, no --tf-*", "tf", []),
                (f"plugin, {' '.join(tf)}", "tf", tf)]
    if a.no_cache_too:
        clusters["no-cache"] = cluster("topology_cache=no")
        variants.append((f"plugin, {' '.join(tf)}, topology_cache=no", "no-cache", tf))
    started = []
    try:
        for c in clusters.values():
            started.append(c.start())
        for _, c, extra in variants:  # warm caches of all (and write the node's topology cache)
            timed_sruns(clusters[c], step + extra + ["true"], 2)
        # Interleaved so that machine noise hits all alike.
        times = {name: [] for name, _, _ in variants}
        for _ in range(a.runs):
            for name, c, extra in variants:
                times[name] += timed_sruns(clusters[c], step + extra + ["true"], 1)
    finally:
        for c in started:
            c.stop()
    base = statistics.median(times[variants[0][0]])
    print(f"srun {' '.join(step)} true, {a.nodes} simulated node(s), {a.runs} runs each, "
          f"interleaved; {cpu()}")
    for name, _, _ in variants:
        m = statistics.median(times[name])
        print(f"  {name:<55} median {m * 1000:6.1f} ms  (min {min(times[name]) * 1000:5.1f})  "
              f"ratio {m / base:.3f}")


if __name__ == "__main__":
    main()
