"""Where an Ansible ad-hoc or `pssh -i` block ends with no prompt after it (issue #11: a wrong
node is worse than none).

The blocks as the tools print them:
- Ansible's minimal callback (ansible/ansible lib/ansible/plugins/callback/minimal.py
  _command_generic_msg): "%s | %s | rc=%s >>\\n", then stdout, stderr and msg run together, then
  one "\\n"; the command module strips both streams' trailing newlines (lib/ansible/modules/
  command.py), and a failed command's msg is "non-zero return code";
- parallel-ssh (krig/parallel-ssh psshlib/callbacks.py DefaultCallbacks.finished): "[%s] %s
  [FAILURE] %s %s" / "[%s] %s [SUCCESS] %s" (the sequence number, time.asctime()'s HH:MM:SS, the
  host, the failures: psshlib/task.py "Exited with error code %s"), then the host's stdout and
  "Stderr: " with its stderr, as they came.
Neither prints a blank line, so one after a block is the paste's (or the remote output's own):
no line after it is known to be the block host's. A line whose own convention names another host
(pdsh's "host: ", syslog's host field, srun's "srun: error: host: task N", NCCL's "host:pid:tid"
prefix) is no line of the block's either.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from correlator.explain.hosts_blocks import block_hosts

H, OTHER = "gpu-n07", "gpu-n09"
ECC = "RuntimeError: CUDA error: uncorrectable ECC error encountered\n"
XID = "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.\n"
FAILURES = {"ecc": ECC, "xid": XID}
UPTIME = " 10:00:01 up 3 days,  2:11,  0 users,  load average: 0.00, 0.01, 0.05\n"
_NOENT = "ls: cannot access '/scratch/ckpt': No such file or directory"
BLOCKS = {
    "ansible_failed": f"{H} | FAILED | rc=2 >>\n{_NOENT}non-zero return code\n",
    "ansible_changed": f"{H} | CHANGED | rc=0 >>\n{UPTIME}",
    "pssh_failure": f"[1] 12:00:00 [FAILURE] {H} Exited with error code 2\nStderr: {_NOENT}\n",
    "pssh_success": f"[2] 12:00:01 [SUCCESS] root@{H}:2222\n{UPTIME}",
}
# lines that name another host by their own convention, none of them a failure by itself
OTHERS = {
    "syslog": f"Jun  3 10:00:01 {OTHER} systemd[1]: Started Session 4 of user alice.\n",
    "nccl_prefix": f"{OTHER}:2345:2345 [0] NCCL INFO Bootstrap : Using ib0:10.0.0.2<0>\n",
    "pdsh": f"{OTHER}: [2024-06-03 10:00:01,000] INFO starting epoch 3\n"
    f"{OTHER}: [2024-06-03 10:00:02,000] INFO step 100\n",
}


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_a_blank_line_ends_an_ansible_or_pssh_block(block: str, failure: str) -> None:
    got = explain_text(BLOCKS[block] + "\n" + FAILURES[failure])
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", None), got.explanation


@pytest.mark.parametrize("other", sorted(OTHERS))
@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_a_line_naming_another_host_by_its_own_convention_ends_the_block(
    block: str, other: str
) -> None:
    got = explain_text(BLOCKS[block] + OTHERS[other] + ECC)
    assert got.node != H, got.explanation


@pytest.mark.parametrize("failure", sorted(FAILURES))
@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_a_failure_in_the_block_keeps_its_host_with_a_blank_line_after_it(
    block: str, failure: str
) -> None:
    got = explain_text(BLOCKS[block] + FAILURES[failure] + "\n$ \n")
    assert (got.blame, got.node) == ("node", H), got.explanation


@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_the_blocks_own_host_named_in_its_lines_does_not_end_it(block: str) -> None:
    # a remote syslog read on the block's own host names that host
    own = f"Jun  3 10:00:01 {H} systemd[1]: Started Session 4 of user alice.\n"
    got = explain_text(BLOCKS[block] + own + ECC)
    assert (got.blame, got.node) == ("node", H), got.explanation


def test_a_blank_line_ends_the_block_where_the_next_header_would_have() -> None:
    text = BLOCKS["pssh_failure"] + "\n" + ECC + BLOCKS["pssh_success"].replace(H, "gpu-n08")
    lines = text.split("\n")
    got = block_hosts(lines)
    assert got[:3] == [H, H, None]
    assert got[3] is None  # the ECC line after the blank one
    assert got[4:6] == ["gpu-n08", "gpu-n08"]


def test_an_ansible_json_result_is_unchanged_by_the_blank_line_rule() -> None:
    # "=> {" results run to their closing brace (json.dumps indent=4 prints no blank line)
    text = (
        f"{H} | UNREACHABLE! => {{\n"
        '    "changed": false,\n'
        f'    "msg": "Failed to connect to the host via ssh: ssh: connect to host {H} port 22: '
        'No route to host",\n'
        '    "unreachable": true\n'
        "}\n\n" + ECC
    )
    lines = text.split("\n")
    assert block_hosts(lines)[:5] == [H] * 5
    assert explain_text(text).node is None


def test_a_clush_block_is_left_as_it_was() -> None:
    # ClusterShell's gathered blocks are read as before: only Ansible's and pssh's are unspaced
    sep = "-" * 15
    lines = f"{sep}\n{H}\n{sep}\n{UPTIME}\n{ECC}".split("\n")
    assert block_hosts(lines)[4:6] == [H, H]


# a scheduler's or kubectl's table: its header as the tool prints it (SchedMD/slurm
# src/sacct/sacct.h DEFAULT_FIELDS, src/squeue/opts.c, src/sinfo/opts.c; kubernetes
# pkg/printers/internalversion/printers.go), then a row about another node, job or pod
TABLES = {
    "sacct": "JobID    JobName  Partition    Account  AllocCPUS      State ExitCode \n"
    "------------ ---------- ---------- ---------- ---------- ---------- -------- \n"
    "4242              train        gpu     ml-lab         64  COMPLETED      0:0 \n",
    "sacct_parsable": "JobID|JobName|Partition|Account|AllocCPUS|State|ExitCode|\n"
    "4242|train|gpu|ml-lab|64|COMPLETED|0:0|\n",
    "squeue": "             JOBID PARTITION     NAME     USER ST       TIME  NODES "
    "NODELIST(REASON)\n"
    f"              4243       gpu    train    alice  R       5:01      1 {OTHER}\n",
    "sinfo": "PARTITION AVAIL  TIMELIMIT  NODES  STATE NODELIST\n"
    f"gpu*         up   infinite      1   idle {OTHER}\n",
    "sinfo_n": f"NODELIST   NODES PARTITION STATE \n{OTHER}        1      gpu* idle  \n",
    "kubectl_pods": "NAME        READY   STATUS    RESTARTS   AGE\n"
    "trainer-0   1/1     Running   0  5m\n",
    "kubectl_nodes": f"NAME       STATUS   ROLES    AGE   VERSION\n"
    f"{OTHER}    Ready    <none>   3d    v1.28.3\n",
    "kubectl_events": "LAST SEEN   TYPE     REASON      OBJECT          MESSAGE\n"
    "2m          Normal   Scheduled   pod/trainer-0   Successfully assigned ml/trainer-0\n",
}


@pytest.mark.parametrize("table", sorted(TABLES))
@pytest.mark.parametrize("block", sorted(BLOCKS))
def test_a_scheduler_or_kubectl_table_ends_the_block(block: str, table: str) -> None:
    got = explain_text(BLOCKS[block] + TABLES[table] + ECC)
    assert (got.category, got.blame) == ("gpu_hardware", "node"), got.explanation
    assert got.node != H, got.explanation


@pytest.mark.parametrize("table", ["squeue", "kubectl_pods"])
def test_a_table_ends_a_clush_block_too(table: str) -> None:
    sep = "-" * 15
    got = explain_text(f"{sep}\n{H}\n{sep}\n{UPTIME}" + TABLES[table] + ECC)
    assert got.node != H, got.explanation
