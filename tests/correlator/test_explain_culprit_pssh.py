"""parallel-ssh `pssh -i`: its per-host status lines name the host they report (issue #11).

Made-up output from the format strings of krig/parallel-ssh psshlib/task.py (1b3fe606):
Task.report prints "[%s] %s [SUCCESS] %s" / "[%s] %s [FAILURE] %s %s" (the completion's sequence
number, time.asctime()'s HH:MM:SS, pretty_host "user@host:port" with user and port only when
given, and ', '.join(failures)) and then the host's stdout, its stderr behind "Stderr: ";
Task.running's failures are "Exited with error code %s" and "Killed by signal %s", Task.timedout's
"Timed out" (pssh's own SIGKILL of its ssh). pssh 2.x (robinbowes/pssh psshlib/task.py) printed
the host and the port as two words. ssh(1) EXIT STATUS: 255 is ssh's own failure.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

# open-gpu-kernel-modules nvRmXid's "NVRM: Xid (PCI:%04x:%02x:%02x): %d, %s"
_XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=12345, name=python, GPU has fallen off the bus."


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


@pytest.mark.parametrize(
    "host", ["gpu-a-07", "root@gpu-a-07", "gpu-a-07:2222", "root@gpu-a-07:2222", "gpu-a-07 22"]
)
def test_a_failure_line_names_the_host_it_reports(host: str) -> None:
    text = (
        "[1] 10:00:00 [SUCCESS] gpu-a-08\n"
        f"[2] 10:00:01 [FAILURE] {host} Exited with error code 139\n"
    )
    assert _verdict(text) == ("user_code", "job", "gpu-a-07")


def test_a_failure_line_alone_is_read_not_taken_for_a_hydra_rank_label() -> None:
    # "[1] " opens every line, as Hydra's -prepend-rank would: pssh's status line keeps it
    text = "[1] 10:00:01 [FAILURE] gpu-a-07 Exited with error code 1\n"
    assert _verdict(text)[2] == "gpu-a-07"


def test_ssh_exit_255_reads_as_the_host_unreachable() -> None:
    text = (
        "[1] 10:00:00 [SUCCESS] gpu-a-08\n"
        "[2] 10:00:31 [FAILURE] root@gpu-a-07:2222 Exited with error code 255\n"
    )
    assert _verdict(text) == ("node", "node", "gpu-a-07")


def test_psshs_own_timeout_kill_is_not_read_as_the_hosts_failure() -> None:
    # Task.timedout: pssh SIGKILLs its own ssh; a slow command looks the same
    text = (
        "[1] 10:00:00 [SUCCESS] gpu-a-08\n"
        "[2] 10:01:00 [FAILURE] gpu-a-07 Timed out, Killed by signal 9\n"
    )
    assert _verdict(text)[0] is None


def test_a_fault_in_a_failure_block_is_that_hosts_and_outranks_the_exit_code() -> None:
    text = (
        "[1] 10:00:00 [SUCCESS] gpu-a-08\n"
        "[2] 10:00:01 [FAILURE] gpu-a-07 Exited with error code 1\n"
        "Traceback (most recent call last):\n"
        "RuntimeError: CUDA error: an illegal memory access was encountered\n"
        "[3] 10:00:02 [SUCCESS] gpu-a-09\n"
    )
    assert _verdict(text) == ("user_code", "job", "gpu-a-07")


def test_a_status_line_starts_its_hosts_block_and_the_next_one_ends_it() -> None:
    # most lines open with "[N] ": the blocks still read, each line under its own host's header
    text = (
        "[1] 10:00:00 [SUCCESS] gpu-a-08\n"
        "[2] 10:00:01 [SUCCESS] gpu-a-09\n"
        f"[3] 10:00:02 [FAILURE] gpu-a-07 Exited with error code 1\nStderr: {_XID}\n"
        "[4] 10:00:03 [SUCCESS] gpu-a-10\n"
    )
    assert _verdict(text) == ("gpu_hardware", "node", "gpu-a-07")


def test_the_last_block_runs_to_the_end_of_the_text() -> None:
    text = (
        "[1] 10:00:00 [SUCCESS] gpu-a-08\n"
        "[2] 10:00:01 [SUCCESS] gpu-a-09\n"
        f"[3] 10:00:02 [SUCCESS] gpu-a-07\n{_XID}\n"
    )
    assert _verdict(text)[2] == "gpu-a-07"
