"""Leftovers of the probe sets, each read as its emitter documents it (never a corpus case).

EC2 scheduled events that are over: describe-instance-status's Events[].Description "starts
with the following text: [Completed]" once the event completed, and it "can still be described
for up to a week" (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceStatusEvent.html);
the metadata item events/maintenance/history lists "[Canceled] scheduled reboot" (State
"canceled") and "[Completed] scheduled reboot" (State "completed") (awsdocs/amazon-ec2-user-guide
doc_source/monitoring-instances-status-check_sched.md @902a4562ef8e). Label: no verdict, since
a canceled event never happened and a completed one may be a week old.

Compute Engine audit entries as `gcloud logging read` prints them by default, YAML (one
document per LogEntry, "---" between; https://cloud.google.com/sdk/gcloud/reference/logging/read
and .../reference/topic/formats), the instance in protoPayload.resourceName
("projects/P/zones/Z/instances/NAME", https://cloud.google.com/logging/docs/reference/audit/
auditlog/rest/Shared.Types/AuditLog) or a log's labels.compute.googleapis.com/resource_name:
the node is that instance, as in the JSON form (test_rules_emitter_formats_cloud_lifecycle.py).

The last resort (explain/hosts_health.py): a healthy `kubectl describe node` block (kubectl's
describeNode) and squeue's running or pending rows name no culprit; an unhealthy block can.

Node checks naming gpud's row-remap reasons read as the GPU's memory fault (rules/checks.py), and
nvidia-smi's bracketed per-field errors in a headerless CSV row behind pdsh are read as NVML's.
"""

from __future__ import annotations

import json

import pytest

from correlator.explain import explain_text
from tests.correlator.gce_audit_formats import GCE_METHODS, INSTANCES, audit_record

EC2_CODES = (
    ("instance-retirement", "The instance is running on degraded hardware", ("node", "node")),
    ("instance-stop", "The instance is running on degraded hardware", ("node", "node")),
    ("system-reboot", "The instance is scheduled for a reboot", ("node", "infra")),
    ("system-maintenance", "", ("node", "infra")),
    ("instance-reboot", "", ("node", "infra")),
)


def _ec2_event(code: str, description: str) -> dict[str, str]:
    return {
        "InstanceEventId": "instance-event-0e439355b779n26",
        "Code": code,
        "Description": description,
        "NotBefore": "2026-03-05T00:00:00.000Z",
    }


def _instance_status(events: list[dict[str, str]], indent: int | None = 4) -> str:
    status = {
        "AvailabilityZone": "us-east-1d",
        "InstanceId": "i-0123456789abcdef0",
        "Events": events,
        "InstanceState": {"Code": 16, "Name": "running"},
    }
    return json.dumps({"InstanceStatuses": [status]}, indent=indent) + "\n"


@pytest.mark.parametrize(("code", "description", "want"), EC2_CODES)
@pytest.mark.parametrize("prefix", ["[Completed] ", "[Canceled] "])
@pytest.mark.parametrize("indent", [4, None])
def test_a_finished_ec2_scheduled_event_is_no_verdict(
    code: str, description: str, want: tuple[str, str], prefix: str, indent: int | None
) -> None:
    text = _instance_status([_ec2_event(code, prefix + description)], indent=indent)
    got = explain_text(text)
    assert got.category is None, (text, got.explanation)


@pytest.mark.parametrize(("code", "description", "want"), EC2_CODES)
@pytest.mark.parametrize("indent", [4, None])
def test_an_active_ec2_event_beside_a_completed_one_is_still_read(
    code: str, description: str, want: tuple[str, str], indent: int | None
) -> None:
    done = _ec2_event("system-reboot", "[Completed] The instance is scheduled for a reboot")
    text = _instance_status([done, _ec2_event(code, description)], indent=indent)
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, None), (text, got.explanation)


def test_the_metadata_servers_event_history_is_no_verdict() -> None:
    # the user guide's events/maintenance/history example, its items as documented
    items = [
        {
            "NotBefore": "21 Jan 2019 09:00:43 GMT",
            "Code": "system-reboot",
            "Description": f"[{word.title()}] scheduled reboot",
            "EventId": "instance-event-0d59937288b749b32",
            "NotAfter": "21 Jan 2019 09:17:23 GMT",
            "State": word,
        }
        for word in ("canceled", "completed")
    ]
    text = (
        "$ curl http://169.254.169.254/latest/meta-data/events/maintenance/history\n"
        + json.dumps(items, indent=2).replace('": ', '" : ')
        + "\n"
    )
    got = explain_text(text)
    assert got.category is None, (text, got.explanation)


@pytest.mark.parametrize(("prefix", "want"), [("", ("node", "node")), ("[Completed] ", None)])
def test_powershells_ec2_event_is_read_unless_completed(
    prefix: str, want: tuple[str, str] | None
) -> None:
    # Get-EC2InstanceStatus's Events, the user guide's example
    text = (
        "PS C:\\> (Get-EC2InstanceStatus -InstanceId i-1234567890abcdef0).Events\n\n"
        "Code         : instance-stop\n"
        f"Description  : {prefix}The instance is running on degraded hardware\n"
        "NotBefore    : 5/23/2015 12:00:00 AM\n"
    )
    got = explain_text(text)
    assert ((got.category, got.blame) if got.category else None) == want, got.explanation


GCE_INSTANCES = (INSTANCES[0], INSTANCES[2])  # the JSON probes' instances 0 and 2


def _yaml(value: object, indent: int = 0) -> list[str]:
    """gcloud's yaml printer's block style: sorted keys, two spaces a level, strings that
    would read as other types single-quoted."""
    out: list[str] = []
    assert isinstance(value, dict)
    for key in sorted(value):
        name = f"'{key}'" if key.startswith("@") else key
        item = value[key]
        if isinstance(item, dict):
            out.append(" " * indent + f"{name}:")
            out += _yaml(item, indent + 2)
        else:
            text = f"'{item}'" if str(item)[:1].isdigit() else str(item)
            out.append(" " * indent + f"{name}: {text}")
    return out


def _audit_yaml(method: str, k: int) -> list[str]:
    record = audit_record(method, 2 * k, message="Instance started.")
    operation = {
        "first": "true",
        "id": f"systemevent-170928240000{k}-6129a3b2c1d0e",
        "last": "true",
        "producer": method,
    }
    return _yaml({**record, "operation": operation})


_READ = "$ gcloud logging read 'logName:cloudaudit.googleapis.com%2Fsystem_event' --limit 5\n"


@pytest.mark.parametrize("method", sorted(GCE_METHODS))
@pytest.mark.parametrize("k", range(len(GCE_INSTANCES)))
def test_a_yaml_compute_engine_system_event_names_the_instance_it_acted_on(
    method: str, k: int
) -> None:
    text = _READ + "\n".join(_audit_yaml(method, k)) + "\n"
    got = explain_text(text)
    want = GCE_METHODS[method][1]
    assert (got.category, got.blame, got.node) == (*want, GCE_INSTANCES[k]), (text, got.explanation)


@pytest.mark.parametrize("method", sorted(GCE_METHODS))
def test_the_yaml_document_with_the_event_names_its_instance_not_the_others(method: str) -> None:
    # the newest entry first (gcloud logging read's default --order=desc), "---" between them
    docs = [_audit_yaml(method, 1), _audit_yaml("compute.instances.start", 0)]
    text = _READ + "\n---\n".join("\n".join(d) for d in docs) + "\n"
    got = explain_text(text)
    want = GCE_METHODS[method][1]
    assert (got.category, got.blame, got.node) == (*want, GCE_INSTANCES[1]), (text, got.explanation)


# A failure that names no host (the driver's Xid line as the kernel logs it), for the last resort
XID_NO_HOST = "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.\n"


def _describe_node(ready: str = "True", pressure: str = "False", taints: str = "<none>") -> str:
    """`kubectl describe node` as kubectl's describeNode prints it (pkg/describe/describe.go)."""
    beat = "Sun, 01 Mar 2026 08:19:00 +0000   Mon, 02 Feb 2026 10:00:00 +0000"
    return (
        "$ kubectl describe node gpu-node-3\n"
        "Name:               gpu-node-3\n"
        "Roles:              <none>\n"
        "Labels:             kubernetes.io/hostname=gpu-node-3\n"
        "                    nvidia.com/gpu.present=true\n"
        "Annotations:        node.alpha.kubernetes.io/ttl: 0\n"
        "CreationTimestamp:  Mon, 02 Feb 2026 10:00:00 +0000\n"
        f"Taints:             {taints}\n"
        "Unschedulable:      false\n"
        "Lease:\n"
        "  HolderIdentity:  gpu-node-3\n"
        "  AcquireTime:     <unset>\n"
        "  RenewTime:       Sun, 01 Mar 2026 08:20:00 +0000\n"
        "Conditions:\n"
        "  Type             Status  LastHeartbeatTime                 LastTransitionTime"
        "                Reason                       Message\n"
        "  ----             ------  -----------------                 ------------------"
        "                ------                       -------\n"
        f"  MemoryPressure   {pressure}   {beat}   KubeletHasSufficientMemory   "
        "kubelet has sufficient memory available\n"
        f"  DiskPressure     False   {beat}   KubeletHasNoDiskPressure     "
        "kubelet has no disk pressure\n"
        f"  PIDPressure      False   {beat}   KubeletHasSufficientPID      "
        "kubelet has sufficient PID available\n"
        f"  Ready            {ready}    {beat}   KubeletReady                 "
        "kubelet is posting ready status\n"
        "Addresses:\n"
        "  InternalIP:  10.0.3.17\n"
        "  Hostname:    gpu-node-3\n"
        "Events:             <none>\n"
    )


def test_a_healthy_kubectl_describe_node_block_is_no_last_resort() -> None:
    text = XID_NO_HOST + _describe_node()
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None), got.explanation


@pytest.mark.parametrize(
    "unhealthy",
    [
        {"ready": "False"},
        {"ready": "Unknown"},
        {"pressure": "True"},
        {"taints": "node.kubernetes.io/unreachable:NoSchedule"},
    ],
)
def test_an_unhealthy_kubectl_describe_node_block_can_still_name_its_node(
    unhealthy: dict[str, str],
) -> None:
    text = XID_NO_HOST + _describe_node(**unhealthy)
    got = explain_text(text)
    assert got.node == "gpu-node-3", got.explanation


@pytest.mark.parametrize(
    ("state", "where"),
    [("R", "gpu-node-3"), ("PD", "(Resources)"), ("PD", "(Priority)")],
)
def test_a_running_or_pending_squeue_row_names_no_culprit(state: str, where: str) -> None:
    # squeue's default format (SchedMD/slurm src/squeue/opts.c): JOBID PARTITION NAME USER ST
    # TIME NODES NODELIST(REASON)
    text = (
        XID_NO_HOST + "$ squeue -u alice\n"
        "             JOBID PARTITION     NAME     USER ST       TIME  NODES NODELIST(REASON)\n"
        f"            123456       gpu    train    alice {state:>2}    1:02:03      1 {where}\n"
    )
    got = explain_text(text)
    assert got.node is None, got.explanation


# gpud's remapped-rows state reasons (leptonai/gpud components/accelerator/nvidia/remapped-rows/
# component_output.go @50b548fba4b6; the later forms in component_test.go @0143173e7038)
GPUD_PENDING = (
    "nvml GPU GPU-4b6c1e2a-9f3d-4c1b-8e7a-0d2f5a6b7c8d needs reset (pending remapping true)",
    "nvidia-smi GPU 00000000:18:00.0 needs reset (pending remapping true)",
    "GPU-4b6c1e2a-9f3d-4c1b-8e7a-0d2f5a6b7c8d needs reset (detected pending row remapping)",
)
GPUD_FAILED = (
    "nvml GPU GPU-4b6c1e2a-9f3d-4c1b-8e7a-0d2f5a6b7c8d qualifies for RMA (failure occurred "
    "true, uncorrectable errors 8)",
    "GPU-4b6c1e2a-9f3d-4c1b-8e7a-0d2f5a6b7c8d qualifies for RMA (row remapping failed, "
    "remapped due to 3 uncorrectable error(s))",
)


def _checks(reason: str) -> list[str]:
    """The reason as NHC's die() logs it and as Slurm shows the drain (rules/checks.py)."""
    return [
        f"ERROR:  nhc:  Health check failed:  {reason}\n",
        "NodeName=gpu-n12 Arch=x86_64 CoresPerSocket=48\n"
        "   State=IDLE+DRAIN ThreadsPerCore=1\n"
        f"   Reason={reason} [root@2026-03-01T08:20:00]\n",
    ]


@pytest.mark.parametrize("reason", GPUD_PENDING + GPUD_FAILED)
def test_a_node_check_naming_gpuds_row_remap_reads_as_the_gpus_memory_fault(reason: str) -> None:
    for text in _checks(reason):
        got = explain_text(text)
        assert (got.category, got.blame) == ("gpu_hardware", "node"), (text, got.explanation)


def test_gpuds_reason_with_no_pending_remap_is_no_memory_fault() -> None:
    reason = "nvml GPU GPU-4b6c1e2a needs reset (pending remapping false)"
    for text in _checks(reason):
        got = explain_text(text)
        assert got.category != "gpu_hardware", (text, got.explanation)


# nvidia-smi --query-gpu=...,--format=csv,noheader behind pdsh: a field NVML could not read
# prints its error in brackets. "[GPU is lost]" (NVML_ERROR_GPU_IS_LOST) and "[GPU requires
# reset]" (NVML_ERROR_RESET_REQUIRED) say the GPU is gone or unusable until reset; "[Unknown
# Error]" is printed for a single field a working GPU cannot report too (fan.speed, the case
# enkore/i3pystatus pull 850 handles), so alone it is no fault.
SMI_ROW = "{host}: 0, NVIDIA H100 80GB HBM3, {v}, {v}, {v}\n"


@pytest.mark.parametrize("value", ["[GPU is lost]", "[GPU requires reset]"])
def test_a_headerless_smi_row_with_a_lost_or_reset_gpu_blames_its_host(value: str) -> None:
    text = SMI_ROW.format(host="gpu-n11", v="35") + SMI_ROW.format(host="gpu-n12", v=value)
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", "gpu-n12"), (
        got.explanation
    )


def test_a_headerless_smi_row_with_an_unknown_error_field_is_no_fault() -> None:
    text = SMI_ROW.format(host="gpu-n12", v="[Unknown Error]")
    got = explain_text(text)
    assert got.category is None, got.explanation
