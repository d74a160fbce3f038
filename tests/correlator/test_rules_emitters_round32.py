"""Round thirty-two: two emitters' formats, as their sources print them.

- PyTorch's ProcessGroupNCCL heartbeat monitor (torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp)
  logs "Failed to get exception dump flag from the global store." followed directly by the
  store's exception text when its check of the global TCPStore throws; later releases log
  'Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server has shut down too
  early), with error: ...': the store connection broke, interconnect/unknown, no peer named. See
  pytorch.json (pg_dump_flag_store_error).
- Horovod's gloo launcher (horovod/run/gloo_run.py) prints "Process {idx} exit with status code
  {ec}." for a rank whose process exited non-zero; safe_shell_exec makes a signal N into 128 + N,
  so 137 reads as SIGKILL and a plain status as the job's own exit. See horovod.json
  (horovod_gloo_process_exit).
Never a corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text


@pytest.mark.parametrize(
    "line",
    (
        "[rank0]:[E605 09:12:44.123456789 ProcessGroupNCCL.cpp:1307] [PG 0 Rank 0] "
        "Failed to get exception dump flag from the global store.Broken pipe",
        "[rank3]:[W101 00:00:00.000000000 ProcessGroupNCCL.cpp:1700] [PG ID 0 PG GUID 0 Rank 3] "
        'Failed to check the "should dump" flag on TCPStore, (maybe TCPStore server has shut '
        "down too early), with error: Connection reset by peer",
    ),
)
def test_the_heartbeat_monitors_failed_store_check_reads_a_broken_store_connection(
    line: str,
) -> None:
    got = explain_text(line + "\n")
    assert (got.category, got.blame, got.node) == ("interconnect", "unknown", None)


def test_the_gloo_launchers_plain_exit_status_is_the_jobs_own_exit() -> None:
    got = explain_text("Process 1 exit with status code 1.\nProcess 0 exit with status code 1.\n")
    assert (got.category, got.blame, got.node) == ("user_code", "job", None)


def test_the_gloo_launchers_status_137_reads_as_a_kill_signal() -> None:
    got = explain_text("Process 2 exit with status code 137.\n")
    assert (got.category, got.blame) == ("oom_host", "unknown")


def test_the_gloo_launchers_status_139_reads_as_a_segfault() -> None:
    got = explain_text("Process 0 exit with status code 139.\n")
    assert (got.category, got.blame) == ("user_code", "job")
