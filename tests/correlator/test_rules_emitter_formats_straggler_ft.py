"""Probe set twenty-six (straggler detection, fault-tolerant launchers, NeMo's stops).

Read from the emitters' sources:
- nvidia-resiliency-ext, NVIDIA/nvidia-resiliency-ext
  src/nvidia_resiliency_ext/ptl_resiliency/straggler_det_callback.py @d8686d9c7015 (the same
  strings since the initial release @d815452a6a4c): "STRAGGLER DETECTION WARNING: Some GPUs
  have worse relative performance. Affected ranks: {...}" and "... Some GPUs performance
  dropped. Affected ranks: {...}", a set of attribution/straggler/reporting.py StragglerId(rank,
  node) whose node is the rank's socket.gethostname() ('<unk>' when not gathered); the
  periodic "GPU relative performance:" table ("  Rank=r Node=host Score=s"); and, with
  stop_if_detected (on in NeMo 2.0's straggler_det_callback recipe), "Detected stragglers.
  Terminating training..." before sys.exit(1). The log is rank 0's (gather_on_rank0).
- the same repository's fault_tolerance/ft_rendezvous_barrier.py (ensure_node_is_healthy:
  "{check} failed for node {addr_pid_id}: Node {addr_pid_id} has an unhealthy GPU." and its
  NIC link, storage, storage path and node health service kin; launcher.py "Agent .run()
  raised UnhealthyNodeException: {e}") and, at v0.3.0 @fd5a2af, _ft_rendezvous.py ("Health
  check failed for node {n}: Node {n} has an unhealthy GPU."); shared_utils/log_manager.py's
  "%(asctime)s [%(levelname)s] [{node}] [workload:r(l) infra:r(l)] file:line " prefix;
  launcher.py's restart decisions ("[role] Worker group FAILED. n/m attempts left; will restart
  worker group", "Progress tracker detected no progress across restarts. ...", "Another
  launcher reported a no-restart decision (...)"), which follow a failure and name none.
- NeMo, NVIDIA/NeMo @8cfedd720346 nemo/lightning/pytorch/callbacks/preemption.py ("Received
  signal {n}, initiating graceful stop", "Preemption detected, saving checkpoint and exiting",
  then sys.exit(0); nemo/lightning/run/plugins.py PreemptionPlugin has Slurm send SIGTERM 60 s
  before the job's time limit) and nemo/utils/callbacks/preemption.py ("Received SIGTERM,
  saving checkpoint and exiting").
- NeMo-Run, NVIDIA/NeMo-Run @0c49127199ca nemo_run/core/execution/lepton.py ("Job {id} failed
  with status: {state}"), templates/ft_launcher.j2 ("Job failures limit reached (N)"),
  torchx_backend/launcher.py ("Job {app_id} finished: {state}").
Labels by the corpus policy: a straggling GPU is gpu_hardware, its blame unknown (a throttled
or degraded GPU, or uneven work: the report does not say), and its culprit the one node the
report names, never rank 0's host that printed it; the callback's own sys.exit(1) is not a
bug; a health check of the node's own launcher blames the node it names; a preemption stop is
the scheduler's, who must act not shown; executors' wrappers name no cause.
Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

STRAG = "NVIDIA/nvidia-resiliency-ext ptl_resiliency/straggler_det_callback.py@d8686d9c70"
RDZV = "NVIDIA/nvidia-resiliency-ext fault_tolerance/ft_rendezvous_barrier.py@d8686d9c70"
RDZV_V3 = "NVIDIA/nvidia-resiliency-ext fault_tolerance/_ft_rendezvous.py@fd5a2af4ef"
LAUNCHER = "NVIDIA/nvidia-resiliency-ext fault_tolerance/launcher.py@d8686d9c70"
PREEMPT = "NVIDIA/NeMo nemo/lightning/pytorch/callbacks/preemption.py@8cfedd7203"
PREEMPT_V1 = "NVIDIA/NeMo nemo/utils/callbacks/preemption.py@8cfedd7203"
NEMO_RUN = "NVIDIA/NeMo-Run nemo_run/core/execution/lepton.py@0c49127199"

SLOW = ("gpu_hardware", "unknown")
NONE = (None, "unknown")
# NeMo's logger format ("[NeMo W date time module:line] "); the callback's logger is NeMo's
_NEMO = (
    "[NeMo {lvl} 2025-01-01 10:00:00 straggler_det_callback:{line}] ",
    "",
    "Mar  1 10:00:00 {printer} python[{pid}]: [NeMo {lvl} 2025-01-01 10:00:00 "
    "straggler_det_callback:{line}] ",
)
_NEMO_VALUES = {
    "lvl": ("W",),
    "line": (117, 125),
    "printer": ("login-07", "gpu-z-99"),
    "pid": (77,),
}
WHAT = ("have worse relative performance", "performance dropped")
_WARN = "STRAGGLER DETECTION WARNING: Some GPUs {what}. Affected ranks: {{{ids}}}\n"
# ft_launcher's log_manager format, the launcher's own node in brackets
_FT = (
    "2025-03-01 10:00:00,123 [ERROR] [{addr}] [workload:{r}({r}) infra:0(0)] "
    "ft_rendezvous_barrier.py:2618 ",
    "",
)
# _NodeDesc: (addr as printed, the host it names); addr is socket.getfqdn() or a given address
ADDRS = (
    ("gpu-a-07", "gpu-a-07"),
    ("node0412.cluster.example.org", "node0412.cluster.example.org"),
    ("dgx-h100-031", "dgx-h100-031"),
    ("10.4.0.17", "10.4.0.17"),
    ("nid001234", "nid001234"),
)
_FT_VALUES = {"pid": (4411, 902211), "lid": (0, 3), "r": (0, 5)}


def _ids(host: str, ranks: tuple[int, ...]) -> str:
    """A set of StragglerId as Python prints it, all on `host`."""
    return ", ".join(f"StragglerId(rank={r}, node='{host}')" for r in ranks)


FORMATS = (
    Fmt(
        "straggler-one-node",
        STRAG,
        _WARN,
        {
            "what": WHAT,
            "ids": tuple((_ids(h, (3,)), h) for h in HOSTS)
            + tuple((_ids(h, (8, 11, 15)), h) for h in HOSTS[:3]),
            **_NEMO_VALUES,
        },
        SLOW,
        culprit="ids",
        prefixes=_NEMO,
    ),
    # the callback's stop alone: a GPU was slow, which one is not in the line
    Fmt(
        "straggler-stop",
        STRAG,
        "Detected stragglers. Terminating training...\n",
        {**_NEMO_VALUES, "lvl": ("E",), "line": (239, 249)},
        SLOW,
        prefixes=_NEMO,
    ),
    # the periodic score table: a report, printed whether or not a GPU is slow
    Fmt(
        "straggler-score-table",
        STRAG,
        "\nGPU {which} performance:\n Worst performing 2/64 ranks:\n  Rank=3 Node={host} "
        "Score=0.41\n  Rank=9 Node=gpu-a-08 Score=0.97\n Best performing 2/64 ranks:\n"
        "  Rank=0 Node=gpu-a-01 Score=1.00\n  Rank=1 Node=gpu-a-01 Score=1.00\n",
        {"which": ("relative", "individual"), "host": HOSTS, **_NEMO_VALUES, "lvl": ("I",)},
        NONE,
        prefixes=_NEMO,
    ),
    Fmt(
        "ft-rdzv-gpu",
        RDZV,
        "GPU health check failed for node {addr}_{pid}_{lid}: Node {addr}_{pid}_{lid} has an "
        "unhealthy GPU.\n",
        {"addr": ADDRS, **_FT_VALUES},
        ("gpu_hardware", "node"),
        culprit="addr",
        prefixes=_FT,
    ),
    Fmt(
        "ft-rdzv-gpu-v0.3",
        RDZV_V3,
        "Health check failed for node {addr}_{pid}_{lid}: Node {addr}_{pid}_{lid} has an "
        "unhealthy GPU.\n",
        {"addr": ADDRS, **_FT_VALUES},
        ("gpu_hardware", "node"),
        culprit="addr",
        prefixes=_FT,
    ),
    Fmt(
        "ft-agent-unhealthy-gpu",
        RDZV,
        "Agent .run() raised UnhealthyNodeException: Node {addr}_{pid}_{lid} has an unhealthy "
        "GPU.\n",
        {"addr": ADDRS, **_FT_VALUES},
        ("gpu_hardware", "node"),
        culprit="addr",
        prefixes=_FT,
    ),
    Fmt(
        "ft-rdzv-nic",
        RDZV,
        "NIC link state health check failed for node {addr}_{pid}_{lid}: Node "
        "{addr}_{pid}_{lid} has unhealthy NIC link(s).\n",
        {"addr": ADDRS, **_FT_VALUES},
        ("interconnect", "infra"),
        culprit="addr",
        prefixes=_FT,
    ),
    Fmt(
        "ft-rdzv-node",
        RDZV,
        "{check} health check failed for node {addr}_{pid}_{lid}: Node {addr}_{pid}_{lid} "
        "{what}.\n",
        {
            "check": ("Node", "Storage"),
            "what": ("is unhealthy", "has unhealthy storage state"),
            "addr": ADDRS,
            **_FT_VALUES,
        },
        ("node", "node"),
        culprit="addr",
        prefixes=_FT,
    ),
    # a required path missing: a mount the node lacks or a wrong path the job gave
    Fmt(
        "ft-rdzv-storage-paths",
        RDZV,
        "Storage path health check failed for node {addr}_{pid}_{lid}: Node {addr}_{pid}_{lid} "
        "has invalid or unreadable paths.\n",
        {"addr": ADDRS, **_FT_VALUES},
        ("node", "unknown"),
        culprit="addr",
        prefixes=_FT,
    ),
    Fmt(
        "nemo-preemption",
        PREEMPT,
        "[NeMo I 2025-01-01 10:00:00 preemption:87] Received signal {sig}, initiating graceful "
        "stop\n[NeMo I 2025-01-01 10:00:01 preemption:67] Preemption detected, saving "
        "checkpoint and exiting\n",
        {"sig": (15, 10)},
        ("scheduler", "unknown"),
    ),
    Fmt(
        "nemo1-preemption",
        PREEMPT_V1,
        "{prefix2}Received SIGTERM, saving checkpoint and exiting\n",
        {"prefix2": ("[NeMo I 2025-01-01 10:00:01 preemption:82] ", "")},
        ("scheduler", "unknown"),
    ),
    # ft_launcher's restart decisions: they follow a failure and name none
    Fmt(
        "ft-launcher-restart-wrappers",
        LAUNCHER,
        "{line}\n",
        {
            "line": (
                "[default] Worker group FAILED. 2/3 attempts left; will restart worker group",
                "[default] Progress tracker detected no progress across restarts. No more "
                "restarts will be attempted.",
                "[default] Another launcher reported a no-restart decision (no_progress); "
                "terminating workers.",
                "[default] Attribution recommended stopping the job; terminating workers and "
                "signalling the rest of the job.",
            )
        },
        NONE,
    ),
    # NeMo-Run's wrappers: the failed job's own log holds the cause
    Fmt(
        "nemo-run-wrappers",
        NEMO_RUN,
        "{line}\n",
        {
            "line": (
                "RuntimeError: Job llama3-8b-pretrain-x7q2 failed with status: "
                "LeptonJobState.Failed",
                "RuntimeError: Job data-mover-1a2b failed with status: LeptonJobState.Unknown",
                "Job failures limit reached (3)",
                "INFO:nemo_run.run.torchx_backend.launcher:Job nemo.run/llama3-x7q finished: "
                "FAILED",
            )
        },
        NONE,
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_a_straggler_or_launcher_line_reads_as_its_source_documents(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)
    if f.culprit is None:
        assert explain_text(text).node is None, (f.source, text)


_ONE = (
    "[NeMo W 2025-01-01 10:00:00 straggler_det_callback:117] STRAGGLER DETECTION WARNING: Some "
    "GPUs have worse relative performance. Affected ranks: {StragglerId(rank=11, "
    "node='gpu-a-07')}\n"
)
_STOP = (
    "[NeMo E 2025-01-01 10:00:00 straggler_det_callback:249] Detected stragglers. Terminating "
    "training...\n"
)
_EXIT1 = (
    "E0101 10:00:09.000000 140 torch/distributed/elastic/multiprocessing/api.py:869] failed "
    "(exitcode: 1) local_rank: 0 (pid: 4410) of binary: /usr/bin/python\n"
)


@pytest.mark.parametrize(
    "ids",
    (
        "StragglerId(rank=3, node='gpu-a-07'), StragglerId(rank=12, node='gpu-a-09')",
        "StragglerId(rank=3, node='<unk>')",
    ),
)
def test_stragglers_on_several_nodes_or_unnamed_ones_name_no_node(ids: str) -> None:
    text = "STRAGGLER DETECTION WARNING: Some GPUs performance dropped. Affected ranks: "
    text += f"{{{ids}}}\n"
    got = explain_text(text + _STOP)
    assert (got.category, got.blame, got.node) == (*SLOW, None)


def test_the_callbacks_own_exit_1_is_the_straggler_stop_not_a_bug() -> None:
    assert explain_text(_STOP + _EXIT1).category == "gpu_hardware"
    got = explain_text(_ONE + _STOP + _EXIT1)
    assert (got.category, got.blame, got.node) == (*SLOW, "gpu-a-07")


def test_rank_zeros_host_that_printed_the_report_is_not_the_straggler() -> None:
    syslog = "Mar  1 10:00:00 gpu-a-01 python[77]: "
    got = explain_text(syslog + _ONE + syslog + _STOP)
    assert (got.category, got.blame, got.node) == (*SLOW, "gpu-a-07")


def test_a_straggler_report_does_not_outrank_a_later_crash() -> None:
    crash = 'Traceback (most recent call last):\n  File "train.py", line 9, in <module>\n'
    crash += "ValueError: Expected input batch_size (32) to match target batch_size (16).\n"
    got = explain_text(_ONE + crash)
    assert (got.category, got.blame) == ("user_code", "job")


XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"


@pytest.mark.parametrize("wrapper", (_STOP, _ONE + _STOP))
def test_an_xid_keeps_its_reading_before_the_straggler_stop(wrapper: str) -> None:
    alone, both = explain_text(XID), explain_text(XID + wrapper)
    assert (both.category, both.blame, both.node) == (alone.category, alone.blame, alone.node)
