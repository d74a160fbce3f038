"""A health check's failure or a node's drain is the outcome; the fault it names decides.

Formats read from the emitters' sources, never a corpus case:
- mej/nhc @9c4a38c0c9f4 `nhc`: die() logs "ERROR:  $NAME:  Health check failed:  $*", syslogs
  "Health check failed:  $*" under "$NAME[pid]", prints "$HOSTNAME:diagnosis:NHC: $*" for SGE;
  helpers/node-mark-offline drains with Reason="NHC: $*"; each check dies with
  "$FUNCNAME:  <message>" (scripts/*.nhc). nhcmain_run_checks: a check that fails without
  die() gets `log "Node Health Check failed.  Check $CHECK returned $RET"` and
  die "Check $CHECK returned $RET", which names no cause; check_nvsmi_healthmon logs
  nvidia-smi's output before its "Returned failure code %d" (scripts/csc_nvidia_smi.nhc).
- SchedMD/slurm src/api/node_info.c @008eefc6c1ae slurm_sprint_node_table: "State=%s ...",
  then "Reason=%s [%s@%s]" (the reason, its user and time).
- the driver's Xid line "NVRM: Xid (PCI:%s): %d, ..." read by NVIDIA's Xid catalog
  (correlator/rules/xid_catalog.json).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from correlator.explain import explain_text

HOST = "gpu-c-12"
_Wrap = Callable[[str], str]


def _scontrol(reason: str) -> str:
    return (
        f"NodeName={HOST} Arch=x86_64 CoresPerSocket=32\n"
        "   CPUAlloc=0 CPUEfctv=64 CPUTot=64 CPULoad=0.12\n"
        "   Gres=gpu:h100:8\n"
        "   State=IDLE+DRAIN ThreadsPerCore=1 TmpDisk=0 Weight=1 Owner=N/A MCS_label=N/A\n"
        "   Partitions=gpu\n"
        f"   Reason={reason} [root@2024-03-01T10:11:12]\n"
    )


# how NHC's output carries a check's message, and whether that output names the host
WRAPS: tuple[tuple[str, _Wrap, bool], ...] = (
    ("logfile", lambda m: f"ERROR:  nhc:  Health check failed:  {m}\n", False),
    ("syslog", lambda m: f"Nov 29 09:12:01 {HOST} nhc[20345]: Health check failed:  {m}\n", True),
    (
        "mark_offline",
        lambda m: f"/usr/libexec/nhc/node-mark-offline:  Marking idle {HOST} offline:  NHC: {m}\n",
        True,
    ),
    ("scontrol_reason", lambda m: _scontrol(f"NHC: {m}"), True),
    ("sge", lambda m: f"begin\n{HOST}:healthy:false\n{HOST}:diagnosis:NHC: {m}\nend\n", True),
)

GPU = ("gpu_hardware", "node")
NET = ("interconnect", "node")
NODE = ("node", "node")
# a site's check naming the fault it found in its own message: the fault's category decides
NAMED: tuple[tuple[str, str, tuple[str, str]], ...] = (
    ("xid_off_bus", "check_nv_healthmon:  Xid 79 on GPU 3", GPU),
    ("xid_dbe", "check_site_xid:  Xid 48 on GPU 1", GPU),
    ("ecc", "check_gpu_ecc:  GPU 2 has 3 uncorrectable ECC errors", GPU),
    ("remap_failed", "check_gpu_remap:  GPU 1 row remapping failure", GPU),
    ("off_bus", "check_site_gpu:  GPU 0000:3b:00.0 has fallen off the bus", GPU),
    ("nvlink_down", "check_site_nvlink:  NVLink down on GPU 0", NET),
    ("ib_port_down", "check_site_ib:  mlx5_0 port 1 is DOWN", NET),
    # the catalog's user-fault Xids stay as the catalog reads them (RESTART_APP: the program)
    ("xid_user_13", "check_site_xid:  Xid 13 on GPU 0", ("user_code", "job")),
    ("xid_user_43", "check_site_xid:  Xid 43 on GPU 0", ("user_code", "job")),
    # a consequence (Xid 45) or a message naming no recognised fault leaves the check's reading
    ("xid_consequence", "check_site_xid:  Xid 45 on GPU 0", NODE),
    ("fs_mount", "check_fs_mount:  /scratch not mounted", NODE),
    ("generic", "Check check_site_gpu returned 1", NODE),
)


def _params() -> list[object]:
    return [
        pytest.param(wrap(msg), want, HOST if names else None, id=f"{key}-{wkey}")
        for key, msg, want in NAMED
        for wkey, wrap, names in WRAPS
    ]


@pytest.mark.parametrize(("text", "want", "node"), _params())
def test_a_check_that_names_a_fault_reads_as_that_fault_on_the_node_it_drained(
    text: str, want: tuple[str, str], node: str | None
) -> None:
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == (*want, node), (text, got.explanation)


@pytest.mark.parametrize(
    ("reason", "want"),
    [
        pytest.param("maintenance", NODE, id="maintenance"),
        pytest.param("testing new BIOS", NODE, id="testing"),
        pytest.param("Xid 79 on GPU 3", GPU, id="xid"),
        pytest.param("GPU 2 uncorrectable ECC errors", GPU, id="ecc"),
    ],
)
def test_a_drain_reason_reads_as_the_fault_it_names_and_free_text_stays_the_nodes(
    reason: str, want: tuple[str, str]
) -> None:
    got = explain_text(_scontrol(reason))
    assert (got.category, got.blame, got.node) == (*want, HOST), got.explanation


def _syslog_check(host: str, check: str) -> str:
    return (
        f"Nov 29 09:12:01 {host} nhc[20345]: Node Health Check failed.  Check {check} returned 1\n"
        f"Nov 29 09:12:01 {host} nhc[20345]: Health check failed:  Check {check} returned 1\n"
    )


def _kernel_xid(host: str, code: int, msg: str) -> str:
    return f"Nov 29 09:11:58 {host} kernel: NVRM: Xid (PCI:0000:3b:00): {code}, pid=4242, {msg}\n"


REMAP = "Row Remapper: New row marked for remapping, reset gpu to activate."


def test_a_generic_check_failure_reads_as_the_fault_shown_beside_it_on_its_node() -> None:
    text = _kernel_xid(HOST, 63, REMAP) + _syslog_check(HOST, "check_site_xid")
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("gpu_hardware", "node", HOST)
    # the check's lines and the fault's line are all evidence of the one failure
    assert any("Xid (PCI" in line for line in got.evidence)
    assert any("returned 1" in line for line in got.evidence)


def test_a_generic_check_failure_alone_stays_a_node_fault() -> None:
    got = explain_text(_syslog_check(HOST, "check_site_xid"))
    assert (got.category, got.blame, got.node) == ("node", "node", HOST)


def test_a_fault_on_another_host_does_not_explain_a_generic_check_failure() -> None:
    text = _kernel_xid("gpu-d-03", 63, REMAP) + _syslog_check(HOST, "check_site_xid")
    got = explain_text(text)
    assert (got.category, got.blame, got.node) == ("node", "node", HOST)


def test_nvidia_smi_output_logged_before_its_failure_code_gives_the_check_its_cause() -> None:
    # check_nvsmi_healthmon logs nvidia-smi's own output, then dies with "Returned failure code"
    text = (
        '[17] - check_nvsmi_healthmon:  nvidia-smi:  "GPU 00000000:3B:00.0: Xid 94 seen"\n'
        "[17] - ERROR:  nhc:  Health check failed:  check_nvsmi_healthmon:  nvidia-smi:  "
        "Returned failure code 255\n"
    )
    got = explain_text(text)
    assert (got.category, got.blame) == GPU, got.explanation
    assert (explain_text(text.split("\n", 1)[1]).category, "alone") == ("node", "alone")
