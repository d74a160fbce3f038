"""Probe set twenty-three: AWS ParallelCluster's clustermgtd and slurm_resume, read as they say.

Read from aws/aws-parallelcluster-node @2e8f9a8e325d: src/slurm_plugin/clustermgtd.py
(_get_nodes_failing_health_check "Node %s(%s) is associated with instance %s that is failing
%s. EC2 health state: %s" for ec2_health_check / scheduled_events_check,
_handle_nodes_failing_health_check "Setting nodes failing health check type %s to DRAIN: %s",
_maintain_nodes "Found the following unhealthy static|dynamic nodes: %s",
_handle_bootstrap_failure_nodes, _set_ice_compute_resources_to_down "(Code:%s)Temporarily
disabling node due to insufficient capacity"); slurm_resources.py
(SlurmNode.__str__ "name(nodeaddr)", "Node state check: ...", "Node bootstrap error: ...",
EC2_ICE_ERROR_CODES); resume.py ("(Code:%s)Failure when resuming nodes", "No valid clustermgtd
heartbeat detected"); instance_manager.py ("Encountered exception when launching instances for
nodes %s: %s"); common.py print_with_count "(x%d) %s". The log format is
parallelcluster_clustermgtd_logging.conf's "%(asctime)s - [%(name)s:%(funcName)s] - %(levelname)s
- %(message)s" (slurm_resume adds " - %(process)d"). Never a corpus case.

Labels: a health-check failure, unhealthy state or bootstrap error of one named node is that
node's (node/node); an EC2 scheduled event is the cloud's maintenance (node/infra, on the named
instance); insufficient capacity is the cloud's (scheduler/infra), naming no node.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

# node names: {queue}-{st|dy}-{compute resource}-{n} (slurm_resources.parse_nodename)
NODES = (
    ("queue1-st-p4d24xlarge-1", "10.0.1.15"),
    ("gpu-dy-p5-12", "172.31.40.7"),
    ("train-st-g5-3", "10.2.128.44"),
    ("compute-dy-c5xlarge-2", "192.168.3.201"),
    ("q-st-p4de-17", "10.10.0.9"),
)
CM = "2024-03-11 09:42:17,385 - [slurm_plugin.clustermgtd:{func}] - {level} - "
RESUME = "2024-03-11 09:42:20,101 - 3117 - [slurm_plugin.resume:{func}] - {level} - "
IMPAIRED = (
    "['{iid}', 'running', {{'Details': [{{'ImpairedSince': datetime.datetime(2024, 3, 11, 9, 30, "
    "tzinfo=tzutc()), 'Name': 'reachability', 'Status': 'failed'}}], 'Status': 'impaired'}}, "
    "{{'Details': [{{'Name': 'reachability', 'Status': 'passed'}}], 'Status': 'ok'}}, []]"
)
SCHEDULED = (
    "['{iid}', 'running', {{'Details': [{{'Name': 'reachability', 'Status': 'passed'}}], "
    "'Status': 'ok'}}, {{'Details': [{{'Name': 'reachability', 'Status': 'passed'}}], 'Status': "
    "'ok'}}, [{{'Code': '{code}', 'Description': 'The instance is scheduled for {what}', "
    "'NotBefore': datetime.datetime(2024, 3, 14, 0, 0, tzinfo=tzutc())}}]]"
)
EVENT_CODES = (
    ("instance-retirement", "retirement"),
    ("system-reboot", "a reboot"),
    ("system-maintenance", "maintenance"),
    ("instance-reboot", "a reboot"),
    ("instance-stop", "stopping"),
)
NODE = ("node", "node")
MAINT = ("node", "infra")
ICE = ("scheduler", "infra")


def _iid(k: int) -> str:
    return f"i-0{k}a1b2c3d4e5f6{k:03d}"


def _health_check(k: int, check: str) -> str:
    name, ip = NODES[k]
    if check == "ec2_health_check":
        state = IMPAIRED.format(iid=_iid(k))
    else:
        code, what = EVENT_CODES[k]
        state = SCHEDULED.format(iid=_iid(k), code=code, what=what)
    head = CM.format(func="_get_nodes_failing_health_check", level="WARNING")
    return (
        f"{head}Node {name}({ip}) is associated with instance {_iid(k)} that is failing "
        f"{check}. EC2 health state: {state}\n"
    )


@pytest.mark.parametrize(
    ("check", "want"), [("ec2_health_check", NODE), ("scheduled_events_check", MAINT)]
)
@pytest.mark.parametrize("k", range(len(NODES)))
def test_an_instance_failing_a_health_check_is_read_by_its_check_on_the_named_node(
    check: str, want: tuple[str, str], k: int
) -> None:
    text = _health_check(k, check)
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, NODES[k][0]), (text, got.explanation)


@pytest.mark.parametrize(
    ("check", "want"), [("ec2_health_check", NODE), ("scheduled_events_check", MAINT)]
)
@pytest.mark.parametrize("k", range(len(NODES)))
def test_draining_one_node_for_a_failed_health_check_names_it(
    check: str, want: tuple[str, str], k: int
) -> None:
    head = CM.format(func="_handle_nodes_failing_health_check", level="WARNING")
    text = f"{head}Setting nodes failing health check type {check} to DRAIN: {{'{NODES[k][0]}'}}\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, NODES[k][0]), (text, got.explanation)


@pytest.mark.parametrize("check", ["ec2_health_check", "scheduled_events_check"])
def test_draining_several_nodes_for_a_health_check_names_none_of_them(check: str) -> None:
    names = ", ".join(f"'{n}'" for n, _ in NODES[:3])
    head = CM.format(func="_handle_nodes_failing_health_check", level="WARNING")
    text = f"{head}Setting nodes failing health check type {check} to DRAIN: {{{names}}}\n"
    got = explain_text(text)
    want = NODE if check == "ec2_health_check" else MAINT
    assert (got.category, got.blame, got.node) == (*want, None), (text, got.explanation)


# slurm_resources.py's warnings about one node (SlurmNode.__str__ is "name(nodeaddr)")
NODE_LINES = (
    "Node state check: node {name}({ip}) in DOWN, node state: DOWN+CLOUD+NOT_RESPONDING",
    "Node state check: node {name}({ip}) in DRAINED, node state: IDLE+CLOUD+DRAIN",
    "Node state check: no corresponding instance in EC2 for node {name}({ip}), node state: "
    "ALLOCATED+CLOUD",
    "EC2 instance availability for node {name} has timed out.",
    "Node bootstrap error: Node {name}({ip}) is currently in replacement and no backing instance, "
    "node state: DOWN+CLOUD",
    "Node bootstrap error: Replacement timeout expires for node {name}({ip}) in replacement, "
    "node state: DOWN+CLOUD+NOT_RESPONDING",
    "Node bootstrap error: Node {name}({ip}) failed during bootstrap when performing health check, "
    "node state: IDLE+CLOUD",
    "Node bootstrap error: Node {name}({ip}) is in power up state without valid backing instance, "
    "node state: MIXED+CLOUD+POWERING_UP",
    "Node bootstrap error: Resume timeout expires for node {name}({ip}), node state: "
    "DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING",
    "Node bootstrap error: Node {name}({ip}) failed to register to the Slurm management daemon, "
    "node state: DOWN+CLOUD+INVALID_REG",
)


@pytest.mark.parametrize("line", NODE_LINES)
@pytest.mark.parametrize("k", [0, 1, 4])
def test_an_unhealthy_or_failed_bootstrap_node_is_the_named_nodes_fault(line: str, k: int) -> None:
    name, ip = NODES[k]
    head = CM.format(func="_find_unhealthy_slurm_nodes", level="WARNING")
    text = head + line.format(name=name, ip=ip) + "\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*NODE, name), (text, got.explanation)


LISTS = (
    "Found the following unhealthy static nodes: {nodes}",
    "Found the following unhealthy dynamic nodes: {nodes}",
    "Found the following bootstrap failure nodes: {nodes}",
)


def _with_count(nodes: tuple[tuple[str, str], ...]) -> str:
    return f"(x{len(nodes)}) " + str([f"{n}({ip})" for n, ip in nodes])


@pytest.mark.parametrize("line", LISTS)
@pytest.mark.parametrize("k", range(len(NODES)))
def test_one_unhealthy_node_found_by_clustermgtd_is_named(line: str, k: int) -> None:
    head = CM.format(func="_maintain_nodes", level="INFO")
    text = head + line.format(nodes=_with_count((NODES[k],))) + "\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*NODE, NODES[k][0]), (text, got.explanation)


@pytest.mark.parametrize("line", LISTS)
def test_several_unhealthy_nodes_found_by_clustermgtd_name_none(line: str) -> None:
    head = CM.format(func="_maintain_nodes", level="INFO")
    text = head + line.format(nodes=_with_count(NODES[:3])) + "\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*NODE, None), (text, got.explanation)


ICE_CODES = (
    "InsufficientInstanceCapacity",
    "InsufficientHostCapacity",
    "InsufficientReservedInstanceCapacity",
    "MaxSpotInstanceCountExceeded",
    "SpotMaxPriceTooLow",
)
ICE_LINES = (
    RESUME.format(func="_handle_failed_nodes", level="INFO")
    + "Setting following failed nodes into DOWN state (x1) ['{name}'] with reason: "
    "(Code:{code})Failure when resuming nodes",
    # the reason as sinfo -R / scontrol show node print it afterwards
    "{name}  Reason=(Code:{code})Failure when resuming nodes [root@2024-03-11T09:42:21]",
    "   Reason=(Code:{code})Temporarily disabling node due to insufficient capacity "
    "[root@2024-03-11T09:45:00]",
    RESUME.format(func="_launch_instances", level="ERROR")
    + "Encountered exception when launching instances for nodes (x1) ['{name}']: An error "
    "occurred ({code}) when calling the CreateFleet operation: We currently do not have "
    "sufficient p5.48xlarge capacity in the Availability Zone you requested (us-east-1a).",
)


@pytest.mark.parametrize("line", ICE_LINES)
@pytest.mark.parametrize("k", range(len(ICE_CODES)))
def test_insufficient_capacity_is_the_clouds_and_names_no_node(line: str, k: int) -> None:
    text = line.format(name=NODES[k][0], code=ICE_CODES[k]) + "\n"
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*ICE, None), (text, got.explanation)


def test_a_down_clustermgtd_is_the_clusters_not_a_nodes() -> None:
    head = RESUME.format(func="_resume", level="ERROR")
    text = (
        f"{head}No valid clustermgtd heartbeat detected, clustermgtd is down!\n"
        "Please check clustermgtd log for error.\n"
        "Not launching nodes queue1-dy-p4d24xlarge-[1-4]\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("scheduler", "infra", None), got.explanation


# clustermgtd's routine lines: nothing failed
HEALTHY = (
    CM.format(func="manage_cluster", level="INFO") + "Performing instance health check actions",
    CM.format(func="_get_nodes_failing_health_check", level="INFO")
    + "Performing actions for health check type: ec2_health_check",
    CM.format(func="_maintain_nodes", level="INFO")
    + "Following nodes are currently in replacement: (x0) []",
    CM.format(func="_handle_nodes_failing_health_check", level="INFO")
    + "Ignoring health check failure due to reboot for nodes: {'queue1-st-p4d24xlarge-1'}",
    CM.format(func="_handle_successfully_launched_nodes", level="INFO")
    + "Find successfully launched node in partition queue1, reset partition protected failure "
    "count",
    RESUME.format(func="_resume", level="INFO")
    + "Successfully launched nodes (x2) ['gpu-dy-p5-1', 'gpu-dy-p5-2']",
    RESUME.format(func="_resume", level="INFO")
    + "Launching EC2 instances for the following Slurm nodes: gpu-dy-p5-[1-2]",
    RESUME.format(func="_resume", level="INFO")
    + "Current state of Slurm nodes to resume: [('gpu-dy-p5-1', 'MIXED+CLOUD+NOT_RESPONDING"
    "+POWERING_UP')]",
    "   Reason=Enabling node since insufficient capacity timeout expired "
    "[root@2024-03-11T10:00:00]",
)


@pytest.mark.parametrize("line", HEALTHY)
def test_routine_clustermgtd_lines_show_nothing(line: str) -> None:
    got = explain_text(line + "\n")
    assert (got.category, got.blame) == (None, "unknown"), (line, got.explanation)


def test_a_users_exit_code_on_a_parallelcluster_node_never_blames_the_node() -> None:
    text = (
        CM.format(func="_maintain_nodes", level="INFO")
        + "Following nodes are currently in replacement: (x0) []\n"
        "srun: error: gpu-dy-p5-12: task 0: Exited with exit code 1\n"
        "Traceback (most recent call last):\n"
        '  File "train.py", line 12, in <module>\n'
        "KeyError: 'lr'\n"
    )
    got = explain_text(text)
    assert got.blame == "job", got.explanation


# the Slurm reasons clustermgtd sets, as scontrol show node and sinfo -R print them
REASONS = (
    ("Node failing ec2_health_check", NODE),
    ("Node failing scheduled_events_check", MAINT),
    ("Scheduler health check failed", NODE),
    ("Static node maintenance: unhealthy node is being replaced", NODE),
)


@pytest.mark.parametrize(("reason", "want"), REASONS)
@pytest.mark.parametrize("k", [0, 2, 4])
def test_a_clustermgtd_reason_in_scontrol_show_node_is_read_on_that_node(
    reason: str, want: tuple[str, str], k: int
) -> None:
    name, ip = NODES[k]
    text = (
        f"NodeName={name} Arch=x86_64 CoresPerSocket=1\n"
        f"   NodeAddr={ip} NodeHostName={name} Version=23.02.7\n"
        "   State=DOWN+CLOUD+DRAIN ThreadsPerCore=2\n"
        "   Partitions=queue1\n"
        f"   Reason={reason} [root@2024-03-11T09:42:21]\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, name), (text, got.explanation)


@pytest.mark.parametrize(("reason", "want"), REASONS)
@pytest.mark.parametrize("k", [1, 3])
def test_a_clustermgtd_reason_in_sinfo_r_is_read_on_its_node(
    reason: str, want: tuple[str, str], k: int
) -> None:
    name = NODES[k][0]
    text = (
        "REASON                                               USER      TIMESTAMP           "
        "NODELIST\n"
        f"{reason:<52} root      2024-03-11T09:42:21 {name}\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, name), (text, got.explanation)
