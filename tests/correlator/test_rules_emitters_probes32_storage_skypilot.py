"""Probe set thirty-two (shared file systems and SkyPilot): the server a client lost, and capacity.

NFS: torvalds/linux net/sunrpc/clnt.c call_timeout "%s: server %s not responding, still trying" /
", timed out" (the RPC program: nfs, lockd, nfsacl, rpcbind, mount) and call_decode "%s: server %s
OK". Lustre: lustre/lustre-release lustre/ptlrpc/import.c @5748379d28 ("%s: Connection to %.*s (at
%s) was lost; in progress operations using this service will wait for recovery to complete",
"Connection restored to %s (at %s)", 0x167 "This client was evicted by %.*s") and client.c
@907f35db14 (ptlrpc_expire_one_request "Request sent has %s: [sent %lld/real %lld]" with "timed out
for slow reply", "timed out for sent delay" or "failed due to network error", the request's
"->import@NID"), lnet/klnds/o2iblnd/o2iblnd_cb.c @96d7dcf4e7 ("Timed out RDMA with %s (%lu): c: %u,
oc: %u, rc: %u"). The policy: a lost server is node/infra, and the server the line names is the
culprit, never the client that printed it; an eviction names a target, not a host, so the client
stays the host. SkyPilot: skypilot-org/skypilot sky/backends/cloud_vm_ray_backend.py @8f4c480ad2
("Failed to acquire resources in ...", "Failed to provision all possible launchable resources"),
sky/exceptions.py @34de707e78 (ResourcesUnavailableError): no capacity, like an unschedulable
pod, is scheduler/infra; sky/jobs/state.py @ba4a0d1f5f (ManagedJobStatus: FAILED_NO_RESOURCE the
clouds', FAILED_SETUP / FAILED_PRECHECKS the job's). Never a corpus case.
"""

from __future__ import annotations

import pytest

from correlator.explain import explain_text
from tests.correlator.emitter_probe import HOSTS, Fmt, check, params

INFRA = ("node", "infra")
_SYSLOG = ("{mon} {host} kernel: ", "{mon} {host} kernel: [{up}] ", "[{up}] ")
_SV = {
    "mon": ("Nov 29 10:00:01", "Mar  3 07:44:19"),
    "host": HOSTS,
    "up": ("123456.789012", "88.000113"),
}
_LUSTRE = "lustre/lustre-release lustre/ptlrpc/{}"
# (as the client prints the server, the host that names)
_NIDS = (
    ("10.0.0.5@o2ib", "10.0.0.5"),
    ("172.16.4.9@tcp", "172.16.4.9"),
    ("192.168.10.21@o2ib1", "192.168.10.21"),
    ("10.4.0.17@tcp0", "10.4.0.17"),
)

FORMATS = (
    Fmt(
        "sunrpc-not-responding",
        "torvalds/linux net/sunrpc/clnt.c",
        "{prog}: server {srv} not responding, {how}\n",
        {
            **_SV,
            "prog": ("nfs", "lockd", "nfsacl", "rpcbind"),
            "srv": ("nfs01", "10.20.0.5", "filer-02.cluster.example.org", "192.168.7.40"),
            "how": ("still trying", "timed out"),
        },
        INFRA,
        culprit="srv",
        prefixes=_SYSLOG,
    ),
    Fmt(
        "lustre-connection-lost",
        _LUSTRE.format("import.c@5748379d28"),
        "Lustre: {fs}-{tgt}-{kind}-ffff88103c0d5000: Connection to {fs}-{tgt} (at {nid}) was "
        "lost; in progress operations using this service will {then}\n",
        {
            **_SV,
            "fs": ("scratch", "lustre", "home"),
            "tgt": ("OST0004", "MDT0000"),
            "kind": ("osc", "mdc"),
            "nid": _NIDS,
            "then": ("wait for recovery to complete", "fail"),
        },
        INFRA,
        culprit="nid",
        prefixes=_SYSLOG,
    ),
    Fmt(
        "lustre-request-expired",
        _LUSTRE.format("client.c@907f35db14"),
        "Lustre: 3855:0:(client.c:2114:ptlrpc_expire_one_request()) @@@ Request sent has {how}: "
        "[sent 1456789/real 1456789]  req@ffff8801f0a2c000 x1523456/t0(0) o{op}->{fs}-OST0004-"
        "osc-ffff88103c0d5000@{nid}:28/4 lens 224/224 e 0 to 1 dl 1456796 ref 1 fl Rpc:XN/0/"
        "ffffffff rc 0/-1\n",
        {
            **_SV,
            "how": (
                "timed out for slow reply",
                "timed out for sent delay",
                "failed due to network error",
            ),
            "op": (400, 4, 101),
            "fs": ("scratch", "lustre"),
            "nid": _NIDS,
        },
        INFRA,
        culprit="nid",
        prefixes=_SYSLOG[:2],
    ),
    Fmt(
        "lnet-rdma-timeout",
        "lustre/lustre-release lnet/klnds/o2iblnd/o2iblnd_cb.c@96d7dcf4e7",
        "{lvl}: {pid}:0:(o2iblnd_cb.c:{line}:kiblnd_check_conns()) Timed out RDMA with {nid} "
        "({secs}): c: 0, oc: 0, rc: 8\n",
        {
            **_SV,
            "lvl": ("LNetError", "LNet"),
            "pid": (11, 3412),
            "line": (3410, 3335),
            "secs": (100, 52),
            "nid": _NIDS,
        },
        INFRA,
        culprit="nid",
        prefixes=_SYSLOG,
    ),
    Fmt(
        "lustre-evicted",
        _LUSTRE.format("import.c@5748379d28"),
        "LustreError: 167-0: {fs}-{tgt}-{kind}-ffff88103c0d5000: This client was evicted by "
        "{fs}-{tgt}; in progress operations using this service will fail.\n",
        {**_SV, "fs": ("scratch", "home"), "tgt": ("MDT0000", "OST0003"), "kind": ("mdc", "osc")},
        INFRA,
        culprit="host",
        prefixes=_SYSLOG[:2],
    ),
    Fmt(
        "sky-resources-unavailable",
        "skypilot-org/skypilot sky/backends/cloud_vm_ray_backend.py@8f4c480ad2",
        "{exc}{msg}\n",
        {
            "exc": (
                "sky.exceptions.ResourcesUnavailableError: ",
                "",
                "ResourcesUnavailableError: ",
            ),
            "msg": (
                "Failed to acquire resources in all zones in us-east-1. Try changing resource "
                "requirements or use another region.",
                "Failed to acquire resources in us-central1-a. Try changing resource requirements "
                "or use another zone.",
                "Failed to acquire resources in us-east-1a for {AWS(p4d.24xlarge)}. ",
                "Failed to acquire resources (CPUs, Memory) in context my-k8s-ctx for "
                "{Kubernetes({'H100': 8})}. ",
                "Failed to provision all possible launchable resources. Relax the task's resource "
                "requirements: 1x GCP({'A100-80GB': 8})",
            ),
        },
        ("scheduler", "infra"),
    ),
)


@pytest.mark.parametrize(("f", "text", "node"), params(FORMATS))
def test_a_storage_or_capacity_failure_reads_as_its_family_documents(
    f: Fmt, text: str, node: str | None
) -> None:
    check(f, text, node)


def test_a_lost_nfs_server_is_named_not_the_client_that_printed_it() -> None:
    got = explain_text(
        "Nov 29 10:00:01 gpu-a-07 kernel: nfs: server nfs01 not responding, still trying\n"
    )
    assert (got.category, got.blame, got.node) == ("node", "infra", "nfs01"), got.explanation


# `sky jobs queue`'s table (sky/jobs/utils.py format_job_table's columns); the STATUS column
# holds sky/jobs/state.py @ba4a0d1f5f's ManagedJobStatus; the NAME column is the job's, no host
_QUEUE = (
    "ID  TASK  NAME   RESOURCES   SUBMITTED  TOT. DURATION  JOB DURATION  #RECOVERIES  STATUS\n"
    "{id}   -     {name}  1x[{gpu}]  2 hrs ago  1h 3m          -             {rec}            "
    "{status}\n"
)


@pytest.mark.parametrize(
    ("status", "want"),
    [
        ("FAILED_NO_RESOURCE", ("scheduler", "infra")),
        ("FAILED_SETUP", ("user_code", "job")),
        ("FAILED_PRECHECKS", ("user_code", "job")),
        ("RUNNING", (None, "unknown")),
        ("SUCCEEDED", (None, "unknown")),
    ],
)
@pytest.mark.parametrize(
    ("name", "gpu", "rec"), [("train", "A100:8", 0), ("gpu-a-07", "H100:8", 2)]
)
def test_a_managed_jobs_status_reads_as_skypilot_documents_it_naming_no_host(
    status: str, want: tuple[str | None, str], name: str, gpu: str, rec: int
) -> None:
    got = explain_text(_QUEUE.format(id=3, name=name, gpu=gpu, rec=rec, status=status))
    assert (got.category, got.blame, got.node) == (*want, None), got.explanation


@pytest.mark.parametrize(
    "line",
    [
        "Nov 29 10:05:01 gpu-a-07 kernel: nfs: server nfs01 OK",
        "Nov 29 10:05:01 node0123 kernel: Lustre: scratch-OST0004-osc-ffff88103c0d5000: "
        "Connection restored to 10.0.0.5@o2ib (at 10.0.0.5@o2ib)",
        "I 11-29 10:00:01 provisioner.py:120] Launching on AWS us-east-1 (us-east-1a)",
        "I 11-29 10:00:01 cloud_vm_ray_backend.py:1520] Successfully provisioned or found existing "
        "VM.",
    ],
)
def test_an_informational_storage_or_skypilot_line_is_no_failure(line: str) -> None:
    assert explain_text(line + "\n").category is None
