"""Round seventeen: the Hugging Face test harness's "stdout: "/"stderr: " labels, Ray's raylet
dying, and the kernel OOM killer's own "Killed process" line. Every line is built from the
emitter's own format (cited in collector/parse/joblog.py, correlator/rules/emitters/ray.json and
correlator/rules/patterns_job.py) with made-up values, never a corpus case."""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

# torch elastic's ChildFailedError table (errors/__init__.py _FAILURE_FORMAT_TEMPLATE) relayed by
# the test harness's _stream_subprocess: print(label, line) with label "stderr:"
_TABLE = """\
    raise ChildFailedError(
torch.distributed.elastic.multiprocessing.errors.ChildFailedError:
============================================================
train.py FAILED
------------------------------------------------------------
Failures:
  <NO_OTHER_FAILURES>
------------------------------------------------------------
Root Cause (first observed failure):
[0]:
  time      : 2024-05-06_10:11:12
  host      : {host}
  rank      : 1 (local_rank: 1)
  exitcode  : {code} (pid: 8835)
  error_file: <N/A>
  traceback : To enable traceback see: https://pytorch.org/docs/stable/elastic/errors.html
============================================================
"""


@pytest.mark.parametrize("label", ["stderr: ", "stdout: "])
@pytest.mark.parametrize(
    ("code", "want"), [(1, ("user_code", "job")), (-9, ("oom_host", "unknown"))]
)
def test_a_childfailed_table_behind_the_test_harness_label_is_read(
    label: str, code: int, want: tuple[str, str]
) -> None:
    text = "".join(f"{label}{ln}\n" for ln in _TABLE.format(host="gpu-a-07", code=code).split("\n"))
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, "gpu-a-07")


# Ray's agent (report_raylet_error_logs): "Raylet is terminated[: ip=%s, id=%s]. " then whether
# the raylet log shows its SIGTERM
_GUESSES = (
    "Possible reasons include: (1) SIGKILL by the user or system OOM killer, (2) Invalid memory "
    "access from Raylet causing SIGSEGV or SIGBUS, (3) Other termination signals. Last 20 lines "
    "of the Raylet logs:"
)


@pytest.mark.parametrize(
    ("head", "host"),
    [
        ("Raylet is terminated: ip=10.40.7.21, id=6ad361c6d67a3180", "10.40.7.21"),
        ("Raylet is terminated", None),
    ],
)
def test_a_raylet_dying_unexpectedly_is_a_lost_node_not_the_oom_it_guesses(
    head: str, host: str | None
) -> None:
    text = (
        f"2024-05-06 10:11:12,808\tWARNING worker.py:1849 -- {head}. Termination is unexpected. "
        f"{_GUESSES}\n    [state-dump] NodeManager.deadline_timer.record_metrics - 204 total\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", host)


def test_a_raylet_stopped_gracefully_is_no_failure() -> None:
    text = "Raylet is terminated: ip=10.40.7.21, id=6ad361c6. Termination is graceful.\n"
    assert explain_text(text).category is None


# mm/oom_kill.c (2.6.36 to 4.x): the kill on its own line after "Out of memory: Kill process"
@pytest.mark.parametrize("shmem", ["", ", shmem-rss:0kB"])
@pytest.mark.parametrize("comm", ["python", "pt_main_thread", "ray::Trainer"])
def test_the_kernels_own_killed_process_line_is_a_host_oom(shmem: str, comm: str) -> None:
    line = (
        f"Aug 18 03:19:11 gpu-a-07 kernel: Killed process 7748 ({comm}) total-vm:12907828kB, "
        f"anon-rss:11500204kB, file-rss:0kB{shmem}\n"
    )
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == ("oom_host", "job", "gpu-a-07")


def test_a_shell_reporting_a_killed_job_is_not_the_kernels_line() -> None:
    # bash's "Killed" for a SIGKILLed child names no total-vm: SIGKILL alone, a likely OOM whose
    # blame is not settled, never the kernel's own oom_host/job
    got = explain_text("./run.sh: line 12:  7748 Killed                  python train.py\n")
    assert (got.category, got.blame) == ("oom_host", "unknown")


# RFC 3164 4.1.2: the field between the stamp and the tag is HOSTNAME and nothing else, and RFC
# 1123 2.1 lets a host name be all digits; other slots still refuse bare numbers
@pytest.mark.parametrize("host", ["169", "0421", "7"])
@pytest.mark.parametrize(
    "stamp", ["Aug 18 03:19:11", "2024-08-18T03:19:11+0000", "2024-08-18T03:19:11.123456+00:00"]
)
def test_an_all_digit_syslog_host_names_the_node(host: str, stamp: str) -> None:
    line = f"{stamp} {host} kernel: Killed process 7748 (python) total-vm:12907828kB, anon-rss:1kB"
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == ("oom_host", "job", host)


def test_a_year_where_the_syslog_host_would_be_names_no_node() -> None:
    # ctime's order ("... 03:19:11 2024 ...") puts the year there: a date, not a host
    line = "Aug 18 03:19:11 2024 kernel: Killed process 7748 (python) total-vm:1kB, anon-rss:1kB\n"
    assert explain_text(line).node is None


def test_a_bare_number_outside_the_syslog_host_field_names_no_node() -> None:
    # srun's "error: H: task N:" takes a host with a letter; a bare number there stays none
    got = explain_text("srun: error: 169: task 0: Out Of Memory\n")
    assert got.category == "oom_host"
    assert got.node is None
