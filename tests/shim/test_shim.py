#!/usr/bin/python3
"""Tests of libtfpin-shim.so: real programs run under the real shim (LD_PRELOAD) with a plan in
the environment. Every thread's affinity is read by the probes themselves from /proc (and raw
syscalls, which the shim does not hook); what each run printed is echoed, so a log shows what
was seen. Standard library only.

Environment (set by tests/shim/meson.build): TFPIN_SHIM_LIB, SHIM_PROBE, SHIM_PROBE_DL,
SHIM_PROBE_BLAS, SHIM_OMP_PLUGIN, SHIM_CTOR_PLUGIN, SHIM_INTERPOSER, SHIM_PROBE_KMP (optional,
clang + libomp), TFPIN_EXE.
Run one group: test_shim.py -v OpenMP; list the groups (test classes): test_shim.py --list-groups
"""
import errno
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import unittest

# The programs meson built, by the variables it passes them in ("" where one was not built).
(SHIM, PROBE, PROBE_DL, PROBE_BLAS, PLUGIN, CTOR_PLUGIN, INTERPOSER, PROBE_KMP, TFPIN,
 PROBE_CPUFILES, PROBE_CPUINFO, PROBE_EARLY_IO) = (
    os.environ.get(name, "") for name in (
        "TFPIN_SHIM_LIB", "SHIM_PROBE", "SHIM_PROBE_DL", "SHIM_PROBE_BLAS", "SHIM_OMP_PLUGIN",
        "SHIM_CTOR_PLUGIN", "SHIM_INTERPOSER", "SHIM_PROBE_KMP", "TFPIN_EXE",
        "SHIM_PROBE_CPUFILES", "SHIM_PROBE_CPUINFO", "SHIM_PROBE_EARLY_IO"))
PYTHON = "/usr/bin/python3"

# Plans use the first two CPUs this test may use (0 and 1 on the 2-core build machine).
CPUS = sorted(os.sched_getaffinity(0))
A, B = (CPUS + [None, None])[:2]
BOTH = sorted([A, B]) if B is not None else []

# The shim's sources: forwarded_symbols.def is the one list of what it hooks and forwards.
SHIM_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shim")
SYMBOL_LINE = re.compile(
    r"SHIM_LIBC\((\w+)\)|SHIM_FORWARD\((\w+), (HOOKED|LOOKUP)\)|SHIM_MARKER\((\w+)\)")


def symbol_list():
    """{name: LIBC | HOOKED | LOOKUP | MARKER} from shim/forwarded_symbols.def; an unreadable
    entry fails."""
    out = {}
    with open(os.path.join(SHIM_SRC, "forwarded_symbols.def")) as f:
        for line in f:
            if not line.startswith("SHIM_"):
                continue
            m = SYMBOL_LINE.match(line)
            if not m:
                raise AssertionError(f"forwarded_symbols.def: cannot read {line.strip()!r}")
            if m.group(4):
                out[m.group(4)] = "MARKER"
            else:
                out[m.group(1) or m.group(2)] = "LIBC" if m.group(1) else m.group(3)
    return out


def hooked():
    """The names the shim must export: every entry of the list but the LOOKUP-only ones (the hooks
    and the marker)."""
    return {name for name, kind in symbol_list().items() if kind != "LOOKUP"}


PY_COUNTS = ("import json, os\n"
             "allowed = [l.split(':', 1)[1].strip() for l in open('/proc/self/status')"
             " if l.startswith('Cpus_allowed_list')][0]\n"
             "print(json.dumps({'cpu_count': os.cpu_count(),"
             " 'affinity': sorted(os.sched_getaffinity(0)), 'status_allowed': allowed,"
             " 'plan': os.environ.get('TFPIN_CPUS')}))")


def plan(cpus, interop, intra):
    env = {"TFPIN_CPUS": cpus}
    if interop is not None:
        env["TFPIN_INTEROP"] = str(interop)
    if intra is not None:
        env["TFPIN_INTRA"] = str(intra)
    return env


def base_env():
    """The caller's environment without anything that steers OpenMP, tfpin or preloading."""
    return {k: v for k, v in os.environ.items()
            if not k.startswith(("TFPIN_", "OMP_", "GOMP_", "KMP_", "SHIM_", "MKL_", "OPENBLAS_", "ORT_"))
            and k != "LD_PRELOAD"}


def run(argv, plan_env=None, preload=True, env=None, timeout=60, check=True):
    e = base_env()
    if preload:
        e["LD_PRELOAD"] = SHIM
    if plan_env:
        e.update(plan_env)
    if env:
        e.update(env)
    shown = " ".join(f"{k}={v}" for k, v in sorted(e.items())
                     if k.startswith(("TFPIN_", "OMP_", "LD_PRELOAD")))
    t0 = time.monotonic()
    p = subprocess.run([str(a) for a in argv], env=e, capture_output=True, text=True,
                       timeout=timeout)
    dt = time.monotonic() - t0
    print(f"\n$ {shown} {' '.join(os.path.basename(str(a)) if i == 0 else str(a) for i, a in enumerate(argv))}"
          f"   [{dt:.2f}s, exit {p.returncode}]")
    if p.stdout.strip():
        print(p.stdout.rstrip())
    if p.stderr.strip():
        print("stderr: " + p.stderr.rstrip())
    sys.stdout.flush()
    if check and p.returncode != 0:
        raise AssertionError(f"{argv} exited with {p.returncode}: {p.stderr}")
    return p


def last_json(text):
    lines = [l for l in text.splitlines() if l.startswith("{")]
    if not lines:
        raise AssertionError(f"no JSON in output: {text!r}")
    return json.loads(lines[-1])


def probe(*args, **kw):
    return last_json(run([PROBE, *args], **kw).stdout)


REPORT_RE = re.compile(r"tfpin-shim\[(\d+)\]: (.*)")


def reports(text):
    """{pid: {key: value}} from the shim's summary lines."""
    out = {}
    for line in text.splitlines():
        m = REPORT_RE.search(line)
        if m and "invalid plan" not in line:
            out[int(m.group(1))] = dict(kv.split("=", 1) for kv in m.group(2).split())
    return out


def setUpModule():
    missing = [n for n, v in [("TFPIN_SHIM_LIB", SHIM), ("SHIM_PROBE", PROBE)] if not v]
    if missing:
        raise unittest.SkipTest(f"{missing} not set: run through meson test")
    if B is None:
        raise unittest.SkipTest("needs at least 2 usable CPUs")


class Build(unittest.TestCase):
    def test_needs_libc_only(self):
        out = run(["readelf", "-d", SHIM], preload=False).stdout
        needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.*)\]", out)
        print("NEEDED:", needed)
        self.assertIn("libc.so.6", needed)
        self.assertTrue(set(needed) <= {"libc.so.6", "ld-linux-x86-64.so.2"}, needed)

    def test_exports_only_the_hooks(self):
        out = run(["nm", "-D", "--defined-only", SHIM], preload=False).stdout
        exported = {l.split()[-1].split("@")[0] for l in out.splitlines() if l.strip()}
        self.assertEqual(exported, hooked())

    def test_version_map_matches_the_symbol_list(self):
        # The script the build generated from forwarded_symbols.def and linked the shim with.
        with open(os.environ["TFPIN_SHIM_MAP"]) as f:
            text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        listed = re.search(r"global:(.*?)local:", text, re.S).group(1)
        self.assertEqual(set(re.findall(r"([\w.]+)\s*;", listed)), hooked())

    def test_no_cxx_runtime_references(self):
        out = run(["nm", "-D", "--undefined-only", SHIM], preload=False).stdout
        # (__cxa_finalize is glibc's, referenced by every shared object's crtbegin)
        bad = [l for l in out.splitlines() if "_Z" in l or "__gxx" in l or "_Unwind" in l or
               ("__cxa" in l and "__cxa_finalize" not in l)]
        self.assertEqual(bad, [])

    def test_no_glibc_version_newer_than_the_floor(self):
        """The shim loads into images with a C library as old as glibc 2.17 (CentOS 7; Ubuntu 20.04
        has 2.31, RHEL 8 2.28): ld.so refuses a preloaded library that needs a newer version, and
        the program does not start at all. The versions it needs, from .gnu.version_r."""
        out = run(["readelf", "--version-info", "-W", SHIM], preload=False).stdout
        needed = re.findall(r"Name: (GLIBC_[\d.]+)", out.split(".gnu.version_r")[-1])
        print("needs:", sorted(set(needed)))
        self.assertTrue(needed)
        floor = (2, 17)
        too_new = [v for v in set(needed)
                   if tuple(int(x) for x in v[len("GLIBC_"):].split(".")[:2]) > floor]
        self.assertEqual(too_new, [], "above the glibc 2.17 floor")

    def test_nodelete_and_bind_now(self):
        out = run(["readelf", "-d", SHIM], preload=False).stdout
        self.assertRegex(out, r"FLAGS_1\).*NODELETE")
        self.assertRegex(out, r"FLAGS_1\).*NOW")


class CpuCount(unittest.TestCase):
    def check_counts(self, c, n, cpus):
        for key in ("sysconf_onln", "get_nprocs",
                    "sched_getaffinity", "sched_getaffinity_tid", "pthread_getaffinity",
                    "hardware_concurrency", "omp_get_num_procs"):
            self.assertEqual(c[key], n, key)
        # "Configured" CPUs bound CPU ids: the machine's count, whatever the plan.
        real = probe("counts")
        for key in ("sysconf_conf", "get_nprocs_conf"):
            self.assertEqual(c[key], real[key], key)
            self.assertGreater(c[key], max(cpus), key)
        self.assertEqual(c["sched_getaffinity_rc"], 0)
        self.assertEqual(c["pthread_getaffinity_rc"], 0)
        self.assertEqual(c["sched_getaffinity_cpus"], cpus)

    def test_one_cpu_plan(self):
        c = probe("counts", plan_env=plan(f"{B}", 1, 1))
        self.check_counts(c, 1, [B])
        self.assertEqual(c["real_mask"], [B], "the initial thread is bound to the plan")

    def test_two_cpu_plan(self):
        c = probe("counts", plan_env=plan(f"{B},{A}", 2, 1))
        self.check_counts(c, 2, BOTH)
        self.assertEqual(c["real_mask"], BOTH)

    def test_python(self):
        code = "import os; print(os.cpu_count(), len(os.sched_getaffinity(0)))"
        for cpus, n in ((f"{B}", 1), (f"{A},{B}", 2)):
            out = run([PYTHON, "-c", code], plan_env=plan(cpus, 1, n)).stdout.split()
            self.assertEqual(out, [str(n), str(n)])

    def test_per_cpu_array_indexed_by_sched_getcpu(self):
        # Sized by _SC_NPROCESSORS_CONF, indexed by the CPU it runs on: with CONF = the plan's
        # count (1) and the plan on CPU B (> 0), .at() aborts.
        r = probe("percpu", plan_env=plan(f"{B}", 1, 1))
        self.assertEqual(r["cpu"], B)
        self.assertGreater(r["configured"], B)

    def test_other_process_is_not_rewritten(self):
        # Asking about another process (our parent: this test) reports its real mask.
        code = ("import os; print(len(os.sched_getaffinity(os.getppid())))")
        out = run([PYTHON, "-c", code], plan_env=plan(f"{B}", 1, 1)).stdout.split()
        self.assertEqual(out, [str(len(CPUS))])


class Sanitizers(unittest.TestCase):
    def test_thread_sanitizer_program_runs(self):
        exe = os.environ.get("SHIM_PROBE_TSAN")
        if not exe:
            self.skipTest("this compiler cannot build ThreadSanitizer programs")
        # No plan (the shim only forwards), then a one-CPU plan (the shim answers).
        for plan_env, online in ((None, os.cpu_count()), (plan(f"{A}", 1, 1), 1)):
            r = last_json(run([exe], plan_env=plan_env).stdout)
            self.assertEqual(r, {"threads": 4, "online": online})


def machine_online():
    with open("/sys/devices/system/cpu/online") as f:
        return f.read().strip()


def machine_processors():
    with open("/proc/cpuinfo") as f:
        return sum(1 for line in f if line.startswith("processor"))


class CpuFiles(unittest.TestCase):
    """Programs that count CPUs from /sys and /proc, not sysconf: the shim serves them the plan's
    view of the CPU files (shim/cpu_files.c); the machine's without a plan or with
    TFPIN_CPU_FILES=0. Each check has its control without the shim."""

    def sh(self, command, plan_env=None, preload=True, env=None):
        return run(["sh", "-c", command], plan_env=plan_env, preload=preload, env=env).stdout.strip()

    @unittest.skipUnless(PROBE_CPUINFO, "libcpuinfo-dev is not installed (scripts/setup installs it)")
    def test_libcpuinfo_pool_is_the_plans(self):
        machine = last_json(run([PROBE_CPUINFO], preload=False).stdout)
        self.assertEqual(machine["processors"], machine_processors())
        self.assertEqual(machine["pool"], machine["processors"])
        one = last_json(run([PROBE_CPUINFO], plan_env=plan(f"{B}", 1, 1)).stdout)
        self.assertEqual((one["processors"], one["cores"], one["pool"]), (1, 1, 1))
        two = last_json(run([PROBE_CPUINFO], plan_env=plan(f"{A},{B}", 2, 1)).stdout)
        # Cores as libcpuinfo counts them on this machine: it decodes them from CPUID, not from
        # /sys, and a VM's CPUID may call two Linux cores one core's two threads.
        cores_of_a_b = len({machine["core_of"][str(A)], machine["core_of"][str(B)]})
        self.assertEqual((two["processors"], two["cores"], two["pool"]), (2, cores_of_a_b, 2))
        # The view switched off: the machine again.
        off = last_json(run([PROBE_CPUINFO], plan_env=plan(f"{B}", 1, 1),
                            env={"TFPIN_CPU_FILES": "0"}).stdout)
        self.assertEqual(off["processors"], machine["processors"])

    def test_tools_agree_with_the_plan(self):
        one = plan(f"{B}", 1, 1)
        self.assertEqual(self.sh("nproc", one), "1")
        self.assertEqual(self.sh("nproc --all", one), self.sh("nproc --all", preload=False))
        self.assertEqual(self.sh("grep -c ^processor /proc/cpuinfo", one), "1")
        self.assertEqual(self.sh(f"grep '^processor' /proc/cpuinfo", one).split(":")[1].strip(),
                         str(B), "real CPU ids, not renumbered")
        self.assertEqual(self.sh("grep -c '^cpu[0-9]' /proc/stat", one), "1")
        self.assertEqual(self.sh("cat /sys/devices/system/cpu/online", one), str(B))
        self.assertEqual(self.sh("cat /sys/devices/system/cpu/present", one), str(B))
        self.assertEqual(self.sh("cat /sys/devices/system/cpu/possible", one),
                         self.sh("cat /sys/devices/system/cpu/possible", preload=False))
        self.assertEqual(self.sh(f"cat /sys/devices/system/cpu/cpu{A}/online", one), "0")
        self.assertEqual(self.sh("ls /sys/devices/system/cpu | grep -c '^cpu[0-9]'", one), "1")
        lscpu = self.sh("lscpu", one)
        self.assertRegex(lscpu, rf"On-line CPU\(s\) list: +{B}\n")
        self.assertRegex(lscpu, r"\nCPU\(s\): +1\n")
        self.assertRegex(self.sh("lscpu", preload=False), rf"\nCPU\(s\): +{machine_processors()}\n")
        counts = last_json(run([PYTHON, "-c", PY_COUNTS], plan_env=one).stdout)
        self.assertEqual((counts["cpu_count"], counts["affinity"]), (1, [B]))
        self.assertEqual(self.sh("grep -c ^processor /proc/cpuinfo", preload=False),
                         str(machine_processors()))

    def test_siblings_of_the_plans_cpus_only(self):
        one = plan(f"{B}", 1, 1)
        topology = f"/sys/devices/system/cpu/cpu{B}/topology"
        self.assertEqual(self.sh(f"cat {topology}/package_cpus_list", one), str(B))
        mask = self.sh(f"cat {topology}/package_cpus", one)
        self.assertEqual(int(mask.replace(",", ""), 16), 1 << B)
        self.assertEqual(len(mask), len(self.sh(f"cat {topology}/package_cpus", preload=False)))
        self.assertEqual(self.sh("grep -m1 '^siblings' /proc/cpuinfo", one).split(":")[1].strip(), "1")

    def test_constructor_threads_fork_and_exec(self):
        r = last_json(run([PROBE_CPUFILES], plan_env=plan(f"{B}", 1, 1)).stdout)
        self.assertEqual(r, {"ctor_online": str(B), "online": str(B), "present": str(B),
                             "processors": 1, "stat_cpus": 1, "cpu_dirs": 1, "threads_agree": True,
                             "fork_online": str(B)})
        control = last_json(run([PROBE_CPUFILES], preload=False).stdout)
        self.assertEqual(control["online"], machine_online())
        self.assertEqual(control["processors"], machine_processors())
        # exec: a child with a plan of its own gets its own view.
        out = self.sh(f"cat /sys/devices/system/cpu/online; TFPIN_CPUS={A} "
                      "cat /sys/devices/system/cpu/online", plan(f"{B}", 1, 1))
        self.assertEqual(out.split(), [str(B), str(A)])

    def test_report_counts_views_and_nothing_without_plan(self):
        # (Python rather than cat: coreutils close stderr before the shim's report at exit.)
        code = ("for path in ('/sys/devices/system/cpu/online', '/proc/cpuinfo', '/etc/hostname'):"
                " open(path).read()")
        p = run([PYTHON, "-c", code], plan_env=plan(f"{B}", 1, 1), env={"TFPIN_REPORT": "stderr"})
        (report,) = reports(p.stderr).values()
        self.assertEqual(report["cpu_file_views"], "2")
        self.assertEqual(self.sh("cat /sys/devices/system/cpu/online"), machine_online())
        self.assertEqual(self.sh("grep -c ^processor /proc/cpuinfo"), str(machine_processors()))
        off = {"TFPIN_CPU_FILES": "0"}
        self.assertEqual(self.sh("cat /sys/devices/system/cpu/online", plan(f"{B}", 1, 1), env=off),
                         machine_online())


    def test_paths_the_kernel_resolves_to_a_view_get_the_view(self):
        one = plan(f"{B}", 1, 1)
        for path in ("/proc/self/root/sys/devices/system/cpu/online",
                     "/sys/devices/system/cpu//online", "/sys//devices/system/cpu/./online",
                     f"/sys/devices/system/cpu/cpu{A}/../online",
                     f"/sys/bus/cpu/devices/cpu{B}/../online"):  # ".." after a link: not lexical
            with self.subTest(path=path):
                self.assertEqual(self.sh(f"cat {path}", one), str(B))
        self.assertEqual(self.sh("cd /sys/devices/system/cpu && cat ./online", one), str(B))
        self.assertEqual(self.sh("grep -c ^processor /proc/self/task/../../cpuinfo", one), "1")
        # A CPU outside the plan, through the bus's link to its directory and through a CPU
        # directory's own links (node0, subsystem).
        self.assertEqual(self.sh(f"cat /sys/bus/cpu/devices/cpu{B}/online", plan(f"{A}", 1, 1)), "0")
        self.assertEqual(self.sh(f"cat /sys/devices/system/cpu/cpu{A}/subsystem/devices/cpu{B}/online",
                                 plan(f"{A}", 1, 1)), "0")
        if os.path.exists(f"/sys/devices/system/cpu/cpu{B}/node0/cpulist"):
            self.assertEqual(self.sh(f"cat /sys/devices/system/cpu/cpu{B}/node0/cpulist", one), str(B))

    def test_flags_keep_their_meaning(self):
        code = ("import os, json\n"
                "p = '/sys/devices/system/cpu/online'\n"
                "fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)\n"
                "nonblock = bool(os.get_blocking(fd) is False)\n"
                "os.close(fd)\n"
                "h = os.open(p, os.O_PATH)\n"
                "try:\n"
                "    os.read(h, 10); path_read = 'readable'\n"
                "except OSError as e:\n"
                "    path_read = e.errno\n"
                "os.close(h)\n"
                "print(json.dumps({'nonblock': nonblock, 'path_read': path_read}))\n")
        got = last_json(run([PYTHON, "-c", code], plan_env=plan(f"{B}", 1, 1)).stdout)
        self.assertEqual(got, {"nonblock": True, "path_read": errno.EBADF})

    def test_a_view_that_cannot_be_built_is_the_real_file_counted(self):
        # One descriptor free: memfd_create takes it and the view's reopen finds none, so the real
        # file is opened (with the memfd closed again) and the report counts the fallback.
        code = ("import os, resource\n"
                "resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))\n"
                "held = []\n"
                "try:\n"
                "    while True: held.append(os.open('/dev/null', os.O_RDONLY))\n"
                "except OSError:\n"
                "    os.close(held.pop())\n"
                "fd = os.open('/sys/devices/system/cpu/online', os.O_RDONLY)\n"
                "text = os.read(fd, 100).decode().strip()\n"
                "os.close(fd)\n"
                "for h in held: os.close(h)\n"
                "print(text)\n")
        p = run([PYTHON, "-c", code], plan_env=plan(f"{B}", 1, 1), env={"TFPIN_REPORT": "stderr"})
        self.assertEqual(p.stdout.strip(), machine_online())
        (report,) = reports(p.stderr).values()
        self.assertEqual((report["cpu_file_view_fallbacks"], report["cpu_file_views"]), ("1", "0"))
        # A view's file the machine does not have is no fallback: the real open says ENOENT.
        missing = (f"import os\ntry: os.open('/sys/devices/system/cpu/cpu{B}/topology/"
                   "book_siblings_list', os.O_RDONLY)\nexcept FileNotFoundError: print('ENOENT')\n")
        p = run([PYTHON, "-c", missing], plan_env=plan(f"{B}", 1, 1), env={"TFPIN_REPORT": "stderr"})
        self.assertEqual(p.stdout.strip(), "ENOENT")
        (report,) = reports(p.stderr).values()
        self.assertEqual(report["cpu_file_view_fallbacks"], "0")


VALGRIND = shutil.which("valgrind")


@unittest.skipUnless(VALGRIND, "valgrind is not installed (scripts/setup installs it)")
class Memcheck(unittest.TestCase):
    """The probes under valgrind memcheck with the shim preloaded: no invalid read or write, no use
    of uninitialised memory, no definite leak in any hook (the shim itself cannot be built with
    AddressSanitizer: its runtime cannot start under libgomp's constructor). What each probe
    reports is checked too, so the shim still did its job under valgrind."""
    ERROR_EXIT = 97

    def memcheck(self, argv, **kw):
        cmd = [VALGRIND, "-q", f"--error-exitcode={self.ERROR_EXIT}", "--leak-check=full",
               "--show-leak-kinds=definite", "--errors-for-leak-kinds=definite",
               "--child-silent-after-fork=no",
               f"--suppressions={os.path.join(os.path.dirname(os.path.abspath(__file__)), 'valgrind.supp')}",
               *argv]
        p = run(cmd, check=False, timeout=300, **kw)
        self.assertNotEqual(p.returncode, self.ERROR_EXIT, f"memcheck errors: {p.stderr}")
        self.assertEqual(p.returncode, 0, p.stderr)
        return p

    def test_openmp_lanes_threads_and_affinity(self):
        two = plan(f"{A},{B}", 1, 2)
        r = last_json(self.memcheck([PROBE, "omp", 64, 3], plan_env=two).stdout)
        self.assertEqual(r["team"], 2)
        r = last_json(self.memcheck([PROBE, "interop", 5, 64], plan_env=plan(f"{A},{B}", 2, 1)).stdout)
        self.assertEqual((r["A"]["team_max"], r["B"]["team_max"]), (1, 1))
        for args in (["pool"], ["after"], ["setaff", f"{A}-{B}"], ["churn", 100, 20], ["percpu"],
                     ["counts"], ["constructs", 64]):
            with self.subTest(args=args):
                self.memcheck([PROBE, *args], plan_env=two)

    def test_fork_exec_and_report(self):
        two = plan(f"{A},{B}", 1, 2)
        self.memcheck([PROBE, "fork"], plan_env=two)
        p = self.memcheck([PROBE, "forkexec", PROBE, "counts"], plan_env=two,
                          env={"TFPIN_REPORT": "stderr"})
        self.assertIn("tfpin-shim[", p.stderr)

    def test_dlopen_blas_and_without_plan(self):
        two = plan(f"{A},{B}", 1, 2)
        r = last_json(self.memcheck([PROBE_DL, PLUGIN, "local", 64], plan_env=two).stdout)
        self.assertEqual(r["region"]["team"], 2)
        r = last_json(self.memcheck([PROBE_BLAS], plan_env=two).stdout)
        self.assertEqual(r["openblas"], 2)
        r = last_json(self.memcheck([PROBE, "omp", 64]).stdout)  # no plan: forwards only
        self.assertEqual(r["team"], 64)
        r = last_json(self.memcheck([PROBE_CPUFILES], plan_env=plan(f"{B}", 1, 1)).stdout)
        self.assertEqual((r["online"], r["processors"]), (str(B), 1))  # the CPU file view
        p = self.memcheck([PROBE, "counts"], plan_env=plan("0-3,x", 1, 4),
                          env={"TFPIN_REPORT": "stderr"})
        self.assertIn("invalid plan", p.stderr)


class OpenMP(unittest.TestCase):
    def masks_by_num(self, result):
        return {m["num"]: m["allowed"] for m in result["members"]}

    def test_team_clamped_one_per_core(self):
        r = probe("omp", 64, plan_env=plan(f"{A},{B}", 1, 2))
        self.assertEqual(r["team"], 2)
        self.assertEqual(self.masks_by_num(r), {0: [A], 1: [B]})

    def test_lane_order_is_not_sorted(self):
        r = probe("omp", 64, plan_env=plan(f"{B},{A}", 1, 2))
        self.assertEqual(self.masks_by_num(r), {0: [B], 1: [A]})

    def test_two_lanes_of_one(self):
        r = probe("omp", 64, plan_env=plan(f"{A},{B}", 2, 1))
        self.assertEqual(r["team"], 1)
        self.assertEqual(self.masks_by_num(r), {0: [A]})

    def test_default_team_follows_omp_num_threads_clamped(self):
        r = probe("omp", 0, plan_env=plan(f"{A},{B}", 1, 2), env={"OMP_NUM_THREADS": "8"})
        self.assertEqual(r["team"], 2)
        r = probe("omp", 0, plan_env=plan(f"{A},{B}", 2, 1))  # nthreads-var = N = 2 > intra
        self.assertEqual(r["team"], 1)

    def test_repeated_regions_keep_the_pins(self):
        r = probe("omp", 64, 200, plan_env=plan(f"{A},{B}", 1, 2))
        self.assertEqual(self.masks_by_num(r), {0: [A], 1: [B]})
        workers = [t for t in r["tasks"] if t["allowed"] == [B]]
        self.assertEqual(len(r["tasks"]), 2, "one worker thread, reused")
        self.assertEqual(len(workers), 1)

    def test_combined_constructs_and_old_abi(self):
        # parallel for (GOMP_parallel_loop_*), sections, and GOMP_parallel*_start (GCC < 4.9).
        r = probe("constructs", 64, plan_env=plan(f"{A},{B}", 1, 2))
        self.assertEqual(len(r), 9)
        for name, team in r.items():
            self.assertEqual(team["team"], 2, name)
            self.assertTrue(all(len(m) == 1 for m in team["masks"]), name)
            self.assertEqual(len({m[0] for m in team["masks"]}), len(team["masks"]), name)
        r = probe("constructs", 64, preload=False)
        self.assertEqual({t["team"] for t in r.values()}, {64})

    def test_interop_lanes_are_disjoint(self):
        r = probe("interop", 40, 64, plan_env=plan(f"{A},{B}", 2, 1))
        a, b = r["A"], r["B"]
        self.assertEqual(a["team_max"], 1)
        self.assertEqual(b["team_max"], 1)
        self.assertEqual(len(a["allowed_union"]), 1)
        self.assertEqual(len(b["allowed_union"]), 1)
        self.assertEqual(sorted(a["allowed_union"] + b["allowed_union"]), BOTH)
        self.assertEqual(a["cpus_run_on"], a["allowed_union"])
        self.assertEqual(b["cpus_run_on"], b["allowed_union"])

    def test_without_shim_nothing_is_clamped(self):
        # The control: the same probe without the shim really asks for 64 threads.
        r = probe("omp", 64, preload=False, plan_env=plan(f"{A},{B}", 1, 2))
        self.assertEqual(r["team"], 64)

    @unittest.skipUnless(PROBE_KMP, "clang/libomp not available")
    def test_llvm_openmp(self):
        r = last_json(run([PROBE_KMP, 64], plan_env=plan(f"{A},{B}", 1, 2)).stdout)
        self.assertEqual(r["team"], 2)
        self.assertEqual(sorted(r["members"]), [str(A), str(B)])
        r = last_json(run([PROBE_KMP, 0], plan_env=plan(f"{A},{B}", 1, 2)).stdout)
        self.assertEqual(r["team"], 2, "omp_set_num_threads(64) clamped")
        r = last_json(run([PROBE_KMP, 64], plan_env=plan(f"{A},{B}", 2, 1)).stdout)
        self.assertEqual(r["team"], 1)
        r = last_json(run([PROBE_KMP, 64], preload=False).stdout)
        self.assertEqual(r["team"], 64)


class Threads(unittest.TestCase):
    def test_pool_of_hardware_concurrency(self):
        r = probe("pool", plan_env=plan(f"{B}", 1, 1))
        self.assertEqual(r["hardware_concurrency"], 1)
        self.assertEqual(r["threads"], [[B]])
        r = probe("pool", plan_env=plan(f"{A},{B}", 1, 2))
        self.assertEqual(r["hardware_concurrency"], 2)
        self.assertEqual(r["threads"], [BOTH, BOTH])

    def test_thread_after_a_region_gets_the_full_set(self):
        for interop, intra in ((1, 2), (2, 1)):
            r = probe("after", plan_env=plan(f"{A},{B}", interop, intra))
            self.assertEqual(r["main_after_region"], [A], "the main thread leads lane 0")
            self.assertEqual(r["thread"], BOTH)
            self.assertEqual(r["thread_raw"], BOTH)

    def test_without_shim_the_thread_inherits(self):
        # The control: pinning the main thread by hand then creating a thread collapses it.
        r = probe("setaff", "cpu", A, preload=False)
        self.assertEqual(r["child"], [A])


class Affinity(unittest.TestCase):
    def test_all_cpus_stays_in_plan(self):
        for how in ("all", "pall"):
            r = probe("setaff", how, plan_env=plan(f"{B}", 1, 1))
            self.assertEqual((r["rc"], r["errno"]), (0, 0))
            self.assertEqual(r["allowed"], [B])
            self.assertEqual(r["child"], [B])

    def test_outside_only_gets_the_plan_set(self):
        # Documented fail-open: an empty intersection becomes the whole plan; the call succeeds.
        for how in ("cpu", "pcpu"):
            r = probe("setaff", how, A, plan_env=plan(f"{B}", 1, 1))
            self.assertEqual((r["rc"], r["errno"]), (0, 0))
            self.assertEqual(r["allowed"], [B])
            self.assertEqual(r["raw"], [B])

    def test_inside_plan_is_honoured(self):
        r = probe("setaff", "cpu", B, plan_env=plan(f"{A},{B}", 1, 2))
        self.assertEqual(r["allowed"], [B])
        self.assertEqual(r["child"], BOTH, "new non-OpenMP threads still get the task set")


class ForkExec(unittest.TestCase):
    def test_exec_python_child_keeps_the_plan(self):
        r = last_json(run([PROBE, "forkexec", PYTHON, "-c", PY_COUNTS],
                          plan_env=plan(f"{B}", 1, 1)).stdout)
        self.assertEqual(r["cpu_count"], 1)
        self.assertEqual(r["affinity"], [B])
        self.assertEqual(r["status_allowed"], str(B))
        self.assertEqual(r["plan"], str(B))

    def test_exec_self(self):
        r = last_json(run([PROBE, "forkexec", PROBE, "counts"], plan_env=plan(f"{B}", 1, 1)).stdout)
        self.assertEqual(r["sysconf_onln"], 1)
        self.assertEqual(r["real_mask"], [B])

    def test_fork_child_has_its_own_state(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "report")
            out = run([PROBE, "fork"], plan_env=plan(f"{A},{B}", 1, 2),
                      env={"TFPIN_REPORT": path}).stdout
            with open(path) as f:
                text = f.read()
            print("report file:\n" + text)
        lines = [json.loads(l) for l in out.splitlines() if l.startswith("{")]
        child = next(l for l in lines if l["who"] == "child")
        parent = next(l for l in lines if l["who"] == "parent")
        self.assertEqual(parent["child_status"], 0)
        self.assertEqual(child["thread"], BOTH)
        self.assertEqual(child["self"], [A], "the forking master keeps its pin")
        self.assertEqual(child["sysconf"], 2)
        reps = reports(text)
        self.assertEqual(len(reps), 2, "one summary per process")
        counts = sorted(int(r["threads_created"]) for r in reps.values())
        self.assertEqual(counts, [1, 2], "child: its one thread; parent: worker + thread")


class Robustness(unittest.TestCase):
    def test_thousand_short_lived_threads(self):
        t0 = time.monotonic()
        r = probe("churn", 1000, plan_env=plan(f"{B}", 1, 1), timeout=120)
        print(f"1000 threads in {time.monotonic() - t0:.2f}s")
        self.assertEqual(r["created"], 1000)
        self.assertEqual(r["distinct_masks"], [[B]])

    def test_two_thousand_threads_alive_at_once(self):
        r = probe("churn", 2000, 2000, plan_env=plan(f"{B}", 1, 1), timeout=120)
        self.assertEqual(r["created"], 2000)
        self.assertEqual(r["distinct_masks"], [[B]])

    def test_signal_storm(self):
        # Plan of one cpu: the handler must see 1 everywhere (the machine has more).
        r = probe("storm", 20000, plan_env=plan(f"{B}", 1, 1), timeout=120)
        self.assertEqual(r["cpus"], 1)
        self.assertGreater(r["handled"], 1000, "thousands of signals must land")
        self.assertEqual(r["bad_values"], 0)
        self.assertGreater(r["threads_spawned"], 0)
        self.assertGreater(r["omp_regions"], 0)

    def test_signal_storm_without_plan(self):
        r = probe("storm", 5000, timeout=120)
        self.assertEqual(r["bad_values"], 0)


class NoPlan(unittest.TestCase):
    # Deterministic modes only (who gets a dynamic loop's iterations is not).
    MODES = [["counts"], ["omp", "64"], ["omp", "0"], ["pool"], ["after"], ["setaff", "all"],
             ["setaff", "cpu", "{A}"], ["churn", "300"]]

    def compare(self, plan_env, expect_stderr):
        for mode in self.MODES:
            args = [a.format(A=A) for a in mode]
            with_shim = run([PROBE, *args], plan_env=plan_env, env={"TFPIN_REPORT": "stderr"})
            without = run([PROBE, *args], preload=False)
            self.assertEqual(with_shim.stdout, without.stdout, args)
            if expect_stderr is None:
                self.assertEqual(with_shim.stderr, "", args)
            else:
                self.assertEqual(with_shim.stderr.count(expect_stderr), 1, args)

    def test_identical_without_plan(self):
        self.compare(None, None)

    def test_python_identical(self):
        code = "import os; print(os.cpu_count(), sorted(os.sched_getaffinity(0)))"
        self.assertEqual(run([PYTHON, "-c", code]).stdout,
                         run([PYTHON, "-c", code], preload=False).stdout)

    def test_invalid_plan_is_inert_and_says_so_once(self):
        self.compare(plan(f"{A},{B}", 1, 3), "invalid plan")

    def test_other_invalid_plans(self):
        for bad in (plan(f"{A},{A}", 1, 2), plan("x", 1, 1), plan("", 1, 1),
                    plan(f"{A},{B}", None, 2), plan(f"{A}-", 1, 1), plan("99999", 1, 1),
                    plan(f"{A},{B}", 0, 2), plan(f"{A},,{B}", 1, 2), plan(f"{A},{B}", "2x", 1)):
            quiet = run([PROBE, "counts"], plan_env=bad)
            self.assertEqual(quiet.stderr, "", bad)
            said = run([PROBE, "counts"], plan_env=bad, env={"TFPIN_REPORT": "stderr"})
            self.assertEqual(said.stderr.count("invalid plan"), 1, bad)
            self.assertEqual(said.stdout, run([PROBE, "counts"], preload=False).stdout, bad)

    def test_shared_invalid_plans(self):
        """tests/fixtures/invalid_plans.json, whose rows decode_plan refuses too (tests/lib)."""
        fixtures = os.environ.get("TFPIN_FIXTURE_DIR") or os.path.join(
            os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
        with open(os.path.join(fixtures, "invalid_plans.json")) as f:
            rows = json.load(f)["plans"]
        self.assertGreaterEqual(len(rows), 10)
        untouched = run([PROBE, "counts"], preload=False).stdout
        for row in rows:
            bad = {k: v for k, v in row.items() if k.startswith("TFPIN_")}
            with self.subTest(why=row["why"], plan=bad):
                said = run([PROBE, "counts"], plan_env=bad, env={"TFPIN_REPORT": "stderr"})
                self.assertEqual(said.stdout, untouched)
                self.assertEqual(said.stderr.count("invalid plan"), 1)
                self.assertEqual(run([PROBE, "counts"], plan_env=bad).stderr, "")


class EarlyConstructors(unittest.TestCase):
    """The program's own libraries are initialised before the shim: their constructors' file I/O
    (fopen in any mode, readdir) goes through hooks whose real functions are not resolved yet."""

    def test_constructor_writes_and_lists_a_directory(self):
        if not PROBE_EARLY_IO:
            self.skipTest("probe not built")
        for plan_env in (None, plan(str(A), 1, 1)):
            with self.subTest(plan=plan_env), tempfile.TemporaryDirectory() as tmp:
                r = run([PROBE_EARLY_IO], plan_env=plan_env, env={"EARLY_IO_DIR": tmp})
                self.assertEqual(r.stdout.strip(), "ofstream=ok listed=1")
                with open(os.path.join(tmp, "written-by-constructor.txt")) as f:
                    self.assertEqual(f.read(), "written\n")


class Dlopen(unittest.TestCase):
    def check_region(self, region):
        self.assertEqual(region["team"], 2)
        self.assertEqual(sorted(region["members"]), [[A], [B]])
        self.assertEqual(region["master_after"], [A])

    def test_dlopen_local(self):
        r = last_json(run([PROBE_DL, PLUGIN, "local", 64], plan_env=plan(f"{A},{B}", 1, 2)).stdout)
        self.assertFalse(r["libgomp_before"])
        self.assertTrue(r["libgomp_after"])
        self.check_region(r["region"])
        self.assertEqual(r["team_after_omp_set_64"], 2)
        self.assertEqual((r["openblas_got"], r["mkl_got"]), (2, 2))

    def test_dlopen_global(self):
        r = last_json(run([PROBE_DL, PLUGIN, "global", 64], plan_env=plan(f"{A},{B}", 1, 2)).stdout)
        self.check_region(r["region"])
        self.assertEqual(r["team_after_omp_set_64"], 2)

    def test_python_ctypes_loads_openmp_later(self):
        code = ("import ctypes, sys\n"
                "lib = ctypes.CDLL(sys.argv[1])\n"
                "buf = ctypes.create_string_buffer(65536)\n"
                "lib.plugin_team(64, buf, 65536)\n"
                "print(buf.value.decode())\n")
        r = last_json(run([PYTHON, "-c", code, PLUGIN], plan_env=plan(f"{A},{B}", 1, 2)).stdout)
        self.check_region(r)

    def test_constructor_waiting_for_a_thread_does_not_deadlock(self):
        # dlopen holds the loader lock while the constructor waits; the hooks must not need it.
        r = last_json(run([PROBE_DL, "ctor", CTOR_PLUGIN], plan_env=plan(f"{A},{B}", 1, 2),
                          timeout=30).stdout)
        self.assertEqual(r, {"ctor_team": 2, "ctor_blas": 2})

    def test_without_plan_unchanged(self):
        r = last_json(run([PROBE_DL, PLUGIN, "local", 64]).stdout)
        self.assertEqual(r["region"]["team"], 64)
        self.assertEqual(r["team_after_omp_set_64"], 64)
        self.assertEqual((r["openblas_got"], r["mkl_got"]), (64, 64))


class Blas(unittest.TestCase):
    def test_setters_clamped(self):
        r = last_json(run([PROBE_BLAS], plan_env=plan(f"{A},{B}", 1, 2)).stdout)
        for key in ("openblas", "goto", "MKL_Set_Num_Threads", "mkl_set_num_threads",
                    "mkl_set_num_threads_"):
            self.assertEqual(r[key], 2, key)
        self.assertEqual(r["caller_value_kept"], 64, "by-reference setters get a copy")

    def test_setters_untouched_without_plan(self):
        for preload in (True, False):
            r = last_json(run([PROBE_BLAS], preload=preload).stdout)
            self.assertEqual({r[k] for k in r}, {64})

    def test_absent_runtime_is_harmless(self):
        r = last_json(run([PROBE_DL, "absent"], plan_env=plan(f"{A},{B}", 1, 2)).stdout)
        self.assertTrue(r["ok"])
        self.assertFalse(r["libgomp_loaded"])
        self.assertEqual(r["gomp_parallel_body_runs"], 1)


INTERPOSER_LINE = re.compile(r"interposer: forwarded=(\d+)")


class Interposers(unittest.TestCase):
    """Other definitions of the hooked entry points: another LD_PRELOAD interposer, a second copy
    of the shim. The shim must never forward to one that calls it again (defect: endless
    recursion, a stack overflow, once the runtime came with RTLD_LOCAL)."""

    def forwarded(self, stderr):
        m = INTERPOSER_LINE.search(stderr)
        self.assertIsNotNone(m, "the interposer did not get to its exit")
        return int(m.group(1))

    def check_local_runtime(self, r):
        """shim-probe-dl PLUGIN local 64 under a 1 x 2 plan, as with the shim alone."""
        self.assertEqual(r["region"]["team"], 2)
        self.assertEqual(sorted(r["region"]["members"]), [[A], [B]])
        self.assertEqual(r["team_after_omp_set_64"], 2)
        self.assertEqual((r["openblas_got"], r["mkl_got"], r["mkl_ref_got"]), (2, 2, 2))

    def test_interposer_before_the_shim_with_a_local_runtime(self):
        # LD_PRELOAD=interposer:shim: the interposer reaches the shim with RTLD_NEXT, the runtime
        # and BLAS are only in the plugin's scope. The shim took the interposer (its caller) for
        # the definition and called it again, endlessly.
        p = run([PROBE_DL, PLUGIN, "local", 64], plan_env=plan(f"{A},{B}", 1, 2),
                env={"LD_PRELOAD": f"{INTERPOSER}:{SHIM}", "INTERPOSER_FIND": "next"})
        self.check_local_runtime(last_json(p.stdout))
        self.assertGreaterEqual(self.forwarded(p.stderr), 4, "each wrapper was in the path")

    def test_interposer_before_the_shim_with_a_linked_blas(self):
        p = run([PROBE_BLAS], plan_env=plan(f"{A},{B}", 1, 2),
                env={"LD_PRELOAD": f"{INTERPOSER}:{SHIM}", "INTERPOSER_FIND": "next"})
        r = last_json(p.stdout)
        self.assertEqual({k: v for k, v in r.items() if k != "caller_value_kept"},
                         dict.fromkeys(("openblas", "goto", "MKL_Set_Num_Threads",
                                        "mkl_set_num_threads", "mkl_set_num_threads_"), 2))
        self.assertEqual(r["caller_value_kept"], 64)
        self.assertEqual(self.forwarded(p.stderr), 2)

    def test_interposer_that_finds_the_shim_again_is_stopped(self):
        # LD_PRELOAD=shim:interposer, which forwards to what dlsym(RTLD_DEFAULT) finds: the shim.
        # Nothing tells the shim so before it calls it; the per-thread guard gives the call coming
        # back the fail-open default (no definition: nothing is set, a region runs as a team of
        # one on the master's core).
        p = run([PROBE_DL, PLUGIN, "local", 64], plan_env=plan(f"{A},{B}", 1, 2),
                env={"LD_PRELOAD": f"{SHIM}:{INTERPOSER}", "INTERPOSER_FIND": "default"})
        r = last_json(p.stdout)
        self.assertEqual(r["region"]["team"], 1)
        self.assertEqual(r["region"]["members"], [[A]])
        self.assertEqual(r["team_after_omp_set_64"], 1)
        self.assertEqual((r["openblas_got"], r["mkl_ref_got"]), (-1, -1), "never set")
        self.assertEqual(r["mkl_got"], 2, "MKL_Set_Num_Threads is not interposed")
        self.assertGreaterEqual(self.forwarded(p.stderr), 4)

    def test_two_copies_of_the_shim(self):
        # LD_PRELOAD=copy:shim (two paths: an outer tfpin's and the plugin's). The first copy
        # forwarded to the second, which took the first (its caller) for the definition: endless
        # with a local runtime, every count and pin twice otherwise. The first copy applies the
        # plan, the second only forwards.
        with tempfile.TemporaryDirectory() as d:
            copy = os.path.join(d, os.path.basename(SHIM))
            shutil.copy(SHIM, copy)
            for argv in ([PROBE_DL, PLUGIN, "local", 64], [PROBE_BLAS], [PROBE, "omp", 64, 3],
                         [PROBE, "counts"]):
                with self.subTest(probe=" ".join(os.path.basename(str(a)) for a in argv)):
                    one = run(argv, plan_env=plan(f"{A},{B}", 1, 2),
                              env={"TFPIN_REPORT": "stderr"})
                    two = run(argv, plan_env=plan(f"{A},{B}", 1, 2),
                              env={"TFPIN_REPORT": "stderr", "LD_PRELOAD": f"{copy}:{SHIM}"})
                    self.assertEqual(len(REPORT_RE.findall(two.stderr)), 1, "one summary")
                    self.assertEqual(list(reports(two.stderr).values()),
                                     list(reports(one.stderr).values()))
                    if argv[0] == PROBE_DL:
                        self.check_local_runtime(last_json(two.stdout))
                    else:
                        self.assertEqual(two.stdout, one.stdout)


class Report(unittest.TestCase):
    def test_summary_on_stderr(self):
        p = run([PROBE, "omp", 64, 3], plan_env=plan(f"{A},{B}", 1, 2),
                env={"TFPIN_REPORT": "stderr"})
        (rep,) = reports(p.stderr).values()
        self.assertEqual(rep["threads_created"], "1")
        self.assertEqual(rep["omp_workers_pinned"], "1")
        self.assertEqual(rep["masters_pinned"], "1")
        self.assertEqual(rep["teams_clamped"], "3")
        self.assertEqual(rep["lanes_used"], "1/1")
        self.assertEqual(rep["escapes_refused"], "0")
        self.assertEqual(rep["threads_unpinned"], "0")

    def test_summary_to_file_with_lanes(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "report")
            p = run([PROBE, "interop", 10, 64], plan_env=plan(f"{A},{B}", 2, 1),
                    env={"TFPIN_REPORT": path})
            self.assertNotIn("tfpin-shim", p.stderr)
            with open(path) as f:
                text = f.read()
            print("report file: " + text)
        (rep,) = reports(text).values()
        self.assertEqual(rep["lanes_used"], "2/2")
        self.assertEqual(rep["masters_pinned"], "2")
        self.assertEqual(rep["other_threads_pinned"], "2")
        self.assertEqual(rep["teams_clamped"], "20")

    def test_escape_counted(self):
        p = run([PROBE, "setaff", "cpu", A], plan_env=plan(f"{B}", 1, 1),
                env={"TFPIN_REPORT": "stderr"})
        (rep,) = reports(p.stderr).values()
        self.assertEqual(rep["escapes_refused"], "1")
        p = run([PROBE, "setaff", "all"], plan_env=plan(f"{B}", 1, 1),
                env={"TFPIN_REPORT": "stderr"})
        (rep,) = reports(p.stderr).values()
        self.assertEqual(rep["affinity_clipped"], "1")
        self.assertEqual(rep["escapes_refused"], "0")


    def test_summary_from_programs_that_close_stderr_at_exit(self):
        # coreutils close stderr in an atexit handler (close_stdout), before the shim's destructor
        # writes the report; a program closing it by hand likewise. (dash leaves with _exit: no
        # destructor runs, so no report, closed stderr or not.)
        for argv in (["cat", "/dev/null"], ["nproc"], ["grep", "-c", "x", "/dev/null"],
                     ["ls", "/"], [PYTHON, "-c", "import os; os.close(2)"]):
            with self.subTest(program=os.path.basename(argv[0])):
                p = run(argv, plan_env=plan(f"{B}", 1, 1), env={"TFPIN_REPORT": "stderr"},
                        check=False)
                self.assertEqual(len(reports(p.stderr)), 1, p.stderr)

    def test_the_copy_of_stderr_is_close_on_exec(self):
        # One descriptor above the program's own numbers, never inherited by what it executes.
        code = ("import os\n"
                "fds = [int(fd) for fd in os.listdir('/proc/self/fd') if int(fd) >= 10]\n"
                "print(fds, [os.get_inheritable(fd) for fd in fds if fd != 3])")
        p = run([PYTHON, "-c", code], plan_env=plan(f"{B}", 1, 1), env={"TFPIN_REPORT": "stderr"})
        fds, inheritable = p.stdout.split("] ")
        self.assertEqual(len(fds.strip("[").split(",")), 1, p.stdout)
        self.assertEqual(inheritable.strip(), "[False]", p.stdout)
        p = run([PYTHON, "-c", code], plan_env=plan(f"{B}", 1, 1))
        self.assertEqual(p.stdout.strip(), "[] []", "no copy without TFPIN_REPORT=stderr")


class TfpinRun(unittest.TestCase):
    @unittest.skipUnless(TFPIN and os.path.exists(TFPIN), "tfpin not built")
    def test_tfpin_run_uses_the_shim(self):
        p = run([TFPIN, "run", "--threads", "2", "--interop", "2", "--", PROBE, "interop", 20, 64],
                preload=False, env={"TFPIN_REPORT": "stderr"})
        r = last_json(p.stdout)
        self.assertEqual(sorted(r["A"]["allowed_union"] + r["B"]["allowed_union"]), BOTH)
        self.assertIn("lanes_used=2/2", p.stderr)

    @unittest.skipUnless(TFPIN and os.path.exists(TFPIN), "tfpin not built")
    def test_cpu_files_view_and_no_cpu_files(self):
        online = "cat /sys/devices/system/cpu/online; grep -c ^processor /proc/cpuinfo"
        p = run([TFPIN, "run", "--threads", "1", "--", "sh", "-c", online], preload=False)
        cpu, processors = p.stdout.split()
        self.assertEqual(processors, "1")
        self.assertEqual(len(cpu.replace("-", ",").split(",")), 1, cpu)
        p = run([TFPIN, "run", "--threads", "1", "--no-cpu-files", "--", "sh", "-c", online],
                preload=False)
        self.assertEqual(p.stdout.split(), [machine_online(), str(machine_processors())])


    @unittest.skipUnless(TFPIN and os.path.exists(TFPIN) and PROBE_KMP, "tfpin or clang/libomp missing")
    def test_no_warning_from_variables_that_fight_the_users(self):
        # The user's KMP_AFFINITY with tfpin's OMP_PROC_BIND=false made libomp print "OMP: Warning
        # #182: OMP_PROC_BIND: ignored because KMP_AFFINITY has been defined" per team; the user's
        # OMP_PROC_BIND with tfpin's KMP_AFFINITY=none likewise.
        for user in ({"KMP_AFFINITY": "compact"}, {"OMP_PROC_BIND": "spread"},
                     {"OMP_PLACES": "cores"}, {"OMP_WAIT_POLICY": "active"}):
            with self.subTest(**user):
                p = run([TFPIN, "run", "--threads", "2", "--", PROBE_KMP, 2], preload=False,
                        env=user)
                self.assertNotIn("OMP: Warning", p.stderr)
                self.assertEqual(last_json(p.stdout)["team"], 2)

    @unittest.skipUnless(TFPIN and os.path.exists(TFPIN), "tfpin not built")
    def test_an_empty_user_value_counts_as_unset(self):
        # libgomp: "Invalid value for environment variable OMP_NUM_THREADS" on an empty one.
        p = run([TFPIN, "run", "--threads", "2", "--", PROBE, "omp", 0, 1], preload=False,
                env={"OMP_NUM_THREADS": ""})
        self.assertNotIn("Invalid value", p.stderr)
        self.assertEqual(last_json(p.stdout)["team"], 2)


def groups():
    """The test classes in this file, in order: meson runs each as its own test."""
    loader = unittest.TestLoader()
    return [name for name, obj in globals().items()
            if isinstance(obj, type) and issubclass(obj, unittest.TestCase)
            and loader.getTestCaseNames(obj)]


if __name__ == "__main__":
    if sys.argv[1:] == ["--list-groups"]:  # tests/shim/meson.build, at configure time
        print("\n".join(groups()))
        sys.exit(0)
    unittest.main()
