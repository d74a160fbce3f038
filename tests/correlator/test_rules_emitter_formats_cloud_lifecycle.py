"""Probe set twenty-five: how Google Cloud and Azure say a GPU node was lost, repaired, retired
or preempted, read as their documentation says (EC2 and the AWS Node Termination Handler are in
test_rules_emitter_formats_cloud_lifecycle_aws.py).

Formats, each from its source (never a corpus case):
- Compute Engine system_event audit entries (Cloud Logging LogEntry, protoPayload.methodName
  compute.instances.hostError / .preempted / .terminateOnHostMaintenance /
  .migrateOnHostMaintenance, resourceName "projects/P/zones/Z/instances/NAME", status.message)
  and `gcloud compute operations list` rows (NAME systemevent-..., TYPE, TARGET
  zone/instances/NAME): https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-reboots;
  the metadata server's instance/maintenance-event values (NONE, MIGRATE_ON_HOST_MAINTENANCE,
  TERMINATE_ON_HOST_MAINTENANCE): tensorflow/tensorflow
  tensorflow/python/distribute/failure_handling/gce_util.py;
- GKE operations (Operation.Type AUTO_REPAIR_NODES, AUTO_UPGRADE_NODES, UPGRADE_NODES, TARGET
  the node pool): googleapis/googleapis google/container/v1/cluster_service.proto;
- AKS node auto-repair events (source aks-auto-repair, reasons NodeRebootStart ... NodeRedeployError
  and their messages): MicrosoftDocs/azure-aks-docs articles/aks/node-auto-repair.md;
- Azure Scheduled Events (the IMDS document; EventType Freeze, Reboot, Redeploy, Preempt,
  Terminate; Description; EventSource Platform or User): MicrosoftDocs/azure-docs
  articles/virtual-machines/linux/scheduled-events.md and
  https://learn.microsoft.com/azure/virtual-machines/scheduled-events.

Labels: a host error, or a repair of a node that stayed NotReady, is the node's (node/node); a
planned maintenance of the host is the cloud's (node/infra); a Spot/preemptible reclaim is a
preemption (scheduler/infra); a deletion, user-requested restart or emergency repair whose cause
the notice does not give is node/unknown; a live migration is nothing to explain. The node is
named only where the text names the instance.
"""

from __future__ import annotations

import json

import pytest

from correlator.explain import explain_text
from tests.correlator.gce_audit_formats import (
    GCE_METHODS,
    HOST_ERROR,
    INSTANCES,
    MAINTENANCE,
    PREEMPTION,
    ZONES,
    audit_record,
)

NOT_AT_FAULT = ("node", "unknown")


def _audit_entry(method: str, k: int) -> str:
    """`gcloud logging read --format=json`'s LogEntry for a system event, pretty printed."""
    return json.dumps([audit_record(method, k)], indent=2) + "\n"


@pytest.mark.parametrize("method", sorted(GCE_METHODS))
@pytest.mark.parametrize("k", range(len(INSTANCES)))
def test_a_compute_engine_system_event_is_read_by_its_method_on_the_instance_it_names(
    method: str, k: int
) -> None:
    text = _audit_entry(method, k)
    got = explain_text(text)
    want = GCE_METHODS[method][1]
    assert (got.category, got.blame, got.node) == (*want, INSTANCES[k]), (text, got.explanation)


@pytest.mark.parametrize("method", sorted(GCE_METHODS))
@pytest.mark.parametrize("k", range(len(INSTANCES)))
def test_a_gcloud_operations_row_names_the_instance_in_its_target_not_the_operation(
    method: str, k: int
) -> None:
    head = "NAME  TYPE  TARGET  HTTP_STATUS  STATUS  TIMESTAMP"
    row = (
        f"systemevent-17092872000{k}0-613a9c2b7d1e0-5f4e3d2c-1b0a9f8e  {method}  "
        f"{ZONES[k]}/instances/{INSTANCES[k]}  200  DONE  2026-03-01T02:00:00.000-08:00"
    )
    text = f"{head}\n{row}\n"
    got = explain_text(text)
    want = GCE_METHODS[method][1]
    assert (got.category, got.blame, got.node) == (*want, INSTANCES[k]), (text, got.explanation)


def test_a_live_migration_for_host_maintenance_is_nothing_to_explain() -> None:
    for text in (
        _audit_entry("compute.instances.migrateOnHostMaintenance", 0),
        "$ curl -s -H 'Metadata-Flavor: Google' "
        "http://metadata.google.internal/computeMetadata/v1/instance/maintenance-event\n"
        "MIGRATE_ON_HOST_MAINTENANCE\n",
    ):
        got = explain_text(text)
        assert (got.category, got.node) == (None, None), (text, got.explanation)


def test_the_metadata_servers_terminate_on_host_maintenance_is_the_clouds_maintenance() -> None:
    text = (
        "$ curl -s -H 'Metadata-Flavor: Google' "
        "http://metadata.google.internal/computeMetadata/v1/instance/maintenance-event\n"
        "TERMINATE_ON_HOST_MAINTENANCE\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*MAINTENANCE, None), got.explanation


GKE_OPS = (("AUTO_REPAIR_NODES", HOST_ERROR), ("AUTO_UPGRADE_NODES", MAINTENANCE))


@pytest.mark.parametrize(("op", "want"), GKE_OPS)
def test_a_gke_node_pool_operation_is_read_by_its_type_and_names_no_node(
    op: str, want: tuple[str, str]
) -> None:
    text = (
        "NAME                              TYPE  LOCATION       TARGET    STATUS_MESSAGE  STATUS  "
        "START_TIME  END_TIME\n"
        f"operation-1709287200000-8a1b2c3d  {op}  us-central1-a  gpu-pool                  DONE    "
        "2026-03-01T10:00:00.0Z  2026-03-01T10:21:00.0Z\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, None), (text, got.explanation)


AKS_NODES = ("aks-gpupool-12345678-vmss000003", "aks-a100-87654321-vmss00000h")
AKS_EVENTS = (
    (
        "NodeRebootStart",
        "Node auto-repair is initiating a reboot action due to NotReady status persisting for "
        "more than 5 minutes.",
    ),
    (
        "NodeReimageStart",
        "Node auto-repair is initiating a reimage action due to NotReady status persisting for "
        "more than 5 minutes.",
    ),
    (
        "NodeRedeployStart",
        "Node auto-repair is initiating a redeploy action due to NotReady status persisting more "
        "than 5 minutes.",
    ),
    (
        "NodeRebootError",
        "Node auto-repair reboot action failed due to an operation failure. See error details "
        "here: OperationNotAllowed",
    ),
    ("NodeReimageEnd", "Reimage action from node auto-repair is completed."),
)


@pytest.mark.parametrize(("reason", "message"), AKS_EVENTS)
@pytest.mark.parametrize("node", AKS_NODES)
def test_an_aks_auto_repair_event_blames_the_node_it_is_attached_to(
    reason: str, message: str, node: str
) -> None:
    text = (
        "LAST SEEN   TYPE      REASON   OBJECT   MESSAGE\n"
        f"3m          Warning   {reason}   node/{node}   {message}\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", node), (text, got.explanation)


def _scheduled_event(etype: str, description: str, source: str, resources: list[str]) -> dict:
    return {
        "EventId": "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
        "EventStatus": "Scheduled",
        "EventType": etype,
        "ResourceType": "VirtualMachine",
        "Resources": resources,
        "NotBefore": "Mon, 20 Apr 2026 22:26:58 GMT",
        "Description": description,
        "EventSource": source,
        "DurationInSeconds": -1,
    }


# (EventType, Description, EventSource) -> verdict
SCHEDULED_EVENTS = (
    ("Freeze", "Host server is undergoing maintenance.", "Platform", MAINTENANCE),
    (
        "Freeze",
        "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
        "Platform",
        MAINTENANCE,
    ),
    ("Reboot", "Host Server infrastructure is undergoing maintenance.", "Platform", MAINTENANCE),
    ("Redeploy", "Host server is undergoing maintenance.", "Platform", MAINTENANCE),
    ("Redeploy", "Virtual machine has encountered a failure.", "Platform", HOST_ERROR),
    ("Reboot", "Host server is undergoing an emergency repair.", "Platform", NOT_AT_FAULT),
    (
        "Reboot",
        "Virtual machine is going to be restarted as requested by authorized user.",
        "User",
        NOT_AT_FAULT,
    ),
    ("Preempt", "", "Platform", PREEMPTION),
    ("Terminate", "", "User", NOT_AT_FAULT),
)
VMS = ("aks-gpupool-12345678-vmss_3", "nd96-worker-2")


@pytest.mark.parametrize(("etype", "description", "source", "want"), SCHEDULED_EVENTS)
@pytest.mark.parametrize("vm", VMS)
def test_a_scheduled_event_for_one_vm_is_read_by_its_type_and_names_that_vm(
    etype: str, description: str, source: str, want: tuple[str, str], vm: str
) -> None:
    doc = {"DocumentIncarnation": 2, "Events": [_scheduled_event(etype, description, source, [vm])]}
    text = json.dumps(doc, separators=(",", ":")) + "\n"  # curl prints IMDS's compact answer
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, vm), (text, got.explanation)


@pytest.mark.parametrize(("etype", "description", "source", "want"), SCHEDULED_EVENTS)
def test_a_pretty_printed_scheduled_event_for_several_vms_names_none_of_them(
    etype: str, description: str, source: str, want: tuple[str, str]
) -> None:
    event = _scheduled_event(etype, description, source, list(VMS))
    text = json.dumps({"DocumentIncarnation": 3, "Events": [event]}, indent=4) + "\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, None), (text, got.explanation)


def test_an_empty_scheduled_events_document_is_nothing_to_explain() -> None:
    got = explain_text('{"DocumentIncarnation":4,"Events":[]}\n')
    assert got.category is None, got.explanation
