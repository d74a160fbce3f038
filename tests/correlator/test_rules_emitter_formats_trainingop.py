"""Kubeflow training-operator job conditions and events, as kubectl shows them (probe set eight).

Formats (kubeflow/training-operator @v1.9.0, 6f74c7f6b2): each framework controller's
UpdateJobStatus ("%s %s is failed because %d %s replica(s) failed." and "%s %s is restarting because
%d %s replica(s) failed." with Kind PyTorchJob (pkg/controller.v1/pytorch/pytorchjob_controller.go),
MPIJob (mpi/mpijob_controller.go), XGBoostJob, PaddleJob, JAXJob; TFJob's "TFJob %s/%s has failed
because %d %s replica(s) failed." (tensorflow/tfjob_controller.go)); common/pod.go's "job %s is
restarting because %s replica(s) failed.", "job %q is failing because %q replica(s) failed." and
the ExitedWithCode event "Pod: %v.%v exited with code %v"; common/job.go's "Job %s has failed
because it has reached the specified backoff limit" and "Job %s has failed because it was active
longer than specified deadline". The condition reason is NewReason(kind, reason): Kind + "Failed",
"Restarting", "Created", "Running", "Succeeded" (pkg/util/status.go). Each is shown as kubectl
describe's event row, a kubectl get events row, and describe's Conditions block / -o yaml.

Verdicts by the label policy: a job failed or restarting "because N replica(s) failed" is the
operator's summary of its pods' failures, whose cause it does not give: a consequence (no
category, blame unknown), never a node (a pod or job name is not a host). The backoff limit is the
same consequence (the replicas kept failing). Past activeDeadlineSeconds is the job's own time
limit: scheduler / job. The ExitedWithCode event is read by the exit-status reasoner (a container's
status is 128 + N for signal N): 137 oom_host / unknown, 139 and 134 user_code / job, 1 user_code /
job. Created, Running, Succeeded conditions and exit code 0 read as nothing.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import Fmt, check, params

_OP = "kubeflow/training-operator pkg/controller.v1"
_AT = "@6f74c7f6b2"
CONSEQUENCE = (None, "unknown")
SCHED_JOB = ("scheduler", "job")
USER = ("user_code", "job")
OOM_UNKNOWN = ("oom_host", "unknown")

KINDS = {
    "PyTorchJob": "pytorch/pytorchjob_controller.go",
    "MPIJob": "mpi/mpijob_controller.go",
    "XGBoostJob": "xgboost/xgboostjob_controller.go",
    "PaddleJob": "paddlepaddle/paddlepaddle_controller.go",
    "JAXJob": "jax/jaxjob_controller.go",
}
RTYPES = {
    "PyTorchJob": ("Worker", "Master"),
    "MPIJob": ("Worker", "Launcher"),
    "XGBoostJob": ("Worker", "Master"),
    "PaddleJob": ("Worker", "Master"),
    "JAXJob": ("Worker",),
    "TFJob": ("Worker", "PS", "Chief", "Evaluator"),
}
JOBS = ("mnist-ddp", "llama3-70b-sft", "bert-large-4x8", "job-7f3c2", "resnet50")
NAMESPACES = ("kubeflow", "default", "ml-team")
# kubectl describe's event row, kubectl get events' row, describe's Conditions entry, -o yaml
_SHOWN = (
    "  Warning  {reason}  3m12s  {controller}  ",
    "  Warning  {reason}  41s (x3 over 9m)  {controller}  ",
    "12m         Warning   {reason}   {kindlower}/{name}   ",
    "    Reason:                {reason}\n    Status:                True\n"
    "    Type:                  Failed\n    Message:               ",
    '  - lastTransitionTime: "2024-05-02T10:11:12Z"\n    message: ',
)


def _shown(
    key: str, src: str, kind: str, reason: str, body: str, want: tuple, **values: tuple
) -> Fmt:
    """The operator's message `body` for `kind`, with condition/event reason `reason`."""
    return Fmt(
        key,
        f"{_OP}/{src}{_AT}",
        body + "\n",
        {
            "kind": (kind,),
            "kindlower": (kind.lower(),),
            "reason": (reason,),
            "controller": (f"{kind.lower()}-controller", "training-operator"),
            "name": JOBS,
            "ns": NAMESPACES,
            "n": (1, 2, 8),
            "rtype": RTYPES.get(kind, ("Worker", "Master")),
            **values,
        },
        want,
        prefixes=_SHOWN,
    )


REPLICAS_FAILED = [
    *[
        _shown(
            f"{kind}-failed",
            src,
            kind,
            kind + "Failed",
            "{kind} {name} is failed because {n} {rtype} replica(s) failed.",
            CONSEQUENCE,
        )
        for kind, src in KINDS.items()
    ],
    *[
        _shown(
            f"{kind}-restarting",
            src,
            kind,
            kind + "Restarting",
            "{kind} {name} is restarting because {n} {rtype} replica(s) failed.",
            CONSEQUENCE,
        )
        for kind, src in KINDS.items()
    ],
    _shown(
        "TFJob-failed",
        "tensorflow/tfjob_controller.go",
        "TFJob",
        "TFJobFailed",
        "TFJob {ns}/{name} has failed because {n} {rtype} replica(s) failed.",
        CONSEQUENCE,
    ),
    _shown(
        "common-restarting",
        "common/pod.go",
        "PyTorchJob",
        "PyTorchJobRestarting",
        "job {name} is restarting because {rtype} replica(s) failed.",
        CONSEQUENCE,
    ),
    _shown(
        "common-failing-exit-code",
        "common/pod.go",
        "PyTorchJob",
        "PyTorchJobFailed",
        'job "{name}" is failing because "{rtype}" replica(s) failed.',
        CONSEQUENCE,
    ),
    _shown(
        "backoff-limit",
        "common/job.go",
        "PyTorchJob",
        "PyTorchJobFailed",
        "Job {name} has failed because it has reached the specified backoff limit",
        CONSEQUENCE,
    ),
]

DEADLINE = [
    _shown(
        f"{kind}-active-deadline",
        "common/job.go",
        kind,
        kind + "Failed",
        "Job {name} has failed because it was active longer than specified deadline",
        SCHED_JOB,
    )
    for kind in ("PyTorchJob", "TFJob", "MPIJob")
]

EXITED = [
    _shown(
        f"exited-with-code-{code}",
        "common/pod.go",
        "PyTorchJob",
        "ExitedWithCode",
        "Pod: {ns}.{name}-{rlower}-{i} exited with code " + str(code),
        want,
        rlower=("worker", "master"),
        i=(0, 3, 15),
    )
    for code, want in ((137, OOM_UNKNOWN), (139, USER), (134, USER), (1, USER), (2, USER))
]

FORMATS = REPLICAS_FAILED + DEADLINE + EXITED


@pytest.mark.parametrize(("fmt", "text", "node"), params(FORMATS))
def test_a_training_operator_condition_reads_as_its_source_documents(
    fmt: Fmt, text: str, node: str | None
) -> None:
    check(fmt, text, node)
    got = explain_text(text)
    # a consequence is a reading too, and a job, pod or controller name is never a node
    assert not got.explanation.startswith("No failure evidence"), (fmt.source, text)
    assert got.node is None, (fmt.source, text, got.node)


HEALTHY = [
    "  Normal  PyTorchJobCreated  5m  pytorchjob-controller  PyTorchJob mnist-ddp is created.",
    "  Normal  MPIJobRunning  4m  mpi-job-controller  MPIJob default/llama3-70b-sft is running.",
    "  Normal  PyTorchJobSucceeded  1m  pytorchjob-controller  PyTorchJob mnist-ddp is "
    "successfully completed.",
    "  Normal  XGBoostJobSucceeded  1m  xgboostjob-controller  XGBoostJob job-7f3c2 is "
    "successfully completed.",
    "  Normal  ExitedWithCode  1m  pytorchjob-controller  Pod: default.mnist-ddp-master-0 "
    "exited with code 0",
    "  Normal  SuccessfulCreatePod  5m  pytorchjob-controller  Created pod: mnist-ddp-worker-0",
    "  Normal  SuccessfulCreateService  5m  pytorchjob-controller  Created service: "
    "mnist-ddp-master-0",
]


@pytest.mark.parametrize("text", HEALTHY)
def test_a_healthy_training_operator_event_reads_as_nothing(text: str) -> None:
    got = explain_text(text)
    assert got.explanation.startswith("No failure evidence"), (text, got.explanation)


_FAILED_ROW = (
    "  Warning  PyTorchJobFailed  1m  pytorchjob-controller  PyTorchJob mnist-ddp is failed "
    "because 1 Worker replica(s) failed.\n"
)


@pytest.mark.parametrize(
    ("cause", "want"),
    [
        (
            "    Last State:     Terminated\n      Reason:       OOMKilled\n"
            "      Exit Code:    137\n",
            ("oom_host", "job"),
        ),
        (
            "  Normal  ExitedWithCode  2m  pytorchjob-controller  Pod: default.mnist-ddp-worker-0 "
            "exited with code 139\n",
            USER,
        ),
        (
            "  Warning  PyTorchJobFailed  1m  pytorchjob-controller  Job mnist-ddp has failed "
            "because it was active longer than specified deadline\n",
            SCHED_JOB,
        ),
    ],
)
def test_a_replica_failure_summary_gives_way_to_the_cause_beside_it(
    cause: str, want: tuple[str | None, str]
) -> None:
    # the operator's "is failed because 1 Worker replica(s) failed" must not hide why
    for text in (_FAILED_ROW + cause, cause + _FAILED_ROW):
        got = explain_text(text)
        assert (got.category, got.blame) == want, (text, got.explanation)
