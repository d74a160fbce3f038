"""Recognizers for host-side kernel messages on GPU nodes: PCIe AER and the OOM killer."""

from __future__ import annotations

import re
from typing import Any

from collector.parse.kernel_rules import Match
from timeline.models import EventKind, Severity

_DEV = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]"

# --- PCIe AER -------------------------------------------------------------------------------

_AER_LINE = re.compile(r"^(?P<drv>[\w.-]+) (?P<dev>" + _DEV + r"): (?P<aer>AER: ?)?(?P<rest>.*)$")
_AER_RECEIVED = re.compile(
    r"(?P<sev>Multiple )?(?P<what>Corrected|Correctable|Uncorrected|Uncorrectable)"
    r"(?: \((?P<fatal>Fatal|Non-Fatal)\))? error(?: message)? received(?: from|:)\s*"
    r"(?:(?P<src>" + _DEV + r")|id=(?P<id>[0-9a-fA-F]+))"
)
_AER_BUS = re.compile(
    # from the first 'PCIe Bus Error: severity=' after a ',' (or the start) only: a later one
    # before the next ',' reads the same severity and type, so it matches only when the first
    # does (retrying each of a line repeating it was quadratic)
    r"(?<![^,])(?>[^,]*?PCIe Bus Error: severity=)(?P<sev>[^,]+), type=(?P<type>[^,]+),\s*"
    r"(?:id=(?P<id>[0-9a-fA-F]+))?\(?(?P<agent>[\w ]+ ID)?\)?"
)
_AER_STATUS = re.compile(
    r"device \[(?P<vd>[0-9a-fA-F]{4}:[0-9a-fA-F]{4})\] error status/mask=(?P<st>[0-9a-fA-F]+)/"
    r"(?P<mask>[0-9a-fA-F]+)"
)
_AER_BIT = re.compile(r"^\[\s*(?P<bit>\d+)\s*\] (?P<name>\w+)\s*(?P<first>\(First\))?")
_AER_OUTCOME = re.compile(r"can't recover|recovery failed|link has been reset|Root Port link", re.I)
# aer_probe's pci_info(port, "enabled with IRQ %d\n") under pr_fmt "AER: " (torvalds/linux
# drivers/pci/pcie/aer.c @d83d886e69): the service starting at boot, no error
_AER_SETUP = re.compile(r"enabled with IRQ \d+\s*$")


def _aer_severity(text: str) -> Severity:
    low = text.lower()
    if "non-fatal" in low:
        return Severity.ERROR
    if "fatal" in low:
        return Severity.CRITICAL
    if "uncorrect" in low:
        return Severity.ERROR
    return Severity.WARNING


def aer(msg: str) -> Match | None:
    """PCIe Advanced Error Reporting lines of a port or device (`pcieport`, `nvidia`, ...)."""
    m = _AER_LINE.match(msg)
    if not m:
        return None
    rest, dev = m["rest"].strip(), m["dev"]
    payload: dict[str, Any] = {"reporter": dev, "driver": m["drv"], "text": rest}
    pci = dev
    sev = Severity.WARNING
    if r := _AER_RECEIVED.search(rest):
        sev = _aer_severity(r.group(0))
        payload["multiple"] = bool(r["sev"])
        if r["src"]:
            pci = r["src"]
            payload["source"] = r["src"]
        if r["id"]:
            payload["requester_id"] = r["id"]
    elif b := _AER_BUS.search(rest):
        sev = _aer_severity(b["sev"])
        payload.update(detail=True, aer_severity=b["sev"].strip(), aer_type=b["type"].strip())
        if b["agent"]:
            payload["agent"] = b["agent"].strip()
    elif s := _AER_STATUS.search(rest):
        payload.update(detail=True, vendor_device=s["vd"], status=s["st"], mask=s["mask"])
    elif bit := _AER_BIT.match(rest):
        payload.update(
            detail=True, bit=int(bit["bit"]), error=bit["name"], first=bool(bit["first"])
        )
    elif not m["aer"] or _AER_SETUP.match(rest):
        return None
    elif _AER_OUTCOME.search(rest):
        sev = Severity.ERROR
    else:
        payload["detail"] = True  # "TLP Header: ...", "aer_status: ...", other follow-on lines
    return Match(EventKind.PCIE_AER, f"{m['drv']} {dev}: AER: {rest}", None, sev, pci, payload)


# --- OOM killer -----------------------------------------------------------------------------

_INVOKED = re.compile(
    r"^(?P<task>.+?) invoked oom-killer: gfp_mask=(?P<gfp>\S+?)(?:\([^)]*\))?,"
    r" order=(?P<order>-?\d+), oom_score_adj=(?P<adj>-?\d+)"
)
_OOM_KILL = re.compile(r"^oom-kill:(?P<kv>.*)$")
_KILLED = re.compile(
    r"^(?P<scope>Memory cgroup out of memory|Out of memory(?: \([^)]*\))?): Kill(?:ed)? process "
    r"(?P<pid>\d+) \((?P<task>[^)]*)\)(?P<rest>.*)$"
)
_TASK_IN = re.compile(r"^Task in (?P<memcg>\S+) killed as a result of limit of (?P<limit>\S+)")
_MEMCG_STATS = re.compile(r"^Memory cgroup stats for (?P<memcg>\S+?):?$")
_REAPED = re.compile(r"^oom_reaper: reaped process (?P<pid>\d+) \((?P<task>[^)]*)\)")
_KB = re.compile(r"(?P<k>total-vm|anon-rss|file-rss|shmem-rss|pgtables):(?P<v>\d+)kB")
_JOB = re.compile(r"/job_(?P<job>\d+)")
_POD = re.compile(
    r"pod(?P<uid>[0-9a-f]{8}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{4}[-_][0-9a-f]{12})"
)


def cgroup_fields(path: str) -> dict[str, Any]:
    """Slurm job id or Kubernetes pod UID named by a cgroup path, when it names one."""
    out: dict[str, Any] = {}
    if j := _JOB.search(path):
        out["job_id"] = j["job"]
    if p := _POD.search(path):
        out["pod_uid"] = p["uid"].replace("_", "-")
    return out


def oom(msg: str) -> Match | None:
    """The kernel OOM killer's lines: invoked, oom-kill constraint, Killed process, reaped."""
    payload: dict[str, Any] = {}
    if m := _INVOKED.match(msg):
        payload.update(
            stage="invoked",
            invoked_by=m["task"],  # the allocating task, not necessarily the one killed
            gfp_mask=m["gfp"],
            order=int(m["order"]),
            oom_score_adj=int(m["adj"]),
        )
    elif m := _OOM_KILL.match(msg):
        kv = dict(p.split("=", 1) for p in m["kv"].split(",") if "=" in p)
        payload.update(stage="oom_kill", constraint=kv.get("constraint"), task=kv.get("task"))
        for key in ("oom_memcg", "task_memcg", "cpuset"):
            if kv.get(key):
                payload[key] = kv[key]
        for key in ("pid", "uid"):
            if kv.get(key, "").isdigit():
                payload[key] = int(kv[key])
        payload.update(cgroup_fields(kv.get("task_memcg") or kv.get("oom_memcg") or ""))
    elif m := _KILLED.match(msg):
        payload.update(stage="killed", scope=m["scope"], pid=int(m["pid"]), task=m["task"])
        payload.update(
            {k.group("k").replace("-", "_") + "_kb": int(k["v"]) for k in _KB.finditer(m["rest"])}
        )
        if uid := re.search(r"UID:(\d+)", m["rest"]):
            payload["uid"] = int(uid.group(1))
    elif m := _TASK_IN.match(msg):
        payload.update(stage="task_in", task_memcg=m["memcg"], oom_memcg=m["limit"])
        payload.update(cgroup_fields(m["memcg"]))
    elif m := _MEMCG_STATS.match(msg):
        payload.update(stage="memcg_stats", oom_memcg=m["memcg"], **cgroup_fields(m["memcg"]))
    elif m := _REAPED.match(msg):
        payload.update(stage="reaped", pid=int(m["pid"]), task=m["task"])
    else:
        return None
    payload["text"] = msg
    return Match(EventKind.HOST_OOM, msg, None, Severity.ERROR, None, payload)
