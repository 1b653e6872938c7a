#!/usr/bin/python3
"""Data-parallel training through the real Slurm (issue #14's benchmark). On private loopback
Slurms with the plugin and the shim, `tfpin bench --variable_update=horovod` for ResNet-50 (or
--model) at --batch_size per rank, configurations interleaved round by round:

  one rank       srun -N1 -n1 --tf-threads=1            (2 nodes x 1 CPU; the other node idle)
  2 nodes        srun --mpi=pmix -N2 -n2 --tf-threads=1 horovod     (one rank per node)
  2 nodes apart  srun --mpi=pmix -N2 -n2 --tf-threads=1 independent (same ranks, no allreduce)
  2 x 1 thread   srun --mpi=pmix -N1 -n2 --tf-threads=1 horovod     (1 node x 2 CPUs)
  1 x 2 threads  srun -N1 -n1 -c2 --tf-threads=2 at twice the batch (same global batch)

Prints medians of total images/sec, the scaling efficiency (2 nodes / 2 x one rank; goal >= 0.9),
the allreduce time per step and the fraction of it hidden behind backward, the CPU and the FMA
peak of one core measured in the same run (bench/machine.py: zmm with AVX-512F, else ymm with
AVX2+FMA). Usage:
    bench/data_parallel.py [--model resnet50] [--batch_size 32] [--rounds 3] [--num_batches 5]"""
import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "slurm"))
sys.path.insert(0, str(ROOT / "bench"))
from slurm_cluster import LocalSlurm, MPI_LOOPBACK_ENV, mpi_missing  # noqa: E402
from machine import ISA_HELP, cpu, fma_peak  # noqa: E402


def run(cluster, srun_args, bench_args, tfpin):
    r = cluster.srun(srun_args + [tfpin, "bench", "--json"] + bench_args, timeout=1800,
                     env_extra=MPI_LOOPBACK_ENV)
    if r.returncode != 0:
        sys.exit(f"srun {' '.join(srun_args)} failed:\n{r.stdout}\n{r.stderr}")
    return json.loads(next(line for line in r.stdout.splitlines() if line.startswith("{")))


def main():
    ap = argparse.ArgumentParser(epilog=ISA_HELP)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--num_batches", type=int, default=5)
    ap.add_argument("--num_warmup_batches", type=int, default=2)
    ap.add_argument("--fusion_threshold_mb", type=int, default=64)
    ap.add_argument("--build", default=str(ROOT / "build"))
    a = ap.parse_args()
    if mpi_missing():
        sys.exit(mpi_missing())
    build = Path(a.build)
    tfpin = str(build / "cli" / "tfpin")
    line = [f"required {build / 'plugin' / 'tfpin.so'} shim_path={build / 'shim' / 'libtfpin-shim.so'}"]
    steps = ["--model", a.model, "--num_batches", str(a.num_batches), "--num_warmup_batches",
             str(a.num_warmup_batches)]
    b = str(a.batch_size)
    horovod = ["--variable_update", "horovod", "--fusion_threshold_mb", str(a.fusion_threshold_mb)]
    configs = {
        "one rank": ("two", ["-N1", "-n1", "-w", "n1", "--tf-threads=1"], ["--batch_size", b]),
        "2 nodes": ("two", ["--mpi=pmix", "-N2", "-n2", "--tf-threads=1"],
                    ["--batch_size", b] + horovod),
        "2 nodes apart": ("two", ["--mpi=pmix", "-N2", "-n2", "--tf-threads=1"],
                          ["--batch_size", b, "--variable_update", "independent"]),
        "2 x 1 thread": ("one", ["--mpi=pmix", "-N1", "-n2", "-c1", "--tf-threads=1"],
                         ["--batch_size", b] + horovod),
        "1 x 2 threads": ("one", ["-N1", "-n1", "-c2", "--tf-threads=2"],
                          ["--batch_size", str(2 * a.batch_size)]),
    }
    results = {name: [] for name in configs}
    with tempfile.TemporaryDirectory() as tmp:
        peak = fma_peak(1, tmp)
    with LocalSlurm(nodes=2, cpus_per_node=1, plugstack_lines=line) as two, \
         LocalSlurm(nodes=1, cpus_per_node=2, plugstack_lines=line) as one:
        clusters = {"two": two, "one": one}
        for rnd in range(a.rounds):
            for name, (where, srun_args, bench_args) in configs.items():
                j = run(clusters[where], srun_args, steps + bench_args, tfpin)
                results[name].append(j)
                extra = ""
                if "allreduce" in j:
                    extra = (f", allreduce {j['allreduce']['seconds_per_step'] * 1e3:.0f} ms/step, "
                             f"{100 * j['allreduce']['hidden_fraction']:.0f}% hidden")
                print(f"round {rnd + 1} {name:<14} {j['images_per_sec']:7.2f} images/sec{extra}",
                      flush=True)

    med = {name: statistics.median(j["images_per_sec"] for j in runs)
           for name, runs in results.items()}
    print(f"\n{a.model} training, batch {a.batch_size} per rank, medians of {a.rounds} rounds; "
          f"{cpu()}, {peak}")
    for name in configs:
        print(f"  {name:<14} {med[name]:8.2f} images/sec")
    for name in ("2 nodes", "2 x 1 thread"):
        runs = results[name]
        reduce = statistics.median(j["allreduce"]["seconds_per_step"] for j in runs)
        exposed = statistics.median(j["allreduce"]["exposed_seconds_per_step"] for j in runs)
        hidden = statistics.median(j["allreduce"]["hidden_fraction"] for j in runs)
        print(f"  {name}: allreduce {runs[0]['allreduce']['bytes_per_step'] / 2**20:.1f} MiB in "
              f"{runs[0]['allreduce']['buckets']} buckets, {reduce * 1e3:.0f} ms/step, "
              f"{exposed * 1e3:.0f} ms exposed, {100 * hidden:.0f}% hidden behind backward")
    print(f"scaling efficiency, 2 nodes / (2 x one rank): {med['2 nodes'] / (2 * med['one rank']):.3f}"
          f" (goal >= 0.9); against the same ranks without allreduce: "
          f"{med['2 nodes'] / med['2 nodes apart']:.3f}")
    print(f"workers per node at global batch {2 * a.batch_size}: 2 ranks x 1 thread / 1 rank x 2 "
          f"threads = {med['2 x 1 thread'] / med['1 x 2 threads']:.3f}")


if __name__ == "__main__":
    main()
