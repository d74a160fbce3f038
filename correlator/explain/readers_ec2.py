"""Reader for EC2 scheduled events that are over: a canceled or completed event is history, no
verdict, so its lines are claimed before the ec2 rules (rules/emitters/ec2.json) read its Code.

Sources:
- https://docs.aws.amazon.com/AWSEC2/latest/APIReference/API_InstanceStatusEvent.html:
  describe-instance-status Events[].Description "After a scheduled event is completed, it can
  still be described for up to a week. If the event has been completed, this description starts
  with the following text: [Completed]";
- awsdocs/amazon-ec2-user-guide doc_source/monitoring-instances-status-check_sched.md
  @902a4562ef8e4dc5df8a16490115b09d7bda8c07: the metadata item events/maintenance/history lists
  "a system reboot event that was canceled, and a system reboot event that was completed":
  Description "[Canceled] scheduled reboot" with State "canceled", "[Completed] scheduled
  reboot" with State "completed" (the active list's items have State "active").

A completed event may have ended days before the failure the text is about, and a canceled one
never happened: neither says the node is failing now.
"""

from __future__ import annotations

import re
from bisect import bisect_right

from correlator.explain.readers_gpu import ReadResult

_CODE = re.compile(
    r'"Code"\s*:\s*"(?:instance-reboot|system-reboot|system-maintenance|instance-retirement'
    r'|instance-stop)"'
)
_OVER = re.compile(
    r'"Description"\s*:\s*"\[(?:Canceled|Completed)\]|"State"\s*:\s*"(?:canceled|completed)"'
)
# the Description outside JSON (Get-EC2InstanceStatus's "Description  : ...", --output text):
# the retirement rule reads its documented text on any line
_DESCRIBED_OVER = re.compile(r"\[(?:Canceled|Completed)\]\s*The instance is running on degraded")


def _object_at(text: str, at: int) -> tuple[int, int] | None:
    """The span of the innermost JSON object around offset `at`, braces included."""
    start, end = text.rfind("{", 0, at), text.find("}", at)
    if start < 0 or end < 0 or "}" in text[start:at] or "{" in text[at:end]:
        return None
    return start, end + 1


def read_ec2_finished_events(lines: list[str]) -> ReadResult:
    """Claim the lines of every EC2 scheduled event that was canceled or completed; no event.

    A line is claimed only when every event object it touches is over, so an active event
    that a rejoined paste put on the same line is still read."""
    out = ReadResult()
    text = "\n".join(lines)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    over: set[int] = set()
    active: set[int] = set()
    for m in _CODE.finditer(text):
        span = _object_at(text, m.start())
        if span is None:
            continue
        first, last = (bisect_right(starts, at) - 1 for at in (span[0], span[1] - 1))
        touched = set(range(first, last + 1))
        (over if _OVER.search(text, *span) else active).update(touched)
    out.claimed = (over - active) | {i for i, ln in enumerate(lines) if _DESCRIBED_OVER.search(ln)}
    return out
