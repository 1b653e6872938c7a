"""Container images for the container tests: minimal Debian roots built with mmdebstrap from the
Debian mirror, with tests/containers/omp_lanes.c compiled inside by the root's own gcc (so it
links the root's glibc and libgomp). Each is built once, under a lock, into
TFPIN_CONTAINER_CACHE (default /var/cache/tfpin-containers) and rebuilt when its inputs change."""
import fcntl
import os
import shutil
import subprocess
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE_ROOT = HERE.parents[1]
CACHE = Path(os.environ.get("TFPIN_CONTAINER_CACHE", "/var/cache/tfpin-containers"))
PACKAGES = "gcc,libc6-dev,libgomp1"
SOURCES = {"containers/omp_lanes.c": HERE / "omp_lanes.c",
           "shim/thread_mask.h": HERE.parent / "shim" / "thread_mask.h"}


def mirror():
    """The Debian mirror: TFPIN_MATRIX_MIRROR (scripts/test-matrix passes it into its roots) or
    the one scripts/test-matrix --print-mirror finds in this machine's apt sources."""
    if os.environ.get("TFPIN_MATRIX_MIRROR"):
        return os.environ["TFPIN_MATRIX_MIRROR"]
    r = subprocess.run([SOURCE_ROOT / "scripts/test-matrix", "--print-mirror"], capture_output=True,
                       text=True)
    if r.returncode != 0 or not r.stdout.strip():
        raise AssertionError(f"no Debian mirror for the container images: {r.stderr.strip()}")
    return r.stdout.strip()


# scripts/test-matrix puts an apt-get that refuses to run first in PATH (scripts/setup must find
# every package installed); mmdebstrap builds another root and needs the real one.
MATRIX_APT_STUB = "/usr/local/lib/tfpin-matrix/bin"


def _run(argv, what, timeout=1200):
    path = ":".join(d for d in os.environ.get("PATH", "/usr/bin:/bin").split(":")
                    if d != MATRIX_APT_STUB)
    r = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                       env={**os.environ, "PATH": path})
    if r.returncode != 0:
        raise AssertionError(f"{what} failed:\n{r.stderr[-3000:]}")


def built(name, make, inputs):
    """CACHE/NAME, made by make(path) unless it exists for the same inputs (a string)."""
    target = CACHE / name
    stamp = CACHE / f"{name}.stamp"
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if target.exists() and stamp.exists() and stamp.read_text() == inputs:
            return target
        stamp.unlink(missing_ok=True)
        if target.is_dir():
            shutil.rmtree(target)
        else:
            target.unlink(missing_ok=True)
        make(target)
        stamp.write_text(inputs)
        return target


def root_inputs(release, environment=""):
    sources = "".join(path.read_text() for path in SOURCES.values())
    return f"{release}\n{PACKAGES}\n{environment}\n{sources}"


def make_root(release, root, environment=""):
    """A minbase root of `release` at `root` with /usr/local/bin/omp-lanes; `environment`, when
    given, is the image's own %environment (Apptainer sources /.singularity.d/env/*.sh)."""
    _run(["mmdebstrap", "--variant=minbase", f"--include={PACKAGES}",
          "--aptopt=Acquire::Check-Valid-Until \"false\"", release, str(root), mirror()],
         f"mmdebstrap {release}")
    for path, source in SOURCES.items():
        (root / "tmp/src" / path).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, root / "tmp/src" / path)
    _run(["chroot", str(root), "gcc", "-O1", "-fopenmp", "-pthread",
          "/tmp/src/containers/omp_lanes.c", "-o", "/usr/local/bin/omp-lanes"],
         f"compiling omp-lanes in the {release} root", timeout=300)
    if environment:
        env_dir = root / ".singularity.d/env"
        env_dir.mkdir(parents=True, exist_ok=True)
        (env_dir / "90-environment.sh").write_text(environment)


def parse_lanes(stdout):
    """omp-lanes' output: (first line's fields, [(team, [cpus of each member]) per lane])."""
    from slurm_cluster import _parse_cpu_list as cpulist
    head, lanes = {}, []
    for line in stdout.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        if "nprocs" in fields:
            head = fields
        elif "lane" in fields:
            lanes.append((int(fields["team"]),
                          [cpulist(m) for m in fields["masks"].split(";") if m]))
    return head, lanes
