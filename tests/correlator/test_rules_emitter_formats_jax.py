"""JAX / XLA on GPU: the multi-host coordination service (probe set eight).

Formats, from their sources:
- openxla/xla xla/tsl/distributed_runtime/coordination/coordination_service.cc @a4771e3c16:
  CheckHeartbeatTimeout's "Task %s heartbeat timeout. This indicates that the remote task has
  failed, got preempted, or crashed unexpectedly. ..." and the error it propagates, "The following
  tasks are unhealthy (stopped sending heartbeats):\\n%s\\nThe tasks have crashed. ...";
  CheckBarrierTimeout's "Barrier timed out. Id: %s. ... # of tasks that reached the barrier:
  %d/%d.\\nThe first task at the barrier: %s. Some timed out task names:\\n%s" (DEADLINE_EXCEEDED);
  TaskState::RecordHeartbeat's "%s Heartbeat: Incarnation ID mismatch: expecting %d but got %d.
  The task has restarted and likely crashed earlier ..."; RegisterTaskAsync's "%s unexpectedly
  tried to connect with a different incarnation. It has likely restarted." and "Coordination
  service has stopped. RegisterTask() from task: %s failed. ..."; LOG(INFO) "Initializing
  CoordinationService", "Waiting for %d/%d tasks to connect.", "%s has disconnected from
  coordination service.".
- the same directory's coordination_service_agent.cc @3677f88702: "Polled an error from
  coordination service (this can be an error from this or another task).", "Leader incarnation ID
  mismatch: the coordination  leader (usually slice 0 task 0) has restarted. ...", "Shutdown() was
  called while coordination agent is in error state, implying that distributed execution failed.
  ..."; LOG(INFO) "Coordination agent has successfully connected.", "Polling for error from
  coordination service. ...", "Cancelling error polling because ...", "Coordination agent has
  successfully shut down.".
- openxla/xla xla/pjrt/distributed/client.h @5d8f791c1b: LOG(QFATAL) "Terminating process because
  the coordinator detected missing heartbeats. ... Status: %s" and "Terminating process because of
  missing heartbeat response from the coordinator. ... the coordinator task died; ... Status: %s";
  the newer wording "Terminating process because the JAX distributed service detected fatal
  errors. This most likely indicates that another task died; ... absl::Status: %s" and the status
  "UNAVAILABLE: Failed to send RPC to coordination service. Either the leader task was
  preempted/died/restarted unexpectedly or this task is experiencing network issues. ..." as
  jax-ml/jax docs/fault_tolerance.rst @cec06d116c shows them behind "F0926 17:26:32.075587
  157988 client.h:77] ".
- jax-ml/jax jax/_src/distributed.py @cec06d116c: logger.info "Starting JAX distributed service on
  %s", "Connecting to JAX distributed service on %s"; jaxlib/jax.cc and jax/errors.py: the
  exception is jaxlib.xla_extension.XlaRuntimeError (older jaxlib), jax.errors.JaxRuntimeError.
XLA's allocator OOM and its CUDA and NCCL statuses: test_rules_emitter_formats_jax_xla.py.

Verdicts by the label policy (tests/fixtures/corpus/README.md: heartbeat monitors, and XLA's
coordination service setting a task to ERROR for a heartbeat timeout, are cross-process timeouts
with no visible cause): a task named as having stopped heartbeating, and a process terminating on
missing heartbeats, are nccl_timeout_unknown / unknown, never a root cause and never a culprit
node -- JAX names tasks (/job:jax_worker/replica:0/task:N), not hosts; so is a coordination barrier
timeout. A task named as restarted, or a process sharing another's fate ("detected fatal
errors"), is a consequence (no category, blame unknown). A failed RPC to the coordination service
is interconnect / unknown (leader died or network), with no peer host printed.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params

COORD = "openxla/xla xla/tsl/distributed_runtime/coordination/coordination_service.cc@a4771e3c16"
AGENT = (
    "openxla/xla xla/tsl/distributed_runtime/coordination/coordination_service_agent.cc@3677f88702"
)
CLIENT = "openxla/xla xla/pjrt/distributed/client.h@5d8f791c1b"
DOCS = "jax-ml/jax docs/fault_tolerance.rst@cec06d116c"

CONSEQUENCE = (None, "unknown")
TIMEOUT = ("nccl_timeout_unknown", "unknown")
NET = ("interconnect", "unknown")

TASKS = tuple(f"/job:jax_worker/replica:0/task:{n}" for n in (3, 0, 17, 255, 1))
# absl's glog-style prefix (severity, MMDD, time, thread id, file:line), TF's dated variant
# (as XLA inside TF/JAX < 0.4.2x prints it), srun's "N: " label, and nothing.
_GLOG = "{sev}{md} {hms}.{us} {tid:>7} {file}:{line}] "
_TFLOG = "2024-07-30 {hms}.{us}: {sev} external/xla/xla/tsl/distributed_runtime/{file}:{line}] "
_CLOCK = {
    "md": ("0926", "0224", "1102"),
    "hms": ("17:26:32", "19:21:00", "04:09:40"),
    "us": ("075402", "594200", "000131"),
    "tid": (157988, 1044529, 77),
    "line": (332, 77, 1203),
}
# how a status reaches a Python traceback: the exception class and its module, old and new
EXCEPTIONS = (
    "jaxlib.xla_extension.XlaRuntimeError: ",
    "jax.errors.JaxRuntimeError: ",
    "jaxlib._jax.XlaRuntimeError: ",
)
_LOGGED = (_GLOG, _TFLOG, "{rank}: " + _GLOG, "")


def logged(key: str, src: str, body: str, want: tuple, sev: str, file: str, **values: tuple) -> Fmt:
    """`body` as the coordination code logs it at severity `sev` from `file`, in every delivery."""
    return Fmt(
        key,
        src,
        body + "\n",
        {"sev": (sev,), "file": (file,), "rank": (0, 8, 31), **_CLOCK, **values},
        want,
        prefixes=_LOGGED,
    )


def raised(key: str, src: str, body: str, want: tuple, **values: tuple) -> Fmt:
    """A status `body` as the Python exception that carries it prints it."""
    return Fmt(key, src, body + "\n", {"exc": EXCEPTIONS, **values}, want, prefixes=("{exc}",))


_HB_TIMEOUT = (
    "Task {task} heartbeat timeout. This indicates that the remote task has failed, got "
    "preempted, or crashed unexpectedly. Check the task logs for an earlier error or scheduler "
    "events (e.g. preemption, eviction) to debug further."
)
UNHEALTHY = (
    "The following tasks are unhealthy (stopped sending heartbeats):\n{task}\nThe tasks have "
    "crashed. Check the task logs for an earlier error, or scheduler events (e.g. preemption, "
    "eviction) to debug further.\n\nRPC: /tensorflow.CoordinationService/PollForError "
    "[type.googleapis.com/tensorflow.CoordinationServiceError='']"
)
_RPC_FAILED = (
    "Failed to send RPC to coordination service. Either the leader task was preempted/died/"
    "restarted unexpectedly or this task is experiencing network issues. Check earlier logs from "
    "1) this task, 2) the leader (usually slice 0 task 0), and 3) cluster scheduler to debug "
    "further.\nAdditional GRPC error information from remote target coordination_service while "
    "calling /tensorflow.CoordinationService/PollForError:\n:UNKNOWN:Error received from peer  "
    '{{grpc_message:"Socket closed", grpc_status:14}}'
)
BARRIER = (
    "Barrier timed out. Id: {bid}. This usually happens because a task triggered the barrier too "
    "early or too slowly. Please look at the task logs (both timed out and first task) to debug "
    "further.\n# of tasks that reached the barrier: {got}/{n}.\nThe first task at the barrier: "
    "{task}. Some timed out task names:\n{late}\n"
)
FATAL_NEW = (
    "Terminating process because the JAX distributed service detected fatal errors. This most "
    "likely indicates that another task died; see the other task logs for more details. Disable "
    "Python buffering, i.e. `python -u`, to be sure to see all the previous output. "
    "absl::Status: "
)
_TASK = {"task": TASKS}
BARRIER_VALUES = {
    "bid": (
        "[Init]Wait_for_all_tasks_to_register::0",
        "PjRT_Client_Connect::0",
        "sync_global_devices_step_1200::3",
    ),
    "got": (3, 1, 15),
    "n": (4, 2, 16),
    "task": TASKS,
    "late": TASKS[::-1],
}

SERVICE = [
    logged(
        "heartbeat-timeout",
        COORD,
        "UNAVAILABLE: " + _HB_TIMEOUT,
        TIMEOUT,
        "E",
        "coordination_service.cc",
        **_TASK,
    ),
    raised("heartbeat-timeout-raised", COORD, "UNAVAILABLE: " + _HB_TIMEOUT, TIMEOUT, **_TASK),
    logged(
        "unhealthy-propagated",
        COORD,
        "Use error polling to propagate the following error to all tasks: UNAVAILABLE: "
        + UNHEALTHY,
        TIMEOUT,
        "E",
        "coordination_service.cc",
        **_TASK,
    ),
    raised("unhealthy-raised", COORD, "UNAVAILABLE: " + UNHEALTHY, TIMEOUT, **_TASK),
    logged(
        "barrier-timeout",
        COORD,
        "DEADLINE_EXCEEDED: " + BARRIER,
        TIMEOUT,
        "E",
        "coordination_service_agent.cc",
        **BARRIER_VALUES,
    ),
    raised(
        "barrier-timeout-raised",
        COORD,
        "DEADLINE_EXCEEDED: " + BARRIER,
        TIMEOUT,
        **BARRIER_VALUES,
    ),
    logged(
        "incarnation-mismatch",
        COORD,
        "ABORTED: {task} Heartbeat: Incarnation ID mismatch: expecting {a} but got {b}. The task "
        "has restarted and likely crashed earlier - check for any earlier errors or any "
        "scheduler events (e.g. preemption, eviction) to debug further.",
        CONSEQUENCE,
        "E",
        "coordination_service.cc",
        task=TASKS,
        a=(3412895410273019475, 17),
        b=(9012283746501928374, 2),
    ),
    logged(
        "reconnect-new-incarnation",
        COORD,
        "{task} unexpectedly tried to connect with a different incarnation. It has likely "
        "restarted.",
        CONSEQUENCE,
        "E",
        "coordination_service.cc",
        **_TASK,
    ),
    logged(
        "service-stopped-register",
        COORD,
        "INTERNAL: Coordination service has stopped. RegisterTask() from task: {task} failed. "
        "This usually implies an earlier error that caused coordination service to shut down "
        "before the workers disconnect gracefully. Check the task leader's logs for an earlier "
        "error or scheduler events (e.g. preemption, eviction) to debug the root cause.",
        CONSEQUENCE,
        "E",
        "coordination_service.cc",
        **_TASK,
    ),
]

AGENT_FMTS = [
    logged(
        "polled-an-error",
        AGENT,
        "Polled an error from coordination service (this can be an error from this or another "
        "task).",
        CONSEQUENCE,
        "E",
        "coordination_service_agent.cc",
    ),
    logged(
        "leader-restarted",
        AGENT,
        "ABORTED: Leader incarnation ID mismatch: the coordination  leader (usually slice 0 task "
        "0) has restarted. Check for earlier errors or any scheduler events (e.g. preemption, "
        "eviction) to debug further.",
        CONSEQUENCE,
        "E",
        "coordination_service_agent.cc",
    ),
    logged(
        "shutdown-in-error",
        AGENT,
        "Shutdown() was called while coordination agent is in error state, implying that "
        "distributed execution failed. Note: agent will still shutdown anyway. Agent status: "
        "UNAVAILABLE: " + _HB_TIMEOUT + "\nThis is usually caused by an earlier error during "
        "execution. Check the logs of (a) this task, (b) the leader (usually slice 0 task 0) and "
        "(c) the scheduler (e.g. preemption, eviction) for an earlier error to debug further.",
        TIMEOUT,
        "E",
        "coordination_service_agent.cc",
        **_TASK,
    ),
]

CLIENT_FMTS = [
    logged(
        "fatal-new-unhealthy",
        DOCS,
        FATAL_NEW + "UNAVAILABLE: " + UNHEALTHY,
        TIMEOUT,
        "F",
        "client.h",
        **_TASK,
    ),
    logged(
        "fatal-new-rpc-failed",
        DOCS,
        FATAL_NEW + "UNAVAILABLE: " + _RPC_FAILED,
        NET,
        "F",
        "client.h",
    ),
    raised("rpc-failed-raised", DOCS, "UNAVAILABLE: " + _RPC_FAILED, NET),
    logged(
        "fatal-old-coordinator-detected",
        CLIENT,
        "Terminating process because the coordinator detected missing heartbeats. This most "
        "likely indicates that another task died; see the other task logs for more details. "
        "Status: UNAVAILABLE: " + _HB_TIMEOUT,
        TIMEOUT,
        "F",
        "client.h",
        **_TASK,
    ),
    logged(
        "fatal-old-no-response",
        CLIENT,
        "Terminating process because of missing heartbeat response from the coordinator. This "
        "most likely indicates that the coordinator task died; see the coordinator's task logs "
        "for more details. Status: {status}",
        TIMEOUT,
        "F",
        "client.h",
        status=(
            "DEADLINE_EXCEEDED: Deadline Exceeded",
            "UNAVAILABLE: Socket closed",
            "UNAVAILABLE: failed to connect to all addresses",
        ),
    ),
]

FORMATS = SERVICE + AGENT_FMTS + CLIENT_FMTS


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_a_jax_xla_line_reads_as_its_source_documents(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)
    said = explain_text(text).explanation
    # a consequence is a reading too: the line must not be passed over as unrecognised
    assert not said.startswith("No failure evidence"), (fmt.source, text)
    # and the long multi-sentence status it quotes must not drown the explanation
    assert said.count(". ") + 1 <= 4, said


@pytest.mark.parametrize(("fmt", "text", "node"), params(SERVICE + AGENT_FMTS + CLIENT_FMTS))
def test_a_jax_task_name_is_never_taken_for_a_culprit_node(
    fmt: Fmt, text: str, node: str | None
) -> None:
    # /job:jax_worker/replica:0/task:N names a process, not a host: no node can be pinned
    assert explain_text(text).node is None, (fmt.source, text)


HEALTHY = [
    "I0926 17:26:20.001122  157900 coordination_service.cc:245] Initializing CoordinationService",
    "I0926 17:26:20.101122  157900 coordination_service.cc:512] Waiting for 3/4 tasks to "
    "connect.\nI0926 17:26:20.101130  157900 coordination_service.cc:515] Example stragglers:\n"
    "/job:jax_worker/replica:0/task:1\n/job:jax_worker/replica:0/task:2",
    "I0926 17:26:21.301122  157988 coordination_service_agent.cc:370] Coordination agent has "
    "successfully connected.",
    "I0926 17:26:21.301200  157990 coordination_service_agent.cc:445] Polling for error from "
    "coordination service. This is a long-running RPC that will return only if an error is "
    "encountered or cancelled (e.g. due to shutdown).",
    "I0926 18:00:02.000001  157990 coordination_service_agent.cc:453] Cancelling error polling "
    "because the service or the agent is shutting down.",
    "I0926 18:00:02.100001  157988 coordination_service_agent.cc:634] Coordination agent has "
    "initiated Shutdown().\nI0926 18:00:02.200001  157988 coordination_service_agent.cc:653] "
    "Coordination agent has successfully shut down.",
    "I0926 18:00:02.300001  157900 coordination_service.cc:790] /job:jax_worker/replica:0/task:3 "
    "has disconnected from coordination service.",
    "INFO:jax._src.distributed:Starting JAX distributed service on [::]:1234\n"
    "INFO:jax._src.distributed:Connecting to JAX distributed service on 10.0.0.5:1234",
    "INFO:jax._src.distributed:JAX distributed initialized with visible devices: 0,1,2,3",
    "INFO:jax._src.distributed:The JAX preemption service is disabled. You can enable it using "
    "the jax_enable_preemption_service configuration option.",
]


@pytest.mark.parametrize("text", HEALTHY)
def test_a_healthy_jax_startup_or_shutdown_line_reads_as_nothing(text: str) -> None:
    got = explain_text(text)
    assert got.explanation.startswith("No failure evidence"), (text, got.explanation)
