#!/usr/bin/python3
"""A private, throw-away Slurm cluster on loopback for tests (stdlib only).

Starts its own munged + slurmctld + one slurmd per node (several slurmd on this
host via `slurmd -N nK`), all as root, with every file in one directory.  It
never reads or writes /etc/slurm or /etc/munge, never talks to systemd, and
only ever signals processes it started itself (tracked by pid + start time,
plus a marker variable in the environment of everything it launches).

    with LocalSlurm(nodes=2, cpus_per_node=1,
                    plugstack_lines=["required /path/tfpin.so key=value"]) as c:
        jobid, res = c.sbatch("#!/bin/sh\\nhostname\\n")
        assert c.wait_job(jobid) == "COMPLETED"
        print(c.job_stdout(jobid))

CLI (for demos):
    python3 slurm_cluster.py up   --dir DIR [--nodes K] [--cpus-per-node C]
                                  [--plugstack-line LINE]...
    python3 slurm_cluster.py down --dir DIR [--keep]

Set TFPIN_KEEP_SLURM=1 to keep the directory (configs, logs, job output) after
a test for inspection.  See README.md next to this file.
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Put into the environment of every daemon and client we start; anything that
# still carries it at shutdown (slurmstepd, job tasks) is ours to kill.
MARKER = "TFPIN_SLURM_HARNESS"
STATE_FILE = "harness.json"

SLURM_BINARIES = ("munged", "munge", "unmunge", "slurmctld", "slurmd", "slurmstepd",
                  "sbatch", "srun", "squeue", "scontrol", "sinfo", "scancel")

TERMINAL_STATES = {
    "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED",
    "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "REVOKED", "SPECIAL_EXIT",
}

# unix socket paths are limited to 108 bytes (sun_path)
_MAX_SOCKET_PATH = 100

# error:/fatal: lines that Debian's Slurm daemons log on every start of this harness and that say
# nothing about its configuration; log_errors() leaves these out and reports every other one.
KNOWN_LOG_NOISE = (
    # Slurm loads every MPI plugin at start; Debian's mpi/pmix needs libpmix, which the Slurm
    # packages do not pull in (MpiDefault=none: no job uses it).
    re.compile(r"mpi/pmix|pmi/pmix"),
    # A fresh StateSaveLocation has no saved state to restore yet.
    re.compile(r"Could not open \w+ state file|NOTE: Trying backup state save file"),
)
_LOG_PROBLEM = re.compile(r"\b(error|fatal): ")


# Open MPI's traffic stays on loopback: by default it skips 127.0.0.0/8 for TCP.
MPI_LOOPBACK_ENV = {"OMPI_MCA_btl_tcp_if_include": "lo", "OMPI_MCA_oob_tcp_if_include": "lo"}


def mpi_missing() -> str:
    """Why `srun --mpi=pmix` cannot launch Open MPI ranks here, or "" when it can: Slurm's pmix
    plugin loads libpmix through a link only libpmix-dev installs."""
    plugins = list(Path("/usr/lib").glob("*/slurm-wlm/mpi_pmix*.so")) + \
        list(Path("/usr/lib").glob("slurm*/mpi_pmix*.so"))
    if not plugins:
        # (Debian's Slurm 26.05, in sid, is built without it: mpi/pmi2 and mpi/cray_shasta only.)
        return "Slurm's mpi/pmix plugin is not installed"
    # libpmix-dev's link: pmix2/lib/libpmix.so (Debian 12 and 13 also have the multiarch one);
    # sid has only the multiarch libpmix.so.
    if not (list(Path("/usr/lib").glob("*/pmix2/lib/libpmix.so")) +
            list(Path("/usr/lib").glob("pmix2/lib/libpmix.so")) +
            list(Path("/usr/lib").glob("*/libpmix.so"))):
        return "libpmix.so (libpmix-dev) is missing: Slurm's pmix plugin cannot load PMIx"
    return ""


def missing_binaries() -> list[str]:
    """Names of the programs the harness needs that are not installed."""
    return [b for b in SLURM_BINARIES if shutil.which(b, path=os.environ.get(
        "PATH", "") + ":/usr/sbin:/sbin") is None]


def _which(name: str) -> str:
    p = shutil.which(name, path=os.environ.get("PATH", "") + ":/usr/sbin:/sbin")
    if p is None:
        raise FileNotFoundError(f"{name} not found (install slurm-wlm / munge)")
    return p


def _tail(path: Path, lines: int = 40) -> str:
    try:
        text = Path(path).read_text(errors="replace")
    except OSError as e:
        return f"<{path}: {e.strerror}>"
    return "\n".join(text.splitlines()[-lines:])


def host_topology() -> tuple[int, int, int, int]:
    """(cpus, sockets, cores per socket, threads per core) of this host, from sysfs."""
    base = Path("/sys/devices/system/cpu")
    cpus = sorted(int(p.name[3:]) for p in base.glob("cpu[0-9]*")
                  if (p / "topology").exists())
    try:
        pkgs, cores, threads = set(), set(), 1
        for c in cpus:
            t = base / f"cpu{c}" / "topology"
            pkg = int((t / "physical_package_id").read_text())
            pkgs.add(pkg)
            cores.add((pkg, int((t / "core_id").read_text())))
            sib = (t / "thread_siblings_list").read_text().strip()
            threads = max(threads, len(_parse_cpu_list(sib)))
        n = len(cpus)
        return n, len(pkgs), len(cores) // len(pkgs), threads
    except (OSError, ValueError, ZeroDivisionError):
        n = os.cpu_count() or 1
        return n, 1, n, 1


def _parse_cpu_list(text: str) -> list[int]:
    """'0-2,5' -> [0, 1, 2, 5] (the /proc and sysfs cpu list format)."""
    out: list[int] = []
    for part in text.replace("\t", "").strip().split(","):
        if not part:
            continue
        lo, _, hi = part.partition("-")
        out.extend(range(int(lo), int(hi or lo) + 1))
    return out


def cpus_allowed(text: str) -> list[int]:
    """CPU ids from the first 'Cpus_allowed_list:' line found in text."""
    m = re.search(r"Cpus_allowed_list:\s*([0-9,\-]+)", text)
    return _parse_cpu_list(m.group(1)) if m else []


def _free_ports(n: int) -> list[int]:
    """n distinct free TCP ports on 127.0.0.1 (held open together so they differ)."""
    socks = []
    try:
        for _ in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


# --- process bookkeeping (works across processes, for `up` then `down`) ---

def _proc_stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks) of pid, None if gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm may contain spaces/parens: fields start after the last ')'
    fields = raw[raw.rindex(")") + 2:].split()
    return fields[0], int(fields[19])


def _alive(pid: int, start: int | None) -> bool:
    """True if pid runs and is the same process we started (not a reused pid)."""
    st = _proc_stat(pid)
    if st is None or st[0] in ("Z", "X"):
        return False
    return start is None or st[1] == start


def _signal(pid: int, sig: int) -> None:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        pass


def _marked_pids(workdir: str) -> list[int]:
    """Processes whose initial environment carries our marker for this dir."""
    needle = f"{MARKER}={workdir}".encode()
    me = os.getpid()
    ancestors = set()
    p = me
    for _ in range(64):  # our own ancestry is never a target
        ancestors.add(p)
        try:
            p = int(Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
        if p <= 1:
            break
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) in ancestors:
            continue
        try:
            env = Path(f"/proc/{d}/environ").read_bytes()
        except OSError:
            continue
        if needle in env.split(b"\0"):
            out.append(int(d))
    return out


def _prctl(option: int, arg: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(option, arg, 0, 0, 0) == 0
    except Exception:  # noqa: BLE001 - best effort only
        return False


_DAEMON_COMMS = ("slurmstepd", "slurmd", "slurmctld", "munged")


def _reap_orphans(extra_pids=()) -> None:
    """Reap zombie children that were re-parented to us.

    slurmstepd double-forks, so it and job tasks it leaves behind re-parent
    to the nearest subreaper; LocalSlurm makes the owning process one, so
    nothing lingers after stop() (this sandbox's PID 1 reaps only every few
    seconds, so `ps` would show zombies meanwhile).  Only
    zombies are reaped, and only Slurm daemons, pids we killed, or processes
    from another session: the caller's own subprocess.Popen children share
    its session and are left to their Popen objects.
    """
    me = os.getpid()
    my_sid = os.getsid(0)
    extra = set(extra_pids)
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        pid = int(d)
        try:
            raw = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        comm = raw[raw.index("(") + 1:raw.rindex(")")]
        fields = raw[raw.rindex(")") + 2:].split()
        if fields[0] != "Z" or int(fields[1]) != me:
            continue
        if pid in extra or comm in _DAEMON_COMMS or int(fields[4]) != my_sid:
            _reap(pid)


def _set_pdeathsig() -> None:
    """preexec_fn: daemons get SIGTERM if the test process dies (no leaks on kill -9)."""
    _prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def stop_dir(workdir: str | os.PathLike, timeout: float = 15.0,
             log=print) -> None:
    """Stop the daemons recorded in workdir/harness.json and anything marked.

    Used by LocalSlurm.stop() and by the `down` CLI.  Only touches processes
    recorded by pid+start time or carrying our marker for this directory.
    """
    workdir = str(Path(workdir).resolve())
    state_path = Path(workdir, STATE_FILE)
    try:
        state = json.loads(state_path.read_text())
    except (OSError, ValueError):
        state = {"daemons": []}
    daemons = [(d["name"], d["pid"], d.get("start")) for d in state.get("daemons", [])]

    # 1. Cancel jobs while the controller is still up, so steps end cleanly.
    ctld_up = any(n == "slurmctld" and _alive(p, s) for n, p, s in daemons)
    conf = Path(workdir, "slurm.conf")
    if ctld_up and conf.exists():
        env = _client_env(workdir)
        try:
            subprocess.run(["scancel", "--quiet", "-u", "root"], env=env,
                           capture_output=True, timeout=10)
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                r = subprocess.run(["squeue", "-h", "-t", "PD,R,CG,S", "-o", "%i"],
                                   env=env, capture_output=True, text=True, timeout=10)
                if r.returncode != 0 or not r.stdout.strip():
                    break
                time.sleep(0.3)
        except (OSError, subprocess.SubprocessError):
            pass

    # 2. SIGTERM daemons in reverse start order (slurmd, slurmctld, munged),
    #    each with a bounded wait, then SIGKILL.
    per = max(2.0, timeout / max(1, len(daemons)))
    for name, pid, start in reversed(daemons):
        if not _alive(pid, start):
            continue
        _signal(pid, signal.SIGTERM)
        deadline = time.monotonic() + per
        while _alive(pid, start) and time.monotonic() < deadline:
            _reap(pid)
            time.sleep(0.05)
        if _alive(pid, start):
            log(f"[slurm_cluster] {name} (pid {pid}) ignored SIGTERM, killing")
            _signal(pid, signal.SIGKILL)
            deadline = time.monotonic() + 3
            while _alive(pid, start) and time.monotonic() < deadline:
                _reap(pid)
                time.sleep(0.05)
        _reap(pid)

    # 3. Leftovers of ours (slurmstepd, job tasks): they carry the marker.
    killed: set[int] = set()
    for attempt in range(5):
        left = _marked_pids(workdir)
        if not left:
            break
        if attempt == 0:
            log(f"[slurm_cluster] killing leftover processes {left}")
        for pid in left:
            _signal(pid, signal.SIGKILL)
        killed.update(left)
        time.sleep(0.2)
        _reap_orphans(killed)
    # killed tasks may re-parent to us a moment later: reap them (bounded)
    deadline = time.monotonic() + 2
    while True:
        _reap_orphans(killed)
        if time.monotonic() >= deadline or not any(_alive(p, None) or _is_zombie_child(p)
                                                   for p in killed):
            break
        time.sleep(0.1)


def _is_zombie_child(pid: int) -> bool:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    fields = raw[raw.rindex(")") + 2:].split()
    return fields[0] == "Z" and int(fields[1]) == os.getpid()


def _reap(pid: int) -> None:
    """Collect pid if it is our child (avoid zombies); ignore otherwise."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass
    except OSError:
        pass


def _client_env(workdir: str, base: dict | None = None) -> dict:
    """Environment for Slurm commands/daemons of this cluster.

    Drops inherited SLURM_* and friends: if the tests themselves run inside a
    Slurm job, SLURM_JOB_ID etc. would make srun join the outer job.
    """
    env = dict(os.environ if base is None else base)
    for k in list(env):
        if k.startswith(("SLURM_", "SBATCH_", "SALLOC_", "SRUN_", "SQUEUE_",
                         "SINFO_", "SCONTROL_", "SCANCEL_")):
            del env[k]
    env["SLURM_CONF"] = str(Path(workdir, "slurm.conf"))
    env[MARKER] = workdir
    # daemons live in /usr/sbin, which a minimal PATH may lack
    if "/usr/sbin" not in env.get("PATH", "").split(":"):
        env["PATH"] = env.get("PATH", "/usr/bin:/bin") + ":/usr/sbin:/sbin"
    return env


# strong references: a started cluster is stopped at exit even if unreferenced
_live_clusters: "set[LocalSlurm]" = set()


@atexit.register
def _stop_all_at_exit() -> None:
    # Safety net, e.g. KeyboardInterrupt escaping unittest before tearDownClass.
    for c in list(_live_clusters):
        try:
            c.stop()
        except Exception as e:  # noqa: BLE001
            print(f"[slurm_cluster] cleanup at exit failed: {e}", file=sys.stderr)


def cgroup_mode_available() -> tuple[str | None, str]:
    """The cgroup version Slurm's task/cgroup can constrain cores with on this host, and why.

    ("v1", ...) when a cgroup v1 cpuset hierarchy is mounted at /sys/fs/cgroup/cpuset (Debian 12's
    Slurm 22.05 and 24.11 drive it); ("v2", ...) when /sys/fs/cgroup is cgroup2 with the cpuset
    controller available; (None, reason) otherwise."""
    mounts = []
    try:
        with open("/proc/self/mounts") as f:
            mounts = [line.split() for line in f]
    except OSError as e:
        return None, f"cannot read /proc/self/mounts: {e}"
    for m in mounts:
        if len(m) >= 4 and m[1] == "/sys/fs/cgroup/cpuset" and m[2] == "cgroup" \
                and "cpuset" in m[3].split(","):
            return "v1", "cgroup v1 cpuset hierarchy at /sys/fs/cgroup/cpuset"
    for m in mounts:
        if len(m) >= 3 and m[1] == "/sys/fs/cgroup" and m[2] == "cgroup2":
            try:
                controllers = Path("/sys/fs/cgroup/cgroup.controllers").read_text().split()
            except OSError:
                controllers = []
            if "cpuset" in controllers:
                return "v2", "cgroup v2 at /sys/fs/cgroup with the cpuset controller"
            return None, "cgroup v2 at /sys/fs/cgroup without the cpuset controller"
    return None, "neither a cgroup v1 cpuset hierarchy nor cgroup v2 at /sys/fs/cgroup"


def announce_cgroup_mode(cgroup: bool) -> None:
    """For a test program run in cgroup mode: prints the version it runs on, or exits 77 (meson's
    skip) with the reason when the host offers none."""
    if not cgroup:
        return
    version, why = cgroup_mode_available()
    if version is None:
        print(f"skipped: cgroup mode: {why}", file=sys.stderr)
        sys.exit(77)
    print(f"cgroup mode: {version} ({why})", flush=True)


class SlurmStartError(RuntimeError):
    pass


class LocalSlurm:
    """Private munge + slurmctld + slurmd(s) on 127.0.0.1. See module doc."""

    def __init__(self, nodes: int = 1, cpus_per_node: int = 2,
                 plugstack_lines: list[str] | None = None,
                 workdir: str | os.PathLike | None = None, keep: bool = False,
                 extra_conf: list[str] | None = None,
                 debug_level: str = "info", start_timeout: float = 60.0,
                 split_cores: bool | None = None, verbose: bool = False,
                 cgroup: bool = False, extra_files: dict[str, str] | None = None):
        if nodes < 1 or cpus_per_node < 1:
            raise ValueError("nodes and cpus_per_node must be >= 1")
        self.nodes = nodes
        self.cpus_per_node = cpus_per_node
        self.plugstack_lines = list(plugstack_lines or [])
        self.extra_conf = list(extra_conf or [])
        # Files written beside slurm.conf before the daemons start (oci.conf, ...): name -> text.
        self.extra_files = dict(extra_files or {})
        # cgroup=True: what production sites run (task/cgroup + task/affinity, proctrack/cgroup,
        # ConstrainCores=yes) on the host's cgroup version; self.cgroup_version says which.
        self.cgroup_version = None
        if cgroup:
            self.cgroup_version, why = cgroup_mode_available()
            if self.cgroup_version is None:
                raise ValueError(f"cgroup mode: {why}")
        self.debug_level = debug_level
        self.start_timeout = start_timeout
        self.verbose = verbose
        self.keep = keep or os.environ.get("TFPIN_KEEP_SLURM") == "1"
        self._given_dir = Path(workdir).resolve() if workdir else None
        self._created_dir = False
        self._procs: list[tuple[str, subprocess.Popen]] = []
        self._started = False
        self._stopped = False
        self._old_sigterm = None
        self._script_no = 0
        self.hostname = socket.gethostname().split(".")[0]
        self.node_names = [f"n{i}" for i in range(1, nodes + 1)]
        self.tmpdir: Path | None = None
        self.env: dict = {}
        self.ctld_port = 0
        self.node_ports: dict[str, int] = {}
        # Several slurmd on one host all number their CPUs from 0, so by
        # default node nK's tasks land on the same host CPUs as n1's.
        # split_cores gives each node its own host CPUs instead: every node
        # declares the whole host and reserves the other nodes' CPUs with
        # CpuSpecList (Slurm then neither allocates nor binds to them).
        # Default: split when nodes > 1 and they fit (no hyperthreads).
        self.host = host_topology()
        hcpus, _, _, htpc = self.host
        fits = nodes * cpus_per_node <= hcpus and htpc == 1
        if split_cores is None:
            split_cores = nodes > 1 and fits
        elif split_cores and not fits:
            raise ValueError(f"split_cores needs nodes*cpus_per_node <= {hcpus} host "
                             "CPUs and one thread per core")
        self.split_cores = split_cores
        # host CPU ids each node's jobs can be bound to
        self.node_cpus: dict[str, list[int]] = {
            n: (list(range(i * cpus_per_node, (i + 1) * cpus_per_node)) if split_cores
                else list(range(cpus_per_node)))
            for i, n in enumerate(self.node_names)}

    # ---------------------------------------------------------------- paths
    @property
    def conf_path(self) -> Path:
        return self.tmpdir / "slurm.conf"

    munge_socket_rel = Path("munge-sock", "munge.socket")

    @property
    def munge_socket(self) -> Path:
        return self.tmpdir / self.munge_socket_rel

    def _log(self, msg: str) -> None:
        if self.verbose:
            print(f"[slurm_cluster] {msg}", file=sys.stderr, flush=True)

    # ---------------------------------------------------- context manager
    def __enter__(self) -> "LocalSlurm":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def _catch_sigterm(self) -> None:
        # meson/CI stop a test with SIGTERM: turn it into KeyboardInterrupt so
        # `with` blocks and atexit cleanup run (unittest re-raises
        # KeyboardInterrupt, unlike SystemExit, which it would record as an
        # error and carry on with the next test).  Undone by stop().
        if _in_main_thread() and signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
            self._old_sigterm = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)

    # ------------------------------------------------------------- start
    def start(self) -> "LocalSlurm":
        """Create the directory and config, start daemons, wait for idle nodes.

        The daemons die with this process (PR_SET_PDEATHSIG); the `up` CLI
        keeps a small supervisor process for that reason.  On any failure (or
        Ctrl-C) everything started so far is stopped.
        """
        if self._started:
            raise RuntimeError("cluster already started")
        self._started = True
        missing = missing_binaries()
        if missing:
            raise FileNotFoundError("missing programs: " + ", ".join(missing))
        if os.geteuid() != 0:
            raise PermissionError("LocalSlurm runs its daemons as root (SlurmUser=root)")
        self._make_dir()
        self._catch_sigterm()
        # orphaned slurmstepd/tasks re-parent to us, and we reap them
        _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
        _live_clusters.add(self)
        try:
            self._write_files()
            self._start_munged()
            self._start_slurmctld()
            for n in self.node_names:
                self._start_slurmd(n)
            self._wait_idle()
        except BaseException:
            self.stop(force_remove=not self.keep)
            raise
        return self

    def _make_dir(self) -> None:
        target = self._given_dir or Path(tempfile.gettempdir()) / "tfpin-slurm-XXXXXXXX"
        sock = target / self.munge_socket_rel
        if len(str(sock)) > _MAX_SOCKET_PATH:
            raise SlurmStartError(f"path too long for a unix socket: {sock}")
        # munged insists that every directory above its socket is searchable
        # by all (o+x); check before creating anything.  (The key lives in a
        # private 0700 subdirectory.)
        for parent in target.parents:
            if parent.exists() and not os.stat(parent).st_mode & 0o001:
                raise SlurmStartError(
                    f"{parent} is not searchable by all (o+x); munged refuses a socket "
                    f"below it. Use another directory or chmod o+x {parent}")
        if self._given_dir is None:
            self.tmpdir = Path(tempfile.mkdtemp(prefix="tfpin-slurm-"))
            self._created_dir = True
        else:
            if target.exists() and any(target.iterdir()):
                raise SlurmStartError(f"{target} is not empty")
            self._created_dir = not target.exists()
            target.mkdir(parents=True, exist_ok=True)
            self.tmpdir = target
        os.chmod(self.tmpdir, 0o755)
        self.env = _client_env(str(self.tmpdir))
        self._log(f"dir {self.tmpdir}")

    def _write_files(self) -> None:
        d = self.tmpdir
        for sub, mode in (("munge", 0o700), ("munge-sock", 0o755), ("log", 0o755),
                          ("run", 0o755), ("state", 0o700), ("spool", 0o755),
                          ("jobs", 0o755)):
            (d / sub).mkdir(exist_ok=True)
            os.chmod(d / sub, mode)
        for n in self.node_names:
            (d / "spool" / n).mkdir(exist_ok=True)

        # munge key: 1 KiB of random bytes, owner read-only (munged checks)
        key = d / "munge" / "munge.key"
        with open("/dev/urandom", "rb") as r, open(key, "wb") as w:
            w.write(r.read(1024))
        os.chmod(key, 0o400)

        ports = _free_ports(1 + self.nodes)
        self.ctld_port = ports[0]
        self.node_ports = dict(zip(self.node_names, ports[1:]))

        (d / "plugstack.conf").write_text(
            "# generated by tests/slurm/slurm_cluster.py\n"
            + "".join(line + "\n" for line in self.plugstack_lines))

        c = self.cpus_per_node
        lines = [
            "# generated by tests/slurm/slurm_cluster.py",
            f"ClusterName=tfpin{os.getpid()}",
            f"SlurmctldHost={self.hostname}(127.0.0.1)",
            f"SlurmctldPort={self.ctld_port}",
            "SlurmUser=root",
            "SlurmdUser=root",
            # private munge instance
            "AuthType=auth/munge",
            f"AuthInfo=socket={self.munge_socket}",
            "CredType=cred/munge",
            # every file in our directory; %n = node name (multiple slurmd)
            f"StateSaveLocation={d}/state",
            f"SlurmdSpoolDir={d}/spool/%n",
            f"SlurmctldPidFile={d}/run/slurmctld.pid",
            f"SlurmdPidFile={d}/run/slurmd.%n.pid",
            f"SlurmctldLogFile={d}/log/slurmctld.log",
            f"SlurmdLogFile={d}/log/slurmd.%n.log",
            f"PlugStackConfig={d}/plugstack.conf",
            # per node: the pmix plugin of a second slurmd on this host would find the first's
            # directory ("pmixp_mkdir: ... File exists")
            f"TmpFS={d}/spool/%n",
            f"SlurmctldDebug={self.debug_level}",
            f"SlurmdDebug={self.debug_level}",
            *self._containment_lines(),
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_Core",
            "SchedulerType=sched/backfill",
            "SchedulerParameters=bf_interval=1",
            "ReturnToService=2",
            # nodes may declare fewer/other CPUs than the host has
            "SlurmdParameters=config_overrides",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MailProg=/bin/true",
            # short timeouts: fast start, fast failure, fast cleanup
            "SlurmctldTimeout=10",
            "SlurmdTimeout=30",
            "MessageTimeout=5",
            "TCPTimeout=3",
            "BatchStartTimeout=10",
            "InactiveLimit=0",
            "KillWait=2",
            # Slurm >= 24.11 wants it at least 5x MessageTimeout (else nodes may go down with
            # "KillTaskFailed" and slurmctld/slurmd log an error); only matters for a process
            # that survives SIGKILL.
            "UnkillableStepTimeout=30",
            "MinJobAge=300",  # no accounting: finished jobs stay visible to scontrol
            "MaxJobCount=10000",
        ]
        lines += self.extra_conf
        hcpus, hsockets, hcores, _ = self.host
        for n in self.node_names:
            if self.split_cores:
                # the real host layout, minus the other nodes' CPUs
                spec = [str(i) for i in range(hcpus) if i not in self.node_cpus[n]]
                hw = (f"CPUs={hcpus} Boards=1 SocketsPerBoard={hsockets} "
                      f"CoresPerSocket={hcores} ThreadsPerCore=1")
                if spec:
                    hw += f" CpuSpecList={','.join(spec)}"
            else:
                hw = f"CPUs={c} Boards=1 SocketsPerBoard=1 CoresPerSocket={c} ThreadsPerCore=1"
            lines.append(
                f"NodeName={n} NodeHostname={self.hostname} NodeAddr=127.0.0.1 "
                f"Port={self.node_ports[n]} {hw} State=UNKNOWN")
        lines.append(f"PartitionName=debug Nodes={','.join(self.node_names)} "
                     "Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO")
        self.conf_path.write_text("\n".join(lines) + "\n")
        for name, text in self.extra_files.items():
            (d / name).write_text(text)
        if self.cgroup_version:
            cgroup_conf = [
                "# generated by tests/slurm/slurm_cluster.py",
                f"CgroupPlugin=cgroup/{self.cgroup_version}",
                "CgroupMountpoint=/sys/fs/cgroup",
                "ConstrainCores=yes",
                "ConstrainRAMSpace=no",
                "ConstrainDevices=no",
            ]
            if self.cgroup_version == "v2":
                cgroup_conf.append("IgnoreSystemd=yes")  # no systemd here: slurmd makes its tree
            (self.tmpdir / "cgroup.conf").write_text("\n".join(cgroup_conf) + "\n")
        self._save_state()

    def _containment_lines(self) -> list[str]:
        if self.cgroup_version:
            # as production sites run it: cgroups track the processes and hold each step to its
            # cores, task/affinity binds each task inside them
            return ["ProctrackType=proctrack/cgroup", "TaskPlugin=task/cgroup,task/affinity"]
        # no cgroups: linuxproc tracks by parent pid, task/affinity binds with sched_setaffinity
        # (visible in Cpus_allowed_list)
        return ["ProctrackType=proctrack/linuxproc", "TaskPlugin=task/affinity"]

    def _save_state(self) -> None:
        state = {
            "dir": str(self.tmpdir),
            # the process that owns the daemons (test or `up` supervisor):
            # `down` asks it to stop them, so orphans get reaped
            "owner": {"pid": os.getpid(), "start": (_proc_stat(os.getpid()) or (0, None))[1]},
            "nodes": self.node_names,
            "daemons": [{"name": n, "pid": p.pid, "start": (_proc_stat(p.pid) or (0, None))[1]}
                        for n, p in self._procs],
        }
        tmp = self.tmpdir / (STATE_FILE + ".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, self.tmpdir / STATE_FILE)

    def _spawn(self, name: str, argv: list[str]) -> subprocess.Popen:
        out = open(self.tmpdir / "log" / f"{name}.stdout", "ab")
        try:
            p = subprocess.Popen(
                argv, env=self.env, cwd=self.tmpdir, stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT,
                # own session: a Ctrl-C at the terminal reaches only us, and we
                # stop the daemons in order
                start_new_session=True,
                preexec_fn=_set_pdeathsig)
        finally:
            out.close()
        self._procs.append((name, p))
        self._save_state()
        self._log(f"started {name} pid {p.pid}: {' '.join(argv)}")
        return p

    def _wait(self, what: str, cond, timeout: float, procs=()) -> None:
        deadline = time.monotonic() + timeout
        while True:
            for name, p in procs:
                if p.poll() is not None:
                    raise SlurmStartError(
                        f"{name} exited with status {p.returncode} while waiting for "
                        f"{what}\n{self.diagnostics()}")
            if cond():
                return
            if time.monotonic() >= deadline:
                raise SlurmStartError(
                    f"timed out after {timeout:.0f}s waiting for {what}\n{self.diagnostics()}")
            time.sleep(0.2)

    def _start_munged(self) -> None:
        m = self.tmpdir / "munge"
        p = self._spawn("munged", [
            _which("munged"), "--foreground",
            f"--key-file={m / 'munge.key'}", f"--socket={self.munge_socket}",
            f"--pid-file={m / 'munged.pid'}", f"--seed-file={m / 'munged.seed'}",
            f"--log-file={self.tmpdir / 'log' / 'munged.log'}",
            "--num-threads=2"])

        sock = str(self.munge_socket)

        def ready() -> bool:
            # a full encode/decode round trip through our socket and key
            if not self.munge_socket.exists():
                return False
            try:
                enc = subprocess.run([_which("munge"), "-n", "-S", sock],
                                     capture_output=True, timeout=5)
                dec = subprocess.run([_which("unmunge"), "-S", sock], input=enc.stdout,
                                     capture_output=True, timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                return False
            return enc.returncode == 0 and dec.returncode == 0
        self._wait("munged to encode/decode", ready, 15, [("munged", p)])

    def _start_slurmctld(self) -> None:
        # -D foreground (we hold the Popen), -i ignore state (fresh dir anyway)
        p = self._spawn("slurmctld", [_which("slurmctld"), "-D", "-i", "-f",
                                      str(self.conf_path)])

        def ready() -> bool:
            r = self._run_quiet(["scontrol", "ping"], 5)
            return r is not None and "UP" in r.stdout
        self._wait("slurmctld to answer ping", ready, self.start_timeout,
                   [("slurmctld", p)])

    def _start_slurmd(self, node: str) -> None:
        self._spawn(f"slurmd.{node}", [_which("slurmd"), "-D", "-N", node, "-f",
                                       str(self.conf_path)])

    def _run_quiet(self, argv, timeout):
        try:
            return subprocess.run(argv, env=self.env, cwd=self.tmpdir, capture_output=True,
                                  text=True, timeout=timeout)
        except (subprocess.TimeoutExpired, OSError):
            return None

    def node_states(self) -> dict[str, str]:
        r = self._run_quiet(["sinfo", "-h", "-N", "-o", "%N %T"], 10)
        if r is None or r.returncode != 0:
            return {}
        out = {}
        for line in r.stdout.splitlines():
            parts = line.split()
            if len(parts) == 2:
                out[parts[0]] = parts[1]
        return out

    def _wait_idle(self) -> None:
        def ready() -> bool:
            st = self.node_states()
            return all(st.get(n, "").rstrip("*") == "idle" for n in self.node_names)
        self._wait(f"nodes {','.join(self.node_names)} to be idle", ready,
                   self.start_timeout, [(n, p) for n, p in self._procs])
        self._log(f"cluster up: {self.node_states()}")

    # -------------------------------------------------------------- stop
    def stop(self, force_remove: bool | None = None) -> None:
        """Stop our daemons and leftovers; remove the dir unless keep."""
        if self._stopped or self.tmpdir is None:
            return
        self._stopped = True
        _live_clusters.discard(self)
        # A second Ctrl-C/SIGTERM during cleanup would leak daemons: ignore
        # both meanwhile (every wait below is bounded).
        old_int = old_term = None
        if _in_main_thread():
            old_int = signal.signal(signal.SIGINT, signal.SIG_IGN)
            old_term = signal.signal(signal.SIGTERM, signal.SIG_IGN)
            if self._old_sigterm is not None:  # undo _catch_sigterm
                old_term, self._old_sigterm = self._old_sigterm, None
        try:
            stop_dir(self.tmpdir, log=lambda m: print(m, file=sys.stderr))
            for _, p in self._procs:
                try:
                    p.wait(timeout=1)
                except subprocess.TimeoutExpired:
                    pass
            remove = (not self.keep) if force_remove is None else force_remove
            if remove and self._created_dir:
                shutil.rmtree(self.tmpdir, ignore_errors=True)
            elif remove:
                # a caller-given dir that existed: empty it, leave the dir
                for child in self.tmpdir.iterdir():
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child, ignore_errors=True)
                    else:
                        child.unlink(missing_ok=True)
            else:
                print(f"[slurm_cluster] kept {self.tmpdir}", file=sys.stderr)
        finally:
            if old_int is not None:
                signal.signal(signal.SIGINT, old_int)
                signal.signal(signal.SIGTERM, old_term)

    # ------------------------------------------------------------ clients
    def run(self, argv: list[str], timeout: float = 60, input: str | None = None,
            env_extra: dict | None = None, cwd: str | os.PathLike | None = None
            ) -> subprocess.CompletedProcess:
        """Run a command with this cluster's SLURM_CONF. Raises on timeout."""
        env = dict(self.env)
        if env_extra:
            env.update(env_extra)
        try:
            return subprocess.run(argv, env=env, cwd=cwd or self.tmpdir, input=input,
                                  capture_output=True, text=True, timeout=timeout)
        finally:
            _reap_orphans()

    def sbatch(self, script_text: str, extra_args: list[str] | None = None,
               timeout: float = 30, env_extra: dict | None = None
               ) -> tuple[str | None, subprocess.CompletedProcess]:
        """Submit script_text; returns (jobid or None, CompletedProcess).

        The script is kept as jobs/script-N.sh; unless the caller says
        otherwise, output goes to jobs/slurm-%j.out (see job_stdout()).
        """
        self._script_no += 1
        path = self.tmpdir / "jobs" / f"script-{self._script_no}.sh"
        path.write_text(script_text)
        path.chmod(0o755)
        argv = ["sbatch", "--parsable", f"--chdir={self.tmpdir / 'jobs'}"]
        argv += list(extra_args or [])
        argv.append(str(path))
        r = self.run(argv, timeout=timeout, env_extra=env_extra)
        jobid = None
        if r.returncode == 0:
            m = re.match(r"\s*(\d+)", r.stdout)
            jobid = m.group(1) if m else None
        return jobid, r

    def srun(self, args: list[str], timeout: float = 60,
             env_extra: dict | None = None) -> subprocess.CompletedProcess:
        return self.run(["srun"] + list(args), timeout=timeout, env_extra=env_extra)

    def job_info(self, jobid: str) -> dict[str, str]:
        """`scontrol show job -o` as a dict (empty if unknown)."""
        r = self._run_quiet(["scontrol", "show", "job", "-o", str(jobid)], 15)
        if r is None or r.returncode != 0:
            return {}
        info = {}
        # values may contain spaces (Command=...); keys are CamelCase words
        for m in re.finditer(r"(\w[\w:/]*)=(.*?)(?=\s+[\w:/]+=|\s*$)", r.stdout.strip()):
            info.setdefault(m.group(1), m.group(2))
        return info

    def wait_job(self, jobid: str, timeout: float = 60) -> str:
        """Wait until the job is finished; return its final JobState."""
        deadline = time.monotonic() + timeout
        state = ""
        while time.monotonic() < deadline:
            state = self.job_info(jobid).get("JobState", "")
            if state in TERMINAL_STATES:
                return state
            time.sleep(0.25)
        raise TimeoutError(f"job {jobid} still {state or 'unknown'} after {timeout}s\n"
                           f"{self.diagnostics()}")

    def job_stdout(self, jobid: str) -> str:
        path = self.job_info(jobid).get("StdOut")
        if not path:
            return ""
        try:
            return Path(path).read_text(errors="replace")
        except OSError:
            return ""

    # -------------------------------------------------------------- logs
    def slurmctld_log(self) -> str:
        return _read(self.tmpdir / "log" / "slurmctld.log")

    def slurmd_log(self, node: str = "n1") -> str:
        return _read(self.tmpdir / "log" / f"slurmd.{node}.log")

    def log_errors(self) -> list[str]:
        """The error:/fatal: lines of slurmctld's and every slurmd's output so far, except
        KNOWN_LOG_NOISE: after start-up, an empty list means Slurm accepted the generated
        configuration without complaint. Each line once, as "DAEMON: error: ...", in log order."""
        if self.tmpdir is None:
            return []
        seen: dict[str, None] = {}
        logd = self.tmpdir / "log"
        for name in ["slurmctld"] + [f"slurmd.{n}" for n in self.node_names]:
            # stderr has what the log file has, plus what came before logging started
            for f in (logd / f"{name}.stdout", logd / f"{name}.log"):
                for line in _read(f).splitlines():
                    m = _LOG_PROBLEM.search(line)
                    if m and not any(p.search(line) for p in KNOWN_LOG_NOISE):
                        seen.setdefault(f"{name}: {line[m.start():].strip()}")
        return list(seen)

    def munged_log(self) -> str:
        return _read(self.tmpdir / "log" / "munged.stdout")

    def diagnostics(self, lines: int = 25) -> str:
        """Tails of the daemons' output (slurmd first), for error messages.

        In foreground mode each daemon's stderr (log/NAME.stdout) has what its
        log file has plus errors from before logging started; the log file
        is shown only if stderr is empty.
        """
        if self.tmpdir is None:
            return "(not started)"
        parts = []
        logd = self.tmpdir / "log"
        names = [f"slurmd.{n}" for n in self.node_names] + ["slurmctld", "munged"]
        for name in names:
            for f in (logd / f"{name}.stdout", logd / f"{name}.log"):
                if f.exists() and f.stat().st_size:
                    parts.append(f"--- {f.name} (last {lines} lines) ---\n{_tail(f, lines)}")
                    break
        return "\n".join(parts) or "(no daemon output)"


def _read(p: Path) -> str:
    try:
        return p.read_text(errors="replace")
    except OSError:
        return ""


def _in_main_thread() -> bool:
    import threading
    return threading.current_thread() is threading.main_thread()


def _sigterm_to_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


# ------------------------------------------------------------------ CLI
def _cmd_up(a) -> int:
    """Fork a supervisor that owns the cluster and stays until `down`.

    A long-lived owner is needed because the daemons die with their owner
    (PDEATHSIG), and because slurmstepd double-forks: its orphans are reaped
    promptly by the owner (a subreaper) rather than by PID 1 whenever it gets
    round to it.
    """
    import select
    cpus = a.cpus_per_node or max(1, (os.cpu_count() or 1) // a.nodes)
    r, w = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # ---- supervisor
        os.close(r)
        os.setsid()
        # let go of the caller's stdio, or `$(... up)` would never see EOF
        devnull = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(devnull, fd)
        os.close(devnull)
        status = 0
        try:
            signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
            signal.signal(signal.SIGHUP, signal.SIG_IGN)
            c = LocalSlurm(nodes=a.nodes, cpus_per_node=cpus,
                           plugstack_lines=a.plugstack_line, workdir=a.dir, keep=True,
                           debug_level=a.debug_level, cgroup=a.cgroup)
            c.start()
            logf = os.open(c.tmpdir / "log" / "supervisor.log",
                           os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            os.dup2(logf, 1)
            os.dup2(logf, 2)
            os.write(w, f"OK {c.conf_path}\n{c.node_states()}".encode())
            os.close(w)
            w = -1
            try:
                # bounded: a forgotten demo cluster goes away after a day
                deadline = time.monotonic() + 24 * 3600
                while time.monotonic() < deadline:
                    time.sleep(0.5)
                    _reap_orphans()
            except KeyboardInterrupt:
                pass
            c.stop()  # keep=True: `down` removes the directory
        except BaseException as e:  # noqa: BLE001 - report, then exit
            status = 1
            if w >= 0:
                os.write(w, f"ERR {type(e).__name__}: {e}".encode())
        os._exit(status)

    os.close(w)
    chunks = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        ready, _, _ = select.select([r], [], [], 1.0)
        if ready:
            data = os.read(r, 65536)
            if not data:
                break
            chunks.append(data)
    os.close(r)
    msg = b"".join(chunks).decode(errors="replace")
    if not msg.startswith("OK "):
        print(msg or "supervisor gave no answer", file=sys.stderr)
        _signal(pid, signal.SIGTERM)
        return 1
    conf, _, nodes = msg[3:].partition("\n")
    print(f"export SLURM_CONF={conf}")
    print(f"# supervisor pid {pid}, nodes {nodes}; stop with: {sys.executable} "
          f"{Path(__file__).resolve()} down --dir {Path(conf).parent}", file=sys.stderr)
    return 0


def _cmd_down(a) -> int:
    d = Path(a.dir).resolve()
    try:
        state = json.loads((d / STATE_FILE).read_text())
    except (OSError, ValueError):
        print(f"{d}: no {STATE_FILE}, not a cluster started by this tool", file=sys.stderr)
        return 1
    owner = state.get("owner") or {}
    opid, ostart = owner.get("pid"), owner.get("start")
    if opid and opid != os.getpid() and _alive(opid, ostart):
        # the owner stops everything in order and reaps what it must
        _signal(opid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while _alive(opid, ostart) and time.monotonic() < deadline:
            time.sleep(0.1)
    stop_dir(d, log=lambda m: print(m, file=sys.stderr))  # no-op if all gone
    if not a.keep:
        shutil.rmtree(d, ignore_errors=True)
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    up = sub.add_parser("up", help="start a cluster that stays up (until down)")
    up.add_argument("--dir", required=True, help="directory for everything (created)")
    up.add_argument("--nodes", type=int, default=1)
    up.add_argument("--cpus-per-node", type=int, default=None,
                    help="default: host CPUs / nodes (at least 1)")
    up.add_argument("--plugstack-line", action="append", default=[])
    up.add_argument("--debug-level", default="info")
    up.add_argument("--cgroup", action="store_true",
                    help="task/cgroup + proctrack/cgroup with ConstrainCores=yes")
    down = sub.add_parser("down", help="stop a cluster started with up")
    down.add_argument("--dir", required=True)
    down.add_argument("--keep", action="store_true", help="keep the directory")
    a = ap.parse_args(argv)
    return _cmd_up(a) if a.cmd == "up" else _cmd_down(a)


if __name__ == "__main__":
    sys.exit(main())
