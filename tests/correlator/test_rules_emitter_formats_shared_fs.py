"""Probe set twenty-eight, shared file systems: IBM Storage Scale (GPFS), BeeGFS, NFS and
Lustre clients on GPU nodes, alone and beside the job's own I/O error, read as documented.

Formats, each from its source (never a corpus case):
- GPFS (mmfs.log, or mmfs in syslog): 'Lost membership in cluster %s. Unmounting file
  systems.' (IBM Storage Scale 5.2.1, failures due to a network failure), '6027-650 [X] The
  mmfs daemon is shutting down abnormally.' and '6027-300 [N] mmfsd ready' (IBM's message
  pages), the cluster manager's 'Expelling: <ip> (<host> in <cluster>)' as a site's expulsion
  check reads it (DiamondLightSource/python-dlstbx src/dlstbx/cli/run_health_checks.py
  @d9d2bd89);
- BeeGFS's client module (ThinkParQ/beegfs @87d28c1a): printk_fhgfs 'beegfs: %s(%u): ' then
  MessagingTk.c 'Communication error: Node: %s (comm result: %lld; message type: %hu)' or
  FhgfsOpsCommKit.c 'Communication error in RECVDATA stage. Node: %s (recv result: %lld)', the
  node string being '<alias> [<type>:<numID>]'; 'Retrying communication with node: %s' is a
  NOTICE of a first retry;
- the kernel's NFS client (fs/nfs/client.c: 'nfs: server %s not responding, still trying' and
  'nfs: server %s OK') and Lustre's import.c ('This client was evicted by %s; in progress
  operations using this service will fail.'), already read by linux_kernel.json;
- CPython's OSError text '[Errno %d] %s: %r' with glibc's strerror (EIO, ESTALE, EDQUOT).

Labels (corpus README policy): a node the storage cluster expels or whose storage daemon dies is
the node's (node/node, on the node the line says failed); a client that lost its servers (NFS
not responding, Lustre eviction, GPFS lost membership, a BeeGFS communication error) is the
shared storage's (node/infra), the server the line names never being the culprit (probe set 32:
except the kernel's NFS and Lustre lines that name the server's host or NID); the job's
I/O error beside such a line takes that reading; a disk quota is the job's (user_code/job).
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text

STORAGE = ("node", "infra")
TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "train.py", line 88, in <module>\n'
    "    torch.save(state, path)\n"
)


def _verdict(text: str) -> tuple[str | None, str, str | None]:
    got = explain_text(text)
    return got.category, got.blame, got.node


def test_a_gpfs_expel_names_the_expelled_node_not_the_manager_that_logged_it() -> None:
    text = (
        "Nov 29 10:01:02 gpfs-mgr1 mmfs[4711]: Expelling: 10.4.1.23 (gpu-b03 in gpfs.example.org)\n"
    )
    assert _verdict(text) == ("node", "node", "gpu-b03")


def test_a_gpfs_expel_in_mmfs_log_reads_the_same() -> None:
    text = (
        "2026-11-29_10:01:02.123+0000: [I] Recovering nodes: 10.4.1.23\n"
        "2026-11-29_10:01:02.125+0000: [E] Expelling: 10.4.1.23 (gpu-b03 in gpfs.example.org)\n"
    )
    assert _verdict(text) == ("node", "node", "gpu-b03")


@pytest.mark.parametrize(
    "line",
    [
        "Mon Jun 25 16:11:21 2018: Lost membership in cluster remote.cluster. "
        "Unmounting file systems.",
        "Mon Jun 25 11:08:10 2018: Lost membership in cluster gpfsxx.kgn.ibm.com. "
        "Unmounting file system.",
    ],
)
def test_gpfs_lost_membership_is_the_storage_clusters(line: str) -> None:
    text = "Mon Jun 25 16:11:16 2018: Close connection to 89.116.94.81 k155n01\n" + line + "\n"
    assert _verdict(text) == (*STORAGE, None)


def test_gpfs_lost_membership_on_a_syslog_host_is_pinned_to_that_client() -> None:
    text = (
        "Nov 29 10:01:02 gpu-a17 mmfs[4711]: Lost membership in cluster gpfs.example.org. "
        "Unmounting file systems.\n"
    )
    assert _verdict(text) == (*STORAGE, "gpu-a17")


def test_the_gpfs_daemon_going_down_is_the_nodes() -> None:
    text = "Mon Jun 25 16:11:21 2018: 6027-650 [X] The mmfs daemon is shutting down abnormally.\n"
    assert _verdict(text)[:2] == ("node", "node")


@pytest.mark.parametrize(
    "text",
    [
        "Mon Jun 25 16:12:40 2018: 6027-300 [N] mmfsd ready\n",
        "Mon Jun 25 22:23:38.722 2018: Recovered 1 nodes.\n",
        "Nov 29 10:01:02 gpu-a17 kernel: nfs: server nas01 OK\n",
        "Nov 29 10:01:02 gpu-a17 kernel: beegfs: python(48211): Retrying communication with "
        "node: stor01 [storage:2]\n",
    ],
)
def test_healthy_or_transient_storage_lines_are_nothing_to_explain(text: str) -> None:
    assert explain_text(text).category is None


@pytest.mark.parametrize(
    "message",
    [
        "Communication error: Node: stor01 [storage:2] (comm result: -110; message type: 2011)",
        "Communication error in RECVDATA stage. Node: stor01 [storage:2] (recv result: -104)",
        "Communication error. Node: meta01 [meta:1]",
    ],
)
def test_a_beegfs_communication_error_is_the_storages_on_the_client(message: str) -> None:
    text = f"Nov 29 10:01:02 gpu-a17 kernel: beegfs: python(48211): {message}\n"
    assert _verdict(text) == (*STORAGE, "gpu-a17")


def test_a_beegfs_error_never_names_the_storage_server() -> None:
    text = (
        "beegfs: python(48211): Communication error: Node: stor01 [storage:2] (comm result: "
        "-110; message type: 2011)\n"
    )
    assert _verdict(text) == (*STORAGE, None)


# probe set 32: the kernel's NFS line names the server it lost (sunrpc's cl_server), which is then
# the culprit; Lustre's eviction names a target, not a host, and BeeGFS's node string an alias, so
# those stay on the client that printed them
@pytest.mark.parametrize(
    ("storage_line", "path", "node"),
    [
        ("nfs: server nas01 not responding, still trying", "/shared/ckpt/step_100.pt", "nas01"),
        (
            "LustreError: 167-0: lustre-OST0003-osc-ffff8c5c1d3a5000: This client was evicted "
            "by lustre-OST0003; in progress operations using this service will fail.",
            "/lustre/ckpt/step_100.pt",
            "gpu-a17",
        ),
        (
            "beegfs: python(48211): Communication error: Node: stor01 [storage:2] (comm result: "
            "-110; message type: 2011)",
            "/mnt/beegfs/ckpt/step_100.pt",
            "gpu-a17",
        ),
    ],
)
def test_the_jobs_io_error_beside_a_lost_file_server_is_the_storages(
    storage_line: str, path: str, node: str
) -> None:
    text = (
        f"Nov 29 10:01:02 gpu-a17 kernel: {storage_line}\n"
        + TRACEBACK
        + f"OSError: [Errno 5] Input/output error: '{path}'\n"
    )
    assert _verdict(text) == (*STORAGE, node)


def test_a_stale_handle_after_gpfs_lost_membership_is_the_storages() -> None:
    text = (
        "Mon Jun 25 16:11:21 2018: Lost membership in cluster gpfs.example.org. Unmounting "
        "file systems.\n"
        + TRACEBACK
        + "OSError: [Errno 116] Stale file handle: '/gpfs/ckpt/x.pt'\n"
    )
    assert _verdict(text) == (*STORAGE, None)


@pytest.mark.parametrize(
    "text",
    [
        "OSError: [Errno 122] Disk quota exceeded: '/lustre/home/u/ckpt.pt'\n",
        "Nov 29 10:01:02 gpu-a17 kernel: nfs: server nas01 OK\n"
        + TRACEBACK
        + "OSError: [Errno 122] Disk quota exceeded: '/shared/home/u/ckpt.pt'\n",
    ],
)
def test_a_disk_quota_is_the_jobs_even_on_a_shared_file_system(text: str) -> None:
    assert _verdict(text)[:2] == ("user_code", "job")
