"""Round four of the emitter families, second half: what a line names. A node whose allocatable
GPUs fell short (kubectl describe node), Ray's dead-node reasons, the peer a failed store send or
an unreachable gRPC server names, NCCL's connect retries, and signals and exit statuses however a
launcher reports them, read by the signal reasoner in explain and in the agent alike.

Each line is an emitter's format string (quoted in its family's `sources`) filled in with
plausible values, never a corpus case.
"""

from __future__ import annotations

import pytest

from collector.parse.joblog_more import launcher_exit
from correlator.explain import explain_text
from correlator.rules import classify_text
from correlator.taxonomy import Blame, Category

N, U, H = Category.NODE, Category.USER_CODE, Category.OOM_HOST
BJ, BU = Blame.JOB, Blame.UNKNOWN


_DESCRIBE_NODE = """Name:               gpu-node-07
Roles:              <none>
Capacity:
  cpu:                96
  nvidia.com/gpu:     8
Allocatable:
  cpu:                96
  nvidia.com/gpu:     {allocatable}
System Info:
  Kernel Version:     5.15.0
"""


def test_gpus_missing_from_a_nodes_allocatable_are_the_device_plugins_unhealthy_ones() -> None:
    short = explain_text(_DESCRIBE_NODE.format(allocatable=6))
    assert (short.category, short.blame, short.node) == ("gpu_hardware", "node", "gpu-node-07")
    assert explain_text(_DESCRIBE_NODE.format(allocatable=8)).category is None


def test_rays_list_of_guesses_is_no_evidence_and_a_dead_node_says_how_it_died() -> None:
    guesses = classify_text(
        "Worker exit type: SYSTEM_ERROR Worker exit detail: Worker unexpectedly exits with a "
        "connection error code 2. End of file. There are some potential root causes. (1) The "
        "process is killed by SIGKILL by OOM killer due to high memory usage."
    )
    assert guesses is not None and (guesses.category, guesses.blame) == (H, BU)
    assert not guesses.root_cause
    died = explain_text(
        "ray.exceptions.ActorDiedError: The actor died because its node has died. Node Id: ab12\n"
        "\tthe actor's node was terminated unexpectedly: health check failed due to missing too "
        "many heartbeats\n"
    )
    assert (died.category, died.blame) == ("node", "node")
    preempted = explain_text("\tthe actor's node was preempted: spot instance reclaimed")
    assert (preempted.category, preempted.blame) == ("scheduler", "infra")
    gcs = classify_text("Failed to connect to GCS at address 10.0.0.1:6379 within 5 seconds.")
    assert gcs is not None and gcs.culprit == "10.0.0.1" and not gcs.root_cause


def test_a_failed_send_to_the_store_and_an_unreachable_grpc_server_name_the_peer() -> None:
    send = explain_text(
        "[E socket.cpp:957] sendBytes failed on SocketImpl(fd=12, addr=[gpu-07]:45678, "
        "remote=[gpu-08]:29500): Broken pipe"
    )
    assert (send.category, send.blame, send.node) == ("interconnect", "unknown", "gpu-08")
    grpc = classify_text(
        'status = StatusCode.UNAVAILABLE details = "failed to connect to all addresses; last '
        'error: UNKNOWN: ipv4:10.0.0.1:6379: Failed to connect to remote host: Connection refused"'
    )
    assert grpc is not None and grpc.culprit == "10.0.0.1" and not grpc.at_printer


@pytest.mark.parametrize(
    ("line", "category", "blame"),
    [
        # SIGBUS however it is reported reads as the signal reasoner reads it (/dev/shm)
        ("Bus error (core dumped)", H, BU),
        ("[gpu-07:1234:0:1234] Caught signal 7 (Bus error: nonexistent physical address)", H, BU),
        (
            "*** SIGABRT (@0x3e8) received by PID 1234 (TID 0x7f) from PID 1234; stack trace: ***",
            U,
            BJ,
        ),
        # a crash keeps the segfault rule
        ("Segmentation fault (core dumped)", U, BJ),
        (
            "[gpu-07:1:0:1] Caught signal 11 (Segmentation fault: address not mapped to object)",
            U,
            BJ,
        ),
    ],
)
def test_a_signal_however_reported_gets_the_signal_reasoners_reading(
    line: str, category: Category, blame: Blame
) -> None:
    got = explain_text(line)
    assert (got.category, got.blame) == (category.value, blame.value)


def test_nccl_connect_retries_name_the_peer_only_when_the_line_does() -> None:
    named = classify_text(
        "gpu-07:1:2 [0] NCCL WARN ncclSocketConnect: connect to 10.0.0.8<43210> returned "
        "Connection refused, exceeded error retry count after 35 attempts"
    )
    assert named is not None and named.culprit == "10.0.0.8" and not named.at_printer
    bare = classify_text(
        "gpu-07:1:2 [0] misc/socket.cc:484 NCCL WARN socketStartConnect: connect returned "
        "Connection refused, exceeded error retry count (35)"
    )
    assert bare is not None and bare.culprit is None and not bare.at_printer
    assert not bare.root_cause


@pytest.mark.parametrize(
    ("line", "category", "blame", "signal"),
    [
        # a shell or container runtime between the launcher and the worker reports 128 + N
        ("Command '['bash', 'run.sh']' returned non-zero exit status 137.", H, BU, 9),
        ("Command '['python', 'train.py']' returned non-zero exit status -9.", H, BU, 9),
        ("Command '['bash', 'run.sh']' returned non-zero exit status 134.", U, BJ, 6),
        ("Command '['python', 'train.py']' returned non-zero exit status 1.", U, BJ, None),
        ("srun: error: gpu-07: task 0: Exited with exit code 137", H, BU, None),
        ("srun: error: gpu-07: task 0: Exited with exit code 2", U, BJ, None),
    ],
)
def test_exit_statuses_follow_the_signal_reasoner_in_explain_and_the_agent_alike(
    line: str, category: Category, blame: Blame, signal: int | None
) -> None:
    got = explain_text(line)
    assert (got.category, got.blame) == (category.value, blame.value)
    if "exit status" in line:  # the agent's launcher parser reads the same signal
        agent = launcher_exit(line)
        assert agent is not None and agent.payload.get("signal") == signal
