"""Probe set twenty-four (resiliency): fault-tolerance watchdogs and training loops' own checks.

Read from the emitters' sources:
- nvidia-resiliency-ext, NVIDIA/nvidia-resiliency-ext
  src/nvidia_resiliency_ext/fault_tolerance/rank_monitor_server.py @d8686d9c7015 (the rank
  monitor's warnings "[Cycle N] Did not get initial|subsequent heartbeat. Waited T seconds.",
  "Section 's' has been open for E seconds. Timeout is T seconds.", "Was out of section for E
  seconds. Timeout is T seconds.", then _handle_timeout kills the rank with
  rank_termination_signal, SIGKILL by default (fault_tolerance/config.py); the logger's
  "[time] [LEVEL] [RankMonServer{pid}@{host}:{rank}] " prefix; the initial release @d815452a6a4c
  printed the heartbeat lines without "[Cycle N] ") and ptl_resiliency/straggler_det_callback.py
  (the "STRAGGLER DETECTION WARNING" lines: since probe set 26, a slow GPU, gpu_hardware/unknown
  on the one node the report names; test_rules_emitter_formats_straggler_ft.py);
- nvidia-resiliency-ext shared_utils/health_check.py and inprocess/health_check.py, same commit
  (NVML's GPU recovery action as "GPU {i}: Requires a reset to recover. ..." and its kin, the
  link_downed counter's "GPU r NIC/IB nic link down counter has been incremented: a -> b ",
  HealthCheckError "GPU health check failed" / "NIC health check failed - link down
  detected"): the GPU or link of the host that logged it;
- torchft, pytorch/torchft torchft/manager.py @73dafea42211 ("[replica/rank - step N]" prefix;
  "should_commit failed N times consecutively, exceeding max_retries=M", raised as RuntimeError
  after the errors it reported; "got exception in all reduce -- skipping remaining: {e}");
- Megatron-LM, NVIDIA/Megatron-LM @d98e8a64ddf3 megatron/core/utils.py (the StragglerDetector's
  per-interval "MnRtt/Rnk: ... | MxTmp/Rnk: ..." report) and
  megatron/core/distributed/fsdp/src/megatron_fsdp/param_and_grad_buffer.py ("[Megatron-FSDP]
  (check_for_nan_in_grad=True) Detected NaN or Inf in wgrad: ...", a ValueError).
- torchtitan, pytorch/torchtitan torchtitan/components/metrics.py @b5bcd76c66d0 (get_peak_stats's
  warnings "{n} CUDA memory allocation retries." and "{n} CUDA OOM errors thrown.", logged at a
  step's metrics, so training went on; the step line itself).
Labels by the corpus policy: a hang detector with no other cause is nccl_timeout_unknown/unknown
and names no node (never the host that printed it); the SIGKILL its monitor sends is the
hang's consequence; wrappers never outrank a cause; reports of progress read as nothing.
Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

NVRX = "NVIDIA/nvidia-resiliency-ext fault_tolerance/rank_monitor_server.py@d8686d9c70"
HEALTH = "NVIDIA/nvidia-resiliency-ext shared_utils/health_check.py@d8686d9c70"
NVRX_OLD = "NVIDIA/nvidia-resiliency-ext fault_tolerance/rank_monitor_server.py@d815452a6a"
STRAG = "NVIDIA/nvidia-resiliency-ext ptl_resiliency/straggler_det_callback.py@d8686d9c70"
TORCHFT = "pytorch/torchft torchft/manager.py@73dafea422"
MCORE = "NVIDIA/Megatron-LM megatron/core/utils.py@d98e8a64dd"
TITAN = "pytorch/torchtitan torchtitan/components/metrics.py@b5bcd76c66"
MFSDP = "NVIDIA/Megatron-LM megatron_fsdp/param_and_grad_buffer.py@d98e8a64dd"

HANG = ("nccl_timeout_unknown", "unknown")
GPU = ("gpu_hardware", "node")
LINK = ("interconnect", "infra")
# syslog's "time host ident[pid]: " as journald or rsyslog keep the rank's stderr
_SYSLOG = (
    "Mar  1 10:00:00 {host} python[{pid}]: ",
    "2025-03-01T10:00:00.123456+00:00 {host} python3[{pid}]: ",
)
NONE = (None, "unknown")
# the rank monitor's logger format, with and without a connected rank
_RM = (
    "[2025-03-01 10:00:00,123] [WARNING] [RankMonServer{pid}@{host}:{rank}] ",
    "[2025-03-01 10:00:00,123] [WARNING] [RankMonServer{pid}@{host}:<none>] ",
)
_RM_VALUES = {"pid": (4412, 90211, 17), "host": HOSTS, "rank": (0, 3, 127)}

FORMATS = (
    Fmt(
        "nvrx-heartbeat",
        NVRX,
        "[Cycle {cycle}] Did not get {which} heartbeat. Waited {t} seconds.\n",
        {
            **_RM_VALUES,
            "cycle": (0, 2, 17),
            "which": ("initial", "subsequent"),
            "t": ("600.00", "1800.50"),
        },
        HANG,
        prefixes=_RM,
    ),
    Fmt(
        "nvrx-heartbeat-v0",
        NVRX_OLD,
        "Did not get {which} heartbeat. Waited {t} seconds.\n",
        {**_RM_VALUES, "which": ("initial", "subsequent"), "t": ("600.00", "3600.00")},
        HANG,
        prefixes=_RM,
    ),
    Fmt(
        "nvrx-section",
        NVRX,
        "[Cycle {cycle}] Section '{section}' has been open for {e} seconds. Timeout is "
        "{t} seconds.\n",
        {
            **_RM_VALUES,
            "cycle": (1, 4),
            "section": ("step", "checkpointing", "setup"),
            "e": ("1801.33", "620.50"),
            "t": ("1800.00", "600.00"),
        },
        HANG,
        prefixes=_RM,
    ),
    Fmt(
        "nvrx-out-of-section",
        NVRX,
        "[Cycle {cycle}] Was out of section for {e} seconds. Timeout is {t} seconds.\n",
        {**_RM_VALUES, "cycle": (1, 9), "e": ("650.10", "7210.00"), "t": ("600.00", "7200.00")},
        HANG,
        prefixes=_RM,
    ),
    # the monitor's own progress: nothing failed
    Fmt(
        "nvrx-progress",
        NVRX,
        "{line}\n",
        {
            "line": (
                "Updated heartbeat timeouts: HeartbeatTimeouts(initial=600.00, "
                "subsequent=1800.00, were_calculated=True)",
                "Updated section timeouts: SectionTimeouts(out_of_section=600.00, sections=[], "
                "calculated_sections={{}}, is_out_of_section_calculated=True)",
            ),
            **_RM_VALUES,
        },
        NONE,
        prefixes=_RM,
    ),
    Fmt(
        "nvrx-straggler-warning",
        STRAG,
        "[NeMo W 2025-01-01 10:00:00 straggler_det_callback:125] STRAGGLER DETECTION WARNING: "
        "Some GPUs {what}. Affected ranks: {{StragglerId(rank={rank}, node='{host}')}}\n",
        {
            "what": ("have worse relative performance", "performance dropped"),
            "rank": (3, 61),
            "host": HOSTS,
        },
        ("gpu_hardware", "unknown"),
        culprit="host",
    ),
    Fmt(
        "mcore-straggler-report",
        MCORE,
        "[2025-01-01 10:00:00] | MnRtt/Rnk: 3012.55ms/5 | MxRtt/Rnk: 3110.01ms/12 | MnPwr/Rnk: "
        "380.00W/7 | MxPwr/Rnk: 690.00W/1 | MnTmp/Rnk: 41.00C/3 | MxTmp/Rnk: {tmp}C/9 | "
        "MnUtl/Rnk: 97.00%/2 | MxUtl/Rnk: 100.00%/0 | MnClk/Rnk: 1755.00MHz/4 | MxClk/Rnk: "
        "1980.00MHz/0 | MnDRtt/Rnk: 1.01ms/3 | MxDRtt/Rnk: 14.20ms/8 | MnEtpt/Rnk: 410.22TF/12 | "
        "MxEtpt/Rnk: 432.18TF/5\n",
        {"tmp": ("83.00", "91.00")},
        NONE,
    ),
    Fmt(
        "torchft-progress",
        TORCHFT,
        "INFO:torchft.manager:[{replica}/{rank} - step {step}] reconfiguring for quorum_id={q} "
        "store_prefixed_addr='10.0.0.5:29500/torchft/{q}/0'\n",
        {"replica": ("replica_0", "train_ddp_1"), "rank": (0, 3), "step": (55, 1200), "q": (4,)},
        NONE,
    ),
    # torchft gave up after the errors it reported before: the wrapper names no cause
    Fmt(
        "torchft-max-retries",
        TORCHFT,
        "ERROR:torchft.manager:[{replica}/{rank} - step {step}] should_commit failed {n} times "
        "consecutively, exceeding max_retries={m}\nRuntimeError: should_commit failed {n} times "
        "consecutively, exceeding max_retries={m}\n",
        {
            "replica": ("replica_0", "train_ddp_1"),
            "rank": (0, 3),
            "step": (120,),
            "n": (4, 11),
            "m": (3, 10),
        },
        NONE,
    ),
    Fmt(
        "nvrx-gpu-recovery-action",
        HEALTH,
        "GPU {i}: {action}\n",
        {
            "i": (0, 3, 7),
            "action": (
                "Requires a reset to recover. Terminate GPU processes and reset the GPU.",
                "Requires a node reboot to recover. Reboot the system.",
                "Requires peer-to-peer traffic to be drained. Terminate related processes.",
                "Operating at reduced capacity. Drain existing work and reset the GPU.",
            ),
            "host": HOSTS,
            "pid": (1234, 88),
        },
        GPU,
        culprit="host",
        prefixes=_SYSLOG,
    ),
    Fmt(
        "nvrx-gpu-health-check-error",
        HEALTH,
        "nvidia_resiliency_ext.inprocess.exception.HealthCheckError: GPU health check failed\n",
        {"host": HOSTS[:3], "pid": (1234,)},
        GPU,
        culprit="host",
        prefixes=_SYSLOG,
    ),
    Fmt(
        "nvrx-nic-link-down",
        HEALTH,
        "{line}\n",
        {
            "line": (
                "GPU 2 NIC/IB mlx5_2 link down counter has been incremented: 0 -> 1 ",
                "GPU 5 NIC/IB bnxt_re3 link down counter has been incremented: 4 -> 6 ",
                "nvidia_resiliency_ext.inprocess.exception.HealthCheckError: NIC health check "
                "failed - link down detected",
            ),
            "host": HOSTS,
            "pid": (1234, 88),
        },
        LINK,
        culprit="host",
        prefixes=_SYSLOG,
    ),
    # the checks' own notices when they cannot check: nothing failed
    Fmt(
        "nvrx-health-notice",
        HEALTH,
        "{line}\n",
        {
            "line": (
                "NIC/IB: mlx5_0 link_downed_path not exists: "
                "/sys/class/infiniband/mlx5_0/ports/1/counters/link_downed",
                "GPU Health checks are disabled because pynvml is not available.",
                "Failed to import pynvml. Nic health checks disabled.",
            )
        },
        NONE,
    ),
    # torchtitan's memory notices at a step's metrics: the run went on past them
    Fmt(
        "torchtitan-memory-notices",
        TITAN,
        "{prefix2}[titan] 2025-03-01 10:00:00,123 - root - {line}\n",
        {
            "prefix2": ("", "[rank0]:", "[rank7]:"),
            "line": (
                "WARNING - 12 CUDA memory allocation retries.",
                "WARNING - 2 CUDA OOM errors thrown.",
                "INFO - step: 10  loss:  7.9211  grad_norm:  1.2100  memory: 61.02GiB(77.14%)  "
                "tps: 6,122  tflops: 354.63  mfu: 35.86%",
            ),
        },
        NONE,
    ),
    Fmt(
        "megatron-fsdp-nan",
        MFSDP,
        "ValueError: [Megatron-FSDP](check_for_nan_in_grad=True) Detected NaN or Inf in wgrad: "
        "{t}\n",
        {"t": ("tensor([nan, nan], device='cuda:0')", "tensor([inf, 0.0012], device='cuda:3')")},
        ("user_code", "job"),
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_a_resiliency_line_reads_as_its_source_documents_and_names_only_its_hosts_fault(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)
    if f.culprit is None:
        assert explain_text(text).node is None, (f.source, text)


_HB = (
    "[2025-03-01 10:00:00,123] [WARNING] [RankMonServer4412@gpu-a-07:3] [Cycle 1] Did not get "
    "subsequent heartbeat. Waited 1800.00 seconds.\n"
)
_KILLED = (
    "torch.distributed.elastic.multiprocessing.api:[ERROR] failed (exitcode: -9) local_rank: 3 "
    "(pid: 4410) of binary: /usr/bin/python\n"
)


def test_the_rank_monitors_sigkill_after_a_missed_heartbeat_reads_as_the_hang() -> None:
    got = explain_text(_HB + _KILLED)
    assert (got.category, got.blame, got.node) == (*HANG, None)


def test_a_gpu_needing_a_reset_outranks_the_hang_it_caused_and_names_its_host() -> None:
    reset = (
        "Mar  1 10:00:00 gpu-b-03 python[77]: GPU 1: Requires a reset to recover. Terminate GPU "
        "processes and reset the GPU.\n"
    )
    got = explain_text(reset + _HB + _KILLED)
    assert (got.category, got.blame, got.node) == (*GPU, "gpu-b-03")


XID = "NVRM: Xid (PCI:0000:3b:00): 79, pid=1234, name=python, GPU has fallen off the bus.\n"
PEER = (
    "gpu-a-07:3117:3190 [0] NCCL WARN socketProgress: Connection closed by remote peer "
    "10.4.0.17<45678>\n"
)
_TFT = (
    "ERROR:torchft.manager:[replica_0/0 - step 120] should_commit failed 4 times consecutively, "
    "exceeding max_retries=3\n"
)
_STRAG = (
    "STRAGGLER DETECTION WARNING: Some GPUs performance dropped. Affected ranks: "
    "{StragglerId(rank=3, node='gpu-a-07')}\n"
)
CAUSED = (
    pytest.param(XID, _HB, id="heartbeat-xid"),
    pytest.param(XID, _HB + _KILLED, id="heartbeat-kill-xid"),
    pytest.param(PEER, _TFT, id="torchft-peer"),
    pytest.param(XID, _TFT, id="torchft-xid"),
    pytest.param(
        "ERROR:torchft.manager:[replica_1/3 - step 55] got exception in all reduce -- skipping "
        "remaining: NCCL Error 6: remote process exited or there was a network error\n",
        _TFT,
        id="torchft-quoted-nccl",
    ),
    pytest.param(XID, _STRAG, id="straggler-xid"),
)


@pytest.mark.parametrize(("cause", "wrapper"), CAUSED)
def test_a_watchdog_or_wrapper_after_a_cause_keeps_the_causes_reading(
    cause: str, wrapper: str
) -> None:
    alone, both = explain_text(cause), explain_text(cause + wrapper)
    assert alone.category is not None
    assert (both.category, both.blame, both.node) == (alone.category, alone.blame, alone.node)
