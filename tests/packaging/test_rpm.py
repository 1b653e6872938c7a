#!/usr/bin/python3
"""The RPM as a site admin gets it: built from the source tree with packaging/build-rpm, its file list
and metadata checked, installed into a scratch root with rpm --root, and the installed plugin and shim
(not the build tree's) run under a real private Slurm; then an upgrade over an admin-edited config.

Environment: SOURCE_ROOT (the tree to package), SHIM_PROBE (the shim tests' OpenMP probe),
WORK_DIR (where the RPMs and the scratch root go; kept for inspection), ENGINE_BUILT (1 when the
meson build running this test has the oneDNN engine, 0 when not: the package must match; unset: it
must match whether oneDNN's headers are installed)."""
import bz2
import gzip
import json
import lzma
import os
import re
import shutil
import subprocess
import sys
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "slurm"))
from slurm_cluster import LocalSlurm, missing_binaries  # noqa: E402

SOURCE_ROOT = Path(os.environ.get("SOURCE_ROOT", HERE.parents[1]))
SHIM_PROBE = os.environ.get("SHIM_PROBE", "")
WORK_DIR = Path(os.environ.get("WORK_DIR", "/tmp/tfpin-rpm-test"))
ROOT = WORK_DIR / "root"
if os.environ.get("ENGINE_BUILT") in ("0", "1"):
    ENGINE = os.environ["ENGINE_BUILT"] == "1"
else:
    ENGINE = Path("/usr/include/oneapi/dnnl/dnnl.hpp").exists()
# The spec's default (-Dengine=auto) must build the engine wherever oneDNN is installed; a tree
# configured without the engine gets a package without it (build-rpm --engine disabled).
ENGINE_OPTION = "auto" if ENGINE else "disabled"
# The spec leaves -Dmpi at auto: the MPI module comes with the engine wherever Open MPI is installed.
MPI = ENGINE and subprocess.run(["pkg-config", "--exists", "ompi-c"]).returncode == 0
MPI_MODULE = "/usr/lib64/tfpin/libtfpin-mpi.so"

# The layout of an RPM-based Slurm site (SchedMD's slurm.spec: plugins in LIBDIR/slurm, config in
# /etc/slurm).
EXPECTED_FILES = {
    "/usr/bin/tfpin",
    "/usr/lib64/slurm/tfpin.so",
    "/usr/lib64/tfpin",
    "/usr/lib64/tfpin/libtfpin-shim.so",
    "/etc/slurm/plugstack.conf.d",
    "/etc/slurm/plugstack.conf.d/tfpin.conf",
    "/usr/share/man/man1/tfpin.1",
    "/usr/share/man/man8/tfpin-plugin.8",
    "/usr/share/doc/tfpin",
    "/usr/share/doc/tfpin/LICENSE",
    "/usr/share/doc/tfpin/README.md",
    "/usr/share/doc/tfpin/admin-guide.md",
    "/usr/share/doc/tfpin/user-guide.md",
    "/usr/share/doc/tfpin/design.md",
    "/usr/share/doc/tfpin/shim.md",
    "/usr/share/doc/tfpin/containers.md",
    "/etc/enroot",
    "/etc/enroot/mounts.d",
    "/etc/enroot/mounts.d/90-tfpin.fstab",
    "/usr/share/doc/tfpin/examples",
    "/usr/share/doc/tfpin/examples/demo.sbatch",
    "/usr/share/doc/tfpin/examples/resnet-2lanes.sbatch",
    "/usr/share/doc/tfpin/examples/workers-per-socket.sbatch",
    "/usr/share/doc/tfpin/examples/data-parallel.sbatch",
    "/usr/share/doc/tfpin/examples/apptainer.sbatch",
} | ({"/usr/share/doc/tfpin/engine.md"} if ENGINE else set()) | ({MPI_MODULE} if MPI else set())
MAN_PAGES = ("/usr/share/man/man1/tfpin.1", "/usr/share/man/man8/tfpin-plugin.8")
# rpmbuild's brp-compress compresses man pages as the platform chose (Debian 13's rpm: gzip).
MAN_COMPRESSION = ("", ".gz", ".bz2", ".xz", ".zst")
CONF = "/etc/slurm/plugstack.conf.d/tfpin.conf"
ENROOT_MOUNTS = "/etc/enroot/mounts.d/90-tfpin.fstab"
INSTALLED_PLUGIN = ROOT / "usr/lib64/slurm/tfpin.so"
INSTALLED_SHIM = ROOT / "usr/lib64/tfpin/libtfpin-shim.so"
INSTALLED_TFPIN = ROOT / "usr/bin/tfpin"


def run(argv, **kw):
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    kw.setdefault("timeout", 1800)
    return subprocess.run([str(a) for a in argv], **kw)


def build_rpm(release, engine=ENGINE_OPTION):
    r = run([SOURCE_ROOT / "packaging/build-rpm", "--topdir", WORK_DIR / f"rpmbuild-{release}",
             "--release", release, "--engine", engine])
    if r.returncode != 0:
        raise AssertionError(f"build-rpm --release {release} failed:\n{r.stderr[-4000:]}")
    return Path(r.stdout.strip().splitlines()[-1])


def query(rpm_file, fmt):
    r = run(["rpm", "-qp", "--qf", fmt, rpm_file], check=True)
    return r.stdout


def slurm_major():
    text = Path("/usr/include/slurm/slurm_version.h").read_text()
    number = int(re.search(r"#define\s+SLURM_VERSION_NUMBER\s+(\w+)", text).group(1), 0)
    return f"{number >> 16}.{(number >> 8) & 255:02d}"


def meson_version():
    return re.search(r"version:\s*'([^']+)'", (SOURCE_ROOT / "meson.build").read_text()).group(1)


def man_page_text(path):
    """The troff source of an installed man page, through the decompressor its suffix names."""
    path = Path(path)
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes()).decode()
    if path.suffix == ".bz2":
        return bz2.decompress(path.read_bytes()).decode()
    if path.suffix == ".xz":
        return lzma.decompress(path.read_bytes()).decode()
    if path.suffix == ".zst":
        return run(["zstd", "-dc", path], check=True).stdout
    return path.read_text()


def split_man_suffix(name):
    """(name without compression suffix, suffix) for an installed man page path."""
    for suffix in MAN_COMPRESSION[1:]:
        if name.endswith(suffix):
            return name[:-len(suffix)], suffix
    return name, ""


def needed_sonames(path):
    out = run(["readelf", "-d", path], check=True).stdout
    return set(re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out))


class Rpm(unittest.TestCase):
    """Checks run in order on one scratch root: build, inspect, install, Slurm, upgrade, erase."""

    @classmethod
    def setUpClass(cls):
        if shutil.which("rpmbuild") is None:
            raise unittest.SkipTest("rpmbuild missing: scripts/setup installs Debian's rpm")
        shutil.rmtree(WORK_DIR, ignore_errors=True)
        WORK_DIR.mkdir(parents=True)
        cls.rpm1 = build_rpm(1)
        ROOT.mkdir()
        run(["rpm", "--root", ROOT, "--initdb"], check=True)

    def test_1_file_list(self):
        listed = set(run(["rpm", "-qlp", self.rpm1], check=True).stdout.split())
        # rpmbuild adds /usr/lib/.build-id links for each ELF file: not ours to list.
        ours = {f for f in listed if not f.startswith("/usr/lib/.build-id")}
        # Man pages as brp-compress left them: both compressed the same way (or neither).
        suffixes = {}
        for f in sorted(ours):
            if f.startswith("/usr/share/man/"):
                ours.discard(f)
                name, suffixes[name] = split_man_suffix(f)
                ours.add(name)
        self.assertEqual(ours, EXPECTED_FILES)
        self.assertEqual(len(set(suffixes.values())), 1, suffixes)
        # The engine is in the package exactly when it was built (its notes here; oneDNN linked and
        # required: test_1_metadata; bench and tune: test_3_man_pages...).
        self.assertEqual("/usr/share/doc/tfpin/engine.md" in ours, ENGINE)

    def test_1_meson_install_gives_the_same_layout(self):
        # Configure (not build) with the spec's options and ask meson what it would install.
        builddir = WORK_DIR / "meson-layout"
        r = run(["meson", "setup", builddir, SOURCE_ROOT, "--prefix=/usr", "--libdir=/usr/lib64",
                 "--sysconfdir=/etc", "-Dtests=disabled", "-Dslurm_plugindir=/usr/lib64/slurm",
                 "-Dslurm_confdir=/etc/slurm", f"-Dengine={ENGINE_OPTION}"])
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-3000:])
        installed = json.loads(run(["meson", "introspect", builddir, "--installed"], check=True).stdout)
        files = set(installed.values())
        self.assertEqual(files, {f for f in EXPECTED_FILES if not f.endswith(
            ("/usr/lib64/tfpin", "plugstack.conf.d", "/doc/tfpin", "/examples", "/etc/enroot",
             "/mounts.d"))})

    def test_1_metadata(self):
        name, version, release, license_, arch = query(
            self.rpm1, "%{NAME} %{VERSION} %{RELEASE} %{LICENSE} %{ARCH}").split()
        self.assertEqual((name, version, license_, arch), ("tfpin", meson_version(), "Apache-2.0", "x86_64"))
        self.assertRegex(release, rf"^1\.slurm{re.escape(slurm_major())}(\.|$)")
        self.assertTrue(query(self.rpm1, "%{SUMMARY}").strip())
        requires = set(run(["rpm", "-qp", "--requires", self.rpm1], check=True).stdout.splitlines())
        self.assertIn(f"(slurm >= {slurm_major()} with slurm < {slurm_major()}.999)", requires)
        # Every library the installed binaries link must be a Requires of the package.
        extract = WORK_DIR / "payload"
        extract.mkdir(exist_ok=True)
        run(["sh", "-c", f"rpm2cpio '{self.rpm1}' | cpio -idm --quiet"], cwd=extract, check=True)
        binaries = ["usr/bin/tfpin", "usr/lib64/slurm/tfpin.so", "usr/lib64/tfpin/libtfpin-shim.so"]
        for binary in binaries + ([MPI_MODULE.lstrip("/")] if MPI else []):
            for soname in needed_sonames(extract / binary):
                if soname.startswith("ld-linux"):
                    continue
                self.assertIn(f"{soname}()(64bit)", requires, f"{binary} needs {soname}")
        self.assertEqual(needed_sonames(extract / "usr/lib64/tfpin/libtfpin-shim.so"), {"libc.so.6"})
        # oneDNN is linked and required exactly when the engine was built.
        self.assertEqual(any(s.startswith("libdnnl.so") for s in needed_sonames(extract / "usr/bin/tfpin")),
                         ENGINE)
        self.assertEqual(any(r.startswith("libdnnl.so") for r in requires), ENGINE, sorted(requires))
        # libmpi is linked by the MPI module alone, never by tfpin (every command would pay for its
        # load-time constructors).
        self.assertFalse(any(s.startswith("libmpi") for s in needed_sonames(extract / "usr/bin/tfpin")))
        if MPI:
            self.assertTrue(any(s.startswith("libmpi.so") for s in needed_sonames(extract / MPI_MODULE.lstrip("/"))))

    def test_1_config_is_noreplace(self):
        flags = dict(line.split(" ", 1) for line in query(
            self.rpm1, "[%{FILENAMES} %{FILEFLAGS:fflags}\n]").splitlines())
        self.assertIn("c", flags[CONF])  # %config
        self.assertIn("n", flags[CONF])  # (noreplace)
        self.assertNotIn("c", flags["/usr/lib64/slurm/tfpin.so"])
        self.assertIn("c", flags[ENROOT_MOUNTS])
        self.assertIn("n", flags[ENROOT_MOUNTS])

    def test_2_install_into_scratch_root(self):
        r = run(["rpm", "--root", ROOT, "-i", "--nodeps", self.rpm1])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(run(["rpm", "--root", ROOT, "-q", "tfpin"]).stdout.strip(),
                         self.rpm1.name.removesuffix(".rpm"))
        verify = run(["rpm", "--root", ROOT, "-V", "--nodeps", "tfpin"])
        self.assertEqual((verify.returncode, verify.stdout), (0, ""))
        # The installed snippet names the installed plugin; its keys are all commented.
        conf = (ROOT / CONF.lstrip("/")).read_text()
        active = [line for line in conf.splitlines() if line.strip() and not line.startswith("#")]
        self.assertEqual(active, ["required /usr/lib64/slurm/tfpin.so"])
        self.assertIn("#   shim_path=/usr/lib64/tfpin/libtfpin-shim.so", conf)
        # enroot's mount of the shim's directory, at the path the plugin preloads.
        mounts = (ROOT / ENROOT_MOUNTS.lstrip("/")).read_text()
        active = [line.split() for line in mounts.splitlines() if line.strip() and not line.startswith("#")]
        self.assertEqual(active, [["/usr/lib64/tfpin", "/usr/lib64/tfpin", "none",
                                   "x-create=dir,bind,ro,nosuid,nodev,rprivate"]])

    def test_3_installed_command_uses_installed_shim(self):
        show = run([INSTALLED_TFPIN, "show", "--threads", "1", "--json"])
        self.assertEqual(show.returncode, 0, show.stderr)
        self.assertEqual(json.loads(show.stdout)["threads"], 1)
        env = {k: v for k, v in os.environ.items() if k not in ("TFPIN_SHIM", "LD_PRELOAD")}
        r = run([INSTALLED_TFPIN, "run", "--threads", "1", "--", "sh", "-c", 'echo "$LD_PRELOAD"'], env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), str(INSTALLED_SHIM))

    def test_3_man_pages_render_and_cover_everything(self):
        pages = {}
        plain_dir = WORK_DIR / "man"
        plain_dir.mkdir(exist_ok=True)
        for path in MAN_PAGES:
            installed = [p for p in (ROOT / path.lstrip("/")).parent.iterdir()
                         if split_man_suffix(str(p))[0] == str(ROOT / path.lstrip("/"))]
            self.assertEqual(len(installed), 1, f"{path}: {installed}")
            # Rendered from the decompressed source: this checks the page, not man's decompressors.
            source = plain_dir / Path(path).name
            source.write_text(man_page_text(installed[0]))
            page = f"{Path(path).parent.name}/{Path(path).name}"
            r = run(["man", "--warnings", "--nh", "--nj", "-l", source],
                    env=dict(os.environ, MANWIDTH="200", LC_ALL="C.UTF-8", MAN_KEEP_FORMATTING="0"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stderr, "", f"{page}: groff warnings")
            # man-db marks bold/underline with backspace overstrikes when not writing to a terminal.
            plain = re.sub(r".\x08", "", r.stdout).replace("\u2010", "-")
            self.assertNotRegex(plain, r"@[A-Z_]+@", f"{page}: unsubstituted @VAR@")
            pages[page] = re.sub(r"\s+", " ", plain)
        # tfpin(1): every option of every subcommand the installed tfpin has; bench and tune are
        # there exactly when the engine was built.
        # (CLI11 before 2.4 heads the list "Subcommands:", later releases "SUBCOMMANDS:")
        help_text = run([INSTALLED_TFPIN, "--help"]).stdout
        parts = re.split(r"^subcommands:\s*$", help_text, flags=re.M | re.I)
        self.assertEqual(len(parts), 2, help_text)
        subcommands = re.findall(r"^  (\w+) ", parts[1], re.M)
        self.assertTrue({"show", "run"} <= set(subcommands), subcommands)
        self.assertEqual("bench" in subcommands, ENGINE, subcommands)
        self.assertEqual("tune" in subcommands, ENGINE, subcommands)
        for sub in subcommands:
            self.assertIn(f"tfpin {sub}", pages["man1/tfpin.1"])
            help_text = run([INSTALLED_TFPIN, sub, "--help"]).stdout
            # ("-v, --verbose" in CLI11 2.1, "-v,     --verbose" in 2.6)
            for option in re.findall(r"^\s+(?:-\w,\s*)?(--[\w-]+)", help_text, re.M):
                if option != "--help":
                    self.assertIn(option, pages["man1/tfpin.1"], f"tfpin {sub} {option} undocumented")
        # tfpin-plugin(8): every site key of the installed snippet and every job option.
        conf = (ROOT / CONF.lstrip("/")).read_text()
        keys = re.findall(r"^#\s{3}(\w+)=", conf, re.M)
        self.assertGreaterEqual(len(keys), 10)
        for key in keys:
            self.assertIn(f"{key}=", pages["man8/tfpin-plugin.8"], f"site key {key} undocumented")
        for option in ("--tf-threads", "--tf-interop", "--tf-verbose", "--tf-hyperthreads", "--tf-off"):
            self.assertIn(option, pages["man8/tfpin-plugin.8"])

    def test_3_installed_tfpin_loads_its_mpi_module(self):
        # The relocated install (under ROOT) finds the module next to its own shim, not the system's.
        version = run([INSTALLED_TFPIN, "--version"])
        self.assertEqual(version.returncode, 0, version.stderr)
        if not ENGINE:
            self.assertNotIn("MPI:", version.stdout)
        elif MPI:
            self.assertRegex(version.stdout, r"\nMPI: Open MPI v\d+\.\d+")
        else:
            self.assertIn("\nMPI: none (built without MPI", version.stdout)

    @unittest.skipIf(missing_binaries(), f"Slurm/munge binaries missing: {missing_binaries()}")
    def test_4_job_through_installed_plugin(self):
        # plugstack.conf = the installed snippet, its path moved under the scratch root, plus the
        # installed shim's path (its default, /usr/lib64/tfpin, is inside the root here).
        conf = (ROOT / CONF.lstrip("/")).read_text()
        line = next(l for l in conf.splitlines() if l.startswith("required "))
        line = line.replace(" /usr/lib64/", f" {ROOT}/usr/lib64/") + f" shim_path={INSTALLED_SHIM}"
        cluster = LocalSlurm(nodes=1, cpus_per_node=2, plugstack_lines=[line]).start()
        try:
            probe = (f"{SHIM_PROBE} interop 5 64" if SHIM_PROBE else "true")
            script = ("#!/bin/bash\n#SBATCH -c 2\n#SBATCH --tf-interop=2\n"
                      "echo \"env TFPIN_INTEROP=$TFPIN_INTEROP TFPIN_INTRA=$TFPIN_INTRA "
                      "OMP_NUM_THREADS=$OMP_NUM_THREADS LD_PRELOAD=$LD_PRELOAD "
                      "cpus=$(sed -n 's/^Cpus_allowed_list:[[:space:]]*//p' /proc/self/status)\"\n"
                      f"{probe}\n")
            jobid, r = cluster.sbatch(script)
            self.assertIsNotNone(jobid, r.stderr)
            self.assertEqual(cluster.wait_job(jobid), "COMPLETED", cluster.diagnostics())
            out = cluster.job_stdout(jobid)
        finally:
            cluster.stop()
        fields = dict(item.split("=", 1) for item in
                      next(l for l in out.splitlines() if l.startswith("env ")).split()[1:])
        self.assertEqual((fields["TFPIN_INTEROP"], fields["TFPIN_INTRA"], fields["OMP_NUM_THREADS"]),
                         ("2", "1", "1"), out)
        self.assertEqual(fields["LD_PRELOAD"].split(":")[0], str(INSTALLED_SHIM))
        self.assertEqual(fields["cpus"], "0-1")
        if SHIM_PROBE:
            lanes = json.loads(out.strip().splitlines()[-1])
            self.assertEqual((lanes["A"]["team_max"], lanes["B"]["team_max"]), (1, 1))
            self.assertEqual(sorted(lanes["A"]["allowed_union"] + lanes["B"]["allowed_union"]), [0, 1])

    @unittest.skipIf(missing_binaries(), f"Slurm/munge binaries missing: {missing_binaries()}")
    def test_5_real_slurm_suite_against_installed_files(self):
        env = dict(os.environ, TFPIN_PLUGIN=str(INSTALLED_PLUGIN), TFPIN_SHIM=str(INSTALLED_SHIM))
        if SHIM_PROBE:
            env["SHIM_PROBE"] = SHIM_PROBE
        r = run([sys.executable, HERE.parent / "plugin" / "test_slurm_plugin.py"], env=env, timeout=900)
        tail = r.stderr[-3000:]
        self.assertEqual(r.returncode, 0, tail)
        self.assertRegex(tail, r"\nOK")
        self.assertNotIn("skipped", tail.splitlines()[-1])

    def test_6_upgrade_keeps_the_admins_config_and_erase_saves_it(self):
        conf_path = ROOT / CONF.lstrip("/")
        admin = conf_path.read_text().replace("required /usr/lib64/slurm/tfpin.so",
                                              "required /usr/lib64/slurm/tfpin.so interop=2 verbose=yes")
        admin += "# site edit: two lanes by default\n"
        conf_path.write_text(admin)
        # Release 2 leaves the engine out: what this test checks (the admin's config kept over an
        # upgrade, files replaced, config saved on erase) does not depend on it, and an -O3 -g build
        # of the engine is most of the test's ten minutes. The upgrade then also drops files.
        rpm2 = build_rpm(2, engine="disabled")
        self.assertRegex(rpm2.name, rf"^tfpin-{re.escape(meson_version())}-2\.slurm")
        r = run(["rpm", "--root", ROOT, "-U", "--nodeps", rpm2])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(run(["rpm", "--root", ROOT, "-q", "tfpin"]).stdout.strip(),
                         rpm2.name.removesuffix(".rpm"))
        self.assertEqual(conf_path.read_text(), admin)
        self.assertTrue(INSTALLED_PLUGIN.is_file())
        # release 1's engine notes go with the upgrade (release 2 has no engine)
        self.assertFalse((ROOT / "usr/share/doc/tfpin/engine.md").exists())
        r = run(["rpm", "--root", ROOT, "-e", "--nodeps", "tfpin"])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(INSTALLED_PLUGIN.exists())
        self.assertEqual(Path(str(conf_path) + ".rpmsave").read_text(), admin)


if __name__ == "__main__":
    result = unittest.main(verbosity=2, exit=False, failfast=False).result
    sys.exit(0 if result.wasSuccessful() else 1)
