"""Probe set twenty-one: NVIDIA NVSentinel's health events on the Node as its connector writes them.

Read from NVIDIA/NVSentinel: platform-connectors/pkg/connectors/kubernetes/
process_node_events.go @227932c773f5 (constructHealthEventMessage: "ErrorCode:%s " per code,
"%s:%s " per impacted entity, the event's message, "Recommended Action=%s;"; a fatal event sets
the Node condition named by its check True with reason "<check>IsNotHealthy", a non-fatal one
records a Node event of that reason and of type <check>; healthy: "No Health Failures",
"<check>IsHealthy"); health-monitors/syslog-health-monitor/pkg/xid/xid_handler.go
@50d57315c537 (entities PCI and GPU, message "<mnemonic>; Resolution: <resolution>", the
decoded Xid as the error code). An Xid reads by the Xid catalog; the node is the Node the
condition or event is on. Never a corpus case.
"""

from __future__ import annotations

import json

import pytest

from correlator.explain import explain_text
from correlator.rules import xid_verdict

HOSTS = ("gpu-node-3", "ip-10-1-2-3.ec2.internal", "dgx-b200-07")
_TS = "Mon, 01 Jan 2024 10:00:00 +0000"
# (Xid, mnemonic, resolution) as the syslog monitor's catalog gives them
XIDS = (
    (79, "ROBUST_CHANNEL_GPU_HAS_FALLEN_OFF_THE_BUS", "RESTART_BM"),
    (48, "ROBUST_CHANNEL_GPU_ECC_DBE", "COMPONENT_RESET"),
    (119, "GSP_RPC_TIMEOUT", "COMPONENT_RESET"),
    (74, "NVLINK_ERROR", "CONTACT_SUPPORT"),
    (13, "ROBUST_CHANNEL_GR_EXCEPTION", "RESTART_APP"),
    (31, "ROBUST_CHANNEL_FIFO_ERROR_MMU_ERR_FLT", "RESTART_APP"),
)


def _message(code: str, entities: str, text: str, action: str) -> str:
    return f"ErrorCode:{code} {entities}{text} Recommended Action={action};"


def _views(host: str, check: str, message: str) -> dict[str, str]:
    reason = f"{check}IsNotHealthy"
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "involvedObject": {"kind": "Node", "name": host, "uid": host},
        "reason": reason,
        "message": message,
        "source": {"component": "syslog-health-monitor", "host": host},
        "type": check,
        "count": 1,
    }
    return {
        "describe": (
            f"Name:               {host}\n"
            "Roles:              <none>\n"
            "Taints:             <none>\n"
            "Conditions:\n"
            "  Type              Status  LastHeartbeatTime   LastTransitionTime   Reason"
            "                        Message\n"
            f"  {check}   True    {_TS}   {_TS}   {reason}   {message}\n"
        ),
        "get_events": (
            "LAST SEEN   TYPE      REASON       OBJECT            MESSAGE\n"
            f"2m          {check}   {reason}   node/{host}   {message}\n"
        ),
        "json": json.dumps(event) + "\n",
    }


def _xid_params() -> list[object]:
    out = []
    for n, (xid, mnemonic, action) in enumerate(XIDS):
        host = HOSTS[n % len(HOSTS)]
        entities = "PCI:0000:9b:00 " + (
            "GPU:GPU-8d2c6b6e-1f0a-4f7b-9d44-2f0f7a3b1c9e " if n % 2 else ""
        )
        msg = _message(str(xid), entities, f"{mnemonic}; Resolution: {action}", action)
        for view, text in _views(host, "SysLogsXIDError", msg).items():
            out.append(pytest.param(text, xid, host, id=f"xid{xid}-{view}"))
    return out


@pytest.mark.parametrize(("text", "xid", "node"), _xid_params())
def test_an_nvsentinel_xid_health_event_reads_by_the_xid_catalog_on_its_node(
    text: str, xid: int, node: str
) -> None:
    v = xid_verdict(xid)
    got = explain_text(text)
    want = (v.category.value if v.category else None, v.blame.value, node)
    assert (got.category, got.blame, got.node) == want, (text, got.explanation)


_OTHER = (
    (
        "SysLogsSXIDError",
        _message("12028", "NVSWITCH:0 ", "Non-fatal NVLink error", "RESTART_BM"),
        ("interconnect", "node"),
    ),
    (
        "SysLogsGPUFallenOff",
        _message("79", "PCI:0000:18:00 ", "GPU has fallen off the bus", "RESTART_BM"),
        ("gpu_hardware", "node"),
    ),
)


@pytest.mark.parametrize(("check", "message", "want"), _OTHER)
@pytest.mark.parametrize("view", ["describe", "get_events", "json"])
def test_an_nvsentinel_sxid_or_fallen_off_event_blames_its_node(
    check: str, message: str, want: tuple[str, str], view: str
) -> None:
    got = explain_text(_views(HOSTS[1], check, message)[view])
    assert (got.category, got.blame, got.node) == (*want, HOSTS[1]), got.explanation


def _healthy() -> list[object]:
    describe = (
        f"Name:               {HOSTS[0]}\n"
        "Roles:              <none>\n"
        "Taints:             <none>\n"
        "Conditions:\n"
        "  Type              Status  LastHeartbeatTime   LastTransitionTime   Reason"
        "                        Message\n"
        f"  SysLogsXIDError   False   {_TS}   {_TS}   SysLogsXIDErrorIsHealthy   "
        "No Health Failures\n"
        f"  SysLogsSXIDError  False   {_TS}   {_TS}   SysLogsSXIDErrorIsHealthy  "
        "No Health Failures\n"
    )
    quiet = _message(
        "63", "PCI:0000:9b:00 ", "INFOROM_DRAM_RETIREMENT_EVENT; Resolution: NONE", "NONE"
    )
    out: list[object] = [pytest.param(describe, id="conditions-false")]
    out += [
        pytest.param(t, id=f"action-none-{k}")
        for k, t in _views(HOSTS[2], "SysLogsXIDError", quiet).items()
    ]
    return out


@pytest.mark.parametrize("text", _healthy())
def test_nvsentinel_healthy_conditions_and_no_action_events_never_blame_the_node(
    text: str,
) -> None:
    got = explain_text(text)
    assert got.blame != "node", (text, got.explanation)
