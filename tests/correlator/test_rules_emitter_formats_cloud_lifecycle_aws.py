"""Probe set twenty-five, AWS: EC2's scheduled events, status checks and Spot interruption
notices, and the AWS Node Termination Handler's lines about them, read as documented.

Formats, each from its source (never a corpus case):
- `aws ec2 describe-instance-status` (InstanceStatuses[].Events[].Code instance-reboot |
  system-reboot | system-maintenance | instance-retirement | instance-stop, Description;
  SystemStatus/InstanceStatus Status ok | impaired, Details reachability passed | failed):
  https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceStatusEvent.html and the
  status-check page; the metadata item events/maintenance/scheduled lists Code, Description,
  EventId, NotBefore, NotAfter, State;
- the Spot interruption notice (metadata spot/instance-action {"action", "time"}; EventBridge
  detail-type "EC2 Spot Instance Interruption Warning"):
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html;
- aws/aws-node-termination-handler @62a8761d812b: the monitors' Descriptions
  (spot-itn-monitor.go "Spot ITN received. Instance will be interrupted at %s \\n",
  scheduled-event-monitor.go "%s will occur between %s and %s because %s\\n",
  sqsevent/ec2-state-change-event.go "EC2 State Change event received. Instance %s went into %s
  at %s \\n"), logged by draincordon/handler.go as Str(node_name) Str(reason) Msg("Node
  successfully cordoned and drained") through zerolog's ConsoleWriter (or JSON with
  --json-logging), and emitted as Kubernetes events on the node (SpotInterruption,
  ScheduledEvent, StateChange).

Labels: retirement or a scheduled stop (AWS: irreparable failure of the underlying host) and a
failed status check are the node's (node/node); scheduled reboots and maintenance are the
cloud's (node/infra); a Spot interruption is a preemption (scheduler/infra); an instance that
stopped or was terminated for a reason the event does not give is node/unknown. EC2's own
documents name an instance id only, so no node is named; NTH names the Kubernetes node.
"""

from __future__ import annotations

import json

import pytest

from correlator.explain import explain_text

RETIRE = ("node", "node")
MAINTENANCE = ("node", "infra")
PREEMPTION = ("scheduler", "infra")
# the descriptions are the EC2 user guide's examples (awsdocs/amazon-ec2-user-guide
# doc_source/monitoring-instances-status-check_sched.md: a retirement shown as Code instance-stop)
EVENT_CODES = (
    ("instance-retirement", "The instance is running on degraded hardware", RETIRE),
    ("instance-stop", "The instance is running on degraded hardware", RETIRE),
    ("system-reboot", "The instance is scheduled for a reboot", MAINTENANCE),
    ("system-reboot", "scheduled reboot", MAINTENANCE),
    ("system-maintenance", "", MAINTENANCE),
    ("instance-reboot", "", MAINTENANCE),
)
NODES = ("ip-10-0-12-34.us-west-2.compute.internal", "ip-192-168-4-17.ec2.internal")


def _reach(status: str) -> dict[str, str]:
    return {"Name": "reachability", "Status": status}


def _instance_status(events: list[dict[str, str]], system: str = "ok") -> str:
    check = "failed" if system == "impaired" else "passed"
    status = {
        "AvailabilityZone": "us-east-1d",
        "InstanceId": "i-0123456789abcdef0",
        "Events": events,
        "InstanceState": {"Code": 16, "Name": "running"},
        "InstanceStatus": {"Details": [_reach("passed")], "Status": "ok"},
        "SystemStatus": {"Details": [_reach(check)], "Status": system},
    }
    return json.dumps({"InstanceStatuses": [status]}, indent=4) + "\n"


@pytest.mark.parametrize(("code", "description", "want"), EVENT_CODES)
def test_an_ec2_scheduled_event_is_read_by_its_code(
    code: str, description: str, want: tuple[str, str]
) -> None:
    # a canceled or completed event ("[Completed] ..." Description) is no verdict: see
    # test_rules_emitter_formats_leftovers.py
    event = {
        "InstanceEventId": "instance-event-0abcdef1234567890",
        "Code": code,
        "Description": description,
        "NotBefore": "2026-03-05T00:00:00.000Z",
    }
    text = _instance_status([event])
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, None), (text, got.explanation)


@pytest.mark.parametrize(("code", "description", "want"), EVENT_CODES)
def test_the_metadata_servers_scheduled_maintenance_list_is_read_by_its_code(
    code: str, description: str, want: tuple[str, str]
) -> None:
    item = {
        "NotBefore": "21 Mar 2026 09:00:43 GMT",
        "Code": code,
        "Description": description,
        "EventId": "instance-event-0d59937288b749b32",
        "NotAfter": "21 Mar 2026 09:17:23 GMT",
        "State": "active",
    }
    text = (
        "$ curl -s http://169.254.169.254/latest/meta-data/events/maintenance/scheduled\n"
        + json.dumps([item], indent=2)
        + "\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, None), (text, got.explanation)


def test_a_failed_system_status_check_blames_the_node() -> None:
    text = _instance_status([], system="impaired")
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", None), got.explanation


def test_passing_status_checks_are_nothing_to_explain() -> None:
    got = explain_text(_instance_status([]))
    assert got.category is None, got.explanation


@pytest.mark.parametrize("action", ["terminate", "stop", "hibernate"])
def test_a_spot_interruption_notice_is_a_preemption(action: str) -> None:
    imds = (
        "$ curl -s http://169.254.169.254/latest/meta-data/spot/instance-action\n"
        f'{{"action": "{action}", "time": "2026-03-01T08:22:00Z"}}\n'
    )
    bridge = {
        "version": "0",
        "id": "12345678-1234-1234-1234-123456789012",
        "detail-type": "EC2 Spot Instance Interruption Warning",
        "source": "aws.ec2",
        "account": "123456789012",
        "time": "2026-03-01T08:20:00Z",
        "region": "us-east-2",
        "resources": ["arn:aws:ec2:us-east-2a:instance/i-1234567890abcdef0"],
        "detail": {"instance-id": "i-1234567890abcdef0", "instance-action": action},
    }
    for text in (imds, json.dumps(bridge, indent=2) + "\n"):
        got = explain_text(text)
        assert (got.category, got.blame, got.node) == (*PREEMPTION, None), (text, got.explanation)


SPOT = "Spot ITN received. Instance will be interrupted at 2026-03-01T08:22:00Z \n"
NTH_REASONS = (
    (SPOT, PREEMPTION),
    (
        "Spot Interruption notice for instance i-0123456789abcdef0 was sent at "
        "2026-03-01T08:20:00Z \n",
        PREEMPTION,
    ),
    (
        "instance-retirement will occur between 5 Mar 2026 00:00:00 GMT and 7 Mar 2026 00:00:00 "
        "GMT because The instance is running on degraded hardware\n",
        RETIRE,
    ),
    (
        "system-reboot will occur between 21 Jan 2019 09:00:43 GMT and 21 Jan 2019 09:17:23 GMT "
        "because scheduled reboot\n",
        MAINTENANCE,
    ),
    (
        "EC2 State Change event received. Instance i-0123456789abcdef0 went into stopping at "
        "2026-03-01T08:20:00Z \n",
        ("node", "unknown"),
    ),
)


@pytest.mark.parametrize(("reason", "want"), NTH_REASONS)
@pytest.mark.parametrize("node", NODES)
def test_nth_console_log_is_read_by_the_event_it_drained_for_on_the_node_it_names(
    reason: str, want: tuple[str, str], node: str
) -> None:
    # zerolog's ConsoleWriter: time, level, message, then the fields, a quoted string's \n kept
    text = (
        f"2026/03/01 08:20:05 INF Node successfully cordoned and drained node_name={node} "
        f"reason={json.dumps(reason)}\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, node), (text, got.explanation)


@pytest.mark.parametrize(("reason", "want"), NTH_REASONS)
@pytest.mark.parametrize("node", NODES)
def test_nth_json_log_is_read_by_the_event_it_drained_for_on_the_node_it_names(
    reason: str, want: tuple[str, str], node: str
) -> None:
    line = {
        "level": "info",
        "time": "2026-03-01T08:20:05Z",
        "node_name": node,
        "reason": reason,
        "message": "Node successfully cordoned and drained",
    }
    text = json.dumps(line, separators=(",", ":")) + "\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, node), (text, got.explanation)


@pytest.mark.parametrize("node", NODES)
def test_nths_kubernetes_event_on_the_node_is_read_by_its_message(node: str) -> None:
    text = (
        "LAST SEEN   TYPE     REASON             OBJECT          MESSAGE\n"
        f"2m          Normal   SpotInterruption   node/{node}   {SPOT.strip()}\n"
        f"2m          Normal   CordonAndDrain     node/{node}   Node successfully cordoned and "
        "drained\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*PREEMPTION, node), (text, got.explanation)


def test_a_rebalance_recommendation_alone_is_nothing_to_explain() -> None:
    text = (
        "2026/03/01 08:20:05 INF Node successfully cordoned node_name=ip-10-0-1-2.ec2.internal "
        'reason="Rebalance recommendation received. Instance will be cordoned at '
        '2026-03-01T08:20:00Z \\n"\n'
    )
    got = explain_text(text)
    assert got.category is None, got.explanation
