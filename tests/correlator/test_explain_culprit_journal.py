"""A launcher's output that a login host's journal or syslog carried names the launcher's task
node, never the logging host (probe set seventeen's last group, issue #11).

A launcher run by a login host's systemd unit or script writes its report into that host's
journal, so every line carries the login host's syslog header; the corpus policy ("never the
host running mpirun") names the node the report is about. Formats are cited beside each group.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

# A launcher run by a login host's systemd unit or script, its output in that host's journal:
# the node it names for the failed task is the subject, never the journal's host (the corpus
# policy: "never the host running mpirun")
LAUNCHER_JOURNAL = {
    "mpirun": "mpirun noticed that process rank 0 with PID 363 on node gpu-07 exited on signal "
    "9 (Killed).",
    "srun": "srun: error: gpu-07: task 0: Out Of Memory",
    "orte": "ORTE has lost communication with a remote daemon.\n"
    "  HNP daemon   : [[12345,0],0] on node login01\n"
    "  Remote daemon: [[12345,0],1] on node gpu-07",
}


@pytest.mark.parametrize("key", sorted(LAUNCHER_JOURNAL))
def test_a_launchers_line_in_a_login_hosts_journal_names_the_tasks_node(key: str) -> None:
    lines = LAUNCHER_JOURNAL[key].splitlines()
    text = "\n".join(f"Nov 22 12:00:00 login01 train.sh[4321]: {ln}" for ln in lines)
    assert explain_text(text).node == "gpu-07"


# Hydra's block (MPICH pmiserv_cb.c "=   PID %d RUNNING AT %s" / "=   EXIT CODE: %d"; Intel MPI
# "=   RANK %d PID %d RUNNING AT %s" / "=   KILLED BY SIGNAL: %d (%s)") as syslog (RFC 3164) or
# an RFC 3339-stamped journal logged it on the login host that ran mpiexec
HYDRA_BLOCKS = {
    "intel": ("=   RANK 0 PID 5490 RUNNING AT gpu-07", "=   KILLED BY SIGNAL: 9 (Killed)"),
    "mpich": ("=   PID 5490 RUNNING AT gpu-07", "=   EXIT CODE: 9"),
}
LOG_HEADERS = {
    "rfc3164": "Nov 22 12:00:00 login01 train.sh[4321]: ",
    "rfc3339": "2024-11-22T12:00:00.123456+00:00 login01 train.sh[4321]: ",
}


@pytest.mark.parametrize("header", sorted(LOG_HEADERS))
@pytest.mark.parametrize("block", sorted(HYDRA_BLOCKS))
def test_hydras_block_in_a_login_hosts_journal_names_the_ranks_node(
    block: str, header: str
) -> None:
    text = "\n".join(LOG_HEADERS[header] + ln for ln in HYDRA_BLOCKS[block])
    assert explain_text(text).node == "gpu-07"


def test_a_line_after_hydras_block_in_the_journal_is_the_logging_hosts_again() -> None:
    head = LOG_HEADERS["rfc3164"]
    text = "\n".join(
        (
            head + HYDRA_BLOCKS["intel"][0],
            head + "=   CLEANING UP REMAINING PROCESSES",
            head + "done",
            "Nov 22 12:00:01 login01 kernel: Out of memory: Killed process 812 (python3) "
            "total-vm:81234560kB, anon-rss:61234560kB, file-rss:0kB, shmem-rss:0kB",
        )
    )
    got = explain_text(text)
    assert (got.category, got.node) == ("oom_host", "login01")
