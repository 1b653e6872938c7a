"""For the test programs that run the engine through the `tfpin` command: where the loaded oneDNN
cannot run on this CPU, `tfpin --version` says why (engine::onednn_unusable_reason: oneDNN >= 3.2
under a hypervisor that hides AMD's cache leaf 0x8000001D) and bench, tune and infer refuse. Such a
program is then skipped with that reason (exit status 77, meson's skip); test_version checks the
refusal itself."""
import subprocess
import sys

MARK = "oneDNN unusable here:"


def onednn_unusable_reason(tfpin):
    """The line `tfpin --version` prints when oneDNN cannot run here, else ""."""
    try:
        out = subprocess.run([tfpin, "--version"], capture_output=True, text=True, timeout=60).stdout
    except OSError:
        return ""  # the test itself reports a missing or broken tfpin
    return next((line for line in out.splitlines() if line.startswith(MARK)), "")


def exit_if_onednn_unusable(tfpin):
    """Exits 77 (skipped) where oneDNN cannot run here, once `tfpin bench` is seen to refuse with
    the reason (exit status 1, no signal); exits 1 when it does anything else."""
    reason = onednn_unusable_reason(tfpin)
    if not reason:
        return
    why = reason[len(MARK):].strip().split(" (bench, tune and infer refuse)")[0]
    bench = subprocess.run([tfpin, "bench", "--model", "alexnet", "--batch_size", "1",
                            "--num_batches", "1", "--num_warmup_batches", "0", "--forward_only"],
                           capture_output=True, text=True, timeout=300)
    if bench.returncode != 1 or why not in bench.stderr:
        print(f"tfpin --version says '{reason}', yet tfpin bench exited with status "
              f"{bench.returncode} and printed: {bench.stderr.strip()[-1000:]}", file=sys.stderr)
        sys.exit(1)
    print(f"skipped: {reason}", file=sys.stderr)
    sys.exit(77)
