"""Round thirteen: Open MPI's openib work-completion errors, `rdma link` ports down, scontrol's
JobState= and Cloud Logging records' hosts. Every line is built from the emitter's own format
string (cited in correlator/rules/emitters/*.json, correlator/explain/hosts.py and
correlator/explain/readers_scontrol.py) with made-up values, never a corpus case."""

from __future__ import annotations

import json

import pytest

from correlator.explain import explain_text

# --- Open MPI openib handle_wc: BTL_PEER_ERROR "%s[%s:%d:%s] from %s " + "to: %s " + "error
# polling %s with status %s status number %d for wr_id ... vendor error %d qp_idx %d" --------

# btl_openib_component_status_to_string: (text, IBV_WC_* number)
OPENIB_STATUSES = [
    ("WORK REQUEST FLUSHED ERROR", 5),
    ("LOCAL PROTOCOL ERROR", 4),
    ("LOCAL QP OPERATION ERROR", 2),
    ("REMOTE ACCESS ERROR", 10),
    ("REMOTE OPERATION ERROR", 11),
    ("RETRY EXCEEDED ERROR", 12),
    ("RECEIVER NOT READY RETRY EXCEEDED ERROR", 13),
    ("GENERAL ERROR", 21),
]


def _openib(local: str, peer: str | None, status: str, num: int, cq: str, gap: str) -> str:
    head = f"[[4711,1],3][btl_openib_component.c:3701:handle_wc] from {local} "
    to = f"to: {peer} " if peer else ""
    return (
        f"{head}{to}error polling {cq} with status {status}{gap}status number {num} "
        f"for wr_id 7f3a1c00 opcode 128  vendor error 129 qp_idx 2"
    )


@pytest.mark.parametrize(("status", "num"), OPENIB_STATUSES)
@pytest.mark.parametrize(
    ("local", "peer", "cq", "gap"),
    [
        ("gpu-node-07", "gpu-node-12", "HP CQ", " "),
        ("cn0421.cluster", None, "LP CQ", ""),  # no peer known; v4's missing space
        ("node3", "node3", "HP CQ", " "),  # a loopback pair: both ends one host
    ],
)
def test_openib_error_completion_is_pinned_to_the_polling_host(
    status: str, num: int, local: str, peer: str | None, cq: str, gap: str
) -> None:
    got = explain_text(_openib(local, peer, status, num, cq, gap))
    # RETRY EXCEEDED / REMOTE ... point past this HCA, but one line cannot tell the peer from
    # the path to it: the polling host is the culprit, as for NCCL's completion errors
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", local)


def test_openib_v5_peer_prefix_names_the_leading_host() -> None:
    line = (
        "[gpu-a][[4711,1],0][btl_openib_component.c:3701:handle_wc] peer: gpu-b "
        "error polling LP CQ with status RETRY EXCEEDED ERRORstatus number 12 for wr_id 1 "
        "opcode 0  vendor error 129 qp_idx 0"
    )
    got = explain_text(line)
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", "gpu-a")


def test_openib_errors_from_several_hosts_against_one_peer_name_that_peer() -> None:
    text = "\n".join(
        _openib(h, "gpu-node-09", "RETRY EXCEEDED ERROR", 12, "HP CQ", " ")
        for h in ("gpu-node-01", "gpu-node-02")
    )
    got = explain_text(text)
    assert (got.category, got.blame) == ("interconnect", "infra")
    assert got.node == "gpu-node-09"


# --- iproute2 `rdma link`: "link %s/%u " ... "state %s " "physical_state %s " ["netdev %s "] --

DOWN_PHYS = ["POLLING", "DISABLED", "LINK_ERROR_RECOVER"]
FINE = [("ACTIVE", "LINK_UP"), ("INIT", "LINK_UP"), ("ARMED", "LINK_UP")]


def _rdma_link(dev: str, state: str, phys: str, *, old: bool = False, json: bool = False) -> str:
    if json:
        return (
            f'[{{"ifindex":3,"ifname":"{dev}","port":1,"subnet_prefix":"fe80:0000:0000:0000",'
            f'"lid":17,"sm_lid":1,"lmc":0,"state":"{state}","physical_state":"{phys}"}}]'
        )
    head = f"3/1: {dev}/1: " if old else f"link {dev}/1 "
    return (
        f"{head}subnet_prefix fe80:0000:0000:0000 lid 17 sm_lid 1 lmc 0 "
        f"state {state} physical_state {phys} netdev ib2 "
    )


@pytest.mark.parametrize("phys", DOWN_PHYS)
@pytest.mark.parametrize("dev", ["mlx5_0", "mlx5_11", "ibp65s0"])
@pytest.mark.parametrize("form", ["text", "old", "json"])
def test_rdma_link_down_without_a_link_is_an_ib_port_fault(dev: str, phys: str, form: str) -> None:
    got = explain_text(_rdma_link(dev, "DOWN", phys, old=form == "old", json=form == "json"))
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", None)


def test_rdma_link_down_is_pinned_to_the_prompts_host() -> None:
    text = "[root@gpu-node-05 ~]# rdma link\n" + _rdma_link("mlx5_3", "DOWN", "POLLING")
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("interconnect", "infra", "gpu-node-05")


@pytest.mark.parametrize(("state", "phys"), FINE)
@pytest.mark.parametrize("form", ["text", "json"])
def test_rdma_link_with_the_link_up_is_nothing_to_explain(state: str, phys: str, form: str) -> None:
    assert explain_text(_rdma_link("mlx5_0", state, phys, json=form == "json")).category is None


# --- scontrol show job: "JobState=%s Reason=%s Dependency=%s", "ExitCode=%u:%u" ---------------

# job_state_string's words, with a reason and exit code scontrol prints beside them
SCONTROL_STATES = [
    ("TIMEOUT", "None", "0:15"),
    ("NODE_FAIL", "None", "0:0"),
    ("OUT_OF_MEMORY", "OutOfMemory", "0:125"),
    ("FAILED", "NonZeroExitCode", "1:0"),
    ("FAILED", "None", "0:9"),
    ("CANCELLED", "None", "0:15"),
    ("PREEMPTED", "None", "0:15"),
    ("BOOT_FAIL", "None", "0:0"),
    ("DEADLINE", "DeadLine", "0:0"),
    ("REQUEUED", "launch_failed_requeued_held", "0:0"),
]


def _scontrol(state: str, reason: str, exit_code: str, node: str, *, one_line: bool) -> str:
    fields = [
        "JobId=4242 JobName=train.sh",
        "UserId=alice(1000) GroupId=alice(1000) MCS_label=N/A",
        f"JobState={state} Reason={reason} Dependency=(null)",
        f"Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode={exit_code}",
        f"NodeList={node}",
    ]
    return " ".join(fields) if one_line else "\n".join("   " + f for f in fields)


def _sacct(state: str, reason: str, exit_code: str, node: str) -> str:
    cut = state[:9] + "+" if len(state) > 10 else state  # sacct's 10-wide State column
    return "\n".join(
        [
            "JobID           State ExitCode        NodeList     Reason",
            "------------ ---------- -------- --------------- ----------",
            f"4242         {cut} {exit_code} {node} {reason}",
        ]
    )


@pytest.mark.parametrize(("state", "reason", "exit_code"), SCONTROL_STATES)
@pytest.mark.parametrize("one_line", [False, True])
def test_scontrol_job_state_reads_as_sacct_reads_the_same_state(
    state: str, reason: str, exit_code: str, one_line: bool
) -> None:
    got = explain_text(_scontrol(state, reason, exit_code, "gpu-node-3", one_line=one_line))
    want = explain_text(_sacct(state, reason, exit_code, "gpu-node-3"))
    assert want.category is not None
    assert (got.category, got.blame, got.node) == (want.category, want.blame, want.node)


def test_scontrol_timeout_is_the_jobs_own_time_limit() -> None:
    got = explain_text("$ scontrol show job 26\nJobState=TIMEOUT Reason=None\nExitCode=0:0")
    assert (got.category, got.blame, got.node) == ("scheduler", "job", None)


@pytest.mark.parametrize("state", ["COMPLETED", "RUNNING", "PENDING"])
def test_scontrol_job_that_is_fine_is_nothing_to_explain(state: str) -> None:
    text = _scontrol(state, "None", "0:0", "gpu-node-3", one_line=False)
    assert explain_text(text).category is None


# --- Cloud Logging LogEntry: "labels" {"compute.googleapis.com/resource_name"}, "resource" -----

KERNEL_OOM = "[  123.456789] python3 invoked oom-killer: gfp_mask=0x100cca(GFP_HIGHUSER_MOVABLE)"


def _entry(resource: dict[str, object], labels: dict[str, str], *, pretty: bool) -> str:
    rec = {
        "textPayload": KERNEL_OOM + "\r\n",
        "insertId": "1a2b",
        "resource": resource,
        "timestamp": "2024-05-01T10:00:00.000000Z",
        "labels": labels,
        "logName": "projects/p/logs/serialconsole.googleapis.com%2Fserial_port_1_output",
    }
    return json.dumps([rec], indent=2) if pretty else json.dumps(rec)


GCE = {"type": "gce_instance", "labels": {"instance_id": "4616395539098064229", "zone": "z"}}
K8S_NODE = {"type": "k8s_node", "labels": {"cluster_name": "c", "node_name": "gke-c-pool-7f2a"}}


@pytest.mark.parametrize("pretty", [True, False])
@pytest.mark.parametrize(
    ("resource", "labels", "node"),
    [
        (GCE, {"compute.googleapis.com/resource_name": "gke-c-pool-1-9x2d"}, "gke-c-pool-1-9x2d"),
        (K8S_NODE, {}, "gke-c-pool-7f2a"),
        (GCE, {}, None),  # instance_id is a number, not a host
    ],
)
def test_a_cloud_logging_record_names_its_node(
    resource: dict[str, object], labels: dict[str, str], node: str | None, pretty: bool
) -> None:
    got = explain_text(_entry(resource, labels, pretty=pretty))
    assert (got.category, got.blame, got.node) == ("oom_host", "job", node)
