"""Probe set thirteen (issue #11): the culprit node when a failure line arrives through a tool that
collects output from many nodes at once.

Each delivery is built from the tool's own format (cited in correlator/explain/hosts_blocks.py):
ClusterShell's `clush -b` / `clubak -b` gathered blocks (Display.py format_header, colour
included), `clush` without -b ("node: " per line), Ansible's ad-hoc output (minimal.py: "host |
FAILED | rc=1 >>" and "host | FAILED! => {...}" with indent=4) and playbook output (default.py:
"fatal: [host]: FAILED! => {...}"), and parallel-ssh's `pssh -i` report (task.py Task.report).
Every failure line comes from an existing rule family and must read as it reads alone; the node
is the one the block or prefix names, a block of several nodes naming none.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS

# (failure line, (category, blame) as the line alone reads)
FAILURES: dict[str, tuple[str, tuple[str, str]]] = {
    "xid79": (
        "[ 4211.103317] NVRM: Xid (PCI:0000:3b:00): 79, pid=12345, name=python, GPU has fallen "
        "off the bus.",
        ("gpu_hardware", "node"),
    ),
    "xid48": (
        "[ 5120.551201] NVRM: Xid (PCI:0000:b7:00): 48, pid=2231, name=python3, An uncorrectable "
        "double bit error (DBE) has been detected on GPU in the framebuffer at partition 6, "
        "subpartition 0.",
        ("gpu_hardware", "node"),
    ),
    "illegal_address": (
        "RuntimeError: CUDA error: an illegal memory access was encountered",
        ("user_code", "job"),
    ),
    "oom_kill": (
        "[ 9012.772001] Out of memory: Killed process 48213 (python) total-vm:812345612kB, "
        "anon-rss:503316480kB, file-rss:0kB, shmem-rss:0kB, UID:1000 pgtables:990000kB "
        "oom_score_adj:0",
        ("oom_host", "job"),
    ),
    "cuda_oom": (
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a "
        "total capacity of 79.15 GiB of which 1.02 GiB is free.",
        ("oom_gpu", "job"),
    ),
}

_SEP = "-" * 15
_OTHER = "gpu-z-99"  # a healthy node whose block comes first


def clush_b(host: str, line: str) -> str:
    # a healthy block of several nodes, then the failing node's own block
    return (
        f"{_SEP}\ngpu-z-[90-98] (9)\n{_SEP}\n 10:00:01 up 3 days,  2:11,  0 users\n"
        f"{_SEP}\n{host}\n{_SEP}\n{line}\n"
    )


def clush_b_colour(host: str, line: str) -> str:
    # Display.COLOR_STDOUT_FMT "\033[34m%s\033[0m" around the whole header
    return (
        f"\x1b[34m{_SEP}\n{host}\n{_SEP}\x1b[0m\n{line}\n"
        f"\x1b[34m{_SEP}\n{_OTHER}\n{_SEP}\x1b[0m\nok\n"
    )


def clubak_b_count_one(host: str, line: str) -> str:
    # older ClusterShell printed the node count for one node too: "gpu-07 (1)"
    return f"{_SEP}\n{host} (1)\n{_SEP}\n{line}\n{_SEP}\n{_OTHER} (1)\n{_SEP}\nok\n"


def clush_prefix(host: str, line: str) -> str:
    # clush without -b: Display.print_line's "node: " in front of every line
    return f"{_OTHER}: ok\n{host}: {line}\n{host}: done\n"


def ansible_rc(host: str, line: str) -> str:
    return (
        f"{_OTHER} | CHANGED | rc=0 >>\nok\n"
        f"{host} | FAILED | rc=1 >>\n{line}\nnon-zero return code\n"
    )


def ansible_json(host: str, line: str) -> str:
    result = {
        "changed": True,
        "msg": "non-zero return code",
        "rc": 1,
        "stderr": line,
        "stderr_lines": [line],
        "stdout": "",
        "stdout_lines": [],
    }
    return (
        f'{_OTHER} | SUCCESS => {{\n    "changed": false,\n    "ping": "pong"\n}}\n'
        f"{host} | FAILED! => {json.dumps(result, indent=4)}\n"
    )


def ansible_playbook(host: str, line: str) -> str:
    result = {
        "changed": True,
        "cmd": "dmesg | tail -n 1",
        "rc": 1,
        "stderr": "",
        "stdout": line,
        "stdout_lines": [line],
    }
    return (
        "TASK [check gpus] **************************************************************\n"
        f"ok: [{_OTHER}]\n"
        f"fatal: [{host}]: FAILED! => {json.dumps(result)}\n"
        "\nPLAY RECAP *********************************************************************\n"
        f"{host:<26} : ok=1    changed=0    unreachable=0    failed=1    skipped=0\n"
    )


def pssh_stderr(host: str, line: str) -> str:
    return (
        f"[1] 10:00:00 [SUCCESS] {_OTHER}\nok\n"
        f"[2] 10:00:01 [FAILURE] {host} Exited with error code 1\nStderr: {line}\n"
    )


def pssh_stdout_user_port(host: str, line: str) -> str:
    # pretty_host "user@host:port" where -l / host:port were given
    return (
        f"[1] 10:00:01 [FAILURE] root@{host}:2222 Exited with error code 1\n{line}\n"
        f"[2] 10:00:02 [SUCCESS] root@{_OTHER}:2222\nok\n"
    )


DELIVERIES: dict[str, Callable[[str, str], str]] = {
    f.__name__: f
    for f in (
        clush_b,
        clush_b_colour,
        clubak_b_count_one,
        clush_prefix,
        ansible_rc,
        ansible_json,
        ansible_playbook,
        pssh_stderr,
        pssh_stdout_user_port,
    )
}


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("failure", list(FAILURES))
@pytest.mark.parametrize("delivery", list(DELIVERIES))
def test_a_failure_in_a_hosts_block_names_that_host(delivery: str, failure: str, host: str) -> None:
    line, want = FAILURES[failure]
    assert _verdict(line)[:2] == want  # the failure alone reads so
    text = DELIVERIES[delivery](host, line)
    assert _verdict(text) == (*want, host), text


@pytest.mark.parametrize("nodeset", ["gpu-a-[01-03] (3)", "gpu-a-01,gpu-b-07 (2)", "@gpus (8)"])
@pytest.mark.parametrize("failure", list(FAILURES))
def test_a_block_of_several_nodes_names_none(nodeset: str, failure: str) -> None:
    # the same output on several nodes: no one node is the culprit; neither the login host
    # that ran clush nor a healthy node's own block is
    line, want = FAILURES[failure]
    text = (
        "[root@login-01 ~]# clush -b -w @gpus 'dmesg | tail -n 1'\n"
        f"{_SEP}\n{_OTHER}\n{_SEP}\n 10:00:01 up 3 days,  2:11,  0 users\n"
        f"{_SEP}\n{nodeset}\n{_SEP}\n{line}\n"
    )
    assert _verdict(text) == (*want, None)


@pytest.mark.parametrize("launcher", ["pdsh -w gpu-a-[01-03]", "pssh -i -h gpus", "ansible gpus"])
def test_the_login_host_that_fans_out_is_not_the_culprit(launcher: str) -> None:
    line, want = FAILURES["xid79"]
    text = f"[root@login-01 ~]# {launcher} 'dmesg'\n{_SEP}\ngpu-a-[01-03] (3)\n{_SEP}\n{line}\n"
    assert _verdict(text) == (*want, None)


def test_a_success_block_is_not_blamed_for_the_failure_in_the_block_before_it() -> None:
    line, want = FAILURES["xid79"]
    text = (
        f"[1] 10:00:00 [FAILURE] gpu-a-07 Exited with error code 1\n{line}\n"
        "[2] 10:00:01 [SUCCESS] gpu-a-08\nok\n"
        "[3] 10:00:01 [SUCCESS] gpu-a-09\nok\n"
    )
    assert _verdict(text) == (*want, "gpu-a-07")


def test_ansible_ok_lines_after_a_fatal_do_not_take_its_failure() -> None:
    line, want = FAILURES["illegal_address"]
    text = (
        f'fatal: [gpu-a-07]: FAILED! => {{"changed": true, "rc": 1, "stderr": "{line}"}}\n'
        "ok: [gpu-a-08]\nok: [gpu-a-09]\n"
    )
    assert _verdict(text) == (*want, "gpu-a-07")


def test_a_line_after_an_ansible_result_is_not_that_hosts() -> None:
    # default.py prints a result on its header's line, minimal.py's indented JSON ends at "}":
    # a line pasted after either is no longer the result's
    line, want = FAILURES["xid79"]
    one_line = 'fatal: [gpu-a-07]: FAILED! => {"changed": true, "rc": 1}\n...ignoring\n'
    indented = 'gpu-a-07 | FAILED! => {\n    "changed": true,\n    "rc": 1\n}\n'
    for text in (one_line, indented):
        assert _verdict(f"{text}{line}\n") == (*want, None), text


def test_a_title_between_dashed_rules_is_no_host() -> None:
    line, want = FAILURES["xid79"]
    text = f"{_SEP}\nSummary\n{_SEP}\n{line}\n"
    assert _verdict(text) == (*want, None)


def test_a_prompt_ends_the_block_and_its_own_lines_are_the_prompt_hosts() -> None:
    line, want = FAILURES["xid79"]
    text = f"{_SEP}\ngpu-a-07\n{_SEP}\nok\n[root@login-01 ~]# dmesg | tail -n 1\n{line}\n"
    assert _verdict(text) == (*want, "login-01")


def test_a_delegated_ansible_task_names_no_host() -> None:
    # "[gpu-a-07 -> 10.0.0.5]": the task ran on the delegate, not on the inventory host
    line, want = FAILURES["xid79"]
    text = f'fatal: [gpu-a-07 -> 10.0.0.5]: FAILED! => {{"rc": 1, "stdout": "{line}"}}\n'
    assert _verdict(text) == (*want, None)


def test_a_peers_failure_printed_in_a_block_names_no_node() -> None:
    # ncclRemoteError says a peer went away: the host that printed it is not the culprit,
    # inside a block as behind pdsh's prefix
    line = (
        "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/"
        "ProcessGroupNCCL.cpp:1970, remote process exited or there was a network error, NCCL "
        "version 2.19.3"
    )
    want = _verdict(line)
    assert want == ("interconnect", "unknown", None)
    for delivery in ("clush_b", "ansible_rc", "pssh_stderr", "clush_prefix"):
        assert _verdict(DELIVERIES[delivery]("gpu-a-07", line)) == want, delivery


@pytest.mark.parametrize("host", ["gpu-a-07", "node0123"])
def test_ansible_unreachable_names_the_host_ssh_could_not_reach(host: str) -> None:
    # the repo's ssh_connect_failed rule names the host ssh names; without ansible_host that
    # is the inventory name (an ansible_host address is named as the address: the same machine)
    msg = (
        "Failed to connect to the host via ssh: "
        f"ssh: connect to host {host} port 22: No route to host"
    )
    adhoc = (
        f"{host} | UNREACHABLE! => {{\n"
        f'    "changed": false,\n    "msg": "{msg}",\n    "unreachable": true\n}}\n'
    )
    playbook = (
        f'fatal: [{host}]: UNREACHABLE! => {{"changed": false, "msg": "{msg}", '
        '"unreachable": true}\n'
    )
    for text in (adhoc, playbook):
        assert _verdict(text) == ("node", "node", host), text


HEALTHY = (
    "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-5f2c1a7e-0b1d-4c8e-9a3f-1e2d3c4b5a69)",
    " 10:00:01 up 3 days,  2:11,  0 users,  load average: 0.00, 0.01, 0.05",
    "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024",
)


@pytest.mark.parametrize("delivery", list(DELIVERIES))
def test_healthy_output_in_blocks_reads_as_nothing(delivery: str) -> None:
    # pssh's "[FAILURE] host Exited with error code 1" header is itself read (the exit status,
    # test_explain_culprit_pssh.py): a healthy line adds nothing to what the delivery alone says
    alone = _verdict(DELIVERIES[delivery]("gpu-a-07", "ok"))
    assert alone[0] is None or delivery.startswith("pssh"), alone
    for line in HEALTHY:
        assert _verdict(DELIVERIES[delivery]("gpu-a-07", line)) == alone, line


# dcgm-exporter's exposition (NVIDIA/dcgm-exporter: each metric carries gpu, UUID, device,
# modelName and Hostname labels, the Hostname the node the exporter runs on, then any pod
# labels): the repo's dcgm reader already names the node from Hostname; pinned here for the
# host names of every convention, alone and gathered by clush -b
_DCGM_LABELS = (
    'gpu="{i}",UUID="GPU-5f2c1a7e-0b1d-4c8e-9a3f-1e2d3c4b5a6{i}",device="nvidia{i}",'
    'modelName="NVIDIA H100 80GB HBM3",Hostname="{host}"',
    'gpu="{i}",UUID="GPU-5f2c1a7e-0b1d-4c8e-9a3f-1e2d3c4b5a6{i}",pci_bus_id="00000000:3B:00.0",'
    'device="nvidia{i}",modelName="NVIDIA H100 80GB HBM3",Hostname="{host}",'
    'DCGM_FI_DRIVER_VERSION="550.54.15",container="",namespace="",pod=""',
)


@pytest.mark.parametrize("host", HOSTS)
@pytest.mark.parametrize("labels", range(len(_DCGM_LABELS)))
def test_dcgm_exporter_xid_names_its_hostname_label(host: str, labels: int) -> None:
    metric = (
        "# HELP DCGM_FI_DEV_XID_ERRORS Value of the last XID error encountered.\n"
        "# TYPE DCGM_FI_DEV_XID_ERRORS gauge\n"
        f"DCGM_FI_DEV_XID_ERRORS{{{_DCGM_LABELS[labels].format(i=3, host=host)}}} 79\n"
    )
    for text in (metric, f"{_SEP}\n{host}\n{_SEP}\n{metric}"):
        got = explain_text(text)
        assert (got.category, got.blame, got.node, got.xid) == ("gpu_hardware", "node", host, 79)
