#!/usr/bin/python3
"""The machine a benchmark runs on, shared by the scripts in bench/ (standard library only).

  cpu()                 model name, vendor, family/model and flags from /proc/cpuinfo
  vector_isa()          the widest vector the probes can use: zmm with AVX-512F, ymm with AVX2+FMA,
                        else xmm (SSE, no FMA: no FMA peak); TFPIN_BENCH_ISA=avx2 (or avx512, sse)
                        asks for a narrower one, e.g. the ymm peak of an AVX-512 CPU
  fma_peak()            GFLOP/s of N cores running FMAs flat out, and the vector it used
  memory_bandwidth()    STREAM-like triad and read-only GB/s of N cores, and the vector it used
  cross_core()          what data costs between two cores: a cache line's one-way trip, and GB/s
                        reading a buffer the other core has just written against one this core
                        wrote (far apart when the cores share no L3: a VM's vCPUs may not)
  openblas_coretype()   OPENBLAS_CORETYPE for a peer whose OpenBLAS does not know this CPU

Run alone it prints all of it: bench/machine.py [--threads 1,2] [--bandwidth] [--cross-core]
[--openblas]
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import NamedTuple, Optional


# For the scripts' --help.
ISA_HELP = ("The FMA peak (and bandwidth) probes use the widest vector this CPU has "
            "(bench/machine.py); TFPIN_BENCH_ISA=avx2 runs them on ymm even on an AVX-512 CPU.")


class Cpu(NamedTuple):
    model_name: str
    vendor: str
    family: int
    model: int
    flags: frozenset

    def __str__(self):
        return f"{self.model_name} ({self.vendor} family {self.family} model {self.model})"

    def as_json(self):
        return {"model_name": self.model_name, "vendor": self.vendor, "family": self.family,
                "model": self.model}


def cpu():
    """The first processor of /proc/cpuinfo (all of a machine's are alike for what is read here)."""
    fields = {}
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        text = ""
    for line in text.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    number = lambda key: int(fields[key]) if fields.get(key, "").isdigit() else -1
    return Cpu(fields.get("model name", "unknown CPU"), fields.get("vendor_id", "unknown vendor"),
               number("cpu family"), number("model"), frozenset(fields.get("flags", "").split()))


class Isa(NamedTuple):
    name: str        # TFPIN_BENCH_ISA's value
    register: str    # the vector register the probes use
    label: str       # for reports
    needs: tuple     # /proc/cpuinfo flags
    cxxflags: tuple  # per ISA, not -march=native: the probe measures the vector chosen here
    fma: bool


# Widest first. xmm (x86-64's baseline SSE2) has no FMA: no FMA peak, but a bandwidth.
ISAS = [
    Isa("avx512", "zmm", "zmm, AVX-512F", ("avx512f",), ("-mavx512f",), True),
    Isa("avx2", "ymm", "ymm, AVX2+FMA", ("avx2", "fma"), ("-mavx2", "-mfma"), True),
    Isa("sse", "xmm", "xmm, SSE2", (), (), False),
]


def vector_isa(machine=None):
    """TFPIN_BENCH_ISA's ISA when set (exits when this CPU lacks it), else the widest it has."""
    flags = (machine or cpu()).flags
    asked = os.environ.get("TFPIN_BENCH_ISA", "").strip().lower()
    if asked:
        isa = next((i for i in ISAS if i.name == asked), None)
        if isa is None:
            sys.exit(f"TFPIN_BENCH_ISA={asked}: unknown (valid: {', '.join(i.name for i in ISAS)})")
        missing = [f for f in isa.needs if f not in flags]
        if missing:
            sys.exit(f"TFPIN_BENCH_ISA={asked}: this CPU has no {' '.join(missing)}")
        return isa
    return next(i for i in ISAS if all(f in flags for f in i.needs))


# Put before every probe: `vec` is the vector of the ISA the file is compiled for, so one source
# serves every width.
VECTOR_PRELUDE = r"""
#include <immintrin.h>
#if defined(__AVX512F__)
typedef __m512 vec;
#define VEC_NAME "zmm"
#define vset1 _mm512_set1_ps
#define vadd _mm512_add_ps
#define vload _mm512_load_ps
#define vstoreu _mm512_storeu_ps
#define vfmadd _mm512_fmadd_ps
#elif defined(__AVX2__) && defined(__FMA__)
typedef __m256 vec;
#define VEC_NAME "ymm"
#define vset1 _mm256_set1_ps
#define vadd _mm256_add_ps
#define vload _mm256_load_ps
#define vstoreu _mm256_storeu_ps
#define vfmadd _mm256_fmadd_ps
#else
typedef __m128 vec;
#define VEC_NAME "xmm"
#define vset1 _mm_set1_ps
#define vadd _mm_add_ps
#define vload _mm_load_ps
#define vstoreu _mm_storeu_ps
#endif
constexpr int LANES = sizeof(vec) / sizeof(float);
static float vsum(vec v) {
  float out[LANES];
  vstoreu(out, v);
  float s = 0;
  for (float x : out) s += x;
  return s;
}
// The sum of n floats (a multiple of 4 vectors) at b: 4 chains, so adds never wait on each other.
static float read_sum(const float* b, long n) {
  vec s0 = vset1(0), s1 = s0, s2 = s0, s3 = s0;
  for (long i = 0; i < n; i += 4 * LANES) {
    s0 = vadd(s0, vload(b + i));
    s1 = vadd(s1, vload(b + i + LANES));
    s2 = vadd(s2, vload(b + i + 2 * LANES));
    s3 = vadd(s3, vload(b + i + 3 * LANES));
  }
  return vsum(vadd(vadd(s0, s1), vadd(s2, s3)));
}
"""

FMA_PROBE = r"""
#include <pthread.h>
#include <sched.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <vector>
// 12 independent accumulator chains: two FMA pipes of latency 4 (5 on Haswell) need 8 (10) in
// flight; 12 and the two constants still fit in AVX2's 16 ymm registers.
static double run(long iters) {
  const vec b = vset1(1.0000001f), c = vset1(1e-7f);
  vec a0 = vset1(0), a1 = vset1(1), a2 = vset1(2), a3 = vset1(3), a4 = vset1(4), a5 = vset1(5),
      a6 = vset1(6), a7 = vset1(7), a8 = vset1(8), a9 = vset1(9), a10 = vset1(10), a11 = vset1(11);
  auto t0 = std::chrono::steady_clock::now();
  for (long k = 0; k < iters; ++k) {
#define F(x) x = vfmadd(x, b, c);
    F(a0) F(a1) F(a2) F(a3) F(a4) F(a5) F(a6) F(a7) F(a8) F(a9) F(a10) F(a11)
  }
  double dt = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  vec s = vadd(vadd(vadd(a0, a1), vadd(a2, a3)), vadd(vadd(a4, a5), vadd(a6, a7)));
  s = vadd(s, vadd(vadd(a8, a9), vadd(a10, a11)));
  if (vsum(s) == 12345.f) std::printf(" ");  // keeps the chains alive
  return iters * 12.0 * 2 * LANES / dt / 1e9;
}
int main(int argc, char** argv) {
  int n = std::atoi(argv[1]);
  std::vector<int> cpus;
  for (int i = 2; i < argc; ++i) cpus.push_back(std::atoi(argv[i]));
  // Best of several concurrent rounds: a shared machine only ever makes the probe slower.
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    std::vector<double> r(n);
    std::vector<std::thread> ts;
    for (int t = 0; t < n; ++t) {
      ts.emplace_back([&, t] {
        cpu_set_t set; CPU_ZERO(&set); CPU_SET(cpus[t % cpus.size()], &set);
        pthread_setaffinity_np(pthread_self(), sizeof set, &set);
        if (round == 0) run(20000000);  // warm up (frequency, power licence)
        r[t] = run(60000000);
      });
    }
    for (auto& t : ts) t.join();
    double sum = 0;
    for (double x : r) sum += x;
    if (sum > best) best = sum;
  }
  std::printf("%.2f %s\n", best, VEC_NAME);
}
"""

BANDWIDTH_PROBE = r"""
#include <omp.h>
#include <sys/mman.h>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
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
  // Best and median of 15 rounds: the best is STREAM's convention; the median is what a kernel's
  // median step time compares with on a shared machine.
  const int rounds = 15;
  double triad[rounds], read[rounds];
  float sink = 0;
  for (int r = 0; r < rounds; ++r) {
    double t = omp_get_wtime();
#pragma omp parallel for schedule(static)
    for (long i = 0; i < n; ++i) a[i] = b[i] + 3.0f * c[i];
    triad[r] = omp_get_wtime() - t;
    t = omp_get_wtime();
#pragma omp parallel reduction(+ : sink)
    {
      // schedule(static)'s split: equal runs of whole 4-vector groups, in thread order.
      const long groups = n / (4 * LANES);
      const long threads = omp_get_num_threads(), thread = omp_get_thread_num();
      const long first = groups * thread / threads, end = groups * (thread + 1) / threads;
      sink += read_sum(b + first * 4 * LANES, (end - first) * 4 * LANES);
    }
    read[r] = omp_get_wtime() - t;
  }
  std::sort(triad, triad + rounds);
  std::sort(read, read + rounds);
  const double bytes = 1.0 * n * 4 / 1e9;
  std::printf("%.3f %.3f %.3f %.3f %s %g\n", 3 * bytes / triad[0], bytes / read[0],
              3 * bytes / triad[rounds / 2], bytes / read[rounds / 2], VEC_NAME, sink);
}
"""


CROSS_CORE_PROBE = r"""
#include <pthread.h>
#include <sched.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
// Two threads pinned to the two CPUs given: a counter bounced between them (one cache line, each
// write waits for the other core's), then 20 rounds of one core writing 1 MiB and the other
// reading it, and the reader reading 1 MiB it wrote itself. Best of the rounds.
static int cpus[2];
static void pin(int which) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpus[which], &set);
  if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) {
    std::fprintf(stderr, "cannot pin to CPU %d\n", cpus[which]);
    std::exit(1);
  }
}
static double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
alignas(64) static std::atomic<long> ball{0};
alignas(64) static std::atomic<long> phase{0};
static const long trips = 100000;
static float* buffer;
static long floats;
static void* other(void*) {
  pin(1);
  for (long i = 0; i < trips; ++i) {
    while (ball.load(std::memory_order_acquire) != 2 * i + 1) {}
    ball.store(2 * i + 2, std::memory_order_release);
  }
  for (long r = 0;; ++r) {  // writes the buffer on even phases; -1 ends
    long p;
    while ((p = phase.load(std::memory_order_acquire)) != 2 * r && p != -1) {}
    if (p == -1) return nullptr;
    for (long i = 0; i < floats; ++i) buffer[i] = float(i + r);
    phase.store(2 * r + 1, std::memory_order_release);
  }
}
int main(int argc, char** argv) {
  if (argc != 3) return 2;
  cpus[0] = std::atoi(argv[1]);
  cpus[1] = std::atoi(argv[2]);
  const long bytes = 1L << 20;  // 1 MiB: a core's L2 or less, what a layer hands the next
  floats = bytes / 4;
  buffer = static_cast<float*>(std::aligned_alloc(64, bytes));
  float* own = static_cast<float*>(std::aligned_alloc(64, bytes));
  std::memset(buffer, 0, bytes);
  pin(0);
  pthread_t thread;
  if (pthread_create(&thread, nullptr, other, nullptr) != 0) return 1;
  double t = now();
  for (long i = 0; i < trips; ++i) {
    ball.store(2 * i + 1, std::memory_order_release);
    while (ball.load(std::memory_order_acquire) != 2 * i + 2) {}
  }
  const double one_way_ns = (now() - t) / trips / 2 * 1e9;
  double theirs = 1e30, mine = 1e30;
  float sink = 0;
  for (long r = 0; r < 20; ++r) {
    while (phase.load(std::memory_order_acquire) != 2 * r + 1) {}
    t = now();
    sink += read_sum(buffer, floats);
    theirs = std::min(theirs, now() - t);
    for (long i = 0; i < floats; ++i) own[i] = float(i + r);
    t = now();
    sink += read_sum(own, floats);
    mine = std::min(mine, now() - t);
    phase.store(r + 1 < 20 ? 2 * r + 2 : -1, std::memory_order_release);
  }
  pthread_join(thread, nullptr);
  std::printf("%.1f %.2f %.2f %g\n", one_way_ns, bytes / theirs / 1e9, bytes / mine / 1e9, sink);
}
"""


class Peak(NamedTuple):
    gflops: Optional[float]  # None: not measured, `note` says why
    isa: Optional[str]       # the vector the probe ran on, e.g. "zmm, AVX-512F"
    threads: int
    note: str = ""

    def __str__(self):
        if self.gflops is None:
            return f"FMA peak: not measured ({self.note})"
        cores = f"{self.threads} core{'s' if self.threads != 1 else ''}"
        return f"FMA peak of {cores} {self.gflops:.0f} GFLOP/s ({self.isa})"


class Bandwidth(NamedTuple):
    triad: float  # GB/s, 3 x 4 bytes per element as STREAM counts; best of the probe's rounds
    read: float   # GB/s of a read-only sum, best of the rounds
    isa: str      # the vector of the read-only sum
    triad_median: float = 0.0  # the same, median of the rounds
    read_median: float = 0.0


def allowed_cpus():
    return sorted(os.sched_getaffinity(0))


def compile_probe(source, isa, workdir, name, extra=()):
    """The executable of VECTOR_PRELUDE + source built for `isa`; RuntimeError when it cannot be."""
    if shutil.which("g++") is None:
        raise RuntimeError("no g++")
    src = Path(workdir) / f"{name}.cpp"
    exe = Path(workdir) / name
    src.write_text(VECTOR_PRELUDE + source)
    build = subprocess.run(["g++", "-O2", *isa.cxxflags, *extra, "-o", str(exe), str(src)],
                           capture_output=True, text=True)
    if build.returncode != 0:
        raise RuntimeError(f"cannot compile for {isa.label}: {build.stderr.strip()}")
    return exe


def fma_peak(threads, workdir, isa=None):
    """GFLOP/s of `threads` of the allowed cores running FMAs flat out, on the vector of `isa`
    (default: vector_isa()). A Peak whose gflops is None when the CPU has no FMA or no compiler."""
    isa = isa or vector_isa()
    if not isa.fma:
        return Peak(None, isa.label, threads, f"no FMA on {isa.label}")
    try:
        exe = compile_probe(FMA_PROBE, isa, workdir, "fma", ["-pthread"])
    except RuntimeError as e:
        print(f"fma probe: {e}", file=sys.stderr)
        return Peak(None, isa.label, threads, str(e))
    run = subprocess.run([str(exe), str(threads), *map(str, allowed_cpus())], capture_output=True,
                         text=True)
    if run.returncode != 0:
        print(f"fma probe ({isa.label}) failed: {run.stderr.strip()}", file=sys.stderr)
        return Peak(None, isa.label, threads, f"the {isa.register} probe failed")
    value, register = run.stdout.split()
    assert register == isa.register, f"probe built for {isa.register} ran on {register}"
    return Peak(float(value), isa.label, threads)


def memory_bandwidth(threads, workdir, isa=None):
    """Triad and read-only GB/s of `threads` cores (OpenMP, one thread per core), on huge pages."""
    isa = isa or vector_isa()
    try:
        exe = compile_probe(BANDWIDTH_PROBE, isa, workdir, "bw", ["-fopenmp"])
    except RuntimeError as e:
        sys.exit(f"bandwidth probe: {e}")
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), OMP_PROC_BIND="true", OMP_PLACES="cores")
    out = subprocess.run([str(exe)], capture_output=True, text=True, env=env, check=True).stdout
    triad, read, triad_median, read_median, register, _ = out.split()
    assert register == isa.register, f"probe built for {isa.register} ran on {register}"
    return Bandwidth(float(triad), float(read), isa.label, float(triad_median), float(read_median))


class CrossCore(NamedTuple):
    cpus: tuple        # the two CPUs
    one_way_ns: float  # a cache line from one core to the other (half a round trip)
    theirs: float      # GB/s reading 1 MiB the other core has just written
    mine: float        # GB/s reading 1 MiB this core has just written

    def __str__(self):
        return (f"CPUs {self.cpus[0]} and {self.cpus[1]}: a cache line one way {self.one_way_ns:.0f} ns; "
                f"reading 1 MiB the other core wrote {self.theirs:.1f} GB/s, one this core wrote "
                f"{self.mine:.1f} GB/s")


def cross_core(workdir, isa=None):
    """CrossCore of the first two allowed CPUs, or None with fewer than two."""
    isa = isa or vector_isa()
    cpus = allowed_cpus()[:2]
    if len(cpus) < 2:
        return None
    try:
        exe = compile_probe(CROSS_CORE_PROBE, isa, workdir, "cross_core", ["-pthread"])
    except RuntimeError as e:
        sys.exit(f"cross-core probe: {e}")
    try:
        run = subprocess.run([str(exe), *map(str, cpus)], capture_output=True, text=True,
                             timeout=120)
    except subprocess.TimeoutExpired:
        sys.exit(f"cross-core probe: no answer in 120 s (is CPU {cpus[1]} getting any time?)")
    if run.returncode != 0:
        sys.exit(f"cross-core probe failed: {run.stderr.strip()}")
    one_way, theirs, mine, _ = run.stdout.split()
    return CrossCore(tuple(cpus), float(one_way), float(theirs), float(mine))


# OpenBLAS, loaded as the peer loads it: libblas.so.3 (Debian's PyTorch links it; OpenBLAS behind
# it through update-alternatives), else libopenblas.so.0. Runs in the peer's own python.
OPENBLAS_PROBE = r"""
import ctypes, json
for name in ("libblas.so.3", "libopenblas.so.0"):
    try:
        lib = ctypes.CDLL(name)
        core, config = lib.openblas_get_corename, lib.openblas_get_config
    except (OSError, AttributeError):  # missing, or a BLAS other than OpenBLAS
        continue
    core.restype = config.restype = ctypes.c_char_p
    print(json.dumps({"library": name, "core": core().decode(), "config": config().decode()}))
    break
"""

# OpenBLAS cores (openblas_get_corename(), lowercased: DYNAMIC_ARCH builds say "SkylakeX", others
# "SKYLAKEX") whose kernels use zmm, and those that use at least ymm with FMA.
ZMM_CORES = {"skylakex", "cooperlake", "sapphirerapids"}
YMM_CORES = ZMM_CORES | {"haswell", "zen", "excavator"}


class OpenBlasChoice(NamedTuple):
    coretype: Optional[str]  # OPENBLAS_CORETYPE for the peer; None: OpenBLAS chooses
    message: str             # for the report: what OpenBLAS chose and what was done about it
    core: Optional[str] = None    # what OpenBLAS picked by itself
    config: Optional[str] = None  # openblas_get_config(): version and build options

    def apply(self, env):
        """The peer's environment: an inherited OPENBLAS_CORETYPE never reaches it (a machine-wide
        one would quietly hold the baseline to narrower kernels), the chosen one does."""
        env = {k: v for k, v in env.items() if k != "OPENBLAS_CORETYPE"}
        if self.coretype:
            env["OPENBLAS_CORETYPE"] = self.coretype
        return env

    def as_json(self):
        return {"core": self.core, "config": self.config, "coretype": self.coretype,
                "message": self.message}


def wanted_openblas_core(machine):
    """The core OpenBLAS should use on `machine`, the cores as wide, and that width's name."""
    # OpenBLAS's SkylakeX kernels need AVX-512 BW/DQ/VL beside F; without them Haswell is its best.
    if all(f in machine.flags for f in ("avx512f", "avx512bw", "avx512dq", "avx512vl")):
        return "SkylakeX", ZMM_CORES, "AVX-512"
    if all(f in machine.flags for f in ("avx2", "fma")):
        amd = machine.vendor in ("AuthenticAMD", "HygonGenuine")
        return ("Zen" if amd else "Haswell"), YMM_CORES, "AVX2"
    return None, None, None  # nothing to gain over whatever OpenBLAS picks


def openblas_coretype(python, env):
    """What OPENBLAS_CORETYPE a peer run by `python` (argv: the host's interpreter, or chroot ROOT
    python3) with environment `env` needs: none when its OpenBLAS picks a core with this CPU's
    vector width by itself (forcing a core it would not pick is how a peer dies on an illegal
    instruction), the CPU's widest when OpenBLAS does not know the CPU and falls back to an older
    core. Apply the answer with .apply(env)."""
    inherited = env.get("OPENBLAS_CORETYPE")
    note = f" (OPENBLAS_CORETYPE={inherited} from the environment not passed on)" if inherited else ""
    probe_env = {k: v for k, v in env.items() if k != "OPENBLAS_CORETYPE"}
    probe_env["OPENBLAS_NUM_THREADS"] = "1"  # the probe needs no thread pool
    res = subprocess.run([*python, "-c", OPENBLAS_PROBE], capture_output=True, text=True,
                         env=probe_env)
    if res.returncode != 0:
        return OpenBlasChoice(None, f"OpenBLAS not probed ({res.stderr.strip()[-300:]}){note}")
    if not res.stdout.strip():
        return OpenBlasChoice(None, f"no OpenBLAS behind libblas.so.3 or libopenblas.so.0{note}")
    found = json.loads(res.stdout)
    core, config = found["core"], found["config"]
    version = " ".join(config.split()[:2])  # "OpenBLAS 0.3.21"
    machine = cpu()
    want, good, width = wanted_openblas_core(machine)
    if want is None or core.lower() in good:
        return OpenBlasChoice(None, f"{version} chose {core} on this CPU: kept{note}", core, config)
    why = f"{version} chose {core} on this CPU ({machine.model_name}, {width})"
    if "DYNAMIC_ARCH" not in config.split():
        return OpenBlasChoice(None, f"{why}; built for that core only, OPENBLAS_CORETYPE cannot "
                              f"help{note}", core, config)
    return OpenBlasChoice(want, f"{why}; forcing OPENBLAS_CORETYPE={want}{note}", core, config)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--threads", default="1", help="comma-separated thread counts of the FMA probe")
    p.add_argument("--bandwidth", action="store_true", help="also the memory bandwidth probe (2 s)")
    p.add_argument("--cross-core", action="store_true",
                   help="also what data costs between the first two allowed cores (1 s)")
    p.add_argument("--openblas", action="store_true",
                   help="also which core this python's OpenBLAS picks and whether the peers force one")
    args = p.parse_args()
    machine = cpu()
    isa = vector_isa(machine)
    print(f"cpu: {machine}; probes on {isa.label}")
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.threads.split(",") if x):
            print(f"{n} thread(s): {fma_peak(n, tmp, isa)}")
        if args.bandwidth:
            bw = memory_bandwidth(len(allowed_cpus()), tmp, isa)
            print(f"{len(allowed_cpus())} cores: triad {bw.triad:.1f} GB/s, read {bw.read:.1f} GB/s "
                  f"(best of the probe's rounds; medians {bw.triad_median:.1f} and {bw.read_median:.1f}) "
                  f"({bw.isa})")
        if args.cross_core:
            result = cross_core(tmp, isa)
            print(f"cross-core: {result}" if result else "cross-core: needs two allowed CPUs")
    if args.openblas:
        print(f"openblas: {openblas_coretype([sys.executable], dict(os.environ)).message}")


if __name__ == "__main__":
    main()
