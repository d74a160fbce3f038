"""Leftovers of the probe sets, each read as its emitter documents it (never a corpus case).

EC2 scheduled events that are over: describe-instance-status's Events[].Description "starts
with the following text: [Completed]" once the event completed, and it "can still be described
for up to a week" (https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceStatusEvent.html);
the metadata item events/maintenance/history lists "[Canceled] scheduled reboot" (State
"canceled") and "[Completed] scheduled reboot" (State "completed") (awsdocs/amazon-ec2-user-guide
doc_source/monitoring-instances-status-check_sched.md @902a4562ef8e). Label: no verdict, since
a canceled event never happened and a completed one may be a week old.
"""

from __future__ import annotations

import json

import pytest

from correlator.explain import explain_text

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
