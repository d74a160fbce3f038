"""The structured tool readers: output a tool prints as a table or a document (sacct, squeue,
scontrol, nvidia-smi, dcgm-exporter, dcgmi, ibstat, EC2's finished scheduled events), read as a
whole before the line parsers see what is left."""

from __future__ import annotations

from collector.health import SourceHealth
from correlator.explain.readers_dcgm import read_dcgm_metrics
from correlator.explain.readers_ec2 import read_ec2_finished_events
from correlator.explain.readers_gpu import (
    ReadResult,
    read_dcgmi_diag,
    read_nvidia_smi,
    read_smi_table,
)
from correlator.explain.readers_gpu_fields import read_dcgmi_dmon, read_smi_query_csv
from correlator.explain.readers_ib import read_ibstat
from correlator.explain.readers_k8s import read_operator_pod
from correlator.explain.readers_sched import (
    read_k8s_node_gpus,
    read_sacct_json,
    read_sacct_table,
)
from correlator.explain.readers_scontrol import read_scontrol_job
from correlator.explain.readers_squeue import read_squeue

HEALTH = SourceHealth("explain")


def read_structured(text: str, lines: list[str]) -> ReadResult:
    """Every structured reader's events and the lines they consumed; a reader that fails is
    counted and skipped."""
    out = ReadResult()
    readers = [
        lambda: read_sacct_json(text) if text.lstrip().startswith("{") else ReadResult(),
        lambda: read_sacct_table(lines),
        lambda: read_scontrol_job(lines),
        lambda: read_squeue(lines),
        lambda: read_nvidia_smi(lines),
        lambda: read_smi_table(lines),
        lambda: read_dcgm_metrics(lines),
        lambda: read_dcgmi_diag(lines),
        lambda: read_smi_query_csv(lines),
        lambda: read_dcgmi_dmon(lines),
        lambda: read_k8s_node_gpus(lines),
        lambda: read_operator_pod(lines),
        lambda: read_ibstat(lines),
        lambda: read_ec2_finished_events(lines),
    ]
    for reader in readers:
        try:
            result = reader()
        except Exception as exc:  # a reader bug must not lose the other readers' evidence
            HEALTH.error("reader failed", exc)
            continue
        out.events += result.events
        out.claimed |= result.claimed
    return out
