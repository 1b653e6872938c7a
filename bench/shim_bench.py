#!/usr/bin/python3
"""Figures for libtfpin-shim.so (a benchmark that prints numbers, not a timed test).

1. Costs: pthread_create+join of a trivial thread and an empty 2-thread OpenMP region, without
   the shim, with the shim but no plan (inert), and with the shim and a plan. Medians.
2. Oversubscription: M = 2 inter-op std::threads, each running many short OpenMP regions of real
   compute (~200-300 us on one core), on 2 cores, default spin policy (no OMP_WAIT_POLICY /
   GOMP_SPINCOUNT):
     unenforced       no shim, OMP_NUM_THREADS=2: two teams of 2 = 4 threads on 2 cores
     shim             same environment + the shim, plan TFPIN_CPUS=a,b INTEROP=2 INTRA=1
     well-configured  no shim, OMP_NUM_THREADS=1, each inter-op thread pinned by hand to its core
   in two region shapes (coarse: 2 worksharing loops per region; fine: 32 short loops per
   region, as small-batch inference runs many small parallel loops). Runs are interleaved;
   medians of wall time; throughput ratios. Goals: shim >= 0.95x well-configured and >= 1.5x
   unenforced.

Usage: bench/shim_bench.py [--runs 9] [--regions 2000] [--shim build/shim/libtfpin-shim.so]
Needs g++ (builds bench/shim_bench_*.cpp into a temporary directory) and 2 usable CPUs.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from machine import cpu  # noqa: E402
DEFAULT_SHIM = os.path.join(HERE, "..", "build", "shim", "libtfpin-shim.so")


def clean_env():
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("OMP_", "GOMP_", "KMP_", "TFPIN_", "MKL_", "OPENBLAS_"))
            and k != "LD_PRELOAD"}


def build(tmp):
    exes = {}
    for name, flags in (("workload", ["-O3", "-march=native"]), ("create", ["-O2"])):
        src = os.path.join(HERE, f"shim_bench_{name}.cpp")
        exe = os.path.join(tmp, name)
        subprocess.run(["g++", "-std=c++20", *flags, "-fopenmp", "-pthread", src, "-o", exe],
                       check=True)
        exes[name] = exe
    return exes


def run(argv, env, preexec=None):
    out = subprocess.run(argv, env=env, capture_output=True, text=True, check=True,
                         timeout=600, preexec_fn=preexec).stdout
    return {k: float(v) for k, v in re.findall(r"(\w+)=([-0-9.e+]+)", out)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--regions", type=int, default=2000)
    ap.add_argument("--shim", default=DEFAULT_SHIM)
    args = ap.parse_args()
    shim = os.path.abspath(args.shim)
    if not os.path.exists(shim):
        sys.exit(f"shim not found: {shim} (build it: ninja -C build)")
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        sys.exit("needs 2 usable CPUs")
    a, b = cpus[:2]
    print(f"shim: {shim}")
    print(f"cpu: {cpu()}")
    print(f"cpus used: {a},{b}   load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")

    with tempfile.TemporaryDirectory() as tmp:
        exes = build(tmp)

        # 1. Costs. (a) the whole process on one CPU, plan = that CPU: the hook's own cost without
        # cross-CPU wake-ups; (b) two CPUs, plan a,b with intra 2 (no clamping): the usual case.
        base = clean_env()
        one = lambda: os.sched_setaffinity(0, {a})
        layouts = [
            (f"1 cpu ({a})", one, {"TFPIN_CPUS": f"{a}", "TFPIN_INTEROP": "1", "TFPIN_INTRA": "1"}),
            (f"2 cpus ({a},{b})", None,
             {"TFPIN_CPUS": f"{a},{b}", "TFPIN_INTEROP": "1", "TFPIN_INTRA": "2"}),
        ]
        print("\npthread_create+join of a trivial thread; empty OpenMP region of 2 threads "
              "(2 cpus only); medians of 7 x 20000")
        for title, preexec, plan in layouts:
            variants = {
                "no shim": base,
                "shim, no plan": {**base, "LD_PRELOAD": shim},
                "shim, plan": {**base, "LD_PRELOAD": shim, **plan},
            }
            costs = {name: [] for name in variants}
            for _ in range(7):
                for name, env in variants.items():
                    costs[name].append(run([exes["create"], "20000"], env, preexec))
            ref = statistics.median(r["create_join_ns"] for r in costs["no shim"])
            ref_omp = statistics.median(r["omp_region_ns"] for r in costs["no shim"])
            print(f"  {title}:")
            for name, rs in costs.items():
                c = statistics.median(r["create_join_ns"] for r in rs)
                line = f"    {name:<14} create+join {c / 1000:7.2f} us ({c / ref:4.2f}x)"
                if preexec is None:
                    o = statistics.median(r["omp_region_ns"] for r in rs)
                    line += f"   omp region {o / 1000:6.2f} us ({o / ref_omp:4.2f}x)"
                print(line)

        # 2. Oversubscription. Two region shapes, both ~200-250 us of work per region on one
        # core: "coarse" = 2 worksharing loops per region, "fine" = 32 short loops per region
        # (small-batch inference: many small parallel loops, a barrier after each).
        shapes = [("coarse: 2 parallel loops of 1024 rows per region", ["--rows", "1024", "--loops", "2"]),
                  ("fine: 32 parallel loops of 64 rows per region", ["--rows", "64", "--loops", "32"])]
        configs = {
            "unenforced": ({**base, "OMP_NUM_THREADS": "2"}, []),
            "shim": ({**base, "OMP_NUM_THREADS": "2", "LD_PRELOAD": shim,
                      "TFPIN_CPUS": f"{a},{b}", "TFPIN_INTEROP": "2", "TFPIN_INTRA": "1"}, []),
            "well-configured": ({**base, "OMP_NUM_THREADS": "1"}, ["--pin", f"{a},{b}"]),
        }
        print(f"\n2 inter-op threads x {args.regions} OpenMP regions each on 2 cores, default spin "
              f"policy; median wall time of {args.runs} interleaved runs")
        for title, shape in shapes:
            walls = {name: [] for name in configs}
            for _ in range(args.runs):
                for name, (env, extra) in configs.items():
                    r = run([exes["workload"], "--lanes", "2", "--regions", str(args.regions),
                             *shape, *extra], env)
                    walls[name].append(r["wall_s"])
            print(f"  {title}:")
            med = {name: statistics.median(w) for name, w in walls.items()}
            for name, w in walls.items():
                thr = 2 * args.regions / med[name]
                print(f"    {name:<16} wall {med[name]:6.3f} s (min {min(w):.3f}, max {max(w):.3f})"
                      f"  {thr:7.0f} regions/s  {med[name] / args.regions * 1e6:5.0f} us/region")
            best = {name: min(w) for name, w in walls.items()}
            for other, goal in (("well-configured", 0.95), ("unenforced", 1.5)):
                r_med = med[other] / med["shim"]
                r_best = best[other] / best["shim"]
                print(f"    shim throughput / {other + ':':<17} {r_med:.3f}x median, "
                      f"{r_best:.3f}x best-of-{args.runs}  (goal >= {goal}: "
                      f"{'met' if r_med >= goal else 'NOT met'})")


if __name__ == "__main__":
    main()
